//! What the user agreed to at install stays what runs: a granted folder
//! whose link is changed later is refused, not followed; an update whose
//! hooks subscribe to other events asks again; and a session whose guard
//! hook cannot run does not start. Each is the attack itself, through the
//! real `capstan` binary, asserting on its effect.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::json;
use support::mock_model::{Answer, MockModel, Reply};
use support::{Env, assert_exit, fs_component, install, lock, stderr, stdout, target_dir};

fn plugin(env: &Env, args: &[&str]) -> Output {
    env.capstan().arg("plugin").args(args).output().unwrap()
}

/// A package `name` `version` in `root`, holding `wasm` as `component`
/// and a plugin.toml with `capabilities`.
fn package(
    root: &Path,
    name: &str,
    version: &str,
    wasm: &Path,
    component: &str,
    capabilities: &str,
) -> PathBuf {
    let dir = root.join(format!("{name}-{version}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(wasm, dir.join(component)).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        format!(
            "name = \"{name}\"\nversion = \"{version}\"\ndescription = \"Test plugin {name}\"\ncomponents = [\"{component}\"]\n{capabilities}"
        ),
    )
    .unwrap();
    dir
}

/// The component of first-party plugin `name`, as the build packaged it.
fn first_party(name: &str) -> PathBuf {
    let path = target_dir()
        .join("plugins")
        .join(name)
        .join(format!("{}.wasm", name.replace('-', "_")));
    assert!(path.is_file(), "{} was not packaged", path.display());
    path
}

/// `capstan -p PROMPT` against `mock`, with extra arguments.
fn session(env: &Env, mock: &MockModel, prompt: &str, extra: &[&str]) -> Output {
    env.anthropic_session(&mock.url(), "sk-ant-mock", "mock-model", prompt)
        .args(extra)
        .write_stdin("")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap()
}

/// The one store folder of installed plugin `name`.
fn store_folder(env: &Env, name: &str) -> PathBuf {
    let dir = env.home.path().join("plugins/store").join(name);
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    assert_eq!(entries.len(), 1);
    entries.pop().unwrap().path()
}

/// Folders `agreed` (with notes.txt) and `other` (with private.txt) outside
/// the workspace, `link` pointing at `agreed`, and a plugin package `src`
/// granted `link` read-only.
struct LinkedGrant {
    agreed: PathBuf,
    other: PathBuf,
    link: PathBuf,
    src: PathBuf,
}

fn linked_grant(env: &Env) -> LinkedGrant {
    let outside = env.outside.path().canonicalize().unwrap();
    let agreed = outside.join("agreed");
    let other = outside.join("other");
    std::fs::create_dir_all(&agreed).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(agreed.join("notes.txt"), "agreed notes\n").unwrap();
    std::fs::write(other.join("private.txt"), "PRIVATE-OTHER-CONTENT\n").unwrap();
    let link = outside.join("link");
    std::os::unix::fs::symlink(&agreed, &link).unwrap();
    let src = package(
        &outside,
        "files",
        "0.1.0",
        &fs_component(),
        "tool.wasm",
        &format!(
            "[capabilities]\nfs = [{{ path = \"{}\", access = \"read\" }}]\n",
            link.display()
        ),
    );
    LinkedGrant {
        agreed,
        other,
        link,
        src,
    }
}

