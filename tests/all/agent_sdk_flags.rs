//! The flags and control requests the official Agent SDKs send, honoured
//! by the real `capstan` binary on a mock model: retries, budgets,
//! structured output, the built-in tool set, extra folders, setting
//! sources, and the control requests about MCP servers, context and
//! checkpoints. Each test drives the Python or TypeScript SDK (both where
//! the SDK exposes the option) and asserts on effects: the requests the
//! mock received, the files, what the model was sent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;

use crate::support::Env;
use crate::support::agent_sdk::{Cli, json_lines};
use crate::support::mock_model::{MockModel, Reply, anthropic_error};

/// A Python program that runs one `query` with the options `OPTIONS`
/// (Python keyword arguments of `ClaudeAgentOptions`) and prints every
/// message as JSON, with its class name as `kind`.
fn py_query(prompt: &str, options: &str) -> String {
    format!(
        r#"
import anyio, dataclasses, json, os, sys
from claude_agent_sdk import query, ClaudeAgentOptions

async def main():
    options = ClaudeAgentOptions(cli_path=os.environ["CLI"], cwd=os.environ["WS"], {options})
    async for message in query(prompt={prompt:?}, options=options):
        print(json.dumps({{"kind": type(message).__name__, **dataclasses.asdict(message)}}, default=str), flush=True)

anyio.run(main)
"#
    )
}

/// A JavaScript module that runs one `query` with the extra options
/// `OPTIONS` (an object literal's members) and prints every message.
fn js_query(prompt: &str, options: &str) -> String {
    format!(
        r#"
import {{ query }} from "@anthropic-ai/claude-agent-sdk";
const options = {{ pathToClaudeCodeExecutable: process.env.CLI, cwd: process.env.WS, {options} }};
for await (const message of query({{ prompt: {prompt:?}, options }})) {{
    console.log(JSON.stringify(message));
}}
"#
    )
}

/// The result message a program printed (Python's `ResultMessage` or the
/// TypeScript SDK's `result`), or a failure showing what it printed.
fn result_of(out: &std::process::Output) -> Value {
    json_lines(out)
        .into_iter()
        .find(|m| m["kind"] == "ResultMessage" || m["type"] == "result")
        .unwrap_or_else(|| {
            panic!(
                "no result\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// `n` answers of HTTP `status` that ask to be retried at once.
fn failures(status: u16, n: usize) -> Vec<Reply> {
    let kind = if status == 529 {
        "overloaded_error"
    } else {
        "api_error"
    };
    (0..n)
        .map(|_| {
            Reply::status(status, anthropic_error(kind, "try again")).header("retry-after", "0")
        })
        .collect()
}

// --- Retries -------------------------------------------------------------

#[test]
fn python_sdk_retry_count_comes_from_claude_codes_variable() {
    let env = Env::new();
    let mock = MockModel::start(failures(500, 6));
    let out = env.sdk_python(
        Cli::Capstan,
        &mock.url(),
        &py_query("hi", r#"env={"CLAUDE_CODE_MAX_RETRIES": "2"}"#),
    );
    let _ = json_lines(&out);
    assert_eq!(
        mock.received().len(),
        3,
        "one request and two retries\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn typescript_sdk_retry_count_zero_means_no_retry() {
    let env = Env::new();
    let mock = MockModel::start(failures(529, 6));
    let out = env.sdk_node(
        Cli::Capstan,
        &mock.url(),
        &js_query(
            "hi",
            r#"env: { ...process.env, CLAUDE_CODE_MAX_RETRIES: "0" }"#,
        ),
    );
    let result = result_of(&out);
    assert_eq!(result["is_error"], true, "{result}");
    assert_eq!(mock.received().len(), 1, "no retry");
}

#[test]
fn config_sets_the_retry_count_and_the_variable_overrides_it() {
    let env = Env::new();
    std::fs::write(
        env.home.path().join("config.toml"),
        "[model]\nmax_retries = 1\n",
    )
    .unwrap();
    let mock = MockModel::start(failures(500, 6));
    let out = env.sdk_python(Cli::Capstan, &mock.url(), &py_query("hi", "max_turns=3"));
    let _ = out;
    assert_eq!(mock.received().len(), 2, "one request and one retry");

    let mock = MockModel::start(failures(500, 6));
    let out = env
        .cli_std(Cli::Capstan, &mock.url())
        .env("CAPSTAN_MAX_RETRIES", "3")
        .args(["-p", "hi", "--output-format", "json"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        mock.received().len(),
        4,
        "the variable wins over the config"
    );

    let out = env
        .cli_std(Cli::Capstan, &mock.url())
        .env("CAPSTAN_MAX_RETRIES", "many")
        .args(["-p", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CAPSTAN_MAX_RETRIES"));
}
