//! The `capstan:plugin/exec` interface: a component runs a program its
//! `exec` grant allows. What is allowed is decided in
//! [`crate::grants::exec`]; the program runs in the OS sandbox of
//! [`crate::exec`].

use std::time::{Duration, Instant};

use super::bindings::capstan::plugin::exec;
use super::state::CallState;
use std::path::{Path, PathBuf};

use crate::audit::{AuditEvent, AuditScope};
use crate::exec::{Cancel, CommandLine, ExecGrants, ExecLimits, ExecOutcome, ExecRequest};
use crate::grants::exec::ExecGrant;
use crate::grants::fs::{Access, FsGrant};
use crate::grants::{EnvGrant, Grants};

impl exec::Host for CallState {
    async fn run(&mut self, command: exec::Command) -> Result<exec::Outcome, exec::ExecError> {
        self.touch();
        let request = SpawnRequest {
            program: command.program,
            args: command.args,
            cwd: command.cwd,
            stdin: command.stdin,
            timeout: command.timeout_ms.map(Duration::from_millis),
        };
        let context = SpawnContext {
            grants: &self.grants,
            audit: self.audit.as_ref(),
            call_id: self.audit.as_ref().map_or("exec", |a| a.call_id.as_str()),
            remaining: self.deadline.saturating_duration_since(Instant::now()),
        };
        let (exec_request, exec_grants) = plan(&request, &context).map_err(to_wit)?;
        let outcome = run(exec_request, exec_grants).await.map_err(to_wit)?;
        Ok(exec::Outcome {
            exit_code: outcome.exit_code,
            timed_out: outcome.timed_out,
            stdout: outcome.stdout,
            stderr: outcome.stderr,
            omitted: outcome.omitted,
        })
    }
}

fn to_wit(error: SpawnError) -> exec::ExecError {
    match error {
        SpawnError::NotGranted(m) => exec::ExecError::NotGranted(m),
        SpawnError::BadFolder(m) => exec::ExecError::BadFolder(m),
        SpawnError::Failed(m) => exec::ExecError::Failed(m),
    }
}

/// What a plugin asks to run through `capstan:plugin/exec`.
#[derive(Debug, Clone, Default)]
pub struct SpawnRequest {
    /// The program as its grant names it.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The folder to start in, as the plugin sees it; its workspace when
    /// `None`.
    pub cwd: Option<String>,
    /// What its standard input reads, if anything.
    pub stdin: Option<Vec<u8>>,
    /// How long it may run.
    pub timeout: Option<Duration>,
}

/// Why a spawn was refused.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// No grant allows it.
    #[error("{0}")]
    NotGranted(String),
    /// The folder is not one the plugin was granted.
    #[error("{0}")]
    BadFolder(String),
    /// It could not be run.
    #[error("{0}")]
    Failed(String),
}

/// What the call has left of its time, and who is asking.
#[derive(Debug)]
pub struct SpawnContext<'a> {
    /// The call's grants.
    pub grants: &'a Grants,
    /// Where the call's records go.
    pub audit: Option<&'a AuditScope>,
    /// The call's id, for the command's audit record.
    pub call_id: &'a str,
    /// What remains of the call's time.
    pub remaining: Duration,
}

/// Decides a spawn against the call's exec grants and, when granted, turns
/// it into what [`crate::exec`] runs: the request and the sandbox's grants,
/// restricted to the plugin's own folders, origins and variables. A refusal
/// is recorded in the audit log.
pub fn plan(
    request: &SpawnRequest,
    context: &SpawnContext<'_>,
) -> Result<(ExecRequest, ExecGrants), SpawnError> {
    let planned = plan_unrecorded(request, context);
    if let (Err(error), Some(audit)) = (&planned, context.audit) {
        let mut argv = vec![request.program.clone()];
        argv.extend(request.args.iter().cloned());
        audit.record(AuditEvent::CommandRefused {
            command: CommandLine::Argv(argv).describe(),
            reason: error.to_string(),
        });
    }
    planned
}

