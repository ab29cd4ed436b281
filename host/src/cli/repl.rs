//! The interactive session: a prompt with line editing and history, slash
//! commands, and turns that stream as they run. Ctrl-C stops the running
//! turn (every pending tool call gets an "interrupted" result); a second
//! Ctrl-C, or Ctrl-D at the prompt, exits.

use rustyline::error::ReadlineError;

use super::Exit;
use super::escape;
use super::mention::{self, Mention, MentionHelper};
use super::render::TerminalFrontend;
use super::setup::{self, Session, SessionArgs};
use super::slash;
use super::status_line::status_line;
use super::turn_keys::{self, TurnKeys};
use crate::agent::{Interrupt, TurnEnd};
use crate::policy::{Layer, Mode, Rule, RuleKind};
use crate::session::Sessions;

/// The slash commands, for `/help`.
const HELP: &str = "\
Commands:
  /help            this list
  /clear           start a new conversation (the old one stays saved)
  /cost            tokens and cost of this session
  /compact [FOCUS] replace the conversation by a summary of it (what to keep, optionally)
  /context         what fills the model's context window
  /init            have the model write an AGENTS.md for this project
  /mode [MODE]     show or set the permission mode: default, accept-edits, plan, bypass, dont-ask
  /output-style [NAME]  list the output styles, or answer in one from the next prompt on
  /model [NAME|N]  show the model and the provider's models, or switch to one
  /permissions     the permission rules in force, numbered; /permissions remove N drops one
  /rewind [N]      go back to before a prompt: its files, the conversation, or both
  /plugins         the plugins and their tools
  /mcp             the MCP servers, their state and tools
  /resume [ID]     take up another saved session of this folder (picked from a list)
  /status          model, provider, mode, workspace, session, grants, cost
  /NAME [ARGS]     run a skill (listed below; `capstan skill list` shows all)
  /exit            leave (Ctrl-D works too)
  !COMMAND         run COMMAND in the sandbox; the model sees it and its output next prompt
  @PATH            attach a workspace file to the prompt (Tab completes the path)
Keys: Ctrl-C or Esc stops a running turn (Ctrl-C twice quits); end a line with \\ to continue it.
What you type while a turn runs waits for the next prompt.";

