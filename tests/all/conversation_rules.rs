//! Every request capstan sends is one the model APIs accept: a model answer
//! that repeats a tool call id, and transcripts damaged in each way a
//! resume can meet (starting with the model's message, a repeated id, a
//! result without its call, a call never answered, two user messages in a
//! row), checked against what the mock model server receives next.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use support::mock_model::{Answer, MockModel, Received, Reply};
use support::{Env, MODEL_VARS, assert_exit, stderr, stdout};

const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// `capstan -p PROMPT` against the mock as an Anthropic server.
fn anthropic(env: &Env, mock: &MockModel, prompt: &str) -> assert_cmd::Command {
    let mut cmd = env.anthropic_session(&mock.url(), "sk-ant-mock", "mock-model", prompt);
    cmd.timeout(RUN_TIMEOUT);
    cmd
}

/// `capstan -p PROMPT` against the mock as an OpenAI-compatible server.
fn openai(env: &Env, mock: &MockModel, prompt: &str) -> assert_cmd::Command {
    let mut cmd = env.capstan();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("OPENAI_API_KEY", "sk-openai-mock")
        .env("NO_COLOR", "1")
        .args(["--provider", "openai", "--base-url"])
        .arg(format!("{}/v1", mock.url()))
        .args(["--model", "mock-gpt", "-p", prompt])
        .timeout(RUN_TIMEOUT);
    cmd
}

fn run(cmd: &mut assert_cmd::Command) -> Output {
    cmd.output().unwrap()
}

/// The blocks of a wire message's content array.
fn content(message: &Value) -> &[Value] {
    message["content"].as_array().map_or(&[][..], Vec::as_slice)
}

/// Asserts an Anthropic Messages request keeps every rule the API holds a
/// conversation to: the first message the user's, roles alternating, no
/// empty message or blank text, tool call ids unique, each call answered
/// exactly once by a result in the next message (results before other
/// blocks), and each result answering a call in the message before it.
fn assert_valid_anthropic(request: &Received) {
    let messages = request.messages();
    let all = || format!("{messages:#?}");
    assert!(!messages.is_empty(), "no messages");
    assert_eq!(messages[0]["role"], "user", "first message: {}", all());
    let mut ids: HashSet<String> = HashSet::new();
    let mut open: HashSet<String> = HashSet::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap();
        if i > 0 {
            assert_ne!(
                messages[i - 1]["role"],
                role,
                "roles repeat at {i}: {}",
                all()
            );
        }
        let blocks = content(message);
        assert!(
            !blocks.is_empty()
                || message["content"]
                    .as_str()
                    .is_some_and(|t| !t.trim().is_empty()),
            "message {i} is empty: {}",
            all()
        );
        let mut past_results = false;
        for block in blocks {
            match block["type"].as_str().unwrap() {
                "text" => {
                    assert!(
                        !block["text"].as_str().unwrap().trim().is_empty(),
                        "blank text in message {i}: {}",
                        all()
                    );
                    past_results = true;
                }
                "tool_use" => {
                    assert_eq!(role, "assistant", "tool_use in a user message: {}", all());
                    let id = block["id"].as_str().unwrap().to_string();
                    assert!(!id.is_empty(), "empty id: {}", all());
                    assert!(
                        id.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                        "id {id} has characters the API refuses"
                    );
                    assert!(
                        ids.insert(id.clone()),
                        "tool_use id {id} repeated: {}",
                        all()
                    );
                    open.insert(id);
                }
                "tool_result" => {
                    assert_eq!(
                        role,
                        "user",
                        "tool_result in an assistant message: {}",
                        all()
                    );
                    assert!(
                        !past_results,
                        "tool_result after text in message {i}: {}",
                        all()
                    );
                    let id = block["tool_use_id"].as_str().unwrap();
                    assert!(
                        open.remove(id),
                        "tool_result {id} in message {i} answers no call just before: {}",
                        all()
                    );
                }
                _ => past_results = true,
            }
        }
        if role == "user" {
            assert!(
                open.is_empty(),
                "calls {open:?} unanswered at {i}: {}",
                all()
            );
        }
    }
    assert!(open.is_empty(), "calls {open:?} unanswered: {}", all());
}

