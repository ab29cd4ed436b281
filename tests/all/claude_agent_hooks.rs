//! Claude Code agent hooks, through the real binary: the hook's sub-agent
//! runs on the session's model (the mock) with Read, Grep and Glob only,
//! reads what it needs, and its `{ok, reason}` answer decides; anything
//! else denies a blocking event (fail closed), and it cannot write.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};

use crate::support;
use support::mock_model::{Answer, MockModel, Reply};
use support::{Env, assert_exit, stderr};

const RUN_TIMEOUT: Duration = Duration::from_secs(90);

const PROMPT: &str = "Read policy.txt and refuse any write it forbids. The call: $ARGUMENTS";

fn session(env: &Env, mock: &MockModel, mode: &str) -> std::process::Output {
    let mut cmd = env.anthropic_session(
        &mock.url(),
        "sk-ant-mock",
        "claude-sonnet-4-5",
        "write notes",
    );
    cmd.timeout(RUN_TIMEOUT)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(["--output-format", "json", "--trust-project-hooks"])
        .args(["--permission-mode", mode]);
    cmd.output().unwrap()
}

/// A project whose settings hold one PreToolUse agent hook on Write, with
/// notes.txt and the policy the hook reads.
fn project() -> Env {
    let env = Env::new();
    env.write(
        ".claude/settings.json",
        json!({"hooks": {"PreToolUse": [{"matcher": "Write", "hooks": [
            {"type": "agent", "prompt": PROMPT, "timeout": 60}
        ]}]}})
        .to_string(),
    );
    env.write("notes.txt", "frozen\n");
    env.write("policy.txt", "notes.txt is frozen until the release.\n");
    env
}

/// The model writes notes.txt; the hook's sub-agent answers with
/// `hook_replies`; the model closes.
fn write_then(hook_replies: Vec<Reply>) -> Vec<Reply> {
    let mut replies = vec![Reply::sse(
        Answer::text("")
            .call(
                "toolu_w",
                "fs__write",
                json!({"path": "notes.txt", "content": "changed"}),
            )
            .anthropic(),
    )];
    replies.extend(hook_replies);
    replies.push(Reply::sse(Answer::text("Done.").anthropic()));
    replies
}

fn tool_names(request: &Value) -> Vec<String> {
    let mut names: Vec<String> = request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// The sub-agent reads policy.txt with a read-only tool, then answers no:
/// the write is refused with its reason. It was offered Read, Grep and
/// Glob only, told the event's JSON in place of `$ARGUMENTS`, its tokens
/// count in the session's usage, and the notice says what an agent hook
/// reaches.
#[test]
fn an_agent_hook_reads_a_file_and_blocks_a_write() {
    let env = project();
    let mock = MockModel::start(write_then(vec![
        Reply::sse(
            Answer::text("Checking the policy.")
                .call("toolu_hr", "fs__read", json!({"path": "policy.txt"}))
                .anthropic(),
        ),
        Reply::sse(
            Answer::text(r#"{"ok": false, "reason": "policy.txt freezes notes.txt"}"#).anthropic(),
        ),
    ]));
    let output = session(&env, &mock, "accept-edits");
    assert_exit(&output, 0);
    assert_eq!(mock.replies_left(), 0, "{}", stderr(&output));
    let result = mock.result_of("toolu_w");
    assert!(result.contains("policy.txt freezes notes.txt"), "{result}");
    assert_eq!(env.read("notes.txt"), "frozen\n");
    let received = mock.received();
    let asked = &received[1];
    assert_eq!(
        tool_names(&asked.body),
        ["fs__glob", "fs__grep", "fs__read"]
    );
    let text = asked.first_user_text();
    assert!(
        text.starts_with("Read policy.txt and refuse any write it forbids. The call: {")
            && text.contains("\"tool_input\"")
            && text.contains("\"hook_event_name\":\"PreToolUse\"")
            && !text.contains("$ARGUMENTS"),
        "{text}"
    );
    let system = asked.system_text();
    assert!(
        system.contains("{\"ok\": true}") && system.contains("cannot change anything"),
        "{system}"
    );
    let (read, is_error) = received[2].tool_result("toolu_hr");
    assert!(
        !is_error && read.contains("frozen until the release"),
        "{read}"
    );
    // Four requests of 10 input and 5 output tokens each: the session's
    // two and the hook's sub-agent's two.
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["usage"]["input_tokens"], 40, "{result}");
    assert_eq!(result["usage"]["output_tokens"], 20, "{result}");
    let notices = stderr(&output);
    assert!(
        notices.contains("agent hook")
            && notices.contains("read-only")
            && notices.contains("no network"),
        "{notices}"
    );
}

/// A sub-agent that answers `{"ok": true}` lets the write run.
#[test]
fn an_agent_hook_that_answers_ok_lets_the_write_run() {
    let env = project();
    let mock = MockModel::start(write_then(vec![Reply::sse(
        Answer::text("Nothing in the policy forbids it.\n{\"ok\": true}").anthropic(),
    )]));
    let output = session(&env, &mock, "accept-edits");
    assert_exit(&output, 0);
    assert_eq!(env.read("notes.txt"), "changed");
    assert_eq!(mock.replies_left(), 0);
}

/// A sub-agent whose final answer is not `{ok, reason}`, or whose model
/// request fails, denies the write on a blocking event, even in bypass
/// mode, and the reason says why.
#[test]
fn an_agent_hook_with_a_malformed_or_failed_answer_denies() {
    for (reply, why) in [
        (
            Reply::sse(Answer::text("Looks fine to me!").anthropic()),
            "not the JSON object a prompt hook needs",
        ),
        (
            Reply::status(
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad hook request"}}"#,
            ),
            "its model could not be asked",
        ),
    ] {
        let env = project();
        let mock = MockModel::start(write_then(vec![reply]));
        let output = session(&env, &mock, "bypass");
        assert_exit(&output, 0);
        let result = mock.result_of("toolu_w");
        assert!(
            result.contains("hooks fail closed") && result.contains(why),
            "{why}: {result}"
        );
        assert_eq!(env.read("notes.txt"), "frozen\n");
    }
}

/// The sub-agent's own writes are refused, in bypass mode: `fs.write` and
/// `exec.run` are not its tools, so nothing is written; its answer still
/// decides.
#[test]
fn an_agent_hooks_sub_agent_cannot_write() {
    let env = project();
    let mock = MockModel::start(write_then(vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "toolu_hw",
                    "fs__write",
                    json!({"path": "hacked.txt", "content": "x"}),
                )
                .call(
                    "toolu_hx",
                    "exec__run",
                    json!({"command": "echo x > hacked.txt", "write": true}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text(r#"{"ok": true}"#).anthropic()),
    ]));
    let output = session(&env, &mock, "bypass");
    assert_exit(&output, 0);
    assert_eq!(mock.replies_left(), 0, "{}", stderr(&output));
    let received = mock.received();
    for id in ["toolu_hw", "toolu_hx"] {
        let (refused, is_error) = received[2].tool_result(id);
        assert!(
            is_error && refused.contains("There is no tool called"),
            "{id}: {refused}"
        );
    }
    assert!(!env.ws_path().join("hacked.txt").exists());
    assert_eq!(env.read("notes.txt"), "changed");
}
