//! The model's `exec.run` tool through the real binary: a mock model
//! server scripts the calls, the real sandbox runs the commands, and each
//! test checks what the command did (files, output) and what the model was
//! told — the permission by mode, the capability named when asking, the
//! capability named when a command hit the sandbox, and `Bash` rules.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use support::mock_model::{MockModel, script};
use support::{Env, pids_running, stderr, stdout, still_alive};

const API_KEY: &str = "sk-ant-mock-key-exec";

/// `capstan -p PROMPT` against `mock` with `args`, the system PATH (so
/// commands find `python3`), and a user home of its own.
fn session(env: &Env, mock: &MockModel, prompt: &str, args: &[&str]) -> Output {
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", prompt);
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(args)
        .timeout(Duration::from_secs(120));
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

const FAILING_MODULE: &str = "def add(a, b):\n    return a - b\n";
const TESTS: &str = "import unittest\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n";

#[test]
fn accept_edits_runs_the_tests_fixes_and_reruns_them() {
    let env = Env::new();
    env.write("calc.py", FAILING_MODULE);
    env.write("test_calc.py", TESTS);
    let mock = script(&[
        (
            "t_run1",
            "exec__run",
            json!({"command": "python3 -m unittest 2>&1", "description": "run the tests"}),
        ),
        (
            "t_fix",
            "fs__edit",
            json!({"path": "calc.py", "old": "a - b", "new": "a + b"}),
        ),
        (
            "t_run2",
            "exec__run",
            json!({"command": "python3 -m unittest && echo passed > result.txt", "write": true}),
        ),
    ]);
    let output = session(
        &env,
        &mock,
        "run the tests and fix what fails",
        &["--permission-mode", "accept-edits"],
    );
    assert_ok(&output);
    let first = mock.result_of("t_run1");
    assert!(first.starts_with("exit code 1"), "{first}");
    assert!(first.contains("FAILED (failures=1)"), "{first}");
    let second = mock.result_of("t_run2");
    assert!(second.starts_with("exit code 0"), "{second}");
    assert!(second.contains("OK"), "{second}");
    // The writable run wrote the workspace.
    assert_eq!(env.read("result.txt"), "passed\n");
    assert_eq!(env.read("calc.py"), "def add(a, b):\n    return a + b\n");
    // Each command is in the audit log, under its tool call.
    let audit = std::fs::read_to_string(env.home.path().join("audit/audit.jsonl")).unwrap();
    let runs: Vec<Value> = audit
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|record| record["kind"] == "command_run")
        .collect();
    assert_eq!(runs.len(), 2, "{runs:#?}");
    assert_eq!(runs[0]["call_id"], "t_run1");
    assert_eq!(runs[0]["write"], false);
    assert_eq!(runs[1]["call_id"], "t_run2");
    assert_eq!(runs[1]["write"], true);
    assert!(
        runs[1]["command"]
            .as_str()
            .unwrap()
            .contains("python3 -m unittest && echo passed > result.txt"),
        "{runs:#?}"
    );
}

#[test]
fn plan_mode_runs_a_read_only_command_and_refuses_a_write() {
    let env = Env::new();
    env.write("listed-file.txt", "x");
    let mock = script(&[
        ("t_ls", "exec__run", json!({"command": "ls"})),
        (
            "t_write",
            "exec__run",
            json!({"command": "echo planted > planted.txt", "write": true}),
        ),
    ]);
    let output = session(&env, &mock, "look around", &["--permission-mode", "plan"]);
    assert_ok(&output);
    let listing = mock.result_of("t_ls");
    assert!(listing.starts_with("exit code 0"), "{listing}");
    assert!(listing.contains("listed-file.txt"), "{listing}");
    let refused = mock.result_of("t_write");
    assert!(refused.contains("plan mode"), "{refused}");
    assert!(
        refused.contains("exec.run` wants: write the workspace"),
        "{refused}"
    );
    assert!(!env.ws_path().join("planted.txt").exists());
}

#[test]
fn default_mode_asks_naming_exactly_the_capabilities_wanted() {
    let env = Env::new();
    let mock = script(&[
        ("t_read", "exec__run", json!({"command": "echo hello"})),
        (
            "t_both",
            "exec__run",
            json!({
                "command": "echo fetched > fetched.txt",
                "write": true,
                "net": ["https://index.crates.io"]
            }),
        ),
        (
            "t_net",
            "exec__run",
            json!({"command": "true", "net": ["https://example.com"]}),
        ),
    ]);
    // Print mode cannot ask: a call that would ask is refused, and the
    // reason (the question) reaches the model.
    let output = session(&env, &mock, "fetch", &[]);
    assert_ok(&output);
    let read = mock.result_of("t_read");
    assert!(read.starts_with("exit code 0"), "{read}");
    assert!(read.contains("hello"), "{read}");
    let both = mock.result_of("t_both");
    assert!(
        both.contains("exec.run wants: write the workspace; reach https://index.crates.io"),
        "{both}"
    );
    assert!(!env.ws_path().join("fetched.txt").exists());
    let net = mock.result_of("t_net");
    assert!(
        net.contains("exec.run wants: reach https://example.com"),
        "{net}"
    );
    assert!(!net.contains("write the workspace"), "{net}");
}

