//! The interactive session in a real (pseudo-)terminal: Ctrl-C and Esc in
//! every state of a turn, type-ahead, and permission questions that take
//! only the keys pressed after they are shown.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use serde_json::{Value, json};
use support::terminal::Terminal;
use support::{Env, MODEL_VARS, fixture, pids_running, still_alive};

/// A long answer, streamed three words at a time: long enough to be
/// interrupted while it streams.
fn long_text() -> String {
    (1..=400).map(|n| format!("word{n} ")).collect()
}

/// Starts an interactive session with the scripted model playing `turns`,
/// three words every 40 ms.
fn session(env: &Env, turns: Value, extra: &[&str]) -> Terminal {
    session_streaming(env, turns, 40, extra)
}

/// [`session`], with three words streamed every `chunk_delay_ms`.
fn session_streaming(env: &Env, turns: Value, chunk_delay_ms: u64, extra: &[&str]) -> Terminal {
    let script = env.home.path().join("script.json");
    let script_json = json!({ "chunk_delay_ms": chunk_delay_ms, "turns": turns });
    std::fs::write(&script, script_json.to_string()).unwrap();
    let mut cmd = env.capstan_std();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("NO_COLOR", "1")
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .args(extra);
    let mut terminal = Terminal::spawn(cmd);
    terminal.expect("Ctrl-D exits");
    terminal.expect("> ");
    terminal
}

