//! The flags and control requests the official Agent SDKs send, honoured
//! by the real `capstan` binary on a mock model: retries, budgets,
//! structured output, the built-in tool set, extra folders, setting
//! sources, and the control requests about MCP servers, context and
//! checkpoints. Each test drives the Python or TypeScript SDK (both where
//! the SDK exposes the option) and asserts on effects: the requests the
//! mock received, the files, what the model was sent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};

use crate::support::Env;
use crate::support::agent_sdk::{Cli, json_lines, labelled};
use crate::support::mock_model::{Answer, MockModel, Reply, anthropic_error};

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

// --- Budget ----------------------------------------------------------------

/// An answer that costs about $0.02 on claude-sonnet-4-5 and asks to
/// write `spent.txt`.
fn costly_write() -> Reply {
    Reply::sse(
        Answer::text("")
            .call(
                "toolu_w",
                "fs__write",
                json!({"path": "spent.txt", "content": "written"}),
            )
            .tokens(crate::support::mock_model::Tokens {
                input: 5000,
                output: 500,
                cache_read: 0,
                cache_creation: 0,
            })
            .anthropic(),
    )
}

#[test]
fn python_sdk_budget_stops_before_the_calls_run() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        costly_write(),
        Reply::sse(Answer::text("done").anthropic()),
    ]);
    let out = env.sdk_python(
        Cli::Capstan,
        &mock.url(),
        &py_query(
            "write it",
            r#"max_budget_usd=0.001, permission_mode="bypassPermissions""#,
        ),
    );
    let result = result_of(&out);
    assert_eq!(result["subtype"], "error_max_budget_usd", "{result}");
    assert_eq!(result["is_error"], true);
    assert_eq!(mock.received().len(), 1, "no request after the budget");
    assert!(
        !env.ws.path().join("spent.txt").exists(),
        "the call past the budget ran"
    );
}

#[test]
fn typescript_sdk_budget_left_lets_the_prompt_finish() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        costly_write(),
        Reply::sse(Answer::text("done").anthropic()),
    ]);
    let out = env.sdk_node(
        Cli::Capstan,
        &mock.url(),
        &js_query(
            "write it",
            r#"maxBudgetUsd: 5, permissionMode: "bypassPermissions""#,
        ),
    );
    let result = result_of(&out);
    assert_eq!(result["subtype"], "success", "{result}");
    assert_eq!(env.read("spent.txt"), "written");

    let mock = MockModel::start(vec![
        costly_write(),
        Reply::sse(Answer::text("done").anthropic()),
    ]);
    let out = env.sdk_node(
        Cli::Capstan,
        &mock.url(),
        &js_query(
            "write it again",
            r#"maxBudgetUsd: 0.001, permissionMode: "bypassPermissions""#,
        ),
    );
    let result = result_of(&out);
    assert_eq!(result["subtype"], "error_max_budget_usd", "{result}");
    assert_eq!(mock.received().len(), 1);
}

// --- Structured output -------------------------------------------------------

const SCHEMA: &str = r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#;

#[test]
fn python_sdk_structured_output_comes_back_in_the_result() {
    let env = Env::new();
    let mock = MockModel::start(vec![Reply::sse(
        Answer::text("")
            .call("toolu_s", "StructuredOutput", json!({"n": 3}))
            .anthropic(),
    )]);
    let out = env.sdk_python(
        Cli::Capstan,
        &mock.url(),
        &py_query(
            "give n",
            &format!(
                r#"output_format={{"type": "json_schema", "schema": json.loads({SCHEMA:?})}}"#
            ),
        ),
    );
    let result = result_of(&out);
    assert_eq!(result["subtype"], "success", "{result}");
    assert_eq!(result["structured_output"], json!({"n": 3}), "{result}");
    let received = mock.received();
    assert_eq!(received.len(), 1, "the valid output ends the prompt");
    let tool = received[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "StructuredOutput")
        .cloned()
        .expect("the StructuredOutput tool is offered");
    assert_eq!(
        tool["input_schema"],
        serde_json::from_str::<Value>(SCHEMA).unwrap()
    );
}

