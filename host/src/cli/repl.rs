//! The interactive session: a prompt with line editing and history, slash
//! commands, and turns that stream as they run. Ctrl-C stops the running
//! turn (every pending tool call gets an "interrupted" result); a second
//! Ctrl-C, or Ctrl-D at the prompt, exits.

use rustyline::error::ReadlineError;

use super::Exit;
use super::escape;
use super::render::TerminalFrontend;
use super::setup::{self, Session, SessionArgs};
use crate::agent::{Interrupt, TurnEnd};
use crate::policy::Mode;
use crate::session::Sessions;

/// The slash commands, for `/help`.
const HELP: &str = "\
Commands:
  /help            this list
  /clear           start a new conversation (the old one stays saved)
  /cost            tokens and cost of this session
  /compact [FOCUS] replace the conversation by a summary of it (what to keep, optionally)
  /mode [MODE]     show or set the permission mode: default, accept-edits, plan, bypass
  /plugins         the plugins and their tools
  /NAME [ARGS]     run a skill (listed below; `capstan skill list` shows all)
  /exit            leave (Ctrl-D works too)
Keys: Ctrl-C stops a running turn (twice to quit); end a line with \\ to continue it.";

/// Runs the interactive session.
pub async fn run(args: SessionArgs, verbose: bool) -> Exit {
    let mut session = match setup::build(&args).await {
        Ok(session) => session,
        Err(error) => {
            eprintln!("error: {}", error.message);
            return error.exit;
        }
    };
    let mut frontend = TerminalFrontend::new(true, verbose);
    banner(&session, &frontend, verbose);
    let interrupt = Interrupt::new();
    super::watch_ctrl_c(interrupt.clone());

    let mut editor = match rustyline::DefaultEditor::new() {
        Ok(editor) => editor,
        Err(e) => {
            eprintln!("error: cannot read from the terminal: {e}");
            return Exit::Error;
        }
    };
    let history = session.home.data_dir().join("history");
    let _ = editor.load_history(&history);

    let source = if session.resumed { "resume" } else { "startup" };
    if let Err(e) = session.agent.start_session(source, &mut frontend).await {
        eprintln!("error: {e}");
    }
    if let Some(prompt) = args.prompt.clone() {
        let _ = editor.add_history_entry(prompt.as_str());
        match skill_prompt(&session, &prompt).await {
            Some(Some(text)) => run_turn(&mut session, &mut frontend, &interrupt, &text).await,
            Some(None) => {}
            None => run_turn(&mut session, &mut frontend, &interrupt, &prompt).await,
        }
    }
    loop {
        let line = match read_prompt(&mut editor) {
            Ok(Some(line)) => line,
            Ok(None) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("error: cannot read from the terminal: {e}");
                break;
            }
        };
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(trimmed);
        if let Some(prompt) = skill_prompt(&session, trimmed).await {
            if let Some(prompt) = prompt {
                run_turn(&mut session, &mut frontend, &interrupt, &prompt).await;
            }
            continue;
        }
        if let Some(command) = trimmed.strip_prefix('/') {
            if let Some(focus) = compact_focus(command) {
                compact(&mut session, &mut frontend, &interrupt, focus).await;
                continue;
            }
            match slash_command(&mut session, command) {
                Flow::Continue => continue,
                Flow::Exit => break,
                Flow::Clear => {
                    clear(&mut session, &mut frontend).await;
                    continue;
                }
            }
        }
        run_turn(&mut session, &mut frontend, &interrupt, trimmed).await;
    }
    if let Some(parent) = history.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let _ = editor.save_history(&history);
    if let Err(e) = session
        .agent
        .end_session("prompt_input_exit", &mut frontend)
        .await
    {
        eprintln!("error: {e}");
        return Exit::Error;
    }
    if let Some(id) = session.agent.session_id() {
        eprintln!(
            "{}",
            frontend.err_style().dim(&format!(
                "session {id} saved; resume it with capstan --resume {id}"
            ))
        );
    }
    Exit::Success
}

