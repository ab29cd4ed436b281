//! Claude Code's flags that scripts and the Agent SDK pass, end to end
//! against the mock model: `--mcp-config`, `--strict-mcp-config`,
//! `--session-id`, the `init` message's fields, the dont-ask mode,
//! `--replay-user-messages` and `--fallback-model`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::mcp_session::add_fixture;
use crate::support;
use crate::support::fastmcp::{python_prefix, script as fixture_script, venv};

use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use support::mock_model::{Answer, MockModel, Received, Reply};
use support::{Env, stderr, stdout};

const API_KEY: &str = "test-key";

/// `capstan -p go ARGS...` against `mock`.
fn run(env: &Env, mock: &MockModel, args: &[&str]) -> Output {
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "go");
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(args)
        .timeout(Duration::from_secs(180));
    cmd.output().unwrap()
}

fn assert_ok(output: &Output) {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        stdout(output),
        stderr(output)
    );
}

/// The tool names a request offers.
fn offered(request: &Received) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

/// The fixture server as Claude Code's `--mcp-config` JSON, under `name`
/// (with capstan's `read` key for the Python it runs on).
fn fixture_config(env: &Env, name: &str) -> Value {
    std::fs::copy(fixture_script(), env.ws.path().join("fastmcp_server.py")).unwrap();
    json!({"mcpServers": {name: {
        "command": venv().join("bin/python"),
        "args": ["fastmcp_server.py", "stdio"],
        "read": [venv(), python_prefix()],
    }}})
}

