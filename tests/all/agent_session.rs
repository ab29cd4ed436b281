//! Whole agent sessions: the real `capstan` binary in print mode, the real
//! fs plugin, and a mock model server speaking the real wire formats —
//! multi-turn tool use, the write barrier, retries, broken and malformed
//! streams, interrupts and kills with their transcripts and `--continue`,
//! permissions in print mode, `--max-turns`, project config narrowing, the
//! scripted demo and the JSON result.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::mock_model::{
    Answer, MockModel, Received, Reply, Tokens, anthropic_error, anthropic_event,
};
use support::running::Running;
use support::{Env, MODEL_VARS, assert_exit, fixture, repo_root, stderr, stdout};

/// The longest any one run of the binary may take before the test fails.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

const API_KEY: &str = "sk-ant-mock-key-7";

/// `capstan -p PROMPT` against the mock as an Anthropic server.
fn anthropic(env: &Env, mock: &MockModel, prompt: &str) -> assert_cmd::Command {
    anthropic_model(env, mock, prompt, "mock-model")
}

/// The same with model id `model`.
fn anthropic_model(env: &Env, mock: &MockModel, prompt: &str, model: &str) -> assert_cmd::Command {
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, model, prompt);
    cmd.timeout(RUN_TIMEOUT);
    cmd
}

/// The same for a spawned process, so its output can be read as it runs.
fn anthropic_std(env: &Env, mock: &MockModel, prompt: &str) -> std::process::Command {
    let mut cmd = env.capstan_std();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("ANTHROPIC_API_KEY", API_KEY)
        .env("NO_COLOR", "1")
        .args([
            "--base-url",
            &mock.url(),
            "--model",
            "mock-model",
            "-p",
            prompt,
        ]);
    cmd
}

/// Runs a command and fails the test if it did not exit by itself in time.
fn run(cmd: &mut assert_cmd::Command) -> Output {
    let started = Instant::now();
    let output = cmd.output().expect("run capstan");
    assert!(
        output.status.code().is_some() && started.elapsed() < RUN_TIMEOUT,
        "capstan did not exit by itself within {RUN_TIMEOUT:?} (killed: {:?})\nstdout:\n{}\nstderr:\n{}",
        output.status,
        stdout(&output),
        stderr(&output)
    );
    output
}

/// The stream-json events printed on stdout.
fn events(output: &Output) -> Vec<Value> {
    stdout(output)
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
        })
        .collect()
}

/// The final `result` event (the last line).
fn result_event(output: &Output) -> Value {
    let all = events(output);
    let last = all.last().cloned().expect("no events on stdout");
    assert_eq!(last["type"], "result", "last event is not the result");
    last
}

/// The position of the first event matching `type` and `tool_use_id`.
fn position(events: &[Value], kind: &str, id: &str) -> usize {
    events
        .iter()
        .position(|e| e["type"] == kind && e["tool_use_id"] == id)
        .unwrap_or_else(|| panic!("no `{kind}` event for {id} in {events:#?}"))
}

/// Every transcript under the test's home.
fn transcripts(env: &Env) -> Vec<PathBuf> {
    let root = env.home.path().join("sessions");
    let mut files = Vec::new();
    for dir in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if file.path().extension().is_some_and(|e| e == "jsonl") {
                files.push(file.path());
            }
        }
    }
    files
}

/// The workspace's only transcript.
fn only_transcript(env: &Env) -> PathBuf {
    let files = transcripts(env);
    assert_eq!(files.len(), 1, "expected one transcript: {files:?}");
    files[0].clone()
}

/// A transcript's records (complete lines only).
fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn of_type<'a>(records: &'a [Value], kind: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["type"] == kind).collect()
}

/// The blocks of `message` of one `type`.
fn blocks<'a>(message: &'a Value, kind: &str) -> Vec<&'a Value> {
    message["content"]
        .as_array()
        .map(|content| content.iter().filter(|b| b["type"] == kind).collect())
        .unwrap_or_default()
}

/// Asserts an Anthropic request is well formed as a conversation: roles
/// alternate starting with the user, and every tool call is answered by a
/// result in the very next message, before any text there.
fn assert_every_call_answered(request: &Received) {
    let messages = request.messages();
    assert!(!messages.is_empty(), "request has no messages");
    for (i, message) in messages.iter().enumerate() {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        assert_eq!(
            message["role"], role,
            "roles do not alternate at message {i}: {messages:#?}"
        );
        let calls = blocks(message, "tool_use");
        if calls.is_empty() {
            continue;
        }
        let next = messages
            .get(i + 1)
            .unwrap_or_else(|| panic!("tool call(s) in the last message are orphaned: {message}"));
        let content = next["content"].as_array().unwrap();
        let first_text = content
            .iter()
            .position(|b| b["type"] != "tool_result")
            .unwrap_or(content.len());
        for call in calls {
            let at = content
                .iter()
                .position(|b| b["type"] == "tool_result" && b["tool_use_id"] == call["id"])
                .unwrap_or_else(|| {
                    panic!(
                        "tool call {} has no result in the next message: {next}",
                        call["id"]
                    )
                });
            assert!(at < first_text, "tool results must come first: {next}");
        }
    }
}

/// Copies a folder tree.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

