//! `capstan audit ...`: what plugins touched, and whether the log is intact.

use std::path::Path;

use clap::{Args, Subcommand};

use super::Exit;
use super::escape;
use crate::audit::{self, AuditEvent, AuditFilter, AuditRecord};
use crate::home::Home;

/// How many records `audit show` prints unless told.
const DEFAULT_SHOWN: usize = 50;

/// The audit commands.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Show what plugins touched: files opened, requests sent or refused,
    /// environment variables read, secrets injected (most recent last).
    Show(ShowArgs),
    /// Check that the log is intact: every record's hash, the chain between
    /// them, and that nothing was cut off the end. Exits with 11 if not.
    Verify,
}

/// Which records `audit show` prints.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Only the most recent capstan run.
    #[arg(long)]
    last: bool,
    /// Only this plugin's records.
    #[arg(long, value_name = "NAME")]
    plugin: Option<String>,
    /// Only records of this agent session.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Only records of this tool call.
    #[arg(long, value_name = "ID")]
    call: Option<String>,
    /// Print the records as JSON, one per line.
    #[arg(long)]
    json: bool,
    /// How many records, the most recent ones.
    #[arg(short = 'n', value_name = "N", default_value_t = DEFAULT_SHOWN)]
    count: usize,
}

/// Runs an audit command.
pub fn run(command: AuditCommand) -> Exit {
    let log = match Home::from_env() {
        Ok(home) => home.audit_log(),
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Error;
        }
    };
    match command {
        AuditCommand::Show(args) => show(&log, &args),
        AuditCommand::Verify => verify(&log),
    }
}

fn show(log: &Path, args: &ShowArgs) -> Exit {
    let filter = AuditFilter {
        last_run: args.last,
        plugin: args.plugin.clone(),
        session: args.session.clone(),
        call: args.call.clone(),
        limit: Some(args.count),
    };
    let records = match audit::read(log, &filter) {
        Ok(records) => records,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Error;
        }
    };
    if args.json {
        for record in &records {
            match serde_json::to_string(record) {
                Ok(line) => println!("{line}"),
                Err(e) => {
                    eprintln!("error: cannot print a record as JSON: {e}");
                    return Exit::Error;
                }
            }
        }
        return Exit::Success;
    }
    if records.is_empty() && args.count > 0 {
        let narrowed = args.last || args.plugin.is_some() || args.session.is_some();
        if narrowed || args.call.is_some() {
            println!("No audit records match.");
        } else {
            println!(
                "Nothing recorded yet: no plugin has touched a file, the network, the \
                 environment or a secret ({} is empty).",
                log.display()
            );
        }
        return Exit::Success;
    }
    // A record's fields are whatever the plugin named (a path can hold a
    // newline and an escape sequence): each record stays one line, and no
    // control character reaches the terminal.
    for record in &records {
        println!("{}", escape::line(&human_line(record)));
    }
    Exit::Success
}

