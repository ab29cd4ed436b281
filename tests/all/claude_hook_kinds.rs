//! Claude Code prompt and http hooks, through the real binary: a prompt
//! hook asks the session's model (the mock) and its `{ok, reason}` answer
//! decides; an http hook posts the event to a server on 127.0.0.1 and its
//! JSON answer decides; both fail closed on a blocking event.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::support;
use support::mock_model::{Answer, MockModel, Reply};
use support::{Env, assert_exit, stderr, stdout};

const RUN_TIMEOUT: Duration = Duration::from_secs(90);

fn session(env: &Env, mock: &MockModel, prompt: &str, extra: &[&str]) -> std::process::Output {
    let mut cmd = env.anthropic_session(&mock.url(), "sk-ant-mock", "claude-sonnet-4-5", prompt);
    cmd.timeout(RUN_TIMEOUT)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOOK_TOKEN", "tok-5ecret-value")
        .args(["--output-format", "json", "--trust-project-hooks"])
        .args(extra);
    cmd.output().unwrap()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A project settings file with one PreToolUse hook on Write.
fn settings_with(hook: serde_json::Value) -> String {
    json!({"hooks": {"PreToolUse": [{"matcher": "Write", "hooks": [hook]}]}}).to_string()
}

/// The model writes notes.txt; the hook is asked; the model closes.
fn write_then(hook_reply: Reply) -> Vec<Reply> {
    vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "toolu_w",
                    "fs__write",
                    json!({"path": "notes.txt", "content": "changed"}),
                )
                .anthropic(),
        ),
        hook_reply,
        Reply::sse(Answer::text("Done.").anthropic()),
    ]
}

const PROMPT: &str = "Refuse any write to notes.txt. The call: $ARGUMENTS";

