//! A command's life: set up its sandbox, start it, collect its output,
//! end it (exit, timeout, cancel, drop) with every process it started, and
//! record it in the audit log.

use std::ffi::CString;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::credentials;
use super::files::{self, FileGrants};
use super::protected::{self, ProtectedScan};
use super::proxy::Proxy;
use super::spawn::{self, ChildIo, ExitWatch, InitProcess, Keeper, PROXY_PORT, Setup, TreeStop};
use super::{
    Cancel, CommandLine, Ending, ExecError, ExecGrants, ExecOutcome, ExecRequest, missing,
    output::CappedOutput, syscalls, temp_area,
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
    keeper: Keeper,
    /// Wakes the waiting thread when the keeper exits.
    exited: ExitWatch,
    stopper: Stopper,
    output: Option<std::io::PipeReader>,
    /// Its standard error, when kept apart from its output.
    errors: Option<std::io::PipeReader>,
    proxy: Option<Proxy>,
    started: Instant,
    deadline: Option<Instant>,
    summary: Summary,
    /// The private temporary folder, removed when the command is done.
    _temp: tempfile::TempDir,
    /// What is looked for when it ends: protected entries it created.
    watch: Option<PlantWatch>,
    finished: bool,
}

/// The protected entries of a workspace a command may write, as they were
/// before it ran: what it created is put aside when it ends.
struct PlantWatch {
    workspace: PathBuf,
    before: ProtectedScan,
    /// The protected paths the command was allowed to write.
    exempt: Vec<PathBuf>,
}

impl PlantWatch {
    fn sweep(&self) -> Vec<protected::Quarantined> {
        protected::quarantine_new(&self.workspace, &self.before, &self.exempt)
    }
}

/// What a service started with [`RunningCommand::start_attached`] gets
/// beside an ordinary command.
#[derive(Default)]
struct Attach {
    /// Variables with their values, added to the scrubbed environment.
    env: Vec<(String, String)>,
    /// Whether its standard input, output and error are the caller's pipes.
    pipes: bool,
}

/// The pipes of a service started with [`RunningCommand::start_attached`].
pub struct AttachedPipes {
    /// Its standard input.
    pub stdin: std::io::PipeWriter,
    /// Its standard output.
    pub stdout: std::io::PipeReader,
    /// Its standard error.
    pub stderr: std::io::PipeReader,
}

/// Why commands here would not get the whole OS sandbox, if they would
/// not: the sandbox turned off, no Landlock, or no namespaces (so no
/// network of their own and no PID namespace). Services that must be
/// confined (local MCP servers) are refused with this reason.
pub fn sandbox_gap(grants: &ExecGrants) -> Option<String> {
    if !grants.sandboxed {
        return Some(
            "`[exec] sandbox = \"off\"` runs commands unsandboxed, with your full access"
                .to_string(),
        );
    }
    if let Err(error) = landlock_required(spawn::landlock_abi()) {
        return Some(error.to_string());
    }
    without_namespaces(grants)
}

/// How to kill a command's processes.
enum Stopper {
    /// The sandbox's PID namespace, through its init.
    Namespace(Option<InitProcess>),
    /// A sandboxed command without namespaces: its keeper kills the tree.
    Tree(TreeStop),
    /// An unsandboxed command's process group.
    Group(u32),
}

impl Stopper {
    fn kill(&self) {
        match self {
            Stopper::Namespace(Some(init)) => init.kill(),
            Stopper::Namespace(None) => {}
            Stopper::Tree(stop) => stop.kill(),
            Stopper::Group(pgid) => spawn::kill_group(*pgid),
        }
    }
}

/// What the audit record and the outcome say about the command.
#[derive(Clone)]
struct Summary {
    command: String,
    cwd: PathBuf,
    /// The repository folder of a workspace that is a `git worktree`,
    /// when it lies outside the workspace.
    outside_gitdir: Option<String>,
    write: bool,
    net: Vec<NetGrant>,
    sandboxed: bool,
    audit: Option<crate::audit::AuditScope>,
}