// 1
#[test]
fn anthropic_multi_turn_read_then_edit_then_answer() {
    let env = Env::new();
    env.write("notes.txt", "hello world\nsecond line\n");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Let me read the notes.")
                .call("toolu_read_1", "fs__read", json!({"path": "notes.txt"}))
                .anthropic(),
        ),
        Reply::sse(
            Answer::text("Now the edit.")
                .call(
                    "toolu_edit_2",
                    "fs__edit",
                    json!({"path": "notes.txt", "old": "hello world", "new": "goodbye world"}),
                )
                .anthropic(),
        ),
        Reply::sse(
            Answer::text("I changed hello to goodbye in notes.txt.")
                .tokens(Tokens {
                    input: 20,
                    output: 9,
                    cache_read: 1500,
                    cache_creation: 120,
                })
                .anthropic(),
        ),
    ]);
    let output = run(anthropic(&env, &mock, "say goodbye in notes.txt")
        .args(["--permission-mode", "accept-edits"]));
    assert_exit(&output, 0);
    assert_eq!(env.read("notes.txt"), "goodbye world\nsecond line\n");
    assert!(
        stdout(&output).contains("I changed hello to goodbye in notes.txt."),
        "{}",
        stdout(&output)
    );

    let received = mock.received();
    assert_eq!(received.len(), 3, "{received:#?}");
    for request in &received {
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, "/v1/messages");
        assert_eq!(request.header("x-api-key"), Some(API_KEY));
        assert!(request.header("anthropic-version").is_some());
        assert_eq!(request.body["model"], "mock-model");
        assert_eq!(request.body["stream"], true);
        assert_every_call_answered(request);

        // Prompt-cache breakpoints: the system prompt, the last tool, the
        // last block of the last message — and nowhere else.
        let body = &request.body;
        assert_eq!(body["system"][0]["cache_control"], ephemeral());
        let tools = body["tools"].as_array().unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert!(
            names.contains(&"fs__read") && names.contains(&"fs__edit"),
            "{names:?}"
        );
        assert_eq!(tools.last().unwrap()["cache_control"], ephemeral());
        assert!(
            tools[..tools.len() - 1]
                .iter()
                .all(|t| t.get("cache_control").is_none())
        );
        let messages = request.messages();
        let last = messages.last().unwrap()["content"].as_array().unwrap();
        assert_eq!(last.last().unwrap()["cache_control"], ephemeral());
        let marked = messages
            .iter()
            .flat_map(|m| m["content"].as_array().unwrap())
            .filter(|b| b.get("cache_control").is_some())
            .count();
        assert_eq!(marked, 1, "{messages:#?}");
    }

    let first = received[0].messages();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0]["content"][0]["text"], "say goodbye in notes.txt");

    let second = received[1].messages();
    assert_eq!(second.len(), 3);
    let call = blocks(&second[1], "tool_use")[0];
    assert_eq!(call["id"], "toolu_read_1");
    assert_eq!(call["name"], "fs__read");
    assert_eq!(call["input"], json!({"path": "notes.txt"}));
    assert_eq!(
        blocks(&second[1], "text")[0]["text"],
        "Let me read the notes."
    );
    let result = &second[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_read_1");
    assert_eq!(result["is_error"], false);
    assert!(
        result["content"].as_str().unwrap().contains("hello world"),
        "{result}"
    );

    let third = received[2].messages();
    assert_eq!(third.len(), 5);
    let result = &third[4]["content"][0];
    assert_eq!(result["tool_use_id"], "toolu_edit_2");
    assert_eq!(result["is_error"], false, "{result}");
}

// 2
#[test]
fn openai_compatible_multi_turn_tool_results_are_tool_messages() {
    let env = Env::new();
    env.write("notes.txt", "hello world\n");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Reading.")
                .call("call_read_1", "fs__read", json!({"path": "notes.txt"}))
                .openai(),
        ),
        Reply::sse(
            Answer::default()
                .call(
                    "call_edit_2",
                    "fs__edit",
                    json!({"path": "notes.txt", "old": "hello", "new": "goodbye"}),
                )
                .openai(),
        ),
        Reply::sse(Answer::text("Edited through the OpenAI format.").openai()),
    ]);
    let mut cmd = env.capstan();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("OPENAI_API_KEY", "sk-openai-mock")
        .args(["--provider", "openai", "--base-url"])
        .arg(format!("{}/v1", mock.url()))
        .args(["--model", "mock-gpt", "--permission-mode", "accept-edits"])
        .args(["-p", "say goodbye"])
        .timeout(RUN_TIMEOUT);
    let output = run(&mut cmd);
    assert_exit(&output, 0);
    assert_eq!(env.read("notes.txt"), "goodbye world\n");
    assert!(stdout(&output).contains("Edited through the OpenAI format."));

    let received = mock.received();
    assert_eq!(received.len(), 3, "{received:#?}");
    for request in &received {
        assert_eq!(request.path, "/v1/chat/completions");
        assert_eq!(
            request.header("authorization"),
            Some("Bearer sk-openai-mock")
        );
        assert_eq!(request.body["model"], "mock-gpt");
        assert_eq!(request.messages()[0]["role"], "system");
    }
    let second = received[1].messages();
    assert_eq!(second.len(), 4, "{second:#?}");
    assert_eq!(second[1], json!({"role": "user", "content": "say goodbye"}));
    assert_eq!(second[2]["role"], "assistant");
    let call = &second[2]["tool_calls"][0];
    assert_eq!(call["id"], "call_read_1");
    assert_eq!(call["function"]["name"], "fs__read");
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"path": "notes.txt"}));
    assert_eq!(second[3]["role"], "tool");
    assert_eq!(second[3]["tool_call_id"], "call_read_1");
    assert!(
        second[3]["content"]
            .as_str()
            .unwrap()
            .contains("hello world")
    );

    let third = received[2].messages();
    assert_eq!(third.len(), 6, "{third:#?}");
    assert_eq!(third[4]["tool_calls"][0]["id"], "call_edit_2");
    assert_eq!(third[5]["role"], "tool");
    assert_eq!(third[5]["tool_call_id"], "call_edit_2");
}

