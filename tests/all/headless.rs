//! Print mode as scripts written for Claude Code's headless mode use it:
//! `--output-format json` and `stream-json` compared field by field with
//! the shapes in `tests/fixtures/headless` (written from Claude Code's
//! documented SDK messages), usage and turns on `--continue`,
//! `--input-format stream-json`, the rule-list and system-prompt flags,
//! `permission_denials`, and `--permission-prompt-tool`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::process::{Output, Stdio};

use serde_json::{Value, json};

use crate::support::mock_model::{Answer, MockModel, Reply, Tokens};
use crate::support::{Env, MODEL_VARS, assert_exit, fixture, repo_root, stderr, stdout};

const API_KEY: &str = "sk-ant-mock-key-17";

/// `capstan -p PROMPT` against the mock, with `args`.
fn capstan(env: &Env, mock: &MockModel, prompt: &str, args: &[&str]) -> Output {
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", prompt);
    cmd.args(args).timeout(std::time::Duration::from_secs(60));
    cmd.output().unwrap()
}

/// The JSON lines of stdout.
pub(crate) fn lines(output: &Output) -> Vec<Value> {
    stdout(output)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

pub(crate) fn golden(name: &str) -> String {
    std::fs::read_to_string(repo_root().join("tests/fixtures/headless").join(name)).unwrap()
}

/// Checks `actual` against the expected shape `expected` (see the
/// fixtures' README), at `path`.
pub(crate) fn conforms(expected: &Value, actual: &Value, session_id: &str, path: &str) {
    match expected {
        Value::String(placeholder) if placeholder.starts_with('<') => {
            let ok = match placeholder.as_str() {
                "<string>" => actual.is_string(),
                "<number>" => actual.is_number(),
                "<bool>" => actual.is_boolean(),
                "<array>" => actual.is_array(),
                "<object>" => actual.is_object(),
                "<uuid>" => actual.as_str().is_some_and(|s| {
                    s.split('-').map(str::len).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
                }),
                "<session_id>" => actual.as_str() == Some(session_id) && !session_id.is_empty(),
                other => mismatch(
                    path,
                    &format!("unknown placeholder {other}"),
                    expected,
                    actual,
                ),
            };
            if !ok {
                mismatch(path, "wrong type", expected, actual);
            }
        }
        Value::Object(fields) => {
            let Some(object) = actual.as_object() else {
                mismatch(path, "not an object", expected, actual);
            };
            for (key, value) in fields {
                let Some(found) = object.get(key) else {
                    mismatch(path, &format!("no field `{key}`"), expected, actual);
                };
                conforms(value, found, session_id, &format!("{path}.{key}"));
            }
        }
        Value::Array(items) => {
            let Some(found) = actual.as_array() else {
                mismatch(path, "not an array", expected, actual);
            };
            if found.len() != items.len() {
                mismatch(path, "a different number of elements", expected, actual);
            }
            for (n, (item, got)) in items.iter().zip(found).enumerate() {
                conforms(item, got, session_id, &format!("{path}[{n}]"));
            }
        }
        _ => {
            if expected != actual {
                mismatch(path, "a different value", expected, actual);
            }
        }
    }
}

fn mismatch(path: &str, why: &str, expected: &Value, actual: &Value) -> ! {
    panic!("{path}: {why}\nexpected {expected}\nactual   {actual}")
}

/// The messages of a stream Claude Code's consumers know; capstan's own
/// events are skipped as such a consumer skips them.
fn claude_code_messages(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| {
            matches!(
                e["type"].as_str(),
                Some("system" | "assistant" | "user" | "result")
            )
        })
        .cloned()
        .collect()
}