impl RunningCommand {
    /// Sets up the sandbox for `request` under `grants` and starts it. A
    /// setup that fails is recorded in the audit log and nothing runs.
    pub fn start(request: &ExecRequest, grants: &ExecGrants) -> Result<Self, ExecError> {
        Self::start_with(request, grants, &Attach::default())
    }

    /// Starts a long-lived service (a local MCP server) like [`Self::start`],
    /// with `env` added to its scrubbed environment, and its standard
    /// input, output and error as pipes the caller owns. [`Self::wait`]
    /// then only waits for its end.
    pub fn start_attached(
        request: &ExecRequest,
        grants: &ExecGrants,
        env: &[(String, String)],
    ) -> Result<(Self, AttachedPipes), ExecError> {
        let attach = Attach {
            env: env.to_vec(),
            pipes: true,
        };
        let (mut running, stdin) = Self::start_pipes(request, grants, &attach)?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (stdin, running.output.take(), running.errors.take())
        else {
            return Err(ExecError::Setup {
                step: "creating the service's pipes",
                source: std::io::Error::other("a pipe is missing"),
            });
        };
        Ok((
            running,
            AttachedPipes {
                stdin,
                stdout,
                stderr,
            },
        ))
    }

    fn start_with(
        request: &ExecRequest,
        grants: &ExecGrants,
        attach: &Attach,
    ) -> Result<Self, ExecError> {
        Self::start_pipes(request, grants, attach).map(|(running, _)| running)
    }

    fn start_pipes(
        request: &ExecRequest,
        grants: &ExecGrants,
        attach: &Attach,
    ) -> Result<(Self, Option<std::io::PipeWriter>), ExecError> {
        let audit = grants.audit.as_ref().map(|scope| {
            crate::audit::AuditScope::new(
                scope.log.clone(),
                &scope.plugin,
                &request.call_id,
                scope.session_id.as_deref(),
            )
        });
        let started = Self::start_unrecorded(request, grants, audit.clone(), attach);
        match (&started, &audit) {
            (Err(error), Some(audit)) => audit.record(AuditEvent::CommandRefused {
                command: request.command.describe(),
                reason: error.to_string(),
            }),
            // Recorded as it starts: a service (an MCP server, a language
            // server) may run for the whole session.
            (Ok((running, _)), Some(audit)) => {
                let summary = &running.summary;
                audit.record(AuditEvent::CommandStarted {
                    command: summary.command.clone(),
                    cwd: summary.cwd.display().to_string(),
                    write: summary.write,
                    net: summary.net.iter().map(ToString::to_string).collect(),
                    sandboxed: summary.sandboxed,
                    pid: running.keeper.id(),
                });
            }
            _ => {}
        }
        started
    }