/// The interactive session's user messages, from its transcript.
fn user_prompts(env: &Env) -> Vec<String> {
    let mut prompts = Vec::new();
    let sessions = env.home.path().join("sessions");
    for entry in walk(&sessions) {
        if entry.extension().is_some_and(|e| e == "jsonl") {
            for line in std::fs::read_to_string(&entry).unwrap().lines() {
                let Ok(record) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                if record["type"] == "user" {
                    if let Some(text) = record.pointer("/message/content/0/text") {
                        prompts.push(text.as_str().unwrap_or_default().to_string());
                    } else if let Some(text) = record["text"].as_str() {
                        prompts.push(text.to_string());
                    }
                }
            }
        }
    }
    prompts
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// Leaves with `/exit` and checks the process ended on its own, normally.
fn exit_cleanly(terminal: &mut Terminal) {
    terminal.type_slowly("/exit\r");
    let status = terminal.wait();
    assert_eq!(
        status.code(),
        Some(0),
        "exit status {status:?} (signal {:?}); the terminal shows:\n{}",
        status.signal(),
        terminal.screen()
    );
}

/// The reported crash: after a permission question has been answered,
/// Ctrl-C while the model streams stopped the process with SIGABRT. It
/// must stop the turn, and the session must go on.
#[test]
fn ctrl_c_while_streaming_after_a_permission_answer_stops_the_turn() {
    let _responsive = support::load::needs_a_responsive_machine();
    let env = Env::new();
    let mut terminal = session(
        &env,
        json!([
            { "text": "Writing the file.",
              "tool_calls": [ { "tool": "fs.write", "input": { "path": "a.txt", "content": "x\n" } } ] },
            { "text": long_text() },
            { "text": "Still here." }
        ]),
        &[],
    );
    terminal.type_slowly("write a.txt\r");
    terminal.expect("allow? [y/s/a/n]");
    terminal.send("y");
    terminal.expect("word3");
    terminal.send("\x03");
    terminal.expect("interrupted");
    terminal.expect("> ");
    assert!(terminal.is_running(), "{}", terminal.screen());
    assert_eq!(env.read("a.txt"), "x\n");
    // The next prompt carries on.
    terminal.type_slowly("go on\r");
    terminal.expect("Still here.");
    terminal.expect("> ");
    exit_cleanly(&mut terminal);
}

/// Ctrl-C at a permission question refuses the call and stops the turn.
#[test]
fn ctrl_c_at_a_permission_question_stops_the_turn() {
    let _responsive = support::load::needs_a_responsive_machine();
    let env = Env::new();
    let mut terminal = session(
        &env,
        json!([
            { "text": "Writing the file.",
              "tool_calls": [ { "tool": "fs.write", "input": { "path": "a.txt", "content": "x\n" } } ] },
            { "text": "After the question." }
        ]),
        &[],
    );
    terminal.type_slowly("write a.txt\r");
    terminal.expect("allow? [y/s/a/n]");
    terminal.send("\x03");
    terminal.expect("> ");
    assert!(terminal.is_running(), "{}", terminal.screen());
    assert!(
        !env.ws.path().join("a.txt").exists(),
        "the refused write ran"
    );
    assert!(!terminal.screen().contains("After the question."));
    exit_cleanly(&mut terminal);
}

/// Ctrl-C while a tool runs stops it; the session goes on.
#[test]
fn ctrl_c_while_a_tool_runs_stops_the_turn() {
    let _responsive = support::load::needs_a_responsive_machine();
    let env = Env::new();
    let plugin = fixture("misbehave");
    let mut terminal = session(
        &env,
        json!([
            { "text": "Sleeping.",
              "tool_calls": [ { "tool": "misbehave.sleep", "input": { "bytes": 20 } } ] },
            { "text": "Awake again." }
        ]),
        &[
            "--permission-mode",
            "bypass",
            "--plugin",
            &format!("misbehave={}", plugin.display()),
        ],
    );
    terminal.type_slowly("sleep\r");
    terminal.expect("Sleeping.");
    std::thread::sleep(Duration::from_millis(500));
    terminal.send("\x03");
    terminal.expect("interrupted");
    terminal.expect("> ");
    assert!(terminal.is_running(), "{}", terminal.screen());
    terminal.type_slowly("again\r");
    terminal.expect("Awake again.");
    terminal.expect("> ");
    exit_cleanly(&mut terminal);
}

/// Ctrl-C while the model thinks (before any text) and during a
/// compaction stops each; the session goes on.
#[test]
fn ctrl_c_while_thinking_and_while_compacting() {
    let _responsive = support::load::needs_a_responsive_machine();
    let env = Env::new();
    // Three words every 0.5 s: the summary takes seconds to stream.
    let mut terminal = session_streaming(
        &env,
        json!([
            { "delay_ms": 4000, "text": "After thinking." }
        ]),
        500,
        &[],
    );
    terminal.type_slowly("think\r");
    terminal.expect("thinking");
    std::thread::sleep(Duration::from_millis(300));
    terminal.send("\x03");
    let shown = terminal.expect("interrupted");
    assert!(!shown.contains("After thinking."), "{shown}");
    terminal.expect("> ");
    terminal.type_slowly("/compact\r");
    terminal.expect("summarizing");
    std::thread::sleep(Duration::from_millis(300));
    terminal.send("\x03");
    let shown = terminal.expect("> ");
    assert!(shown.contains("interrupt"), "{shown}");
    assert!(!shown.contains("compacted:"), "{shown}");
    assert!(terminal.is_running(), "{}", terminal.screen());
    // The conversation was left as it was: the next prompt goes on (the
    // script replays its first turn, as no answer was recorded).
    terminal.type_slowly("go on\r");
    terminal.expect("After thinking.");
    terminal.expect("> ");
    exit_cleanly(&mut terminal);
}

/// At the idle prompt, Ctrl-C once says how to leave; twice in a row
/// exits with 130.
#[test]
fn ctrl_c_twice_at_the_idle_prompt_exits_with_130() {
    let _responsive = support::load::needs_a_responsive_machine();
    let env = Env::new();
    let mut terminal = session(&env, json!([{ "text": "Hello." }]), &[]);
    terminal.send("\x03");
    terminal.expect("Ctrl-C again");
    assert!(terminal.is_running());
    terminal.send("\x03");
    let status = terminal.wait();
    assert_eq!(status.code(), Some(130), "{}", terminal.screen());
}

/// Esc interrupts a streaming answer like Ctrl-C; at the prompt it eats no
/// key: `/exit` typed after it is still `/exit`.
#[test]
fn esc_interrupts_a_turn_and_never_eats_the_next_key() {
    let _responsive = support::load::needs_a_responsive_machine();
    let env = Env::new();
    let mut terminal = session(
        &env,
        json!([{ "text": long_text() }, { "text": "Second answer." }]),
        &[],
    );
    terminal.type_slowly("talk\r");
    terminal.expect("word3");
    terminal.send("\x1b");
    terminal.expect("interrupted");
    terminal.expect("> ");
    std::thread::sleep(Duration::from_millis(100));
    terminal.send("\x1b");
    std::thread::sleep(Duration::from_millis(200));
    exit_cleanly(&mut terminal);
    assert_eq!(user_prompts(&env).len(), 1, "{:?}", user_prompts(&env));
}

/// What is typed while the model streams is not echoed into its answer;
/// a finished line runs as the next prompt, unmangled, and an unfinished
/// one starts the next prompt's line.
#[test]
fn typing_during_a_turn_waits_for_the_next_prompt() {
    let _responsive = support::load::needs_a_responsive_machine();
    let env = Env::new();
    let mut terminal = session(
        &env,
        json!([
            { "text": long_text().split_whitespace().take(90).collect::<Vec<_>>().join(" ") },
            { "text": "Second answer." },
            { "text": "Third answer." }
        ]),
        &[],
    );
    terminal.type_slowly("talk\r");
    terminal.expect("word3");
    terminal.type_slowly("fix the bug\r");
    terminal.type_slowly("and then");
    terminal.expect("word90");
    // The typed text was not echoed into the answer.
    let during = terminal.expect("Second answer.");
    assert!(
        !during
            .split("> fix the bug")
            .next()
            .unwrap()
            .contains("fix the bug"),
        "typed text was echoed into the answer:\n{during}"
    );
    assert!(during.contains("> fix the bug"), "{during}");
    terminal.expect("> and then");
    terminal.type_slowly(" stop\r");
    terminal.expect("Third answer.");
    terminal.expect("> ");
    exit_cleanly(&mut terminal);
    assert_eq!(
        user_prompts(&env),
        vec!["talk", "fix the bug", "and then stop"],
        "{}",
        terminal.screen()
    );
}

/// A key typed before a permission question appears does not answer it:
/// the question waits for a key pressed after it is shown.
#[test]
fn a_key_typed_before_a_permission_question_does_not_answer_it() {
    let _responsive = support::load::needs_a_responsive_machine();
    let env = Env::new();
    let mut terminal = session(
        &env,
        json!([
            { "text": long_text().split_whitespace().take(30).collect::<Vec<_>>().join(" "),
              "tool_calls": [ { "tool": "fs.write", "input": { "path": "a.txt", "content": "x\n" } } ] },
            { "text": "Not written." }
        ]),
        &[],
    );
    terminal.type_slowly("write\r");
    terminal.expect("word3");
    terminal.send("y");
    terminal.expect("allow? [y/s/a/n]");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !env.ws.path().join("a.txt").exists(),
        "the key typed before the question answered it"
    );
    terminal.send("n");
    terminal.expect("why not?");
    terminal.send("\r");
    terminal.expect("Not written.");
    // The early "y" waits at the next prompt.
    terminal.expect("> y");
    assert!(!env.ws.path().join("a.txt").exists());
    terminal.send("\x7f");
    exit_cleanly(&mut terminal);
}

