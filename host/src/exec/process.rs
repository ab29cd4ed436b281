//! A command's life: set up its sandbox, start it, collect its output,
//! end it (exit, timeout, cancel, drop) with every process it started, and
//! record it in the audit log.

use std::ffi::CString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::files::{self, FileGrants};
use super::proxy::Proxy;
use super::spawn::{self, InitProcess, PROXY_PORT, Setup};
use super::{
    Cancel, CommandLine, Ending, ExecError, ExecGrants, ExecOutcome, ExecRequest, missing,
    output::CappedOutput, syscalls,
};
use crate::audit::AuditEvent;
use crate::grants::net::NetGrant;

/// How long output is still read after a kill: the sandbox's namespace is
/// gone by then; an unsandboxed command's stray processes may hold on.
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(2);

/// How often a waiting command looks at its deadline and cancel signal.
const TICK: Duration = Duration::from_millis(20);

/// The variables a command gets from capstan's environment, when set.
const PASSED_ENV: &[&str] = &["PATH", "LANG", "TERM"];

/// The variables that point a command's HTTP clients at the proxy: curl,
/// git, pip, cargo, npm and Python's urllib read one or another.
const PROXY_ENV: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// A started command.
pub struct RunningCommand {
    keeper: Child,
    stopper: Stopper,
    output: Option<std::io::PipeReader>,
    proxy: Option<Proxy>,
    started: Instant,
    deadline: Option<Instant>,
    summary: Summary,
    /// The private temporary folder, removed when the command is done.
    _temp: tempfile::TempDir,
    finished: bool,
}

/// How to kill a command's processes.
enum Stopper {
    /// The sandbox's PID namespace, through its init.
    Namespace(Option<InitProcess>),
    /// An unsandboxed command's process group.
    Group(u32),
}

impl Stopper {
    fn kill(&self) {
        match self {
            Stopper::Namespace(Some(init)) => init.kill(),
            Stopper::Namespace(None) => {}
            Stopper::Group(pgid) => spawn::kill_group(*pgid),
        }
    }
}

/// What the audit record and the outcome say about the command.
#[derive(Clone)]
struct Summary {
    command: String,
    cwd: PathBuf,
    write: bool,
    net: Vec<NetGrant>,
    sandboxed: bool,
    audit: Option<crate::audit::AuditScope>,
}

impl RunningCommand {
    /// Sets up the sandbox for `request` under `grants` and starts it. A
    /// setup that fails is recorded in the audit log and nothing runs.
    pub fn start(request: &ExecRequest, grants: &ExecGrants) -> Result<Self, ExecError> {
        let audit = grants.audit.as_ref().map(|scope| {
            crate::audit::AuditScope::new(
                scope.log.clone(),
                &scope.plugin,
                &request.call_id,
                scope.session_id.as_deref(),
            )
        });
        let started = Self::start_unrecorded(request, grants, audit.clone());
        if let (Err(error), Some(audit)) = (&started, &audit) {
            audit.record(AuditEvent::CommandRefused {
                command: request.command.describe(),
                reason: error.to_string(),
            });
        }
        started
    }

    fn start_unrecorded(
        request: &ExecRequest,
        grants: &ExecGrants,
        audit: Option<crate::audit::AuditScope>,
    ) -> Result<Self, ExecError> {
        let cwd = working_folder(request.cwd.as_deref(), &grants.workspace)?;
        let mut net = grants.net.clone();
        net.extend(request.net.iter().cloned());
        let temp = tempfile::Builder::new()
            .prefix("capstan-exec-")
            .tempdir()
            .map_err(|source| ExecError::Setup {
                step: "creating the command's temporary folder",
                source,
            })?;
        // Every sandboxed command gets the proxy, granted origins or none:
        // a tool that honours the proxy variables then asks it, and a
        // refusal is seen, audited and named in the outcome even when the
        // tool itself says nothing (`curl -s`).
        let proxy = grants.sandboxed;
        let (reader, writer) = std::io::pipe().map_err(|source| ExecError::Setup {
            step: "creating the output pipe",
            source,
        })?;
        let mut command = command_for(request, grants, &cwd, temp.path(), proxy)?;
        let error_writer = writer.try_clone().map_err(|source| ExecError::Setup {
            step: "creating the output pipe",
            source,
        })?;
        command.stdout(writer).stderr(error_writer);
        command.stdin(if request.inherit_stdin {
            Stdio::inherit()
        } else {
            Stdio::null()
        });
        let program = match &request.command {
            CommandLine::Shell(_) => "bash".to_string(),
            CommandLine::Argv(argv) => argv.first().cloned().unwrap_or_default(),
        };
        let summary = Summary {
            command: request.command.describe(),
            cwd: cwd.clone(),
            write: request.write,
            net: net.clone(),
            sandboxed: grants.sandboxed,
            audit,
        };
        let (mut keeper, stopper, listener) = if grants.sandboxed {
            let setup = sandbox_setup(request, grants, &cwd, temp.path())?;
            let started = spawn::start(&mut command, setup).map_err(|e| match e.step {
                Some(step) => ExecError::Setup {
                    step: step.describe(),
                    source: e.source,
                },
                None => ExecError::Start {
                    program: program.clone(),
                    source: e.source,
                },
            })?;
            (
                started.keeper,
                Stopper::Namespace(started.init),
                started.listener,
            )
        } else {
            command.process_group(0);
            let child = command
                .spawn()
                .map_err(|source| ExecError::Start { program, source })?;
            let pgid = child.id();
            (child, Stopper::Group(pgid), None)
        };
        drop(command);
        let proxy = match listener {
            Some(listener) => match Proxy::start(listener, net, summary.audit.clone()) {
                Ok(proxy) => Some(proxy),
                Err(source) => {
                    stopper.kill();
                    let _ = keeper.wait();
                    return Err(ExecError::Setup {
                        step: "starting the proxy",
                        source,
                    });
                }
            },
            None => None,
        };
        let started = Instant::now();
        Ok(Self {
            keeper,
            stopper,
            output: Some(reader),
            proxy,
            started,
            deadline: request.timeout.map(|t| started + t),
            summary,
            _temp: temp,
            finished: false,
        })
    }