    fn start_unrecorded(
        request: &ExecRequest,
        grants: &ExecGrants,
        audit: Option<crate::audit::AuditScope>,
        attach: &Attach,
    ) -> Result<(Self, Option<std::io::PipeWriter>), ExecError> {
        let preparing = Instant::now();
        let cwd = working_folder(request.cwd.as_deref(), &grants.workspace)?;
        let mut net = grants.net.clone();
        net.extend(request.net.iter().cloned());
        let temp = temp_area::command_folder().map_err(|source| ExecError::Setup {
            step: "creating the command's temporary folder",
            source,
        })?;
        // Every sandboxed command gets the proxy, granted origins or none:
        // a tool that honours the proxy variables then asks it, and a
        // refusal is seen, audited and named in the outcome even when the
        // tool itself says nothing (`curl -s`).
        let proxy = grants.sandboxed && without_namespaces(grants).is_none();
        let (reader, writer) = std::io::pipe().map_err(|source| ExecError::Setup {
            step: "creating the output pipe",
            source,
        })?;
        let home = private_home(grants)?;
        let mut command =
            command_for(request, grants, &cwd, (temp.path(), home.as_deref()), proxy)?;
        for (name, value) in &attach.env {
            command.env(name, value);
        }
        let pipe_error = |source| ExecError::Setup {
            step: "creating the output pipe",
            source,
        };
        let (errors, error_writer) = if request.separate_errors || attach.pipes {
            let (reader, writer) = std::io::pipe().map_err(pipe_error)?;
            (Some(reader), writer)
        } else {
            (None, writer.try_clone().map_err(pipe_error)?)
        };
        let mut input = None;
        let mut service_input = None;
        let stdin = match (&request.stdin, request.inherit_stdin) {
            _ if attach.pipes => {
                let (reader, writer) = std::io::pipe().map_err(pipe_error)?;
                service_input = Some(writer);
                Some(OwnedFd::from(reader))
            }
            (_, true) => None,
            (Some(bytes), false) => {
                let (reader, writer) = std::io::pipe().map_err(pipe_error)?;
                input = Some((writer, bytes.clone()));
                Some(OwnedFd::from(reader))
            }
            (None, false) => Some(OwnedFd::from(std::fs::File::open("/dev/null").map_err(
                |source| ExecError::Setup {
                    step: "opening /dev/null for the command's input",
                    source,
                },
            )?)),
        };
        let io = ChildIo {
            stdin,
            stdout: OwnedFd::from(writer),
            stderr: OwnedFd::from(error_writer),
        };
        let program = match &request.command {
            CommandLine::Shell(_) => "bash".to_string(),
            CommandLine::Argv(argv) => argv.first().cloned().unwrap_or_default(),
        };
        let outside_gitdir = protected::gitdir_target(&grants.workspace.join(".git"))
            .filter(|gitdir| !gitdir.starts_with(&grants.workspace))
            .map(|gitdir| gitdir.display().to_string());
        let summary = Summary {
            command: request.command.describe(),
            cwd: cwd.clone(),
            outside_gitdir,
            write: request.write,
            net: net.clone(),
            sandboxed: grants.sandboxed,
            audit,
        };
        let mut watch = None;
        let (mut keeper, stopper, listener) = if grants.sandboxed {
            let (setup, before) =
                sandbox_setup(request, grants, &cwd, temp.path(), home.as_deref())?;
            watch = before;
            crate::startup::record("command set-up", "", preparing);
            let spawning = Instant::now();
            let started = spawn::start(&mut command, io, setup).map_err(|e| match e.step {
                Some(step) => ExecError::Setup {
                    step: step.describe(),
                    source: e.source,
                },
                None => ExecError::Start {
                    program: program.clone(),
                    source: e.source,
                },
            })?;
            let stopper = match started.stop {
                Some(stop) => Stopper::Tree(stop),
                None => Stopper::Namespace(started.init),
            };
            crate::startup::record("sandbox spawn", "", spawning);
            (started.keeper, stopper, started.listener)
        } else {
            io.apply(&mut command);
            command.process_group(0);
            let child = command
                .spawn()
                .map_err(|source| ExecError::Start { program, source })?;
            let pgid = child.id();
            (Keeper::Child(child), Stopper::Group(pgid), None)
        };
        drop(command);
        if let Some((mut writer, bytes)) = input {
            // Written beside the command, so a command that reads little
            // cannot hold this thread; the pipe closes when all is written
            // or the command is gone.
            let _ = std::thread::Builder::new()
                .name("capstan-exec-input".into())
                .spawn(move || {
                    use std::io::Write;
                    let _ = writer.write_all(&bytes);
                });
        }
        let proxying = Instant::now();
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
        if proxy.is_some() {
            crate::startup::record("proxy", "", proxying);
        }
        let started = Instant::now();
        let running = Self {
            exited: ExitWatch::new(keeper.id()),
            keeper,
            stopper,
            output: Some(reader),
            errors,
            proxy,
            started,
            deadline: request.timeout.map(|t| started + t),
            summary,
            _temp: temp,
            watch,
            finished: false,
        };
        Ok((running, service_input))
    }

