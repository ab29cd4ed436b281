//! `capstan exec`: run a native command in the same OS sandbox the model's
//! commands get, from the shell. The command's exit code is capstan's.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::json;

use super::Exit;
use crate::audit::{AuditLog, AuditScope};
use crate::exec::{Cancel, CommandLine, Ending, ExecGrants, ExecOutcome, ExecRequest, MAX_TIMEOUT};
use crate::grants::fs::OwnFolders;
use crate::grants::net::NetGrant;
use crate::home::Home;
use crate::quantity::parse_duration;

/// Run a command in the sandbox: the workspace read-only (writable with
/// --allow-write), no network but the origins allowed, a scrubbed
/// environment; every process it starts ends with it.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  capstan exec -- cargo tree
  capstan exec --allow-write -- make test
  capstan exec --allow-net https://index.crates.io --allow-write -- cargo fetch
  capstan exec --json -- ls -la

Settings: [exec] in ~/.config/capstan/config.toml (read, write, net, env,
timeout, limits); see docs/exec.md.")]
pub struct ExecArgs {
    /// Let the command change files in the workspace (.git and the other
    /// protected paths stay read-only).
    #[arg(long)]
    allow_write: bool,
    /// Let the command reach ORIGIN (https://host[:port]) through capstan's
    /// proxy; repeat for more.
    #[arg(long = "allow-net", value_name = "ORIGIN")]
    allow_net: Vec<String>,
    /// How long the command may run (30s, 5m; default 2m, at most 10m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// The workspace (the current folder by default).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print the outcome as one JSON object (exit code, capped output,
    /// duration, what was missing) instead of streaming the output.
    #[arg(long)]
    json: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// Runs `capstan exec`.
pub fn main(args: ExecArgs) -> ExitCode {
    match run(args) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("error: {error:#}");
            Exit::Error.into()
        }
    }
}

fn run(args: ExecArgs) -> anyhow::Result<u8> {
    // SIGTERM and SIGHUP end capstan (and so the command, tied to this
    // thread); Ctrl-C kills the command, which is then recorded.
    let cancel = Cancel::new();
    let interrupted = cancel.clone();
    super::termination::watch_signals_and_interrupts(Some(Box::new(move || interrupted.cancel())));
    let current = std::env::current_dir().context("cannot tell the current folder")?;
    let workspace = args.workspace.clone().unwrap_or_else(|| current.clone());
    let home = Home::from_env()?;
    let settings = crate::startup::time("config", || crate::config::load(&home, &workspace))?;
    for warning in &settings.warnings {
        eprintln!("warning: {warning}");
    }
    if let Some(key) = &settings.model.api_key_env
        && settings.exec.env.contains(key)
    {
        bail!(
            "[exec] env: `{key}` holds the model's API key (model.api_key_env), which commands never see; remove it from [exec] env"
        );
    }
    let user_home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let resolving = std::time::Instant::now();
    let mut grants = ExecGrants::resolve(
        &settings.exec,
        &workspace,
        user_home.as_deref(),
        &OwnFolders::of(&home),
    )?;
    if !grants.sandboxed {
        eprintln!(
            "WARNING: [exec] sandbox = \"off\": this command runs UNSANDBOXED, with your full access to files, network and processes"
        );
    }
    if let Some(warning) = crate::exec::credentials::grants_warning(&grants) {
        eprintln!("{warning}");
    }
    crate::startup::record("grants", "", resolving);
    let log = crate::startup::time("audit log", || AuditLog::open(&home.audit_log()))?;
    grants.audit = Some(AuditScope::new(log, "exec", "exec", None));
    let mut net = Vec::new();
    for origin in &args.allow_net {
        net.push(
            NetGrant::parse(origin).map_err(|e| anyhow::anyhow!("--allow-net {origin}: {e}"))?,
        );
    }
    if let Some(timeout) = args.timeout
        && (timeout > MAX_TIMEOUT || timeout.is_zero())
    {
        bail!("--timeout must be between 1s and 10m");
    }
    let cwd = if args.workspace.is_some() && !current.starts_with(&workspace) {
        None
    } else {
        Some(current)
    };
    let request = ExecRequest {
        cwd,
        write: args.allow_write,
        net,
        timeout: args.timeout,
        inherit_stdin: true,
        ..ExecRequest::new(CommandLine::Argv(args.command.clone()))
    };
    let json = args.json;
    let mut stdout = std::io::stdout();
    let mut stream = |chunk: &[u8]| {
        if !json {
            let _ = stdout.write_all(chunk);
            let _ = stdout.flush();
        }
    };
    let outcome = crate::exec::run(&request, &grants, &cancel, &mut stream)?;
    report(&outcome, &request, grants.timeout, json);
    if let Some(failure) = &outcome.audit_failure {
        bail!(
            "the command ran but its audit record could not be written: {failure}; check the audit log with `capstan audit verify`"
        );
    }
    Ok(u8::try_from(outcome.exit_code().clamp(0, 255)).unwrap_or(1))
}

/// Tells the user how the command ended, when it did not simply exit; with
/// `json`, prints the whole outcome.
fn report(outcome: &ExecOutcome, request: &ExecRequest, default_timeout: Duration, json: bool) {
    if json {
        let value = json!({
            "exit_code": outcome.exit_code(),
            "ending": match outcome.ending {
                Ending::Exited(_) => "exited",
                Ending::TimedOut => "timed out",
                Ending::Cancelled => "cancelled",
            },
            "output": outcome.output.text(),
            "output_bytes": outcome.output.total(),
            "omitted_bytes": outcome.output.omitted(),
            "duration_ms": u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
            "refused": outcome.refusals.iter().map(|r| json!({"origin": r.target, "reason": r.reason})).collect::<Vec<_>>(),
            "needs": outcome.needs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "quarantined": outcome.quarantined.iter().map(|q| json!({
                "path": q.path.display().to_string(),
                "moved_to": q.moved_to.as_ref().ok().map(|p| p.display().to_string()),
                "error": q.moved_to.as_ref().err(),
                "message": q.describe(),
            })).collect::<Vec<_>>(),
        });
        println!("{value}");
        return;
    }
    match outcome.ending {
        Ending::TimedOut => eprintln!(
            "capstan: the command ran out of time ({}) and was killed with every process it started",
            crate::sandbox::error::human_duration(request.timeout.unwrap_or(default_timeout))
        ),
        Ending::Cancelled => {
            eprintln!(
                "capstan: the command was interrupted and killed with every process it started"
            )
        }
        Ending::Exited(_) => {}
    }
    for refusal in &outcome.refusals {
        eprintln!("capstan: refused {}: {}", refusal.target, refusal.reason);
    }
    for put_aside in &outcome.quarantined {
        eprintln!("capstan: {}", put_aside.describe());
    }
    if !outcome.needs.is_empty() {
        let needs: Vec<String> = outcome.needs.iter().map(ToString::to_string).collect();
        eprintln!(
            "capstan: the command was stopped by the sandbox; needs: {}",
            needs.join("; ")
        );
    }
}