/// A prompt hook whose model says no blocks the write, with the model's
/// reason; the question it sent carries the event's JSON in place of
/// `$ARGUMENTS` and offers no tools.
#[test]
fn a_prompt_hook_blocks_a_write_with_the_models_reason() {
    let env = Env::new();
    env.write(
        ".claude/settings.json",
        settings_with(json!({"type": "prompt", "prompt": PROMPT, "timeout": 20})),
    );
    env.write("notes.txt", "frozen\n");
    let mock = MockModel::start(write_then(Reply::sse(
        Answer::text(r#"{"ok": false, "reason": "notes.txt is frozen by policy"}"#).anthropic(),
    )));
    let output = session(
        &env,
        &mock,
        "write notes",
        &["--permission-mode", "accept-edits"],
    );
    assert_exit(&output, 0);
    let result = mock.result_of("toolu_w");
    assert!(result.contains("notes.txt is frozen by policy"), "{result}");
    assert_eq!(env.read("notes.txt"), "frozen\n");
    let asked = &mock.received()[1];
    let text = asked.first_user_text();
    assert!(
        text.starts_with("Refuse any write to notes.txt. The call: {")
            && text.contains("\"tool_input\"")
            && text.contains("\"hook_event_name\":\"PreToolUse\"")
            && !text.contains("$ARGUMENTS"),
        "{text}"
    );
    assert!(asked.system_text().contains("\"ok\""), "{asked:#?}");
    assert!(
        asked.body["tools"]
            .as_array()
            .is_none_or(|tools| tools.is_empty()),
        "{:#?}",
        asked.body
    );
    let notices = stderr(&output);
    assert!(
        notices.contains("prompt hook") && notices.contains("the session's model provider"),
        "{notices}"
    );
}

/// A prompt hook whose model says `{"ok": true}` lets the write run.
#[test]
fn a_prompt_hook_that_answers_ok_lets_the_write_run() {
    let env = Env::new();
    env.write(
        ".claude/settings.json",
        settings_with(json!({"type": "prompt", "prompt": PROMPT})),
    );
    let mock = MockModel::start(write_then(Reply::sse(
        Answer::text(r#"{"ok": true}"#).anthropic(),
    )));
    let output = session(
        &env,
        &mock,
        "write notes",
        &["--permission-mode", "accept-edits"],
    );
    assert_exit(&output, 0);
    assert_eq!(env.read("notes.txt"), "changed");
    assert_eq!(mock.replies_left(), 0);
}

/// A prompt hook whose model answers something that is not `{ok, reason}`,
/// or whose model request fails, denies the call on a blocking event,
/// even in bypass mode, and says why.
#[test]
fn a_prompt_hook_with_a_malformed_or_failed_answer_denies() {
    for (reply, why) in [
        (
            Reply::sse(Answer::text("Sure, looks fine to me!").anthropic()),
            "not the JSON object a prompt hook needs",
        ),
        (
            Reply::sse(Answer::text(r#"{"decision": "maybe"}"#).anthropic()),
            "has no boolean `ok`",
        ),
        (
            Reply::status(
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad hook request"}}"#,
            ),
            "the model could not be asked",
        ),
    ] {
        let env = Env::new();
        env.write(
            ".claude/settings.json",
            settings_with(json!({"type": "prompt", "prompt": PROMPT})),
        );
        env.write("notes.txt", "frozen\n");
        let mock = MockModel::start(write_then(reply));
        let output = session(&env, &mock, "write notes", &["--permission-mode", "bypass"]);
        assert_exit(&output, 0);
        let result = mock.result_of("toolu_w");
        assert!(
            result.contains("hooks fail closed") && result.contains(why),
            "{why}: {result}"
        );
        assert_eq!(env.read("notes.txt"), "frozen\n");
    }
}

/// An http hook posts the event to its URL with the secret header it was
/// allowed, and the server's JSON answer decides: a deny refuses the
/// write, an allow lets it run in default mode (which would have refused it
/// in print mode), and a server error denies (fail closed). A header
/// naming a variable the hook did not allow is sent empty.
#[test]
fn an_http_hook_decides_from_the_servers_answer() {
    let answer = |decision: &str| {
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": format!("the server says {decision}")}})
        .to_string()
    };
    let cases = [
        (
            Reply::status(200, answer("deny")),
            Some("the server says deny"),
        ),
        (Reply::status(200, answer("allow")), None),
        (
            Reply::status(503, r#"{"error": "down"}"#),
            Some("answered 503"),
        ),
    ];
    for (reply, denied) in cases {
        let env = Env::new();
        let server = MockModel::start(vec![reply]);
        env.write(
            ".claude/settings.json",
            settings_with(json!({
                "type": "http",
                "url": format!("{}/hooks/pre?team=1", server.url()),
                "headers": {"Authorization": "Bearer $HOOK_TOKEN", "X-Other": "[$PATH]"},
                "allowedEnvVars": ["HOOK_TOKEN"],
                "timeout": 20
            })),
        );
        env.write("notes.txt", "frozen\n");
        let mock = MockModel::start(vec![
            Reply::sse(
                Answer::text("")
                    .call(
                        "toolu_w",
                        "fs__write",
                        json!({"path": "notes.txt", "content": "changed"}),
                    )
                    .anthropic(),
            ),
            Reply::sse(Answer::text("Done.").anthropic()),
        ]);
        let output = session(&env, &mock, "write notes", &[]);
        assert_exit(&output, 0);
        let posted = server.received();
        assert_eq!(posted.len(), 1, "{posted:#?}");
        let posted = &posted[0];
        assert_eq!(posted.method, "POST");
        assert_eq!(posted.path, "/hooks/pre?team=1");
        assert_eq!(posted.body["hook_event_name"], "PreToolUse");
        assert_eq!(posted.body["tool_input"]["path"], "notes.txt");
        assert_eq!(
            posted.header("authorization"),
            Some("Bearer tok-5ecret-value")
        );
        assert_eq!(posted.header("x-other"), Some("[]"));
        let result = mock.result_of("toolu_w");
        match denied {
            Some(why) => {
                assert!(result.contains(why), "{result}");
                assert_eq!(env.read("notes.txt"), "frozen\n");
            }
            None => assert_eq!(env.read("notes.txt"), "changed", "{result}"),
        }
        let notices = stderr(&output);
        assert!(
            notices.contains("http hook")
                && notices.contains(&format!("network: {} only", server.url()))
                && notices.contains("your secret HOOK_TOKEN as Authorization")
                && !notices.contains("tok-5ecret-value"),
            "{notices}"
        );
        assert!(!stdout(&output).contains("tok-5ecret-value"));
    }
}

/// Installing a Claude Code plugin with prompt, http and agent hooks says
/// what each reaches: the model provider; the URL's origin and the secret
/// sent; the model provider and the workspace, read-only.
#[test]
fn the_consent_text_names_what_prompt_http_and_agent_hooks_reach() {
    let env = Env::new();
    let plugin = env.outside.path().join("reviewer");
    write(
        &plugin.join(".claude-plugin/plugin.json"),
        r#"{"name": "reviewer", "version": "1.0.0", "description": "Reviews."}"#,
    );
    write(
        &plugin.join("hooks/hooks.json"),
        &json!({"hooks": {
            "Stop": [{"hooks": [{"type": "prompt", "prompt": "Are all tasks done? $ARGUMENTS"}]}],
            "PostToolUse": [{"matcher": "Edit", "hooks": [
                {"type": "http", "url": "https://hooks.example.com/post",
                 "headers": {"X-Key": "${REVIEW_KEY}"}, "allowedEnvVars": ["REVIEW_KEY"]},
                {"type": "agent", "prompt": "Verify the tests pass"}
            ]}]
        }})
        .to_string(),
    );
    let installed = support::install(&env, &plugin);
    let consent = stdout(&installed) + &stderr(&installed);
    assert!(
        consent.contains("Stop: ")
            && consent.contains("the session's model provider")
            && consent.contains("posts the event as JSON to https://hooks.example.com/post")
            && consent.contains("network: https://hooks.example.com only")
            && consent.contains("your secret REVIEW_KEY as X-Key")
            && consent.contains("an agent hook: a sub-agent on the session's model provider")
            && consent.contains("may read and search the workspace (read-only")
            && !consent.contains("not supported"),
        "{consent}"
    );
}
