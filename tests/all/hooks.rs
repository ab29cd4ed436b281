//! Hooks in real sessions: the real `capstan` binary in print mode against
//! the mock model server, with the `hook-echo` fixture (which answers what
//! markers in an event ask for) and the first-party guard-secrets and
//! protect-paths plugins, installed as a user would.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use support::mock_model::{Answer, MockModel, Reply};
use support::{Env, assert_exit, fixture, install, stderr, stdout, target_dir};

const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// `capstan -p PROMPT` against the mock, with extra arguments.
fn session(env: &Env, mock: &MockModel, prompt: &str, extra: &[&str]) -> Output {
    env.anthropic_session(&mock.url(), "sk-ant-mock", "mock-model", prompt)
        .args(extra)
        .write_stdin("")
        .timeout(RUN_TIMEOUT)
        .output()
        .expect("run capstan")
}

/// The same with the hook-echo fixture loaded from its file.
fn with_echo(env: &Env, mock: &MockModel, prompt: &str, extra: &[&str]) -> Output {
    let echo = format!("hook-echo={}", fixture("hook-echo").display());
    let mut args = vec!["--plugin", echo.as_str()];
    args.extend_from_slice(extra);
    session(env, mock, prompt, &args)
}

fn sse(answer: Answer) -> Reply {
    Reply::sse(answer.anthropic())
}

/// The tool result sent back for call `id` in the model's `n`th request.
fn tool_result(mock: &MockModel, n: usize, id: &str) -> (String, bool) {
    let received = mock.received();
    for message in received[n].messages() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" && block["tool_use_id"] == id {
                return (
                    block["content"].as_str().unwrap_or_default().to_string(),
                    block["is_error"] == true,
                );
            }
        }
    }
    panic!("no result for {id} in request {n}: {:#?}", received[n].body);
}

/// The text blocks of the last user message of request `n`.
fn last_user_text(mock: &MockModel, n: usize) -> String {
    let received = mock.received();
    let message = received[n].messages().last().unwrap().clone();
    message["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lines hook-echo printed (`saw EVENT detail`), in order.
fn echoes(output: &Output) -> Vec<String> {
    stderr(output)
        .lines()
        .filter_map(|l| {
            l.split_once("hook hook-echo: saw ")
                .map(|(_, rest)| rest.to_string())
        })
        .collect()
}

/// Every record of the only transcript.
fn transcript(env: &Env) -> Vec<Value> {
    let mut files = Vec::new();
    let mut stack = vec![env.home.path().join("sessions")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                files.push(path);
            }
        }
    }
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::read_to_string(&files[0])
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn hook_records(env: &Env) -> Vec<Value> {
    transcript(env)
        .into_iter()
        .filter(|r| r["type"] == "hook")
        .collect()
}

fn audit_log(env: &Env) -> String {
    std::fs::read_to_string(env.home.path().join("audit/audit.jsonl")).unwrap_or_default()
}

/// A first-party plugin packaged by the build (`target/plugins/NAME`).
fn packaged(name: &str) -> PathBuf {
    let dir = target_dir().join("plugins").join(name);
    assert!(
        dir.join("plugin.toml").is_file(),
        "{} was not packaged",
        dir.display()
    );
    dir
}

/// The hook-echo fixture as an installable package whose hooks run under
/// `limits`.
fn echo_package(env: &Env, limits: &str) -> PathBuf {
    let dir = env.outside.path().join("hook-echo-package");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixture("hook-echo"), dir.join("hook_echo.wasm")).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        format!(
            "name = \"hook-echo\"\nversion = \"0.1.0\"\ndescription = \"Echoes events\"\ncomponents = [\"hook_echo.wasm\"]\n\n[limits]\n{limits}\n"
        ),
    )
    .unwrap();
    dir
}

