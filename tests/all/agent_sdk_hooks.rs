//! The Agent SDKs' hook callbacks (`hooks` in `initialize`, called back
//! with `hook_callback` control requests) driving the real `capstan`
//! binary: a deny holds (the file is not read, not written), a callback
//! that fails or runs out of time denies, `updatedInput` is what runs,
//! and a UserPromptSubmit hook's context reaches the model. What capstan
//! cannot honour in `initialize` stops the SDK before any prompt.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};

use crate::support::Env;
use crate::support::agent_sdk::{Cli, json_lines};
use crate::support::mock_model::{Answer, MockModel, Reply};

/// The model reads a.txt and secret.txt and writes out.txt and
/// slow.txt, in one answer, then finishes.
fn mock() -> MockModel {
    MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call("toolu_a", "fs__read", json!({"path": "a.txt"}))
                .call("toolu_secret", "fs__read", json!({"path": "secret.txt"}))
                .call(
                    "toolu_out",
                    "fs__write",
                    json!({"path": "out.txt", "content": "written\n"}),
                )
                .call(
                    "toolu_slow",
                    "fs__write",
                    json!({"path": "slow.txt", "content": "written\n"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("all done").anthropic()),
    ])
}

fn workspace() -> Env {
    let env = Env::new();
    env.write("a.txt", "CONTENT-OF-A\n");
    env.write("b.txt", "CONTENT-OF-B\n");
    env.write("secret.txt", "TOP-SECRET-VALUE\n");
    env
}

/// The hooks, in Python: UserPromptSubmit adds context; on Read, a.txt
/// is redirected to b.txt and secret.txt denied; on Write (1 s timeout),
/// out.txt raises and slow.txt answers too late.
const PY_HOOKS: &str = r#"
import anyio, dataclasses, json, os
from claude_agent_sdk import query, ClaudeAgentOptions, HookMatcher

async def on_prompt(input_data, tool_use_id, context):
    return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "CONTEXT-FROM-SDK-HOOK"}}

async def on_read(input_data, tool_use_id, context):
    tool_input = input_data["tool_input"]
    if tool_input["path"] == "secret.txt":
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "DENIED-BY-SDK-HOOK"}}
    if tool_input["path"] == "a.txt":
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {**tool_input, "path": "b.txt"}}}
    return {}

async def on_write(input_data, tool_use_id, context):
    if input_data["tool_input"]["path"] == "slow.txt":
        await anyio.sleep(5)
        return {}
    raise RuntimeError("the hook broke")

async def main():
    options = ClaudeAgentOptions(
        cli_path=os.environ["CLI"], cwd=os.environ["WS"], permission_mode="acceptEdits",
        hooks={
            "UserPromptSubmit": [HookMatcher(hooks=[on_prompt])],
            "PreToolUse": [HookMatcher(matcher="Read", hooks=[on_read]), HookMatcher(matcher="Write", hooks=[on_write], timeout=1)],
        },
    )
    async for message in query(prompt="do the work", options=options):
        print(json.dumps({"kind": type(message).__name__, **dataclasses.asdict(message)}, default=str), flush=True)

anyio.run(main)
"#;

/// The same hooks in TypeScript.
const JS_HOOKS: &str = r#"
import { query } from "@anthropic-ai/claude-agent-sdk";
const onPrompt = async () => ({ hookSpecificOutput: { hookEventName: "UserPromptSubmit", additionalContext: "CONTEXT-FROM-SDK-HOOK" } });
const onRead = async (input) => {
    const toolInput = input.tool_input;
    if (toolInput.path === "secret.txt") {
        return { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: "DENIED-BY-SDK-HOOK" } };
    }
    if (toolInput.path === "a.txt") {
        return { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "allow", updatedInput: { ...toolInput, path: "b.txt" } } };
    }
    return {};
};
const onWrite = async (input) => {
    if (input.tool_input.path === "slow.txt") {
        await new Promise((resolve) => setTimeout(resolve, 5000));
        return {};
    }
    throw new Error("the hook broke");
};
const options = {
    pathToClaudeCodeExecutable: process.env.CLI, cwd: process.env.WS, permissionMode: "acceptEdits",
    hooks: {
        UserPromptSubmit: [{ hooks: [onPrompt] }],
        PreToolUse: [{ matcher: "Read", hooks: [onRead] }, { matcher: "Write", hooks: [onWrite], timeout: 1 }],
    },
};
for await (const message of query({ prompt: "do the work", options })) {
    console.log(JSON.stringify(message));
}
"#;