#[test]
fn json_result_has_claude_codes_fields_and_the_denied_call() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "toolu_write",
                    "fs__write",
                    json!({"path": "out.txt", "content": "hello\n"}),
                )
                .tokens(Tokens {
                    input: 10,
                    output: 5,
                    cache_read: 100,
                    cache_creation: 20,
                })
                .anthropic(),
        ),
        Reply::sse(
            Answer::text("I may not write it.")
                .tokens(Tokens {
                    input: 20,
                    output: 7,
                    cache_read: 0,
                    cache_creation: 0,
                })
                .anthropic(),
        ),
    ]);
    let output = capstan(&env, &mock, "write out.txt", &["--output-format", "json"]);
    assert_exit(&output, 0);
    let all = lines(&output);
    assert_eq!(all.len(), 1, "json prints one object: {all:#?}");
    let result = &all[0];
    let session_id = result["session_id"].as_str().unwrap();
    let expected: Value = serde_json::from_str(&golden("result.json")).unwrap();
    conforms(&expected, result, session_id, "result");
    assert!(!env.ws.path().join("out.txt").exists());
}

#[test]
fn stream_json_has_claude_codes_messages_with_one_tool_naming() {
    let env = Env::new();
    env.write("a.txt", "hello\n");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Reading it.")
                .call("toolu_read", "fs__read", json!({"path": "a.txt"}))
                .anthropic(),
        ),
        Reply::sse(
            Answer::text("It says hello.")
                .tokens(Tokens {
                    input: 20,
                    output: 7,
                    cache_read: 0,
                    cache_creation: 0,
                })
                .anthropic(),
        ),
    ]);
    let output = capstan(
        &env,
        &mock,
        "what does a.txt say?",
        &["--output-format", "stream-json", "--capstan-events"],
    );
    assert_exit(&output, 0);
    let events = lines(&output);
    let session_id = events[0]["session_id"].as_str().unwrap().to_string();
    for event in &events {
        assert_eq!(event["session_id"], session_id.as_str(), "{event}");
    }
    let messages = claude_code_messages(&events);
    let expected: Vec<Value> = golden("stream.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(messages.len(), expected.len(), "{messages:#?}");
    for (n, (want, got)) in expected.iter().zip(&messages).enumerate() {
        conforms(want, got, &session_id, &format!("message {n}"));
    }
    // One name for a tool everywhere: the one the model calls it by.
    let init = &messages[0];
    assert!(
        init["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("fs__read")),
        "{init}"
    );
    let started = events.iter().find(|e| e["type"] == "tool_started").unwrap();
    assert_eq!(started["tool"], "fs__read");
    let finished = events.iter().find(|e| e["type"] == "tool_result").unwrap();
    assert_eq!(finished["tool"], "fs__read");
    assert_eq!(
        init["cwd"].as_str().unwrap(),
        env.ws_path().to_str().unwrap()
    );
}

#[test]
fn continue_reports_usage_and_turns_of_this_run_only() {
    let env = Env::new();
    let first = MockModel::start(vec![Reply::sse(
        Answer::text("First.")
            .tokens(Tokens {
                input: 1000,
                output: 100,
                cache_read: 5000,
                cache_creation: 500,
            })
            .anthropic(),
    )]);
    assert_exit(
        &capstan(&env, &first, "one", &["--output-format", "json"]),
        0,
    );
    let second = MockModel::start(vec![Reply::sse(
        Answer::text("Second.")
            .tokens(Tokens {
                input: 7,
                output: 3,
                cache_read: 11,
                cache_creation: 2,
            })
            .anthropic(),
    )]);
    let output = capstan(
        &env,
        &second,
        "two",
        &["--continue", "--output-format", "json"],
    );
    assert_exit(&output, 0);
    let result = &lines(&output)[0];
    assert_eq!(result["num_turns"], 1, "{result}");
    assert_eq!(
        result["usage"],
        json!({
            "input_tokens": 7,
            "output_tokens": 3,
            "cache_read_input_tokens": 11,
            "cache_creation_input_tokens": 2,
            "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 2},
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
            "service_tier": "standard",
            "output_tokens_details": {"thinking_tokens": 0},
            "speed": "standard",
        })
    );
    let model_usage = &result["modelUsage"]["mock-model"];
    assert_eq!(model_usage["inputTokens"], 7, "{result}");
    assert_eq!(model_usage["outputTokens"], 3, "{result}");
    assert_eq!(model_usage["cacheReadInputTokens"], 11, "{result}");
    assert_eq!(model_usage["cacheCreationInputTokens"], 2, "{result}");
    // The model did see the first run's conversation.
    assert_eq!(second.received()[0].messages().len(), 3);
}

#[test]
fn max_turns_ends_with_error_max_turns() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let read = |id: &str| {
        Reply::sse(
            Answer::text("")
                .call(id, "fs__read", json!({"path": "a.txt"}))
                .anthropic(),
        )
    };
    let mock = MockModel::start(vec![read("t1"), read("t2"), read("t3")]);
    let output = capstan(
        &env,
        &mock,
        "loop",
        &["--max-turns", "2", "--output-format", "json"],
    );
    assert_exit(&output, 8);
    let result = &lines(&output)[0];
    assert_eq!(result["subtype"], "error_max_turns");
    assert_eq!(result["is_error"], true);
    assert_eq!(result["num_turns"], 2);
    assert_eq!(mock.received().len(), 2);
}

#[test]
fn stream_json_input_runs_each_prompt_and_reports_a_malformed_line() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        Reply::sse(Answer::text("One.").anthropic()),
        Reply::sse(Answer::text("Two.").anthropic()),
    ]);
    let blocks = json!({"type": "user", "message": {"role": "user",
        "content": [{"type": "text", "text": "second"}]}});
    let output = drive_stream_json(
        &env,
        &mock,
        &[
            user_message(json!("first")),
            "{\"type\": \"user\", oops".to_string(),
            blocks.to_string(),
        ],
    );
    // Both prompts ran; the bad line makes the exit a usage error.
    assert_exit(&output, 2);
    let events = lines(&output);
    let results: Vec<&Value> = events.iter().filter(|e| e["type"] == "result").collect();
    assert_eq!(results.len(), 2, "{events:#?}");
    assert_eq!(results[0]["result"], "One.");
    assert_eq!(results[1]["result"], "Two.");
    assert_eq!(results[1]["num_turns"], 1);
    let error = events.iter().find(|e| e["type"] == "input_error").unwrap();
    assert_eq!(error["line"], 2, "{error}");
    assert!(
        error["error"].as_str().unwrap().contains("not JSON"),
        "{error}"
    );
    assert_eq!(error["session_id"], events[0]["session_id"]);
    // One session: the second request carries the first exchange.
    let received = mock.received();
    assert_eq!(received.len(), 2);
    let second = received[1].messages();
    assert_eq!(second.len(), 3, "{second:#?}");
    assert!(second[2].to_string().contains("second"));
    assert!(!stderr(&output).contains("panicked"));
}

