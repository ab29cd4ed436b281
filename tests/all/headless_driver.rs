//! Print mode driven as Claude Code's Agent SDK drives `claude -p`: the
//! permission questions of `--permission-prompt-tool stdio` answered over
//! stdin, the `set_permission_mode` / `set_model` control requests, error
//! results with `errors`, session ids in the SDK's UUID shape, and
//! `--allowedTools` taking several arguments.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::headless::{conforms, golden, lines};
use crate::support::mock_model::{Answer, MockModel, Reply};
use crate::support::{Env, MODEL_VARS, assert_exit, stderr};

const API_KEY: &str = "sk-ant-mock-key-17";

/// How long one awaited line may take.
const LINE_TIMEOUT: Duration = Duration::from_secs(60);

/// A `capstan -p --input-format stream-json --output-format stream-json`
/// with `args`, its stdout lines arriving on a channel as an SDK reads
/// them.
struct Driven {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Driven {
    fn start(env: &Env, mock: &MockModel, args: &[&str]) -> Self {
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
            ])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take();
        let out = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                if sender.send(value).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn prompt(&mut self, text: &str) {
        self.send(
            &json!({"type": "user", "message": {"role": "user", "content": text},
                          "parent_tool_use_id": null, "session_id": "default"}),
        );
    }

    /// The next line of `type`; fails (killing capstan) if none comes.
    fn next(&mut self, kind: &str) -> Value {
        loop {
            match self.lines.recv_timeout(LINE_TIMEOUT) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line["type"] == kind {
                        return line;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!("no `{kind}` line; stdout so far: {:#?}", self.seen);
                }
            }
        }
    }

    /// Closes stdin and returns the exit code and every line.
    fn finish(mut self) -> (i32, Vec<Value>) {
        drop(self.stdin.take());
        while let Ok(line) = self.lines.recv_timeout(LINE_TIMEOUT) {
            self.seen.push(line);
        }
        let status = self.child.wait().unwrap();
        (status.code().unwrap_or(-1), self.seen)
    }
}

fn is_uuid(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    parts.iter().map(|p| p.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && parts
            .iter()
            .all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
}

#[test]
fn the_driver_answers_can_use_tool_requests_as_the_agent_sdk_does() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Writing both.")
                .call(
                    "toolu_allow",
                    "fs__write",
                    json!({"path": "asked.txt", "content": "one\n"}),
                )
                .call(
                    "toolu_deny",
                    "fs__write",
                    json!({"path": "deny.txt", "content": "two\n"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("One written, one refused.").anthropic()),
    ]);
    let mut driver = Driven::start(&env, &mock, &["--permission-prompt-tool", "stdio"]);
    driver.prompt("write two files");
    // Calls run in order, so the questions come one at a time.
    let first = driver.next("control_request");
    let request = &first["request"];
    assert_eq!(request["subtype"], "can_use_tool", "{first}");
    assert_eq!(request["tool_name"], "fs__write");
    assert_eq!(request["tool_use_id"], "toolu_allow");
    assert_eq!(
        request["input"],
        json!({"path": "asked.txt", "content": "one\n"})
    );
    assert!(request["permission_suggestions"].is_array(), "{first}");
    assert!(
        request["decision_reason"]
            .as_str()
            .unwrap()
            .contains("fs.write"),
        "{first}"
    );
    assert!(first["request_id"].is_string(), "{first}");
    driver.send(&json!({"type": "control_response", "response": {
        "subtype": "success", "request_id": first["request_id"],
        "response": {"behavior": "allow",
                     "updatedInput": {"path": "chosen.txt", "content": "one\n"}}}}));
    let second = driver.next("control_request");
    assert_eq!(second["request"]["tool_use_id"], "toolu_deny");
    assert_ne!(second["request_id"], first["request_id"]);
    driver.send(&json!({"type": "control_response", "response": {
        "subtype": "success", "request_id": second["request_id"],
        "response": {"behavior": "deny", "message": "not that file"}}}));
    let result = driver.next("result");
    assert_eq!(result["subtype"], "success", "{result}");
    assert_eq!(
        result["permission_denials"],
        json!([{"tool_name": "fs__write", "tool_use_id": "toolu_deny",
                "tool_input": {"path": "deny.txt", "content": "two\n"}}])
    );
    let (code, _) = driver.finish();
    assert_eq!(code, 0);
    // The allowed call ran with the driver's input; the denied one not at
    // all, and the model was told the driver's reason.
    assert_eq!(env.read("chosen.txt"), "one\n");
    assert!(!env.ws.path().join("asked.txt").exists());
    assert!(!env.ws.path().join("deny.txt").exists());
    let refusal = mock.result_of("toolu_deny");
    assert!(refusal.contains("not that file"), "{refusal}");
}