    /// Kills the command and every process it started.
    pub fn kill(&self) {
        self.stopper.kill();
    }

    /// Waits for the command to end, passing its output to `on_output` as
    /// it arrives; kills it at its deadline or when `cancel` is raised.
    pub fn wait(mut self, cancel: &Cancel, on_output: &mut dyn FnMut(&[u8])) -> ExecOutcome {
        let mut output = CappedOutput::default();
        let (sender, chunks) = mpsc::channel::<Vec<u8>>();
        if let Some(mut reader) = self.output.take() {
            let _ = std::thread::Builder::new()
                .name("capstan-exec-output".into())
                .spawn(move || {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        match reader.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if sender.send(buf[..n].to_vec()).is_err() {
                                    break;
                                }
                            }
                        }
                    }
                });
        }
        let mut ending = None;
        let mut killed_at: Option<Instant> = None;
        let mut output_open = true;
        let mut pause = Duration::from_micros(50);
        // Until the first process has exited and the output has ended (or
        // been given up on after a kill): a command that closes its output
        // and goes on running still meets its deadline.
        let status = loop {
            if ending.is_none() {
                if cancel.is_cancelled() {
                    ending = Some(Ending::Cancelled);
                } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
                    ending = Some(Ending::TimedOut);
                }
                if ending.is_some() {
                    self.stopper.kill();
                    killed_at = Some(Instant::now());
                }
            }
            if output_open {
                match chunks.recv_timeout(TICK) {
                    Ok(chunk) => {
                        on_output(&chunk);
                        output.push(&chunk);
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => output_open = false,
                }
                if killed_at.is_some_and(|at| at.elapsed() > DRAIN_AFTER_KILL) {
                    output_open = false;
                }
            } else {
                // The first process exits right after its output ends, as
                // a rule: look again soon, then less often.
                std::thread::sleep(pause);
                pause = (pause * 2).min(TICK);
            }
            match self.keeper.try_wait() {
                Ok(Some(status)) if !output_open => break Ok(status),
                Ok(Some(_)) => {
                    // With the sandbox on, the namespace is gone and the
                    // output ends now; with it off, what is left of the
                    // process group goes, and its output is read a while.
                    if !self.summary.sandboxed && killed_at.is_none() {
                        self.stopper.kill();
                        killed_at = Some(Instant::now());
                    }
                }
                Ok(None) => {}
                Err(error) => break Err(error),
            }
        };
        self.finished = true;
        let code = match status {
            Ok(status) => status
                .code()
                .or_else(|| std::os::unix::process::ExitStatusExt::signal(&status).map(|s| 128 + s))
                .unwrap_or(-1),
            Err(_) => -1,
        };
        let ending = ending.unwrap_or(Ending::Exited(code));
        let duration = self.started.elapsed();
        let refusals = self.proxy.take().map(Proxy::stop).unwrap_or_default();
        let exit_code = match ending {
            Ending::Exited(code) => code,
            Ending::TimedOut => 124,
            Ending::Cancelled => 130,
        };
        let needs = missing::missing(
            exit_code,
            self.summary.write,
            &self.summary.net,
            &output.text(),
            &refusals,
        );
        let mut audit_failure = None;
        if let Some(audit) = &self.summary.audit {
            audit.record(AuditEvent::CommandRun {
                command: self.summary.command.clone(),
                cwd: self.summary.cwd.display().to_string(),
                write: self.summary.write,
                net: self.summary.net.iter().map(ToString::to_string).collect(),
                sandboxed: self.summary.sandboxed,
                ending: match ending {
                    Ending::Exited(_) => "exited",
                    Ending::TimedOut => "timed out",
                    Ending::Cancelled => "cancelled",
                }
                .to_string(),
                exit_code: match ending {
                    Ending::Exited(code) => Some(code),
                    _ => None,
                },
                duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            });
            audit_failure = audit.close().err().map(|error| error.to_string());
        }
        ExecOutcome {
            ending,
            output,
            duration,
            refusals,
            needs,
            audit_failure,
        }
    }
}