#[test]
fn stream_json_input_needs_stream_json_output() {
    let env = Env::new();
    let mock = MockModel::start(vec![]);
    let mut cmd = env.capstan();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    let output = cmd
        .env("ANTHROPIC_API_KEY", API_KEY)
        .args([
            "--base-url",
            &mock.url(),
            "-p",
            "--input-format",
            "stream-json",
        ])
        .write_stdin("")
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert!(stderr(&output).contains("--output-format stream-json"));
}

#[test]
fn rule_lists_and_system_prompt_flags_work_as_in_claude_code() {
    let env = Env::new();
    env.write("secret.txt", "s\n");
    env.write("prompt.md", "You are a terse release bot.");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "toolu_write",
                    "fs__write",
                    json!({"path": "notes.txt", "content": "n\n"}),
                )
                .call("toolu_read", "fs__read", json!({"path": "secret.txt"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("Done.").anthropic()),
    ]);
    let output = capstan(
        &env,
        &mock,
        "go",
        &[
            "--allowedTools",
            "Read, Write(notes.txt)",
            "--disallowed-tools",
            "Read(secret.txt) Bash(rm:*)",
            "--system-prompt-file",
            "prompt.md",
            "--append-system-prompt",
            "Always sign with -- bot.",
            "--output-format",
            "json",
        ],
    );
    assert_exit(&output, 0);
    assert_eq!(env.read("notes.txt"), "n\n");
    let result = &lines(&output)[0];
    assert_eq!(
        result["permission_denials"][0]["tool_name"], "fs__read",
        "{result}"
    );
    assert_eq!(
        result["permission_denials"][0]["tool_input"],
        json!({"path": "secret.txt"})
    );
    let system = mock.received()[0].body["system"].to_string();
    assert!(system.contains("You are a terse release bot."), "{system}");
    assert!(system.contains("Always sign with -- bot."), "{system}");
    assert!(
        !system.contains("fs__read"),
        "the default prompt was kept: {system}"
    );
}