// 3
#[test]
fn read_only_calls_run_together_and_a_write_is_a_barrier() {
    let env = Env::new();
    env.write("a.txt", "alpha\n");
    env.write("b.txt", "bravo\n");
    env.write("c.txt", "charlie\n");
    env.write("d.txt", "delta\n");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Four calls.")
                .call("t_a", "fs__read", json!({"path": "a.txt"}))
                .call("t_b", "fs__read", json!({"path": "b.txt"}))
                .call(
                    "t_c",
                    "fs__edit",
                    json!({"path": "c.txt", "old": "charlie", "new": "CHARLIE"}),
                )
                .call("t_d", "fs__read", json!({"path": "d.txt"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("All four done.").anthropic()),
    ]);
    let output = run(anthropic(&env, &mock, "four calls").args([
        "--permission-mode",
        "accept-edits",
        "--output-format",
        "stream-json",
        "--capstan-events",
    ]));
    assert_exit(&output, 0);
    assert_eq!(env.read("c.txt"), "CHARLIE\n");
    let events = events(&output);

    let first_result = events
        .iter()
        .position(|e| e["type"] == "tool_result")
        .unwrap();
    let started_a = position(&events, "tool_started", "t_a");
    let started_b = position(&events, "tool_started", "t_b");
    let started_c = position(&events, "tool_started", "t_c");
    let started_d = position(&events, "tool_started", "t_d");
    let result_a = position(&events, "tool_result", "t_a");
    let result_b = position(&events, "tool_result", "t_b");
    let result_c = position(&events, "tool_result", "t_c");
    assert!(
        started_a < first_result && started_b < first_result,
        "a and b must both start before any result: {events:#?}"
    );
    assert!(
        started_c > result_a && started_c > result_b,
        "the edit must wait for the reads before it: {events:#?}"
    );
    assert!(
        started_d > result_c,
        "the read after the edit must wait for it: {events:#?}"
    );
    assert_eq!(events[0]["type"], "system");
    assert_eq!(events[0]["subtype"], "init");
    assert_eq!(result_event(&output)["subtype"], "success");
    assert_eq!(result_event(&output)["num_tool_calls"], 4);

    let received = mock.received();
    assert_eq!(received.len(), 2);
    assert_every_call_answered(&received[1]);
    let results = received[1].messages().last().unwrap().clone();
    let results = blocks(&results, "tool_result");
    let ids: Vec<&str> = results
        .iter()
        .map(|b| b["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["t_a", "t_b", "t_c", "t_d"]);
    let contents: Vec<&str> = results
        .iter()
        .map(|b| b["content"].as_str().unwrap())
        .collect();
    assert!(contents[0].contains("alpha") && !contents[0].contains("bravo"));
    assert!(contents[1].contains("bravo"));
    assert!(contents[3].contains("delta"));
    assert!(
        results.iter().all(|b| b["is_error"] == false),
        "{results:#?}"
    );
}

// 4
#[test]
fn overloaded_529_is_retried_then_succeeds() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        Reply::status(529, anthropic_error("overloaded_error", "Overloaded")),
        Reply::sse(Answer::text("Recovered after overload.").anthropic()),
    ]);
    let output = run(anthropic(&env, &mock, "hi").args([
        "--output-format",
        "stream-json",
        "--capstan-events",
    ]));
    assert_exit(&output, 0);
    let events = events(&output);
    let retries: Vec<&Value> = events.iter().filter(|e| e["type"] == "retry").collect();
    assert_eq!(retries.len(), 1, "{events:#?}");
    assert_eq!(retries[0]["attempt"], 2);
    assert!(
        retries[0]["reason"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("overloaded"),
        "{}",
        retries[0]
    );
    let result = result_event(&output);
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["result"], "Recovered after overload.");
    let received = mock.received();
    assert_eq!(received.len(), 2);
    assert_eq!(
        received[0].body, received[1].body,
        "a retry resends the same request"
    );
}

// 5
#[test]
fn rate_limit_429_honours_retry_after() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        Reply::status(429, anthropic_error("rate_limit_error", "slow down"))
            .header("retry-after", "1"),
        Reply::sse(Answer::text("After the wait.").anthropic()),
    ]);
    let output = run(anthropic(&env, &mock, "hi").args([
        "--output-format",
        "stream-json",
        "--capstan-events",
    ]));
    assert_exit(&output, 0);
    let events = events(&output);
    let retry = events
        .iter()
        .find(|e| e["type"] == "retry")
        .expect("a retry event");
    assert_eq!(retry["after_ms"], 1000, "{retry}");
    assert_eq!(result_event(&output)["result"], "After the wait.");
    let received = mock.received();
    assert_eq!(received.len(), 2);
    let waited = received[1].at - received[0].at;
    assert!(
        waited >= Duration::from_millis(900),
        "retried after only {waited:?}"
    );
}

// 5b
#[test]
fn a_server_that_never_starts_its_response_is_given_up_on_at_the_bound_and_retried() {
    let env = Env::new();
    std::fs::write(
        env.home.path().join("config.toml"),
        "[model]\nresponse_timeout = \"1s\"\n",
    )
    .unwrap();
    let mock = MockModel::start(vec![
        Reply::silent(),
        Reply::sse(Answer::text("Answered on the second try.").anthropic()),
    ]);
    let output = run(&mut anthropic(&env, &mock, "hi"));
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), "Answered on the second try.\n");
    let err = stderr(&output);
    assert!(
        err.contains("sent no response within 1 s") && err.contains("retrying (attempt 2)"),
        "{err}"
    );
    let received = mock.received();
    assert_eq!(received.len(), 2, "{received:#?}");
    assert_eq!(
        received[0].body, received[1].body,
        "the unanswered request is sent again as it was"
    );
    let waited = received[1].at - received[0].at;
    assert!(
        waited >= Duration::from_millis(900),
        "gave up on the silent server after only {waited:?}"
    );
}

// 6
#[test]
fn stream_cut_mid_answer_keeps_the_text_and_continue_recovers() {
    let env = Env::new();
    env.write("notes.txt", "hello\n");
    let whole = Answer::text("Let me look at the notes first.")
        .call("toolu_cut", "fs__read", json!({"path": "notes.txt"}))
        .anthropic();
    // Cut inside the tool call's input: the text was delivered, the call
    // never completed.
    let tool_start = whole.find("\"input_json_delta\"").unwrap();
    let at = tool_start + whole[tool_start..].find("\n\n").unwrap() + 2;
    let mock = MockModel::start(vec![
        Reply::cut(whole, at),
        Reply::sse(Answer::text("should not be asked for").anthropic()),
    ]);
    let output = run(&mut anthropic(&env, &mock, "look at the notes"));
    assert_exit(&output, 7);
    let err = stderr(&output);
    assert!(err.contains("broke off"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // The answer never finished: what the model said is narration, on
    // stderr; stdout, which holds only a final answer, stays empty.
    assert!(err.contains("Let me look at the notes first."), "{err}");
    assert_eq!(stdout(&output), "");
    assert_eq!(
        mock.received().len(),
        1,
        "a stream cut after text is not retried"
    );

    let transcript = only_transcript(&env);
    let first_records = records(&transcript);
    let assistants = of_type(&first_records, "assistant");
    assert_eq!(assistants.len(), 1, "{first_records:#?}");
    assert_eq!(
        assistants[0]["message"]["content"],
        json!([{"type": "text", "text": "Let me look at the notes first."}])
    );
    assert_eq!(of_type(&first_records, "interrupted").len(), 1);

    let mock2 = MockModel::start(vec![Reply::sse(
        Answer::text("Picked up again.").anthropic(),
    )]);
    let output =
        run(anthropic(&env, &mock2, "go on").args(["--continue", "--output-format", "json"]));
    assert_exit(&output, 0);
    let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(result["result"], "Picked up again.");
    let id = transcript.file_stem().unwrap().to_str().unwrap();
    assert_eq!(
        result["session_id"], id,
        "--continue takes up the same session"
    );
    let received = mock2.received();
    assert_eq!(received.len(), 1);
    assert_every_call_answered(&received[0]);
    let messages = received[0].messages();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert_eq!(messages[0]["content"][0]["text"], "look at the notes");
    assert_eq!(
        messages[1]["content"][0]["text"],
        "Let me look at the notes first."
    );
    assert!(blocks(&messages[1], "tool_use").is_empty(), "{messages:#?}");
    assert_eq!(messages[2]["content"][0]["text"], "go on");
}

// 7
#[test]
fn malformed_event_data_is_a_model_error_not_a_panic() {
    let env = Env::new();
    let mut body = anthropic_event(
        "message_start",
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}}),
    );
    body += &anthropic_event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    body += &anthropic_event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Start of "}}),
    );
    body += "event: content_block_delta\ndata: {not json\n\n";
    let mock = MockModel::start(vec![
        Reply::sse(body),
        Reply::sse(Answer::text("should not be asked for").anthropic()),
    ]);
    let output = run(&mut anthropic(&env, &mock, "hi"));
    assert_exit(&output, 7);
    let err = stderr(&output);
    assert!(err.contains("broke off"), "{err}");
    assert!(err.contains("invalid JSON"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(mock.received().len(), 1);
}

// 8
#[test]
fn unauthorized_401_is_not_retried_and_names_the_key_variable() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        Reply::status(
            401,
            anthropic_error("authentication_error", "invalid x-api-key"),
        ),
        Reply::sse(Answer::text("a retry would have got this").anthropic()),
    ]);
    let output = run(&mut anthropic(&env, &mock, "hi"));
    assert_exit(&output, 7);
    let err = stderr(&output);
    assert!(err.contains("ANTHROPIC_API_KEY"), "{err}");
    assert!(err.contains("invalid x-api-key"), "{err}");
    assert!(
        !err.contains(API_KEY),
        "the key itself must not be shown: {err}"
    );
    assert_eq!(mock.received().len(), 1);
}

