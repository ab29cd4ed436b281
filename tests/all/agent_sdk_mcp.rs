//! The Agent SDKs' in-process MCP servers (Python's
//! `create_sdk_mcp_server`, given as `{"type": "sdk"}` in `--mcp-config`;
//! TypeScript's `createSdkMcpServer`, named in `initialize`'s
//! `sdkMcpServers`) driving the real `capstan` binary: their tools are
//! called through `mcp_message` control requests, the result reaches the
//! model, and a deny rule on them holds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;

use crate::support::Env;
use crate::support::agent_sdk::{Cli, json_lines};
use crate::support::mock_model::{Answer, MockModel, Reply};

fn mock() -> MockModel {
    MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call("toolu_add", "mcp__calc__add", json!({"a": 2, "b": 3}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("added").anthropic()),
    ])
}

/// A Python program with the server `calc` and its tool `add`, which
/// also leaves a file `ran.txt` in the workspace; `RULES` are its
/// permission options.
const PY_MCP: &str = r#"
import anyio, dataclasses, json, os
from claude_agent_sdk import query, ClaudeAgentOptions, tool, create_sdk_mcp_server

@tool("add", "Add two numbers", {"a": int, "b": int})
async def add(args):
    with open(os.path.join(os.environ["WS"], "ran.txt"), "w") as f:
        f.write("ran")
    return {"content": [{"type": "text", "text": f"SUM-IS-{args['a'] + args['b']}"}]}

async def main():
    server = create_sdk_mcp_server(name="calc", version="1.0.0", tools=[add])
    options = ClaudeAgentOptions(cli_path=os.environ["CLI"], cwd=os.environ["WS"],
        mcp_servers={"calc": server}, RULES)
    async for message in query(prompt="add 2 and 3", options=options):
        print(json.dumps({"kind": type(message).__name__, **dataclasses.asdict(message)}, default=str), flush=True)

anyio.run(main)
"#;

const JS_MCP: &str = r#"
import { query, tool, createSdkMcpServer } from "@anthropic-ai/claude-agent-sdk";
import { z } from "zod";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
const calc = createSdkMcpServer({ name: "calc", version: "1.0.0", tools: [
    tool("add", "Add two numbers", { a: z.number(), b: z.number() }, async (args) => {
        writeFileSync(join(process.env.WS, "ran.txt"), "ran");
        return { content: [{ type: "text", text: `SUM-IS-${args.a + args.b}` }] };
    }),
] });
const options = { pathToClaudeCodeExecutable: process.env.CLI, cwd: process.env.WS,
    mcpServers: { calc }, RULES };
for await (const message of query({ prompt: "add 2 and 3", options })) {
    console.log(JSON.stringify(message));
}
"#;

/// Runs the program of `sdk` with `rules` in its options.
fn run(sdk: &str, rules: &str) -> (Env, MockModel, std::process::Output) {
    let env = Env::new();
    let mock = mock();
    let out = match sdk {
        "python" => env.sdk_python(Cli::Capstan, &mock.url(), &PY_MCP.replace("RULES", rules)),
        _ => env.sdk_node(Cli::Capstan, &mock.url(), &JS_MCP.replace("RULES", rules)),
    };
    (env, mock, out)
}

fn result_of(sdk: &str, out: &std::process::Output) -> serde_json::Value {
    let key = if sdk == "python" { "kind" } else { "type" };
    let wanted = if sdk == "python" {
        "ResultMessage"
    } else {
        "result"
    };
    json_lines(out)
        .into_iter()
        .find(|m| m[key] == wanted)
        .unwrap_or_else(|| {
            panic!(
                "{sdk}: no result\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

fn assert_tool_ran(sdk: &str, rules: &str) {
    let (env, mock, out) = run(sdk, rules);
    let result = result_of(sdk, &out);
    assert_eq!(result["result"], "added", "{sdk}: {result}");
    let (text, is_error) = mock.tool_result("toolu_add");
    assert!(!is_error, "{sdk}: {text}");
    assert!(text.contains("SUM-IS-5"), "{sdk}: {text}");
    assert_eq!(env.read("ran.txt"), "ran");
}

fn assert_tool_denied(sdk: &str, rules: &str) {
    let (env, mock, out) = run(sdk, rules);
    let result = result_of(sdk, &out);
    assert_eq!(result["result"], "added", "{sdk}: {result}");
    let (text, is_error) = mock.tool_result("toolu_add");
    assert!(is_error, "{sdk}: {text}");
    assert!(!text.contains("SUM-IS"), "{sdk}: {text}");
    assert!(
        !env.ws.path().join("ran.txt").exists(),
        "{sdk}: the denied tool ran"
    );
}

#[test]
fn python_sdk_mcp_tool_result_reaches_the_model() {
    assert_tool_ran("python", r#"allowed_tools=["mcp__calc__add"]"#);
}

#[test]
fn typescript_sdk_mcp_tool_result_reaches_the_model() {
    assert_tool_ran("typescript", r#"allowedTools: ["mcp__calc__add"]"#);
}

#[test]
fn a_deny_rule_holds_on_python_sdk_mcp_tools() {
    assert_tool_denied(
        "python",
        r#"allowed_tools=["mcp__calc__add"], disallowed_tools=["mcp__calc__add"]"#,
    );
}

#[test]
fn a_deny_rule_holds_on_typescript_sdk_mcp_tools() {
    assert_tool_denied(
        "typescript",
        r#"allowedTools: ["mcp__calc__add"], disallowedTools: ["mcp__calc__add"]"#,
    );
}