/// A permission question for an edit shows the change as a diff with the
/// file's line numbers, a new file as its first lines; creating a file is
/// not "may destroy data"; "always" says where the rule went and
/// `/permissions` lists and removes it.
#[test]
fn permission_questions_show_diffs_and_saved_rules_can_be_removed() {
    let _responsive = support::load::needs_a_responsive_machine();
    let env = Env::new();
    env.write("src/lib.rs", "fn one() {}\nfn greet() {}\nfn three() {}\n");
    let mut terminal = session(
        &env,
        json!([
            { "text": "Renaming.",
              "tool_calls": [ { "tool": "fs.edit",
                                "input": { "path": "src/lib.rs", "old": "fn greet() {}", "new": "fn welcome() {}" } } ] },
            { "text": "Creating.",
              "tool_calls": [ { "tool": "fs.write",
                                "input": { "path": "notes/new.md", "content": "# Notes\nfirst\n" } } ] },
            { "text": "All done." }
        ]),
        &[],
    );
    terminal.type_slowly("rename greet\r");
    let question = terminal.expect("allow? [y/s/a/n]");
    assert!(
        question.contains("src/lib.rs (1 line added, 1 line removed)"),
        "{question}"
    );
    assert!(question.contains("@@ -1,3 +1,3 @@"), "{question}");
    assert!(question.contains("- fn greet() {}"), "{question}");
    assert!(question.contains("+ fn welcome() {}"), "{question}");
    assert!(question.contains("  fn one() {}"), "{question}");
    assert!(!question.contains("\\n"), "escaped JSON shown: {question}");
    terminal.send("a");
    let saved = terminal.expect("removes them");
    assert!(saved.contains("always allowed in this project"), "{saved}");
    assert!(saved.contains("/permissions"), "{saved}");
    let question = terminal.expect("allow? [y/s/a/n]");
    assert!(
        question.contains("notes/new.md (new file, 2 lines)"),
        "{question}"
    );
    assert!(question.contains("   1 + # Notes"), "{question}");
    assert!(question.contains("creates a file"), "{question}");
    assert!(!question.contains("destroy"), "{question}");
    terminal.send("y");
    terminal.expect("All done.");
    terminal.expect("> ");
    assert_eq!(
        env.read("src/lib.rs"),
        "fn one() {}\nfn welcome() {}\nfn three() {}\n"
    );

    terminal.type_slowly("/permissions\r");
    let listed = terminal.expect("drops rule N");
    assert!(listed.contains("1. allow fs.edit"), "{listed}");
    assert!(listed.contains("project local config"), "{listed}");
    terminal.type_slowly("/permissions remove 1\r");
    let removed = terminal.expect("no longer applies in this session");
    assert!(
        removed.contains("removed `allow fs.edit` from"),
        "{removed}"
    );
    terminal.type_slowly("/permissions\r");
    terminal.expect("no rules");
    terminal.expect("> ");
    let local =
        std::fs::read_to_string(walk(&env.home.path().join("projects"))[0].clone()).unwrap();
    assert!(!local.contains("fs.edit"), "{local}");
    exit_cleanly(&mut terminal);
}