/// A session whose model calls `misbehave__spin`, running until the tool
/// has started; returns the process and the call's id.
fn spin_session(env: &Env, mock: &MockModel) -> Running {
    let plugin = fixture("misbehave");
    let mut cmd = anthropic_std(env, mock, "spin please");
    cmd.args([
        "--permission-mode",
        "bypass",
        "--output-format",
        "stream-json",
        "--capstan-events",
    ])
    .arg("--plugin")
    .arg(format!("misbehave={}", plugin.display()));
    let mut running = Running::spawn(cmd);
    let started = running.wait_for_event("tool_started");
    assert_eq!(started["tool_use_id"], "toolu_spin");
    assert_eq!(started["tool"], "misbehave__spin");
    // Let the guest really spin, so what is stopped is a running tool.
    std::thread::sleep(Duration::from_millis(300));
    running
}

fn spin_answer() -> Reply {
    Reply::sse(
        Answer::text("Spinning.")
            .call("toolu_spin", "misbehave__spin", json!({}))
            .anthropic(),
    )
}

// 9
#[test]
fn sigint_during_a_tool_interrupts_and_continue_has_no_orphan() {
    let env = Env::new();
    let mock = MockModel::start(vec![spin_answer()]);
    let running = spin_session(&env, &mock);
    let signalled = Instant::now();
    running.signal("INT");
    let (status, lines, err) = running.wait(Duration::from_secs(20));
    let took = signalled.elapsed();
    assert_eq!(status.code(), Some(130), "{status:?}\n{err}");
    assert!(
        took < Duration::from_secs(10),
        "took {took:?} to stop after SIGINT"
    );
    let last: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(last["subtype"], "error_during_execution");
    assert_eq!(last["error_kind"], "interrupted");
    assert!(!err.contains("panicked"), "{err}");

    let transcript = only_transcript(&env);
    let all = records(&transcript);
    let results = of_type(&all, "tool_results");
    assert_eq!(results.len(), 1, "{all:#?}");
    let block = &results[0]["message"]["content"][0];
    assert_eq!(block["tool_use_id"], "toolu_spin");
    assert_eq!(block["is_error"], true);
    assert!(
        block["content"].as_str().unwrap().contains("interrupted"),
        "{block}"
    );
    assert!(!of_type(&all, "interrupted").is_empty());

    let mock2 = MockModel::start(vec![Reply::sse(
        Answer::text("Stopped spinning.").anthropic(),
    )]);
    let output = run(anthropic(&env, &mock2, "do something else").arg("--continue"));
    assert_exit(&output, 0);
    let received = mock2.received();
    assert_eq!(received.len(), 1);
    assert_every_call_answered(&received[0]);
    let messages = received[0].messages();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert_eq!(blocks(&messages[1], "tool_use")[0]["id"], "toolu_spin");
    let result = blocks(&messages[2], "tool_result")[0];
    assert_eq!(result["tool_use_id"], "toolu_spin");
    assert_eq!(result["is_error"], true);
    assert_eq!(
        blocks(&messages[2], "text").last().unwrap()["text"],
        "do something else"
    );
}

// 10
#[test]
fn killed_during_a_tool_then_continue_repairs_the_orphaned_call() {
    let env = Env::new();
    let mock = MockModel::start(vec![spin_answer()]);
    let running = spin_session(&env, &mock);
    running.signal("KILL");
    let (status, _, _) = running.wait(Duration::from_secs(20));
    assert_eq!(status.code(), None, "SIGKILL ends the process: {status:?}");

    let transcript = only_transcript(&env);
    let all = records(&transcript);
    assert!(of_type(&all, "tool_results").is_empty(), "{all:#?}");
    assert!(of_type(&all, "end").is_empty());
    let assistants = of_type(&all, "assistant");
    assert_eq!(
        blocks(&assistants[0]["message"], "tool_use")[0]["id"],
        "toolu_spin"
    );

    let mock2 = MockModel::start(vec![Reply::sse(
        Answer::text("Back after the kill.").anthropic(),
    )]);
    let output = run(anthropic(&env, &mock2, "carry on").arg("--continue"));
    assert_exit(&output, 0);
    assert!(stdout(&output).contains("Back after the kill."));
    let notice = stderr(&output);
    assert!(
        notice.contains("toolu_spin") && notice.contains("never finished"),
        "resuming says it repaired the call: {notice}"
    );
    let received = mock2.received();
    assert_eq!(received.len(), 1);
    assert_every_call_answered(&received[0]);
    let messages = received[0].messages();
    let result = blocks(&messages[2], "tool_result")[0];
    assert_eq!(result["tool_use_id"], "toolu_spin");
    assert_eq!(result["is_error"], true);
    assert!(
        result["content"].as_str().unwrap().contains("interrupted"),
        "{result}"
    );
}