#[test]
fn a_permission_prompt_tool_allows_rewrites_and_denies() {
    let env = Env::new();
    let plugin = fixture("misbehave");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "toolu_ok",
                    "fs__write",
                    json!({"path": "ok.txt", "content": "as asked\n"}),
                )
                .call(
                    "toolu_rewrite",
                    "fs__write",
                    json!({"path": "rewrite.txt", "content": "x [prompt:rewrite]\n"}),
                )
                .call(
                    "toolu_deny",
                    "fs__write",
                    json!({"path": "deny.txt", "content": "[prompt:deny]\n"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Done.").anthropic()),
    ]);
    let output = capstan(
        &env,
        &mock,
        "write three files",
        &[
            "--plugin",
            &format!("misbehave={}", plugin.display()),
            "--permission-prompt-tool",
            "misbehave__permission-prompt",
            "--output-format",
            "json",
        ],
    );
    assert_exit(&output, 0);
    assert_eq!(env.read("ok.txt"), "as asked\n");
    assert_eq!(env.read("rewrite.txt"), "rewritten by the prompt tool\n");
    assert!(!env.ws.path().join("deny.txt").exists());
    let refusal = mock.result_of("toolu_deny");
    assert!(
        refusal.contains("misbehave refuses fs__write (toolu_deny)"),
        "{refusal}"
    );
    let result = &lines(&output)[0];
    assert_eq!(
        result["permission_denials"],
        json!([{"tool_name": "fs__write", "tool_use_id": "toolu_deny",
                "tool_input": {"path": "deny.txt", "content": "[prompt:deny]\n"}}])
    );
}

#[test]
fn an_unknown_permission_prompt_tool_is_a_usage_error() {
    let env = Env::new();
    let mock = MockModel::start(vec![]);
    let output = capstan(
        &env,
        &mock,
        "hi",
        &["--permission-prompt-tool", "mcp__approver__ask"],
    );
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(
        err.contains("--permission-prompt-tool mcp__approver__ask"),
        "{err}"
    );
    assert!(mock.received().is_empty());
}

/// `capstan -p --input-format stream-json --output-format stream-json`
/// against `mock`, its stdin and stdout piped.
fn stream_json_session(env: &Env, mock: &MockModel) -> std::process::Child {
    let mut cmd = env.capstan_std();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("ANTHROPIC_API_KEY", API_KEY)
        .args(["--base-url", &mock.url(), "--model", "mock-model", "-p"])
        .args([
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--capstan-events",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().unwrap()
}

/// The same, given `input` one line each, its stdin then closed, to its
/// end.
fn drive_stream_json(env: &Env, mock: &MockModel, input: &[String]) -> Output {
    let mut child = stream_json_session(env, mock);
    {
        let mut stdin = child.stdin.take().unwrap();
        for line in input {
            writeln!(stdin, "{line}").unwrap();
        }
    }
    child.wait_with_output().unwrap()
}

/// A user message of the SDK with `content`.
fn user_message(content: Value) -> String {
    json!({"type": "user", "message": {"role": "user", "content": content},
           "session_id": "", "parent_tool_use_id": null})
    .to_string()
}

/// The `control_response` to request `id` among `events`.
fn control_response<'a>(events: &'a [Value], id: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == "control_response" && e["response"]["request_id"] == id)
        .unwrap_or_else(|| panic!("no control_response to {id}: {events:#?}"))
}