    /// Kills the command and every process it started.
    pub fn kill(&self) {
        self.stopper.kill();
    }

    /// Waits for the command to end, passing its output to `on_output` as
    /// it arrives; kills it at its deadline or when `cancel` is raised.
    pub fn wait(mut self, cancel: &Cancel, on_output: &mut dyn FnMut(&[u8])) -> ExecOutcome {
        let mut output = CappedOutput::default();
        let mut errors = CappedOutput::default();
        // Each chunk says whether it came from a separate standard error.
        let (sender, chunks) = mpsc::channel::<(bool, Vec<u8>)>();
        let streams = [(false, self.output.take()), (true, self.errors.take())];
        for (is_error, reader) in streams {
            let Some(mut reader) = reader else {
                continue;
            };
            let sender = sender.clone();
            let _ = std::thread::Builder::new()
                .name("capstan-exec-output".into())
                .spawn(move || {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        match reader.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if sender.send((is_error, buf[..n].to_vec())).is_err() {
                                    break;
                                }
                            }
                        }
                    }
                });
        }
        drop(sender);
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
                    Ok((is_error, chunk)) => {
                        on_output(&chunk);
                        if is_error {
                            errors.push(&chunk);
                        } else {
                            output.push(&chunk);
                        }
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
                // a rule: wait for that (or look again soon, then less
                // often, where the kernel cannot say when it happens).
                if !self.exited.wait(TICK) {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(TICK);
                }
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
        crate::startup::record("command ran", "", self.started);
        let finishing = Instant::now();
        let quarantined = self.watch.take().map(|w| w.sweep()).unwrap_or_default();
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
        let mut seen = output.text();
        seen.push_str(&errors.text());
        let needs = missing::missing_in(
            exit_code,
            self.summary.write,
            &self.summary.net,
            &seen,
            &refusals,
            self.summary.outside_gitdir.as_deref(),
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
                refused: needs
                    .iter()
                    .map(ToString::to_string)
                    .chain(quarantined.iter().map(|entry| entry.describe()))
                    .collect(),
            });
            audit_failure = audit.close().err().map(|error| error.to_string());
        }
        crate::startup::record("command wound up", "", finishing);
        ExecOutcome {
            ending,
            output,
            errors,
            duration,
            refusals,
            needs,
            audit_failure,
            quarantined,
        }
    }
}

