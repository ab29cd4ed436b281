//! The host's edges, attacked through the real `capstan` binary: memory a
//! plugin or a package can make capstan itself spend (HTTP header objects,
//! a YAML alias bomb, a tar long-name bomb), text that reaches the terminal
//! (escape sequences in log lines, errors and audited paths), floods of log
//! lines and audit records, and name lookups that must be audited.
//!
//! Memory is measured as the capstan process's peak resident memory
//! (`VmHWM`), against a baseline measured the same way in the same test.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use support::{Env, audit_records, fixture, install, run_measuring_peak, stderr, stdout};

const MIB: u64 = 1 << 20;

/// Fails unless `peak` is within `margin` of `baseline`; prints both (run
/// with `--nocapture` to see them).
fn assert_peak_within(what: &str, peak: u64, baseline: u64, margin: u64) {
    eprintln!(
        "{what}: peak {:.1} MiB, baseline {:.1} MiB, bound {:.1} MiB",
        peak as f64 / MIB as f64,
        baseline as f64 / MIB as f64,
        (baseline + margin) as f64 / MIB as f64
    );
    assert!(
        peak < baseline + margin,
        "{what}: capstan peaked at {} MiB against a baseline of {} MiB",
        peak / MIB,
        baseline / MIB
    );
}

/// What a terminal would act on rather than show: ESC, BEL, CR, C1 controls.
fn assert_no_terminal_controls(text: &str) {
    for c in ['\x1b', '\x07', '\r', '\u{9b}', '\u{9d}'] {
        assert!(!text.contains(c), "{c:?} reached the terminal:\n{text:?}");
    }
}

/// The forged lines of [`HOSTILE_TEXT`] never start a line of their own.
fn assert_no_forged_lines(text: &str) {
    for line in text.lines() {
        assert!(
            !line.starts_with("capstan: all checks passed") && !line.starts_with("Grant these?"),
            "a forged line reached the terminal: {line:?}\n{text}"
        );
    }
}

/// Clears the screen, sets the window title, writes the clipboard (OSC 52),
/// rings, returns to the line start, and prints two lines of its own.
const HOSTILE_TEXT: &str = "\u{1b}[2J\u{1b}]0;pwned\u{07}\u{1b}]52;c;cm0gLXJmIH4=\u{07}\u{9b}31m\rcapstan: all checks passed\nGrant these? [y/N] ";

/// A plugin package folder `name` holding the fixture `component` as
/// `tool.wasm`, with `capabilities` in its manifest.
fn package(env: &Env, name: &str, component: &Path, capabilities: &str) -> PathBuf {
    let dir = env.outside.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(component, dir.join("tool.wasm")).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        format!(
            "name = \"{name}\"\nversion = \"1.0.0\"\ndescription = \"A test plugin\"\ncomponents = [\"tool.wasm\"]\n\n[capabilities]\n{capabilities}"
        ),
    )
    .unwrap();
    dir
}

/// The misbehave fixture installed (so its calls are audited) with the
/// workspace readable; it imports sockets, so it asks for a network origin.
fn install_misbehave(env: &Env) {
    let dir = package(
        env,
        "misbehave",
        &fixture("misbehave"),
        "fs = [{ path = \"$WORKSPACE\", access = \"read\" }]\nnet = [\"http://127.0.0.1:9\"]\n",
    );
    install(env, &dir);
}

fn plugin_arg(name: &str) -> String {
    format!("--plugin={name}={}", fixture(name).display())
}

// ------------------------------------------------ host memory (item 7)