/// Reads one prompt; a line ending in `\` continues on the next. Ctrl-C at
/// the prompt clears the line (`Ok(None)`).
fn read_prompt(editor: &mut rustyline::DefaultEditor) -> Result<Option<String>, ReadlineError> {
    let mut text = String::new();
    let mut prompt = "> ";
    loop {
        match editor.readline(prompt) {
            Ok(line) => {
                if let Some(head) = line.strip_suffix('\\') {
                    text.push_str(head);
                    text.push('\n');
                    prompt = ". ";
                    continue;
                }
                text.push_str(&line);
                return Ok(Some(text));
            }
            Err(ReadlineError::Interrupted) => {
                eprintln!("(Ctrl-D or /exit to leave)");
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
    }
}

async fn run_turn(
    session: &mut Session,
    frontend: &mut TerminalFrontend,
    interrupt: &Interrupt,
    prompt: &str,
) {
    interrupt.clear();
    let outcome = session.agent.run_turn(prompt, frontend, interrupt).await;
    frontend.finish_line();
    let style = frontend.err_style();
    match outcome {
        Ok(report) => match report.end {
            TurnEnd::Finished(_) => {}
            TurnEnd::Interrupted => eprintln!("{}", style.yellow("interrupted")),
            TurnEnd::PromptBlocked { .. } => {}
            TurnEnd::MaxTurns(n) => eprintln!(
                "{}",
                style.red(&format!(
                    "stopped after {n} model requests without finishing; say how to go on, or raise --max-turns"
                ))
            ),
        },
        Err(error) => eprintln!("{}", style.red(&format!("error: {error}"))),
    }
    interrupt.clear();
}

/// The focus of a `/compact [FOCUS]` command (empty when none), or `None`
/// for another command.
fn compact_focus(command: &str) -> Option<&str> {
    let rest = command.strip_prefix("compact")?;
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then(|| rest.trim())
}

/// `/compact`: the model summarizes the conversation, which goes on from
/// the summary.
async fn compact(
    session: &mut Session,
    frontend: &mut TerminalFrontend,
    interrupt: &Interrupt,
    focus: &str,
) {
    interrupt.clear();
    let focus = (!focus.is_empty()).then_some(focus);
    let outcome = session.agent.compact(focus, frontend, interrupt).await;
    frontend.finish_line();
    if let Err(error) = outcome {
        eprintln!("{}", frontend.err_style().red(&format!("error: {error}")));
    }
    interrupt.clear();
}

/// The built-in slash commands; a skill cannot take their names.
const BUILTIN_COMMANDS: &[&str] = &[
    "help", "?", "exit", "quit", "q", "cost", "clear", "mode", "plugins",
];

/// For `/name arguments` naming a skill the user can run: the skill's
/// text as the prompt (`Some(Some(..))`), or `Some(None)` after showing why
/// it cannot run. `None` when the line is not a skill's invocation.
async fn skill_prompt(session: &Session, line: &str) -> Option<Option<String>> {
    let (name, arguments) = crate::skills::session::parse_invocation(line)?;
    if BUILTIN_COMMANDS.contains(&name) {
        return None;
    }
    let skills = session.agent.toolbox().skills()?;
    skills.set().get(name)?;
    let loaded = session
        .agent
        .toolbox()
        .invoke_skill(name, arguments, session.agent.session_id())
        .await;
    Some(match loaded {
        Ok(text) => Some(text),
        Err(message) => {
            eprintln!("error: {message}");
            None
        }
    })
}

/// The skills the user can run, for `/help`.
fn skills_help(session: &Session) -> String {
    let Some(skills) = session.agent.toolbox().skills() else {
        return String::new();
    };
    let runnable = skills.user_invocable();
    if runnable.is_empty() {
        return String::new();
    }
    let mut text = String::from("Skills:\n");
    for (name, hint, description) in runnable {
        let usage = match hint {
            Some(hint) => format!("/{name} {hint}"),
            None => format!("/{name}"),
        };
        let first: String = description.chars().take(70).collect();
        let (usage, first) = (escape::line(&usage), escape::line(&first));
        text.push_str(&format!("  {usage:16} {first}\n"));
    }
    text
}

enum Flow {
    Continue,
    Exit,
    Clear,
}

/// `/clear`: ends this conversation (SessionEnd) and starts a new one with
/// its own transcript (SessionStart).
async fn clear(session: &mut Session, frontend: &mut TerminalFrontend) {
    let created = Sessions::for_workspace(&session.home, &session.workspace).and_then(|sessions| {
        sessions.create(&session.agent.config().model, session.agent.provider_name())
    });
    match created {
        Ok(transcript) => {
            let id = transcript.id().to_string();
            if let Err(e) = session.agent.fire_session_end("clear", frontend).await {
                eprintln!("error: {e}");
            }
            match session.agent.clear(Some(transcript)) {
                Ok(()) => eprintln!("new conversation (session {id})"),
                Err(e) => eprintln!("error: {e}"),
            }
            if let Err(e) = session.agent.start_session("clear", frontend).await {
                eprintln!("error: {e}");
            }
        }
        Err(e) => eprintln!("error: {e}"),
    }
}

fn slash_command(session: &mut Session, command: &str) -> Flow {
    let (name, argument) = match command.split_once(char::is_whitespace) {
        Some((name, rest)) => (name, rest.trim()),
        None => (command, ""),
    };
    match name {
        "help" | "?" => eprintln!("{HELP}\n{}", skills_help(session)),
        "exit" | "quit" | "q" => return Flow::Exit,
        "cost" => eprintln!("{}", session.agent.cost().report()),
        "clear" => return Flow::Clear,
        "mode" => {
            if argument.is_empty() {
                let current = session.agent.policy().mode();
                for mode in Mode::ALL {
                    let mark = if mode == current { "*" } else { " " };
                    eprintln!("{mark} {mode:13} {}", mode.describe());
                }
            } else {
                match argument.parse::<Mode>() {
                    Ok(mode) => {
                        session.agent.set_mode(mode);
                        eprintln!("permission mode: {mode}");
                    }
                    Err(e) => eprintln!("error: {e}"),
                }
            }
        }
        "plugins" => {
            for (plugin, sha) in session.agent.toolbox().plugins() {
                eprintln!("{plugin}  sha256 {}", &sha[..sha.len().min(16)]);
                for tool in session
                    .agent
                    .toolbox()
                    .tools()
                    .iter()
                    .filter(|t| t.name.split('.').next() == Some(plugin))
                {
                    let mode = if tool.spec.read_only {
                        "read-only"
                    } else {
                        "writes"
                    };
                    let first = tool.spec.description.lines().next().unwrap_or_default();
                    eprintln!(
                        "  {:12} {mode:9} {}",
                        escape::line(&tool.name),
                        escape::line(first)
                    );
                }
            }
            for hook in session.agent.hooks().names() {
                eprintln!("{}  hooks", escape::line(hook));
            }
            for unavailable in session.agent.toolbox().unavailable().all() {
                eprintln!(
                    "{}  unavailable: {}",
                    escape::line(&unavailable.plugin),
                    escape::line(&unavailable.reason)
                );
            }
        }
        other => eprintln!("unknown command /{other}; /help lists them"),
    }
    Flow::Continue
}

fn banner(session: &Session, frontend: &TerminalFrontend, verbose: bool) {
    let style = frontend.err_style();
    let id = session.agent.session_id().unwrap_or("-");
    eprintln!(
        "{} {} · {}",
        style.bold("capstan"),
        env!("CARGO_PKG_VERSION"),
        session.model_label
    );
    eprintln!(
        "{}",
        style.dim(&format!(
            "workspace {} · mode {} · {} session {id}",
            session.workspace.display(),
            session.agent.policy().mode(),
            if session.resumed { "resumed" } else { "new" },
        ))
    );
    for notice in &session.notices {
        eprintln!("{}", style.yellow(notice));
    }
    if verbose {
        for file in &session.settings_files {
            eprintln!("{}", style.dim(&format!("settings {file}")));
        }
        for file in &session.instruction_files {
            eprintln!("{}", style.dim(&format!("instructions {}", file.display())));
        }
        eprintln!(
            "{}",
            style.dim(&format!("ready in {:.1} ms", session.setup_ms))
        );
    }
    eprintln!(
        "{}",
        style.dim("/help for commands · Ctrl-C interrupts · Ctrl-D exits")
    );
}
