//! MCP servers inside sessions, end to end against the FastMCP fixture of
//! the official Python SDK: images reaching both providers as images (and
//! again on `--continue`), a slow server's tools in the first request,
//! `tools/list_changed`, `/mcp` in the REPL, `capstan tool list/call` for
//! MCP tools, and a Claude Code plugin's server that runs the plugin's own
//! script.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use support::fastmcp::{self, API_KEY, add_stdio, assert_ok, python_prefix, session, venv};
use support::mock_model::{Answer, MockModel, Received, Reply};
use support::terminal::Terminal;
use support::{Env, MODEL_VARS, stderr, stdout};

/// The 1x1 red PNG the fixture's `picture` tool returns, base64.
const DOT_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// `capstan mcp add NAME -- PYTHON fastmcp_server.py stdio EXTRA...`.
pub(crate) fn add_fixture(env: &Env, name: &str, extra: &[&str]) {
    assert_ok(&add_stdio(env, name, &[], extra));
}

/// The names of the tools a request offers.
fn offered(request: &Received) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            t["name"]
                .as_str()
                .or(t["function"]["name"].as_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The `tool_result` block of call `id` in an Anthropic request.
fn anthropic_result(request: &Received, id: &str) -> Value {
    request
        .messages()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
        .unwrap_or_else(|| panic!("no result {id} in {:#?}", request.messages()))
}

fn image_block() -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": DOT_PNG}})
}

#[test]
fn an_image_result_reaches_anthropic_as_an_image_and_again_on_continue() {
    let env = Env::new();
    add_fixture(&env, "fx", &[]);
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Looking.")
                .call("c1", "mcp__fx__picture", json!({}))
                .call("c2", "mcp__fx__sound", json!({}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("A red dot.").anthropic()),
        Reply::sse(Answer::text("Still a red dot.").anthropic()),
    ]);
    let out = session(&env, &mock, &["--output-format", "stream-json"]);
    assert_ok(&out);
    let received = mock.received();
    let result = anthropic_result(&received[1], "c1");
    assert_eq!(result["is_error"], false);
    let content = result["content"].as_array().unwrap();
    assert_eq!(content[0]["type"], "text");
    assert!(
        content[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("a red dot:\n[image 1: image/png"),
        "{result}"
    );
    assert_eq!(content[1], image_block());
    // Audio cannot go in a tool result: a note says so.
    let sound = anthropic_result(&received[1], "c2");
    let sound = sound["content"].as_str().unwrap();
    assert!(
        sound.starts_with("[audio: audio/wav") && sound.contains("no audio"),
        "{sound}"
    );

    // The headless stream shows the result as Claude Code does.
    let user_lines: Vec<Value> = stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "user")
        .collect();
    let shown = user_lines
        .iter()
        .flat_map(|v| {
            v["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .find(|b| b["tool_use_id"] == "c1")
        .expect("the picture's result in the stream");
    assert_eq!(shown["content"][1], image_block());

    // The transcript keeps the image: --continue sends it again.
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "and now?");
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .arg("--continue")
        .timeout(Duration::from_secs(180));
    assert_ok(&cmd.output().unwrap());
    let received = mock.received();
    let again = anthropic_result(&received[2], "c1");
    assert_eq!(again["content"][1], image_block());
}

#[test]
fn an_image_result_reaches_an_openai_compatible_model_in_a_user_message() {
    let env = Env::new();
    add_fixture(&env, "fx", &[]);
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Looking.")
                .call("c1", "mcp__fx__picture", json!({}))
                .openai(),
        ),
        Reply::sse(Answer::text("A red dot.").openai()),
    ]);
    let mut cmd = env.capstan();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("OPENAI_API_KEY", "sk-openai-mock")
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(["--provider", "openai", "--base-url"])
        .arg(format!("{}/v1", mock.url()))
        .args(["--model", "mock-gpt", "-p", "show me"])
        .timeout(Duration::from_secs(180));
    assert_ok(&cmd.output().unwrap());
    let received = mock.received();
    let messages = received[1].messages();
    let at = messages
        .iter()
        .position(|m| m["role"] == "tool" && m["tool_call_id"] == "c1")
        .unwrap_or_else(|| panic!("no tool message in {messages:#?}"));
    let text = messages[at]["content"].as_str().unwrap();
    assert!(
        text.starts_with("a red dot:\n[image 1: image/png") && text.contains("next user message"),
        "{text}"
    );
    let next = &messages[at + 1];
    assert_eq!(next["role"], "user");
    let parts = next["content"].as_array().unwrap();
    assert_eq!(parts[0]["type"], "text");
    assert!(parts[0]["text"].as_str().unwrap().contains("c1"));
    assert_eq!(
        parts[1],
        json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{DOT_PNG}")}})
    );
}