#[test]
fn an_mcp_config_server_runs_without_approval_and_answers_a_call() {
    let env = Env::new();
    let config = fixture_config(&env, "cli");
    // Once as a file, once as JSON text: both are read.
    let file = env.ws.path().join("servers.json");
    std::fs::write(&file, config.to_string()).unwrap();
    for value in [file.display().to_string(), config.to_string()] {
        let mock = MockModel::start(vec![
            Reply::sse(
                Answer::text("Calling.")
                    .call("c1", "mcp__cli__echo", json!({"text": "hello"}))
                    .anthropic(),
            ),
            Reply::sse(Answer::text("Done.").anthropic()),
        ]);
        let out = run(&env, &mock, &["--mcp-config", &value]);
        assert_ok(&out);
        let received = mock.received();
        assert!(
            offered(&received[0]).contains(&"mcp__cli__echo".to_string()),
            "{:?}",
            offered(&received[0])
        );
        let (text, is_error) = received[1].tool_result("c1");
        assert!(!is_error, "{text}");
        assert!(text.contains("echo: hello"), "{text}");
        assert!(
            !stderr(&out).contains("not allowed yet"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn strict_mcp_config_leaves_out_the_servers_of_settings() {
    let env = Env::new();
    add_fixture(&env, "saved", &[]);
    let config = fixture_config(&env, "cli").to_string();
    let tools_with = |args: &[&str]| {
        let mock = MockModel::start(vec![Reply::sse(Answer::text("Done.").anthropic())]);
        assert_ok(&run(&env, &mock, args));
        offered(&mock.received()[0])
    };
    let both = tools_with(&["--mcp-config", &config]);
    assert!(both.contains(&"mcp__saved__echo".to_string()), "{both:?}");
    assert!(both.contains(&"mcp__cli__echo".to_string()), "{both:?}");
    let strict = tools_with(&["--strict-mcp-config", "--mcp-config", &config]);
    assert!(strict.contains(&"mcp__cli__echo".to_string()), "{strict:?}");
    assert!(
        !strict.iter().any(|t| t.starts_with("mcp__saved__")),
        "{strict:?}"
    );
}

#[test]
fn a_bad_mcp_config_stops_the_run_with_what_to_fix() {
    let env = Env::new();
    let mock = MockModel::start(vec![]);
    let out = run(&env, &mock, &["--mcp-config", "no-such.json"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot read the --mcp-config file"),
        "{}",
        stderr(&out)
    );
    let out = run(
        &env,
        &mock,
        &[
            "--mcp-config",
            r#"{"mcpServers": {"bad__name": {"command": "x"}}}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("bad__name"), "{}", stderr(&out));
    assert!(mock.received().is_empty());
}

/// The JSON lines of a stream-json run.
fn lines(out: &Output) -> Vec<Value> {
    stdout(out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn session_id_names_the_new_session_and_is_refused_when_bad_or_taken() {
    let env = Env::new();
    let id = "0b6c3c2e-7a1f-4f3e-9d2a-5c4b3a291807";
    let mock = MockModel::start(vec![
        Reply::sse(Answer::text("First.").anthropic()),
        Reply::sse(Answer::text("Again.").anthropic()),
    ]);
    let out = run(
        &env,
        &mock,
        &[
            "--session-id",
            id,
            "--output-format",
            "stream-json",
            "--verbose",
        ],
    );
    assert_ok(&out);
    let lines = lines(&out);
    assert_eq!(lines[0]["subtype"], "init");
    assert!(
        lines.iter().all(|l| l["session_id"] == id),
        "{}",
        stdout(&out)
    );
    // The session is saved under that id: --resume takes it up.
    let out = run(&env, &mock, &["--resume", id, "--output-format", "json"]);
    assert_ok(&out);
    let result: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(result["session_id"], id);
    assert_eq!(mock.received()[1].messages().len(), 3);

    // Used already, or not a UUID: a usage error before the model is asked.
    let asked = mock.received().len();
    let out = run(&env, &mock, &["--session-id", id]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("already in use"), "{}", stderr(&out));
    let out = run(&env, &mock, &["--session-id", "session-1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a valid session id"),
        "{}",
        stderr(&out)
    );
    assert_eq!(mock.received().len(), asked);
}

#[test]
fn init_names_the_version_key_source_agents_and_claude_code_plugins() {
    let env = Env::new();
    env.write(
        ".claude/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews.\ntools: Read\n---\nYou review.\n",
    );
    let kit = env.outside.path().join("kit");
    for (rel, text) in [
        (
            ".claude-plugin/plugin.json",
            r#"{"name":"kit","version":"1.0.0"}"#,
        ),
        (
            "agents/helper.md",
            "---\nname: helper\ndescription: Helps.\ntools: Read\n---\nYou help.\n",
        ),
    ] {
        std::fs::create_dir_all(kit.join(rel).parent().unwrap()).unwrap();
        std::fs::write(kit.join(rel), text).unwrap();
    }
    support::install(&env, &kit);
    let mock = MockModel::start(vec![Reply::sse(Answer::text("Hi.").anthropic())]);
    let out = run(
        &env,
        &mock,
        &["--output-format", "stream-json", "--verbose"],
    );
    assert_ok(&out);
    let init = lines(&out).remove(0);
    assert_eq!(init["subtype"], "init");
    assert_eq!(init["claude_code_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(init["apiKeySource"], "ANTHROPIC_API_KEY");
    let agents = init["agents"].as_array().unwrap();
    assert!(agents.contains(&json!("reviewer")), "{init}");
    assert!(agents.contains(&json!("helper")), "{init}");
    let plugins = init["plugins"].as_array().unwrap();
    assert_eq!(plugins.len(), 1, "{init}");
    assert_eq!(plugins[0]["name"], "kit");
    let path = std::path::Path::new(plugins[0]["path"].as_str().unwrap());
    assert!(path.join("agents/helper.md").is_file(), "{init}");

    // No key at all (an OpenAI-compatible server that takes none): "none".
    let mock = MockModel::start(vec![Reply::sse(Answer::text("Hi.").openai())]);
    let mut cmd = env.capstan();
    for var in support::MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.args(["--provider", "openai", "--base-url"])
        .arg(format!("{}/v1", mock.url()))
        .args([
            "--model",
            "mock-gpt",
            "-p",
            "hi",
            "--output-format",
            "stream-json",
        ])
        .timeout(Duration::from_secs(60));
    let out = cmd.output().unwrap();
    assert_ok(&out);
    let init = lines(&out).remove(0);
    assert_eq!(init["apiKeySource"], "none", "{init}");
    assert_eq!(init["plugins"][0]["name"], "kit");
}

#[test]
fn dont_ask_mode_denies_what_would_ask_and_runs_what_rules_allow() {
    let env = Env::new();
    env.write("a.txt", "hello\n");
    let calls = || {
        Reply::sse(
            Answer::text("Working.")
                .call(
                    "w1",
                    "fs__write",
                    json!({"path": "out.txt", "content": "x\n"}),
                )
                .call("r1", "fs__read", json!({"path": "a.txt"}))
                .anthropic(),
        )
    };
    let mock = MockModel::start(vec![calls(), Reply::sse(Answer::text("Done.").anthropic())]);
    let out = run(
        &env,
        &mock,
        &["--permission-mode", "dontAsk", "--output-format", "json"],
    );
    assert_ok(&out);
    assert!(!env.ws.path().join("out.txt").exists());
    let (text, is_error) = mock.tool_result("w1");
    assert!(is_error && text.contains("dont-ask mode"), "{text}");
    let (text, is_error) = mock.tool_result("r1");
    assert!(!is_error && text.contains("hello"), "{text}");
    let result: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(result["permission_denials"][0]["tool_name"], "fs__write");

    // An allow rule pre-approves the write.
    let mock = MockModel::start(vec![calls(), Reply::sse(Answer::text("Done.").anthropic())]);
    let out = run(
        &env,
        &mock,
        &[
            "--permission-mode",
            "dont-ask",
            "--output-format",
            "stream-json",
            "--allowedTools",
            "Write(out.txt)",
        ],
    );
    assert_ok(&out);
    assert_eq!(lines(&out)[0]["permissionMode"], "dontAsk");
    assert_eq!(
        std::fs::read_to_string(env.ws.path().join("out.txt")).unwrap(),
        "x\n"
    );
}

#[test]
fn replay_user_messages_echoes_each_message_before_its_answer() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        Reply::sse(Answer::text("One.").anthropic()),
        Reply::sse(Answer::text("Two.").anthropic()),
    ]);
    let user = |text: &str| {
        json!({"type": "user", "message": {"role": "user", "content": text},
               "session_id": "", "parent_tool_use_id": null})
        .to_string()
    };
    let stream_args = [
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
    ];
    let mut cmd = env.capstan();
    for var in support::MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("ANTHROPIC_API_KEY", API_KEY)
        .args(["--base-url", &mock.url(), "--model", "mock-model"])
        .args(stream_args)
        .arg("--replay-user-messages")
        .write_stdin(format!("{}\n{}\n", user("first"), user("second")))
        .timeout(Duration::from_secs(60));
    let out = cmd.output().unwrap();
    assert_ok(&out);
    let lines = lines(&out);
    let session_id = lines[0]["session_id"].clone();
    let replays: Vec<(usize, &Value)> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l["isReplay"] == true)
        .collect();
    assert_eq!(replays.len(), 2, "{}", stdout(&out));
    for ((at, replay), text) in replays.iter().zip(["first", "second"]) {
        assert_eq!(replay["type"], "user");
        assert_eq!(replay["message"]["content"][0]["text"], text);
        assert_eq!(replay["session_id"], session_id);
        // The echo comes before that prompt's result.
        let result = lines
            .iter()
            .skip(*at)
            .find(|l| l["type"] == "result")
            .unwrap();
        assert_eq!(
            result["result"],
            if text == "first" { "One." } else { "Two." }
        );
    }

    // Without stream-json input there is nothing to echo: a usage error.
    let out = run(&env, &mock, &["--replay-user-messages"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--replay-user-messages"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn fallback_model_takes_over_when_the_model_stays_overloaded() {
    let env = Env::new();
    let overloaded = || {
        Reply::status(
            529,
            support::mock_model::anthropic_error("overloaded_error", "Overloaded"),
        )
        .header("retry-after", "0")
    };
    // The first request and its four retries are overloaded; the same
    // request then goes to the fallback model, which answers.
    let mut replies: Vec<Reply> = (0..5).map(|_| overloaded()).collect();
    replies.push(Reply::sse(Answer::text("From the fallback.").anthropic()));
    let mock = MockModel::start(replies);
    let out = run(
        &env,
        &mock,
        &[
            "--fallback-model",
            "mock-fallback",
            "--output-format",
            "stream-json",
            "--verbose",
            "--capstan-events",
        ],
    );
    assert_ok(&out);
    let received = mock.received();
    assert_eq!(received.len(), 6);
    assert!(
        received[..5]
            .iter()
            .all(|r| r.body["model"] == "mock-model")
    );
    assert_eq!(received[5].body["model"], "mock-fallback");
    assert_eq!(received[5].messages(), received[0].messages());
    let lines = lines(&out);
    let result = lines.iter().find(|l| l["type"] == "result").unwrap();
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["result"], "From the fallback.");
    assert!(
        lines.iter().any(|l| l["type"] == "retry"
            && l["reason"]
                .as_str()
                .unwrap_or_default()
                .contains("fallback model mock-fallback")),
        "{}",
        stdout(&out)
    );

    // Without a fallback the overload ends the run; the same model as
    // fallback is a usage error.
    let mock = MockModel::start((0..5).map(|_| overloaded()).collect());
    let out = run(&env, &mock, &[]);
    assert!(!out.status.success());
    assert_eq!(mock.received().len(), 5);
    let out = run(&env, &mock, &["--fallback-model", "mock-model"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--fallback-model"),
        "{}",
        stderr(&out)
    );
}