#[test]
fn a_folder_grant_whose_link_changed_after_consent_is_refused_not_followed() {
    let env = Env::new();
    let LinkedGrant {
        agreed,
        other,
        link,
        src,
    } = linked_grant(&env);
    let out = install(&env, &src);
    assert!(
        stderr(&out).contains(&format!("which is {}", agreed.display())),
        "{}",
        stderr(&out)
    );
    // The lock holds the folder the user agreed to.
    let text = lock(&env);
    assert!(
        text.contains(&format!(
            "\"{}\" = \"{}\"",
            link.display(),
            agreed.display()
        )),
        "{text}"
    );
    let read = |path: &Path| {
        env.call(
            "files.read",
            &json!({ "path": path.to_str().unwrap() }).to_string(),
            &[],
        )
        .output()
        .unwrap()
    };
    let out = read(&agreed.join("notes.txt"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("agreed notes"), "{}", stdout(&out));

    // The link now leads elsewhere: the plugin cannot reach the new target.
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&other, &link).unwrap();
    let out = read(&other.join("private.txt"));
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(!stdout(&out).contains("PRIVATE-OTHER"), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(!err.contains("PRIVATE-OTHER"), "{err}");
    assert!(
        err.contains(&format!(
            "it now resolves to {}, but you agreed to {}",
            other.display(),
            agreed.display()
        )) && err.contains("capstan plugin update"),
        "{err}"
    );
    // Nor through a session's model: the plugin is left out, with why, and
    // nothing of the other folder reaches the model.
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "t1",
                    "files__read",
                    json!({"path": other.join("private.txt").to_str().unwrap()}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Done.").anthropic()),
    ]);
    let out = session(&env, &mock, "read it", &[]);
    assert_exit(&out, 0);
    assert!(
        stderr(&out).contains("plugin files is unavailable"),
        "{}",
        stderr(&out)
    );
    for request in mock.received() {
        let body = request.body.to_string();
        assert!(!body.contains("PRIVATE-OTHER"), "{body}");
        assert!(!request.body["tools"].to_string().contains("files__read"));
    }

    // Re-consent: update from the same source asks about the new folder,
    // and without consent nothing changes.
    let out = plugin(&env, &["update", src.to_str().unwrap()]);
    assert_exit(&out, 9);
    assert!(
        stderr(&out).contains(&format!(
            "{} is now {}   (when you agreed it was {})",
            link.display(),
            other.display(),
            agreed.display()
        )),
        "{}",
        stderr(&out)
    );
    assert!(!stdout(&read(&other.join("private.txt"))).contains("PRIVATE-OTHER"));
    let out = plugin(&env, &["update", src.to_str().unwrap(), "--yes"]);
    assert_exit(&out, 0);
    let out = read(&other.join("private.txt"));
    assert!(stdout(&out).contains("PRIVATE-OTHER"), "{}", stderr(&out));
}

#[test]
fn a_lock_written_before_folders_were_recorded_is_completed_at_first_use() {
    let env = Env::new();
    let LinkedGrant {
        agreed,
        other,
        link,
        src,
    } = linked_grant(&env);
    install(&env, &src);
    // As an older capstan wrote it: no `folders` table.
    let path = env.home.path().join("plugins/capstan.lock");
    let text = lock(&env);
    let table = format!(
        "[plugins.files.folders]\n\"{}\" = \"{}\"\n",
        link.display(),
        agreed.display()
    );
    assert!(text.contains(&table), "{text}");
    std::fs::write(&path, text.replace(&table, "")).unwrap();

    // It loads, and the folder it resolves to now is recorded ...
    let out = env.capstan().args(["tool", "list"]).output().unwrap();
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("files.read"), "{}", stdout(&out));
    assert!(lock(&env).contains(&table), "{}", lock(&env));
    let audit = std::fs::read_to_string(env.home.path().join("audit/audit.jsonl")).unwrap();
    assert!(
        audit.contains("recorded the folders its grants resolve to"),
        "{audit}"
    );
    // ... and held from then on.
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&other, &link).unwrap();
    let out = env
        .call(
            "files.read",
            &json!({ "path": other.join("private.txt").to_str().unwrap() }).to_string(),
            &[],
        )
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(!stdout(&out).contains("PRIVATE-OTHER"), "{}", stdout(&out));
}