#[test]
fn each_event_fires_where_it_belongs_with_claude_code_fields() {
    let env = Env::new();
    // The marker in the file's name makes hook-echo return the payload.
    let notes = "notes [PreToolUse:echo].txt";
    env.write(notes, "some notes\n");
    let mock = MockModel::start(vec![
        sse(Answer::text("Reading.")
            .call("toolu_read", "fs__read", json!({"path": notes}))
            .call("toolu_missing", "fs__read", json!({"path": "missing.txt"}))),
        sse(Answer::text("Writing.").call(
            "toolu_write",
            "fs__write",
            json!({"path": "out.txt", "content": "x"}),
        )),
        sse(Answer::text("Done.")),
    ]);
    let output = with_echo(
        &env,
        &mock,
        "look at the notes [UserPromptSubmit:echo]",
        &[],
    );
    assert_exit(&output, 0);

    let seen = echoes(&output);
    let at = |line: &str| {
        seen.iter()
            .position(|s| s == line)
            .unwrap_or_else(|| panic!("no `{line}` in {seen:#?}"))
    };
    assert_eq!(
        seen.first().map(String::as_str),
        Some("SessionStart startup")
    );
    assert!(at("UserPromptSubmit") < at("PreToolUse fs.read"));
    assert!(at("PreToolUse fs.read") < at("PostToolUse fs.read"));
    assert!(at("PostToolUseFailure fs.read") < at("PreToolUse fs.write"));
    assert!(at("PreToolUse fs.write") < at("PermissionRequest fs.write"));
    assert!(at("PermissionRequest fs.write") < at("Stop inactive"));
    assert_eq!(seen.last().map(String::as_str), Some("SessionEnd other"));
    assert_eq!(seen.len(), 10, "{seen:#?}");

    // UserPromptSubmit's context reaches the model with the prompt, and
    // carries Claude Code's fields.
    let first = last_user_text(&mock, 0);
    let payload: Value = serde_json::from_str(
        first
            .split_once("payload: ")
            .unwrap()
            .1
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(payload["hook_event_name"], "UserPromptSubmit");
    assert_eq!(
        payload["prompt"],
        "look at the notes [UserPromptSubmit:echo]"
    );
    assert_eq!(payload["permission_mode"], "default");
    assert_eq!(payload["cwd"], env.ws_path().display().to_string());
    let session_id = payload["session_id"].as_str().unwrap().to_string();
    assert!(!session_id.is_empty());
    assert!(
        payload["transcript_path"]
            .as_str()
            .unwrap()
            .ends_with(".jsonl")
    );

    // PreToolUse's context is a note on the call's result.
    let (read, is_error) = tool_result(&mock, 1, "toolu_read");
    assert!(!is_error, "{read}");
    let note = read
        .split_once("[Note from hook hook-echo: payload: ")
        .unwrap()
        .1;
    let pre: Value = serde_json::from_str(note.strip_suffix(']').unwrap()).unwrap();
    assert_eq!(pre["hook_event_name"], "PreToolUse");
    assert_eq!(pre["tool_name"], "fs.read");
    assert_eq!(pre["tool_use_id"], "toolu_read");
    assert_eq!(pre["tool_input"]["path"], notes);
    assert_eq!(pre["session_id"], session_id.as_str());

    // Every answer is in the transcript, with the hook and the call.
    let records = hook_records(&env);
    assert!(records.iter().any(|r| r["event"] == "PreToolUse"
        && r["tool_use_id"] == "toolu_read"
        && r["decision"] == "add-context"
        && r["hook"] == "hook-echo"));
    assert!(records.iter().any(|r| r["event"] == "SessionEnd"));
}

#[test]
fn a_user_prompt_submit_deny_blocks_the_prompt_before_the_model_sees_it() {
    let env = Env::new();
    let mock = MockModel::start(vec![sse(Answer::text("never"))]);
    let output = with_echo(
        &env,
        &mock,
        "do it [UserPromptSubmit:deny]",
        &["--output-format", "json"],
    );
    assert_exit(&output, 4);
    assert!(mock.received().is_empty(), "the model was asked");
    let result: Value = serde_json::from_str(stdout(&output).lines().last().unwrap()).unwrap();
    assert_eq!(result["subtype"], "error_during_execution");
    assert_eq!(result["error_kind"], "denied");
    let error = result["error"].as_str().unwrap();
    assert!(
        error.contains("hook hook-echo blocked the prompt: hook-echo denies this UserPromptSubmit"),
        "{error}"
    );
}

#[test]
fn pre_tool_use_deny_modify_and_an_invalid_modify_change_the_call() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        sse(Answer::text("Writing three files.")
            .call(
                "toolu_deny",
                "fs__write",
                json!({"path": "a.txt", "content": "[PreToolUse:deny]"}),
            )
            .call(
                "toolu_modify",
                "fs__write",
                json!({"path": "b.txt", "content": "[PreToolUse:modify]"}),
            )
            .call(
                "toolu_bad",
                "fs__write",
                json!({"path": "c.txt", "content": "[PreToolUse:modify-invalid]"}),
            )),
        sse(Answer::text("Done.")),
    ]);
    let output = with_echo(&env, &mock, "write", &["--permission-mode", "accept-edits"]);
    assert_exit(&output, 0);

    assert!(!env.ws.path().join("a.txt").exists());
    let (denied, is_error) = tool_result(&mock, 1, "toolu_deny");
    assert!(is_error);
    assert!(
        denied.contains("hook hook-echo blocked this call: hook-echo denies this PreToolUse"),
        "{denied}"
    );

    assert_eq!(env.read("b.txt"), "modified by hook-echo\n");
    assert!(stderr(&output).contains("hook hook-echo changed the input of fs.write"));

    assert!(!env.ws.path().join("c.txt").exists());
    let (bad, is_error) = tool_result(&mock, 1, "toolu_bad");
    assert!(is_error);
    assert!(bad.contains("schema refuses"), "{bad}");
    assert!(
        bad.contains("nonsense") || bad.contains("required"),
        "{bad}"
    );

    let records = hook_records(&env);
    let decision = |id: &str| {
        records
            .iter()
            .find(|r| r["event"] == "PreToolUse" && r["tool_use_id"] == id)
            .map(|r| r["decision"].as_str().unwrap().to_string())
    };
    assert_eq!(decision("toolu_deny").as_deref(), Some("deny"));
    assert_eq!(decision("toolu_modify").as_deref(), Some("modify"));
    let permissions: Vec<Value> = transcript(&env)
        .into_iter()
        .filter(|r| r["type"] == "permission" && r["tool_use_id"] == "toolu_deny")
        .collect();
    assert_eq!(permissions[0]["source"], "hook hook-echo");
    let audit = audit_log(&env);
    let record = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["kind"] == "hook_decision" && r["call_id"] == "toolu_deny")
        .unwrap_or_else(|| panic!("no hook decision for toolu_deny in {audit}"));
    assert_eq!(record["plugin"], "hook-echo");
    assert_eq!(record["decision"], "deny");
}

