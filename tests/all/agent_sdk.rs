//! The official Agent SDKs (Python `claude-agent-sdk`, TypeScript
//! `@anthropic-ai/claude-agent-sdk`, pinned by `just agent-sdks`) driving
//! the real `capstan` binary on a mock model, as an app ported from Claude
//! Code drives it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::Env;
use crate::support::agent_sdk::{Cli, json_lines};
use crate::support::mock_model::{Answer, MockModel, Reply};

/// A Python program: one `query`, every message printed as JSON.
const PY_QUERY: &str = r#"
import anyio, dataclasses, json, os
from claude_agent_sdk import query, ClaudeAgentOptions

async def main():
    options = ClaudeAgentOptions(cli_path=os.environ["CLI"], cwd=os.environ["WS"])
    async for message in query(prompt="say hello", options=options):
        print(json.dumps({"kind": type(message).__name__, **dataclasses.asdict(message)}, default=str), flush=True)

anyio.run(main)
"#;

/// The same in TypeScript.
const JS_QUERY: &str = r#"
import { query } from "@anthropic-ai/claude-agent-sdk";
const options = { pathToClaudeCodeExecutable: process.env.CLI, cwd: process.env.WS };
for await (const message of query({ prompt: "say hello", options })) {
    console.log(JSON.stringify(message));
}
"#;

#[test]
fn python_sdk_query_gets_the_models_answer() {
    let env = Env::new();
    let mock = MockModel::start(vec![Reply::sse(
        Answer::text("hello from the mock").anthropic(),
    )]);
    let out = env.sdk_python(Cli::Capstan, &mock.url(), PY_QUERY);
    let messages = json_lines(&out);
    let result = messages
        .iter()
        .find(|m| m["kind"] == "ResultMessage")
        .unwrap_or_else(|| panic!("no result: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(result["result"], "hello from the mock", "{result}");
    assert_eq!(result["is_error"], false, "{result}");
    assert!(mock.received()[0].first_user_text().contains("say hello"));
}

#[test]
fn typescript_sdk_query_gets_the_models_answer() {
    let env = Env::new();
    let mock = MockModel::start(vec![Reply::sse(
        Answer::text("hello from the mock").anthropic(),
    )]);
    let out = env.sdk_node(Cli::Capstan, &mock.url(), JS_QUERY);
    let messages = json_lines(&out);
    let result = messages
        .iter()
        .find(|m| m["type"] == "result")
        .unwrap_or_else(|| panic!("no result: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(result["result"], "hello from the mock", "{result}");
    assert_eq!(result["is_error"], false, "{result}");
    assert!(mock.received()[0].first_user_text().contains("say hello"));
}