/// Asserts an OpenAI Chat Completions request keeps the same rules in its
/// shape: after the system message the user's first, every assistant
/// `tool_calls` id unique and answered by exactly one `tool` message right
/// after it, and every `tool` message answering such a call.
fn assert_valid_openai(request: &Received) {
    let messages = request.messages();
    let all = || format!("{messages:#?}");
    let conversation: Vec<&Value> = messages.iter().filter(|m| m["role"] != "system").collect();
    assert_eq!(conversation[0]["role"], "user", "{}", all());
    let mut ids: HashSet<String> = HashSet::new();
    let mut open: HashSet<String> = HashSet::new();
    let mut previous = "";
    for message in conversation {
        let role = message["role"].as_str().unwrap();
        match role {
            "tool" => {
                let id = message["tool_call_id"].as_str().unwrap();
                assert!(
                    open.remove(id),
                    "tool message {id} answers no open call: {}",
                    all()
                );
            }
            _ => {
                assert!(open.is_empty(), "calls {open:?} unanswered: {}", all());
                if role == "assistant" {
                    assert_ne!(previous, "assistant", "two assistant messages: {}", all());
                    for call in message["tool_calls"].as_array().into_iter().flatten() {
                        let id = call["id"].as_str().unwrap().to_string();
                        assert!(
                            ids.insert(id.clone()),
                            "tool call id {id} repeated: {}",
                            all()
                        );
                        open.insert(id);
                    }
                }
            }
        }
        previous = role;
    }
    assert!(open.is_empty(), "calls {open:?} unanswered: {}", all());
}