#[test]
fn typescript_sdk_structured_output_that_does_not_fit_is_sent_back() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call("toolu_bad", "StructuredOutput", json!({"n": "three"}))
                .anthropic(),
        ),
        Reply::sse(
            Answer::text("")
                .call("toolu_good", "StructuredOutput", json!({"n": 4}))
                .anthropic(),
        ),
    ]);
    let out = env.sdk_node(
        Cli::Capstan,
        &mock.url(),
        &js_query(
            "give n",
            &format!(r#"outputFormat: {{ type: "json_schema", schema: {SCHEMA} }}"#),
        ),
    );
    let result = result_of(&out);
    assert_eq!(result["structured_output"], json!({"n": 4}), "{result}");
    let (text, is_error) = mock.tool_result("toolu_bad");
    assert!(is_error, "{text}");
    assert!(text.contains("`/n` must be integer"), "{text}");
    assert_eq!(mock.received().len(), 2);
}

#[test]
fn an_answer_without_structured_output_is_reminded_once() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        Reply::sse(Answer::text("no tool").anthropic()),
        Reply::sse(Answer::text("still no tool").anthropic()),
    ]);
    let out = env
        .cli_std(Cli::Capstan, &mock.url())
        .args([
            "-p",
            "give n",
            "--output-format",
            "json",
            "--json-schema",
            SCHEMA,
        ])
        .output()
        .unwrap();
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["subtype"], "success", "{result}");
    assert!(result.get("structured_output").is_none(), "{result}");
    let received = mock.received();
    assert_eq!(received.len(), 2);
    let last = received[1].messages().last().unwrap().to_string();
    assert!(
        last.contains("You MUST call the StructuredOutput tool"),
        "{last}"
    );
}

// --- Built-in tools ------------------------------------------------------------