/// A command's output shows under its line while it runs: the first line
/// is on the screen while the command still waits for a file only the test
/// creates after seeing that line. What reaches the terminal carries none
/// of the command's escape sequences.
#[cfg(target_os = "linux")]
#[test]
fn a_running_commands_output_shows_while_it_runs() {
    let env = Env::new();
    // The words shown are printed by `printf`, so the command's own text
    // (in the spinner's label) never matches them.
    let command = "printf 'live-%s\\n' first-line; printf '\\033]0;retitled\\007\\033[2Jcleared-%s\\n' not; \
                   while [ ! -e gate ]; do sleep 0.05; done; printf 'after-%s\\n' the-gate";
    let mut terminal = session(
        &env,
        json!([
            { "text": "Running it.",
              "tool_calls": [ { "tool": "exec.run", "input": { "command": command } } ] },
            { "text": "The command is done." }
        ]),
        &[],
    );
    terminal.type_slowly("run it\r");
    terminal.expect("live-first-line");
    terminal.expect("cleared-not");
    let screen = terminal.screen();
    assert!(!screen.contains("after-the-gate"), "{screen}");
    assert!(!screen.contains("The command is done."), "{screen}");
    assert!(!screen.contains("\x1b]0;retitled"), "{screen:?}");
    assert!(!screen.contains("\x1b[2J"), "{screen:?}");
    std::fs::write(env.ws.path().join("gate"), "").unwrap();
    terminal.expect("✓ exec.run");
    terminal.expect("The command is done.");
    terminal.expect("> ");
    exit_cleanly(&mut terminal);
}

/// Starts a session whose first turn starts a background job running
/// `sleep MARKER`, and waits until the job's process runs; returns its
/// host pids.
#[cfg(target_os = "linux")]
fn session_with_a_job(env: &Env, marker: &str, then: Value) -> (Terminal, Vec<u32>) {
    let mut turns = vec![json!({
        "text": "Starting the server.",
        "tool_calls": [ { "tool": "exec.start",
                          "input": { "command": format!("echo serving; exec sleep {marker}") } } ]
    })];
    turns.extend(then.as_array().unwrap().iter().cloned());
    let mut terminal = session(env, Value::Array(turns), &[]);
    terminal.type_slowly("serve\r");
    terminal.expect("started job-1");
    let mut job = Vec::new();
    for _ in 0..500 {
        job = pids_running(&format!("sleep {marker}"));
        if !job.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!job.is_empty(), "the job never ran: {}", terminal.screen());
    (terminal, job)
}

/// As in Claude Code, Ctrl-C stops the turn but not the background jobs;
/// Ctrl-C twice, which quits capstan in the middle of a turn, leaves none
/// of their processes behind.
#[cfg(target_os = "linux")]
#[test]
fn background_jobs_outlive_an_interrupt_but_not_capstan() {
    let env = Env::new();
    let long = json!({
        "text": "Waiting.",
        "tool_calls": [ { "tool": "exec.run",
                          "input": { "command": "printf 'wait-%s\\n' ing; exec sleep 7654402" } } ]
    });
    let (mut terminal, job) = session_with_a_job(
        &env,
        "7654401",
        json!([{ "text": "The server runs." }, long.clone(), long]),
    );
    terminal.expect("The server runs.");
    terminal.expect("> ");
    terminal.type_slowly("wait\r");
    terminal.expect("wait-ing");
    terminal.send("\x03");
    terminal.expect("interrupted");
    terminal.expect("> ");
    for pid in pids_running("sleep 7654402") {
        assert!(
            !still_alive(pid),
            "the interrupted command's process {pid} runs on"
        );
    }
    for pid in &job {
        assert!(
            std::fs::metadata(format!("/proc/{pid}")).is_ok(),
            "the job did not survive the interrupt: {}",
            terminal.screen()
        );
    }
    terminal.type_slowly("wait again\r");
    terminal.expect("wait-ing");
    // Two Ctrl-C at once: the second comes while the turn winds down, and
    // quits.
    terminal.send("\x03\x03");
    let status = terminal.wait();
    assert_eq!(status.code(), Some(130), "{}", terminal.screen());
    for pid in &job {
        assert!(!still_alive(*pid), "job process {pid} outlived capstan");
    }
    // This test's own commands only: the other tests here run sleeps of
    // their own (`sleep 7654403`) at the same time.
    for needle in ["sleep 7654401", "sleep 7654402"] {
        for pid in pids_running(needle) {
            assert!(!still_alive(pid), "{needle} ({pid}) outlived capstan");
        }
    }
}

