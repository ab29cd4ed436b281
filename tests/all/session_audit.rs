//! The session's audit log: calls of plugins with no audit log of their
//! own (the built-in fs plugin here) are recorded in the home's log, tied
//! to the tool call and the session, with no secret value in it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::mock_model::{Answer, MockModel, Reply};
use support::{Env, assert_exit, audit_records, stderr, stdout};

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
    // The call's records share the id of the component call.
    let call_id = read["call_id"].as_str().unwrap().to_string();
    assert!(call_id.starts_with("call-"), "{read}");
    for record in &opened {
        assert_eq!(record["session_id"], session_id.as_str(), "{record}");
        assert_eq!(record["call_id"], call_id.as_str(), "{record}");
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
    let verified = env.capstan().args(["audit", "verify"]).output().unwrap();
    assert_exit(&verified, 0);

    // No secret value: not the model's API key, not what the file holds.
    let log = std::fs::read_to_string(env.home.path().join("audit/audit.jsonl")).unwrap();
    assert!(!log.contains(API_KEY), "{log}");
    assert!(!log.contains("hunter2"), "{log}");
}