impl Drop for RunningCommand {
    fn drop(&mut self) {
        if !self.finished {
            self.stopper.kill();
            let _ = self.keeper.wait();
            if let Some(watch) = self.watch.take() {
                for put_aside in watch.sweep() {
                    tracing::warn!("{}", put_aside.describe());
                }
            }
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

/// The private home a sandboxed command gets (its holder's, for the
/// session); none unsandboxed, where a command runs with the user's full
/// access and home.
fn private_home(grants: &ExecGrants) -> Result<Option<PathBuf>, ExecError> {
    if !grants.sandboxed {
        return Ok(None);
    }
    let holder = grants
        .audit
        .as_ref()
        .map_or("commands", |scope| scope.plugin.as_str());
    temp_area::home_for(holder, grants.home.as_deref(), &grants.read)
        .map(Some)
        .map_err(|source| ExecError::Setup {
            step: "creating the command's home folder",
            source,
        })
}

/// The process to start, with its scrubbed environment.
fn command_for(
    request: &ExecRequest,
    grants: &ExecGrants,
    cwd: &Path,
    (temp, private_home): (&Path, Option<&Path>),
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
    if let Some(home) = private_home.or(grants.home.as_deref()) {
        command.env("HOME", home);
    }
    command.env("TMPDIR", temp);
    for name in &grants.env {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    for (name, value) in &grants.secrets.0 {
        command.env(name, value);
    }
    if proxy {
        let url = format!("http://127.0.0.1:{PROXY_PORT}");
        for name in PROXY_ENV {
            command.env(name, &url);
        }
    }
    Ok(command)
}

/// Fails closed on a kernel without Landlock (its ABI `abi` 0): no command
/// runs unconfined unless the user turned the sandbox off.
fn landlock_required(abi: i32) -> Result<(), ExecError> {
    if abi < 1 {
        return Err(ExecError::NoLandlock);
    }
    Ok(())
}

/// Why commands get no namespaces here, if they do not: `[exec]
/// namespaces = "off"`, or a system that does not allow user namespaces.
fn without_namespaces(grants: &ExecGrants) -> Option<String> {
    const CONSEQUENCE: &str =
        "so a command cannot get a network of its own whose only way out is capstan's proxy";
    if !grants.namespaces {
        return Some(format!(
            "`[exec] namespaces = \"off\"` runs commands without namespaces, {CONSEQUENCE}"
        ));
    }
    match spawn::user_namespaces() {
        Ok(()) => None,
        Err(code) => Some(format!(
            "this system does not let capstan create user namespaces ({}; see sysctl user.max_user_namespaces and kernel.apparmor_restrict_unprivileged_userns), {CONSEQUENCE}",
            std::io::Error::from_raw_os_error(code)
        )),
    }
}

/// Turns the grants into what the sandbox's children need.
fn sandbox_setup(
    request: &ExecRequest,
    grants: &ExecGrants,
    cwd: &Path,
    temp: &Path,
    home: Option<&Path>,
) -> Result<(Setup, Option<PlantWatch>), ExecError> {
    landlock_required(spawn::landlock_abi())?;
    let wants_net = !request.net.is_empty() || !grants.net.is_empty();
    let no_namespaces = without_namespaces(grants);
    if let Some(why) = &no_namespaces
        && wants_net
    {
        return Err(ExecError::NetworkUnavailable(why.clone()));
    }
    let namespaces = no_namespaces.is_none();
    let workspace = &grants.workspace;
    // Credential files in the folders commands may reach: an empty file is
    // mounted over each with namespaces; without, Landlock is given their
    // folders' other entries one by one.
    let granted: Vec<PathBuf> = grants.read.iter().chain(&grants.write).cloned().collect();
    let hidden = credentials::hidden_in(&granted, grants.home.as_deref(), &granted);
    let mut files = if namespaces || hidden.is_empty() {
        FileGrants {
            read: grants.read.clone(),
            write: grants.write.clone(),
            ..FileGrants::default()
        }
    } else {
        let (read, mut list_only) = credentials::without_hidden(&grants.read, &hidden);
        let (write, listed) = credentials::without_hidden(&grants.write, &hidden);
        list_only.extend(listed);
        FileGrants {
            read,
            write,
            write_opened: Vec::new(),
            list_only,
        }
    };
    let (hidden, empty) = if namespaces && !hidden.is_empty() {
        let empty = temp_area::empty_file().map_err(|source| ExecError::Setup {
            step: "creating the empty file mounted over credential files",
            source,
        })?;
        // Mounted over what each names (the mount follows a link), where
        // that is in a folder commands may reach: elsewhere Landlock
        // refuses it already.
        let targets: Vec<PathBuf> = hidden
            .iter()
            .filter_map(|path| path.canonicalize().ok())
            .filter(|real| granted.iter().any(|folder| real.starts_with(folder)))
            .filter(|real| real.is_file())
            .collect();
        (targets, Some(empty))
    } else {
        (Vec::new(), None)
    };
    files.write.push(temp.to_path_buf());
    files.write.extend(home.map(Path::to_path_buf));
    let exempted: Vec<PathBuf> = request
        .writable_protected
        .iter()
        .map(|name| workspace.join(name))
        .collect();
    let exempt = |path: &PathBuf| exempted.iter().any(|e| path.starts_with(e));
    // Under a write grant, the protected paths at any depth, kept read-only
    // (and looked for again when the command ends); else those at the top,
    // the rest of the workspace being read-only anyway.
    let before = request.write.then(|| protected::scan(workspace));
    let protected_paths = match &before {
        Some(scan) => scan.paths.clone(),
        None => protected::top_level(workspace),
    };
    let mut read_only = Vec::new();
    if namespaces {
        if request.write {
            files.write.push(workspace.clone());
            read_only = protected_paths
                .into_iter()
                .filter(|path| !exempt(path))
                .collect();
        } else if request.writable_protected.is_empty() {
            files.read.push(workspace.clone());
            read_only = vec![workspace.clone()];
        } else {
            // Read-only but for the exempted paths: Landlock alone keeps the
            // rest of the workspace read-only (a read-only mount of it would
            // hold the exempted paths too); the other protected paths are
            // mounted read-only as under a write grant.
            files.read.push(workspace.clone());
            let (writable, protected): (Vec<PathBuf>, Vec<PathBuf>) =
                protected_paths.into_iter().partition(|path| exempt(path));
            files.write.extend(writable);
            read_only = protected;
        }
    } else {
        files
            .read
            .extend(files::PROC_GLOBAL.iter().map(PathBuf::from));
        let (exempted, protected): (Vec<PathBuf>, Vec<PathBuf>) =
            protected_paths.into_iter().partition(|path| exempt(path));
        let protected = if request.write { protected } else { Vec::new() };
        if request.write && protected.is_empty() {
            files.write.push(workspace.clone());
        } else {
            files.read.push(workspace.clone());
            if request.write {
                files.write_opened = files::writable_around(workspace, &protected);
            }
        }
        // Landlock rules add up: an exempted path is writable beneath a
        // read-only workspace.
        files.write.extend(exempted);
    }
    let watch = before.map(|before| PlantWatch {
        workspace: workspace.clone(),
        before,
        exempt: exempted.clone(),
    });
    let ruleset = files::ruleset(&files).map_err(|e| ExecError::Setup {
        step: "building the Landlock rules",
        source: std::io::Error::other(e.to_string()),
    })?;
    let filters = if namespaces {
        syscalls::filters()
    } else {
        syscalls::filters_without_network()
    }
    .map_err(|e| ExecError::Setup {
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
    // Every command with namespaces gets the proxy, granted origins or
    // none, so that a refusal is seen and named however quiet the command
    // is; the proxy listens in a network namespace of the command's own.
    let proxy = namespaces;
    let limits = grants.limits;
    // A PID namespace's pid_max may not be set below the kernel's minimum.
    let pid_max = (u64::from(limits.processes) + 1).max(301);
    // Without a user namespace of its own, RLIMIT_NPROC counts every
    // process of the user: the command gets its limit beyond those (root's
    // processes are not counted at all).
    let processes = if namespaces || uid == 0 {
        u64::from(limits.processes)
    } else {
        u64::from(limits.processes) + tasks_of_user(uid)
    };
    let setup = Setup {
        uid_map: map(uid),
        gid_map: map(gid),
        read_only: read_only
            .iter()
            .map(|p| c_path(p))
            .collect::<Result<_, _>>()?,
        hidden: hidden.iter().map(|p| c_path(p)).collect::<Result<_, _>>()?,
        empty: empty.as_deref().map(c_path).transpose()?,
        cwd: c_path(cwd)?,
        ruleset,
        proc_access: files::read_access().bits(),
        terminal_access: files::device_access().bits(),
        filters,
        pid_max: CString::new(pid_max.to_string()).unwrap_or_default(),
        pid_max_required: uid == 0,
        processes,
        memory: limits.memory,
        file_size: limits.file_size,
        proxy,
        namespaces,
    };
    Ok((setup, watch))
}

/// How many processes and threads user `uid` has (what `RLIMIT_NPROC`
/// counts), read from `/proc`.
fn tasks_of_user(uid: u32) -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut tasks = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.as_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        if !entry.metadata().is_ok_and(|m| m.uid() == uid) {
            continue;
        }
        // The thread count is the 20th field of `stat`, the 18th after
        // the command's closing parenthesis.
        let threads = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|stat| {
                let (_, rest) = stat.rsplit_once(')')?;
                rest.split_whitespace().nth(17)?.parse::<u64>().ok()
            })
            .unwrap_or(1);
        tasks += threads;
    }
    tasks
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::exec::{Cancel, CommandLine, ExecSettings};
    use crate::grants::fs::OwnFolders;

    /// Every command gets a network namespace of its own (its proxy
    /// listens there), so one command cannot reach another over IP, and
    /// user netlink sockets are refused.
    #[test]
    fn commands_have_network_namespaces_of_their_own_and_cannot_reach_each_other() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(
            ws.path().join("listen.py"),
            "import os, socket, select, sys\n\
             print('netns', os.readlink('/proc/self/ns/net'))\n\
             u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('0.0.0.0', 47001))\n\
             t = socket.socket(); t.bind(('0.0.0.0', 47002)); t.listen()\n\
             try:\n    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 2); print('usersock open')\n\
             except OSError as e:\n    print('usersock refused', e.errno)\n\
             open('ready', 'w').close(); sys.stdout.flush()\n\
             r, _, _ = select.select([u, t], [], [], 3)\n\
             print('received' if r else 'nothing')\n",
        )
        .unwrap();
        std::fs::write(
            ws.path().join("send.py"),
            "import os, socket, time\n\
             print('netns', os.readlink('/proc/self/ns/net'))\n\
             while not os.path.exists('ready'): time.sleep(0.02)\n\
             for target in ('127.0.0.1', '0.0.0.0'):\n\
             \x20   try:\n\
             \x20       socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', (target, 47001)); print('udp sent', target)\n\
             \x20   except OSError as e:\n\
             \x20       print('udp', target, e.errno)\n\
             \x20   try:\n\
             \x20       socket.create_connection((target, 47002), timeout=1); print('tcp connected', target)\n\
             \x20   except OSError as e:\n\
             \x20       print('tcp', target, e.errno)\n",
        )
        .unwrap();
        let grants = ExecGrants::resolve(
            &ExecSettings::default(),
            ws.path(),
            None,
            &OwnFolders::default(),
        )
        .unwrap();
        // The system's Python: the sandbox reads the system folders, not
        // a Python installed under a home folder.
        let python = |script: &str| {
            CommandLine::Argv(vec!["/usr/bin/python3".to_string(), script.to_string()])
        };
        let listener = RunningCommand::start(
            &ExecRequest {
                write: true,
                ..ExecRequest::new(python("listen.py"))
            },
            &grants,
        )
        .unwrap();
        let sender = crate::exec::run(
            &ExecRequest::new(python("send.py")),
            &grants,
            &Cancel::new(),
            &mut |_| {},
        )
        .unwrap();
        let heard = listener.wait(&Cancel::new(), &mut |_| {}).output.text();
        let sent = sender.output.text();
        let netns = |text: &str| {
            text.lines()
                .find(|l| l.starts_with("netns "))
                .map(str::to_string)
        };
        assert!(netns(&heard).is_some(), "{heard}");
        assert!(netns(&sent).is_some(), "{sent}");
        assert_ne!(netns(&heard), netns(&sent), "{heard}\n{sent}");
        assert!(heard.contains("usersock refused"), "{heard}");
        assert!(heard.contains("nothing"), "{heard}\n{sent}");
        assert!(!sent.contains("tcp connected"), "{sent}");
    }

    #[test]
    fn without_landlock_commands_are_refused_naming_the_way_out() {
        let Err(error) = landlock_required(0) else {
            panic!("a kernel without Landlock ran a command");
        };
        let message = error.to_string();
        assert!(message.contains("does not enforce Landlock"), "{message}");
        assert!(
            message.contains(
                "does not run them unsandboxed unless you set `[exec] sandbox = \"off\"`"
            ),
            "{message}"
        );
        assert!(landlock_required(1).is_ok());
    }
}