/// Runs the interactive session.
pub async fn run(mut args: SessionArgs, verbose: bool) -> Exit {
    if args
        .resume
        .as_deref()
        .is_some_and(|id| id.trim().is_empty())
    {
        match pick_at_start(&args) {
            Ok(Some(id)) => args.resume = Some(id),
            Ok(None) => {
                eprintln!("(no session picked; nothing resumed)");
                return Exit::Success;
            }
            Err(failure) => return failure.report(),
        }
    }
    let mut session = match setup::build(&args).await {
        Ok(session) => session,
        Err(failure) => return failure.report(),
    };
    let mut frontend = TerminalFrontend::new(true, verbose);
    frontend.show_edits_in(session.workspace.clone());
    session.call_events.set(frontend.call_events());
    banner(&session, &frontend, verbose);
    let interrupt = Interrupt::new();
    super::watch_ctrl_c(interrupt.clone());

    if session.resumed {
        slash::resume::show_recap(&session);
    }
    let sandbox = session.agent.toolbox().sandbox().clone();
    let mut editor = match line_editor(&session.workspace, move || sandbox.expect_calls()) {
        Ok(editor) => editor,
        Err(e) => {
            eprintln!("error: cannot read from the terminal: {e}");
            return Exit::Error;
        }
    };
    let mut typed = Typeahead::default();
    let history = session.home.data_dir().join("history");
    let _ = editor.load_history(&history);

    let source = if session.resumed { "resume" } else { "startup" };
    if let Err(e) = session.agent.start_session(source, &mut frontend).await {
        eprintln!("error: {}", escape::message(&e.to_string()));
    }
    if let Some(prompt) = args.prompt.clone() {
        let _ = editor.add_history_entry(prompt.as_str());
        match skill_prompt(&session, &prompt).await {
            Some(Some(text)) => {
                run_turn(&mut session, &mut frontend, &interrupt, &text, &mut typed).await;
            }
            Some(None) => {}
            None => {
                attach_mentions(&mut session, &frontend, &prompt);
                run_turn(&mut session, &mut frontend, &interrupt, &prompt, &mut typed).await;
            }
        }
    }
    let mut exit = Exit::Success;
    let mut interrupted_at_prompt = false;
    loop {
        let line = match typed.queued.pop_front() {
            Some(line) => {
                // A line typed (and entered) while the last turn ran.
                eprintln!("> {line}");
                line
            }
            None => match prompt_under_status(&session, &frontend, &mut editor, &mut typed) {
                Ok(Some(line)) => line,
                Ok(None) => {
                    if interrupted_at_prompt {
                        exit = Exit::Interrupted;
                        break;
                    }
                    interrupted_at_prompt = true;
                    eprintln!("(Ctrl-C again or Ctrl-D to leave)");
                    continue;
                }
                Err(ReadlineError::Eof) => break,
                Err(e) => {
                    eprintln!("error: cannot read from the terminal: {e}");
                    break;
                }
            },
        };
        interrupted_at_prompt = false;
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(trimmed);
        if let Some(command) = trimmed.strip_prefix('!') {
            run_command(&mut session, &mut frontend, &interrupt, command, &mut typed).await;
            continue;
        }
        if let Some(prompt) = skill_prompt(&session, trimmed).await {
            if let Some(prompt) = prompt {
                run_turn(&mut session, &mut frontend, &interrupt, &prompt, &mut typed).await;
            }
            continue;
        }
        if let Some(command) = trimmed.strip_prefix('/') {
            if let Some(argument) = super::rewind::command(command) {
                if let Some(prompt) = super::rewind::run(&mut session, &mut editor, argument) {
                    typed.partial = prompt;
                }
                continue;
            }
            if let Some(focus) = compact_focus(command) {
                compact(&mut session, &mut frontend, &interrupt, focus, &mut typed).await;
                continue;
            }
            if habit_command(
                &mut session,
                &mut frontend,
                &interrupt,
                &mut editor,
                command,
                &mut typed,
            )
            .await
            {
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
        attach_mentions(&mut session, &frontend, trimmed);
        run_turn(&mut session, &mut frontend, &interrupt, trimmed, &mut typed).await;
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
        eprintln!("error: {}", escape::message(&e.to_string()));
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
    exit
}

/// The line editor: one for the whole session (the permission question
/// reads keys through [`TurnKeys`], never a second editor). A lone Esc does
/// nothing at the prompt, and never joins the next key as Alt+key: an
/// escape sequence's bytes arrive together, well within the timeout.
/// Tab completes `@path` mentions. Every other key at the prompt calls
/// `on_key` first: the user is typing the next prompt, so plugins parked
/// while the session idled are linked again while they type
/// ([`crate::sandbox::Sandbox::expect_calls`]).
fn line_editor(
    workspace: &std::path::Path,
    on_key: impl Fn() + Send + Sync + 'static,
) -> rustyline::Result<LineEditor> {
    let config = rustyline::Config::builder()
        .keyseq_timeout(Some(ESCAPE_TIMEOUT_MS))
        .completion_type(rustyline::CompletionType::List)
        .build();
    let mut editor = LineEditor::with_config(config)?;
    editor.set_helper(Some(MentionHelper::new(workspace.to_path_buf())));
    editor.bind_sequence(
        rustyline::KeyEvent(rustyline::KeyCode::Esc, rustyline::Modifiers::NONE),
        rustyline::Cmd::Noop,
    );
    editor.bind_sequence(
        rustyline::Event::Any,
        rustyline::EventHandler::Conditional(Box::new(OnKey(on_key))),
    );
    Ok(editor)
}

/// Runs its function on a key, then lets the key do what it does.
struct OnKey<F>(F);

impl<F: Fn() + Send + Sync> rustyline::ConditionalEventHandler for OnKey<F> {
    fn handle(
        &self,
        _event: &rustyline::Event,
        _n: rustyline::RepeatCount,
        _positive: bool,
        _context: &rustyline::EventContext,
    ) -> Option<rustyline::Cmd> {
        (self.0)();
        None
    }
}

/// The prompt's line editor.
pub(super) type LineEditor = rustyline::Editor<MentionHelper, rustyline::history::DefaultHistory>;

/// Shows the status line (model, mode, context used, cost), made anew
/// each time, then reads a prompt under it ([`read_prompt`]).
fn prompt_under_status(
    session: &Session,
    frontend: &TerminalFrontend,
    editor: &mut LineEditor,
    typed: &mut Typeahead,
) -> Result<Option<String>, ReadlineError> {
    let width = terminal_size::terminal_size_of(std::io::stderr())
        .map_or(80, |(terminal_size::Width(w), _)| usize::from(w));
    let style = frontend.err_style();
    eprintln!(
        "{}",
        status_line(&session.agent, style, width.saturating_sub(1))
    );
    read_prompt(editor, &std::mem::take(&mut typed.partial))
}

/// How long the prompt waits after an ESC for the rest of a key's escape
/// sequence.
const ESCAPE_TIMEOUT_MS: u16 = 40;

/// What the user typed while a turn ran: lines finished with Enter run as
/// the next prompts, in order; the unfinished rest starts the next prompt's
/// line.
#[derive(Debug, Default)]
struct Typeahead {
    queued: std::collections::VecDeque<String>,
    partial: String,
}

impl Typeahead {
    fn keep(&mut self, text: &str) {
        let text = format!("{}{text}", std::mem::take(&mut self.partial));
        let (lines, rest) = turn_keys::split_typeahead(&text);
        self.queued.extend(lines);
        self.partial = rest;
    }
}

/// Runs `work` (a turn, a compaction) with the keyboard in turn mode:
/// Ctrl-C and Esc interrupt, typing is kept for the next prompt.
async fn with_turn_keys<T>(
    frontend: &mut TerminalFrontend,
    interrupt: &Interrupt,
    typed: &mut Typeahead,
    work: impl AsyncFnOnce(&mut TerminalFrontend) -> T,
) -> T {
    frontend.attach_keys(TurnKeys::start(interrupt.clone()));
    let outcome = work(frontend).await;
    if let Some(keys) = frontend.detach_keys() {
        typed.keep(&keys.finish());
    }
    outcome
}

/// Reads one prompt, its line starting with `initial` (type-ahead); a line
/// ending in `\` continues on the next. Ctrl-C at the prompt clears the
/// line (`Ok(None)`).
fn read_prompt(editor: &mut LineEditor, initial: &str) -> Result<Option<String>, ReadlineError> {
    let mut text = String::new();
    let mut prompt = "> ";
    let mut initial = initial;
    loop {
        let read = editor.readline_with_initial(prompt, (initial, ""));
        initial = "";
        match read {
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
            Err(ReadlineError::Interrupted) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
}

async fn run_turn(
    session: &mut Session,
    frontend: &mut TerminalFrontend,
    interrupt: &Interrupt,
    prompt: &str,
    typed: &mut Typeahead,
) {
    interrupt.clear();
    let agent = &mut session.agent;
    let mcp = session.mcp.clone();
    let outcome = with_turn_keys(frontend, interrupt, typed, async |frontend| {
        // The first request waits (a bounded time) for MCP servers still
        // starting; the user typed the prompt meanwhile.
        let late = tokio::select! {
            late = mcp.wait_for_starting() => late,
            () = interrupt.raised() => Vec::new(),
        };
        for late in late {
            crate::agent::Frontend::event(frontend, crate::agent::AgentEvent::Notice(&late.notice));
            agent.add_user_context(late.for_model);
        }
        agent.run_turn(prompt, frontend, interrupt).await
    })
    .await;
    frontend.finish_line();
    let style = frontend.err_style();
    match outcome {
        Ok(report) => match report.end {
            TurnEnd::Finished(_) => {}
            TurnEnd::Interrupted => eprintln!("{}", style.yellow("interrupted")),
            TurnEnd::PromptBlocked { .. } => {}
            TurnEnd::MaxBudget => eprintln!(
                "{}",
                style.red("stopped: the model requests cost more than --max-budget-usd allows")
            ),
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

/// The commands of `cli/slash/`; whether `command` was one.
async fn habit_command(
    session: &mut Session,
    frontend: &mut TerminalFrontend,
    interrupt: &Interrupt,
    editor: &mut LineEditor,
    command: &str,
    typed: &mut Typeahead,
) -> bool {
    let (name, argument) = match command.split_once(char::is_whitespace) {
        Some((name, rest)) => (name, rest.trim()),
        None => (command, ""),
    };
    match name {
        "model" => slash::model::run(session, argument).await,
        "output-style" => slash::output_style::run(session, argument),
        "context" => slash::context::show(session),
        "status" => slash::status::show(session),
        "resume" => slash::resume::run(session, frontend, argument).await,
        "init" => {
            let confirm = |question: &str| {
                editor.readline(question).is_ok_and(|answer| {
                    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
                })
            };
            if let Some(plan) = slash::init::prepare(&session.workspace, confirm) {
                run_turn(session, frontend, interrupt, &plan.prompt, typed).await;
                plan.report();
            }
        }
        _ => return false,
    }
    true
}

/// `--resume` without an id: the user picks the session.
fn pick_at_start(args: &SessionArgs) -> Result<Option<String>, super::Failure> {
    let workspace = match &args.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(|e| {
            super::Failure::new(
                Exit::Error,
                format!("cannot tell the current folder ({e}); pass --workspace DIR"),
            )
        })?,
    };
    let home = crate::home::Home::from_env().map_err(|e| super::Failure::new(Exit::Error, e))?;
    let sessions = Sessions::for_workspace(&home, &workspace)
        .map_err(|e| super::Failure::new(Exit::Usage, e))?;
    super::session_picker::pick(&sessions, None)
        .map_err(|why| super::Failure::new(Exit::Usage, why))
}

/// Attaches the files `prompt` mentions (`@path`) to it, saying which,
/// and why any could not be.
fn attach_mentions(session: &mut Session, frontend: &TerminalFrontend, prompt: &str) {
    if !prompt.contains('@') {
        return;
    }
    let style = frontend.err_style();
    for mention in mention::mentions(prompt, &session.workspace, session.agent.policy()) {
        match mention {
            Mention::Attached { context, shown } => {
                eprintln!("{}", style.dim(&escape::line(&shown)));
                session.agent.add_user_context(context);
            }
            Mention::Refused(why) => eprintln!("{}", style.yellow(&escape::line(&why))),
        }
    }
}

/// `!command`: runs it in the sandbox with the keyboard in turn mode
/// (Ctrl-C and Esc kill it).
async fn run_command(
    session: &mut Session,
    frontend: &mut TerminalFrontend,
    interrupt: &Interrupt,
    command: &str,
    typed: &mut Typeahead,
) {
    interrupt.clear();
    with_turn_keys(frontend, interrupt, typed, async |frontend| {
        session.agent.note_outside_checkpoint_changes(frontend);
        super::bang::run(session, command, interrupt).await;
        // What it changed belongs to the last prompt's checkpoint, so
        // `/rewind` can undo it.
        session.agent.record_checkpoint_changes(frontend);
    })
    .await;
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
    typed: &mut Typeahead,
) {
    interrupt.clear();
    let focus = (!focus.is_empty()).then_some(focus);
    let agent = &mut session.agent;
    let outcome = with_turn_keys(frontend, interrupt, typed, async |frontend| {
        agent.compact(focus, frontend, interrupt).await
    })
    .await;
    frontend.finish_line();
    if let Err(error) = outcome {
        eprintln!("{}", frontend.err_style().red(&format!("error: {error}")));
    }
    interrupt.clear();
}

/// The built-in slash commands; a skill cannot take their names.
const BUILTIN_COMMANDS: &[&str] = &[
    "help",
    "?",
    "exit",
    "quit",
    "q",
    "cost",
    "clear",
    "mode",
    "permissions",
    "plugins",
    "model",
    "context",
    "status",
    "init",
    "resume",
    "output-style",
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
    if let crate::skills::Lookup::Missing = skills.set().lookup(name) {
        return None;
    }
    let loaded = session
        .agent
        .toolbox()
        .invoke_skill(name, arguments, session.agent.session_id())
        .await;
    Some(match loaded {
        Ok(text) => Some(text),
        Err(message) => {
            eprintln!("error: {}", escape::message(&message));
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

/// What to say about `/name` that is neither a built-in command nor a
/// skill: the closest few of both, never the whole list.
fn unknown_command(session: &Session, name: &str) -> String {
    let skills: Vec<String> = session
        .agent
        .toolbox()
        .skills()
        .map(|skills| {
            skills
                .user_invocable()
                .into_iter()
                .map(|(name, _, _)| name)
                .collect()
        })
        .unwrap_or_default();
    let candidates = BUILTIN_COMMANDS
        .iter()
        .copied()
        .filter(|c| c.len() > 1)
        .chain(skills.iter().map(String::as_str));
    let close = crate::skills::names::closest(name, candidates);
    if close.is_empty() {
        format!("unknown command /{name}; /help lists them")
    } else {
        let close: Vec<String> = close.iter().map(|c| format!("/{c}")).collect();
        format!(
            "unknown command /{name}; did you mean {}? (/help lists them all)",
            close.join(", ")
        )
    }
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
                eprintln!("error: {}", escape::message(&e.to_string()));
            }
            match session.agent.clear(Some(transcript)) {
                Ok(()) => {
                    crate::logging::name_session(&id);
                    eprintln!("new conversation (session {id})");
                }
                Err(e) => eprintln!("error: {}", escape::message(&e.to_string())),
            }
            if let Err(e) = session.agent.start_session("clear", frontend).await {
                eprintln!("error: {}", escape::message(&e.to_string()));
            }
        }
        Err(e) => eprintln!("error: {}", escape::message(&e.to_string())),
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
                    Err(e) => eprintln!("error: {}", escape::message(&e.to_string())),
                }
            }
        }
        "permissions" => permissions(session, argument),
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
                for (tool, why) in session.agent.toolbox().withheld_tools() {
                    if tool.split('.').next() == Some(plugin) {
                        eprintln!(
                            "  {:12} {:9} {}",
                            escape::line(&tool),
                            "off",
                            escape::line(&why)
                        );
                    }
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
        "mcp" => {
            let lines = session.mcp.summary();
            if lines.is_empty() {
                eprintln!(
                    "No MCP servers. Add one with `capstan mcp add NAME URL` or `capstan mcp add NAME -- COMMAND ARGS...`."
                );
            }
            for line in lines {
                eprintln!("{}", escape::line(&line));
            }
        }
        other => eprintln!("{}", escape::message(&unknown_command(session, other))),
    }
    Flow::Continue
}

/// `/permissions`: the rules in force, numbered, with where each comes
/// from; `/permissions remove N` stops applying rule N and, for a rule
/// saved by "always allow" or written in the user config, removes it from
/// its file.
fn permissions(session: &mut Session, argument: &str) {
    let rules: Vec<(RuleKind, Rule, Layer)> = session
        .agent
        .policy()
        .rules()
        .map(|(kind, rule, layer)| (*kind, rule.clone(), *layer))
        .collect();
    if argument.is_empty() {
        eprintln!("permission mode: {}", session.agent.policy().mode());
        if rules.is_empty() {
            eprintln!("no rules: the mode decides (/mode to change it)");
            return;
        }
        for (n, (kind, rule, layer)) in rules.iter().enumerate() {
            let from = match rule_file(session, *layer) {
                Some(path) => format!("{layer}, {}", path.display()),
                None => layer.to_string(),
            };
            eprintln!("  {:>2}. {kind:5} {rule}   ({from})", n + 1);
        }
        eprintln!("/permissions remove N drops rule N");
        return;
    }
    let chosen = argument
        .strip_prefix("remove")
        .map(str::trim)
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| rules.get(i));
    let Some((kind, rule, layer)) = chosen else {
        eprintln!(
            "usage: /permissions (list the rules) or /permissions remove N (N from the list, 1 to {})",
            rules.len()
        );
        return;
    };
    match layer {
        Layer::Project => {
            eprintln!(
                "`{kind} {rule}` is in the project's .capstan/config.toml; edit that file to remove it"
            );
            return;
        }
        Layer::User | Layer::ProjectLocal => {
            let Some(path) = rule_file(session, *layer) else {
                return;
            };
            match crate::config::remove_rule(&path, *kind, rule) {
                Ok(_) => eprintln!("removed `{kind} {rule}` from {}", path.display()),
                Err(e) => {
                    eprintln!("error: {}", escape::message(&e.to_string()));
                    return;
                }
            }
        }
        Layer::CommandLine | Layer::Session => {}
    }
    session.agent.remove_rule(*kind, rule, *layer);
    eprintln!("`{kind} {rule}` no longer applies in this session");
}

/// The settings file a rule of `layer` is kept in, if it has one.
fn rule_file(session: &Session, layer: Layer) -> Option<std::path::PathBuf> {
    match layer {
        Layer::User => Some(session.home.config_file()),
        Layer::ProjectLocal => Some(crate::config::local_config_file(
            &session.home,
            &session.workspace,
        )),
        Layer::Project => Some(crate::config::project_config_file(&session.workspace)),
        Layer::CommandLine | Layer::Session => None,
    }
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