impl Drop for RunningCommand {
    fn drop(&mut self) {
        if !self.finished {
            self.stopper.kill();
            let _ = self.keeper.wait();
        }
    }
}

/// The folder a command starts in: `cwd` (relative to the workspace or
/// absolute), which must lie inside the workspace.
fn working_folder(cwd: Option<&Path>, workspace: &Path) -> Result<PathBuf, ExecError> {
    let Some(cwd) = cwd else {
        return Ok(workspace.to_path_buf());
    };
    let joined = workspace.join(cwd);
    let outside = || ExecError::OutsideWorkspace {
        cwd: cwd.to_path_buf(),
        workspace: workspace.to_path_buf(),
    };
    let resolved = joined.canonicalize().map_err(|_| outside())?;
    if !resolved.starts_with(workspace) || !resolved.is_dir() {
        return Err(outside());
    }
    Ok(resolved)
}

/// The process to start, with its scrubbed environment.
fn command_for(
    request: &ExecRequest,
    grants: &ExecGrants,
    cwd: &Path,
    temp: &Path,
    proxy: bool,
) -> Result<Command, ExecError> {
    let mut command = match &request.command {
        CommandLine::Shell(text) => {
            if text.contains('\0') {
                return Err(ExecError::InvalidCommand("it contains a NUL byte".into()));
            }
            let mut command = Command::new("bash");
            command.arg("-c").arg(text);
            command
        }
        CommandLine::Argv(argv) => {
            let Some((program, args)) = argv.split_first() else {
                return Err(ExecError::InvalidCommand("no program was given".into()));
            };
            let mut command = Command::new(program);
            command.args(args);
            command
        }
    };
    command.env_clear().current_dir(cwd);
    for name in PASSED_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    if std::env::var_os("PATH").is_none() {
        command.env("PATH", "/usr/local/bin:/usr/bin:/bin");
    }
    if let Some(home) = &grants.home {
        command.env("HOME", home);
    }
    command.env("TMPDIR", temp);
    for name in &grants.env {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    if proxy {
        let url = format!("http://127.0.0.1:{PROXY_PORT}");
        for name in PROXY_ENV {
            command.env(name, &url);
        }
    }
    Ok(command)
}

/// Turns the grants into what the sandbox's children need.
fn sandbox_setup(
    request: &ExecRequest,
    grants: &ExecGrants,
    cwd: &Path,
    temp: &Path,
) -> Result<Setup, ExecError> {
    if spawn::landlock_abi() < 1 {
        return Err(ExecError::NoLandlock);
    }
    let workspace = &grants.workspace;
    let mut files = FileGrants {
        read: grants.read.clone(),
        write: grants.write.clone(),
    };
    files.write.push(temp.to_path_buf());
    let read_only = if request.write {
        files.write.push(workspace.clone());
        files::protected_in(workspace)
    } else {
        files.read.push(workspace.clone());
        vec![workspace.clone()]
    };
    let ruleset = files::ruleset(&files).map_err(|e| ExecError::Setup {
        step: "building the Landlock rules",
        source: std::io::Error::other(e.to_string()),
    })?;
    let filters = syscalls::filters().map_err(|e| ExecError::Setup {
        step: "compiling the seccomp filter",
        source: std::io::Error::other(e),
    })?;
    let c_path = |path: &Path| {
        CString::new(path.as_os_str().as_bytes()).map_err(|_| {
            ExecError::InvalidCommand(format!("the path {} holds a NUL byte", path.display()))
        })
    };
    let (uid, gid) = std::fs::metadata("/proc/self")
        .map(|m| (m.uid(), m.gid()))
        .map_err(|source| ExecError::Setup {
            step: "reading capstan's user id",
            source,
        })?;
    let map = |id: u32| CString::new(format!("{id} {id} 1")).unwrap_or_default();
    let limits = grants.limits;
    // A PID namespace's pid_max may not be set below the kernel's minimum.
    let pid_max = (u64::from(limits.processes) + 1).max(301);
    Ok(Setup {
        uid_map: map(uid),
        gid_map: map(gid),
        read_only: read_only
            .iter()
            .map(|p| c_path(p))
            .collect::<Result<_, _>>()?,
        cwd: c_path(cwd)?,
        ruleset,
        proc_access: files::read_access().bits(),
        filters,
        pid_max: CString::new(pid_max.to_string()).unwrap_or_default(),
        pid_max_required: uid == 0,
        processes: u64::from(limits.processes),
        memory: limits.memory,
        file_size: limits.file_size,
        proxy: true,
    })
}
