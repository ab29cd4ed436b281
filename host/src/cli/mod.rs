//! The `capstan` command line: agent sessions (interactive, or one task
//! with `-p`), tools called directly, and saved sessions.

mod audit;
mod bang;
mod change_preview;
mod claude_flags;
mod doctor;
mod driver_init;
mod driver_questions;
mod driver_requests;
pub use crate::escape;
mod exec;
mod exit;
mod headless;
mod hook_trust;
pub mod live;
mod markdown;
mod mcp;
mod mcp_servers;
mod mention;
mod missing_guards;
mod new;
mod partial_messages;
mod plugin;
mod plugin_marketplace;
mod print;
pub mod provider;
pub mod render;
mod repl;
mod rewind;
mod sdk_flags;
mod session_list;
mod session_picker;
mod session_show;
pub mod setup;
mod skill;
mod slash;
mod status_line;
mod stream_input;
mod termination;
mod tool;
mod tool_mcp;
pub mod turn_keys;

use std::ffi::OsString;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Instant;

use clap::{CommandFactory, Parser, Subcommand};

pub use exit::{Exit, Failure};

use crate::agent::Interrupt;

/// capstan: a coding agent whose tools run as sandboxed WebAssembly components.
///
/// Every tool call runs in a fresh WebAssembly sandbox that can reach only
/// what it was granted: by default the working folder, read-only, with
/// writes after the user says yes.
#[derive(Debug, Parser)]
#[command(
    name = "capstan",
    version,
    about,
    long_about = None,
    args_conflicts_with_subcommands = true,
    after_help = concat!("Examples:
  capstan                                  interactive session in this folder
  capstan -p \"rename foo to bar in src/\"   one task, then exit
  echo \"summarise README.md\" | capstan -p
  capstan --continue                       resume the latest session here
  capstan --resume                         pick a session of this folder to resume
  capstan --model scripted:docs/demo/script.json   offline demo, no API key

Models: ANTHROPIC_API_KEY selects Anthropic; OPENAI_BASE_URL (e.g.
http://127.0.0.1:8080/v1 for llama.cpp, vLLM or Ollama) or OPENAI_API_KEY an
OpenAI-compatible server. Settings: ~/.config/capstan/config.toml, and the
project's .capstan/config.toml (which can only narrow permissions).

", exit::exit_codes_help!()),
)]
pub struct Cli {
    /// Show plugin log lines, cache use, permission decisions and timings,
    /// and capstan's log on stderr at debug level (-vv: trace); the log
    /// file is raised to the same level.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    /// No colours and no rendered Markdown: plain text, as with NO_COLOR.
    #[arg(long, global = true)]
    no_color: bool,

    #[command(flatten)]
    session: setup::SessionArgs,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List and call tools.
    #[command(subcommand)]
    Tool(tool::ToolCommand),
    /// Saved sessions.
    #[command(subcommand)]
    Session(session_list::SessionCommand),
    /// Install plugins and manage what they may touch.
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
    /// What plugins touched: show and verify the audit log.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Skills: list them (with where each comes from) and show one.
    #[command(subcommand)]
    Skill(skill::SkillCommand),
    /// Start a plugin project: a tool, hook or skill in Rust, Python or JavaScript.
    New(new::NewArgs),
    /// Serve capstan's sandboxed tools to other agents over MCP.
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// Run a command in the OS sandbox (workspace read-only unless
    /// --allow-write, no network unless --allow-net); exits with its code.
    Exec(exec::ExecArgs),
    /// What a bug report needs: versions, folders, the model server,
    /// toolchains, kernel sandbox support, the compile cache, plugins'
    /// integrity, MCP servers and logs; and what to fix.
    Doctor(doctor::DoctorArgs),
}

/// When the process started, for "ready in" figures.
static PROCESS_START: OnceLock<Instant> = OnceLock::new();

