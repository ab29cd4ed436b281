//! The interactive session's habits, driven through a pseudo-terminal: the
//! resume picker and recap, `/model` switching (and what the model then
//! receives), `@path` completion and attachment, `!command` in the sandbox
//! with its output given to the model, `/status`, `/context` and `/init`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::os::unix::process::ExitStatusExt;

use serde_json::{Value, json};
use support::mock_model::{Answer, MockModel, Reply};
use support::terminal::Terminal;
use support::{Env, MODEL_VARS};

/// Writes a scripted model's script and returns its `--model` value.
fn script(env: &Env, name: &str, turns: Value) -> String {
    let path = env.home.path().join(name);
    std::fs::write(&path, json!({ "turns": turns }).to_string()).unwrap();
    format!("scripted:{}", path.display())
}

/// `capstan` in a pseudo-terminal with `args`, without the developer's
/// model variables; waits for the prompt.
fn interactive(env: &Env, args: &[&str], envs: &[(&str, &str)]) -> Terminal {
    let mut cmd = env.capstan_std();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("NO_COLOR", "1").args(args);
    for (key, value) in envs {
        cmd.env(key, value);
    }
    Terminal::spawn(cmd)
}

/// Leaves with `/exit`; the process must end normally.
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

/// Two finished sessions: "alpha" wrote notes.txt, "beta" only talked.
fn two_sessions(env: &Env) {
    let alpha = script(
        env,
        "alpha.json",
        json!([
            { "text": "Writing.", "tool_calls": [
                { "tool": "fs.write", "input": { "path": "notes.txt", "content": "n\n" } } ] },
            { "text": "Wrote the notes." }
        ]),
    );
    let out = env
        .capstan()
        .args(["--model", &alpha, "--permission-mode", "bypass", "-p"])
        .arg("alpha task: write the notes")
        .output()
        .unwrap();
    support::assert_exit(&out, 0);
    // The newer session is listed first.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let beta = script(env, "beta.json", json!([{ "text": "Just talking." }]));
    let out = env
        .capstan()
        .args(["--model", &beta, "-p", "beta task: say hello"])
        .output()
        .unwrap();
    support::assert_exit(&out, 0);
}

/// `--resume` without an id lists the sessions; typing filters, Enter
/// resumes the chosen one, which shows a recap of what it did.
#[test]
fn resume_without_an_id_picks_a_session_and_shows_its_recap() {
    let env = Env::new();
    two_sessions(&env);
    // The scripted model goes on from the resumed conversation's turn.
    let next = script(
        &env,
        "next.json",
        json!([{ "text": "-" }, { "text": "-" }, { "text": "Carrying on." }]),
    );
    let mut terminal = interactive(&env, &["--model", &next, "--resume"], &[]);
    terminal.expect("Resume a session");
    terminal.expect("beta task: say hello");
    terminal.expect("alpha task: write the notes");
    terminal.type_slowly("alpha");
    terminal.expect("filter: alpha");
    terminal.send("\r");
    terminal.expect("resumed session");
    terminal.expect("last prompt: alpha task: write the notes");
    terminal.expect("done: 1 tool calls (fs.write ×1)");
    terminal.expect("last answer: Wrote the notes.");
    terminal.expect("files changed: notes.txt");
    terminal.expect("> ");
    terminal.type_slowly("go on\r");
    terminal.expect("Carrying on.");
    terminal.expect("> ");
    exit_cleanly(&mut terminal);
}

/// `/resume` inside a session: the arrow keys choose, and the session
/// switches to the chosen one; Esc cancels and changes nothing.
#[test]
fn slash_resume_switches_to_the_session_chosen_with_the_arrows() {
    // An arrow key's bytes must arrive together, as a terminal sends them.
    let _responsive = support::load::needs_a_responsive_machine();
    let env = Env::new();
    two_sessions(&env);
    let next = script(&env, "next.json", json!([{ "text": "Carrying on." }]));
    let mut terminal = interactive(&env, &["--model", &next], &[]);
    terminal.expect("> ");
    terminal.type_slowly("/resume\r");
    terminal.expect("Resume a session");
    terminal.send("\x1b");
    terminal.expect("(resume cancelled)");
    terminal.type_slowly("/resume\r");
    terminal.expect("beta task: say hello");
    // Down to the older session, alpha.
    terminal.send("\x1b[B");
    std::thread::sleep(std::time::Duration::from_millis(100));
    terminal.send("\r");
    terminal.expect("last prompt: alpha task: write the notes");
    terminal.expect("> ");
    exit_cleanly(&mut terminal);
}