/// A hook plugin `guard` whose component is `wasm`: both versions ask for
/// the same capabilities, so only what its hooks subscribe to differs.
fn guard_package(root: &Path, version: &str, wasm: &Path) -> PathBuf {
    package(
        root,
        "guard",
        version,
        wasm,
        "hook.wasm",
        "[capabilities]\nfs = [{ path = \"$WORKSPACE\", access = \"read\" }]\nenv = [\"PROTECT_PATHS\"]\n",
    )
}

const AWS_KEY: &str = "AKIAZ7QH3LNT5KXW2XYZ";

/// A session whose model writes an AWS key into `keys.py`.
fn write_a_key(env: &Env) -> (Output, MockModel) {
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Writing.")
                .call(
                    "toolu_key",
                    "fs__write",
                    json!({"path": "keys.py", "content": format!("AWS_KEY = \"{AWS_KEY}\"\n")}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Done.").anthropic()),
    ]);
    let out = session(
        env,
        &mock,
        "write the key",
        &["--permission-mode", "accept-edits"],
    );
    (out, mock)
}

#[test]
fn an_update_whose_hooks_subscribe_to_other_events_asks_again() {
    let env = Env::new();
    let outside = env.outside.path().canonicalize().unwrap();
    // 0.1.0 watches writes and edits of protected paths only.
    let v1 = guard_package(&outside, "0.1.0", &first_party("protect-paths"));
    install(&env, &v1);
    let text = lock(&env);
    assert!(
        text.contains("event = \"PreToolUse\"") && text.contains("matcher = "),
        "{text}"
    );
    // 0.2.0 asks for nothing more, but its hook sees every tool call.
    let v2 = guard_package(&outside, "0.2.0", &first_party("guard-secrets"));
    let out = plugin(&env, &["update", v2.to_str().unwrap()]);
    assert_exit(&out, 9);
    let asked = stderr(&out);
    assert!(
        asked.contains("its hooks now subscribe to other events than you agreed to"),
        "{asked}"
    );
    assert!(asked.contains("    + PreToolUse for every tool"), "{asked}");
    assert!(
        asked.contains("    - PreToolUse for tools matching `"),
        "{asked}"
    );
    // Without consent it is not applied: the lock and the running hook
    // are still 0.1.0's, which lets a key through that 0.2.0 would stop.
    assert!(lock(&env).contains("version = \"0.1.0\""), "{}", lock(&env));
    let (out, _) = write_a_key(&env);
    assert_exit(&out, 0);
    assert!(env.ws.path().join("keys.py").exists());
    std::fs::remove_file(env.ws.path().join("keys.py")).unwrap();

    // With consent it is, and the lock records what it now sees.
    let out = plugin(&env, &["update", v2.to_str().unwrap(), "--yes"]);
    assert_exit(&out, 0);
    let text = lock(&env);
    assert!(text.contains("version = \"0.2.0\""), "{text}");
    let (out, _) = write_a_key(&env);
    assert_exit(&out, 0);
    assert!(!env.ws.path().join("keys.py").exists());
}

#[test]
fn a_hook_subscribing_to_other_events_than_the_lock_records_is_refused() {
    let env = Env::new();
    let outside = env.outside.path().canonicalize().unwrap();
    install(
        &env,
        &guard_package(&outside, "0.1.0", &first_party("guard-secrets")),
    );
    // The lock says it watches only fs.edit; the component asks for every
    // tool. It does not run, and as a guard the session does not start.
    let path = env.home.path().join("plugins/capstan.lock");
    let text = lock(&env);
    let recorded = "event = \"PreToolUse\"\n";
    assert!(text.contains(recorded), "{text}");
    std::fs::write(
        &path,
        text.replace(recorded, "event = \"PreToolUse\"\nmatcher = \"fs.edit\"\n"),
    )
    .unwrap();
    let (out, mock) = write_a_key(&env);
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("guard") && err.contains("now subscribes to other events than you agreed to"),
        "{err}"
    );
    assert!(mock.received().is_empty());
    assert!(!env.ws.path().join("keys.py").exists());
}