/// The text of every tool result in an Anthropic request, by call id.
fn results(request: &Received) -> Vec<(String, String)> {
    request
        .messages()
        .iter()
        .flat_map(content)
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            (
                b["tool_use_id"].as_str().unwrap().to_string(),
                b["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The workspace's only transcript.
fn only_transcript(env: &Env) -> PathBuf {
    let mut files = Vec::new();
    for dir in std::fs::read_dir(env.home.path().join("sessions"))
        .unwrap()
        .flatten()
    {
        for file in std::fs::read_dir(dir.path()).unwrap().flatten() {
            if file.path().extension().is_some_and(|e| e == "jsonl") {
                files.push(file.path());
            }
        }
    }
    assert_eq!(files.len(), 1, "{files:?}");
    files.remove(0)
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn a_model_answer_repeating_a_call_id_runs_both_calls_under_unique_ids() {
    let env = Env::new();
    env.write("a.txt", "alpha\n");
    env.write("b.txt", "beta\n");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Reading both.")
                .call("toolu_same", "fs__read", json!({"path": "a.txt"}))
                .call("toolu_same", "fs__read", json!({"path": "b.txt"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("Read them.").anthropic()),
        Reply::sse(Answer::text("Still fine.").anthropic()),
    ]);
    let output = run(&mut anthropic(&env, &mock, "read a and b"));
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("Read them."),
        "{}",
        stdout(&output)
    );
    let notice = stderr(&output);
    assert!(
        notice.contains("the model gave more than one tool call the id toolu_same")
            && notice.contains("runs as toolu_same_2"),
        "{notice}"
    );
    let received = mock.received();
    assert_eq!(received.len(), 2);
    assert_valid_anthropic(&received[1]);
    let answered = results(&received[1]);
    assert_eq!(answered.len(), 2, "{answered:?}");
    assert_eq!(answered[0].0, "toolu_same");
    assert!(answered[0].1.contains("alpha"), "{answered:?}");
    assert_eq!(answered[1].0, "toolu_same_2");
    assert!(answered[1].1.contains("beta"), "{answered:?}");

    // The transcript holds the unique ids, so a resume sends them as is.
    let all = records(&only_transcript(&env));
    let assistant = all.iter().find(|r| r["type"] == "assistant").unwrap();
    let ids: Vec<&str> = content(&assistant["message"])
        .iter()
        .filter_map(|b| b["id"].as_str())
        .collect();
    assert_eq!(ids, ["toolu_same", "toolu_same_2"]);
    let output = run(anthropic(&env, &mock, "and now?").arg("--continue"));
    assert_exit(&output, 0);
    assert!(
        !stderr(&output).contains("used twice"),
        "{}",
        stderr(&output)
    );
    let received = mock.received();
    assert_valid_anthropic(&received[2]);
}

/// OpenAI-compatible servers that number calls from 0 in every answer
/// (`call_0` each turn) get a conversation with unique ids all the same.
#[test]
fn an_openai_server_reusing_call_ids_across_turns_gets_unique_ids() {
    let env = Env::new();
    env.write("a.txt", "alpha\n");
    env.write("b.txt", "beta\n");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("First.")
                .call("call_0", "fs__read", json!({"path": "a.txt"}))
                .openai(),
        ),
        Reply::sse(
            Answer::text("Second.")
                .call("call_0", "fs__read", json!({"path": "b.txt"}))
                .call("call_1", "fs__read", json!({"path": "a.txt"}))
                .openai(),
        ),
        Reply::sse(Answer::text("Both read.").openai()),
    ]);
    let output = run(&mut openai(&env, &mock, "read them in turn"));
    assert_exit(&output, 0);
    assert!(stdout(&output).contains("Both read."));
    let received = mock.received();
    assert_eq!(received.len(), 3);
    for request in &received {
        assert_valid_openai(request);
    }
    let tools: Vec<(&str, &str)> = received[2]
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap(),
                m["content"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(tools.len(), 3, "{tools:?}");
    assert_eq!(tools[0].0, "call_0");
    assert!(tools[0].1.contains("alpha"));
    assert_eq!(tools[1].0, "call_0_2");
    assert!(tools[1].1.contains("beta"));
    assert_eq!(tools[2].0, "call_1");
    // Reusing an earlier turn's id is the server's habit, not news.
    assert!(
        !stderr(&output).contains("more than one tool call"),
        "{}",
        stderr(&output)
    );
}

/// A finished session's transcript with its conversation replaced by
/// `conversation` (records of type user, assistant and tool_results).
fn damaged_session(env: &Env, conversation: &[Value]) -> PathBuf {
    let mock = MockModel::start(vec![Reply::sse(Answer::text("Hello.").anthropic())]);
    let output = run(&mut anthropic(env, &mock, "hello"));
    assert_exit(&output, 0);
    let path = only_transcript(env);
    let kept: Vec<Value> = records(&path)
        .into_iter()
        .filter(|r| r["type"] == "start")
        .chain(conversation.iter().map(|record| {
            let mut record = record.clone();
            record["ts_ms"] = json!(1_700_000_000_000u64);
            record
        }))
        .collect();
    let text: String = kept.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

fn user_record(text: &str) -> Value {
    json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]}})
}

fn assistant_record(blocks: Value) -> Value {
    json!({"type": "assistant", "message": {"role": "assistant", "content": blocks}})
}

fn results_record(blocks: Value) -> Value {
    json!({"type": "tool_results", "message": {"role": "user", "content": blocks}})
}

fn tool_use(id: &str, path: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "fs__read", "input": {"path": path}})
}

fn tool_result(id: &str, text: &str) -> Value {
    json!({"type": "tool_result", "tool_use_id": id, "content": text, "is_error": false})
}

/// Resumes the damaged session with `--continue`; returns what the model
/// received and the notices.
fn resume(env: &Env) -> (Received, String) {
    let mock = MockModel::start(vec![Reply::sse(Answer::text("Carrying on.").anthropic())]);
    let output = run(anthropic(env, &mock, "carry on").arg("--continue"));
    assert_exit(&output, 0);
    assert!(stdout(&output).contains("Carrying on."));
    let received = mock.received();
    assert_eq!(received.len(), 1);
    assert_valid_anthropic(&received[0]);
    (received[0].clone(), stderr(&output))
}

/// Every text and result in a request, joined.
fn said(request: &Received) -> String {
    request
        .messages()
        .iter()
        .flat_map(content)
        .map(|b| b.to_string())
        .collect()
}