/// Without a terminal, `--resume` without an id cannot pick: it says so
/// and lists the recent ids.
#[test]
fn resume_without_an_id_and_without_a_terminal_lists_the_ids() {
    let env = Env::new();
    two_sessions(&env);
    let next = script(&env, "next.json", json!([{ "text": "x" }]));
    let out = env
        .capstan()
        .args(["--model", &next, "--resume", "-p", "x"])
        .output()
        .unwrap();
    support::assert_exit(&out, 2);
    let stderr = support::stderr(&out);
    assert!(stderr.contains("give the id"), "{stderr}");
    assert!(stderr.contains("alpha task: write the notes"), "{stderr}");
    assert!(stderr.contains("beta task: say hello"), "{stderr}");
}

/// The transcript's records of every session of the test.
fn records(env: &Env) -> Vec<Value> {
    let mut found = Vec::new();
    let mut dirs = vec![env.home.path().join("sessions")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                for line in std::fs::read_to_string(&path).unwrap().lines() {
                    if let Ok(record) = serde_json::from_str(line) {
                        found.push(record);
                    }
                }
            }
        }
    }
    found
}

/// Against an OpenAI-compatible server: `/model` lists the server's
/// models and switches; the next request names the new model; `@path`
/// completes with Tab and the file reaches the model; `!command` runs in
/// the sandbox and its output reaches the model with the next prompt.
#[test]
fn model_switch_mentions_and_commands_reach_the_model() {
    let env = Env::new();
    env.write("notes-for-the-model.txt", "the secret word is marmalade\n");
    let models = json!({ "object": "list", "data": [
        { "id": "small-model" }, { "id": "big-model" } ] });
    let server = MockModel::start(vec![
        Reply::status(200, models.to_string()),
        Reply::sse(Answer::text("Read it.").openai()),
        Reply::sse(Answer::text("Saw the output.").openai()),
    ]);
    let base = format!("{}/v1", server.url());
    let mut terminal = interactive(
        &env,
        &[
            "--provider",
            "openai",
            "--base-url",
            &base,
            "--model",
            "small-model",
        ],
        &[("OPENAI_API_KEY", "sk-test")],
    );
    terminal.expect("> ");
    terminal.type_slowly("/model\r");
    terminal.expect("models of openai-compatible:");
    terminal.expect("1. big-model");
    terminal.expect("*  2. small-model");
    terminal.type_slowly("/model big-model\r");
    terminal.expect("model: big-model from the next prompt on, instead of small-model");
    terminal.type_slowly("/status\r");
    terminal.expect("model        big-model");
    terminal.expect(&format!("base URL     {base}"));
    terminal.expect("cost");

    // Tab completes the mention; Enter sends it with the file attached.
    terminal.type_slowly("what does @notes-f");
    terminal.send("\t");
    terminal.expect("or-the-model.txt");
    terminal.type_slowly(" say?\r");
    terminal.expect("attached @notes-for-the-model.txt (1 lines)");
    terminal.expect("Read it.");
    terminal.expect("> ");

    terminal.type_slowly("!echo bang-output-$((40+2))\r");
    terminal.expect("bang-output-42");
    terminal.expect("exit code 0");
    terminal.expect("> ");
    terminal.type_slowly("/context\r");
    terminal.expect("for the next prompt");
    terminal.expect("> ");
    terminal.type_slowly("what did it print?\r");
    terminal.expect("Saw the output.");
    terminal.expect("> ");
    exit_cleanly(&mut terminal);

    let received = server.received();
    assert_eq!(received.len(), 3, "{received:#?}");
    assert_eq!(received[0].method, "GET");
    assert_eq!(received[0].path, "/v1/models");
    assert_eq!(received[1].body["model"], "big-model");
    let first = received[1].messages().last().unwrap().to_string();
    assert!(
        first.contains("what does @notes-for-the-model.txt say?"),
        "{first}"
    );
    assert!(first.contains("the secret word is marmalade"), "{first}");
    assert_eq!(received[2].body["model"], "big-model");
    let second = received[2].messages().last().unwrap().to_string();
    assert!(
        second.contains("<command>echo bang-output-$((40+2))</command>"),
        "{second}"
    );
    assert!(second.contains("bang-output-42"), "{second}");
    assert!(second.contains("exit code 0"), "{second}");
    // The switch is in the transcript, so a resumed session keeps it.
    assert!(
        records(&env)
            .iter()
            .any(|r| r["type"] == "model_changed" && r["model"] == "big-model"),
        "no model_changed record"
    );
    let server = MockModel::start(vec![Reply::sse(Answer::text("Resumed.").openai())]);
    let base = format!("{}/v1", server.url());
    let mut cmd = env.capstan();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    let out = cmd
        .env("OPENAI_API_KEY", "sk-test")
        .args([
            "--provider",
            "openai",
            "--base-url",
            &base,
            "--continue",
            "-p",
            "again",
        ])
        .output()
        .unwrap();
    support::assert_exit(&out, 0);
    assert_eq!(server.received()[0].body["model"], "big-model");
}

