//! Claude Code output styles, through the real binary: a plugin's
//! `output-styles/NAME.md` is listed at install and, once chosen with
//! `--output-style`, the config's `output_style`, Claude Code's
//! `outputStyle` setting or `/output-style` in the REPL, its text ends the
//! system prompt of the model's requests (in place of the coding
//! instructions unless it keeps them); an unknown name names the styles.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use crate::support;
use support::mock_model::{Answer, MockModel, Reply};
use support::terminal::Terminal;
use support::{Env, MODEL_VARS, assert_exit, repo_root, stderr};

const RUN_TIMEOUT: Duration = Duration::from_secs(90);

/// `capstan -p hi` against a mock that answers once; returns the output
/// and the system prompt the model got.
fn ask(env: &Env, extra: &[&str]) -> (std::process::Output, Option<String>) {
    let mock = MockModel::start(vec![Reply::sse(Answer::text("Hello.").anthropic())]);
    let mut cmd = env.anthropic_session(&mock.url(), "sk-ant-mock", "claude-sonnet-4-5", "hi");
    cmd.timeout(RUN_TIMEOUT).args(extra);
    let output = cmd.output().unwrap();
    let system = mock.received().first().map(|r| r.system_text());
    (output, system)
}

const STYLE_HEADING: &str = "# Output style: ";
const CODING: &str = "# How to work";

/// The explanatory-style fixture plugin: its style is listed at install,
/// chosen by name in any case, and its text ends the system prompt in
/// place of the coding instructions; without the flag the prompt is
/// capstan's own; an unknown name is a usage error naming the styles.
#[test]
fn a_plugins_output_style_is_listed_and_ends_the_system_prompt_when_chosen() {
    let env = Env::new();
    let installed = support::install(
        &env,
        &repo_root().join("tests/fixtures/claude-plugins/explanatory-style"),
    );
    let consent = stderr(&installed);
    assert!(
        consent.contains("  output style  `Explanatory` (output-styles/explanatory.md)")
            && consent.contains("runs nothing")
            && !consent.contains("outputStyles"),
        "{consent}"
    );

    let (output, system) = ask(&env, &["--output-style", "explanatory"]);
    assert_exit(&output, 0);
    let system = system.unwrap();
    assert!(
        system.ends_with("# Output style: Explanatory\nThe user chose this output style; follow it in every answer.\n\nExplain each step.\n"),
        "{system}"
    );
    assert!(!system.contains(CODING), "{system}");

    let (output, system) = ask(&env, &[]);
    assert_exit(&output, 0);
    let system = system.unwrap();
    assert!(
        !system.contains(STYLE_HEADING) && system.contains(CODING),
        "{system}"
    );

    let (output, system) = ask(&env, &["--output-style", "Learning"]);
    assert_exit(&output, 2);
    assert!(system.is_none());
    assert!(
        stderr(&output).contains(
            "--output-style: there is no output style `Learning`; the output styles are: default, Explanatory"
        ),
        "{}",
        stderr(&output)
    );
}

/// Styles of the project's and the user's `.claude/output-styles/`:
/// Claude Code's `outputStyle` setting picks one, capstan's `output_style`
/// overrides it, a style that keeps coding instructions keeps them, and a
/// setting naming no style is a warning, not a failure.
#[test]
fn settings_choose_project_and_user_styles() {
    let env = Env::new();
    env.write(
        ".claude/output-styles/terse.md",
        "---\nname: Terse\ndescription: Short answers.\nkeep-coding-instructions: true\n---\nAnswer in one line.\n",
    );
    let user_styles = env.home.path().join(".claude/output-styles");
    std::fs::create_dir_all(&user_styles).unwrap();
    std::fs::write(
        user_styles.join("formal.md"),
        "---\nname: Formal\n---\nWrite formally.\n",
    )
    .unwrap();
    env.write(".claude/settings.json", r#"{"outputStyle": "formal"}"#);

    let (output, system) = ask(&env, &[]);
    assert_exit(&output, 0);
    let system = system.unwrap();
    assert!(
        system.contains("# Output style: Formal") && system.contains("Write formally."),
        "{system}"
    );
    assert!(!system.contains(CODING), "{system}");

    let config = env.home.path().join("config.toml");
    std::fs::write(&config, "output_style = \"terse\"\n").unwrap();
    let (output, system) = ask(&env, &[]);
    assert_exit(&output, 0);
    let system = system.unwrap();
    assert!(
        system.contains("# Output style: Terse")
            && system.contains("Answer in one line.")
            && system.contains(CODING)
            && !system.contains("Write formally."),
        "{system}"
    );

    std::fs::write(&config, "output_style = \"gone\"\n").unwrap();
    let (output, system) = ask(&env, &[]);
    assert_exit(&output, 0);
    assert!(!system.unwrap().contains(STYLE_HEADING));
    assert!(
        stderr(&output).contains(
            "`output_style` in the config: there is no output style `gone`; the output styles are: default, Terse, Formal"
        ),
        "{}",
        stderr(&output)
    );
}

/// In the REPL, `/output-style` lists the styles with the one in use
/// marked, `/output-style NAME` switches from the next prompt on, and an
/// unknown name is refused naming the styles.
#[test]
fn the_output_style_command_lists_and_switches_styles() {
    let env = Env::new();
    env.write(
        ".claude/output-styles/terse.md",
        "---\nname: Terse\ndescription: Short answers.\n---\nAnswer in one line.\n",
    );
    let mock = MockModel::start(vec![
        Reply::sse(Answer::text("First answer.").anthropic()),
        Reply::sse(Answer::text("Second answer.").anthropic()),
    ]);
    let mut cmd = env.capstan_std();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("NO_COLOR", "1")
        .env("ANTHROPIC_API_KEY", "sk-ant-mock")
        .args(["--base-url", &mock.url(), "--model", "claude-sonnet-4-5"]);
    let mut terminal = Terminal::spawn(cmd);
    terminal.expect("> ");
    terminal.type_slowly("first question\r");
    terminal.expect("First answer.");
    terminal.expect("> ");
    terminal.type_slowly("/output-style\r");
    terminal.expect("Output styles (/output-style NAME picks one):");
    terminal.expect("* default: capstan's own prompt");
    terminal.expect("  Terse: Short answers. (project)");
    terminal.type_slowly("/output-style nope\r");
    terminal.expect("there is no output style `nope`; the output styles are: default, Terse");
    terminal.type_slowly("/output-style terse\r");
    terminal.expect("output style: Terse from the next prompt on");
    terminal.type_slowly("second question\r");
    terminal.expect("Second answer.");
    terminal.expect("> ");
    terminal.type_slowly("/exit\r");
    let status = terminal.wait();
    assert_eq!(
        status.code(),
        Some(0),
        "exit status {status:?} (signal {:?}); the terminal shows:\n{}",
        status.signal(),
        terminal.screen()
    );
    let received = mock.received();
    assert_eq!(received.len(), 2, "{received:#?}");
    assert!(!received[0].system_text().contains(STYLE_HEADING));
    let second = received[1].system_text();
    assert!(
        second.contains("# Output style: Terse") && second.contains("Answer in one line."),
        "{second}"
    );
}