#[test]
fn accept_edits_still_asks_for_the_network() {
    let env = Env::new();
    let mock = script(&[(
        "t_net",
        "exec__run",
        json!({"command": "echo reached > reached.txt", "write": true, "net": ["https://example.com"]}),
    )]);
    let output = session(&env, &mock, "fetch", &["--permission-mode", "accept-edits"]);
    assert_ok(&output);
    let net = mock.result_of("t_net");
    assert!(
        net.contains("exec.run wants: write the workspace; reach https://example.com"),
        "{net}"
    );
    assert!(!env.ws_path().join("reached.txt").exists());
}

#[test]
fn a_read_only_command_that_writes_is_told_which_capability_it_lacked() {
    let env = Env::new();
    let mock = script(&[(
        "t_sneak",
        "exec__run",
        json!({"command": "echo sneaked > sneaked.txt"}),
    )]);
    let output = session(&env, &mock, "write", &[]);
    assert_ok(&output);
    let result = mock.result_of("t_sneak");
    assert!(!result.starts_with("exit code 0"), "{result}");
    assert!(
        result.contains("it needs: write the workspace (call again with \"write\": true)"),
        "{result}"
    );
    assert!(!env.ws_path().join("sneaked.txt").exists());
}

#[test]
fn a_command_without_network_is_refused_and_told_how_to_get_it() {
    let env = Env::new();
    let mock = script(&[(
        "t_curl",
        "exec__run",
        json!({"command": "curl -sS https://example.com"}),
    )]);
    let output = session(&env, &mock, "fetch", &[]);
    assert_ok(&output);
    let result = mock.result_of("t_curl");
    assert!(!result.starts_with("exit code 0"), "{result}");
    assert!(!result.contains("Example Domain"), "{result}");
    assert!(
        result.contains(
            "it needs: the network to reach https://example.com (--allow-net https://example.com, or \"net\": [\"https://example.com\"])"
        ),
        "{result}"
    );
}

#[test]
fn bash_rules_match_exec_run() {
    let env = Env::new();
    let mock = script(&[
        (
            "t_push",
            "exec__run",
            json!({"command": "git push origin main > pushed.txt"}),
        ),
        (
            "t_write",
            "exec__run",
            json!({"command": "echo allowed > allowed.txt", "write": true}),
        ),
    ]);
    let output = session(
        &env,
        &mock,
        "push",
        &[
            "--deny",
            "Bash(git push:*)",
            "--allow",
            "Bash(echo allowed:*)",
        ],
    );
    assert_ok(&output);
    let push = mock.result_of("t_push");
    assert!(push.contains("Bash(git push:*)"), "{push}");
    assert!(!push.starts_with("exit code"), "{push}");
    // The allow rule spares the question default mode would ask.
    let write = mock.result_of("t_write");
    assert!(write.starts_with("exit code 0"), "{write}");
    assert_eq!(env.read("allowed.txt"), "allowed\n");
}