fn plan_unrecorded(
    request: &SpawnRequest,
    context: &SpawnContext<'_>,
) -> Result<(ExecRequest, ExecGrants), SpawnError> {
    let grants = context.grants;
    let entries: Vec<&ExecGrant> = grants
        .capabilities
        .exec
        .iter()
        .filter(|entry| entry.program == request.program)
        .collect();
    let argv_text = {
        let mut argv = vec![request.program.clone()];
        argv.extend(request.args.iter().cloned());
        CommandLine::Argv(argv).describe()
    };
    if entries.is_empty() {
        let granted: Vec<&str> = grants
            .capabilities
            .exec
            .iter()
            .map(|e| e.program.as_str())
            .collect();
        return Err(SpawnError::NotGranted(format!(
            "`{}` is not a program this plugin was granted ({}); a plugin runs only the programs its plugin.toml lists under `exec`",
            request.program,
            if granted.is_empty() {
                "it was granted none".to_string()
            } else {
                format!("granted: {}", granted.join(", "))
            }
        )));
    }
    // The entry allowing the argv that lets the program write the least.
    let Some(entry) = entries
        .iter()
        .filter(|entry| entry.allows(&request.args))
        .min_by_key(|entry| entry.writes.len())
    else {
        let patterns: Vec<String> = entries
            .iter()
            .flat_map(|e| e.args.iter().map(|p| format!("`{p}`")))
            .collect();
        return Err(SpawnError::NotGranted(format!(
            "`{argv_text}` matches none of the argument patterns granted for {}: {}",
            request.program,
            patterns.join(", ")
        )));
    };
    let Some(program) = entry.resolved() else {
        return Err(SpawnError::NotGranted(format!(
            "the grant for `{}` records no resolved path; grant it again (`capstan plugin update`)",
            request.program
        )));
    };
    let folders: Vec<&FsGrant> = grants.workspace.iter().chain(&grants.fs).collect();
    let Some(home_folder) = folders.first() else {
        return Err(SpawnError::BadFolder(
            "the plugin was granted no folder to run a program in".to_string(),
        ));
    };
    let cwd = match &request.cwd {
        None => home_folder.host_path().to_path_buf(),
        Some(guest) => host_folder(guest, &folders)?,
    };
    let within = folders
        .iter()
        .find(|f| cwd.starts_with(f.host_path()))
        .ok_or_else(|| {
            SpawnError::BadFolder(format!(
                "the folder `{}` is not inside a folder the plugin was granted",
                request.cwd.as_deref().unwrap_or_default()
            ))
        })?;
    let mut argv = vec![program.to_string()];
    argv.extend(request.args.iter().cloned());
    let mut exec_request = ExecRequest::new(CommandLine::Argv(argv));
    exec_request.cwd = Some(cwd.clone());
    exec_request.write = within.access() == Access::ReadWrite;
    // The program ends a little before the call does, so the plugin still
    // hears how it ended.
    let margin = (context.remaining / 10).min(Duration::from_millis(250));
    let available = context.remaining.saturating_sub(margin);
    exec_request.timeout = Some(request.timeout.unwrap_or(available).min(available));
    exec_request.stdin = request.stdin.clone();
    exec_request.separate_errors = true;
    exec_request.writable_protected = entry.writes.clone();
    exec_request.call_id = context.call_id.to_string();
    let (read, write): (Vec<&FsGrant>, Vec<&FsGrant>) = folders
        .iter()
        .copied()
        .filter(|f| f.host_path() != within.host_path())
        .partition(|f| f.access() == Access::Read);
    let secret = |name: &str| grants.secrets.iter().any(|s| s.grant.name == name);
    let exec_grants = ExecGrants {
        workspace: within.host_path().to_path_buf(),
        read: read.iter().map(|f| f.host_path().to_path_buf()).collect(),
        write: write.iter().map(|f| f.host_path().to_path_buf()).collect(),
        net: grants.net.clone(),
        env: grants
            .env
            .iter()
            .map(EnvGrant::name)
            .filter(|name| !secret(name))
            .map(str::to_string)
            .collect(),
        timeout: context.remaining,
        limits: ExecLimits::default(),
        sandboxed: true,
        namespaces: true,
        home: None,
        audit: context.audit.cloned(),
        secrets: Default::default(),
    };
    Ok((exec_request, exec_grants))
}

