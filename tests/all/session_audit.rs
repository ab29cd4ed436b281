//! The session's audit log: calls of plugins with no audit log of their
//! own (the built-in fs plugin here) are recorded in the home's log, tied
//! to the tool call and the session, with no secret value in it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::fastmcp::{API_KEY as MCP_API_KEY, add_stdio, assert_ok};
use support::mock_model::{Answer, MockModel, Reply, script};
use support::{Env, assert_exit, audit_records, fixture, stderr, stdout};

const API_KEY: &str = "sk-ant-audit-key-3141";
const FILE_SECRET: &str = "password=hunter2-in-the-notes";

#[test]
fn a_built_in_plugins_calls_are_recorded_in_the_sessions_audit_log() {
    let env = Env::new();
    env.write("notes.txt", format!("{FILE_SECRET}\n"));
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Reading.")
                .call("toolu_read_a", "fs__read", json!({"path": "notes.txt"}))
                .call(
                    "toolu_read_b",
                    "fs__read",
                    json!({"path": "../outside.txt"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Done.").anthropic()),
    ]);
    let output = env
        .anthropic_session(&mock.url(), API_KEY, "mock-model", "read the notes")
        .args(["--output-format", "json"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    let session_id = result["session_id"].as_str().unwrap().to_string();
    assert!(!session_id.is_empty(), "{result}");
    // The read went through (the model saw the file).
    let received = mock.received();
    assert_eq!(received.len(), 2, "{}", stderr(&output));
    assert!(
        received[1].body.to_string().contains(FILE_SECRET),
        "{:#?}",
        received[1].body
    );

    let records = audit_records(&env);
    let opened: Vec<&Value> = records
        .iter()
        .filter(|r| r["plugin"] == "fs" && r["kind"] == "file_opened")
        .collect();
    let read = opened
        .iter()
        .find(|r| r["path"] == "notes.txt")
        .unwrap_or_else(|| panic!("no record of the read: {records:#?}"));
    assert_eq!(read["session_id"], session_id.as_str(), "{read}");
    assert_eq!(read["mode"], "read", "{read}");
    assert_eq!(read["allowed"], true, "{read}");
    // The call's records carry the model's id for the tool call that
    // caused them.
    let call_id = read["call_id"].as_str().unwrap().to_string();
    assert_eq!(call_id, "toolu_read_a", "{read}");
    for record in &opened {
        assert_eq!(record["session_id"], session_id.as_str(), "{record}");
        assert!(
            record["call_id"] == "toolu_read_a" || record["call_id"] == "toolu_read_b",
            "{record}"
        );
    }
    // Each call itself is recorded under its id, with its outcome.
    for id in ["toolu_read_a", "toolu_read_b"] {
        let called = records
            .iter()
            .find(|r| r["kind"] == "tool_called" && r["call_id"] == id)
            .unwrap_or_else(|| panic!("no record of call {id}: {records:#?}"));
        assert_eq!(called["plugin"], "fs", "{called}");
        assert_eq!(called["tool"], "fs.read", "{called}");
        assert_eq!(called["session_id"], session_id.as_str(), "{called}");
        assert!(called["duration_ms"].is_u64(), "{called}");
    }

    // `capstan audit` shows it, and the chain verifies.
    let shown = env
        .capstan()
        .args([
            "audit",
            "show",
            "--session",
            &session_id,
            "--call",
            &call_id,
        ])
        .output()
        .unwrap();
    assert_exit(&shown, 0);
    let text = stdout(&shown);
    assert!(
        text.lines()
            .any(|line| line.ends_with(&format!("fs  {call_id}  file_opened read notes.txt"))),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|line| line.contains(&format!("fs  {call_id}  tool_called fs.read: ok after"))),
        "{text}"
    );
    let verified = env.capstan().args(["audit", "verify"]).output().unwrap();
    assert_exit(&verified, 0);

    // No secret value: not the model's API key, not what the file holds.
    let log = std::fs::read_to_string(env.home.path().join("audit/audit.jsonl")).unwrap();
    assert!(!log.contains(API_KEY), "{log}");
    assert!(!log.contains("hunter2"), "{log}");
}

/// `capstan audit show --json` (all records), each line parsed.
fn shown_records(env: &Env) -> Vec<Value> {
    let shown = env
        .capstan()
        .args(["audit", "show", "--json", "-n", "100000"])
        .output()
        .unwrap();
    assert_exit(&shown, 0);
    stdout(&shown)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// `capstan audit verify` passes.
fn assert_verified(env: &Env) {
    let verified = env.capstan().args(["audit", "verify"]).output().unwrap();
    assert_exit(&verified, 0);
    assert!(
        stdout(&verified).contains("chain intact"),
        "{}",
        stdout(&verified)
    );
}

fn find(records: &[Value], what: impl Fn(&Value) -> bool) -> Option<&Value> {
    records.iter().find(|r| what(r))
}

#[test]
fn calls_that_touch_nothing_denials_and_commands_are_recorded_under_their_tool_call() {
    let env = Env::new();
    let plugin = fixture("misbehave");
    let mock = script(&[
        ("toolu_flood", "misbehave__flood", json!({"bytes": 3})),
        ("toolu_fail", "misbehave__fail", json!({"message": "no"})),
        ("toolu_cmd", "exec__run", json!({"command": "echo started"})),
    ]);
    let output = env
        .anthropic_session(&mock.url(), API_KEY, "mock-model", "go")
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(["--output-format", "json"])
        .arg("--plugin")
        .arg(format!("misbehave={}", plugin.display()))
        .args(["--allow", "misbehave.flood", "--deny", "misbehave.fail"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    let session_id = result["session_id"].as_str().unwrap().to_string();
    assert_eq!(mock.result_of("toolu_flood"), "xxx");
    assert!(mock.result_of("toolu_fail").contains("denied"));

    let records = shown_records(&env);
    // A component call that touches no capability is recorded all the same.
    let flood = find(&records, |r| {
        r["kind"] == "tool_called" && r["call_id"] == "toolu_flood"
    })
    .unwrap_or_else(|| panic!("no record of the call: {records:#?}"));
    assert_eq!(flood["plugin"], "misbehave", "{flood}");
    assert_eq!(flood["tool"], "misbehave.flood", "{flood}");
    assert_eq!(flood["outcome"], "ok", "{flood}");
    assert_eq!(flood["session_id"], session_id.as_str(), "{flood}");
    assert!(flood["duration_ms"].is_u64(), "{flood}");
    // A deny rule's refusal is recorded, and the tool never ran.
    let denied = find(&records, |r| {
        r["kind"] == "call_denied" && r["call_id"] == "toolu_fail"
    })
    .unwrap_or_else(|| panic!("no record of the denial: {records:#?}"));
    assert_eq!(denied["plugin"], "misbehave", "{denied}");
    assert_eq!(denied["tool"], "misbehave.fail", "{denied}");
    assert!(
        denied["by"].as_str().unwrap().starts_with("rule"),
        "{denied}"
    );
    assert_eq!(denied["session_id"], session_id.as_str(), "{denied}");
    assert!(
        find(&records, |r| r["kind"] == "tool_called"
            && r["call_id"] == "toolu_fail")
        .is_none(),
        "{records:#?}"
    );
    // The command's start is recorded before its end, both under the call.
    let started = find(&records, |r| {
        r["kind"] == "command_started" && r["call_id"] == "toolu_cmd"
    })
    .unwrap_or_else(|| panic!("no record of the command's start: {records:#?}"));
    assert_eq!(started["plugin"], "exec", "{started}");
    assert_eq!(started["command"], "echo started", "{started}");
    assert!(started["pid"].as_u64().unwrap() > 0, "{started}");
    let ran = find(&records, |r| {
        r["kind"] == "command_run" && r["call_id"] == "toolu_cmd"
    })
    .unwrap_or_else(|| panic!("no record of the command's end: {records:#?}"));
    assert!(
        started["seq"].as_u64() < ran["seq"].as_u64(),
        "{started} {ran}"
    );
    assert!(
        find(&records, |r| r["kind"] == "tool_called"
            && r["call_id"] == "toolu_cmd"
            && r["tool"] == "exec.run")
        .is_some(),
        "{records:#?}"
    );
    assert_verified(&env);
}

#[test]
fn writes_refused_for_want_of_allow_write_are_recorded() {
    let env = Env::new();
    env.write("kept.txt", "original");
    let written = env
        .call(
            "fs.write",
            r#"{"path":"kept.txt","content":"changed"}"#,
            &[],
        )
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(!written.status.success(), "{}", stdout(&written));
    assert_eq!(env.read("kept.txt"), "original");
    let asked = env
        .call(
            "exec.run",
            r#"{"command":"echo changed > kept.txt","write":true}"#,
            &[],
        )
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(!asked.status.success(), "{}", stdout(&asked));
    let tried = env
        .call("exec.run", r#"{"command":"echo changed > kept.txt"}"#, &[])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert_exit(&tried, 0);
    assert_eq!(env.read("kept.txt"), "original");

    let records = shown_records(&env);
    // The component's write was refused by its sandbox: the call is
    // recorded as denied, with the refused open under the same call.
    let call = find(&records, |r| {
        r["kind"] == "tool_called" && r["tool"] == "fs.write"
    })
    .unwrap_or_else(|| panic!("no record of fs.write: {records:#?}"));
    assert_eq!(call["plugin"], "fs", "{call}");
    assert_eq!(call["outcome"], "denied", "{call}");
    assert!(call["duration_ms"].is_u64(), "{call}");
    assert!(
        find(&records, |r| r["kind"] == "file_opened"
            && r["call_id"] == call["call_id"]
            && r["allowed"] == false)
        .is_some(),
        "{records:#?}"
    );
    // exec.run asking to write without --allow-write: refused before it ran.
    let denied = find(&records, |r| {
        r["kind"] == "call_denied" && r["tool"] == "exec.run"
    })
    .unwrap_or_else(|| panic!("no record of the refusal: {records:#?}"));
    assert!(
        denied["by"].as_str().unwrap().contains("--allow-write"),
        "{denied}"
    );
    // A command that tried to write a read-only workspace: its run says the
    // sandbox refused it the write.
    let ran = find(&records, |r| r["kind"] == "command_run")
        .unwrap_or_else(|| panic!("no record of the command: {records:#?}"));
    let refused = ran["refused"].as_array().unwrap_or_else(|| panic!("{ran}"));
    assert!(
        refused
            .iter()
            .any(|r| r.as_str().unwrap().contains("write the workspace")),
        "{ran}"
    );
    assert_verified(&env);
}

#[test]
fn an_mcp_servers_start_refusals_and_end_are_recorded_as_they_happen() {
    let env = Env::new();
    assert_ok(&add_stdio(&env, "fx", &[], &[]));
    let mock = script(&[
        ("c_echo", "mcp__fx__echo", json!({"text": "hello"})),
        (
            "c_fetch",
            "mcp__fx__fetch",
            json!({"url": "http://example.com/"}),
        ),
        (
            "c_note",
            "mcp__fx__note",
            json!({"name": "n.txt", "text": "x"}),
        ),
        (
            "c_wait",
            "exec__run",
            json!({"command": "while [ ! -e go ]; do sleep 0.05; done; echo went"}),
        ),
    ]);
    let mut cmd = env.anthropic_session_std(&mock.url(), MCP_API_KEY, "mock-model", "go");
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(["--allow", "mcp__fx__fetch", "--allow", "mcp__fx__note"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // While the session runs (its command waits for `go`), the server's
    // start, its refused request and the waiting command's start are in
    // the log already, and the server's end is not.
    let deadline = Instant::now() + Duration::from_secs(120);
    let during = loop {
        let records = audit_records(&env);
        let waiting = find(&records, |r| {
            r["kind"] == "command_started" && r["call_id"] == "c_wait"
        })
        .is_some();
        if waiting || Instant::now() > deadline {
            break records;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let output = child.wait_with_output().unwrap();
            panic!(
                "the session ended ({status}) before its command started: {}\n{records:#?}",
                stderr(&output)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let server_started = find(&during, |r| {
        r["kind"] == "command_started" && r["plugin"] == "mcp__fx"
    })
    .unwrap_or_else(|| panic!("no record of the server's start: {during:#?}"));
    assert!(
        server_started["command"]
            .as_str()
            .unwrap()
            .contains("fastmcp_server.py"),
        "{server_started}"
    );
    let refused = find(&during, |r| {
        r["kind"] == "http_refused" && r["plugin"] == "mcp__fx"
    })
    .unwrap_or_else(|| panic!("no record of the refused request: {during:#?}"));
    assert!(
        refused["url"].as_str().unwrap().contains("example.com"),
        "{refused}"
    );
    assert!(
        find(&during, |r| r["kind"] == "command_run"
            && r["plugin"] == "mcp__fx")
        .is_none(),
        "{during:#?}"
    );
    assert!(
        find(&during, |r| r["kind"] == "mcp_tool_called"
            && r["call_id"] == "c_echo")
        .is_some(),
        "{during:#?}"
    );
    // Its write into the read-only workspace, refused by the kernel inside
    // the server, is recorded with its call as the server told it.
    let note = find(&during, |r| {
        r["kind"] == "mcp_tool_called" && r["call_id"] == "c_note"
    })
    .unwrap_or_else(|| panic!("no record of the note call: {during:#?}"));
    assert!(
        note["refused"].as_array().is_some_and(|r| !r.is_empty()),
        "{note}"
    );
    assert!(!env.ws.path().join("n.txt").exists());
    std::fs::write(env.ws.path().join("go"), "").unwrap();
    let output = child.wait_with_output().unwrap();
    assert_ok(&output);
    assert!(mock.result_of("c_wait").contains("went"));
    assert!(!mock.result_of("c_fetch").contains("Example Domain"));

    // The session ended: the server was stopped and its end recorded.
    let records = shown_records(&env);
    let ended = find(&records, |r| {
        r["kind"] == "command_run" && r["plugin"] == "mcp__fx"
    })
    .unwrap_or_else(|| panic!("no record of the server's end: {records:#?}"));
    assert_eq!(ended["ending"], "cancelled", "{ended}");
    let stopped = find(&records, |r| {
        r["kind"] == "mcp_server_state" && r["plugin"] == "mcp__fx" && r["state"] == "stopped"
    })
    .unwrap_or_else(|| panic!("no record of the server's stop: {records:#?}"));
    assert!(
        ended["seq"].as_u64() < stopped["seq"].as_u64(),
        "{ended} {stopped}"
    );
    assert_verified(&env);
}