/// What both SDKs' runs must show.
fn assert_hooks_held(env: &Env, mock: &MockModel, out: &std::process::Output, result: &Value) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(result["result"], "all done", "{result}\n{stderr}");
    let received = mock.received();
    assert_eq!(received.len(), 2, "{stderr}");
    // UserPromptSubmit's context reached the model with the prompt.
    let first = received[0].body["messages"].to_string();
    assert!(first.contains("CONTEXT-FROM-SDK-HOOK"), "{first}");
    // updatedInput ran: b.txt was read in place of a.txt.
    let (a, a_error) = mock.tool_result("toolu_a");
    assert!(!a_error && a.contains("CONTENT-OF-B"), "{a}");
    assert!(!a.contains("CONTENT-OF-A"), "{a}");
    // The deny held: the model got the hook's reason, not the file.
    let (secret, secret_error) = mock.tool_result("toolu_secret");
    assert!(secret_error, "{secret}");
    assert!(secret.contains("DENIED-BY-SDK-HOOK"), "{secret}");
    let everything: String = received.iter().map(|r| r.body.to_string()).collect();
    assert!(
        !everything.contains("TOP-SECRET-VALUE"),
        "the secret leaked"
    );
    // A callback that raised, and one that answered too late, denied
    // their writes (fail closed).
    for (id, file) in [("toolu_out", "out.txt"), ("toolu_slow", "slow.txt")] {
        let (text, is_error) = mock.tool_result(id);
        assert!(is_error, "{id}: {text}");
        assert!(text.contains("hook"), "{id}: {text}");
        assert!(!env.ws.path().join(file).exists(), "{file} was written");
    }
}

#[test]
fn python_sdk_hooks_are_called_back_and_fail_closed() {
    let env = workspace();
    let mock = mock();
    let out = env.sdk_python(Cli::Capstan, &mock.url(), PY_HOOKS);
    let messages = json_lines(&out);
    let result = messages
        .iter()
        .find(|m| m["kind"] == "ResultMessage")
        .unwrap_or_else(|| panic!("no result: {}", String::from_utf8_lossy(&out.stderr)));
    assert_hooks_held(&env, &mock, &out, result);
}

#[test]
fn typescript_sdk_hooks_are_called_back_and_fail_closed() {
    let env = workspace();
    let mock = mock();
    let out = env.sdk_node(Cli::Capstan, &mock.url(), JS_HOOKS);
    let messages = json_lines(&out);
    let result = messages
        .iter()
        .find(|m| m["type"] == "result")
        .unwrap_or_else(|| panic!("no result: {}", String::from_utf8_lossy(&out.stderr)));
    assert_hooks_held(&env, &mock, &out, result);
}

/// An `initialize` with options capstan cannot honour (sub-agents
/// defined in it) is answered with an error naming the option, and no
/// prompt reaches the model: Python raises it at connect; TypeScript,
/// which sends its prompt whatever the answer, gets it in an error result.
const PY_AGENTS: &str = r#"
import anyio, os
from claude_agent_sdk import query, ClaudeAgentOptions, AgentDefinition

async def main():
    options = ClaudeAgentOptions(cli_path=os.environ["CLI"], cwd=os.environ["WS"],
        agents={"reviewer": AgentDefinition(description="reviews", prompt="review")})
    try:
        async for message in query(prompt="hi", options=options):
            print("MESSAGE", type(message).__name__, flush=True)
    except Exception as e:
        print("ERROR", e, flush=True)

anyio.run(main)
"#;

const JS_AGENTS: &str = r#"
import { query } from "@anthropic-ai/claude-agent-sdk";
const options = { pathToClaudeCodeExecutable: process.env.CLI, cwd: process.env.WS,
    agents: { reviewer: { description: "reviews", prompt: "review" } } };
try {
    for await (const message of query({ prompt: "hi", options })) {
        console.log("MESSAGE", JSON.stringify(message));
    }
} catch (e) {
    console.log("ERROR", String(e));
}
"#;

#[test]
fn an_initialize_capstan_cannot_honour_stops_both_sdks() {
    for sdk in ["python", "typescript"] {
        let env = Env::new();
        let mock = MockModel::start(vec![Reply::sse(Answer::text("should not run").anthropic())]);
        let out = match sdk {
            "python" => env.sdk_python(Cli::Capstan, &mock.url(), PY_AGENTS),
            _ => env.sdk_node(Cli::Capstan, &mock.url(), JS_AGENTS),
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let error = stdout
            .lines()
            .find(|l| {
                l.starts_with("ERROR")
                    || (l.starts_with("MESSAGE") && l.contains(r#""is_error":true"#))
            })
            .unwrap_or_else(|| {
                panic!(
                    "{sdk}: no error\n{stdout}\n{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            });
        assert!(error.contains("`agents`"), "{sdk}: {error}");
        assert!(!stdout.contains("should not run"), "{sdk}: {stdout}");
        assert!(
            mock.received().is_empty(),
            "{sdk}: a prompt reached the model"
        );
    }
}
