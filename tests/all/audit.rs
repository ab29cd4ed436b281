//! The audit log end to end: file opens recorded by the sandbox as real
//! plugins run, and `capstan audit show` / `capstan audit verify` on logs
//! that are empty, intact, or damaged in each way the chain detects.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;

use capstan::audit::{self, AuditEvent, AuditFilter, AuditLog, AuditScope};
use capstan::grants::{Grants, OwnFolders};
use capstan::plugin::Catalog;
use capstan::sandbox::{CallOptions, Sandbox};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::{Env, assert_exit, fixture, shared_home, stderr, stdout};

// ------------------------------------------------------- file opens

struct Host {
    sandbox: Sandbox,
    catalog: Catalog,
    ws: tempfile::TempDir,
    logs: tempfile::TempDir,
}

impl Host {
    fn new() -> Self {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("a.txt"), "alpha\nbeta\n").unwrap();
        Self {
            sandbox: Sandbox::new(&shared_home()).unwrap(),
            catalog: Catalog::builtin(),
            ws,
            logs: tempfile::tempdir().unwrap(),
        }
    }

    fn log_path(&self) -> PathBuf {
        self.logs.path().join("audit.jsonl")
    }

    /// Calls `plugin.tool` with the workspace granted (`writable` or not)
    /// and the audit log set; returns whether the call succeeded and the
    /// file opens it recorded as (path, mode, allowed).
    async fn call(
        &self,
        plugin: &str,
        tool: &str,
        input: &str,
        writable: bool,
    ) -> (bool, Vec<(String, String, bool)>) {
        let component = self.catalog.load(&self.sandbox, plugin).unwrap();
        let log = AuditLog::open(&self.log_path()).unwrap();
        let options = CallOptions {
            grants: Grants::workspace(self.ws.path(), writable, &OwnFolders::default()).unwrap(),
            audit: Some(log),
            session_id: Some("session-1".into()),
            ..CallOptions::default()
        };
        let ok = self
            .sandbox
            .call_tool(&component, tool, input, &options)
            .await
            .is_ok();
        let opens = audit::read(&self.log_path(), &AuditFilter::default())
            .unwrap()
            .into_iter()
            .filter(|record| record.plugin == plugin)
            .filter_map(|record| match record.event {
                AuditEvent::FileOpened {
                    path,
                    mode,
                    allowed,
                } => Some((path, mode, allowed)),
                _ => None,
            })
            .collect();
        std::fs::remove_file(self.log_path()).unwrap();
        (ok, opens)
    }
}

