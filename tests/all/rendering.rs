//! How a session looks on a terminal: the model's Markdown rendered as it
//! streams, the status line over the prompt, edits shown as diffs once
//! they ran — and plain text wherever a script or `NO_COLOR` reads it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use serde_json::{Value, json};
use support::terminal::Terminal;
use support::{Env, MODEL_VARS};

/// An answer using every construct the renderer knows.
const ANSWER: &str = "# Plan\n\nI will **edit** the `main` function.\n\n- first step\n  - nested step\n\n> quoted\n\n```rust\nfn main() {\n    println!(\"hi\"); // greet\n}\n```\n\n| file | lines |\n|---|--:|\n| a.rs | 12 |\n\nDone.";

fn script(env: &Env, turns: Value) -> String {
    let script = env.home.path().join("script.json");
    std::fs::write(
        &script,
        json!({ "chunk_delay_ms": 5, "turns": turns }).to_string(),
    )
    .unwrap();
    format!("scripted:{}", script.display())
}

/// An interactive session in a terminal with colours allowed.
fn session(env: &Env, turns: Value, extra: &[&str]) -> Terminal {
    let mut cmd = env.capstan_std();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env_remove("NO_COLOR")
        .arg("--model")
        .arg(script(env, turns))
        .args(extra);
    let mut terminal = Terminal::spawn(cmd);
    terminal.expect("Ctrl-D exits");
    terminal
}

#[test]
fn markdown_is_rendered_and_the_status_line_follows_the_session() {
    let _responsive = support::load::needs_a_responsive_machine();
    let env = Env::new();
    let mut terminal = session(&env, json!([{ "text": ANSWER }]), &[]);
    // The status line, over the first prompt.
    terminal.expect("scripted · mode default · context 0% of 128k · 0 tokens");
    terminal.expect("> ");
    terminal.type_slowly("plan it\r");
    // A heading without its marks, bold and underlined.
    terminal.expect("\x1b[0;1;4;35mPlan\x1b[0m");
    // Bold and inline code, their markers gone.
    terminal.expect("I will \x1b[0;1medit\x1b[0m the \x1b[0;36mmain\x1b[0m function.");
    terminal.expect("• first step");
    terminal.expect("◦ nested step");
    terminal.expect("\x1b[0;2m│ \x1b[0;3mquoted");
    // The code block, highlighted: a keyword, a string, a comment.
    terminal.expect("\x1b[0;33mfn\x1b[0m");
    terminal.expect("\x1b[0;32m\"hi\"\x1b[0m");
    terminal.expect("\x1b[0;2;3m// greet");
    // The table, as a grid.
    terminal.expect("┌──────┬───────┐");
    terminal.expect("a.rs \x1b[0;2m│\x1b[0m    12 \x1b[0;2m│");
    terminal.expect("Done.");
    // After the turn, the status line counts its tokens; it follows a
    // change of mode.
    let status = terminal.expect("> ");
    assert!(
        status.contains("scripted · mode default · context "),
        "{status}"
    );
    assert!(!status.contains(" 0 tokens"), "{status}");
    terminal.type_slowly("/mode plan\r");
    terminal.expect("permission mode: plan");
    terminal.expect("scripted · mode plan · context ");
    terminal.expect("> ");
    let screen = terminal.screen();
    assert!(!screen.contains("# Plan"), "{screen}");
    assert!(!screen.contains("**edit**"), "{screen}");
    assert!(!screen.contains("|---|"), "{screen}");
    terminal.type_slowly("/exit\r");
    assert_eq!(terminal.wait().code(), Some(0), "{}", terminal.screen());
}

#[test]
fn an_edit_is_shown_as_a_diff_once_it_ran() {
    let _responsive = support::load::needs_a_responsive_machine();
    let env = Env::new();
    let before: String = (1..=30).map(|n| format!("line {n}\n")).collect();
    env.write("a.txt", &before);
    let new_file: String = (1..=40).map(|n| format!("new {n}\n")).collect();
    let mut terminal = session(
        &env,
        json!([
            { "text": "Editing.",
              "tool_calls": [ { "tool": "fs.edit",
                                "input": { "path": "a.txt", "old": "line 10\n", "new": "line ten\nline 10b\n" } } ] },
            { "text": "Writing.",
              "tool_calls": [ { "tool": "fs.write", "input": { "path": "b.txt", "content": new_file } } ] },
            { "text": "Both done." }
        ]),
        &["--permission-mode", "accept-edits"],
    );
    terminal.expect("> ");
    terminal.type_slowly("edit\r");
    // The call's line counts what changed; the hunk follows, coloured.
    terminal.expect("fs.edit\x1b[0m \x1b[36ma.txt\x1b[0m \x1b[32m+2\x1b[0m \x1b[31m-1\x1b[0m");
    terminal.expect("\x1b[36m@@ -7,7 +7,8 @@\x1b[0m");
    terminal.expect("\x1b[31m- line 10\x1b[0m");
    terminal.expect("\x1b[32m+ line ten\x1b[0m");
    terminal.expect("\x1b[32m+ line 10b\x1b[0m");
    // A new file: its first lines, the rest counted.
    terminal.expect("fs.write\x1b[0m \x1b[36mb.txt\x1b[0m \x1b[32mnew file, +40\x1b[0m");
    terminal.expect("+ new 16");
    terminal.expect("… 24 more lines");
    terminal.expect("Both done.");
    terminal.expect("> ");
    assert!(!terminal.screen().contains("+ new 17"));
    assert_eq!(env.read("b.txt").lines().count(), 40);
    terminal.type_slowly("/exit\r");
    assert_eq!(terminal.wait().code(), Some(0), "{}", terminal.screen());
}

#[test]
fn print_mode_stdout_and_no_color_stay_plain() {
    let env = Env::new();
    let model = script(&env, json!([{ "text": ANSWER }]));
    let out = env
        .capstan()
        .env_remove("NO_COLOR")
        .args(["-p", "plan it", "--model", &model])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", support::stderr(&out));
    assert_eq!(support::stdout(&out).trim_end(), ANSWER);

    // On a terminal, --no-color shows the text as the model wrote it.
    let _responsive = support::load::needs_a_responsive_machine();
    let mut terminal = session(&env, json!([{ "text": ANSWER }]), &["--no-color"]);
    terminal.expect("> ");
    terminal.type_slowly("plan it\r");
    terminal.expect("# Plan");
    terminal.expect("I will **edit** the `main` function.");
    terminal.expect("| a.rs | 12 |");
    terminal.expect("> ");
    assert!(
        !terminal.screen().contains("\x1b[0;"),
        "{}",
        terminal.screen()
    );
    terminal.type_slowly("/exit\r");
    assert_eq!(terminal.wait().code(), Some(0), "{}", terminal.screen());
}