/// Leaving with Ctrl-C twice at the prompt kills every background job.
#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_twice_at_the_prompt_kills_every_background_job() {
    let env = Env::new();
    let (mut terminal, job) =
        session_with_a_job(&env, "7654403", json!([{ "text": "The server runs." }]));
    terminal.expect("The server runs.");
    terminal.expect("> ");
    terminal.send("\x03");
    terminal.expect("Ctrl-C again");
    terminal.send("\x03");
    let status = terminal.wait();
    assert_eq!(status.code(), Some(130), "{}", terminal.screen());
    for pid in &job {
        assert!(!still_alive(*pid), "job process {pid} outlived capstan");
    }
}

/// What the user refused to `fs.write` is asked again when the model tries
/// it through `exec.run` (a known bypass of other agents' sandboxes): the
/// "no" is not turned into an allow for the command, nor is the question
/// skipped; refused again, the file is unchanged.
#[test]
fn a_write_refused_to_fs_write_is_asked_again_through_exec_run() {
    let _responsive = support::load::needs_a_responsive_machine();
    let env = Env::new();
    env.write("a.txt", "original\n");
    let mut terminal = session(
        &env,
        json!([
            { "text": "Writing the file.",
              "tool_calls": [ { "tool": "fs.write", "input": { "path": "a.txt", "content": "planted\n" } } ] },
            { "text": "Then through a command.",
              "tool_calls": [ { "tool": "exec.run",
                                "input": { "command": "echo planted > a.txt", "write": true } } ] },
            { "text": "Both were refused." }
        ]),
        &[],
    );
    terminal.type_slowly("write a.txt\r");
    let first = terminal.expect("allow? [y/s/a/n]");
    assert!(first.contains("fs.write"), "{first}");
    terminal.send("n");
    terminal.expect("why not?");
    terminal.send("\r");
    // A fresh question, about the command this time.
    let second = terminal.expect("Then through a command.");
    let asked = terminal.expect("allow? [y/s/a/n]");
    let question = format!("{second}{asked}");
    assert!(question.contains("exec.run"), "{question}");
    assert!(question.contains("write the workspace"), "{question}");
    assert_eq!(env.read("a.txt"), "original\n", "the command ran unasked");
    terminal.send("n");
    terminal.expect("why not?");
    terminal.send("\r");
    terminal.expect("Both were refused.");
    terminal.expect("> ");
    assert_eq!(env.read("a.txt"), "original\n");
    exit_cleanly(&mut terminal);
}

/// The same the other way: `fs.write` allowed for the session does not
/// let `exec.run` write unasked.
#[test]
fn a_write_allowed_to_fs_write_is_not_inherited_by_exec_run() {
    let _responsive = support::load::needs_a_responsive_machine();
    let env = Env::new();
    let mut terminal = session(
        &env,
        json!([
            { "text": "Writing the file.",
              "tool_calls": [ { "tool": "fs.write", "input": { "path": "a.txt", "content": "written\n" } } ] },
            { "text": "Then through a command.",
              "tool_calls": [ { "tool": "exec.run",
                                "input": { "command": "echo planted > a.txt", "write": true } } ] },
            { "text": "The command was refused." }
        ]),
        &[],
    );
    terminal.type_slowly("write a.txt\r");
    terminal.expect("allow? [y/s/a/n]");
    terminal.send("s");
    terminal.expect("Then through a command.");
    let asked = terminal.expect("allow? [y/s/a/n]");
    assert!(asked.contains("exec.run"), "{asked}");
    assert_eq!(env.read("a.txt"), "written\n", "the command ran unasked");
    terminal.send("n");
    terminal.expect("why not?");
    terminal.send("\r");
    terminal.expect("The command was refused.");
    terminal.expect("> ");
    assert_eq!(env.read("a.txt"), "written\n");
    exit_cleanly(&mut terminal);
}