#[test]
fn an_error_result_keeps_its_images_for_both_providers() {
    let env = Env::new();
    add_fixture(&env, "fx", &[]);
    // Anthropic: a tool_result marked is_error, with its image block.
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Looking.")
                .call("c1", "mcp__fx__blurry", json!({}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("It failed, but I see a red dot.").anthropic()),
    ]);
    assert_ok(&session(&env, &mock, &[]));
    let result = anthropic_result(&mock.received()[1], "c1");
    assert_eq!(result["is_error"], true, "{result}");
    let content = result["content"].as_array().unwrap();
    assert!(
        content[0]["text"]
            .as_str()
            .unwrap()
            .contains("the camera is out of focus; what it saw:\n[image 1: image/png"),
        "{result}"
    );
    assert_eq!(content[1], image_block());
    let records = support::audit_records(&env);
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "mcp_tool_called" && r["outcome"] == "tool error"),
        "{records:?}"
    );

    // OpenAI-compatible: the error text in the tool message, the image in
    // the user message after it, as for a successful result.
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Looking.")
                .call("c1", "mcp__fx__blurry", json!({}))
                .openai(),
        ),
        Reply::sse(Answer::text("A red dot.").openai()),
    ]);
    let mut cmd = env.capstan();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("OPENAI_API_KEY", "sk-openai-mock")
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(["--provider", "openai", "--base-url"])
        .arg(format!("{}/v1", mock.url()))
        .args(["--model", "mock-gpt", "-p", "show me"])
        .timeout(Duration::from_secs(180));
    assert_ok(&cmd.output().unwrap());
    let received = mock.received();
    let messages = received[1].messages();
    let at = messages
        .iter()
        .position(|m| m["role"] == "tool" && m["tool_call_id"] == "c1")
        .unwrap_or_else(|| panic!("no tool message in {messages:#?}"));
    let text = messages[at]["content"].as_str().unwrap();
    assert!(
        text.starts_with("Error: ") && text.contains("next user message"),
        "{text}"
    );
    assert_eq!(
        messages[at + 1]["content"][1],
        json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{DOT_PNG}")}})
    );
}

#[test]
fn a_slow_server_has_its_tools_in_the_first_request_unless_the_wait_is_shorter() {
    let env = Env::new();
    add_fixture(&env, "slow", &["slow"]);
    // The server takes 1.5 s to start; the first request waits for it.
    let mock = MockModel::start(vec![Reply::sse(Answer::text("Hi.").anthropic())]);
    assert_ok(&session(&env, &mock, &[]));
    let first = &mock.received()[0];
    assert!(
        offered(first).contains(&"mcp__slow__echo".to_string()),
        "{:?}",
        offered(first)
    );

    // A wait shorter than its start: the request goes without its tools,
    // the user and the model are told.
    std::fs::write(
        env.home.path().join("config.toml"),
        "[mcp]\nstartup_wait = \"100ms\"\n",
    )
    .unwrap();
    let mock = MockModel::start(vec![Reply::sse(Answer::text("Hi.").anthropic())]);
    let out = session(&env, &mock, &[]);
    assert_ok(&out);
    let first = &mock.received()[0];
    assert!(
        !offered(first).iter().any(|t| t.starts_with("mcp__slow__")),
        "{:?}",
        offered(first)
    );
    let err = stderr(&out);
    assert!(
        err.contains("MCP server slow is still starting after 100ms")
            && err.contains("startup_wait"),
        "{err}"
    );
    let sent = first.messages()[0]["content"].to_string();
    assert!(
        sent.contains("MCP server slow was still starting"),
        "{sent}"
    );
}