/// The host folder for the plugin's path `guest` (`/workspace/src`), which
/// must lie in one of `folders`.
fn host_folder(guest: &str, folders: &[&FsGrant]) -> Result<PathBuf, SpawnError> {
    let outside = || {
        SpawnError::BadFolder(format!(
            "the folder `{guest}` is not inside a folder the plugin was granted ({})",
            folders
                .iter()
                .map(|f| f.guest_path())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    };
    let guest_path = Path::new(guest);
    let (folder, below) = folders
        .iter()
        .find_map(|f| {
            guest_path
                .strip_prefix(f.guest_path())
                .ok()
                .map(|below| (f, below))
        })
        .ok_or_else(outside)?;
    if below
        .components()
        .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return Err(outside());
    }
    let resolved = folder
        .host_path()
        .join(below)
        .canonicalize()
        .map_err(|_| SpawnError::BadFolder(format!("the folder `{guest}` does not exist")))?;
    if !resolved.starts_with(folder.host_path()) || !resolved.is_dir() {
        return Err(outside());
    }
    Ok(resolved)
}

/// What a finished program returns to the plugin.
#[derive(Debug, Clone)]
pub struct SpawnOutcome {
    /// Its exit code (124 timed out, 130 cancelled, 128 + n killed by
    /// signal n).
    pub exit_code: i32,
    /// Whether it ran out of time.
    pub timed_out: bool,
    /// Its standard output, capped, with a note where the middle was left
    /// out.
    pub stdout: String,
    /// Its standard error, likewise.
    pub stderr: String,
    /// Bytes left out of both.
    pub omitted: u64,
}

impl From<ExecOutcome> for SpawnOutcome {
    fn from(outcome: ExecOutcome) -> Self {
        Self {
            exit_code: outcome.exit_code(),
            timed_out: outcome.ending == crate::exec::Ending::TimedOut,
            omitted: outcome.output.omitted() + outcome.errors.omitted(),
            stdout: outcome.output.text(),
            stderr: {
                let mut stderr = outcome.errors.text();
                for put_aside in &outcome.quarantined {
                    tracing::warn!("{}", put_aside.describe());
                    stderr.push_str(&format!("[sandbox] {}\n", put_aside.describe()));
                }
                stderr
            },
        }
    }
}

/// Runs a planned program to its end on a blocking thread. If the call
/// stops waiting (its deadline passed and it was abandoned, or it was
/// cancelled), the program is killed with every process it started.
pub async fn run(request: ExecRequest, grants: ExecGrants) -> Result<SpawnOutcome, SpawnError> {
    /// Raises the cancel signal when dropped: the future was dropped.
    struct CancelOnDrop(Cancel);
    impl Drop for CancelOnDrop {
        fn drop(&mut self) {
            self.0.cancel();
        }
    }
    let cancel = Cancel::new();
    let _guard = CancelOnDrop(cancel.clone());
    let ran = tokio::task::spawn_blocking(move || {
        crate::exec::run(&request, &grants, &cancel, &mut |_| {})
    })
    .await;
    match ran {
        Ok(Ok(outcome)) => match &outcome.audit_failure {
            Some(failure) => Err(SpawnError::Failed(format!(
                "{failure}; the program's run could not be recorded, so its result is withheld"
            ))),
            None => Ok(outcome.into()),
        },
        Ok(Err(error)) => Err(SpawnError::Failed(error.to_string())),
        Err(error) => Err(SpawnError::Failed(format!(
            "the program's runner stopped: {error}"
        ))),
    }
}