// 9b
#[test]
fn sigint_while_the_model_streams_keeps_the_partial_answer() {
    let env = Env::new();
    let whole = Answer::text("Thinking out loud about it").anthropic();
    // Everything up to the first text delta, then silence.
    let first_delta = whole.find("\"text_delta\"").unwrap();
    let at = first_delta + whole[first_delta..].find("\n\n").unwrap() + 2;
    let mock = MockModel::start(vec![Reply::stall(&whole[..at])]);
    let mut cmd = anthropic_std(&env, &mock, "think");
    cmd.args(["--output-format", "stream-json", "--capstan-events"]);
    let mut running = Running::spawn(cmd);
    let delta = running.wait_for_event("text_delta");
    let partial = delta["text"].as_str().unwrap().to_string();
    assert!(!partial.is_empty());
    running.signal("INT");
    let (status, lines, err) = running.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(130), "{status:?}\n{err}");
    let last: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(last["subtype"], "error_during_execution", "{last}");
    assert_eq!(last["error_kind"], "interrupted", "{last}");
    assert_eq!(mock.received().len(), 1);

    let all = records(&only_transcript(&env));
    let assistants = of_type(&all, "assistant");
    assert_eq!(assistants.len(), 1, "{all:#?}");
    assert_eq!(
        assistants[0]["message"]["content"][0]["text"],
        partial.as_str()
    );
    assert_eq!(of_type(&all, "interrupted").len(), 1, "{all:#?}");

    let mock2 = MockModel::start(vec![Reply::sse(Answer::text("Resumed.").anthropic())]);
    let output = run(anthropic(&env, &mock2, "again").arg("--continue"));
    assert_exit(&output, 0);
    let received = mock2.received();
    assert_every_call_answered(&received[0]);
    let messages = received[0].messages();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert_eq!(messages[1]["content"][0]["text"], partial.as_str());
    assert_eq!(messages[2]["content"][0]["text"], "again");
}

// 11
#[test]
fn print_mode_denies_an_edit_without_asking_and_says_how_to_allow_it() {
    let env = Env::new();
    env.write("notes.txt", "keep me\n");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Editing.")
                .call(
                    "toolu_edit",
                    "fs__edit",
                    json!({"path": "notes.txt", "old": "keep", "new": "lose"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("I was not allowed to edit.").anthropic()),
    ]);
    let output = run(anthropic(&env, &mock, "edit the notes").write_stdin(""));
    assert_exit(&output, 0);
    assert_eq!(env.read("notes.txt"), "keep me\n");
    let received = mock.received();
    assert_eq!(received.len(), 2);
    let result = blocks(received[1].messages().last().unwrap(), "tool_result")[0].clone();
    assert_eq!(result["tool_use_id"], "toolu_edit");
    assert_eq!(result["is_error"], true);
    let text = result["content"].as_str().unwrap();
    assert!(text.contains("Permission denied"), "{text}");
    assert!(
        text.contains("--permission-mode") || text.contains("--allow"),
        "{text}"
    );

    let all = records(&only_transcript(&env));
    let permissions = of_type(&all, "permission");
    assert_eq!(permissions.len(), 1, "{all:#?}");
    assert_eq!(permissions[0]["outcome"], "deny");
    assert_eq!(permissions[0]["tool"], "fs.edit");
    assert_eq!(permissions[0]["tool_use_id"], "toolu_edit");
}

// 11a
#[test]
fn print_mode_text_stdout_holds_only_the_final_answer() {
    let env = Env::new();
    env.write("notes.txt", "keep me\n");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Let me read the notes first.")
                .call("toolu_read", "fs__read", json!({"path": "notes.txt"}))
                .anthropic(),
        ),
        Reply::sse(
            Answer::text("Now I will try to edit them.")
                .call(
                    "toolu_edit",
                    "fs__edit",
                    json!({"path": "notes.txt", "old": "keep", "new": "lose"}),
                )
                .anthropic(),
        ),
        Reply::sse(
            Answer::text("# Notes\n\nThe notes say \"keep me\"; I was not allowed to edit them.")
                .anthropic(),
        ),
    ]);
    let output = run(anthropic(&env, &mock, "edit the notes").write_stdin(""));
    assert_exit(&output, 0);
    assert_eq!(mock.received().len(), 3);
    // `capstan -p ... > answer.md` gets the last answer's text and nothing
    // else: no narration, no tool lines, no warnings.
    assert_eq!(
        stdout(&output),
        "# Notes\n\nThe notes say \"keep me\"; I was not allowed to edit them.\n"
    );
    let err = stderr(&output);
    assert!(err.contains("Let me read the notes first."), "{err}");
    assert!(err.contains("Now I will try to edit them."), "{err}");
    assert!(
        err.contains("fs.read") && err.contains("notes.txt"),
        "{err}"
    );
    // The refusal is one line: the call, then why it was denied.
    assert!(err.contains("fs.edit notes.txt · denied:"), "{err}");
    assert!(
        !err.contains("I was not allowed to edit them."),
        "the answer is not repeated on stderr\n{err}"
    );
}

// 11b
#[test]
fn an_allow_rule_lets_only_its_path_be_edited_in_print_mode() {
    let env = Env::new();
    env.write("notes.txt", "old notes\n");
    env.write("other.txt", "old other\n");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::default()
                .call(
                    "toolu_notes",
                    "fs__edit",
                    json!({"path": "notes.txt", "old": "old", "new": "new"}),
                )
                .call(
                    "toolu_other",
                    "fs__edit",
                    json!({"path": "other.txt", "old": "old", "new": "new"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("One edit.").anthropic()),
    ]);
    let output = run(anthropic(&env, &mock, "edit both").args(["--allow", "fs.edit(notes.txt)"]));
    assert_exit(&output, 0);
    assert_eq!(env.read("notes.txt"), "new notes\n");
    assert_eq!(env.read("other.txt"), "old other\n");
    let received = mock.received();
    let last = received[1].messages().last().unwrap().clone();
    let results = blocks(&last, "tool_result");
    assert_eq!(results[0]["tool_use_id"], "toolu_notes");
    assert_eq!(results[0]["is_error"], false, "{}", results[0]);
    assert_eq!(results[1]["tool_use_id"], "toolu_other");
    assert_eq!(results[1]["is_error"], true, "{}", results[1]);
}