/// 8,000 HTTP header objects a plugin asks the host to hold: with 120 KiB
/// values the first stops the call (a fields object holds at most 32 KiB),
/// and with
/// 31 KiB values the call is stopped once it holds as many resources as its
/// 64 MiB memory limit allows. Either way capstan's own memory stays within
/// 128 MiB of a call that makes one object (without the caps: ~960 MiB and
/// ~250 MiB).
#[test]
fn a_flood_of_http_header_objects_is_bounded_by_the_calls_memory_limit() {
    let env = Env::new();
    let flood = |count: u32, bytes: u32| {
        let mut cmd = env.capstan_std();
        cmd.args([
            "tool",
            "call",
            "hostile.header-flood",
            &format!(r#"{{"count":{count},"bytes":{bytes}}}"#),
            "--memory=64MiB",
            &plugin_arg("hostile"),
        ]);
        run_measuring_peak(cmd)
    };
    let (out, baseline) = flood(1, 100);
    assert!(out.status.success(), "{}", stderr(&out));
    let answer: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(answer["kept"], 1, "{answer}");

    let (out, peak) = flood(8000, 120 << 10);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("built a set of HTTP headers over the 32 KiB the host holds"),
        "{err}"
    );
    assert_peak_within("120 KiB header objects", peak, baseline, 128 * MIB);

    let (out, peak) = flood(8000, 31 << 10);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("held more than 2048 resources in the host at once")
            && err.contains("64 MiB memory limit"),
        "{err}"
    );
    assert_peak_within("31 KiB header objects", peak, baseline, 128 * MIB);
}

/// The classic alias bomb: ten levels, each repeating the one before nine
/// times, in 400 bytes of a project skill's front matter.
fn alias_bomb() -> String {
    let mut yaml = String::from(
        "---\nname: bomb\ndescription: boom\na0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for level in 1..10 {
        let items = vec![format!("*a{}", level - 1); 9].join(",");
        yaml.push_str(&format!("a{level}: &a{level} [{items}]\n"));
    }
    yaml.push_str("---\nBoom.\n");
    yaml
}

#[test]
fn a_yaml_alias_bomb_in_a_project_skill_is_refused_before_it_expands() {
    let env = Env::new();
    env.write(
        ".capstan/skills/fine/SKILL.md",
        "---\nname: fine\ndescription: A fine skill.\n---\nFine.\n",
    );
    let list = || {
        let mut cmd = env.capstan_std();
        cmd.args(["skill", "list"]);
        run_measuring_peak(cmd)
    };
    let (out, baseline) = list();
    assert!(out.status.success(), "{}", stderr(&out));

    env.write(".capstan/skills/bomb/SKILL.md", alias_bomb());
    let (out, peak) = list();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("bomb") && err.contains("YAML aliases") && err.contains("64 KiB"),
        "{err}"
    );
    assert!(stdout(&out).contains("fine"), "{}", stdout(&out));
    assert!(!stdout(&out).contains("bomb"), "{}", stdout(&out));
    assert_peak_within("alias bomb", peak, baseline, 64 * MIB);
}

/// A .tar.gz whose first entry is a GNU long-name record of `name_bytes`
/// bytes (compressing to almost nothing), then a manifest.
fn long_name_bomb(path: &Path, name_bytes: u64) {
    let file = std::fs::File::create(path).unwrap();
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    let mut builder = tar::Builder::new(gz);
    if name_bytes > 0 {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::GNULongName);
        header.set_size(name_bytes);
        header.set_mode(0o644);
        let link = b"././@LongLink";
        header.as_old_mut().name[..link.len()].copy_from_slice(link);
        header.set_cksum();
        builder
            .append(
                &header,
                std::io::Read::take(std::io::repeat(b'a'), name_bytes),
            )
            .unwrap();
    }
    let manifest = b"name = \"bomb\"\n";
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(manifest.len() as u64);
    header.set_mode(0o644);
    header.as_old_mut().name[..11].copy_from_slice(b"plugin.toml");
    header.set_cksum();
    builder.append(&header, &manifest[..]).unwrap();
    builder
        .into_inner()
        .unwrap()
        .finish()
        .unwrap()
        .flush()
        .unwrap();
}