/// One record as a line: time, plugin, call, then what happened.
fn human_line(record: &AuditRecord) -> String {
    let what = match &record.event {
        AuditEvent::FileOpened {
            path,
            mode,
            allowed,
        } => {
            let refused = if *allowed { "" } else { " (refused)" };
            format!("file_opened {mode} {path}{refused}")
        }
        AuditEvent::HttpSent {
            method,
            url,
            status,
        } => match status {
            Some(status) => format!("http_sent {method} {url} -> {status}"),
            None => format!("http_sent {method} {url} -> no response"),
        },
        AuditEvent::HttpRefused {
            method,
            url,
            reason,
        } => format!("http_refused {method} {url}: {reason}"),
        AuditEvent::EnvRead { names } => format!("env_read {}", names.join(", ")),
        AuditEvent::SecretInjected { name, host } => format!("secret_injected {name} -> {host}"),
        AuditEvent::SocketRefused { address } => format!("socket_refused {address}"),
        AuditEvent::NameLookupRefused { name } => format!("name_lookup_refused {name}"),
        AuditEvent::RecordsDropped { dropped, limit } => format!(
            "records_dropped {dropped} more records of this call were not written (at most {limit} per call)"
        ),
        AuditEvent::PluginRefused { reason } => format!("plugin_refused {reason}"),
        AuditEvent::PluginChanged {
            change,
            source,
            user,
        } => format!("plugin_changed by {user} from {source}: {change}"),
        AuditEvent::McpToolCalled {
            tool,
            outcome,
            duration_ms,
            refused,
        } => {
            let refused = if refused.is_empty() {
                String::new()
            } else {
                format!("; refused: {}", refused.join("; "))
            };
            format!("mcp_tool_called {tool}: {outcome} after {duration_ms} ms{refused}")
        }
        AuditEvent::LspRequest {
            method,
            file,
            outcome,
            duration_ms,
        } => format!("lsp_request {method} {file}: {outcome} after {duration_ms} ms"),
        AuditEvent::McpServerState { state, detail } => {
            format!("mcp_server_state {state}: {detail}")
        }
        AuditEvent::CommandRun {
            command,
            cwd,
            write,
            net,
            sandboxed,
            ending,
            exit_code,
            duration_ms,
            refused,
        } => {
            let mut given = vec![if *write { "write" } else { "read-only" }.to_string()];
            given.extend(net.iter().map(|origin| format!("net {origin}")));
            if !sandboxed {
                given.push("UNSANDBOXED".to_string());
            }
            let ended = match exit_code {
                Some(code) => format!("{ending} {code}"),
                None => ending.clone(),
            };
            let refused = if refused.is_empty() {
                String::new()
            } else {
                format!("; refused: {}", refused.join("; "))
            };
            format!(
                "command_run `{command}` in {cwd} ({}): {ended} after {duration_ms} ms{refused}",
                given.join(", ")
            )
        }
        AuditEvent::CommandStarted {
            command,
            cwd,
            write,
            net,
            sandboxed,
            pid,
        } => {
            let mut given = vec![if *write { "write" } else { "read-only" }.to_string()];
            given.extend(net.iter().map(|origin| format!("net {origin}")));
            if !sandboxed {
                given.push("UNSANDBOXED".to_string());
            }
            format!(
                "command_started `{command}` in {cwd} ({}): pid {pid}",
                given.join(", ")
            )
        }
        AuditEvent::ToolCalled {
            tool,
            outcome,
            detail,
            duration_ms,
        } => match detail {
            Some(detail) => {
                format!("tool_called {tool}: {outcome} after {duration_ms} ms: {detail}")
            }
            None => format!("tool_called {tool}: {outcome} after {duration_ms} ms"),
        },
        AuditEvent::CallDenied { tool, by, reason } => {
            format!("call_denied {tool} by {by}: {reason}")
        }
        AuditEvent::CommandRefused { command, reason } => {
            format!("command_refused `{command}`: {reason}")
        }
        AuditEvent::HookDecision {
            event,
            decision,
            detail,
        } => match detail {
            Some(detail) => format!("hook {event} {decision}: {detail}"),
            None => format!("hook {event} {decision}"),
        },
    };
    let time = if record.time.is_empty() {
        "-"
    } else {
        &record.time
    };
    format!("{time}  {}  {}  {what}", record.plugin, record.call_id)
}

fn verify(log: &Path) -> Exit {
    let report = match audit::verify(log) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Error;
        }
    };
    let records = |n: u64| if n == 1 { "record" } else { "records" };
    match report.problem {
        None => {
            println!(
                "{}: {} {}, chain intact",
                log.display(),
                report.records,
                records(report.records)
            );
            Exit::Success
        }
        Some(problem) => {
            // Where the damage is and what is intact say the same thing:
            // records before a damaged line, or every record of a log
            // whose end is missing or replaced.
            let intact = if problem.at_end {
                format!(
                    "The {} {} before it {} intact and chained.",
                    report.records,
                    records(report.records),
                    if report.records == 1 { "is" } else { "are" }
                )
            } else {
                format!(
                    "{} intact {} {} it.",
                    report.records,
                    records(report.records),
                    if report.records == 1 {
                        "precedes"
                    } else {
                        "precede"
                    }
                )
            };
            eprintln!(
                "error: the audit log {} is damaged at {problem}\n\
                 {intact} capstan goes on appending after the last complete record and keeps \
                 reporting the damage; to start a new log, move the log and its .head file aside \
                 (keep them to see what changed).",
                log.display(),
            );
            Exit::AuditDamaged
        }
    }
}
