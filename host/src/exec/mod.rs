//! Native commands in an OS sandbox: the one place that turns the
//! session's grants into kernel rules.
//!
//! A command (`capstan exec -- make test`, and the model's `exec.*` tools)
//! sees what [`ExecGrants`] and its [`ExecRequest`] allow, enforced by the
//! kernel rather than by reading the command line:
//!
//! - files ([`files`]): Landlock, an allow list — system folders and tool
//!   homes readable, the workspace writable only when the call may write
//!   (with `.git` and the other [`PROTECTED`] paths still read-only), a
//!   private temporary folder; nothing else exists for the command;
//! - network ([`proxy`]): a network namespace of its own with nothing in
//!   it; granted origins are reachable only through the host's proxy, which
//!   applies [`grants::net`](crate::grants::net);
//! - processes ([`spawn`], [`syscalls`]): user and PID namespaces, no
//!   capabilities, `no_new_privs`, a seccomp filter, resource limits; when
//!   the command's first process ends, on a timeout or on a cancel, the
//!   kernel kills every process it started;
//! - environment: `PATH`, `LANG`, `TERM`, the names of `[exec] env`, and a
//!   private `TMPDIR` and `HOME` ([`temp_area`]: never the user's home),
//!   nothing else;
//! - audit: every command and every refusal the host sees goes to the
//!   audit log.
//!
//! [`run`] runs a command to its end; [`RunningCommand`] and [`JobTable`]
//! keep commands running in the background; [`service`] keeps a local MCP
//! server or a language server running, its standard error's end kept.

pub mod config;
pub mod credentials;
#[cfg(target_os = "linux")]
mod files;
#[cfg(target_os = "linux")]
pub mod jobs;
mod missing;
pub mod output;
#[cfg(target_os = "linux")]
mod process;
pub mod protected;
#[cfg(target_os = "linux")]
mod proxy;
#[cfg(target_os = "linux")]
pub mod service;
#[cfg(target_os = "linux")]
mod spawn;
#[cfg(target_os = "linux")]
mod support;
#[cfg(target_os = "linux")]
mod syscalls;
#[cfg(target_os = "linux")]
pub mod temp_area;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use config::{
    DEFAULT_TIMEOUT, ExecConfigError, ExecGrants, ExecLimits, ExecSettings, MAX_TIMEOUT,
    SandboxSetting, SecretEnv,
};
#[cfg(target_os = "linux")]
pub use jobs::{JobId, JobOutput, JobTable};
pub use missing::MissingCapability;
pub use output::CappedOutput;
pub use protected::Quarantined;
#[cfg(target_os = "linux")]
pub use support::{KernelSupport, kernel_support};

use crate::grants::net::NetGrant;

/// Paths of the workspace that stay read-only for commands even when they
/// may write the workspace.
pub use crate::grants::fs::PROTECTED;

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandLine {
    /// A command string, run by `bash -c`.
    Shell(String),
    /// A program and its arguments, run as they are (no shell).
    Argv(Vec<String>),
}