#[test]
fn a_tar_long_name_bomb_is_refused_before_its_name_is_read() {
    let env = Env::new();
    let install = |archive: &Path| {
        let mut cmd = env.capstan_std();
        cmd.args(["plugin", "install", archive.to_str().unwrap(), "--yes"]);
        run_measuring_peak(cmd)
    };
    let plain = env.outside.path().join("plain.tar.gz");
    long_name_bomb(&plain, 0);
    let (out, baseline) = install(&plain);
    assert!(!out.status.success());

    let bomb = env.outside.path().join("bomb.tar.gz");
    long_name_bomb(&bomb, 128 * MIB);
    assert!(std::fs::metadata(&bomb).unwrap().len() < 2 * MIB);
    let (out, peak) = install(&bomb);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("GNU long-name entry of 134217728 bytes") && err.contains("at most 4096"),
        "{err}"
    );
    assert_peak_within("tar long-name bomb", peak, baseline, 64 * MIB);
    assert!(!env.home.path().join("plugins/store/bomb").exists());
}

// ---------------------------------------------- terminal text (item 8)

#[test]
fn escape_sequences_in_a_plugins_log_line_and_error_are_shown_not_obeyed() {
    let env = Env::new();
    let input = serde_json::json!({ "message": HOSTILE_TEXT }).to_string();
    for tool in ["misbehave.chatty", "misbehave.fail"] {
        let out = env
            .call(tool, &input, &[])
            .arg(plugin_arg("misbehave"))
            .output()
            .unwrap();
        let err = stderr(&out);
        assert!(
            err.contains("\\x1b]52;c;cm0gLXJmIH4=\\x07"),
            "{tool}: the clipboard write is not shown: {err}"
        );
        assert!(
            err.contains("\\u{9b}31m\\rcapstan: all checks passed"),
            "{tool}: {err}"
        );
        assert_no_terminal_controls(&err);
        assert_no_terminal_controls(&stdout(&out));
        assert_no_forged_lines(&err);
    }
    // --json keeps the text, escaped as JSON.
    let out = env
        .call("misbehave.fail", &input, &["--json"])
        .arg(plugin_arg("misbehave"))
        .output()
        .unwrap();
    let answer: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains(HOSTILE_TEXT),
        "{answer}"
    );
}

#[test]
fn an_audited_path_cannot_forge_a_line_of_audit_show() {
    let env = Env::new();
    install_misbehave(&env);
    let forged = "2026-01-01T00:00:00Z  fs  call-1  file_opened read src/lib.rs";
    let path = format!("{}/evil\n{forged}\u{1b}[2K\r", env.ws_path().display());
    let input = serde_json::json!({ "path": path }).to_string();
    let out = env
        .call("misbehave.raw-read", &input, &[])
        .output()
        .unwrap();
    assert!(!out.status.success());

    let shown = env.capstan().args(["audit", "show"]).output().unwrap();
    assert!(shown.status.success(), "{}", stderr(&shown));
    let text = stdout(&shown);
    assert_no_terminal_controls(&text);
    assert!(
        !text
            .lines()
            .any(|line| line.starts_with("2026-01-01T00:00:00Z")),
        "a forged record line: {text}"
    );
    assert!(
        text.contains(&format!("evil\\n{forged}\\x1b[2K\\r")),
        "{text}"
    );
    // The log itself keeps the path as the plugin gave it (relative to the
    // granted folder).
    let opened: Vec<Value> = audit_records(&env)
        .into_iter()
        .filter(|r| r["kind"] == "file_opened")
        .collect();
    let recorded = format!("evil\n{forged}\u{1b}[2K\r");
    assert!(opened.iter().any(|r| r["path"] == recorded), "{opened:?}");
    let json = env
        .capstan()
        .args(["audit", "show", "--json"])
        .output()
        .unwrap();
    assert!(stdout(&json).contains("\\u001b[2K\\r"), "{}", stdout(&json));
}

