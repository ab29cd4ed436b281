//! Checkpoints and `capstan session rewind|show|rm` through the real
//! binary: a mock model edits a file with `fs.edit`, writes one with
//! `fs.write` and runs a command (in the OS sandbox) that writes another;
//! rewinding from the shell puts the files and the conversation back, and
//! leaves alone a file changed since by someone else.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use support::mock_model::{MockModel, tool_call_replies as replies};
use support::{Env, stderr, stdout};

const API_KEY: &str = "sk-ant-mock-key-rewind";

/// `capstan -p PROMPT` against `mock`, allowed to edit and run commands.
fn prompt(env: &Env, mock: &MockModel, text: &str, extra: &[&str]) -> Output {
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", text);
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(["--permission-mode", "bypass"])
        .args(extra)
        .timeout(Duration::from_secs(120));
    let output = cmd.output().unwrap();
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        stdout(&output),
        stderr(&output)
    );
    output
}

/// `capstan session ARGS` in the workspace.
fn session(env: &Env, args: &[&str]) -> Output {
    env.capstan()
        .arg("session")
        .args(args)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap()
}

/// The only saved session's id.
fn only_session(env: &Env) -> String {
    let listed = session(env, &["list", "--json"]);
    let sessions: Vec<Value> = serde_json::from_str(&stdout(&listed)).unwrap();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    sessions[0]["id"].as_str().unwrap().to_string()
}