/// Runs the command line and returns the process's exit code.
pub fn main() -> ExitCode {
    PROCESS_START.get_or_init(Instant::now);
    end_quietly_on_closed_output();
    let parsing = Instant::now();
    let args = global_flags_after_subcommand(std::env::args_os().collect());
    if args.get(1).is_some_and(|name| name == "exec")
        && let Ok(only) = ExecOnly::try_parse_from(&args[1..])
    {
        crate::startup::record("arguments", "", parsing);
        if only.no_color {
            render::disable_color();
        }
        return run_exec(only.exec, only.verbose > 1);
    }
    let parsed = Cli::try_parse_from(args);
    crate::startup::record("arguments", "", parsing);
    let cli = match parsed {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return match err.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    Exit::Success
                }
                _ => Exit::Usage,
            }
            .into();
        }
    };
    // A command in the OS sandbox runs on this thread: the sandbox ties
    // the command's life to the thread that starts it. It writes no log,
    // and watches the signals itself (Ctrl-C too).
    let breakdown = cli.verbose > 1;
    let cli = match cli.command {
        Some(Command::Exec(args)) => return run_exec(args, breakdown),
        _ => cli,
    };
    termination::watch_signals();
    let building = Instant::now();
    // Whatever runs plugins gets two worker threads: each call runs on a
    // task of its own, and one stuck in a blocking file operation holds a
    // thread while the other ends the call at its deadline (and notices
    // Ctrl-C). Other commands need one thread.
    let runtime = match &cli.command {
        Some(Command::Tool(_) | Command::Skill(_) | Command::Mcp(_)) | None => {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
        }
        Some(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
    };
    crate::startup::record("async runtime", "", building);
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return Exit::Error.into();
        }
    };
    let interactive = cli.command.is_none()
        && !cli.session.print
        && cli.session.input_format == setup::InputFormat::Text
        && std::io::stdin().is_terminal()
        && std::io::stderr().is_terminal();
    let logging = Instant::now();
    let log = crate::logging::init(&crate::logging::LogOptions {
        verbosity: cli.verbose,
        // The interactive session's screen is stderr: its log goes to the
        // file alone.
        // With stream-json output `--verbose` is Claude Code's flag, which
        // its SDKs always pass and which leaves stderr quiet: there the
        // log reaches stderr with -vv.
        stderr: !interactive && (cli.verbose > 1 || (cli.verbose > 0 && !stream_json_print(&cli))),
        file: log_file(&cli.command),
    });
    crate::startup::record("logging", "", logging);
    tracing::debug!(
        version = env!("CARGO_PKG_VERSION"),
        args = std::env::args().count(),
        "capstan started"
    );
    let verbose = cli.verbose > 0;
    if cli.no_color {
        render::disable_color();
    }
    let exit = runtime.block_on(async move {
        match cli.command {
            Some(Command::Tool(command)) => tool::run(command, verbose).await,
            Some(Command::Session(command)) => session_list::run(command),
            Some(Command::Plugin(command)) => plugin::run(command, verbose).await,
            Some(Command::Audit(command)) => audit::run(command),
            Some(Command::Skill(command)) => skill::run(command).await,
            Some(Command::New(args)) => new::run_new(args),
            Some(Command::Mcp(command)) => mcp::run(command, verbose).await,
            Some(Command::Doctor(args)) => doctor::run(args).await,
            // Run above, before the runtime was built.
            Some(Command::Exec(_)) => Exit::Usage,
            None => {
                if interactive {
                    repl::run(cli.session, verbose).await
                } else {
                    // Without a terminal there is nobody to ask: run the
                    // prompt (or stdin) as one task.
                    print::run(cli.session, verbose).await
                }
            }
        }
    });
    // Leave at once: a tool still running after an interrupt must not keep
    // the process alive.
    runtime.shutdown_background();
    drop(log);
    termination::remove_temporary_area();
    // The interactive session's screen is gone by now; its breakdown is in
    // its log (each phase at debug level).
    if breakdown && !interactive {
        print_breakdown();
    }
    exit.into()
}

/// `capstan exec` alone, parsed without building the rest of the command
/// tree (building it all costs a fraction of a millisecond, which a
/// command as short as `true` shows). What it does not take (help, an
/// error) goes to the whole parser, so the user sees the same either way.
#[derive(Debug, Parser)]
#[command(name = "exec")]
struct ExecOnly {
    /// As [`Cli`]'s.
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
    /// As [`Cli`]'s.
    #[arg(long)]
    no_color: bool,
    #[command(flatten)]
    exec: exec::ExecArgs,
}

/// Runs `capstan exec` (on this thread: the sandbox ties the command's life
/// to the thread that starts it); `breakdown` prints the start-up phases.
fn run_exec(args: exec::ExecArgs, breakdown: bool) -> ExitCode {
    let exit = exec::main(args);
    termination::remove_temporary_area();
    if breakdown {
        print_breakdown();
    }
    exit
}

/// Prints how long each start-up phase took (`-vv`), on stderr.
fn print_breakdown() {
    eprint!("{}", crate::startup::report(since_start()));
}

/// The log file of a command: a session's own, or one per command.
fn log_file(command: &Option<Command>) -> crate::logging::LogFile {
    use crate::logging::LogFile;
    let name = match command {
        None => return LogFile::Session,
        Some(Command::Exec(_)) => return LogFile::None,
        Some(Command::Tool(_)) => "tool",
        Some(Command::Session(_)) => "session",
        Some(Command::Plugin(_)) => "plugin",
        Some(Command::Audit(_)) => "audit",
        Some(Command::Skill(_)) => "skill",
        Some(Command::New(_)) => "new",
        Some(Command::Mcp(_)) => "mcp",
        Some(Command::Doctor(_)) => "doctor",
    };
    LogFile::Named(format!("capstan-{name}"))
}

/// Whether `cli` runs print mode with `--output-format stream-json`.
fn stream_json_print(cli: &Cli) -> bool {
    cli.command.is_none() && cli.session.output_format == setup::OutputFormat::StreamJson
}