#[test]
fn a_log_flood_is_capped_and_says_how_much_was_dropped() {
    let env = Env::new();
    let out = env
        .call(
            "misbehave.log-flood",
            r#"{"count":100000,"bytes":4000}"#,
            &[],
        )
        .arg(plugin_arg("misbehave"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    // 400 MB logged; at most 256 KiB of it printed, and a line saying so.
    assert!(err.len() < 300 << 10, "{} bytes printed", err.len());
    let printed = err.lines().filter(|l| l.contains("warning: www")).count();
    assert_eq!(printed, 65, "{printed} lines printed");
    assert!(
        err.contains(
            "99935 more log lines and progress reports (399740000 bytes) were dropped: a call may send at most 1000 (256 KiB)"
        ),
        "{}",
        &err[err.len().saturating_sub(400)..]
    );
}

#[test]
fn an_audit_flood_is_capped_with_a_record_of_what_was_dropped() {
    let env = Env::new();
    install_misbehave(&env);
    let input = serde_json::json!({ "count": 30000, "dir": env.ws_path() }).to_string();
    let out = env
        .call("misbehave.open-flood", &input, &[])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "30000 opens failed\n");
    let records = audit_records(&env);
    let call: Vec<&Value> = records
        .iter()
        .filter(|r| r["plugin"] == "misbehave" && r["call_id"] != "install")
        .collect();
    // The call itself is recorded apart, outside the call's allowance.
    let call: Vec<&Value> = call
        .into_iter()
        .filter(|r| r["kind"] != "tool_called")
        .collect();
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "tool_called" && r["tool"] == "misbehave.open-flood"),
        "no record of the call"
    );
    let opened = call.iter().filter(|r| r["kind"] == "file_opened").count();
    assert!(opened <= 10_000, "{opened} file_opened records");
    let dropped: Vec<&&Value> = call
        .iter()
        .filter(|r| r["kind"] == "records_dropped")
        .collect();
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    assert_eq!(dropped[0]["limit"], 10_000);
    let written = call.len() as u64 - 1;
    assert_eq!(written, 10_000);
    // Every open was one attempted record: written or counted as dropped.
    assert!(
        dropped[0]["dropped"].as_u64().unwrap() + written >= 30_000,
        "{}",
        dropped[0]
    );
    let verify = env.capstan().args(["audit", "verify"]).output().unwrap();
    assert!(verify.status.success(), "{}", stderr(&verify));
    let shown = env
        .capstan()
        .args(["audit", "show", "-n", "2"])
        .output()
        .unwrap();
    assert!(
        stdout(&shown).contains("records of this call were not written (at most 10000 per call)"),
        "{}",
        stdout(&shown)
    );
}

// ------------------------------------------------ name lookups (item 9)

#[test]
fn a_refused_name_lookup_is_audited() {
    let env = Env::new();
    let dir = package(
        &env,
        "netty",
        &fixture("hostile"),
        "net = [\"http://127.0.0.1:9\"]\n",
    );
    install(&env, &dir);
    let call = |tool: &str, input: &str| -> Output { env.call(tool, input, &[]).output().unwrap() };
    // A socket connect names a host: the lookup is refused before any
    // resolving, and recorded.
    let out = call(
        "netty.net-connect",
        r#"{"addr":"metadata.google.internal:80"}"#,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let answer: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(answer["error"].as_str().is_some(), "{answer}");
    // An HTTP request to a name no grant covers: refused before resolving.
    let out = call(
        "netty.http-get",
        r#"{"url":"http://exfil.example.net/steal"}"#,
    );
    assert!(
        stdout(&out).contains("HttpRequestDenied"),
        "{}",
        stdout(&out)
    );

    let records = audit_records(&env);
    let lookups: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "name_lookup_refused")
        .collect();
    assert_eq!(lookups.len(), 1, "{records:#?}");
    assert_eq!(lookups[0]["name"], "metadata.google.internal");
    assert_eq!(lookups[0]["plugin"], "netty");
    let refused: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "http_refused")
        .collect();
    assert_eq!(refused.len(), 1, "{records:#?}");
    assert!(
        refused[0]["url"]
            .as_str()
            .unwrap()
            .contains("exfil.example.net"),
        "{}",
        refused[0]
    );
    let shown = env.capstan().args(["audit", "show"]).output().unwrap();
    assert!(
        stdout(&shown).contains("name_lookup_refused metadata.google.internal"),
        "{}",
        stdout(&shown)
    );
}