#[test]
fn post_tool_use_context_and_deny_become_notes_for_the_model() {
    let env = Env::new();
    env.write("a.txt", "alpha [PostToolUse:context]\n");
    env.write("b.txt", "beta [PostToolUse:deny]\n");
    let mock = MockModel::start(vec![
        sse(Answer::text("Reading.")
            .call("toolu_a", "fs__read", json!({"path": "a.txt"}))
            .call("toolu_b", "fs__read", json!({"path": "b.txt"}))),
        sse(Answer::text("Done.")),
    ]);
    let output = with_echo(&env, &mock, "read both", &[]);
    assert_exit(&output, 0);
    let (a, _) = tool_result(&mock, 1, "toolu_a");
    assert!(
        a.contains("alpha")
            && a.contains("[Note from hook hook-echo: hook-echo context for PostToolUse]"),
        "{a}"
    );
    let (b, _) = tool_result(&mock, 1, "toolu_b");
    assert!(
        b.contains("beta")
            && b.contains(
                "[Hook hook-echo flagged this result: hook-echo denies this PostToolUse]"
            ),
        "{b}"
    );
}

#[test]
fn stop_keep_going_continues_the_turn_a_bounded_number_of_times() {
    let env = Env::new();
    let replies = (0..6)
        .map(|_| sse(Answer::text("All done [Stop:keep-going]")))
        .collect();
    let mock = MockModel::start(replies);
    let output = with_echo(&env, &mock, "finish", &[]);
    assert_exit(&output, 0);
    // One answer, then three more the hook asked for, then the bound.
    assert_eq!(mock.received().len(), 4);
    assert!(last_user_text(&mock, 1).contains("A Stop hook (hook-echo) asked you not to stop yet: hook-echo says: check your work once more"));
    let stops: Vec<String> = echoes(&output)
        .into_iter()
        .filter(|s| s.starts_with("Stop"))
        .collect();
    assert_eq!(
        stops,
        ["Stop inactive", "Stop active", "Stop active", "Stop active"]
    );
    assert!(
        stderr(&output).contains("at most 3 times per prompt"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn an_installed_hook_that_crashes_or_times_out_fails_closed_on_blocking_events_only() {
    let env = Env::new();
    install(&env, &echo_package(&env, "timeout = \"1s\""));
    let info = env
        .capstan()
        .args(["plugin", "info", "hook-echo"])
        .output()
        .unwrap();
    assert_exit(&info, 0);
    let text = stdout(&info);
    assert!(
        text.contains("hooks:") && text.contains("  PreToolUse") && text.contains("  Stop"),
        "{text}"
    );
    assert!(text.contains("exports hook"), "{text}");

    env.write("r.txt", "read me [PostToolUse:trap]\n");
    let mock = MockModel::start(vec![
        sse(Answer::text("Working.")
            .call(
                "toolu_trap",
                "fs__write",
                json!({"path": "t.txt", "content": "[PreToolUse:trap]"}),
            )
            .call(
                "toolu_loop",
                "fs__write",
                json!({"path": "l.txt", "content": "[PreToolUse:loop]"}),
            )
            .call("toolu_read", "fs__read", json!({"path": "r.txt"}))),
        sse(Answer::text("Done.")),
    ]);
    let output = session(&env, &mock, "go", &["--permission-mode", "bypass"]);
    assert_exit(&output, 0);
    assert!(!env.ws.path().join("t.txt").exists());
    assert!(!env.ws.path().join("l.txt").exists());
    let (trap, _) = tool_result(&mock, 1, "toolu_trap");
    assert!(
        trap.contains("hook hook-echo failed, so the action was blocked")
            && trap.contains("panicked"),
        "{trap}"
    );
    let (timeout, _) = tool_result(&mock, 1, "toolu_loop");
    assert!(
        timeout.contains("hook hook-echo failed")
            && timeout.contains("did not answer within 1000 ms"),
        "{timeout}"
    );
    // PostToolUse does not guard anything: its crash is a warning.
    let (read, is_error) = tool_result(&mock, 1, "toolu_read");
    assert!(!is_error && read.contains("read me"), "{read}");
    assert!(
        stderr(&output).contains("warning: hook hook-echo failed on PostToolUse and was ignored"),
        "{}",
        stderr(&output)
    );

    let mock = MockModel::start(vec![sse(Answer::text("never"))]);
    let output = session(&env, &mock, "hi [UserPromptSubmit:error]", &[]);
    assert_exit(&output, 4);
    assert!(
        stderr(&output).contains("hook-echo was asked to fail"),
        "{}",
        stderr(&output)
    );
    assert!(mock.received().is_empty());
}

#[test]
fn a_hook_allow_never_beats_a_deny_rule_or_plan_mode_but_spares_a_question() {
    let write = |id: &str, path: &str, content: &str| {
        sse(Answer::text("Writing.").call(
            id,
            "fs__write",
            json!({"path": path, "content": content}),
        ))
    };
    // A deny rule wins over the hook's allow.
    let env = Env::new();
    let mock = MockModel::start(vec![
        write("w", "a.txt", "[PreToolUse:allow]"),
        sse(Answer::text("ok")),
    ]);
    assert_exit(&with_echo(&env, &mock, "w", &["--deny", "fs.write"]), 0);
    assert!(!env.ws.path().join("a.txt").exists());
    assert!(tool_result(&mock, 1, "w").0.contains("Permission denied"));
    // So does plan mode.
    let mock = MockModel::start(vec![
        write("w", "a.txt", "[PreToolUse:allow]"),
        sse(Answer::text("ok")),
    ]);
    assert_exit(
        &with_echo(&env, &mock, "w", &["--permission-mode", "plan"]),
        0,
    );
    assert!(!env.ws.path().join("a.txt").exists());
    // Where the mode would ask (print mode cannot), the hook's allow runs it.
    let mock = MockModel::start(vec![
        write("w", "a.txt", "[PreToolUse:allow]"),
        sse(Answer::text("ok")),
    ]);
    assert_exit(&with_echo(&env, &mock, "w", &[]), 0);
    assert_eq!(env.read("a.txt"), "[PreToolUse:allow]");
    // A hook's ask makes an allowed call ask, which print mode refuses.
    let mock = MockModel::start(vec![
        write("w", "b.txt", "[PreToolUse:ask]"),
        sse(Answer::text("ok")),
    ]);
    assert_exit(
        &with_echo(&env, &mock, "w", &["--permission-mode", "accept-edits"]),
        0,
    );
    assert!(!env.ws.path().join("b.txt").exists());
    let (asked, _) = tool_result(&mock, 1, "w");
    assert!(
        asked.contains("hook hook-echo asks first: hook-echo wants a human to look"),
        "{asked}"
    );
    // A PermissionRequest hook can answer the question print mode cannot.
    let mock = MockModel::start(vec![
        write("w", "c.txt", "[PermissionRequest:allow]"),
        sse(Answer::text("ok")),
    ]);
    assert_exit(&with_echo(&env, &mock, "w", &[]), 0);
    assert_eq!(env.read("c.txt"), "[PermissionRequest:allow]");
}

#[test]
fn a_hook_allow_never_answers_an_ask_rule_the_user_wrote() {
    let write = |id: &str, path: &str, content: &str| {
        sse(Answer::text("Writing.").call(
            id,
            "fs__write",
            json!({"path": path, "content": content}),
        ))
    };
    // The attack: a hook that allows on PermissionRequest (and on
    // PreToolUse) where the user's own rule asks. Print mode cannot ask,
    // so the write must be refused, in accept-edits mode (where the mode
    // alone would allow it) and in default mode alike.
    for (file, marker, mode) in [
        ("a.txt", "[PermissionRequest:allow]", "accept-edits"),
        ("b.txt", "[PermissionRequest:allow]", "default"),
        (
            "c.txt",
            "[PreToolUse:allow] [PermissionRequest:allow]",
            "default",
        ),
    ] {
        let env = Env::new();
        std::fs::write(
            env.home.path().join("config.toml"),
            "[permissions]\nask = [\"fs.write\"]\n",
        )
        .unwrap();
        let mock = MockModel::start(vec![write("w", file, marker), sse(Answer::text("ok"))]);
        let output = with_echo(&env, &mock, "w", &["--permission-mode", mode]);
        assert_exit(&output, 0);
        assert!(
            !env.ws.path().join(file).exists(),
            "the hook's allow answered the user's ask rule in {mode} mode"
        );
        let (result, is_error) = tool_result(&mock, 1, "w");
        assert!(is_error, "{result}");
        assert!(
            result.contains("the rule `fs.write` in the user config asks first"),
            "{result}"
        );
        assert!(
            stderr(&output).contains("an ask rule you wrote asks first"),
            "{}",
            stderr(&output)
        );
        let permission = transcript(&env)
            .into_iter()
            .rev()
            .find(|r| r["type"] == "permission")
            .unwrap();
        assert_eq!(permission["outcome"], "deny", "{permission}");
    }
}

#[test]
fn a_hooks_reason_and_message_reach_the_terminal_escaped_and_the_records_intact() {
    // A hook that denies with a reason (and a message) holding escape
    // sequences and a forged prompt line: the terminal gets them shown,
    // not obeyed; the transcript and the audit log keep the text.
    let hostile = "[PreToolUse:say] \u{1b}]0;pwned\u{07}\u{1b}]52;c;cm0gLXJmIH4=\u{07}\rcapstan: all checks passed\nGrant these? [y/N] ";
    let env = Env::new();
    install(&env, &echo_package(&env, ""));
    let mock = MockModel::start(vec![
        sse(Answer::text("Writing.").call(
            "w",
            "fs__write",
            json!({"path": "a.txt", "content": hostile}),
        )),
        sse(Answer::text("ok")),
    ]);
    let output = session(&env, &mock, "w", &[]);
    assert_exit(&output, 0);
    assert!(!env.ws.path().join("a.txt").exists());
    let err = stderr(&output);
    for c in ['\u{1b}', '\u{07}', '\r'] {
        assert!(!err.contains(c), "{c:?} reached the terminal: {err:?}");
    }
    for line in err.lines() {
        assert!(
            !line.starts_with("capstan: all checks passed") && !line.starts_with("Grant these?"),
            "a forged line: {line:?}"
        );
    }
    assert!(
        err.contains("\\x1b]52;c;cm0gLXJmIH4=\\x07\\rcapstan: all checks passed\\nGrant these?"),
        "{err}"
    );
    // The model gets the reason as it was given (it is not a terminal).
    let (result, _) = tool_result(&mock, 1, "w");
    assert!(result.contains(hostile), "{result}");
    // The transcript and the audit log keep it too.
    let denied = hook_records(&env)
        .into_iter()
        .find(|r| r["decision"] == "deny")
        .unwrap();
    assert!(denied.to_string().contains("\\u001b]52;c;"), "{denied}");
    assert!(
        audit_log(&env).contains("\\u001b]52;c;"),
        "{}",
        audit_log(&env)
    );
}

#[test]
fn guard_secrets_denies_writing_an_aws_key_and_tells_the_model_redacted() {
    let env = Env::new();
    install(&env, &packaged("guard-secrets"));
    let info = env
        .capstan()
        .args(["plugin", "info", "guard-secrets"])
        .output()
        .unwrap();
    assert!(
        stdout(&info).contains("hooks:\n  PreToolUse"),
        "{}",
        stdout(&info)
    );
    let key = "AKIAZ7QH3LNT5KXW2XYZ";
    let content = format!("import boto3\n\nAWS_KEY = \"{key}\"\n");
    let mock = MockModel::start(vec![
        sse(Answer::text("Writing.")
            .call(
                "toolu_key",
                "fs__write",
                json!({"path": "config.py", "content": content}),
            )
            .call(
                "toolu_ok",
                "fs__write",
                json!({"path": "ok.py", "content": "KEY = os.environ['AWS_KEY']\n"}),
            )),
        sse(Answer::text("I will use an environment variable.")),
    ]);
    let output = session(
        &env,
        &mock,
        "write my AWS key into config.py",
        &["--permission-mode", "accept-edits"],
    );
    assert_exit(&output, 0);
    assert!(!env.ws.path().join("config.py").exists());
    assert!(env.ws.path().join("ok.py").exists());
    let (text, is_error) = tool_result(&mock, 1, "toolu_key");
    assert!(is_error);
    assert!(
        text.contains("AWS access key AKIA…2XYZ in `content`, line 3"),
        "{text}"
    );
    assert!(
        !text.contains(key),
        "the key itself reached the model: {text}"
    );
    assert!(
        !audit_log(&env).contains(key),
        "the key itself is in the audit log"
    );
}

#[test]
fn protect_paths_denies_git_config_and_user_globs_beside_another_hooks_allow() {
    let env = Env::new();
    install(&env, &packaged("protect-paths"));
    env.write(".git/config", "[core]\n");
    env.write(".capstan/protected-paths", "# ours\n*.pem\n");
    let mock = MockModel::start(vec![
        sse(Answer::text("Writing.")
            .call("toolu_git", "fs__write", json!({"path": ".git/config", "content": "[core]\nhooksPath = /tmp/x\n[PreToolUse:allow]"}))
            .call("toolu_pem", "fs__write", json!({"path": "certs/server.pem", "content": "x"}))
            .call("toolu_env", "fs__edit", json!({"path": "./.env", "old": "a", "new": "b"}))
            .call("toolu_ok", "fs__write", json!({"path": "src/ok.txt", "content": "fine"}))),
        sse(Answer::text("Done.")),
    ]);
    let output = with_echo(&env, &mock, "configure", &["--permission-mode", "bypass"]);
    assert_exit(&output, 0);
    assert_eq!(env.read(".git/config"), "[core]\n");
    let (git, _) = tool_result(&mock, 1, "toolu_git");
    assert!(
        git.contains("protect-paths blocked this fs.write call: .git/config is protected"),
        "{git}"
    );
    assert!(!env.ws.path().join("certs/server.pem").exists());
    let (pem, _) = tool_result(&mock, 1, "toolu_pem");
    assert!(
        pem.contains("`*.pem` (.capstan/protected-paths line 2)"),
        "{pem}"
    );
    let (envfile, _) = tool_result(&mock, 1, "toolu_env");
    assert!(envfile.contains(".env file"), "{envfile}");
    assert_eq!(env.read("src/ok.txt"), "fine");
}

#[test]
fn a_hook_granted_the_workspace_read_write_still_cannot_write() {
    let env = Env::new();
    let package = echo_package(&env, "timeout = \"5s\"");
    let manifest = std::fs::read_to_string(package.join("plugin.toml")).unwrap();
    std::fs::write(
        package.join("plugin.toml"),
        manifest.replace(
            "[limits]",
            "[capabilities]\nfs = [{ path = \"$WORKSPACE\", access = \"read-write\" }]\n\n[limits]",
        ),
    )
    .unwrap();
    install(&env, &package);
    let mock = MockModel::start(vec![sse(Answer::text("ok"))]);
    let output = session(
        &env,
        &mock,
        "try [UserPromptSubmit:write]",
        &["--permission-mode", "bypass"],
    );
    assert_exit(&output, 0);
    assert!(!env.ws.path().join("written-by-hook.txt").exists());
    let context = last_user_text(&mock, 0);
    assert!(context.contains("write failed"), "{context}");
    assert!(
        !context.contains("no workspace"),
        "the hook saw no workspace: {context}"
    );
}

#[test]
fn installing_a_hook_plugin_says_which_events_and_tools_it_sees_and_what_it_may_do() {
    let env = Env::new();
    // No terminal and no --yes: the question is shown, consent is not given.
    let out = env
        .capstan()
        .args(["plugin", "install"])
        .arg(echo_package(&env, ""))
        .output()
        .unwrap();
    assert_exit(&out, 9);
    let asked = stderr(&out);
    assert!(
        asked.contains("hook-echo 0.1.0 (unsigned) wants:"),
        "{asked}"
    );
    assert!(
        asked.contains(
            "hooks    runs on every matching event of every session, and sees what it carries:"
        ),
        "{asked}"
    );
    for event in [
        "SessionStart",
        "SessionEnd",
        "UserPromptSubmit",
        "PostToolUse for every tool",
        "PostToolUseFailure for every tool",
        "Stop",
        "SubagentStart",
        "SubagentStop",
        "PreCompact",
        "PostCompact",
        "Notification",
    ] {
        assert!(
            asked.contains(&format!("             {event}")),
            "no {event} in {asked}"
        );
    }
    assert!(
        asked.contains(
            "PreToolUse for every tool: sees each call's input before it runs; may deny the call, change its input"
        ),
        "{asked}"
    );
    assert!(
        asked.contains("PermissionRequest for every tool: sees each permission question before you do; may answer it for you"),
        "{asked}"
    );
    assert!(
        asked.contains("UserPromptSubmit: sees every prompt you send; may block it"),
        "{asked}"
    );
    // Nothing was installed.
    let list = env.capstan().args(["plugin", "list"]).output().unwrap();
    assert!(!stdout(&list).contains("hook-echo"), "{}", stdout(&list));
    let hooks = installed_hooks(&env);
    assert!(hooks.is_empty(), "{hooks:?}");

    // A hook with a matcher: the tools it sees, and no other event.
    let out = env
        .capstan()
        .args(["plugin", "install"])
        .arg(packaged("protect-paths"))
        .arg("--yes")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let asked = stderr(&out);
    let hook_lines: Vec<&str> = asked
        .lines()
        .skip_while(|line| !line.starts_with("  hooks "))
        .take_while(|line| line.starts_with("  hooks ") || line.starts_with("             "))
        .collect();
    assert_eq!(hook_lines.len(), 2, "{asked}");
    assert!(
        hook_lines[1]
            .trim_start()
            .starts_with("PreToolUse for tools matching `fs\\.(?:write|edit)|"),
        "{asked}"
    );
    assert!(
        hook_lines[1].ends_with(
            "may deny the call, change its input, ask you first, or let it run without asking you"
        ),
        "{asked}"
    );
    assert!(asked.contains("files    "), "{asked}");

    // A hook without a matcher sees every tool.
    let out = env
        .capstan()
        .args(["plugin", "install"])
        .arg(packaged("guard-secrets"))
        .arg("--yes")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(
        stderr(&out).contains("PreToolUse for every tool:"),
        "{}",
        stderr(&out)
    );
}

/// The hooks a session with `env`'s installed plugins would run, from
/// `stream-json`'s `init` event.
fn installed_hooks(env: &Env) -> Vec<Value> {
    let mock = MockModel::start(vec![sse(Answer::text("ok"))]);
    let output = session(env, &mock, "hi", &["--output-format", "stream-json"]);
    let init: Value = serde_json::from_str(stdout(&output).lines().next().unwrap()).unwrap();
    init["hooks"].as_array().cloned().unwrap_or_default()
}

/// The store folder of the installed hook-echo package.
fn echo_store(env: &Env) -> PathBuf {
    let dir = env.home.path().join("plugins/store/hook-echo");
    std::fs::read_dir(dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
}

#[test]
fn an_installed_hook_whose_files_changed_or_whose_audit_log_fails_does_not_run() {
    let env = Env::new();
    install(&env, &echo_package(&env, ""));
    let mock = || {
        MockModel::start(vec![
            sse(Answer::text("Reading.").call("r", "fs__read", json!({"path": "a.txt"}))),
            sse(Answer::text("ok")),
        ])
    };
    env.write("a.txt", "alpha\n");
    // As installed, it sees the session's events.
    let output = session(&env, &mock(), "r", &[]);
    assert_exit(&output, 0);
    assert!(!echoes(&output).is_empty(), "{}", stderr(&output));

    // Its manifest changed in the store (not its component): every stored
    // file is checked, so the plugin is refused and its code never runs;
    // its hooks guard tool calls and prompts, so the session does not
    // start without them.
    let manifest = echo_store(&env).join("plugin.toml");
    let original = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, format!("{original}\n# changed\n")).unwrap();
    let model = mock();
    let output = session(&env, &model, "r", &[]);
    assert_exit(&output, 10);
    assert!(echoes(&output).is_empty(), "{}", stderr(&output));
    assert!(model.received().is_empty());
    let err = stderr(&output);
    assert!(
        err.contains("the guard hook plugin hook-echo cannot run") && err.contains("plugin.toml"),
        "{err}"
    );
    std::fs::write(&manifest, original).unwrap();

    // Its audit log cannot be opened: its hooks would make decisions nobody
    // could trace, so they do not run either, nor does the session.
    let log = env.home.path().join("audit/audit.jsonl");
    let _ = std::fs::remove_file(&log);
    std::fs::create_dir_all(&log).unwrap();
    let model = mock();
    let output = session(&env, &model, "r", &[]);
    assert_exit(&output, 10);
    assert!(echoes(&output).is_empty(), "{}", stderr(&output));
    assert!(model.received().is_empty());
    let err = stderr(&output);
    assert!(
        err.contains("the guard hook plugin hook-echo cannot run") && err.contains("audit log"),
        "{err}"
    );
}

#[test]
fn a_hooks_log_lines_and_progress_reach_the_session_as_a_tools_do() {
    let env = Env::new();
    let mock = MockModel::start(vec![
        sse(Answer::text("Writing.").call(
            "toolu_w",
            "fs__write",
            json!({"path": "a.txt", "content": "[PreToolUse:report]"}),
        )),
        sse(Answer::text("Done.")),
    ]);
    let output = with_echo(
        &env,
        &mock,
        "[UserPromptSubmit:report]",
        &[
            "--permission-mode",
            "accept-edits",
            "--output-format",
            "stream-json",
            "--capstan-events",
        ],
    );
    assert_exit(&output, 0);
    let events: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let of = |kind: &str, call: &str| {
        events
            .iter()
            .find(|e| e["type"] == kind && e["tool_use_id"] == call)
            .unwrap_or_else(|| panic!("no {kind} for {call}: {events:#?}"))
            .clone()
    };
    // The tool call the event is about, else the hook's event.
    let log = of("tool_log", "toolu_w");
    assert_eq!(log["source"], "hook-echo");
    assert_eq!(log["level"], "warning");
    assert_eq!(log["message"], "hook-echo reports on PreToolUse");
    let progress = of("tool_progress", "toolu_w");
    assert_eq!(progress["message"], "hook-echo checking");
    assert_eq!(progress["done"], 1);
    assert_eq!(progress["total"], 2);
    let prompt_log = of("tool_log", "hook:UserPromptSubmit");
    assert_eq!(
        prompt_log["message"],
        "hook-echo reports on UserPromptSubmit"
    );
    assert!(prompt_log["session_id"].is_string());

    // On the terminal, a warning shows as a tool's does.
    let mock = MockModel::start(vec![sse(Answer::text("Done."))]);
    let output = with_echo(&env, &mock, "[UserPromptSubmit:report]", &[]);
    assert_exit(&output, 0);
    assert!(
        stderr(&output).contains("[hook-echo] warning: hook-echo reports on UserPromptSubmit"),
        "{}",
        stderr(&output)
    );
}