#[test]
fn a_tool_added_by_the_server_during_a_session_is_in_the_next_request() {
    let env = Env::new();
    add_fixture(&env, "fx", &[]);
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Growing.")
                .call("c1", "mcp__fx__grow", json!({}))
                .anthropic(),
        ),
        Reply::sse(
            Answer::text("Using it.")
                .call("c2", "mcp__fx__sprout", json!({"seed": "pea"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("Done.").anthropic()),
    ]);
    assert_ok(&session(&env, &mock, &[]));
    let received = mock.received();
    assert!(!offered(&received[0]).contains(&"mcp__fx__sprout".to_string()));
    assert!(
        offered(&received[1]).contains(&"mcp__fx__sprout".to_string()),
        "{:?}",
        offered(&received[1])
    );
    assert_eq!(mock.result_of("c2"), "sprouted pea");
}

#[test]
fn slash_mcp_in_a_terminal_shows_the_servers_their_state_and_tools() {
    let env = Env::new();
    add_fixture(&env, "fx", &[]);
    std::fs::write(
        env.ws.path().join(".mcp.json"),
        json!({"mcpServers": {"proj": {"command": "true"}}}).to_string(),
    )
    .unwrap();
    let script = env.outside.path().join("turns.json");
    std::fs::write(&script, json!({"turns": [{"text": "Hello."}]}).to_string()).unwrap();
    let mut cmd = env.capstan_std();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("NO_COLOR", "1")
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .arg("--model")
        .arg(format!("scripted:{}", script.display()));
    let mut terminal = Terminal::spawn(cmd);
    terminal.expect("MCP server proj");
    terminal.expect("> ");
    // The server needs a moment to start; /mcp says where it is.
    let mut shown = String::new();
    for _ in 0..60 {
        terminal.type_slowly("/mcp\r");
        terminal.expect("/mcp");
        shown = terminal.expect("> ");
        if shown.contains("fx (local): ready, 13 tools") {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(shown.contains("fx (local): ready, 13 tools"), "{shown}");
    assert!(
        shown
            .contains("proj (local): not started: not allowed yet; run `capstan mcp approve proj`"),
        "{shown}"
    );
    terminal.type_slowly("/exit\r");
    assert_eq!(terminal.wait().code(), Some(0), "{}", terminal.screen());
}

#[test]
fn tool_list_and_tool_call_show_and_call_mcp_tools_under_the_sessions_checks() {
    let env = Env::new();
    add_fixture(&env, "fx", &[]);
    let run = |args: &[&str]| {
        env.capstan()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .args(args)
            .timeout(Duration::from_secs(120))
            .output()
            .unwrap()
    };

    let out = run(&["tool", "list"]);
    assert_ok(&out);
    let text = stdout(&out);
    let echo = text
        .lines()
        .find(|l| l.starts_with("mcp__fx__echo "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        echo.contains("read-only")
            && echo.contains("MCP server fx")
            && echo.contains("Say the text back"),
        "{echo}"
    );
    let note = text
        .lines()
        .find(|l| l.starts_with("mcp__fx__note "))
        .unwrap();
    assert!(
        note.contains("writes") && note.contains("destructive"),
        "{note}"
    );
    assert!(text.contains("fs.read"), "{text}");

    let out = run(&["tool", "list", "--json"]);
    assert_ok(&out);
    let tools: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let echo = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__fx__echo")
        .unwrap();
    assert_eq!(echo["server"], "fx");
    assert_eq!(echo["state"], "ready");
    assert_eq!(echo["annotations"]["readOnlyHint"], true);
    assert_eq!(echo["input_schema"]["properties"]["text"]["type"], "string");

    // A read-only tool runs; its call is audited.
    let out = run(&["tool", "call", "mcp__fx__echo", r#"{"text":"hi"}"#]);
    assert_ok(&out);
    assert_eq!(stdout(&out).trim(), "echo: hi");
    let records = support::audit_records(&env);
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "mcp_tool_called" && r["tool"] == "echo"),
        "{records:?}"
    );

    // A tool not marked read-only needs --allow-write, as a session asks.
    let out = run(&[
        "tool",
        "call",
        "mcp__fx__note",
        r#"{"name":"n.txt","text":"x"}"#,
    ]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("--allow-write"), "{}", stderr(&out));
    assert!(!env.ws.path().join("n.txt").exists());

    // A deny rule of the settings applies.
    std::fs::write(
        env.home.path().join("config.toml"),
        "[permissions]\ndeny = [\"mcp__fx__echo\"]\n",
    )
    .unwrap();
    let out = run(&["tool", "call", "mcp__fx__echo", r#"{"text":"hi"}"#]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("denied by the rule"),
        "{}",
        stderr(&out)
    );

    // The image comes with --json.
    let out = run(&["tool", "call", "mcp__fx__picture", "{}", "--json"]);
    assert_ok(&out);
    let value: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(value["ok"], true);
    assert_eq!(value["images"][0]["data"], DOT_PNG);

    // A server not allowed is not started.
    std::fs::write(
        env.ws.path().join(".mcp.json"),
        json!({"mcpServers": {"proj": {"command": "true"}}}).to_string(),
    )
    .unwrap();
    let out = run(&["tool", "call", "mcp__proj__x", "{}"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("capstan mcp approve proj"),
        "{}",
        stderr(&out)
    );
    let out = run(&["tool", "list"]);
    assert_ok(&out);
    assert!(
        stdout(&out).contains("mcp__proj__*") && stdout(&out).contains("not allowed yet"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_claude_code_plugins_own_python_server_starts_and_is_refused_once_tampered() {
    let env = Env::new();
    let plugin = env.outside.path().join("py-mcp");
    std::fs::create_dir_all(plugin.join(".claude-plugin")).unwrap();
    std::fs::write(
        plugin.join(".claude-plugin/plugin.json"),
        r#"{"name": "py-mcp", "version": "1.0.0", "description": "A Python MCP server"}"#,
    )
    .unwrap();
    std::fs::create_dir_all(plugin.join("server")).unwrap();
    std::fs::copy(fastmcp::script(), plugin.join("server/main.py")).unwrap();
    let python = venv().join("bin/python");
    let servers = json!({"mcpServers": {"fx": {
        "command": python.display().to_string(),
        "args": ["${CLAUDE_PLUGIN_ROOT}/server/main.py", "stdio"],
    }}});
    std::fs::write(plugin.join(".mcp.json"), servers.to_string()).unwrap();
    let installed = support::install(&env, &plugin);
    assert_ok(&installed);
    let shown = stderr(&installed);
    assert!(
        shown.contains("fx: runs `")
            && shown.contains("${CLAUDE_PLUGIN_ROOT}/server/main.py stdio")
            && shown.contains("the workspace and the plugin's folder (its files checked against the lock before each start) read-only"),
        "{shown}"
    );
    // The Python installation is a toolchain folder the user lets
    // commands read.
    std::fs::write(
        env.home.path().join("config.toml"),
        format!(
            "[exec]\nread = [{:?}, {:?}]\n",
            venv().display().to_string(),
            python_prefix().display().to_string()
        ),
    )
    .unwrap();

    let secret = env.write_outside("secret.txt", "the outside secret");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Echo.")
                .call(
                    "c1",
                    "mcp__py-mcp-fx__echo",
                    json!({"text": "from the plugin"}),
                )
                .call(
                    "c2",
                    "mcp__py-mcp-fx__peek",
                    json!({"path": secret.display().to_string()}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Done.").anthropic()),
    ]);
    assert_ok(&session(&env, &mock, &[]));
    assert_eq!(mock.result_of("c1"), "echo: from the plugin");
    // It reads its own folder and the granted ones, nothing else.
    let peek = mock.result_of("c2");
    assert!(!peek.contains("the outside secret"), "{peek}");

    // A changed file of the plugin: the server is refused, with the reason.
    let stored = walk_find(&env.home.path().join("plugins"), "main.py")
        .expect("the plugin's stored server/main.py");
    std::fs::write(&stored, "print('planted')\n").unwrap();
    let out = env
        .capstan()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(["mcp", "list", "--json"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert_ok(&out);
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let state = listed["servers"][0]["state"].as_str().unwrap().to_string();
    assert!(
        state.contains("server/main.py no longer matches its lock"),
        "{listed}"
    );
}

/// The first file named `name` under `dir`.
fn walk_find(dir: &std::path::Path, name: &str) -> Option<PathBuf> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).ok()?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == name) {
                return Some(path);
            }
        }
    }
    None
}
