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
use crate::support::agent_sdk::{Cli, json_lines};
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
    assert!(text.contains("$.n must be of type integer"), "{text}");
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
