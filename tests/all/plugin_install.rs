//! Installing plugins through the real `capstan` binary: consent, the
//! lockfile, integrity checks on every load, update diffs, grant/revoke,
//! remove, archives, signatures, and imports the manifest does not justify.
//!
//! The packages are written here: a `plugin.toml` around the first-party
//! `fs` component (installed under another name) or the `misbehave`
//! fixture.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;

use support::{Env, fixture, fs_component, install, lock, sha256, stderr, stdout};

const READ_ONLY: &str = r#"
[capabilities]
fs = [{ path = "$WORKSPACE", access = "read" }]
env = ["TZ"]
"#;

/// Writes a package folder `files` (version `version`) holding `wasm` as
/// `tool.wasm` and a plugin.toml with `capabilities`.
fn package(root: &Path, version: &str, wasm: &Path, capabilities: &str) -> PathBuf {
    let dir = root.join(format!("files-{version}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(wasm, dir.join("tool.wasm")).unwrap();
    let manifest = format!(
        "name = \"files\"\nversion = \"{version}\"\ndescription = \"File tools, installed\"\nauthors = [\"Test <test@example.com>\"]\ncomponents = [\"tool.wasm\"]\n{capabilities}"
    );
    std::fs::write(dir.join("plugin.toml"), manifest).unwrap();
    dir
}

fn plugin(env: &Env, args: &[&str]) -> Output {
    env.capstan().arg("plugin").args(args).output().unwrap()
}

/// The store folder of the installed `files` plugin.
fn store_folder(env: &Env) -> PathBuf {
    let dir = env.home.path().join("plugins/store/files");
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    assert_eq!(entries.len(), 1);
    entries.pop().unwrap().path()
}

/// The audit log's `plugin_refused` records, as (stage, reason).
fn refusals(env: &Env) -> Vec<(String, String)> {
    let text =
        std::fs::read_to_string(env.home.path().join("audit/audit.jsonl")).unwrap_or_default();
    text.lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|record| record["kind"] == "plugin_refused")
        .map(|record| {
            assert_eq!(record["plugin"], "files", "{record}");
            (
                record["call_id"].as_str().unwrap().to_string(),
                record["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn install_shows_the_request_records_the_lock_and_runs_under_the_grants() {
    let env = Env::new();
    let src = package(env.outside.path(), "0.1.0", &fs_component(), READ_ONLY);
    let out = install(&env, &src);
    let said = stdout(&out);
    assert!(
        said.starts_with("installed files 0.1.0 (unsigned): 2 files, ") && said.ends_with("iB\n"),
        "{said}"
    );
    let err = stderr(&out);
    assert!(err.contains("files 0.1.0 (unsigned) wants:"), "{err}");
    assert!(err.contains("files    the workspace (read-only)"), "{err}");
    assert!(err.contains("env      TZ"), "{err}");
    assert!(err.contains("network  none"), "{err}");
    assert!(err.contains("component [1/1] tool.wasm"), "{err}");

    let lock = lock(&env);
    assert!(lock.contains("[plugins.files]"), "{lock}");
    assert!(lock.contains(&sha256(&fs_component())), "{lock}");
    assert!(lock.contains("signer = \"unsigned\""), "{lock}");

    let list = plugin(&env, &["list"]);
    assert!(stdout(&list).contains("files"), "{}", stdout(&list));
    assert!(stdout(&list).contains("0.1.0"));

    let info = plugin(&env, &["info", "files"]);
    let text = stdout(&info);
    assert!(info.status.success(), "{}", stderr(&info));
    assert!(
        text.contains(&format!(
            "tool.wasm  sha256 {}  exports tool",
            sha256(&fs_component())
        )),
        "{text}"
    );
    assert!(text.contains("files.read  read-only"), "{text}");

    // It reads the workspace ...
    env.write("a.txt", "hello\n");
    let out = env
        .call("files.read", r#"{"path":"a.txt"}"#, &[])
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("hello"));
    // ... but was granted it read-only, so --allow-write does not let it write.
    let out = env
        .call(
            "files.write",
            r#"{"path":"b.txt","content":"x"}"#,
            &["--allow-write"],
        )
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(!env.ws.path().join("b.txt").exists());
    // Its calls are audited.
    let audit = std::fs::read_to_string(env.home.path().join("audit/audit.jsonl")).unwrap();
    assert!(audit.contains("\"plugin\":\"files\""), "{audit}");
    assert!(
        audit.contains(r#""kind":"env_read","names":["TZ"]"#),
        "{audit}"
    );
    assert!(
        audit.contains(r#""allowed":true,"#) && audit.contains(r#""path":"a.txt""#),
        "{audit}"
    );
    assert!(audit.contains(r#""allowed":false,"#), "{audit}");
}

#[test]
fn installing_the_same_content_again_changes_nothing() {
    let env = Env::new();
    let src = package(env.outside.path(), "0.1.0", &fs_component(), READ_ONLY);
    install(&env, &src);
    let before = lock(&env);
    let out = install(&env, &src);
    assert!(stdout(&out).contains("nothing to do"), "{}", stdout(&out));
    assert_eq!(lock(&env), before);
}

#[test]
fn without_a_terminal_or_yes_nothing_is_installed() {
    let env = Env::new();
    let src = package(env.outside.path(), "0.1.0", &fs_component(), READ_ONLY);
    let out = plugin(&env, &["install", src.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    assert!(stderr(&out).contains("pass --yes"), "{}", stderr(&out));
    assert!(!lock(&env).contains("[plugins.files]"));
    assert!(!env.home.path().join("plugins/store/files").exists());
}

#[test]
fn a_tampered_component_is_refused_naming_the_file() {
    let env = Env::new();
    let src = package(env.outside.path(), "0.1.0", &fs_component(), READ_ONLY);
    install(&env, &src);
    let wasm = store_folder(&env).join("tool.wasm");
    let mut bytes = std::fs::read(&wasm).unwrap();
    bytes.extend_from_slice(b"\0\0\0\0");
    std::fs::write(&wasm, bytes).unwrap();
    env.write("a.txt", "hello\n");
    let out = env
        .call("files.read", r#"{"path":"a.txt"}"#, &[])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("tool.wasm") && err.contains("changed"),
        "{err}"
    );
    assert!(err.contains("capstan plugin install"), "{err}");
    let recorded = refusals(&env);
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0].0, "load");
    assert!(recorded[0].1.contains("tool.wasm"), "{recorded:?}");
    // Installing from the source again restores it.
    let out = install(&env, &src);
    assert!(stdout(&out).contains("restored"), "{}", stdout(&out));
    let out = env
        .call("files.read", r#"{"path":"a.txt"}"#, &[])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_widened_manifest_needs_consent_through_update() {
    let env = Env::new();
    let src = package(env.outside.path(), "0.1.0", &fs_component(), READ_ONLY);
    install(&env, &src);
    let wider = format!("{READ_ONLY}net = [\"https://api.example.com\"]\n");
    let src2 = package(env.outside.path(), "0.2.0", &fs_component(), &wider);

    // install does not replace another version.
    let out = plugin(&env, &["install", src2.to_str().unwrap(), "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("capstan plugin update"),
        "{}",
        stderr(&out)
    );

    // update without consent changes nothing.
    let out = plugin(&env, &["update", src2.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("+ network  https://api.example.com"),
        "{}",
        stderr(&out)
    );
    assert!(lock(&env).contains("version = \"0.1.0\""));

    let out = plugin(&env, &["update", src2.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("updated files 0.1.0 -> 0.2.0"), "{text}");
    assert!(
        text.contains("+ network  https://api.example.com"),
        "{text}"
    );
    assert!(lock(&env).contains("https://api.example.com"));
    // The old version's folder is gone.
    store_folder(&env);
}

#[test]
fn a_manifest_asking_more_than_the_lock_grants_does_not_run() {
    let env = Env::new();
    let src = package(env.outside.path(), "0.1.0", &fs_component(), READ_ONLY);
    install(&env, &src);
    // Widen the stored manifest and make its recorded hash match, as if
    // the lock had been rewritten too: the manifest check still stops it.
    let manifest = store_folder(&env).join("plugin.toml");
    let old_hash = sha256(&manifest);
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("access = \"read\"", "access = \"read-write\""),
    )
    .unwrap();
    let lock_path = env.home.path().join("plugins/capstan.lock");
    let lock = std::fs::read_to_string(&lock_path).unwrap();
    std::fs::write(&lock_path, lock.replace(&old_hash, &sha256(&manifest))).unwrap();
    env.write("a.txt", "hello\n");
    let out = env
        .call("files.read", r#"{"path":"a.txt"}"#, &[])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("requests more than you agreed to"), "{err}");
    assert!(err.contains("capstan plugin update"), "{err}");
    assert!(
        refusals(&env)
            .iter()
            .any(|(stage, why)| stage == "load" && why.contains("more than you agreed to")),
        "{:?}",
        refusals(&env)
    );
}

#[test]
fn a_narrower_update_proceeds_without_asking_and_shows_the_diff() {
    let env = Env::new();
    let src = package(env.outside.path(), "0.1.0", &fs_component(), READ_ONLY);
    install(&env, &src);
    let narrower = "\n[capabilities]\nfs = [{ path = \"$WORKSPACE\", access = \"read\" }]\n";
    let src2 = package(env.outside.path(), "0.1.1", &fs_component(), narrower);
    let out = plugin(&env, &["update", src2.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("- env      TZ"), "{text}");
    assert!(text.contains("without asking"), "{text}");
}

#[test]
fn revoke_and_grant_change_what_calls_get() {
    let env = Env::new();
    let src = package(env.outside.path(), "0.1.0", &fs_component(), READ_ONLY);
    install(&env, &src);
    env.write("a.txt", "hello\n");
    let out = plugin(&env, &["revoke", "files", "fs", "$WORKSPACE"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let info = stdout(&plugin(&env, &["info", "files"]));
    assert!(info.contains("requested but revoked"), "{info}");
    let out = env
        .call("files.read", r#"{"path":"a.txt"}"#, &[])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "read without the workspace: {}",
        stdout(&out)
    );
    assert!(!stdout(&out).contains("hello"));

    // Only what the manifest requests can be granted.
    let out = plugin(&env, &["grant", "files", "net", "https://evil.example"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is not requested by the plugin's manifest"),
        "{}",
        stderr(&out)
    );
    let out = plugin(&env, &["revoke", "files", "env", "HOME"]);
    assert_eq!(out.status.code(), Some(2));

    let out = plugin(&env, &["grant", "files", "fs", "$WORKSPACE"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env
        .call("files.read", r#"{"path":"a.txt"}"#, &[])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn remove_cleans_the_store_lock_and_compile_cache() {
    let env = Env::new();
    let cache = tempfile::tempdir().unwrap();
    let src = package(env.outside.path(), "0.1.0", &fs_component(), READ_ONLY);
    let out = env
        .capstan()
        .env("CAPSTAN_CACHE_DIR", cache.path())
        .args(["plugin", "install", src.to_str().unwrap(), "--yes"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let hash = sha256(&fs_component());
    let cached = |dir: &Path| {
        std::fs::read_dir(dir.join("compiled"))
            .map(|entries| {
                entries
                    .flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with(&hash))
            })
            .unwrap_or(false)
    };
    assert!(cached(cache.path()), "install precompiles");
    // The built-in fs plugin shares this component, so its compiled form
    // stays; a component of its own is removed. Use the fixture for that.
    let out = env
        .capstan()
        .env("CAPSTAN_CACHE_DIR", cache.path())
        .args(["plugin", "remove", "files"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("kept its data folder"),
        "{}",
        stdout(&out)
    );
    assert!(!env.home.path().join("plugins/store/files").exists());
    assert!(!lock(&env).contains("[plugins.files]"));
    assert!(cached(cache.path()), "the built-in's compiled form is kept");

    let misbehave = fixture("misbehave");
    let net = "\n[capabilities]\nnet = [\"https://api.example.com\"]\n";
    let src = package(env.outside.path(), "0.3.0", &misbehave, net);
    let out = env
        .capstan()
        .env("CAPSTAN_CACHE_DIR", cache.path())
        .args(["plugin", "install", src.to_str().unwrap(), "--yes"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let hash = sha256(&misbehave);
    let has = |dir: &Path| {
        std::fs::read_dir(dir.join("compiled"))
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(&hash))
    };
    assert!(has(cache.path()));
    let out = env
        .capstan()
        .env("CAPSTAN_CACHE_DIR", cache.path())
        .args(["plugin", "remove", "files", "--purge"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!has(cache.path()), "remove deletes the compiled component");
    assert!(!env.home.path().join("plugins/data/files").exists());
}

/// Writes a .tar.gz of `(path, bytes)` entries, names written raw.
fn tarball(path: &Path, entries: &[(&str, &[u8])]) {
    let file = std::fs::File::create(path).unwrap();
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    let mut builder = tar::Builder::new(gz);
    for (name, data) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        header.set_cksum();
        builder.append(&header, *data).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap();
}

#[test]
fn a_tarball_installs_and_one_with_dotdot_is_refused() {
    let env = Env::new();
    let src = package(env.outside.path(), "0.1.0", &fs_component(), READ_ONLY);
    let manifest = std::fs::read(src.join("plugin.toml")).unwrap();
    let wasm = std::fs::read(src.join("tool.wasm")).unwrap();
    let archive = env.outside.path().join("files-0.1.0.tar.gz");
    tarball(
        &archive,
        &[("files/plugin.toml", &manifest), ("files/tool.wasm", &wasm)],
    );
    let out = install(&env, &archive);
    assert!(
        stdout(&out).contains("installed files 0.1.0"),
        "{}",
        stdout(&out)
    );
    assert!(lock(&env).contains("files-0.1.0.tar.gz"));

    let evil = env.outside.path().join("evil.tar.gz");
    tarball(
        &evil,
        &[("plugin.toml", &manifest), ("../escaped.txt", b"gotcha")],
    );
    let out = plugin(&env, &["install", evil.to_str().unwrap(), "--yes"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("../escaped.txt") && err.contains("`..`"),
        "{err}"
    );
    assert!(!env.home.path().join("plugins/escaped.txt").exists());
    assert!(!env.home.path().join("plugins/staging/escaped.txt").exists());
}

#[test]
fn an_import_the_manifest_does_not_justify_is_refused_naming_it() {
    let env = Env::new();
    // misbehave opens TCP sockets, so it imports wasi:sockets.
    let src = package(
        env.outside.path(),
        "0.1.0",
        &fixture("misbehave"),
        READ_ONLY,
    );
    let out = plugin(&env, &["install", src.to_str().unwrap(), "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("imports `wasi:sockets/"), "{err}");
    assert!(err.contains("requests no network access"), "{err}");
    assert!(!lock(&env).contains("[plugins.files]"));
    let recorded = refusals(&env);
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0].0, "install");
    assert!(recorded[0].1.contains("wasi:sockets/"), "{recorded:?}");
}

#[test]
fn a_bad_manifest_is_refused_with_field_and_line() {
    let env = Env::new();
    let dir = env.outside.path().join("bad");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fs_component(), dir.join("tool.wasm")).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        "name = \"files\"\nversion = 3\ncomponents = [\"tool.wasm\"]\n",
    )
    .unwrap();
    let out = plugin(&env, &["install", dir.to_str().unwrap(), "--yes"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("plugin.toml"), "{err}");
    assert!(err.contains("`version` at line 2"), "{err}");
}

/// A capability kind capstan does not know is refused by name and line,
/// never read as another kind, and nothing is installed or granted.
#[test]
fn an_unknown_capability_kind_is_refused_by_name_and_line() {
    let env = Env::new();
    let src = package(
        env.outside.path(),
        "0.1.0",
        &fs_component(),
        "\n[capabilities]\nnet = [\"https://api.example.com\"]\nsockets = [{ kind = \"tcp\", port = 22 }]\n",
    );
    let out = plugin(&env, &["install", src.to_str().unwrap(), "--yes"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(
            "unknown key `sockets` in [capabilities] at line 9; known keys: fs, net, env, secrets, exec"
        ),
        "{err}"
    );
    assert!(!lock(&env).contains("files"), "{}", lock(&env));
    assert!(!env.home.path().join("plugins/store/files").exists());
}

#[test]
fn signatures_name_a_trusted_publisher_and_bad_ones_are_refused() {
    use capstan::plugin::signature::{SIGNATURE_FILE, SecretKey, sign};
    let env = Env::new();
    let alice = SecretKey::from_seed([7; 32], *b"alice-01");
    let mallory = SecretKey::from_seed([9; 32], *b"mallory1");
    std::fs::write(
        env.home.path().join("config.toml"),
        format!(
            "[[trusted_publishers]]\nname = \"Alice\"\nkey = \"{}\"\n",
            alice.public_key("Alice").to_base64()
        ),
    )
    .unwrap();
    let src = package(env.outside.path(), "0.1.0", &fs_component(), READ_ONLY);
    let listing = capstan::plugin::store::hash_package(&src)
        .unwrap()
        .listing();
    let signed = |key: &SecretKey| sign(listing.as_bytes(), key, "files 0.1.0");

    // A key nobody trusts: refused, saying which key and how to trust it.
    std::fs::write(src.join(SIGNATURE_FILE), signed(&mallory)).unwrap();
    let out = plugin(&env, &["install", src.to_str().unwrap(), "--yes"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("trusted_publishers"),
        "{}",
        stderr(&out)
    );
    assert!(lock(&env).is_empty() || !lock(&env).contains("[plugins.files]"));

    // Alice's signature over different content: refused.
    std::fs::write(
        src.join(SIGNATURE_FILE),
        sign(b"0000  other.wasm\n", &alice, "files 0.1.0"),
    )
    .unwrap();
    let out = plugin(&env, &["install", src.to_str().unwrap(), "--yes"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("signature cannot be accepted"),
        "{}",
        stderr(&out)
    );

    // Alice's signature over this package: installed, and said so.
    std::fs::write(src.join(SIGNATURE_FILE), signed(&alice)).unwrap();
    let out = install(&env, &src);
    assert!(stdout(&out).contains("signed by Alice"), "{}", stdout(&out));
    assert!(lock(&env).contains("signed by Alice"), "{}", lock(&env));
}

/// A one-request-at-a-time HTTP server on 127.0.0.1 that answers 200 and
/// records each request's first line.
fn serve() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = std::io::BufReader::new(&stream);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
            }
            log.lock().unwrap().push(line.trim_end().to_string());
            let _ = (&stream)
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        }
    });
    (port, seen)
}

#[test]
fn an_installed_plugin_reaches_its_granted_origin_only_and_it_is_audited() {
    let env = Env::new();
    let (granted, granted_seen) = serve();
    let (other, other_seen) = serve();
    let dir = env.outside.path().join("netty");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixture("hostile"), dir.join("tool.wasm")).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        format!(
            "name = \"netty\"\nversion = \"1.0.0\"\ndescription = \"Sends requests\"\ncomponents = [\"tool.wasm\"]\n\n[capabilities]\nnet = [\"http://127.0.0.1:{granted}\"]\n"
        ),
    )
    .unwrap();
    let out = plugin(&env, &["install", dir.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("network  http://127.0.0.1:{granted}")),
        "{}",
        stderr(&out)
    );

    let get = |port: u16| {
        let input = format!(r#"{{"url":"http://127.0.0.1:{port}/forecast?city=Oslo"}}"#);
        env.call("netty.http-get", &input, &[]).output().unwrap()
    };
    let out = get(granted);
    assert!(out.status.success(), "{}", stderr(&out));
    let answer: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(answer["status"], 200, "{answer}");
    assert_eq!(answer["body"], "ok", "{answer}");
    assert_eq!(
        *granted_seen.lock().unwrap(),
        ["GET /forecast?city=Oslo HTTP/1.1"]
    );

    let out = get(other);
    assert!(
        stdout(&out).contains("HttpRequestDenied"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(other_seen.lock().unwrap().is_empty());

    let audit = std::fs::read_to_string(env.home.path().join("audit/audit.jsonl")).unwrap();
    let records: Vec<serde_json::Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sent: Vec<_> = records
        .iter()
        .filter(|r| r["kind"] == "http_sent")
        .collect();
    assert_eq!(sent.len(), 1, "{audit}");
    assert_eq!(sent[0]["plugin"], "netty");
    assert_eq!(sent[0]["status"], 200);
    assert_eq!(
        sent[0]["url"],
        format!("http://127.0.0.1:{granted}/forecast"),
        "the query is left out"
    );
    let refused: Vec<_> = records
        .iter()
        .filter(|r| r["kind"] == "http_refused")
        .collect();
    assert_eq!(refused.len(), 1, "{audit}");
    assert!(
        refused[0]["url"]
            .as_str()
            .unwrap()
            .contains(&other.to_string()),
        "{audit}"
    );
}

#[test]
fn socket_imports_replaced_by_trapping_stubs_install_without_a_network_request() {
    use capstan::scaffold::socket_stubs::{socket_imports, stub_socket_imports};
    let env = Env::new();
    // misbehave opens TCP sockets, so it imports wasi:sockets, as every
    // component built with componentize-py does.
    let original = std::fs::read(fixture("misbehave")).unwrap();
    let before = socket_imports(&original).unwrap();
    assert!(
        before
            .iter()
            .any(|name| name.starts_with("wasi:sockets/tcp")),
        "{before:?}"
    );
    let stubbed = stub_socket_imports(&original).unwrap().unwrap();
    assert_eq!(socket_imports(&stubbed).unwrap(), Vec::<String>::new());
    assert!(stub_socket_imports(&stubbed).unwrap().is_none());
    let wasm = env.outside.path().join("stubbed.wasm");
    std::fs::write(&wasm, &stubbed).unwrap();

    let src = package(env.outside.path(), "0.1.0", &wasm, READ_ONLY);
    install(&env, &src);
    // Its other tools work as before.
    let out = env
        .capstan()
        .args(["tool", "call", "files.chatty", r#"{"message":"hi"}"#])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "done");
    // A socket call stops at the stub, and nothing is reached.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let out = env
        .capstan()
        .args(["tool", "call", "files.connect"])
        .arg(format!("{{\"path\":\"{address}\"}}"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(
        listener.accept().is_err(),
        "the plugin reached the listener"
    );
}

// ------------------------------------------- one broken plugin, not all

/// Writes package `name` holding `wasm` as `tool.wasm`, with `extra` after
/// the manifest's fields, in `root`.
fn named_package(root: &Path, name: &str, wasm: &Path, extra: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(wasm, dir.join("tool.wasm")).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        format!(
            "name = \"{name}\"\nversion = \"0.1.0\"\ndescription = \"Test plugin {name}\"\ncomponents = [\"tool.wasm\"]\n{extra}"
        ),
    )
    .unwrap();
    dir
}

#[test]
fn plugins_that_cannot_be_used_are_unavailable_and_the_session_runs() {
    use support::mock_model::{Answer, MockModel, Reply};
    let env = Env::new();
    let outside = env.outside.path().canonicalize().unwrap();
    // One plugin that works ...
    install(
        &env,
        &named_package(&outside, "files", &fs_component(), READ_ONLY),
    );
    // ... one whose secret is not set ...
    install(
        &env,
        &named_package(
            &outside,
            "weather",
            &fs_component(),
            "[capabilities]\nnet = [\"https://api.weather.example\"]\nsecrets = [{ name = \"WEATHER_KEY\", header = \"X-Key\", hosts = [\"api.weather.example\"] }]\n",
        ),
    );
    // ... one whose granted folder was deleted ...
    let notes_dir = outside.join("notes-folder");
    std::fs::create_dir_all(&notes_dir).unwrap();
    install(
        &env,
        &named_package(
            &outside,
            "notes",
            &fs_component(),
            &format!(
                "[capabilities]\nfs = [{{ path = \"{}\", access = \"read\" }}]\n",
                notes_dir.display()
            ),
        ),
    );
    std::fs::remove_dir_all(&notes_dir).unwrap();
    // ... one whose describe is malformed ...
    install(
        &env,
        &named_package(&outside, "broken", &fixture("bad-describe"), ""),
    );
    // ... and one whose installed file was changed.
    install(
        &env,
        &named_package(&outside, "tampered", &fs_component(), READ_ONLY),
    );
    let store = env.home.path().join("plugins/store/tampered");
    let folder = std::fs::read_dir(store)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(folder.join("tool.wasm")).unwrap();
    bytes.extend_from_slice(b"\0\0\0\0");
    std::fs::write(folder.join("tool.wasm"), bytes).unwrap();

    let expect_warnings = |err: &str| {
        for (plugin, missing, fix) in [
            (
                "weather",
                "WEATHER_KEY",
                "capstan plugin revoke weather secret WEATHER_KEY",
            ),
            (
                "notes",
                notes_dir.to_str().unwrap(),
                "capstan plugin revoke notes fs",
            ),
            ("broken", "Not A Name", "capstan plugin update"),
            (
                "tampered",
                "has changed since it was installed",
                "capstan plugin install",
            ),
        ] {
            let line = err
                .lines()
                .find(|l| l.contains(&format!("plugin {plugin} is unavailable")))
                .unwrap_or_else(|| panic!("no warning about {plugin}:\n{err}"));
            assert!(line.contains(missing), "{line}");
            assert!(line.contains(fix), "{line}");
        }
        assert!(!err.contains("plugin files is unavailable"), "{err}");
    };

    // A session: it runs, warns, and the model is offered no tool of the
    // unavailable plugins, and every tool of the others.
    let mock = MockModel::start(vec![Reply::sse(Answer::text("Hello there.").anthropic())]);
    let out = env
        .anthropic_session(&mock.url(), "sk-ant-test", "mock-model", "hello")
        .env_remove("WEATHER_KEY")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("Hello there."), "{}", stdout(&out));
    expect_warnings(&stderr(&out));
    let received = mock.received();
    assert_eq!(received.len(), 1);
    let tools: Vec<String> = received[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert!(tools.contains(&"files__read".to_string()), "{tools:?}");
    assert!(tools.contains(&"fs__read".to_string()), "{tools:?}");
    for gone in ["weather__", "notes__", "broken__", "tampered__"] {
        assert!(!tools.iter().any(|t| t.starts_with(gone)), "{tools:?}");
    }

    // `tool list` lists the others and warns the same way.
    let out = env
        .capstan()
        .args(["tool", "list"])
        .env_remove("WEATHER_KEY")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let list = stdout(&out);
    assert!(list.contains("files.read"), "{list}");
    assert!(list.contains("fs.read"), "{list}");
    assert!(
        !list.contains("weather.") && !list.contains("notes."),
        "{list}"
    );
    let err = stderr(&out);
    for plugin in ["weather", "notes", "broken", "tampered"] {
        assert!(
            err.contains(&format!("plugin {plugin} is unavailable")),
            "{err}"
        );
    }

    // `plugin list` shows which are unavailable, and why.
    let out = plugin(&env, &["list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let list = stdout(&out);
    let status = |name: &str| {
        let lines: Vec<&str> = list.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with(&format!("{name} ")))
            .unwrap();
        lines
            .get(at + 1)
            .filter(|l| l.trim_start().starts_with("unavailable:"))
            .map(|l| l.to_string())
    };
    assert!(status("files").is_none(), "{list}");
    assert!(status("weather").unwrap().contains("WEATHER_KEY"), "{list}");
    assert!(status("notes").unwrap().contains("notes-folder"), "{list}");
    assert!(status("tampered").unwrap().contains("changed"), "{list}");

    // Setting the secret makes the plugin available again.
    let out = env
        .capstan()
        .args(["tool", "list"])
        .env("WEATHER_KEY", "k-123")
        .output()
        .unwrap();
    assert!(stdout(&out).contains("weather.read"), "{}", stdout(&out));
}

#[test]
fn plugins_shows_unavailable_plugins_in_the_interactive_session() {
    use support::mock_model::MockModel;
    let env = Env::new();
    let outside = env.outside.path().canonicalize().unwrap();
    install(
        &env,
        &named_package(
            &outside,
            "weather",
            &fs_component(),
            "[capabilities]\nnet = [\"https://api.weather.example\"]\nsecrets = [{ name = \"WEATHER_KEY\", header = \"X-Key\", hosts = [\"api.weather.example\"] }]\n",
        ),
    );
    let mock = MockModel::start(Vec::new());
    // The interactive session needs a terminal: util-linux `script` gives
    // it one and types the lines.
    let mut cmd = assert_cmd::Command::new("script");
    for var in support::MODEL_VARS {
        cmd.env_remove(var);
    }
    let session = format!(
        "{} --base-url {} --model mock-model",
        env!("CARGO_BIN_EXE_capstan"),
        mock.url()
    );
    let out = cmd
        .current_dir(env.ws.path())
        .env("CAPSTAN_HOME", env.home.path())
        .env("HOME", env.home.path())
        .env("CAPSTAN_CACHE_DIR", support::shared_compile_cache())
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("NO_COLOR", "1")
        .env_remove("WEATHER_KEY")
        .args(["-qec", &session, "/dev/null"])
        .write_stdin("/plugins\n/exit\n")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let shown = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}{}", stderr(&out));
    assert!(shown.contains("plugin weather is unavailable"), "{shown}");
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("weather  unavailable:") && l.contains("WEATHER_KEY")),
        "{shown}"
    );
    assert!(
        shown.lines().any(|l| l.starts_with("fs  sha256")),
        "{shown}"
    );
    // A tool the model is not offered is listed as off, saying why.
    assert!(
        shown
            .lines()
            .any(|l| l.trim_start().starts_with("web.search")
                && l.contains("off")
                && l.contains("not configured — add [web.search]")),
        "{shown}"
    );
    assert!(mock.received().is_empty());
}

// --------------------------------------------------- small, early, audited

/// The files of the installed plugin `name` in the store, as sorted
/// relative paths.
fn stored_files(env: &Env, name: &str) -> Vec<String> {
    let store = env.home.path().join("plugins/store").join(name);
    let folder = std::fs::read_dir(store)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut found = Vec::new();
    let mut stack = vec![folder.clone()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(at).unwrap().flatten() {
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                let rel = entry.path().strip_prefix(&folder).unwrap().to_path_buf();
                found.push(rel.to_str().unwrap().to_string());
            }
        }
    }
    found.sort();
    found
}

#[test]
fn a_rust_plugin_folder_installs_only_what_the_plugin_needs() {
    let env = Env::new();
    let dir = env.outside.path().canonicalize().unwrap().join("weather");
    let write = |rel: &str, bytes: &[u8]| {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    };
    let wasm = std::fs::read(fs_component()).unwrap();
    write(
        "plugin.toml",
        b"name = \"weather\"\nversion = \"0.1.0\"\ndescription = \"Forecasts\"\ncomponents = [\"target/wasm32-wasip2/release/weather.wasm\"]\n\n[capabilities]\nfs = [{ path = \"$WORKSPACE\", access = \"read\" }]\n\n[package]\ninclude = [\"README.md\"]\nexclude = [\"skills/*/drafts\"]\n",
    );
    write("Cargo.toml", b"[package]\nname = \"weather\"\n");
    write("Cargo.lock", b"# lock\n");
    write("src/lib.rs", b"// code\n");
    write("README.md", b"# Weather\n");
    write(".gitignore", b"/target\n*.log\n");
    write("build.log", b"log\n");
    write(
        "skills/forecast/SKILL.md",
        b"---\nname: forecast\ndescription: Forecasts\n---\nAsk.\n",
    );
    write("skills/forecast/drafts/old.md", b"draft\n");
    write("skills/forecast/__pycache__/x.pyc", b"cache\n");
    write("target/wasm32-wasip2/release/weather.wasm", &wasm);
    // cargo's target/ is big and full of links.
    write("target/debug/deps/libweather.rlib", &vec![7u8; 4 << 20]);
    std::fs::hard_link(
        dir.join("target/debug/deps/libweather.rlib"),
        dir.join("target/debug/libweather.rlib"),
    )
    .unwrap();
    std::os::unix::fs::symlink("/etc", dir.join("target/debug/etc")).unwrap();
    std::os::unix::fs::symlink("../../..", dir.join("target/debug/up")).unwrap();
    write("node_modules/x/index.js", b"js\n");

    let out = install(&env, &dir);
    let said = stdout(&out);
    let wanted = [
        "README.md",
        "plugin.toml",
        "skills/forecast/SKILL.md",
        "target/wasm32-wasip2/release/weather.wasm",
    ];
    let bytes: u64 = wanted
        .iter()
        .map(|rel| std::fs::metadata(dir.join(rel)).unwrap().len())
        .sum();
    assert_eq!(
        said.trim(),
        format!(
            "installed weather 0.1.0 (unsigned): 4 files, {:.1} MiB",
            bytes as f64 / 1048576.0
        )
    );
    let stored = |env: &Env| stored_files(env, "weather");
    assert_eq!(stored(&env), wanted);
    let lock = lock(&env);
    assert!(
        !lock.contains("Cargo.toml") && !lock.contains("libweather"),
        "{lock}"
    );
    // It runs from there.
    env.write("a.txt", "sunny\n");
    let out = env
        .call("weather.read", r#"{"path":"a.txt"}"#, &[])
        .output()
        .unwrap();
    assert!(stdout(&out).contains("sunny"), "{}", stderr(&out));

    // A .tar.gz of the same folder, links in target/ and all, installs the
    // same files.
    let archive = env.outside.path().join("weather.tar.gz");
    let file = std::fs::File::create(&archive).unwrap();
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        file,
        flate2::Compression::fast(),
    ));
    builder.follow_symlinks(false);
    builder.append_dir_all("weather", &dir).unwrap();
    builder.into_inner().unwrap().finish().unwrap();
    let other = Env::new();
    let out = install(&other, &archive);
    assert!(stdout(&out).contains(": 4 files,"), "{}", stdout(&out));
    assert_eq!(stored(&other), wanted);
}

#[test]
fn a_python_project_installs_without_its_caches_and_virtualenv() {
    let env = Env::new();
    let dir = env.outside.path().canonicalize().unwrap().join("weather");
    let out = env
        .capstan()
        .args(["new", "tool", "weather", "--lang", "python", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let write = |rel: &str, bytes: &[u8]| {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    };
    // What `capstan plugin build`, `python3 -m unittest`, pytest and a
    // virtual environment leave in the project.
    std::fs::copy(fs_component(), dir.join("weather.wasm")).unwrap();
    write(".capstan/python/capstan_entry.py", b"import app\n");
    write("__pycache__/app.cpython-312.pyc", b"cache");
    write(
        "__pycache__/test_app.cpython-312-pytest-8.3.3.pyc",
        b"cache",
    );
    write(".pytest_cache/v/cache/lastfailed", b"{}");
    write(
        ".pytest_cache/CACHEDIR.TAG",
        b"Signature: 8a477f597d28d172789f06886806bc55",
    );
    write("legacy.pyc", b"python 2 cache");
    write("data/cities.csv", b"name,lat,lon\n");
    write("data/old.pyo", b"cache");
    write("venv/pyvenv.cfg", b"home = /usr/bin\n");
    write(
        "venv/lib/python3.12/site-packages/requests/__init__.py",
        b"# a dependency\n",
    );
    write(".venv/pyvenv.cfg", b"home = /usr/bin\n");
    // Even a pattern that takes every file leaves the caches out.
    let manifest = dir.join("plugin.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        format!("{text}\n[package]\ninclude = [\"**\"]\n"),
    )
    .unwrap();

    install(&env, &dir);
    assert_eq!(
        stored_files(&env, "weather"),
        [
            "app.py",
            "capstan.py",
            "data/cities.csv",
            "plugin.toml",
            "test_app.py",
            "weather.wasm",
        ]
    );
    let lock = lock(&env);
    assert!(
        !lock.contains(".pyc") && !lock.contains("venv") && !lock.contains("pytest"),
        "{lock}"
    );
}

#[test]
fn a_duplicate_install_is_refused_before_anything_is_compiled() {
    let env = Env::new();
    let src = package(env.outside.path(), "0.1.0", &fs_component(), READ_ONLY);
    let out = install(&env, &src);
    // Checks and consent come first, compiling last.
    let err = stderr(&out);
    let asked = err.find("files 0.1.0 (unsigned) wants:").unwrap();
    let compiled = err.find("component [1/1] tool.wasm").unwrap();
    assert!(asked < compiled, "{err}");
    // A plugin without hooks is not said to have any.
    assert!(!err.contains("  hooks "), "{err}");

    let newer = package(env.outside.path(), "0.2.0", &fs_component(), READ_ONLY);
    let started = std::time::Instant::now();
    let out = plugin(&env, &["install", newer.to_str().unwrap(), "--yes"]);
    eprintln!(
        "a duplicate install was refused in {:.0} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("files 0.1.0 is already installed"), "{err}");
    assert!(err.contains("capstan plugin update"), "{err}");
    assert!(
        !err.contains("component ["),
        "compiled before refusing: {err}"
    );
    assert!(!err.contains("wants:"), "asked before refusing: {err}");
    // Likewise an update of a plugin that is not installed.
    let other = package(env.outside.path(), "0.3.0", &fs_component(), READ_ONLY);
    std::fs::write(
        other.join("plugin.toml"),
        std::fs::read_to_string(other.join("plugin.toml"))
            .unwrap()
            .replace("name = \"files\"", "name = \"other\""),
    )
    .unwrap();
    let out = plugin(&env, &["update", other.to_str().unwrap(), "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!stderr(&out).contains("component ["), "{}", stderr(&out));
}

#[test]
fn every_capability_change_is_an_audit_record() {
    let env = Env::new();
    let src = package(env.outside.path(), "0.1.0", &fs_component(), READ_ONLY);
    let source = src.canonicalize().unwrap();
    let run = |args: &[&str]| {
        let out = env
            .capstan()
            .env("USER", "ada")
            .arg("plugin")
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    };
    run(&["install", src.to_str().unwrap(), "--yes"]);
    run(&["revoke", "files", "env", "TZ"]);
    run(&["grant", "files", "env", "TZ"]);
    let wider = "\n[capabilities]\nfs = [{ path = \"$WORKSPACE\", access = \"read-write\" }]\nenv = [\"TZ\"]\n";
    let src2 = package(env.outside.path(), "0.2.0", &fs_component(), wider);
    run(&["update", src2.to_str().unwrap(), "--yes"]);
    run(&["remove", "files"]);

    let out = env.capstan().args(["audit", "show"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = stdout(&out);
    let changes: Vec<&str> = shown
        .lines()
        .filter(|l| l.contains("plugin_changed"))
        .collect();
    assert_eq!(changes.len(), 5, "{shown}");
    let expect = [
        (
            "install",
            format!("by ada from {}: installed 0.1.0", source.display()),
            "granted: files the workspace (read-only); env TZ",
        ),
        ("revoke", "by ada".to_string(), "revoked env TZ"),
        ("grant", "by ada".to_string(), "granted env TZ"),
        (
            "update",
            format!(
                "from {}: updated 0.1.0 -> 0.2.0",
                src2.canonicalize().unwrap().display()
            ),
            "(wider: was the workspace (read-only))",
        ),
        (
            "remove",
            "by ada".to_string(),
            "removed 0.2.0; its data folder kept",
        ),
    ];
    for (line, (command, who, what)) in changes.iter().zip(expect) {
        assert!(
            line.contains(&format!("  files  {command}  plugin_changed")),
            "{line}"
        );
        assert!(line.contains(&who), "{line}");
        assert!(line.contains(what), "{line}");
    }
    let out = env.capstan().args(["audit", "verify"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("5 records, chain intact"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn concurrent_installs_and_removes_keep_every_effect() {
    let env = Env::new();
    let outside = env.outside.path().canonicalize().unwrap();
    let sources: Vec<PathBuf> = (0..20)
        .map(|i| named_package(&outside, &format!("p{i:02}"), &fs_component(), READ_ONLY))
        .collect();
    // Two processes at a time: one installs p00..p09; the other installs
    // p10..p19 and removes p10..p14 while the first is still installing.
    let run = |commands: Vec<Vec<String>>| {
        let env = &env;
        move || {
            for args in commands {
                let out = env.capstan().arg("plugin").args(&args).output().unwrap();
                assert!(out.status.success(), "{args:?}: {}", stderr(&out));
            }
        }
    };
    let install_args = |range: std::ops::Range<usize>| -> Vec<Vec<String>> {
        range
            .map(|i| {
                vec![
                    "install".to_string(),
                    sources[i].display().to_string(),
                    "--yes".to_string(),
                ]
            })
            .collect()
    };
    let first = install_args(0..10);
    let mut second = Vec::new();
    for i in 10..20 {
        second.extend(install_args(i..i + 1));
        if i >= 15 {
            second.push(vec!["remove".to_string(), format!("p{:02}", i - 5)]);
        }
    }
    std::thread::scope(|scope| {
        let a = scope.spawn(run(first));
        let b = scope.spawn(run(second));
        a.join().unwrap();
        b.join().unwrap();
    });

    let lock: toml::Table = toml::from_str(&lock(&env)).unwrap();
    let mut names: Vec<&String> = lock["plugins"].as_table().unwrap().keys().collect();
    names.sort();
    let expected: Vec<String> = (0..10).chain(15..20).map(|i| format!("p{i:02}")).collect();
    assert_eq!(names, expected.iter().collect::<Vec<_>>());
    for i in 0..20 {
        let stored = env
            .home
            .path()
            .join(format!("plugins/store/p{i:02}"))
            .exists();
        assert_eq!(stored, !(10..15).contains(&i), "store folder of p{i:02}");
    }
    let out = env.capstan().args(["audit", "verify"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("25 records, chain intact"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn an_update_that_adds_hooks_needs_consent_again_and_says_what_they_see() {
    let env = Env::new();
    let v1 = package(env.outside.path(), "0.1.0", &fs_component(), READ_ONLY);
    install(&env, &v1);
    // The same capabilities, plus a hook component.
    let v2 = package(env.outside.path(), "0.2.0", &fs_component(), READ_ONLY);
    std::fs::copy(fixture("hook-echo"), v2.join("hook.wasm")).unwrap();
    let manifest = std::fs::read_to_string(v2.join("plugin.toml"))
        .unwrap()
        .replace(
            "components = [\"tool.wasm\"]",
            "components = [\"tool.wasm\", \"hook.wasm\"]",
        );
    std::fs::write(v2.join("plugin.toml"), manifest).unwrap();

    let out = plugin(&env, &["update", v2.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    let asked = stderr(&out);
    assert!(
        asked.contains("files 0.1.0 -> 0.2.0 (unsigned) asks for more than you granted"),
        "{asked}"
    );
    assert!(
        asked.contains("it now has hooks, which it did not have before"),
        "{asked}"
    );
    assert!(
        asked.contains("PreToolUse for every tool: sees each call's input before it runs; may deny the call, change its input"),
        "{asked}"
    );
    assert!(lock(&env).contains("version = \"0.1.0\""), "{}", lock(&env));

    let out = plugin(&env, &["update", v2.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(lock(&env).contains("version = \"0.2.0\""), "{}", lock(&env));
}

/// Puts a folder where the audit log goes, so it cannot be opened.
fn break_audit_log(env: &Env) -> PathBuf {
    let log = env.home.path().join("audit/audit.jsonl");
    let _ = std::fs::remove_file(&log);
    std::fs::create_dir_all(&log).unwrap();
    log
}

#[test]
fn an_installed_tool_does_not_run_when_its_audit_log_cannot_be_written() {
    use support::mock_model::{Answer, MockModel, Reply};
    let env = Env::new();
    install(
        &env,
        &package(env.outside.path(), "0.1.0", &fs_component(), READ_ONLY),
    );
    env.write("secret.txt", "TOP-SECRET-CONTENT\n");
    break_audit_log(&env);

    // `capstan tool call`: the call fails, naming the log, and nothing of
    // the file comes out.
    let out = env
        .call("files.read", r#"{"path":"secret.txt"}"#, &[])
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(!stdout(&out).contains("TOP-SECRET"), "{}", stdout(&out));
    assert!(stderr(&out).contains("audit log"), "{}", stderr(&out));

    // A session: the plugin is left out with the reason, its tool is not
    // offered, and a call of it never reaches the file.
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "t1",
                    "files__read",
                    serde_json::json!({"path": "secret.txt"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Done.").anthropic()),
    ]);
    let out = env
        .anthropic_session(&mock.url(), "sk-ant-test", "mock-model", "read it")
        .env("TZ", "UTC")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("plugin files is unavailable") && err.contains("audit log"),
        "{err}"
    );
    let received = mock.received();
    let tools = received[0].body["tools"].to_string();
    assert!(!tools.contains("files__read"), "{tools}");
    for request in &received {
        assert!(
            !request.body.to_string().contains("TOP-SECRET"),
            "{}",
            request.body
        );
    }
}