#[test]
fn stream_json_input_answers_control_requests_as_claude_codes_sdk_expects() {
    let env = Env::new();
    let mock = MockModel::start(vec![Reply::sse(Answer::text("One.").anthropic())]);
    let request = |id: &str, body: Value| {
        json!({"type": "control_request", "request_id": id, "request": body}).to_string()
    };
    let output = drive_stream_json(
        &env,
        &mock,
        &[
            request("req_1", json!({"subtype": "initialize", "hooks": null})),
            request("req_2", json!({"subtype": "stop_task", "task_id": "t1"})),
            request(
                "req_3",
                json!({"subtype": "initialize", "hooks": {"PreToolUse": [{"matcher": "Bash", "hookCallbackIds": ["hook_0"]}]}}),
            ),
            json!({"type": "control_request", "request": {"subtype": "interrupt"}}).to_string(),
            user_message(json!("first")),
        ],
    );
    // Control requests are not malformed lines: the run succeeds.
    assert_exit(&output, 0);
    let events = lines(&output);
    let init = control_response(&events, "req_1");
    assert_eq!(init["response"]["subtype"], "success", "{init}");
    let body = &init["response"]["response"];
    assert!(body["commands"].is_array(), "{body}");
    assert_eq!(body["output_style"], "default");
    assert_eq!(body["models"][0]["value"], "mock-model");
    let unknown = control_response(&events, "req_2");
    assert_eq!(unknown["response"]["subtype"], "error");
    assert!(
        unknown["response"]["error"]
            .as_str()
            .unwrap()
            .contains("stop_task"),
        "{unknown}"
    );
    // A second initialize is refused; the session goes on.
    let again = control_response(&events, "req_3");
    assert_eq!(again["response"]["subtype"], "error");
    assert!(
        again["response"]["error"]
            .as_str()
            .unwrap()
            .contains("initialize once"),
        "{again}"
    );
    let no_id = events
        .iter()
        .find(|e| e["type"] == "control_response" && e["response"]["request_id"].is_null())
        .unwrap();
    assert_eq!(no_id["response"]["subtype"], "error");
    let results: Vec<&Value> = events.iter().filter(|e| e["type"] == "result").collect();
    assert_eq!(results.len(), 1, "{events:#?}");
    assert_eq!(results[0]["result"], "One.");
    assert!(!stderr(&output).contains("panicked"));
}

#[test]
fn a_drivers_interrupt_stops_the_running_prompt_and_the_next_one_runs() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        Reply::silent(),
        Reply::sse(Answer::text("Two.").anthropic()),
    ]);
    let mut child = stream_json_session(&env, &mock);
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", user_message(json!("first"))).unwrap();
    // Once the first prompt's request is at the model, it is running.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while mock.received().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the prompt never reached the model"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let interrupt = json!({"type": "control_request", "request_id": "req_int",
                           "request": {"subtype": "interrupt"}});
    writeln!(stdin, "{interrupt}").unwrap();
    writeln!(stdin, "{}", user_message(json!("second"))).unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert_exit(&output, 0);
    let events = lines(&output);
    let answer = control_response(&events, "req_int");
    assert_eq!(answer["response"]["subtype"], "success");
    let results: Vec<&Value> = events.iter().filter(|e| e["type"] == "result").collect();
    assert_eq!(results.len(), 2, "{events:#?}");
    assert_eq!(results[0]["subtype"], "error_during_execution");
    assert_eq!(results[1]["subtype"], "success");
    assert_eq!(results[1]["result"], "Two.");
}

#[test]
fn stream_json_input_takes_text_blocks_and_refuses_images_clearly() {
    let env = Env::new();
    let mock = MockModel::start(vec![Reply::sse(Answer::text("Seen.").anthropic())]);
    let image = json!({"type": "image", "source": {"type": "base64",
        "media_type": "image/png", "data": "iVBORw0KGgo="}});
    let output = drive_stream_json(
        &env,
        &mock,
        &[
            user_message(json!([{"type": "text", "text": "look"}, image])),
            user_message(json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])),
        ],
    );
    assert_exit(&output, 2);
    let events = lines(&output);
    let error = events.iter().find(|e| e["type"] == "input_error").unwrap();
    assert_eq!(error["line"], 1);
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("only text to the model"),
        "{error}"
    );
    let received = mock.received();
    assert_eq!(received.len(), 1, "the image message reached no model");
    assert!(received[0].first_user_text().contains("a\n\nb"));
}