// 11c
#[test]
fn bypass_mode_still_keeps_the_model_inside_the_workspace() {
    let env = Env::new();
    let secret = env.write_outside("secret.txt", "OUTSIDE-SECRET\n");
    let relative = env.dotdot_outside("secret.txt");
    let planted = env.dotdot_outside("planted.txt");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::default()
                .call("t_rel", "fs__read", json!({"path": relative}))
                .call(
                    "t_abs",
                    "fs__read",
                    json!({"path": secret.display().to_string()}),
                )
                .call(
                    "t_write",
                    "fs__write",
                    json!({"path": planted, "content": "x"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Could not.").anthropic()),
    ]);
    let output = run(anthropic(&env, &mock, "escape").args(["--permission-mode", "bypass"]));
    assert_exit(&output, 0);
    assert!(!env.outside.path().join("planted.txt").exists());
    let received = mock.received();
    let last = received[1].messages().last().unwrap().clone();
    let results = blocks(&last, "tool_result");
    assert_eq!(results.len(), 3);
    for result in results {
        assert_eq!(result["is_error"], true, "{result}");
        let text = result["content"].as_str().unwrap();
        assert!(text.contains("outside the workspace"), "{text}");
        assert!(!text.contains("OUTSIDE-SECRET"), "{text}");
    }
}

// 12
#[test]
fn max_turns_stops_a_model_that_keeps_calling_tools() {
    let env = Env::new();
    env.write("notes.txt", "again\n");
    let reading = |id: &str| {
        Reply::sse(
            Answer::default()
                .call(id, "fs__read", json!({"path": "notes.txt"}))
                .anthropic(),
        )
    };
    let mock = MockModel::start(vec![reading("r1"), reading("r2"), reading("r3")]);
    let output =
        run(anthropic(&env, &mock, "loop").args(["--max-turns", "2", "--output-format", "json"]));
    assert_exit(&output, 8);
    let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(result["subtype"], "error_max_turns");
    assert_eq!(result["is_error"], true);
    assert_eq!(result["num_turns"], 2);
    assert!(result["error"].as_str().unwrap().contains("--max-turns"));
    assert_eq!(mock.received().len(), 2);
    assert_eq!(mock.replies_left(), 1);
}

// 13a
#[test]
fn project_config_cannot_widen_permissions() {
    let env = Env::new();
    env.write("notes.txt", "original\n");
    env.write(
        ".capstan/config.toml",
        "[permissions]\nmode = \"bypass\"\nallow = [\"fs.edit\"]\n",
    );
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::default()
                .call(
                    "toolu_edit",
                    "fs__edit",
                    json!({"path": "notes.txt", "old": "original", "new": "changed"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Not allowed.").anthropic()),
    ]);
    let output = run(&mut anthropic(&env, &mock, "edit"));
    assert_exit(&output, 0);
    assert_eq!(env.read("notes.txt"), "original\n");
    let err = stderr(&output);
    assert!(err.contains("only narrow permissions"), "{err}");
    assert!(err.contains("bypass"), "{err}");
    assert!(err.contains("fs.edit"), "{err}");
    let received = mock.received();
    let result = blocks(received[1].messages().last().unwrap(), "tool_result")[0].clone();
    assert_eq!(result["is_error"], true);
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("Permission denied")
    );
}

// 13b
#[test]
fn project_config_deny_rule_blocks_a_read() {
    let env = Env::new();
    env.write("secret.txt", "TOP-SECRET-VALUE\n");
    env.write("public.txt", "public value\n");
    env.write(
        ".capstan/config.toml",
        "[permissions]\ndeny = [\"fs.read(secret.txt)\"]\n",
    );
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::default()
                .call("toolu_secret", "fs__read", json!({"path": "secret.txt"}))
                .call("toolu_public", "fs__read", json!({"path": "public.txt"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("One of two.").anthropic()),
    ]);
    let output = run(&mut anthropic(&env, &mock, "read both"));
    assert_exit(&output, 0);
    let received = mock.received();
    assert_eq!(received.len(), 2);
    let last = received[1].messages().last().unwrap().clone();
    let results = blocks(&last, "tool_result");
    assert_eq!(results[0]["tool_use_id"], "toolu_secret");
    assert_eq!(results[0]["is_error"], true);
    let denied = results[0]["content"].as_str().unwrap();
    assert!(denied.contains("Permission denied"), "{denied}");
    assert!(!denied.contains("TOP-SECRET-VALUE"));
    assert_eq!(results[1]["tool_use_id"], "toolu_public");
    assert_eq!(results[1]["is_error"], false);
    assert!(
        results[1]["content"]
            .as_str()
            .unwrap()
            .contains("public value")
    );
    let all = records(&only_transcript(&env));
    let permissions = of_type(&all, "permission");
    let secret = permissions
        .iter()
        .find(|p| p["tool_use_id"] == "toolu_secret")
        .unwrap();
    assert_eq!(secret["outcome"], "deny");
    assert_eq!(secret["rule"], "fs.read(secret.txt)", "{secret}");
}

// 14
#[test]
fn scripted_demo_renames_and_is_listed_as_a_session() {
    let env = Env::new();
    let project = env.outside.path().join("project");
    copy_tree(&repo_root().join("docs/demo/project"), &project);
    let script = repo_root().join("docs/demo/script.json");
    let before = std::fs::read_to_string(project.join("src/main.rs")).unwrap();
    assert!(
        before.contains("greet("),
        "the demo project changed: {before}"
    );

    let mut cmd = env.capstan();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.args([
        "-p",
        "rename",
        "--output-format",
        "json",
        "--permission-mode",
        "accept-edits",
    ])
    .arg("--model")
    .arg(format!("scripted:{}", script.display()))
    .arg("-w")
    .arg(&project)
    .timeout(RUN_TIMEOUT);
    let output = run(&mut cmd);
    assert_exit(&output, 0);
    let after = std::fs::read_to_string(project.join("src/main.rs")).unwrap();
    assert!(after.contains("welcome("), "{after}");
    assert!(!after.contains("greet("), "{after}");
    let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(result["subtype"], "success");
    let id = result["session_id"].as_str().unwrap().to_string();
    assert!(!id.is_empty());

    let output = run(env
        .capstan()
        .args(["session", "list", "-w"])
        .arg(&project)
        .timeout(RUN_TIMEOUT));
    assert_exit(&output, 0);
    let listing = stdout(&output);
    assert!(listing.contains(&id), "{listing}");
    assert!(listing.contains("rename"), "{listing}");

    let output = run(env
        .capstan()
        .args(["session", "list", "--json", "-w"])
        .arg(&project)
        .timeout(RUN_TIMEOUT));
    let sessions: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{sessions}");
    assert_eq!(sessions[0]["id"], id.as_str());
    assert_eq!(sessions[0]["first_prompt"], "rename");
}

// 14b
#[test]
fn scripted_demo_in_print_mode_is_refused_once_and_says_so_truthfully() {
    let env = Env::new();
    let project = env.outside.path().join("project");
    copy_tree(&repo_root().join("docs/demo/project"), &project);
    let script = repo_root().join("docs/demo/script.json");
    let before = std::fs::read_to_string(project.join("src/main.rs")).unwrap();

    // The demo's first run: print mode, default mode, text output.
    let mut cmd = env.capstan();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("NO_COLOR", "1")
        .args(["-p", "Rename greet to welcome", "--model"])
        .arg(format!("scripted:{}", script.display()))
        .arg("-w")
        .arg(&project)
        .timeout(RUN_TIMEOUT);
    let output = run(&mut cmd);
    assert_exit(&output, 0);
    let after = std::fs::read_to_string(project.join("src/main.rs")).unwrap();
    assert_eq!(after, before, "the refused edit changed the file");

    // The model says what happened, not what it had planned.
    let answer = stdout(&output);
    assert!(
        answer.contains("The edit was refused, so `greet` was not renamed"),
        "{answer}"
    );
    assert!(!answer.contains("is now `welcome`"), "{answer}");
    assert!(!answer.contains("Checking the result"), "{answer}");

    // The refusal is one line: the call, its argument and the whole reason
    // (with the rule that would allow it), said once.
    let err = stderr(&output);
    assert_eq!(err.matches("needs permission").count(), 1, "{err}");
    let line = err
        .lines()
        .find(|line| line.contains("needs permission"))
        .unwrap();
    assert!(
        line.starts_with("✗ fs.edit src/main.rs · denied: `fs.edit` needs permission"),
        "{err}"
    );
    assert!(line.contains("--allow 'fs.edit'"), "{err}");
    assert!(!err.contains("Permission denied"), "{err}");

    // The demo's second run renames (here with edits accepted; the demo
    // answers a question instead, which print mode never asks).
    let mut cmd = env.capstan();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("NO_COLOR", "1")
        .args(["-p", "Rename greet to welcome", "--model"])
        .arg(format!("scripted:{}", script.display()))
        .args(["--permission-mode", "accept-edits", "-w"])
        .arg(&project)
        .timeout(RUN_TIMEOUT);
    let output = run(&mut cmd);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("Done: `greet` is now `welcome`"),
        "{}",
        stdout(&output)
    );
    let after = std::fs::read_to_string(project.join("src/main.rs")).unwrap();
    assert!(
        after.contains("welcome(") && !after.contains("greet("),
        "{after}"
    );
}