#[test]
fn a_driver_that_errs_or_leaves_denies_the_call_and_the_run_goes_on() {
    let env = Env::new();
    let write = |id: &str, path: &str| {
        Reply::sse(
            Answer::text("")
                .call(id, "fs__write", json!({"path": path, "content": "x\n"}))
                .anthropic(),
        )
    };
    let mock = MockModel::start(vec![
        write("toolu_err", "err.txt"),
        Reply::sse(Answer::text("Refused.").anthropic()),
        write("toolu_gone", "gone.txt"),
        Reply::sse(Answer::text("Refused again.").anthropic()),
    ]);
    let mut driver = Driven::start(
        &env,
        &mock,
        &["--permission-prompt-tool", "stdio", "--capstan-events"],
    );
    driver.prompt("write err.txt");
    let asked = driver.next("control_request");
    // A response to no question answers nothing: the question still
    // waits, and the line is reported once the prompt is done.
    driver.send(&json!({"type": "control_response", "response": {
        "subtype": "success", "request_id": "req_unknown", "response": {"behavior": "allow"}}}));
    driver.send(&json!({"type": "control_response", "response": {
        "subtype": "error", "request_id": asked["request_id"], "error": "the driver broke"}}));
    let result = driver.next("result");
    assert_eq!(result["subtype"], "success", "{result}");
    let unexpected = driver.next("input_error");
    assert!(
        unexpected["error"]
            .as_str()
            .unwrap()
            .contains("req_unknown"),
        "{unexpected}"
    );
    assert_eq!(
        result["permission_denials"][0]["tool_use_id"], "toolu_err",
        "{result}"
    );
    assert!(
        mock.result_of("toolu_err").contains("the driver broke"),
        "{}",
        mock.result_of("toolu_err")
    );
    // Asked, the driver closes its input instead of answering.
    driver.prompt("write gone.txt");
    driver.next("control_request");
    let (code, events) = driver.finish();
    let last = events.iter().rfind(|e| e["type"] == "result").unwrap();
    assert_eq!(last["permission_denials"][0]["tool_use_id"], "toolu_gone");
    assert!(
        mock.result_of("toolu_gone").contains("closed stdin"),
        "{}",
        mock.result_of("toolu_gone")
    );
    // The unexpected response was a malformed line: a usage error.
    assert_eq!(code, 2);
    assert!(!env.ws.path().join("err.txt").exists());
    assert!(!env.ws.path().join("gone.txt").exists());
}

#[test]
fn permission_prompt_tool_stdio_needs_stream_json_input() {
    let env = Env::new();
    let mock = MockModel::start(vec![]);
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "hi");
    cmd.args([
        "--permission-prompt-tool",
        "stdio",
        "--output-format",
        "json",
    ])
    .timeout(Duration::from_secs(60));
    let output = cmd.output().unwrap();
    assert_exit(&output, 2);
    let result = &lines(&output)[0];
    assert_eq!(result["subtype"], "error_during_execution");
    let errors = result["errors"].as_array().unwrap();
    assert!(
        errors[0]
            .as_str()
            .unwrap()
            .contains("--input-format stream-json"),
        "{result}"
    );
    assert!(mock.received().is_empty());
}