#[test]
fn a_transcript_starting_with_the_model_gets_a_start_on_resume() {
    let env = Env::new();
    damaged_session(
        &env,
        &[
            assistant_record(json!([{"type": "text", "text": "I was here first."}])),
            user_record("ok"),
        ],
    );
    let (request, notices) = resume(&env);
    assert!(
        notices.contains("started with the model's message"),
        "{notices}"
    );
    let messages = request.messages();
    assert!(
        content(&messages[0])[0]["text"]
            .as_str()
            .unwrap()
            .contains("beginning of this conversation is missing")
    );
    assert_eq!(content(&messages[1])[0]["text"], "I was here first.");
}

#[test]
fn a_transcript_repeating_a_call_id_is_renamed_on_resume() {
    let env = Env::new();
    damaged_session(
        &env,
        &[
            user_record("read"),
            assistant_record(json!([
                tool_use("toolu_x", "a.txt"),
                tool_use("toolu_x", "b.txt")
            ])),
            results_record(json!([
                tool_result("toolu_x", "alpha"),
                tool_result("toolu_x", "beta")
            ])),
            assistant_record(json!([tool_use("toolu_x", "c.txt")])),
            results_record(json!([tool_result("toolu_x", "gamma")])),
            assistant_record(json!([{"type": "text", "text": "Read three."}])),
        ],
    );
    let (request, notices) = resume(&env);
    assert!(
        notices.contains(
            "tool call id toolu_x (fs__read) was used twice; the second call is now toolu_x_2"
        ),
        "{notices}"
    );
    assert!(notices.contains("now toolu_x_3"), "{notices}");
    let answered = results(&request);
    assert_eq!(
        answered,
        [
            ("toolu_x".to_string(), "alpha".to_string()),
            ("toolu_x_2".to_string(), "beta".to_string()),
            ("toolu_x_3".to_string(), "gamma".to_string()),
        ]
    );
}

#[test]
fn a_result_without_its_call_becomes_text_on_resume() {
    let env = Env::new();
    damaged_session(
        &env,
        &[
            user_record("look"),
            assistant_record(json!([{"type": "text", "text": "Looked."}])),
            results_record(json!([tool_result("toolu_ghost", "boo")])),
        ],
    );
    let (request, notices) = resume(&env);
    assert!(
        notices.contains("the result of tool call toolu_ghost answers no call"),
        "{notices}"
    );
    assert!(results(&request).is_empty());
    assert!(said(&request).contains("boo"), "the result's text is kept");
}

#[test]
fn a_call_never_answered_gets_an_interrupted_result_on_resume() {
    let env = Env::new();
    damaged_session(
        &env,
        &[
            user_record("read"),
            assistant_record(json!([tool_use("toolu_open", "a.txt")])),
        ],
    );
    let (request, notices) = resume(&env);
    assert!(
        notices.contains("tool call toolu_open (fs__read) never finished"),
        "{notices}"
    );
    let answered = results(&request);
    assert_eq!(answered.len(), 1);
    assert_eq!(answered[0].0, "toolu_open");
    assert!(answered[0].1.contains("interrupted"));
}

#[test]
fn two_user_messages_in_a_row_merge_on_resume() {
    let env = Env::new();
    damaged_session(&env, &[user_record("one"), user_record("two")]);
    let (request, _) = resume(&env);
    let messages = request.messages();
    assert_eq!(messages.len(), 1, "{messages:#?}");
    let texts: Vec<&str> = content(&messages[0])
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect();
    assert_eq!(texts, ["one", "two", "carry on"]);
}

/// All the damage at once, in the OpenAI-compatible format too.
#[test]
fn every_damage_at_once_is_repaired_for_an_openai_server() {
    let env = Env::new();
    damaged_session(
        &env,
        &[
            assistant_record(json!([
                tool_use("call_0", "a.txt"),
                tool_use("call_0", "b.txt")
            ])),
            results_record(json!([
                tool_result("call_0", "alpha"),
                tool_result("ghost", "boo")
            ])),
            user_record("then"),
            user_record("more"),
            assistant_record(json!([tool_use("call_0", "c.txt")])),
        ],
    );
    let mock = MockModel::start(vec![Reply::sse(Answer::text("Fine.").openai())]);
    let output = run(openai(&env, &mock, "carry on").arg("--continue"));
    assert_exit(&output, 0);
    let received = mock.received();
    assert_eq!(received.len(), 1);
    assert_valid_openai(&received[0]);
}