/// The names of the tools request `n` offered.
fn offered(mock: &MockModel, n: usize) -> Vec<String> {
    mock.received()[n].body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn python_sdk_tools_limit_the_built_in_tools() {
    let env = Env::new();
    let mock = MockModel::start(vec![Reply::sse(Answer::text("ok").anthropic())]);
    let out = env.sdk_python(
        Cli::Capstan,
        &mock.url(),
        &py_query("hi", r#"tools=["Read"]"#),
    );
    assert_eq!(result_of(&out)["is_error"], false);
    let names = offered(&mock, 0);
    assert!(names.contains(&"fs__read".to_string()), "{names:?}");
    for gone in ["fs__write", "fs__edit", "exec__run"] {
        assert!(!names.contains(&gone.to_string()), "{gone} in {names:?}");
    }
}

#[test]
fn typescript_sdk_empty_tools_offer_none_and_calls_are_refused() {
    let env = Env::new();
    env.write("secret.txt", "hidden words");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call("toolu_r", "fs__read", json!({"path": "secret.txt"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("ok").anthropic()),
    ]);
    let out = env.sdk_node(Cli::Capstan, &mock.url(), &js_query("hi", "tools: []"));
    let _ = result_of(&out);
    assert!(offered(&mock, 0).is_empty(), "{:?}", offered(&mock, 0));
    let (text, is_error) = mock.tool_result("toolu_r");
    assert!(is_error, "{text}");
    assert!(!text.contains("hidden words"), "{text}");
}

// --- Setting sources -------------------------------------------------------------

/// A project CLAUDE.md and skill, and a user skill, each with a marker.
fn put_sources(env: &Env) {
    env.write("CLAUDE.md", "PROJECT-MARKER-7 rules of the project\n");
    env.write(
        ".claude/skills/proj-skill/SKILL.md",
        "---\nname: proj-skill\ndescription: PROJECT-SKILL-MARKER\n---\nbody\n",
    );
    let user = env.home.path().join(".claude/skills/user-skill");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("SKILL.md"),
        "---\nname: user-skill\ndescription: USER-SKILL-MARKER\n---\nbody\n",
    )
    .unwrap();
}

#[test]
fn python_sdk_setting_sources_choose_what_is_read() {
    let env = Env::new();
    put_sources(&env);
    let mock = MockModel::start(vec![
        Reply::sse(Answer::text("ok").anthropic()),
        Reply::sse(Answer::text("ok").anthropic()),
    ]);
    let out = env.sdk_python(
        Cli::Capstan,
        &mock.url(),
        &py_query(
            "hi",
            r#"setting_sources=["user"], system_prompt={"type": "preset", "preset": "claude_code"}"#,
        ),
    );
    assert_eq!(result_of(&out)["is_error"], false);
    let system = mock.received()[0].system_text();
    assert!(!system.contains("PROJECT-MARKER-7"), "{system}");
    assert!(!system.contains("PROJECT-SKILL-MARKER"), "{system}");
    assert!(system.contains("USER-SKILL-MARKER"), "{system}");

    let out = env.sdk_python(
        Cli::Capstan,
        &mock.url(),
        &py_query(
            "hi",
            r#"setting_sources=["project"], system_prompt={"type": "preset", "preset": "claude_code"}"#,
        ),
    );
    assert_eq!(result_of(&out)["is_error"], false);
    let system = mock.received()[1].system_text();
    assert!(system.contains("PROJECT-MARKER-7"), "{system}");
    assert!(system.contains("PROJECT-SKILL-MARKER"), "{system}");
    assert!(!system.contains("USER-SKILL-MARKER"), "{system}");
}

#[test]
fn typescript_sdk_no_setting_sources_reads_none() {
    let env = Env::new();
    put_sources(&env);
    std::fs::create_dir_all(env.ws.path().join(".capstan")).unwrap();
    env.write(
        ".capstan/config.toml",
        "[permissions]\ndeny = [\"fs.read\"]\n",
    );
    env.write("a.txt", "readable words");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call("toolu_r", "fs__read", json!({"path": "a.txt"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("ok").anthropic()),
    ]);
    let out = env.sdk_node(
        Cli::Capstan,
        &mock.url(),
        &js_query(
            "hi",
            r#"settingSources: [], systemPrompt: { type: "preset", preset: "claude_code" }"#,
        ),
    );
    let _ = result_of(&out);
    let system = mock.received()[0].system_text();
    for marker in [
        "PROJECT-MARKER-7",
        "PROJECT-SKILL-MARKER",
        "USER-SKILL-MARKER",
    ] {
        assert!(!system.contains(marker), "{marker} in {system}");
    }
    // The project's deny rule was not read either.
    let (text, is_error) = mock.tool_result("toolu_r");
    assert!(!is_error && text.contains("readable words"), "{text}");
}

// --- --settings ----------------------------------------------------------------------

#[test]
fn python_sdk_settings_rules_apply() {
    let env = Env::new();
    env.write("a.txt", "readable words");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call("toolu_r", "fs__read", json!({"path": "a.txt"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("ok").anthropic()),
    ]);
    let out = env.sdk_python(
        Cli::Capstan,
        &mock.url(),
        &py_query(
            "hi",
            r#"settings=json.dumps({"permissions": {"deny": ["Read(a.txt)"]}})"#,
        ),
    );
    let _ = result_of(&out);
    let (text, is_error) = mock.tool_result("toolu_r");
    assert!(is_error, "{text}");
    assert!(!text.contains("readable words"), "{text}");
}

#[test]
fn typescript_sdk_settings_file_rules_apply() {
    let env = Env::new();
    env.write("a.txt", "readable words");
    let settings = env.outside.path().join("settings.json");
    std::fs::write(&settings, r#"{"permissions": {"deny": ["Read"]}}"#).unwrap();
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call("toolu_r", "fs__read", json!({"path": "a.txt"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("ok").anthropic()),
    ]);
    let out = env.sdk_node(
        Cli::Capstan,
        &mock.url(),
        &js_query(
            "hi",
            &format!("settings: {:?}", settings.display().to_string()),
        ),
    );
    let _ = result_of(&out);
    let (text, is_error) = mock.tool_result("toolu_r");
    assert!(is_error, "{text}");
    assert!(!text.contains("readable words"), "{text}");
}

// --- MCP servers the SDK gives, outside the workspace -----------------------------

/// A FastMCP server with `echo` and `peek` (reads any path), written in
/// `pkg/srv/` of the folder outside the workspace, with a secret beside
/// `pkg` and one in `pkg` itself; the script's path.
fn put_outside_server(env: &Env) -> std::path::PathBuf {
    let root = env.outside.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("pkg/srv")).unwrap();
    std::fs::write(root.join("secret.txt"), "SECRET-BESIDE").unwrap();
    std::fs::write(root.join("pkg/other.txt"), "SECRET-PARENT").unwrap();
    std::fs::write(root.join("pkg/srv/data.txt"), "OWN-DATA").unwrap();
    let script = root.join("pkg/srv/server.py");
    std::fs::write(
        &script,
        r#"
from mcp.server.fastmcp import FastMCP
server = FastMCP("outside")

@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"

@server.tool()
def peek(path: str) -> str:
    """Read a file."""
    with open(path) as f:
        return f.read()

server.run("stdio")
"#,
    )
    .unwrap();
    script
}

/// A server that cannot start: it says why on stderr and exits.
fn put_broken_server(env: &Env) -> std::path::PathBuf {
    let root = env.outside.path().canonicalize().unwrap();
    let script = root.join("broken.py");
    std::fs::write(
        &script,
        "import sys\nsys.stderr.write('cannot start: no database at /nowhere/db\\n')\nsys.exit(3)\n",
    )
    .unwrap();
    script
}

#[test]
fn python_sdk_mcp_server_outside_the_workspace_runs_and_stays_confined() {
    let env = Env::new();
    let script = put_outside_server(&env);
    let broken = put_broken_server(&env);
    let python = crate::support::fastmcp::sdk1_python();
    let root = env.outside.path().canonicalize().unwrap();
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call("toolu_e", "mcp__outside__echo", json!({"text": "hi"}))
                .call(
                    "toolu_own",
                    "mcp__outside__peek",
                    json!({"path": root.join("pkg/srv/data.txt")}),
                )
                .call(
                    "toolu_beside",
                    "mcp__outside__peek",
                    json!({"path": root.join("secret.txt")}),
                )
                .call(
                    "toolu_parent",
                    "mcp__outside__peek",
                    json!({"path": root.join("pkg/other.txt")}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("done").anthropic()),
    ]);
    let program = format!(
        r#"
import anyio, dataclasses, json, os
from claude_agent_sdk import ClaudeSDKClient, ClaudeAgentOptions

async def main():
    options = ClaudeAgentOptions(
        cli_path=os.environ["CLI"], cwd=os.environ["WS"], permission_mode="bypassPermissions",
        mcp_servers={{
            "outside": {{"command": {python:?}, "args": [{script:?}]}},
            "broken": {{"command": {python:?}, "args": [{broken:?}]}},
        }},
    )
    async with ClaudeSDKClient(options=options) as client:
        status = await client.get_mcp_status()
        for _ in range(200):
            if all(s["status"] != "pending" for s in status["mcpServers"]):
                break
            await anyio.sleep(0.05)
            status = await client.get_mcp_status()
        print(json.dumps({{"label": "status", "v": status}}), flush=True)
        await client.query("use the tools")
        async for message in client.receive_response():
            print(json.dumps({{"kind": type(message).__name__, **dataclasses.asdict(message)}}, default=str), flush=True)
        print(json.dumps({{"label": "usage", "v": await client.get_context_usage()}}), flush=True)

anyio.run(main)
"#,
        python = python.display().to_string(),
        script = script.display().to_string(),
        broken = broken.display().to_string(),
    );
    let out = env.sdk_python(Cli::Capstan, &mock.url(), &program);
    let lines = json_lines(&out);
    let labelled = |label: &str| labelled(&out, &lines, label);
    let status = labelled("status");
    let server = |name: &str| {
        status["mcpServers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {status}"))
    };
    assert_eq!(server("outside")["status"], "connected", "{status}");
    let outside = server("outside");
    let tools: Vec<&str> = outside["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(tools, ["echo", "peek"], "{status}");
    assert_eq!(server("broken")["status"], "failed", "{status}");
    let why = server("broken")["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(why.contains("no database at /nowhere/db"), "{status}");
    // The reason is in the init message too.
    let init = lines
        .iter()
        .find(|l| l["kind"] == "SystemMessage" && l["subtype"] == "init")
        .unwrap_or_else(|| panic!("no init: {lines:?}"));
    let entry = init["data"]["mcp_servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "broken")
        .cloned()
        .unwrap();
    assert_eq!(entry["status"], "failed", "{entry}");
    assert!(
        entry["error"]
            .as_str()
            .unwrap_or_default()
            .contains("no database"),
        "{entry}"
    );
    // The server's results reach the model; its own folder is readable,
    // what lies beside it is not.
    assert_eq!(mock.tool_result("toolu_e"), ("echo: hi".to_string(), false));
    assert_eq!(mock.tool_result("toolu_own").0, "OWN-DATA");
    for id in ["toolu_beside", "toolu_parent"] {
        let (text, _) = mock.tool_result(id);
        assert!(!text.contains("SECRET"), "{id}: {text}");
    }
    // Context usage, as Claude Code shapes it.
    let usage = labelled("usage");
    assert!(usage["totalTokens"].as_u64().unwrap() > 0, "{usage}");
    assert_eq!(usage["maxTokens"], 200_000, "{usage}");
    assert_eq!(usage["model"], crate::support::agent_sdk::MODEL, "{usage}");
    let ids: Vec<&str> = usage["categories"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    // (The SDK replaced the system prompt with an empty one: no such part.)
    for id in ["mcp_tools", "messages", "free_space"] {
        assert!(ids.contains(&id), "{id} not in {ids:?}");
    }
    let mcp_tools: Vec<&str> = usage["mcpTools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(mcp_tools, ["mcp__outside__echo", "mcp__outside__peek"]);
    assert_eq!(usage["gridRows"].as_array().unwrap().len(), 10);
}

#[test]
fn typescript_sdk_mcp_servers_are_toggled_and_reconnected() {
    let env = Env::new();
    let script = put_outside_server(&env);
    let python = crate::support::fastmcp::sdk1_python();
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call("toolu_e", "mcp__outside__echo", json!({"text": "back"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("done").anthropic()),
    ]);
    let program = format!(
        r#"
import {{ query }} from "@anthropic-ai/claude-agent-sdk";
let release;
const gate = new Promise((resolve) => (release = resolve));
async function* prompts() {{
    await gate;
    yield {{ type: "user", message: {{ role: "user", content: "go" }}, parent_tool_use_id: null, session_id: "" }};
}}
// The SDK sends `mcpServers` in `initialize`; the flag carries them here.
const servers = {{ mcpServers: {{ outside: {{ command: {python:?}, args: [{script:?}] }} }} }};
const options = {{
    pathToClaudeCodeExecutable: process.env.CLI, cwd: process.env.WS, permissionMode: "bypassPermissions",
    extraArgs: {{ "mcp-config": JSON.stringify(servers) }},
}};
const q = query({{ prompt: prompts(), options }});
const out = (label, v) => console.log(JSON.stringify({{ label, v }}));
const state = async () => (await q.mcpServerStatus()).find((s) => s.name === "outside");
let first = await state();
for (let i = 0; i < 200 && first.status === "pending"; i++) {{
    await new Promise((resolve) => setTimeout(resolve, 50));
    first = await state();
}}
out("first", first);
await q.toggleMcpServer("outside", false);
out("off", await state());
await q.toggleMcpServer("outside", true);
await q.reconnectMcpServer("outside");
out("on", await state());
try {{ await q.reconnectMcpServer("nosuch"); out("nosuch", "ok"); }} catch (e) {{ out("nosuch", String(e)); }}
try {{ await q.setMaxThinkingTokens(0); out("thinking-off", "ok"); }} catch (e) {{ out("thinking-off", String(e)); }}
try {{ await q.setMaxThinkingTokens(4000); out("thinking-on", "ok"); }} catch (e) {{ out("thinking-on", String(e)); }}
release();
for await (const message of q) {{
    console.log(JSON.stringify(message));
    if (message.type === "result") break;
}}
"#,
        python = python.display().to_string(),
        script = script.display().to_string(),
    );
    let out = env.sdk_node(Cli::Capstan, &mock.url(), &program);
    let lines = json_lines(&out);
    let labelled = |label: &str| labelled(&out, &lines, label);
    assert_eq!(labelled("first")["status"], "connected");
    assert_eq!(labelled("off")["status"], "disabled");
    assert_eq!(labelled("on")["status"], "connected");
    assert!(
        labelled("nosuch")
            .as_str()
            .unwrap()
            .contains("no MCP server"),
        "{}",
        labelled("nosuch")
    );
    assert_eq!(labelled("thinking-off"), "ok");
    assert!(
        labelled("thinking-on")
            .as_str()
            .unwrap()
            .contains("extended thinking"),
        "{}",
        labelled("thinking-on")
    );
    // After the toggles the server's tool still reaches the model.
    assert_eq!(
        mock.tool_result("toolu_e"),
        ("echo: back".to_string(), false)
    );
}

// --- Rewinding files ---------------------------------------------------------------

/// Answers that change `kept.txt` and create `made.txt`, then end.
fn changing_files() -> Vec<Reply> {
    vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "toolu_k",
                    "fs__write",
                    json!({"path": "kept.txt", "content": "changed"}),
                )
                .call(
                    "toolu_m",
                    "fs__write",
                    json!({"path": "made.txt", "content": "new file"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("done").anthropic()),
    ]
}

#[test]
fn python_sdk_rewind_files_restores_a_user_messages_checkpoint() {
    let env = Env::new();
    env.write("kept.txt", "original");
    let mock = MockModel::start(changing_files());
    let program = r#"
import anyio, json, os
from claude_agent_sdk import ClaudeSDKClient, ClaudeAgentOptions, UserMessage

async def main():
    options = ClaudeAgentOptions(
        cli_path=os.environ["CLI"], cwd=os.environ["WS"], permission_mode="bypassPermissions",
        enable_file_checkpointing=True, extra_args={"replay-user-messages": None},
    )
    async with ClaudeSDKClient(options=options) as client:
        await client.query("change the files")
        first = None
        async for message in client.receive_response():
            if isinstance(message, UserMessage) and message.uuid and first is None:
                first = message.uuid
        print(json.dumps({"label": "changed", "v": open("kept.txt").read()}), flush=True)
        await client.rewind_files(first)
        print(json.dumps({"label": "rewound", "v": first}), flush=True)

anyio.run(main)
"#;
    let out = env.sdk_python(Cli::Capstan, &mock.url(), program);
    let lines = json_lines(&out);
    assert!(
        lines.iter().any(|l| l["label"] == "rewound"),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        lines
            .iter()
            .any(|l| l["label"] == "changed" && l["v"] == "changed")
    );
    assert_eq!(env.read("kept.txt"), "original");
    assert!(!env.ws.path().join("made.txt").exists());
}

#[test]
fn typescript_sdk_rewind_files_previews_then_restores() {
    let env = Env::new();
    env.write("kept.txt", "original");
    let mock = MockModel::start(changing_files());
    let program = r#"
import { query } from "@anthropic-ai/claude-agent-sdk";
import { readFileSync } from "node:fs";
let release;
const gate = new Promise((resolve) => (release = resolve));
async function* prompts() {
    yield { type: "user", message: { role: "user", content: "change the files" }, parent_tool_use_id: null, session_id: "" };
    await gate;
}
const options = {
    pathToClaudeCodeExecutable: process.env.CLI, cwd: process.env.WS, permissionMode: "bypassPermissions",
    enableFileCheckpointing: true, extraArgs: { "replay-user-messages": null },
};
const q = query({ prompt: prompts(), options });
const out = (label, v) => console.log(JSON.stringify({ label, v }));
let first;
// Read by hand: leaving a `for await` would close the query.
const messages = q[Symbol.asyncIterator]();
while (true) {
    const { value: message, done } = await messages.next();
    if (done) break;
    if (message.type === "user" && message.isReplay && !first) first = message.uuid;
    if (message.type === "result") break;
}
out("changed", readFileSync("kept.txt", "utf8"));
out("preview", await q.rewindFiles(first, { dryRun: true }));
out("still", readFileSync("kept.txt", "utf8"));
out("rewound", await q.rewindFiles(first));
out("unknown", await q.rewindFiles("00000000-0000-4000-8000-000000000000"));
release();
"#;
    let out = env.sdk_node(Cli::Capstan, &mock.url(), program);
    let lines = json_lines(&out);
    let labelled = |label: &str| labelled(&out, &lines, label);
    assert_eq!(labelled("changed"), "changed");
    let preview = labelled("preview");
    assert_eq!(preview["canRewind"], true, "{preview}");
    assert_eq!(
        preview["filesChanged"],
        json!(["kept.txt", "made.txt"]),
        "{preview}"
    );
    assert_eq!(labelled("still"), "changed", "a dry run changes nothing");
    let rewound = labelled("rewound");
    assert_eq!(rewound["canRewind"], true, "{rewound}");
    assert_eq!(env.read("kept.txt"), "original");
    assert!(!env.ws.path().join("made.txt").exists());
    assert_eq!(labelled("unknown")["canRewind"], false);
}