// 14c
#[test]
fn claude_code_rules_apply_and_a_rule_naming_no_tool_is_warned_about() {
    let env = Env::new();
    let script = env.outside.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"turns": [
            {"text": "Writing.", "tool_calls": [
                {"tool": "fs.write", "input": {"path": "docs/a.md", "content": "doc"}},
                {"tool": "fs.write", "input": {"path": "src/b.rs", "content": "code"}}]},
            {"text": "Done."}]}"#,
    )
    .unwrap();
    let mut cmd = env.capstan();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("NO_COLOR", "1")
        .args(["-p", "write the files", "--model"])
        .arg(format!("scripted:{}", script.display()))
        .args([
            "--allow",
            "Write(docs/**)",
            "--allow",
            "fs.wirte",
            "--deny",
            "Bash(rm:*)",
        ])
        .timeout(RUN_TIMEOUT);
    let output = run(&mut cmd);
    assert_exit(&output, 0);
    // Claude Code's `Write(docs/**)` allowed the write under docs/ only.
    assert_eq!(env.read("docs/a.md"), "doc");
    assert!(!env.ws.path().join("src/b.rs").exists());
    let err = stderr(&output);
    assert!(
        err.contains("warning: the allow rule `fs.wirte` in the command line matches no tool in this session; did you mean `fs.write`?"),
        "{err}"
    );
    // `Bash(rm:*)` is for exec.run, which the session offers: no warning.
    assert!(!err.contains("`Bash(rm:*)`"), "{err}");
    assert!(
        !err.contains("`Write(docs/**)` in the command line matches no tool"),
        "{err}"
    );
    let all = records(&only_transcript(&env));
    let permissions = of_type(&all, "permission");
    assert_eq!(permissions[0]["outcome"], "allow", "{permissions:?}");
    assert_eq!(permissions[0]["rule"], "Write(docs/**)", "{permissions:?}");
    assert_eq!(permissions[1]["outcome"], "deny", "{permissions:?}");
}

// 15
#[test]
fn json_output_is_one_result_object() {
    let env = Env::new();
    let mock = MockModel::start(vec![Reply::sse(
        Answer::text("The whole answer.")
            .tokens(Tokens {
                input: 42,
                output: 17,
                cache_read: 1000,
                cache_creation: 200,
            })
            .anthropic(),
    )]);
    let output =
        run(anthropic_model(&env, &mock, "hi", "claude-sonnet-4-5")
            .args(["--output-format", "json"]));
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert_eq!(text.trim().lines().count(), 1, "{text}");
    let result: Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["result"], "The whole answer.");
    assert_eq!(result["num_turns"], 1);
    let usage = &result["usage"];
    assert_eq!(usage["input_tokens"], 42, "{usage}");
    assert_eq!(usage["output_tokens"], 17, "{usage}");
    assert_eq!(usage["cache_read_input_tokens"], 1000, "{usage}");
    assert_eq!(usage["cache_creation_input_tokens"], 200, "{usage}");
    let id = result["session_id"].as_str().unwrap();
    let transcript = only_transcript(&env);
    assert_eq!(transcript.file_stem().unwrap().to_str().unwrap(), id);
    assert_eq!(result["model"], "claude-sonnet-4-5");
    let cost = result["total_cost_usd"]
        .as_f64()
        .unwrap_or_else(|| panic!("{result}"));
    assert!(cost > 0.0, "{result}");
    assert_eq!(mock.received()[0].body["model"], "claude-sonnet-4-5");
}