/// Moves the global flags `-v`/`--verbose` and `--no-color` given before a
/// subcommand (`capstan -v tool call ...`) to just after the subcommand's
/// name, where clap takes them. Before a subcommand clap would count them
/// as session options, which cannot be combined with a subcommand.
/// Anything else is left as it is.
fn global_flags_after_subcommand(mut args: Vec<OsString>) -> Vec<OsString> {
    let leading = args
        .iter()
        .skip(1)
        .take_while(|arg| {
            *arg == "--verbose"
                || *arg == "--no-color"
                || arg
                    .to_str()
                    .and_then(|a| a.strip_prefix('-'))
                    .is_some_and(|vs| !vs.is_empty() && vs.bytes().all(|b| b == b'v'))
        })
        .count();
    // Building clap's whole command tree costs a fraction of a
    // millisecond: only when there are flags to move.
    if leading == 0 {
        return args;
    }
    let names_subcommand = args
        .get(1 + leading)
        .and_then(|arg| arg.to_str())
        .is_some_and(|name| Cli::command().find_subcommand(name).is_some());
    if names_subcommand {
        args[1..=1 + leading].rotate_left(leading);
    }
    args
}

/// Makes a write to a closed pipe (`capstan plugin info x | head -3`) end the
/// process quietly with [`Exit::OutputClosed`], as SIGPIPE ends other
/// command-line programs, instead of reporting the failed `println!` as an
/// internal error. Every other panic keeps the standard report.
fn end_quietly_on_closed_output() {
    let standard = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if payload.starts_with("failed printing to std") && payload.contains("Broken pipe") {
            std::process::exit(i32::from(Exit::OutputClosed as u8));
        }
        standard(info);
    }));
}

/// Raises `interrupt` on Ctrl-C; a second Ctrl-C before the turn has wound
/// down exits at once (the transcript is already written up to that point).
fn watch_ctrl_c(interrupt: Interrupt) {
    tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            if interrupt.is_raised() {
                live::notice("capstan: stopped");
                termination::exit_now(i32::from(Exit::Interrupted as u8));
            }
            live::notice("capstan: interrupting… (Ctrl-C again to quit)");
            interrupt.raise();
        }
    });
}

/// Time since the process started (or since first asked, in tests).
pub(crate) fn since_start() -> std::time::Duration {
    PROCESS_START.get_or_init(Instant::now).elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(args: &[&str]) -> Vec<String> {
        global_flags_after_subcommand(args.iter().map(OsString::from).collect())
            .into_iter()
            .map(|arg| arg.into_string().unwrap())
            .collect()
    }

    #[test]
    fn exec_alone_is_parsed_as_the_whole_parser_parses_it() {
        let cases: [&[&str]; 5] = [
            &["capstan", "exec", "--", "true"],
            &[
                "capstan",
                "-vv",
                "exec",
                "--allow-write",
                "--",
                "make",
                "-v",
            ],
            &[
                "capstan",
                "exec",
                "--no-color",
                "--json",
                "--timeout",
                "5s",
                "--",
                "ls",
            ],
            &[
                "capstan",
                "exec",
                "--allow-net",
                "https://a.example",
                "--",
                "curl",
                "--",
                "x",
            ],
            &[
                "capstan",
                "--verbose",
                "exec",
                "--workspace",
                "/tmp",
                "--",
                "pwd",
            ],
        ];
        for args in cases {
            let args = global_flags_after_subcommand(args.iter().map(OsString::from).collect());
            let whole = Cli::try_parse_from(&args).unwrap();
            let alone = ExecOnly::try_parse_from(&args[1..]).unwrap();
            let Some(Command::Exec(exec)) = whole.command else {
                panic!("not exec: {args:?}");
            };
            assert_eq!(format!("{exec:?}"), format!("{:?}", alone.exec), "{args:?}");
            assert_eq!(whole.verbose, alone.verbose, "{args:?}");
            assert_eq!(whole.no_color, alone.no_color, "{args:?}");
        }
        // Help and mistakes go to the whole parser.
        for args in [
            &["exec", "--help"][..],
            &["exec"],
            &["exec", "--bogus", "--", "x"],
        ] {
            assert!(ExecOnly::try_parse_from(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn verbose_before_a_subcommand_moves_after_its_name() {
        assert_eq!(
            moved(&["capstan", "-v", "tool", "call", "fs.read", "{}"]),
            ["capstan", "tool", "-v", "call", "fs.read", "{}"]
        );
        assert_eq!(
            moved(&["capstan", "--verbose", "-v", "plugin", "list"]),
            ["capstan", "plugin", "--verbose", "-v", "list"]
        );
        assert_eq!(
            moved(&["capstan", "--no-color", "-v", "session", "list"]),
            ["capstan", "session", "--no-color", "-v", "list"]
        );
        assert_eq!(
            moved(&["capstan", "-vv", "plugin", "list"]),
            ["capstan", "plugin", "-vv", "list"]
        );
        // A prompt, a session flag first, or nothing after: unchanged.
        for args in [
            &["capstan", "-v", "rename foo"][..],
            &["capstan", "-p", "-v", "tool"],
            &["capstan", "-v"],
            &["capstan", "tool", "-v", "list"],
        ] {
            assert_eq!(moved(args), args);
        }
    }
}