/// A mention outside the workspace, or of a protected path, is refused
/// with a message and never sent; `!` commands cannot write the workspace
/// in the default mode.
#[test]
fn refused_mentions_and_a_read_only_command() {
    let env = Env::new();
    let outside = env.write_outside("secret.txt", "outside secret\n");
    std::fs::create_dir_all(env.ws.path().join(".git")).unwrap();
    std::fs::write(env.ws.path().join(".git/config"), "[core]\n").unwrap();
    let model = script(
        &env,
        "s.json",
        json!([{ "text": "First." }, { "text": "Second." }]),
    );
    let mut terminal = interactive(&env, &["--model", &model], &[]);
    terminal.expect("> ");
    let prompt = format!("read @{} and @.git/config\r", outside.display());
    terminal.type_slowly(&prompt);
    terminal.expect("not attached: it is outside the workspace");
    terminal.expect("not attached: .git is one of the protected paths");
    terminal.expect("First.");
    terminal.expect("> ");
    terminal.type_slowly("!touch made-by-bang.txt\r");
    terminal.expect("workspace read-only in mode default");
    terminal.expect("> ");
    assert!(!env.ws.path().join("made-by-bang.txt").exists());
    // Ctrl-C stops a command and the session goes on.
    terminal.type_slowly("!sleep 60\r");
    std::thread::sleep(std::time::Duration::from_millis(500));
    terminal.send("\x03");
    terminal.expect("interrupted and killed");
    terminal.expect("> ");
    exit_cleanly(&mut terminal);
    let sent: String = records(&env)
        .iter()
        .filter(|r| r["type"] == "user")
        .map(|r| r.to_string())
        .collect();
    assert!(!sent.contains("outside secret"), "{sent}");
    assert!(!sent.contains("[core]"), "{sent}");
}

/// `/init` has the model write AGENTS.md; an existing one is only
/// rewritten after a yes.
#[test]
fn init_writes_agents_md_and_asks_before_rewriting() {
    let env = Env::new();
    let model = script(
        &env,
        "init.json",
        json!([
            { "text": "Writing AGENTS.md.", "tool_calls": [
                { "tool": "fs.write", "input": { "path": "AGENTS.md",
                  "content": "# AGENTS.md\n\nThis file guides coding agents working in this repository.\n" } } ] },
            { "text": "Done." },
            { "text": "Rewriting.", "tool_calls": [
                { "tool": "fs.write", "input": { "path": "AGENTS.md", "content": "# AGENTS.md\n\nnew\n" } } ] },
            { "text": "Done again." }
        ]),
    );
    let mut terminal = interactive(
        &env,
        &["--model", &model, "--permission-mode", "accept-edits"],
        &[],
    );
    terminal.expect("> ");
    terminal.type_slowly("/init\r");
    terminal.expect("Done.");
    terminal.expect("AGENTS.md written (3 lines)");
    terminal.expect("> ");
    assert!(env.read("AGENTS.md").contains("guides coding agents"));
    terminal.type_slowly("/init\r");
    terminal.expect("AGENTS.md already exists (3 lines); let the model rewrite it? [y/N]");
    terminal.type_slowly("n\r");
    terminal.expect("AGENTS.md left as it is");
    terminal.expect("> ");
    assert!(env.read("AGENTS.md").contains("guides coding agents"));
    terminal.type_slowly("/init\r");
    terminal.expect("[y/N]");
    terminal.type_slowly("y\r");
    terminal.expect("Done again.");
    terminal.expect("AGENTS.md written (3 lines)");
    terminal.expect("> ");
    assert_eq!(env.read("AGENTS.md"), "# AGENTS.md\n\nnew\n");
    exit_cleanly(&mut terminal);
    let prompts: String = records(&env)
        .iter()
        .filter(|r| r["type"] == "user")
        .map(|r| r.to_string())
        .collect();
    assert!(prompts.contains("write an AGENTS.md file"), "{prompts}");
    assert!(
        prompts.contains("already exists: read it first"),
        "{prompts}"
    );
}