#[test]
fn set_permission_mode_and_set_model_apply_between_prompts_with_a_new_init() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        Reply::sse(Answer::text("First.").anthropic()),
        Reply::sse(
            Answer::text("")
                .call(
                    "toolu_plan",
                    "fs__write",
                    json!({"path": "p.txt", "content": "x\n"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Planned only.").anthropic()),
    ]);
    let mut driver = Driven::start(&env, &mock, &["--permission-mode", "accept-edits"]);
    driver.prompt("one");
    let init = driver.next("system");
    assert_eq!(init["permissionMode"], "acceptEdits");
    driver.next("result");
    let request = |id: &str, body: Value| json!({"type": "control_request", "request_id": id, "request": body});
    driver.send(&request(
        "req_mode",
        json!({"subtype": "set_permission_mode", "mode": "plan"}),
    ));
    let answer = driver.next("control_response");
    assert_eq!(
        answer["response"],
        json!({"subtype": "success", "request_id": "req_mode", "response": {"mode": "plan"}})
    );
    let init = driver.next("system");
    assert_eq!(init["subtype"], "init");
    assert_eq!(init["permissionMode"], "plan");
    driver.send(&request(
        "req_model",
        json!({"subtype": "set_model", "model": "mock-model-2"}),
    ));
    let answer = driver.next("control_response");
    assert_eq!(answer["response"]["subtype"], "success", "{answer}");
    let init = driver.next("system");
    assert_eq!(init["model"], "mock-model-2");
    driver.send(&request(
        "req_bad",
        json!({"subtype": "set_permission_mode", "mode": "sometimes"}),
    ));
    let answer = driver.next("control_response");
    assert_eq!(answer["response"]["subtype"], "error", "{answer}");
    assert!(
        answer["response"]["error"]
            .as_str()
            .unwrap()
            .contains("sometimes"),
        "{answer}"
    );
    driver.prompt("two");
    let assistant = driver.next("assistant");
    assert_eq!(assistant["message"]["model"], "mock-model-2");
    let result = driver.next("result");
    // Plan mode refused the write that accept-edits would have run.
    assert_eq!(result["permission_denials"][0]["tool_use_id"], "toolu_plan");
    let (code, _) = driver.finish();
    assert_eq!(code, 0);
    assert!(!env.ws.path().join("p.txt").exists());
    let received = mock.received();
    assert_eq!(received[0].body["model"], "mock-model");
    assert_eq!(received[1].body["model"], "mock-model-2");
}

#[test]
fn error_results_list_their_errors_and_ids_are_uuids() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let read = |id: &str| {
        Reply::sse(
            Answer::text("")
                .call(id, "fs__read", json!({"path": "a.txt"}))
                .anthropic(),
        )
    };
    let mock = MockModel::start(vec![
        read("t1"),
        read("t2"),
        Reply::sse(Answer::text("Resumed.").anthropic()),
    ]);
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "loop");
    cmd.args(["--max-turns", "2", "--output-format", "json"])
        .timeout(Duration::from_secs(60));
    let output = cmd.output().unwrap();
    assert_exit(&output, 8);
    let result = &lines(&output)[0];
    let session_id = result["session_id"].as_str().unwrap();
    assert!(is_uuid(session_id), "{result}");
    let expected: Value = serde_json::from_str(&golden("result_error.json")).unwrap();
    conforms(&expected, result, session_id, "result");
    assert!(
        result["errors"][0]
            .as_str()
            .unwrap()
            .contains("--max-turns"),
        "{result}"
    );
    // The transcript is under the same id, so --resume takes it.
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "again");
    cmd.args(["--resume", session_id, "--output-format", "json"])
        .timeout(Duration::from_secs(60));
    let output = cmd.output().unwrap();
    assert_exit(&output, 0);
    let resumed = &lines(&output)[0];
    assert_eq!(resumed["session_id"], session_id, "{}", stderr(&output));
    assert_eq!(resumed["result"], "Resumed.");
    assert!(resumed.get("errors").is_none(), "{resumed}");
}

#[test]
fn allowed_tools_take_several_arguments_as_claude_code_does() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "toolu_w",
                    "fs__write",
                    json!({"path": "w.txt", "content": "w\n"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Written.").anthropic()),
    ]);
    // `--allowedTools Read Write` (two arguments) after the prompt.
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "write w.txt");
    cmd.args(["--allowedTools", "Read", "Write", "--output-format", "json"])
        .timeout(Duration::from_secs(60));
    let output = cmd.output().unwrap();
    assert_exit(&output, 0);
    assert_eq!(lines(&output)[0]["permission_denials"], json!([]));
    assert_eq!(env.read("w.txt"), "w\n");

    // Before the prompt, the list takes the prompt too, as in Claude Code;
    // the error says so.
    let mut cmd = env.capstan_std();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("ANTHROPIC_API_KEY", API_KEY)
        .args(["--base-url", &mock.url(), "--model", "mock-model", "-p"])
        .args(["--allowedTools", "Read", "write w.txt"])
        .stdin(Stdio::null());
    let output = cmd.output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let mut err = String::new();
    (&output.stderr[..]).read_to_string(&mut err).unwrap();
    assert!(err.contains("put the prompt before them"), "{err}");
}