#[test]
fn session_rewind_restores_edits_command_output_and_the_conversation() {
    let env = Env::new();
    env.write("calc.py", "def add(a, b):\n    return a - b\n");
    env.write("notes.md", "# notes\n");
    let mock = MockModel::start(
        [
            replies(
                &[
                    (
                        "t_fix",
                        "fs__edit",
                        json!({"path": "calc.py", "old": "a - b", "new": "a + b"}),
                    ),
                    (
                        "t_run",
                        "exec__run",
                        json!({"command": "mkdir -p out && echo passed > out/result.txt", "write": true}),
                    ),
                ],
                "Fixed and tested.",
            ),
            replies(
                &[(
                    "t_notes",
                    "fs__write",
                    json!({"path": "notes.md", "content": "# notes\nadd is fixed\n"}),
                )],
                "Noted.",
            ),
            replies(&[], "Starting over from the first prompt."),
        ]
        .concat(),
    );
    prompt(&env, &mock, "fix add and run the tests", &[]);
    assert_eq!(env.read("out/result.txt"), "passed\n");
    prompt(&env, &mock, "write it down", &["--continue"]);
    assert_eq!(env.read("notes.md"), "# notes\nadd is fixed\n");
    let id = only_session(&env);

    // `session show`: the title, the messages and one checkpoint per prompt
    // with the files it changed.
    let shown = session(&env, &["show", &id]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let text = stdout(&shown);
    assert!(
        text.contains("title     fix add and run the tests"),
        "{text}"
    );
    assert!(text.contains("messages  "), "{text}");
    assert!(
        text.contains("1. fix add and run the tests  (2 files: calc.py, out/result.txt)"),
        "{text}"
    );
    assert!(
        text.contains("2. write it down  (1 file: notes.md)"),
        "{text}"
    );

    // Files only, to before prompt 2: the note goes back, the fix stays.
    let files = session(&env, &["rewind", &id, "2", "--files"]);
    assert!(files.status.success(), "{}", stderr(&files));
    assert!(
        stderr(&files).contains("restored  notes.md"),
        "{}",
        stderr(&files)
    );
    assert_eq!(env.read("notes.md"), "# notes\n");
    assert_eq!(env.read("calc.py"), "def add(a, b):\n    return a + b\n");

    // Someone edits the command's output; rewinding everything to before
    // prompt 1 restores the edit, removes what the command created, and
    // leaves the file changed since alone, saying so.
    env.write("out/result.txt", "edited by hand\n");
    let both = session(&env, &["rewind", &id, "1"]);
    let said = stderr(&both);
    assert_eq!(both.status.code(), Some(1), "{said}");
    assert!(said.contains("restored  calc.py"), "{said}");
    assert!(
        said.contains("out/result.txt: changed since prompt 1 by something other than capstan"),
        "{said}"
    );
    assert!(
        said.contains("conversation: rewound to before prompt 1"),
        "{said}"
    );
    assert_eq!(env.read("calc.py"), "def add(a, b):\n    return a - b\n");
    assert_eq!(env.read("out/result.txt"), "edited by hand\n");

    // The rewound session resumes from before prompt 1: the model sees
    // none of the earlier prompts.
    prompt(&env, &mock, "let us start again", &["--resume", &id]);
    let last = mock.received().last().unwrap().messages().to_vec();
    let sent = serde_json::to_string(&last).unwrap();
    assert!(sent.contains("let us start again"), "{sent}");
    assert!(!sent.contains("fix add and run the tests"), "{sent}");
    assert!(!sent.contains("write it down"), "{sent}");
    let listed = stdout(&session(&env, &["rewind", &id]));
    assert!(
        listed.contains("1. let us start again  (no files changed)"),
        "{listed}"
    );
    assert!(!listed.contains("2."), "{listed}");
}

#[test]
fn session_rm_asks_or_needs_yes_and_removes_the_checkpoints_too() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let mock = MockModel::start(replies(
        &[(
            "t_write",
            "fs__write",
            json!({"path": "a.txt", "content": "b\n"}),
        )],
        "Done.",
    ));
    prompt(&env, &mock, "change a", &[]);
    let id = only_session(&env);
    let sessions_dir = std::fs::read_dir(env.home.path().join("sessions"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(sessions_dir.join(format!("{id}.checkpoints")).is_dir());

    // No terminal to ask, no --yes: nothing removed.
    let refused = session(&env, &["rm", &id]);
    assert_eq!(refused.status.code(), Some(9), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("pass --yes"),
        "{}",
        stderr(&refused)
    );
    assert!(sessions_dir.join(format!("{id}.jsonl")).is_file());

    let removed = session(&env, &["rm", &id, "--yes"]);
    assert!(removed.status.success(), "{}", stderr(&removed));
    assert!(!sessions_dir.join(format!("{id}.jsonl")).exists());
    assert!(!sessions_dir.join(format!("{id}.checkpoints")).exists());
    let gone = session(&env, &["show", &id]);
    assert_eq!(gone.status.code(), Some(1));
    assert!(stderr(&gone).contains("no session"), "{}", stderr(&gone));
    // The workspace keeps what the session did.
    assert_eq!(env.read("a.txt"), "b\n");
}

/// `/rewind` in a real (pseudo-)terminal: it lists the prompts with the
/// files they changed, asks which one and what to restore, puts the file
/// back, cuts the conversation (the transcript no longer has the prompt)
/// and offers the prompt again on the input line.
#[test]
fn slash_rewind_in_a_terminal_restores_the_file_and_the_conversation() {
    use support::terminal::Terminal;

    let env = Env::new();
    env.write("a.txt", "original\n");
    let script = env.home.path().join("script.json");
    let turns = json!({ "chunk_delay_ms": 5, "turns": [
        { "text": "Writing the file.",
          "tool_calls": [ { "tool": "fs.write", "input": { "path": "a.txt", "content": "changed\n" } } ] },
        { "text": "Written." }
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let mut cmd = env.capstan_std();
    for var in support::MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("NO_COLOR", "1")
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .args(["--permission-mode", "bypass"]);
    let mut terminal = Terminal::spawn(cmd);
    terminal.expect("Ctrl-D exits");
    terminal.expect("> ");

    terminal.type_slowly("change a\r");
    terminal.expect("Written.");
    terminal.expect("> ");
    assert_eq!(env.read("a.txt"), "changed\n");

    terminal.type_slowly("/rewind\r");
    terminal.expect("1. change a  (1 file: a.txt)");
    terminal.expect("Rewind to before which prompt?");
    terminal.type_slowly("1\r");
    terminal.expect("restore code and conversation");
    terminal.expect("What to restore?");
    terminal.type_slowly("1\r");
    terminal.expect("restored  a.txt");
    terminal.expect("conversation: rewound to before prompt 1");
    // The rewound prompt is back on the input line, to send or change.
    terminal.expect("> change a");
    assert_eq!(env.read("a.txt"), "original\n");

    // Clear the line (Ctrl-U) and say something else: the conversation
    // goes on from before the rewound prompt. The scripted model answers
    // by its place in the conversation, so it plays its first turn again.
    terminal.send("\x15");
    terminal.type_slowly("something else\r");
    terminal.expect("Written.");
    terminal.expect("> ");
    terminal.type_slowly("/exit\r");
    let status = terminal.wait();
    assert_eq!(status.code(), Some(0), "{}", terminal.screen());

    let sessions = walk_jsonl(&env.home.path().join("sessions"));
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let transcript = std::fs::read_to_string(&sessions[0]).unwrap();
    let prompts: Vec<String> = transcript
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|record| record["type"] == "user")
        .map(|record| {
            record["message"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(prompts, ["something else"], "{transcript}");
    assert!(transcript.contains("\"type\":\"rewound\""), "{transcript}");
    assert_eq!(env.read("a.txt"), "changed\n");
}

/// The transcripts under `dir`.
fn walk_jsonl(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk_jsonl(&path));
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            found.push(path);
        }
    }
    found
}