#[test]
fn near_the_context_window_the_session_compacts_and_continue_resumes_from_the_summary() {
    let env = Env::new();
    env.write("notes.txt", "hello\n");
    let big = Tokens {
        input: 150_000,
        output: 200,
        cache_read: 30_000,
        cache_creation: 0,
    };
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Reading.")
                .call("toolu_1", "fs__read", json!({"path": "notes.txt"}))
                .tokens(big)
                .anthropic(),
        ),
        Reply::sse(Answer::text("SUMMARY: notes.txt says hello.").anthropic()),
        Reply::sse(Answer::text("It says hello.").anthropic()),
    ]);
    let output = run(
        anthropic_model(&env, &mock, "what do the notes say?", "claude-sonnet-4-5").args([
            "--output-format",
            "stream-json",
            "--capstan-events",
        ]),
    );
    assert_exit(&output, 0);
    let all = events(&output);
    let compact = all.iter().find(|e| e["type"] == "compact").unwrap();
    assert_eq!(compact["trigger"], "auto");
    assert_eq!(compact["tokens_before"], 180_200);
    assert_eq!(compact["summary"], "SUMMARY: notes.txt says hello.");
    // Claude Code's own messages about it, for its SDK's consumers.
    let boundary = all
        .iter()
        .find(|e| e["type"] == "system" && e["subtype"] == "compact_boundary")
        .unwrap();
    assert_eq!(
        boundary["compact_metadata"],
        serde_json::json!({"trigger": "auto", "pre_tokens": 180_200})
    );
    let statuses: Vec<&Value> = all
        .iter()
        .filter(|e| e["type"] == "system" && e["subtype"] == "status")
        .map(|e| &e["status"])
        .collect();
    assert_eq!(statuses, [&serde_json::json!("compacting"), &Value::Null]);
    assert_eq!(result_event(&output)["result"], "It says hello.");

    let received = mock.received();
    assert_eq!(received.len(), 3);
    let asked = received[1].messages().last().unwrap().to_string();
    assert!(asked.contains("summarize the conversation"), "{asked}");
    let after = received[2].messages();
    assert_eq!(after.len(), 1, "{after:#?}");
    let first = after[0].to_string();
    assert!(first.contains("SUMMARY: notes.txt says hello."), "{first}");
    assert!(!first.contains("toolu_1"), "{first}");

    let transcript = only_transcript(&env);
    let written = records(&transcript);
    let compacted = of_type(&written, "compacted");
    assert_eq!(compacted.len(), 1);
    assert_eq!(compacted[0]["trigger"], "auto");

    let mock2 = MockModel::start(vec![Reply::sse(Answer::text("Still hello.").anthropic())]);
    let output = run(
        anthropic_model(&env, &mock2, "and now?", "claude-sonnet-4-5").args([
            "--continue",
            "--output-format",
            "json",
        ]),
    );
    assert_exit(&output, 0);
    let received = mock2.received();
    let messages = received[0].messages();
    let text = serde_json::to_string(messages).unwrap();
    assert!(text.contains("SUMMARY: notes.txt says hello."), "{text}");
    assert!(text.contains("and now?"), "{text}");
    assert!(!text.contains("what do the notes say?"), "{text}");
}

#[test]
fn the_task_tool_runs_a_sub_agent_through_the_real_binary() {
    let env = Env::new();
    env.write("notes.txt", "the key is under the mat\n");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Delegating.")
                .call(
                    "toolu_task",
                    "task",
                    json!({"description": "find the key", "prompt": "Where is the key? Read notes.txt."}),
                )
                .anthropic(),
        ),
        Reply::sse(
            Answer::text("")
                .call("toolu_sub", "fs__read", json!({"path": "notes.txt"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("Under the mat (notes.txt:1).").anthropic()),
        Reply::sse(Answer::text("It is under the mat.").anthropic()),
    ]);
    let output = run(anthropic(&env, &mock, "where is the key?").args(["--output-format", "json"]));
    assert_exit(&output, 0);
    let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(result["result"], "It is under the mat.");
    let received = mock.received();
    assert_eq!(received.len(), 4);
    let sub = &received[1];
    assert!(
        sub.body["system"]
            .to_string()
            .contains("You are a sub-agent")
    );
    let offered: Vec<&str> = sub.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"fs__read"), "{offered:?}");
    assert!(
        !offered.contains(&"task") && !offered.contains(&"fs__write"),
        "{offered:?}"
    );
    let last = received[3].messages().last().unwrap().to_string();
    assert!(last.contains("Under the mat (notes.txt:1)."), "{last}");
    assert_every_call_answered(&received[3]);
}

/// A plugin's log lines and progress reach a session as its call runs:
/// `tool_log` and `tool_progress` events in stream-json, before the
/// call's result; on stderr in text mode a warning always, progress only
/// with `-v`; stdout keeps the answer alone.
#[test]
fn a_plugins_log_lines_and_progress_reach_the_session() {
    let env = Env::new();
    let plugin = fixture("misbehave");
    let answers = || {
        MockModel::start(vec![
            Reply::sse(
                Answer::text("Chatting.")
                    .call(
                        "toolu_chat",
                        "misbehave__chatty",
                        json!({"message": "careful \u{1b}[2Jnow"}),
                    )
                    .anthropic(),
            ),
            Reply::sse(Answer::text("Done.").anthropic()),
        ])
    };
    let with_plugin = |cmd: &mut assert_cmd::Command| {
        cmd.args(["--permission-mode", "bypass", "--plugin"])
            .arg(format!("misbehave={}", plugin.display()));
    };

    let mock = answers();
    let mut cmd = anthropic(&env, &mock, "chat");
    with_plugin(&mut cmd);
    cmd.args(["--output-format", "stream-json", "--capstan-events"]);
    let output = run(&mut cmd);
    assert_exit(&output, 0);
    let all = events(&output);
    let log = &all[position(&all, "tool_log", "toolu_chat")];
    assert_eq!(log["source"], "misbehave");
    assert_eq!(log["level"], "warning");
    assert_eq!(log["message"], "careful \u{1b}[2Jnow");
    let progress = &all[position(&all, "tool_progress", "toolu_chat")];
    assert_eq!(progress["message"], "working");
    assert_eq!(progress["done"], 1);
    assert_eq!(progress["total"], 2);
    assert!(
        position(&all, "tool_progress", "toolu_chat") < position(&all, "tool_result", "toolu_chat")
    );

    let mock = answers();
    let mut cmd = anthropic(&env, &mock, "chat");
    with_plugin(&mut cmd);
    let output = run(&mut cmd);
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), "Done.\n");
    let err = stderr(&output);
    // Escaped, never obeyed.
    assert!(
        err.contains("[misbehave] warning: careful \\x1b[2Jnow"),
        "{err}"
    );
    assert!(!err.contains("working"), "{err}");

    let mock = answers();
    let mut cmd = anthropic(&env, &mock, "chat");
    with_plugin(&mut cmd);
    cmd.arg("-v");
    let output = run(&mut cmd);
    assert_exit(&output, 0);
    assert!(
        stderr(&output).contains("[misbehave] working (1/2)"),
        "{}",
        stderr(&output)
    );
}