#[test]
fn background_jobs_report_output_are_killed_and_none_outlives_the_session() {
    let env = Env::new();
    let mock = script(&[
        // The server marks, after its first line, that it printed it.
        (
            "t_server",
            "exec__start",
            json!({"command": "echo serving; touch printed; exec sleep 7654321", "write": true}),
        ),
        (
            "t_other",
            "exec__start",
            json!({"command": "echo ready; exec sleep 7654322"}),
        ),
        (
            "t_printed",
            "exec__run",
            json!({"command": "while [ ! -e printed ]; do sleep 0.02; done"}),
        ),
        ("t_out", "exec__output", json!({"job": "job-1"})),
        ("t_kill", "exec__kill", json!({"job": "job-2"})),
        ("t_gone", "exec__output", json!({"job": "job-2"})),
        // Time for the test to see the server's process from outside.
        ("t_wait", "exec__run", json!({"command": "sleep 3"})),
    ]);
    let mut child = env
        .anthropic_session_std(&mock.url(), API_KEY, "mock-model", "serve")
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(["--permission-mode", "accept-edits"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = Vec::new();
    while server.is_empty() && child.try_wait().unwrap().is_none() {
        server = pids_running("sleep 7654321");
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = child.wait_with_output().unwrap();
    assert_ok(&output);
    assert!(
        !server.is_empty(),
        "the server's process was never seen running"
    );
    for pid in &server {
        assert!(!still_alive(*pid), "process {pid} outlived the session");
    }
    assert!(pids_running("sleep 765432").is_empty());

    assert!(mock.result_of("t_server").starts_with("started job-1"));
    assert!(mock.result_of("t_other").starts_with("started job-2"));
    let out = mock.result_of("t_out");
    assert!(out.starts_with("job-1 is still running"), "{out}");
    assert!(out.contains("serving"), "{out}");
    let killed = mock.result_of("t_kill");
    assert!(killed.starts_with("job-2 was killed"), "{killed}");
    let gone = mock.result_of("t_gone");
    assert!(gone.contains("there is no background job job-2"), "{gone}");
}

#[test]
fn tool_call_runs_exec_run_writable_only_with_allow_write() {
    let env = Env::new();
    let call = |input: &str, extra: &[&str]| {
        let mut cmd = env.call("exec.run", input, extra);
        cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .timeout(Duration::from_secs(120));
        cmd.output().unwrap()
    };
    let written = call(
        r#"{"command":"echo made > made.txt && cat made.txt"}"#,
        &["--allow-write"],
    );
    assert_ok(&written);
    assert!(
        stdout(&written).starts_with("exit code 0"),
        "{}",
        stdout(&written)
    );
    assert_eq!(env.read("made.txt"), "made\n");

    let refused = call(r#"{"command":"echo no > no.txt"}"#, &[]);
    assert_ok(&refused);
    assert!(
        stdout(&refused).contains("it needs: write the workspace"),
        "{}",
        stdout(&refused)
    );
    assert!(!env.ws_path().join("no.txt").exists());

    let asked = call(r#"{"command":"echo no > no.txt","write":true}"#, &[]);
    assert!(!asked.status.success());
    assert!(
        stderr(&asked).contains("pass --allow-write"),
        "{}",
        stderr(&asked)
    );
    assert!(!env.ws_path().join("no.txt").exists());

    let curl = call(r#"{"command":"curl -sS https://example.com"}"#, &[]);
    assert!(
        !stdout(&curl).contains("Example Domain"),
        "{}",
        stdout(&curl)
    );
    assert!(
        stdout(&curl).contains("it needs: the network to reach https://example.com (--allow-net"),
        "{}",
        stdout(&curl)
    );
}

#[test]
fn capability_rules_allow_exactly_what_they_name() {
    let env = Env::new();
    let mock = script(&[
        (
            "t_write",
            "exec__run",
            json!({"command": "echo ok > ok.txt", "write": true}),
        ),
        (
            "t_more",
            "exec__run",
            json!({"command": "echo more > more.txt", "write": true, "net": ["https://example.com"]}),
        ),
        (
            "t_denied",
            "exec__run",
            json!({"command": "echo x > x.txt", "write": true, "net": ["https://registry.npmjs.org"]}),
        ),
    ]);
    let output = session(
        &env,
        &mock,
        "work",
        &[
            "--allow",
            "exec.run(write)",
            "--deny",
            "exec.run(net:https://*.npmjs.org)",
        ],
    );
    assert_ok(&output);
    assert!(mock.result_of("t_write").starts_with("exit code 0"));
    assert_eq!(env.read("ok.txt"), "ok\n");
    let more = mock.result_of("t_more");
    assert!(
        more.contains("exec.run wants: write the workspace; reach https://example.com"),
        "{more}"
    );
    assert!(!env.ws_path().join("more.txt").exists());
    let denied = mock.result_of("t_denied");
    assert!(
        denied.contains("exec.run(net:https://*.npmjs.org)"),
        "{denied}"
    );
    assert!(!env.ws_path().join("x.txt").exists());
}

/// Network hints come from the sandbox, not from what a command prints:
/// every command's proxy variables point at capstan's proxy, so a client
/// that fails without a word (`curl -s`, a script that swallows the error)
/// still gets the origin it needs named — by `tool call`, `capstan exec`
/// and in the model's result — and the refusal is in the audit log.
#[test]
fn a_silent_network_failure_still_names_the_origin_to_grant() {
    let env = Env::new();
    let hint = "needs: the network to reach https://example.com (--allow-net https://example.com, or \"net\": [\"https://example.com\"])";
    let python = "python3 -c \"import sys, urllib.request\ntry:\n    urllib.request.urlopen('https://example.com/', timeout=20)\nexcept Exception:\n    sys.exit(3)\"";
    let call = |command: &str| {
        let input = json!({ "command": command }).to_string();
        let mut cmd = env.call("exec.run", &input, &[]);
        cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .timeout(Duration::from_secs(120));
        cmd.output().unwrap()
    };
    let quiet = call(python);
    assert_ok(&quiet);
    let text = stdout(&quiet);
    assert!(text.starts_with("exit code 3\n"), "{text}");
    assert!(text.contains(hint), "{text}");
    if std::path::Path::new("/usr/bin/curl").exists() {
        let curl = call("curl -s https://example.com");
        let text = stdout(&curl);
        assert!(!text.starts_with("exit code 0"), "{text}");
        assert!(text.contains(hint), "{text}");

        let mut cmd = env.capstan_std();
        let exec = cmd
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .args(["exec", "--", "curl", "-s", "https://example.com"])
            .output()
            .unwrap();
        assert_ne!(exec.status.code(), Some(0));
        assert!(stderr(&exec).contains(hint), "{}", stderr(&exec));
    }
    let audit = std::fs::read_to_string(env.home.path().join("audit/audit.jsonl")).unwrap();
    let refused: Vec<Value> = audit
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|record| record["kind"] == "http_refused")
        .collect();
    assert!(!refused.is_empty(), "{audit}");
    assert!(
        refused.iter().all(|r| r["url"] == "https://example.com"),
        "{refused:?}"
    );

    // The model reads the same words.
    let mock = script(&[("t_quiet", "exec__run", json!({ "command": python }))]);
    let output = session(&env, &mock, "fetch", &[]);
    assert_ok(&output);
    let result = mock.result_of("t_quiet");
    assert!(result.starts_with("exit code 3\n"), "{result}");
    assert!(result.contains(hint), "{result}");
}

/// `tool call exec.run --allow-net ORIGIN` grants the origin, as the
/// hint says; `--allow-net` is refused for other tools.
#[test]
fn tool_call_allow_net_grants_the_origin_it_names() {
    let env = Env::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut buf = [0u8; 4096];
            let _ = std::io::Read::read(&mut stream, &mut buf);
            let _ = std::io::Write::write_all(
                &mut stream,
                b"HTTP/1.1 200 OK\r\nContent-Length: 14\r\nConnection: close\r\n\r\nhello, granted",
            );
        }
    });
    let origin = format!("http://127.0.0.1:{port}");
    let input = json!({ "command": format!(
        "python3 -c \"import urllib.request; print(urllib.request.urlopen('{origin}/').read().decode())\""
    ) })
    .to_string();
    let mut cmd = env.call("exec.run", &input, &["--allow-net", &origin]);
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .timeout(Duration::from_secs(120));
    let output = cmd.output().unwrap();
    assert_ok(&output);
    assert!(
        stdout(&output).starts_with("exit code 0\nhello, granted"),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );

    let mut cmd = env.call("fs.read", r#"{"path":"x"}"#, &["--allow-net", &origin]);
    let output = cmd.output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("--allow-net is for exec.run"),
        "{}",
        stderr(&output)
    );
}

/// While a command runs its output goes out as it comes: stream-json has a
/// `tool_output` event for it before the call's result; `-p` text mode
/// keeps stdout for the answer alone, and shows the output on stderr only
/// with `-v` when stderr is not a terminal. The model's result is the same
/// either way.
#[test]
fn a_commands_output_is_streamed_and_stdout_keeps_the_answer() {
    let env = Env::new();
    let command = "printf 'streamed-%s\\n' one two";
    let mock = script(&[("t_print", "exec__run", json!({ "command": command }))]);
    let output = session(
        &env,
        &mock,
        "print",
        &["--output-format", "stream-json", "--capstan-events"],
    );
    assert_ok(&output);
    let events: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let chunks: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_output")
        .collect();
    assert!(!chunks.is_empty(), "{events:?}");
    assert!(
        chunks
            .iter()
            .all(|e| e["tool_use_id"] == "t_print" && e["source"] == "exec.run")
    );
    let streamed: String = chunks.iter().map(|e| e["text"].as_str().unwrap()).collect();
    assert_eq!(streamed, "streamed-one\nstreamed-two\n");
    let at = |kind: &str| events.iter().position(|e| e["type"] == kind).unwrap();
    assert!(at("tool_output") < at("tool_result"), "{events:?}");
    assert_eq!(
        mock.result_of("t_print"),
        "exit code 0\nstreamed-one\nstreamed-two\n"
    );

    let mock = script(&[("t_print", "exec__run", json!({ "command": command }))]);
    let output = session(&env, &mock, "print", &[]);
    assert_ok(&output);
    assert_eq!(stdout(&output), "Done.\n");
    assert!(
        !stderr(&output).contains("streamed-one"),
        "{}",
        stderr(&output)
    );

    let mock = script(&[("t_print", "exec__run", json!({ "command": command }))]);
    let output = session(&env, &mock, "print", &["-v"]);
    assert_ok(&output);
    assert_eq!(stdout(&output), "Done.\n");
    assert!(
        stderr(&output).contains("│ streamed-one\n  │ streamed-two\n"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        mock.result_of("t_print"),
        "exit code 0\nstreamed-one\nstreamed-two\n"
    );
}