#[tokio::test]
async fn a_file_read_is_recorded_with_its_mode() {
    let host = Host::new();
    let (ok, opens) = host.call("fs", "read", r#"{"path":"a.txt"}"#, false).await;
    assert!(ok);
    assert!(
        opens.contains(&("a.txt".into(), "read".into(), true)),
        "{opens:?}"
    );
    assert!(opens.iter().all(|(_, _, allowed)| *allowed), "{opens:?}");
}

#[tokio::test]
async fn a_write_under_a_read_only_grant_is_recorded_as_refused() {
    let host = Host::new();
    let (ok, opens) = host
        .call("fs", "write", r#"{"path":"new.txt","content":"x"}"#, false)
        .await;
    assert!(!ok);
    assert!(!host.ws.path().join("new.txt").exists());
    let refused: Vec<_> = opens.iter().filter(|(_, _, allowed)| !allowed).collect();
    assert!(
        refused
            .iter()
            .any(|(path, mode, _)| path.contains("new.txt") && mode.contains("write")),
        "{opens:?}"
    );

    // Control: with a writable grant the same write is recorded as allowed.
    let (ok, opens) = host
        .call("fs", "write", r#"{"path":"new.txt","content":"x"}"#, true)
        .await;
    assert!(ok);
    assert!(
        opens
            .iter()
            .any(|(path, mode, allowed)| path.contains("new.txt")
                && mode.contains("write")
                && *allowed),
        "{opens:?}"
    );
}

#[tokio::test]
async fn a_path_leading_outside_is_recorded_as_refused() {
    let mut host = Host::new();
    host.catalog
        .add_file(fixture("misbehave").to_str().unwrap())
        .unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "TOP SECRET").unwrap();
    let ws = host.ws.path().canonicalize().unwrap();
    let name = outside.path().file_name().unwrap().to_str().unwrap();
    let dotdot = format!("{}/../{name}/secret.txt", ws.display());
    let (ok, opens) = host
        .call(
            "misbehave",
            "raw-read",
            &format!(r#"{{"path":"{dotdot}"}}"#),
            false,
        )
        .await;
    assert!(!ok);
    assert!(
        opens.iter().any(
            |(path, mode, allowed)| path == &format!("../{name}/secret.txt")
                && mode == "read"
                && !allowed
        ),
        "{opens:?}"
    );
}

// ------------------------------------------------- audit show / verify

/// The log `capstan` uses with the test's home.
fn log_of(env: &Env) -> PathBuf {
    env.home.path().join("audit/audit.jsonl")
}

fn scope(log: &AuditLog, plugin: &str, call: &str, session: Option<&str>) -> AuditScope {
    AuditScope::new(log.clone(), plugin, call, session)
}

/// Writes four records through the library: a weather call (an env read, a
/// request sent, a secret injected) and an fs call refused a write.
fn write_sample(path: &Path) {
    let log = AuditLog::open(path).unwrap();
    let weather = scope(&log, "weather", "call-1", Some("session-9"));
    weather.record(AuditEvent::EnvRead {
        names: vec!["LANG".into(), "TZ".into()],
    });
    weather.record(AuditEvent::SecretInjected {
        name: "OPEN_METEO_KEY".into(),
        host: "api.open-meteo.com".into(),
    });
    weather.record(AuditEvent::HttpSent {
        method: "GET".into(),
        url: "https://api.open-meteo.com/v1/forecast".into(),
        status: Some(200),
    });
    scope(&log, "fs", "call-2", None).record(AuditEvent::FileOpened {
        path: "notes.txt".into(),
        mode: "write+create".into(),
        allowed: false,
    });
}

fn audit(env: &Env, args: &[&str]) -> Output {
    env.capstan().arg("audit").args(args).output().unwrap()
}

/// Rewrites the log's lines with `change`.
fn edit_lines(path: &Path, change: impl FnOnce(&mut Vec<String>)) {
    let mut lines: Vec<String> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    change(&mut lines);
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn an_empty_log_has_nothing_to_show_and_verifies() {
    let env = Env::new();
    let out = audit(&env, &["show"]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).starts_with("Nothing recorded yet"),
        "{}",
        stdout(&out)
    );
    let out = audit(&env, &["show", "--json"]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "");
    let out = audit(&env, &["verify"]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).ends_with(": 0 records, chain intact\n"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn show_prints_one_line_per_record_with_filters() {
    let env = Env::new();
    write_sample(&log_of(&env));
    let out = audit(&env, &["show"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    let without_time: Vec<&str> = lines
        .iter()
        .map(|line| {
            let (time, rest) = line.split_once("  ").unwrap();
            assert_eq!(time.len(), 20, "{time}");
            assert!(time.ends_with('Z') && time.as_bytes()[10] == b'T', "{time}");
            rest
        })
        .collect();
    assert_eq!(
        without_time,
        [
            "weather  call-1  env_read LANG, TZ",
            "weather  call-1  secret_injected OPEN_METEO_KEY -> api.open-meteo.com",
            "weather  call-1  http_sent GET https://api.open-meteo.com/v1/forecast -> 200",
            "fs  call-2  file_opened write+create notes.txt (refused)",
        ]
    );

    let out = audit(&env, &["show", "--plugin", "fs"]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out).lines().count(), 1);
    let out = audit(&env, &["show", "--session", "session-9", "-n", "2"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(
        text.contains("secret_injected") && text.contains("http_sent"),
        "{text}"
    );
    let out = audit(&env, &["show", "--call", "call-404"]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "No audit records match.\n");

    let out = audit(&env, &["show", "--json", "--call", "call-1"]);
    assert_exit(&out, 0);
    let records: Vec<Value> = stdout(&out)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(records.len(), 3);
    assert_eq!(records[2]["kind"], "http_sent");
    assert_eq!(records[2]["status"], 200);
    assert_eq!(records[2]["seq"], 3);
    assert_eq!(records[2]["session_id"], "session-9");
}

/// The chain as documented: `hash` = SHA-256 of `prev` then the record's
/// JSON with sorted keys and no `hash`. A record written by hand this way
/// (by an earlier run) is continued by the library and verifies.
#[test]
fn the_chain_is_computed_as_documented_and_last_shows_the_latest_run() {
    let env = Env::new();
    let path = log_of(&env);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let prev = "0".repeat(64);
    let record = json!({
        "address": "10.0.0.1:22",
        "call_id": "call-0",
        "kind": "socket_refused",
        "plugin": "old",
        "prev": prev,
        "run": "run-earlier",
        "seq": 1,
        "session_id": null,
        "time": "2026-11-21T09:00:00Z",
    });
    // Keys in sorted order, no spaces: the canonical form.
    let canonical = serde_json::to_string(&record).unwrap();
    let hash = format!("{:x}", Sha256::digest(format!("{prev}{canonical}")));
    let mut line = record.clone();
    line["hash"] = json!(hash);
    std::fs::write(&path, format!("{line}\n")).unwrap();
    std::fs::write(
        audit::head_path(&path),
        format!("{{\"seq\":1,\"hash\":\"{hash}\"}}"),
    )
    .unwrap();

    write_sample(&path);
    let out = audit(&env, &["verify"]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).ends_with(": 5 records, chain intact\n"),
        "{}",
        stdout(&out)
    );

    let out = audit(&env, &["show"]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out).lines().count(), 5);
    assert!(stdout(&out).contains("socket_refused 10.0.0.1:22"));
    let out = audit(&env, &["show", "--last"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(!text.contains("socket_refused"), "{text}");
}

#[test]
fn an_edited_record_fails_verification() {
    let env = Env::new();
    let path = log_of(&env);
    write_sample(&path);
    edit_lines(&path, |lines| {
        lines[1] = lines[1].replace("api.open-meteo.com", "evil.example");
    });
    let out = audit(&env, &["verify"]);
    assert_exit(&out, 11);
    let err = stderr(&out);
    assert!(err.contains("line 2 (record 2): edited"), "{err}");
    assert!(err.contains("1 intact record precedes it"), "{err}");
    // Its help states the code it exits with.
    let help = audit(&env, &["verify", "--help"]);
    assert_exit(&help, 0);
    let code = out.status.code().unwrap();
    assert!(
        stdout(&help).contains(&format!("Exits with {code} if not")),
        "{}",
        stdout(&help)
    );
}

#[test]
fn a_deleted_middle_record_fails_verification() {
    let env = Env::new();
    let path = log_of(&env);
    write_sample(&path);
    edit_lines(&path, |lines| {
        lines.remove(1);
    });
    let out = audit(&env, &["verify"]);
    assert_exit(&out, 11);
    let err = stderr(&out);
    assert!(
        err.contains("line 2 (record 3): missing records: record 2 is missing"),
        "{err}"
    );
}

#[test]
fn a_truncated_tail_fails_verification() {
    let env = Env::new();
    let path = log_of(&env);
    write_sample(&path);
    edit_lines(&path, |lines| {
        lines.truncate(2);
    });
    let out = audit(&env, &["verify"]);
    assert_exit(&out, 11);
    let err = stderr(&out);
    assert!(err.contains("truncated"), "{err}");
    assert!(err.contains("ends at record 2 but 4 were written"), "{err}");
    // Where the damage is and what is intact agree: the two records there
    // are good, the damage is after them.
    assert!(
        err.contains("is damaged at its end, after line 2 (record 2): truncated"),
        "{err}"
    );
    assert!(err.contains("The 2 records before it are intact"), "{err}");
    assert!(!err.contains("precede"), "{err}");
}

#[test]
fn a_missing_head_file_fails_verification() {
    let env = Env::new();
    let path = log_of(&env);
    write_sample(&path);
    std::fs::remove_file(audit::head_path(&path)).unwrap();
    let out = audit(&env, &["verify"]);
    assert_exit(&out, 11);
    assert!(stderr(&out).contains("head mismatch"), "{}", stderr(&out));
}

#[test]
fn a_cut_last_line_is_reported_and_the_log_goes_on() {
    let env = Env::new();
    let path = log_of(&env);
    write_sample(&path);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, &text[..text.len() - 30]).unwrap();
    let out = audit(&env, &["verify"]);
    assert_exit(&out, 11);
    let err = stderr(&out);
    assert!(err.contains("line 4: truncated"), "{err}");
    assert!(err.contains("cut short"), "{err}");

    // A new run continues after the last complete record; the cut line
    // stays as evidence, and is still reported.
    let log = AuditLog::open(&path).unwrap();
    scope(&log, "fs", "call-3", None).record(AuditEvent::FileOpened {
        path: "a.txt".into(),
        mode: "read".into(),
        allowed: true,
    });
    drop(log);
    let out = audit(&env, &["show"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(
        text.ends_with("fs  call-3  file_opened read a.txt\n"),
        "{text}"
    );
    let out = audit(&env, &["verify"]);
    assert_exit(&out, 11);
    let err = stderr(&out);
    assert!(err.contains("line 4: truncated"), "{err}");
    assert!(err.contains("the log continues after it"), "{err}");
}