#[test]
fn partial_messages_stream_the_answer_and_skip_permissions_is_bypass() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Writing it now.")
                .call(
                    "toolu_w",
                    "fs__write",
                    json!({"path": "w.txt", "content": "w\n"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Written.").anthropic()),
    ]);
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "write w.txt");
    cmd.args([
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
        "--dangerously-skip-permissions",
    ])
    .timeout(Duration::from_secs(60));
    let output = cmd.output().unwrap();
    assert_exit(&output, 0);
    let events = lines(&output);
    assert_eq!(events[0]["permissionMode"], "bypassPermissions");
    assert_eq!(env.read("w.txt"), "w\n");
    let session_id = events[0]["session_id"].as_str().unwrap();
    // The first answer, from its message_start to its message_stop: as
    // Claude Code orders them, one assistant message per block, each
    // before its block's content_block_stop.
    let from = events
        .iter()
        .position(|e| e["event"]["type"] == "message_start")
        .unwrap();
    let to = from
        + events[from..]
            .iter()
            .position(|e| e["event"]["type"] == "message_stop")
            .unwrap();
    let answer = &events[from..=to];
    for event in answer {
        assert_eq!(event["session_id"], session_id, "{event}");
        assert!(event["parent_tool_use_id"].is_null(), "{event}");
        assert!(is_uuid(event["uuid"].as_str().unwrap()), "{event}");
    }
    let kinds: Vec<String> = answer
        .iter()
        .map(|e| match e["type"].as_str().unwrap() {
            "stream_event" => e["event"]["type"].as_str().unwrap().to_string(),
            "assistant" => format!("assistant {}", e["message"]["content"][0]["type"]),
            other => other.to_string(),
        })
        .filter(|kind| kind != "content_block_delta")
        .collect();
    assert_eq!(
        kinds,
        [
            "message_start",
            "content_block_start",
            "assistant \"text\"",
            "content_block_stop",
            "content_block_start",
            "assistant \"tool_use\"",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ],
        "{answer:#?}"
    );
    let streamed: Vec<&Value> = answer
        .iter()
        .filter(|e| e["type"] == "stream_event")
        .collect();
    let text: String = streamed
        .iter()
        .filter(|e| e["event"]["delta"]["type"] == "text_delta")
        .map(|e| e["event"]["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Writing it now.");
    // Both blocks' messages carry the answer's id, as the stream does.
    let assistants: Vec<&Value> = answer.iter().filter(|e| e["type"] == "assistant").collect();
    for assistant in &assistants {
        assert_eq!(
            streamed[0]["event"]["message"]["id"],
            assistant["message"]["id"]
        );
        assert_eq!(assistant["message"]["content"].as_array().unwrap().len(), 1);
    }
    let call = streamed
        .iter()
        .find(|e| e["event"]["delta"]["type"] == "input_json_delta")
        .unwrap();
    let input: Value =
        serde_json::from_str(call["event"]["delta"]["partial_json"].as_str().unwrap()).unwrap();
    assert_eq!(input, json!({"path": "w.txt", "content": "w\n"}));
    let end = streamed
        .iter()
        .find(|e| e["event"]["type"] == "message_delta")
        .unwrap();
    assert_eq!(end["event"]["delta"]["stop_reason"], "tool_use");
    // capstan's own events stay out of the stream unless asked for.
    assert!(
        events.iter().all(|e| matches!(
            e["type"].as_str(),
            Some("system" | "assistant" | "user" | "stream_event" | "result")
        )),
        "{events:#?}"
    );
    // --verbose, as the SDKs pass it, leaves stderr quiet.
    assert_eq!(stderr(&output), "", "stderr is not quiet");
}