impl CommandLine {
    /// The command as the audit log and the user see it.
    pub fn describe(&self) -> String {
        match self {
            CommandLine::Shell(text) => text.clone(),
            CommandLine::Argv(argv) => argv
                .iter()
                .map(|arg| {
                    if !arg.is_empty()
                        && arg
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
                    {
                        arg.clone()
                    } else {
                        format!("'{}'", arg.replace('\'', r"'\''"))
                    }
                })
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// One command to run, and what this call lets it do beyond what
/// [`ExecGrants`] gives every command.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// What to run.
    pub command: CommandLine,
    /// Where it starts: a folder inside the workspace (relative to it, or
    /// absolute); the workspace when `None`.
    pub cwd: Option<PathBuf>,
    /// Whether it may write the workspace.
    pub write: bool,
    /// Origins it may reach beside the session's.
    pub net: Vec<NetGrant>,
    /// How long it may run; [`ExecGrants::timeout`] when `None`. A command
    /// run to completion gets at most [`MAX_TIMEOUT`]; a background job
    /// without a timeout runs until killed.
    pub timeout: Option<Duration>,
    /// Whether it reads capstan's standard input (else `/dev/null`, or
    /// `stdin`).
    pub inherit_stdin: bool,
    /// What its standard input reads, then end of file (when it does not
    /// inherit capstan's).
    pub stdin: Option<Vec<u8>>,
    /// Whether its standard error is kept apart from its standard output
    /// ([`ExecOutcome::errors`]) instead of combined with it.
    pub separate_errors: bool,
    /// Paths of [`PROTECTED`] the command may write all the same, when it
    /// may write where they are: an `exec` grant's consented exception
    /// (the git plugin's `.git`). Without `write`, these alone are
    /// writable in the workspace.
    pub writable_protected: Vec<String>,
    /// The audit record's call id (`exec` from the command line, the tool
    /// call's id in a session).
    pub call_id: String,
}

impl ExecRequest {
    /// A request to run `command` with nothing beyond the session's grants.
    pub fn new(command: CommandLine) -> Self {
        Self {
            command,
            cwd: None,
            write: false,
            net: Vec::new(),
            timeout: None,
            inherit_stdin: false,
            stdin: None,
            separate_errors: false,
            writable_protected: Vec::new(),
            call_id: "exec".to_string(),
        }
    }
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Its first process exited, with this code (`128 + n` if killed by
    /// signal `n`).
    Exited(i32),
    /// It ran out of time and was killed, with every process it started.
    TimedOut,
    /// It was cancelled (Ctrl-C, a kill, the session ending) and killed.
    Cancelled,
}

/// What a command did.
#[derive(Debug, Clone)]
pub struct ExecOutcome {
    /// How it ended.
    pub ending: Ending,
    /// Its combined standard output and error, capped (its standard
    /// output only, with [`ExecRequest::separate_errors`]).
    pub output: CappedOutput,
    /// Its standard error, capped, with [`ExecRequest::separate_errors`];
    /// empty otherwise.
    pub errors: CappedOutput,
    /// How long it ran.
    pub duration: Duration,
    /// Requests the proxy refused.
    pub refusals: Vec<ProxyRefusal>,
    /// What it seems to have lacked, when it failed: for the model or the
    /// user to ask for (a hint read from the errors, not a decision).
    pub needs: Vec<MissingCapability>,
    /// Why the audit record of the command could not be written, if it
    /// could not: the caller fails the call rather than let it pass
    /// unrecorded.
    pub audit_failure: Option<String>,
    /// Protected entries (`.git`, `.claude`, ... at any depth) the command
    /// created in the workspace, renamed aside when it ended.
    pub quarantined: Vec<Quarantined>,
}

impl ExecOutcome {
    /// The exit code a shell would give: the command's, 124 for a timeout,
    /// 130 for a cancel.
    pub fn exit_code(&self) -> i32 {
        match self.ending {
            Ending::Exited(code) => code,
            Ending::TimedOut => 124,
            Ending::Cancelled => 130,
        }
    }
}

/// A request the proxy refused: its origin and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyRefusal {
    /// The origin (`https://example.com`).
    pub target: String,
    /// Why.
    pub reason: String,
}

/// A command could not be run.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// Not on Linux.
    #[error(
        "native commands run only on Linux for now: their sandbox needs Landlock, seccomp and namespaces, which {0} does not have"
    )]
    Unsupported(&'static str),
    /// The kernel has no Landlock and the sandbox is on.
    #[error(
        "this kernel does not enforce Landlock (Linux 5.13+ with `landlock` in the boot parameter lsm=), so commands cannot be confined to the workspace; capstan does not run them unsandboxed unless you set `[exec] sandbox = \"off\"` in your config"
    )]
    NoLandlock,
    /// The command asks for network where its sandbox cannot keep the
    /// proxy its only way out.
    #[error(
        "network for commands is off: {0}; run the command without an origin (--allow-net, \"net\", or [exec] net in your config)"
    )]
    NetworkUnavailable(String),
    /// A step of the sandbox setup failed.
    #[error("cannot set up the sandbox for the command: {step} failed: {source}")]
    Setup {
        /// What was being done.
        step: &'static str,
        /// The system's error.
        source: std::io::Error,
    },
    /// The program could not be started.
    #[error("cannot run `{program}`: {source}")]
    Start {
        /// The program.
        program: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// The working folder is not inside the workspace.
    #[error("the command's folder {} is not inside the workspace {}", cwd.display(), workspace.display())]
    OutsideWorkspace {
        /// The folder asked for.
        cwd: PathBuf,
        /// The workspace.
        workspace: PathBuf,
    },
    /// The command line is empty or holds a NUL byte.
    #[error("the command is not valid: {0}")]
    InvalidCommand(String),
}

/// A cancel signal for a running command; clones share it.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A signal not raised yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises it: the command is killed, with every process it started.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether it was raised.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

#[cfg(target_os = "linux")]
pub use process::{AttachedPipes, RunningCommand, sandbox_gap};
#[cfg(target_os = "linux")]
pub use service::{ErrorTail, Service, ServiceError, ServiceSpec, TailReport, start_service};

/// Runs `request` to its end under `grants`, passing output to `on_output`
/// as it arrives; `cancel` kills it early.
#[cfg(target_os = "linux")]
pub fn run(
    request: &ExecRequest,
    grants: &ExecGrants,
    cancel: &Cancel,
    on_output: &mut dyn FnMut(&[u8]),
) -> Result<ExecOutcome, ExecError> {
    let mut request = request.clone();
    request.timeout = Some(request.timeout.unwrap_or(grants.timeout).min(MAX_TIMEOUT));
    let running = RunningCommand::start(&request, grants)?;
    Ok(running.wait(cancel, on_output))
}

/// Native commands need Linux.
#[cfg(not(target_os = "linux"))]
pub fn run(
    _request: &ExecRequest,
    _grants: &ExecGrants,
    _cancel: &Cancel,
    _on_output: &mut dyn FnMut(&[u8]),
) -> Result<ExecOutcome, ExecError> {
    Err(ExecError::Unsupported(std::env::consts::OS))
}