#[test]
fn a_guard_hook_whose_component_is_corrupted_stops_print_mode_before_anything_runs() {
    let env = Env::new();
    install(&env, &target_dir().join("plugins/protect-paths"));
    // protect-paths blocks writes to .env files, which nothing else stops.
    let plant = || {
        MockModel::start(vec![
            Reply::sse(
                Answer::text("Configuring.")
                    .call(
                        "toolu_env",
                        "fs__write",
                        json!({"path": ".env", "content": "PLANTED=1\n"}),
                    )
                    .anthropic(),
            ),
            Reply::sse(Answer::text("Done.").anthropic()),
        ])
    };
    // As installed, it guards: the write is blocked.
    let mock = plant();
    let out = session(&env, &mock, "configure", &["--permission-mode", "bypass"]);
    assert_exit(&out, 0);
    assert!(
        mock.result_of("toolu_env").contains("protect-paths"),
        "{}",
        mock.result_of("toolu_env")
    );
    assert!(!env.ws.path().join(".env").exists());

    // Its component corrupted in the store: the session does not start
    // without it, the error names it, and the write it guards never runs.
    let component = store_folder(&env, "protect-paths").join("protect_paths.wasm");
    let mut bytes = std::fs::read(&component).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&component, bytes).unwrap();
    let mock = plant();
    let out = session(&env, &mock, "configure", &["--permission-mode", "bypass"]);
    assert_exit(&out, 10);
    let err = stderr(&out);
    assert!(
        err.contains("the guard hook plugin protect-paths cannot run")
            && err.contains("has changed since it was installed")
            && err.contains("capstan plugin"),
        "{err}"
    );
    assert!(mock.received().is_empty(), "the model was asked");
    assert!(!env.ws.path().join(".env").exists());

    // Removed, it no longer guards: the session starts (and the write runs,
    // as nothing stops it now).
    let out = plugin(&env, &["remove", "protect-paths"]);
    assert_exit(&out, 0);
    let mock = plant();
    let out = session(&env, &mock, "configure", &["--permission-mode", "bypass"]);
    assert_exit(&out, 0);
    assert_eq!(env.read(".env"), "PLANTED=1\n");
}

#[test]
fn an_interactive_start_asks_before_running_without_a_guard() {
    use support::terminal::Terminal;
    let env = Env::new();
    install(&env, &target_dir().join("plugins/protect-paths"));
    let component = store_folder(&env, "protect-paths").join("protect_paths.wasm");
    std::fs::write(&component, b"not a component").unwrap();
    let script = env.home.path().join("script.json");
    std::fs::write(
        &script,
        json!({ "turns": [{"text": "Hello."}] }).to_string(),
    )
    .unwrap();
    let start = || {
        let mut cmd = env.capstan_std();
        for var in support::MODEL_VARS {
            cmd.env_remove(var);
        }
        cmd.env("NO_COLOR", "1")
            .arg("--model")
            .arg(format!("scripted:{}", script.display()));
        let mut terminal = Terminal::spawn(cmd);
        terminal.expect("The guard hook plugin protect-paths cannot run");
        terminal.expect("Start without guard protect-paths?");
        terminal
    };
    // No: the session does not start.
    let mut terminal = start();
    terminal.send("n\r");
    let status = terminal.wait();
    assert_eq!(status.code(), Some(10), "{}", terminal.screen());
    assert!(
        terminal.screen().contains("the session was not started"),
        "{}",
        terminal.screen()
    );
    // Yes: it starts, and says it runs without the guard.
    let mut terminal = start();
    terminal.send("y\r");
    terminal.expect("Ctrl-D exits");
    terminal.expect("> ");
    terminal.send("\x04");
    let status = terminal.wait();
    assert_eq!(status.code(), Some(0), "{}", terminal.screen());
    assert!(
        terminal
            .screen()
            .contains("runs without guard protect-paths, as you chose"),
        "{}",
        terminal.screen()
    );
}
