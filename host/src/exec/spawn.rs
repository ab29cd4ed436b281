//! Starting a command inside its own namespaces, and stopping it: the one
//! file of the exec sandbox with `unsafe` code.
//!
//! With namespaces, [`start`] `clone`s the command's *init* straight into
//! new user, mount, PID, IPC, UTS and network namespaces (where the proxy
//! listens: every command gets the proxy, so a refusal is always seen and
//! named): process 1 of the new PID namespace, which will `exec` the
//! command. When it exits, the kernel kills every process left in the
//! namespace (`setsid`, double-forked, anything). The clone shares
//! capstan's memory (`CLONE_VM | CLONE_VFORK`, on a stack of its own) and
//! the starting thread waits until the init has `exec`ed or failed, so
//! nothing of this large process is copied; every signal is blocked around
//! the clone and the init resets capstan's handlers to the default before
//! it unblocks them. The init dies with the thread that started it
//! (`PR_SET_PDEATHSIG`), maps its own user and group ids into the user
//! namespace, and takes its standard streams. Whether this system allows
//! user namespaces at all is tried once per process ([`user_namespaces`]).
//!
//! Without namespaces, `std::process::Command` forks a keeper
//! ([`tree_keeper`]) in its `pre_exec` hook.
//!
//! The init, still privileged inside its user namespace only, then starts
//! a new session (no controlling terminal), makes the mounts private,
//! mounts a `/proc` of its own PID namespace and a devpts instance of its
//! own on `/dev/pts` (pseudo-terminals of the command's, none of the
//! user's), caps the number of PIDs of the namespace, bind-mounts the read-only paths read-only, brings
//! the loopback up and hands a listening socket for the proxy to the host
//! (when the command may reach the network), sets the resource limits,
//! drops every capability (bounding set, ambient, effective, permitted,
//! inheritable), sets `no_new_privs`, enters the Landlock domain and
//! installs the seccomp filters, then `exec`s the command (searching the
//! command's `PATH` as `execvp` does).
//!
//! # Safety
//!
//! Between `fork` (or `clone`) and `exec` the child of a multi-threaded
//! process may only make async-signal-safe calls: no allocation, no locks;
//! a child sharing capstan's memory writes nothing but its own stack (and
//! the one slot of [`Program`] kept for it). Everything the children need
//! (paths as C strings, the id maps, the Landlock ruleset, the BPF
//! programs, the command's arguments and environment) is prepared before
//! in [`Setup`] and [`Program`]; the code below only reads it and makes
//! raw system calls on stack values.

#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::io::{self, Read};
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

use seccompiler::BpfProgram;

/// The port the proxy listens on inside a command's network namespace
/// (the namespace is the command's own, so the port is always free).
pub(super) const PROXY_PORT: u16 = 3128;

/// Everything the keeper and the init need, prepared before the fork.
pub(super) struct Setup {
    /// The uid map written for the new user namespace (`uid uid 1`).
    pub uid_map: CString,
    /// The gid map (`gid gid 1`).
    pub gid_map: CString,
    /// Folders (or files) bind-mounted read-only over themselves.
    pub read_only: Vec<CString>,
    /// Credential files an empty read-only file ([`Setup::empty`]) is
    /// bind-mounted over.
    pub hidden: Vec<CString>,
    /// The empty file, when there are credential files to hide.
    pub empty: Option<CString>,
    /// The folder the command starts in.
    pub cwd: CString,
    /// The Landlock ruleset the init restricts itself with.
    pub ruleset: OwnedFd,
    /// Landlock access rights granted on the new `/proc` (read).
    pub proc_access: u64,
    /// Landlock access rights granted on the new `/dev/pts` and on
    /// `/dev/ptmx` (a device's).
    pub terminal_access: u64,
    /// The seccomp filters, installed in order.
    pub filters: Vec<BpfProgram>,
    /// The PID namespace's `pid_max`, as written to `/proc/sys/kernel/pid_max`.
    pub pid_max: CString,
    /// Whether failing to cap the namespace's PIDs is fatal (it is for root,
    /// which `RLIMIT_NPROC` does not hold).
    pub pid_max_required: bool,
    /// `RLIMIT_NPROC`.
    pub processes: u64,
    /// `RLIMIT_DATA`.
    pub memory: u64,
    /// `RLIMIT_FSIZE`.
    pub file_size: u64,
    /// Whether the command gets a proxy listener in its network namespace.
    pub proxy: bool,
    /// Whether the command gets namespaces. Without (no user namespaces on
    /// this system, or `[exec] namespaces = "off"`) it runs under Landlock,
    /// seccomp (which then refuses every network socket), `no_new_privs`
    /// and the limits, and its tree is killed through its process group and
    /// a subreaper: see [`tree_keeper`].
    pub namespaces: bool,
}

/// Whether this system lets capstan create user namespaces, or why not
/// (the error's raw OS code): tried once per process, in a child that
/// makes one (with its id maps, as a command's keeper does) and exits.
/// No network namespace is made for the test: making one, and the
/// kernel's tearing it down, costs more than the rest of the test.
pub(super) fn user_namespaces() -> Result<(), i32> {
    static PROBED: std::sync::OnceLock<Result<(), i32>> = std::sync::OnceLock::new();
    *PROBED.get_or_init(|| {
        probe_user_namespaces().map_err(|e| e.raw_os_error().unwrap_or(libc::EPERM))
    })
}

/// Starts a child that makes a user namespace and maps its ids, and reports
/// how that went. The child shares this process's memory (`CLONE_VM`, on
/// a stack of its own, with every signal blocked) while this thread waits
/// for it (`CLONE_VFORK`): nothing of this process is copied.
fn probe_user_namespaces() -> io::Result<()> {
    /// What the child reads, and where it writes its answer.
    struct Probe {
        uid_map: CString,
        gid_map: CString,
        code: i32,
    }
    extern "C" fn probe(probe: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `probe` is the `Probe` below, alive while the caller
        // waits in `clone`; async-signal-safe system calls only.
        unsafe {
            let probe = &mut *probe.cast::<Probe>();
            let made = libc::unshare(libc::CLONE_NEWUSER) == 0
                && write_file(c"/proc/self/setgroups", b"deny")
                && write_file(c"/proc/self/uid_map", probe.uid_map.as_bytes())
                && write_file(c"/proc/self/gid_map", probe.gid_map.as_bytes());
            probe.code = if made {
                0
            } else {
                io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EPERM)
            };
            libc::_exit(0)
        }
    }
    // SAFETY: plain system calls with integer arguments.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let mut answer = Probe {
        uid_map: CString::new(format!("{uid} {uid} 1")).map_err(io::Error::other)?,
        gid_map: CString::new(format!("{gid} {gid} 1")).map_err(io::Error::other)?,
        code: libc::EPERM,
    };
    let stack = Stack::new()?;
    // SAFETY: as for the init (see `start_init`): signals blocked around
    // the clone, the child on its own stack, `answer` alive until it has
    // exited; then it is reaped.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
        let pid = libc::clone(
            probe,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&mut answer as *mut Probe).cast(),
        );
        let error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
        if pid < 0 {
            return Err(error);
        }
        let mut status = 0;
        while libc::waitpid(pid, &mut status, 0) < 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
    }
    drop(stack);
    match answer.code {
        0 => Ok(()),
        code => Err(io::Error::from_raw_os_error(code)),
    }
}

/// A step of the sandbox setup, as reported when it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub(super) enum Step {
    /// `PR_SET_PDEATHSIG`.
    ParentDeath = 1,
    /// `unshare` of the namespaces.
    Namespaces,
    /// Writing the uid and gid maps.
    IdMaps,
    /// Forking the init.
    Fork,
    /// `setsid`.
    Session,
    /// Making the mounts private.
    PrivateMounts,
    /// Mounting `/proc`.
    Proc,
    /// Capping the namespace's PIDs.
    PidLimit,
    /// A read-only bind mount.
    ReadOnlyMount,
    /// Entering the working folder.
    Chdir,
    /// Bringing up the loopback interface.
    Loopback,
    /// Creating and handing over the proxy listener.
    ProxyListener,
    /// `setrlimit`.
    Limits,
    /// Dropping capabilities.
    Capabilities,
    /// `no_new_privs`.
    NoNewPrivs,
    /// Entering the Landlock domain.
    Landlock,
    /// Installing the seccomp filters.
    Seccomp,
    /// Becoming the subreaper of the command's processes.
    Subreaper,
    /// Mounting an empty file over a credential file.
    HideCredential,
}

impl Step {
    fn from_code(code: i32) -> Option<Self> {
        use Step::*;
        [
            ParentDeath,
            Namespaces,
            IdMaps,
            Fork,
            Session,
            PrivateMounts,
            Proc,
            PidLimit,
            ReadOnlyMount,
            Chdir,
            Loopback,
            ProxyListener,
            Limits,
            Capabilities,
            NoNewPrivs,
            Landlock,
            Seccomp,
            Subreaper,
            HideCredential,
        ]
        .into_iter()
        .find(|s| *s as i32 == code)
    }

    /// What the step does, in words.
    pub(super) fn describe(self) -> &'static str {
        match self {
            Step::ParentDeath => "tying the command's life to capstan's",
            Step::Namespaces => {
                "creating user, mount, PID and network namespaces (user namespaces may be disabled: see sysctl user.max_user_namespaces and kernel.apparmor_restrict_unprivileged_userns)"
            }
            Step::IdMaps => "mapping the user and group ids into the user namespace",
            Step::Fork => "starting the command's first process",
            Step::Session => "starting a new session",
            Step::PrivateMounts => "making the mounts private",
            Step::Proc => "mounting /proc for the command's PID namespace",
            Step::PidLimit => {
                "capping the number of processes (needs Linux 6.14+ for a per-namespace pid_max when running as root)"
            }
            Step::ReadOnlyMount => "mounting a protected path read-only",
            Step::Chdir => "entering the working folder",
            Step::Loopback => "bringing up the loopback interface",
            Step::ProxyListener => "creating the proxy's listener",
            Step::Limits => "setting the resource limits",
            Step::Capabilities => "dropping capabilities",
            Step::NoNewPrivs => "setting no_new_privs",
            Step::Landlock => "entering the Landlock domain",
            Step::Seccomp => "installing the seccomp filter",
            Step::Subreaper => "watching the command's processes",
            Step::HideCredential => "mounting an empty file over a credential file",
        }
    }
}

/// The sandbox could not be set up, or the command could not be started.
#[derive(Debug)]
pub(super) struct StartError {
    /// The setup step that failed, if one did (else `exec` failed).
    pub step: Option<Step>,
    /// The system's error.
    pub source: io::Error,
}

/// A started command.
pub(super) struct Started {
    /// What capstan waits for: the init (with namespaces) or the keeper.
    pub keeper: Keeper,
    /// The command's process 1, to kill the whole namespace.
    pub init: Option<InitProcess>,
    /// The listener inside the command's network namespace, for the proxy.
    pub listener: Option<TcpListener>,
    /// Without namespaces: the pipe on which the keeper is told to kill
    /// the command's processes (closing it, capstan exiting included, does
    /// the same).
    pub stop: Option<TreeStop>,
}

/// Tells the keeper of a command run without namespaces to kill every
/// process of the command and exit.
pub(super) struct TreeStop(OwnedFd);

impl TreeStop {
    /// Asks for the kill; the keeper exits when every process is gone.
    pub(super) fn kill(&self) {
        // SAFETY: writes one byte from a stack value to a pipe we own.
        unsafe {
            libc::write(self.0.as_raw_fd(), [1u8].as_ptr().cast(), 1);
        }
    }
}

/// Process 1 of a command's PID namespace, held by a pidfd so a kill can
/// never reach a recycled pid.
pub(super) struct InitProcess {
    pidfd: OwnedFd,
}

impl InitProcess {
    /// Kills the init and with it every process of the namespace.
    pub(super) fn kill(&self) {
        // SAFETY: a plain system call on a descriptor we own; no memory is
        // passed but a null `siginfo`.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            );
        }
    }
}

/// Wakes a waiting thread when a child process exits, without reaping it
/// (a pidfd, polled).
pub(super) struct ExitWatch(Option<OwnedFd>);

impl ExitWatch {
    /// Watches the child `pid` (not yet waited for, so the pid is still
    /// its own).
    pub(super) fn new(pid: u32) -> Self {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return Self(None);
        };
        // SAFETY: a plain system call; the descriptor returned is ours.
        unsafe {
            let fd = libc::syscall(libc::SYS_pidfd_open, pid, 0u32);
            Self(
                RawFd::try_from(fd)
                    .ok()
                    .filter(|fd| *fd >= 0)
                    .map(|fd| OwnedFd::from_raw_fd(fd)),
            )
        }
    }

    /// Waits at most `timeout` for the child to exit; `false` when there
    /// is nothing to wait on (the caller sleeps instead).
    pub(super) fn wait(&self, timeout: std::time::Duration) -> bool {
        let Some(fd) = &self.0 else {
            return false;
        };
        let mut poll = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: polls one stack `pollfd` on a descriptor we own.
        unsafe {
            libc::poll(&mut poll, 1, millis);
        }
        true
    }
}

/// Adds a Landlock rule to `ruleset`: `access` beneath the file or folder
/// `path` was opened on (`O_PATH`).
pub(super) fn add_path_rule(
    ruleset: &OwnedFd,
    path: &std::fs::File,
    access: u64,
) -> io::Result<()> {
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    let rule = PathBeneathAttr {
        allowed_access: access,
        parent_fd: path.as_raw_fd(),
    };
    // SAFETY: the kernel reads the rule, a stack value of the layout it
    // expects, and the two descriptors, which we hold.
    let done = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &rule as *const PathBeneathAttr,
            0u32,
        )
    };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The Landlock ABI the kernel supports, 0 if none.
pub(super) fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with a null attribute and size 0 the call only returns the
    // ABI version; no memory is read or written.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(abi).unwrap_or(0).max(0)
}

/// Kills the process group `pgid` (an unsandboxed command's).
pub(super) fn kill_group(pgid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    if pgid <= 1 {
        return;
    }
    // SAFETY: a plain system call with integer arguments.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// `relative` opened (`O_PATH`) beneath `root`, no link followed.
pub(super) fn open_beneath(
    root: &std::fs::File,
    relative: &std::path::Path,
) -> Option<std::fs::File> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(relative.as_os_str().as_bytes()).ok()?;
    // SAFETY: `open_how` is plain integers, valid zeroed; `name` is a C
    // string and `how` a value of the size given; the descriptor returned
    // is ours alone.
    unsafe {
        let mut how: libc::open_how = std::mem::zeroed();
        how.flags = (libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64;
        how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS;
        let fd = libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            name.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        );
        let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
        Some(std::fs::File::from_raw_fd(fd))
    }
}

/// Message tags on the report pipe.
const TAG_FAILED_STEP: i32 = 2;
/// The error number of the failed step.
const TAG_FAILED_ERRNO: i32 = 4;
/// The init could not `exec` the command: the value is the error number.
const TAG_EXEC_ERROR: i32 = 3;

/// The namespaces a command gets.
const NAMESPACES: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS;

/// The size of the stack the init runs on until it `exec`s the command.
const INIT_STACK: usize = 1024 * 1024;

/// The standard input, output and error of a command.
pub(super) struct ChildIo {
    /// Its standard input; capstan's own when `None`.
    pub stdin: Option<OwnedFd>,
    /// Its standard output.
    pub stdout: OwnedFd,
    /// Its standard error.
    pub stderr: OwnedFd,
}

impl ChildIo {
    /// Gives them to `command`.
    pub(super) fn apply(self, command: &mut Command) {
        use std::process::Stdio;
        command.stdin(self.stdin.map_or_else(Stdio::inherit, Stdio::from));
        command.stdout(Stdio::from(self.stdout));
        command.stderr(Stdio::from(self.stderr));
    }
}

/// The process capstan waits for: the keeper of a command without
/// namespaces (or an unsandboxed command), or the init of one with.
pub(super) enum Keeper {
    /// A process `std` started.
    Child(Child),
    /// A command's init, started by [`start`]: process 1 of its namespace.
    Init(InitChild),
}

/// A command's init, a child of this process not yet waited for (until
/// `status` is set, its pid is still its own).
pub(super) struct InitChild {
    pid: libc::pid_t,
    status: Option<std::process::ExitStatus>,
}

impl Keeper {
    /// Its process id.
    pub(super) fn id(&self) -> u32 {
        match self {
            Keeper::Child(child) => child.id(),
            Keeper::Init(init) => init.pid.unsigned_abs(),
        }
    }

    /// Its status if it has exited (then reaped).
    pub(super) fn try_wait(&mut self) -> io::Result<Option<std::process::ExitStatus>> {
        match self {
            Keeper::Child(child) => child.try_wait(),
            Keeper::Init(init) => init.reap(libc::WNOHANG),
        }
    }

    /// Waits for it to exit.
    pub(super) fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
        match self {
            Keeper::Child(child) => child.wait(),
            Keeper::Init(init) => loop {
                if let Some(status) = init.reap(0)? {
                    break Ok(status);
                }
            },
        }
    }
}

impl InitChild {
    fn reap(&mut self, flags: libc::c_int) -> io::Result<Option<std::process::ExitStatus>> {
        use std::os::unix::process::ExitStatusExt;
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        let mut status = 0;
        // SAFETY: waits for our own child on a stack value.
        let waited = unsafe { libc::waitpid(self.pid, &mut status, flags) };
        if waited == self.pid {
            let status = std::process::ExitStatus::from_raw(status);
            self.status = Some(status);
            return Ok(Some(status));
        }
        if waited == 0 {
            return Ok(None);
        }
        let error = io::Error::last_os_error();
        if error.kind() == io::ErrorKind::Interrupted {
            return Ok(None);
        }
        Err(error)
    }
}

/// Starts `command` (its program, arguments, environment and folder
/// already set) with `io` in the sandbox `setup` describes.
pub(super) fn start(
    command: &mut Command,
    io: ChildIo,
    setup: Setup,
) -> Result<Started, StartError> {
    if setup.namespaces {
        return start_init(command, io, &setup);
    }
    io.apply(command);
    let fail = |source| StartError { step: None, source };
    let (report_read, report_write) = pipe().map_err(fail)?;
    let report = report_write.as_raw_fd();
    let (stop_read, stop_write) = pipe().map_err(fail)?;
    let stop = stop_read.as_raw_fd();
    // SAFETY: the hook runs in the forked child and only makes
    // async-signal-safe system calls on data prepared before the fork (see
    // the module documentation).
    unsafe {
        command.pre_exec(move || tree_keeper(&setup, report, stop));
    }
    let spawned = command.spawn();
    drop(report_write);
    drop(stop_read);
    let report = read_report(report_read);
    let keeper = match spawned {
        Ok(child) => child,
        Err(source) => {
            return Err(StartError {
                step: report.failed,
                source,
            });
        }
    };
    Ok(Started {
        keeper: Keeper::Child(keeper),
        init: None,
        listener: None,
        stop: Some(TreeStop(stop_write)),
    })
}

/// What the init needs to `exec` the command, as C strings and arrays of
/// pointers to them, made before the clone.
struct Program {
    /// The paths to try, in order: the program itself if its name holds a
    /// `/`, else each folder of the command's `PATH` joined with it.
    candidates: Vec<CString>,
    /// The arguments (the program's name first), null-terminated.
    argv: Vec<*const libc::c_char>,
    /// `/bin/sh`, a slot for the candidate, the arguments but the first:
    /// a script without `#!` runs with `sh`, as `execvp` does.
    sh_argv: Vec<*const libc::c_char>,
    /// The environment, `NAME=value`, null-terminated.
    envp: Vec<*const libc::c_char>,
    /// What the pointers point to.
    _strings: Vec<CString>,
}

impl Program {
    fn of(command: &Command) -> io::Result<Self> {
        use std::os::unix::ffi::OsStrExt;
        let c = |bytes: &[u8]| {
            CString::new(bytes).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "an argument holds a NUL byte")
            })
        };
        let program = command.get_program().as_bytes();
        let mut args = vec![c(program)?];
        for arg in command.get_args() {
            args.push(c(arg.as_bytes())?);
        }
        let mut env = Vec::new();
        let mut path = None;
        for (name, value) in command.get_envs() {
            let Some(value) = value else { continue };
            if name == "PATH" {
                path = Some(value.as_bytes().to_vec());
            }
            let mut pair = name.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(value.as_bytes());
            env.push(c(&pair)?);
        }
        let mut candidates = Vec::new();
        if program.contains(&b'/') {
            candidates.push(c(program)?);
        } else if !program.is_empty() {
            let path = path.unwrap_or_else(|| b"/usr/local/bin:/usr/bin:/bin".to_vec());
            for folder in path.split(|b| *b == b':') {
                let mut joined = folder.to_vec();
                if !joined.is_empty() {
                    joined.push(b'/');
                }
                joined.extend_from_slice(program);
                candidates.push(c(&joined)?);
            }
        }
        let sh = c(b"/bin/sh")?;
        let argv: Vec<*const libc::c_char> = args
            .iter()
            .map(|a| a.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect();
        let sh_argv: Vec<*const libc::c_char> = [sh.as_ptr(), std::ptr::null()]
            .into_iter()
            .chain(args.iter().skip(1).map(|a| a.as_ptr()))
            .chain(std::iter::once(std::ptr::null()))
            .collect();
        let envp: Vec<*const libc::c_char> = env
            .iter()
            .map(|e| e.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect();
        let mut strings = args;
        strings.extend(env);
        strings.push(sh);
        Ok(Self {
            candidates,
            argv,
            sh_argv,
            envp,
            _strings: strings,
        })
    }
}

/// What the init reads (and, for `sh_argv`, writes) until it `exec`s: it
/// shares capstan's memory, while capstan's starting thread waits.
struct InitContext<'a> {
    setup: &'a Setup,
    program: &'a mut Program,
    report: RawFd,
    socket: Option<RawFd>,
    /// The descriptors for 0, 1 and 2; -1 keeps capstan's.
    io: [RawFd; 3],
}

/// Starts the command's init directly in its namespaces: `clone` with
/// `CLONE_VM | CLONE_VFORK`, so nothing of this (large) process is copied;
/// this thread waits until the init has `exec`ed the command or failed.
fn start_init(command: &Command, io: ChildIo, setup: &Setup) -> Result<Started, StartError> {
    let fail = |source| StartError { step: None, source };
    let mut program = Program::of(command).map_err(fail)?;
    let (report_read, report_write) = pipe().map_err(fail)?;
    let pair = if setup.proxy {
        Some(socket_pair().map_err(fail)?)
    } else {
        None
    };
    let mut context = InitContext {
        setup,
        program: &mut program,
        report: report_write.as_raw_fd(),
        socket: pair.as_ref().map(|(_, child)| child.as_raw_fd()),
        io: [
            io.stdin.as_ref().map_or(-1, AsRawFd::as_raw_fd),
            io.stdout.as_raw_fd(),
            io.stderr.as_raw_fd(),
        ],
    };
    let stack = Stack::new().map_err(fail)?;
    let mut pidfd: RawFd = -1;
    // SAFETY: every signal is blocked around the clone so that no handler
    // of capstan's runs in the init, which shares its memory; the init
    // resets them before unblocking. The init runs `init_main` on `stack`
    // (ours until it has `exec`ed or exited: `CLONE_VFORK` holds this
    // thread until then), reading `context`, which outlives the call.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
        let pid = libc::clone(
            init_main,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | NAMESPACES | libc::SIGCHLD,
            (&mut context as *mut InitContext).cast(),
            &mut pidfd as *mut RawFd,
        );
        let error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
        if pid < 0 {
            return Err(StartError {
                step: Some(Step::Namespaces),
                source: error,
            });
        }
        pid
    };
    drop(stack);
    drop(report_write);
    drop(io);
    // SAFETY: CLONE_PIDFD gave us this descriptor, ours alone.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    let (parent_socket, child_socket) = match pair {
        Some((parent_end, child_end)) => (Some(parent_end), Some(child_end)),
        None => (None, None),
    };
    drop(child_socket);
    let report = read_report(report_read);
    let mut init = InitChild { pid, status: None };
    if report.failed.is_some() || report.exec_error.is_some() {
        let _ = init.reap(0);
        return Err(StartError {
            step: report.failed,
            source: io::Error::from_raw_os_error(
                report
                    .exec_error
                    .or(report.failed_errno)
                    .unwrap_or(libc::EPERM),
            ),
        });
    }
    let listener = match parent_socket {
        Some(socket) => match receive_listener(&socket) {
            Ok(listener) => Some(listener),
            Err(source) => {
                InitProcess {
                    pidfd: pidfd.try_clone().map_err(fail)?,
                }
                .kill();
                let _ = init.reap(0);
                return Err(StartError {
                    step: Some(Step::ProxyListener),
                    source,
                });
            }
        },
        None => None,
    };
    Ok(Started {
        keeper: Keeper::Init(init),
        init: Some(InitProcess { pidfd }),
        listener,
        stop: None,
    })
}

/// The init's stack: mapped for the clone, unmapped once the init has
/// `exec`ed or exited.
struct Stack {
    base: *mut libc::c_void,
}

impl Stack {
    fn new() -> io::Result<Self> {
        // SAFETY: an anonymous private mapping; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                INIT_STACK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { base })
    }

    /// Its top, where a stack growing down starts (16-byte aligned).
    fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the end of the mapping, not dereferenced here.
        unsafe { self.base.cast::<u8>().add(INIT_STACK).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `new`, no longer in use.
        unsafe {
            libc::munmap(self.base, INIT_STACK);
        }
    }
}

/// What the keeper and the init reported.
struct Report {
    failed: Option<Step>,
    /// The error of the failed step, when the init sent it.
    failed_errno: Option<i32>,
    /// Why the init could not `exec` the command.
    exec_error: Option<i32>,
}

/// Reads the report pipe to its end: every writer has exec'd or exited.
fn read_report(read: OwnedFd) -> Report {
    let mut file = std::fs::File::from(read);
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    let mut report = Report {
        failed: None,
        failed_errno: None,
        exec_error: None,
    };
    for message in bytes.chunks_exact(8) {
        let tag = i32::from_ne_bytes([message[0], message[1], message[2], message[3]]);
        let value = i32::from_ne_bytes([message[4], message[5], message[6], message[7]]);
        match tag {
            TAG_FAILED_STEP => report.failed = report.failed.or(Step::from_code(value)),
            TAG_FAILED_ERRNO => report.failed_errno = report.failed_errno.or(Some(value)),
            TAG_EXEC_ERROR => report.exec_error = Some(value),
            _ => {}
        }
    }
    report
}

/// A pipe, both ends close-on-exec.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a two-element array, as pipe2 requires.
    let done = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both are open descriptors nobody else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A Unix datagram socket pair, close-on-exec, to hand the listener over.
fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a two-element array, as socketpair requires.
    let done = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: socketpair succeeded, so both are open descriptors nobody
    // else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Space for one descriptor in a control message, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct ControlBuffer([u8; 64]);

/// Receives the listener the init sent over `socket`.
fn receive_listener(socket: &OwnedFd) -> io::Result<TcpListener> {
    let mut byte = [0u8; 1];
    let mut control = ControlBuffer([0; 64]);
    // SAFETY: every pointer in `message` points to a local buffer of the
    // size given; the control message is read only within the buffer
    // (CMSG_FIRSTHDR/CMSG_DATA) and only when the kernel filled it.
    unsafe {
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.0.as_mut_ptr().cast();
        message.msg_controllen = control.0.len() as _;
        let received = libc::recvmsg(
            socket.as_raw_fd(),
            &mut message,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        );
        if received < 0 {
            return Err(io::Error::last_os_error());
        }
        let header = libc::CMSG_FIRSTHDR(&message);
        if header.is_null()
            || (*header).cmsg_level != libc::SOL_SOCKET
            || (*header).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(io::Error::other("the sandbox sent no listener"));
        }
        let fd: RawFd = std::ptr::read_unaligned(libc::CMSG_DATA(header).cast());
        Ok(TcpListener::from(OwnedFd::from_raw_fd(fd)))
    }
}

// ---- Below: code that runs between fork and exec. -------------------------

/// Reports a failed step on the report pipe and returns the error.
fn failed(report: RawFd, step: Step) -> io::Result<()> {
    let error = io::Error::last_os_error();
    send(report, TAG_FAILED_STEP, step as i32);
    send(
        report,
        TAG_FAILED_ERRNO,
        error.raw_os_error().unwrap_or(libc::EPERM),
    );
    Err(error)
}

/// Writes one message to the report pipe.
fn send(report: RawFd, tag: i32, value: i32) {
    let mut message = [0u8; 8];
    message[..4].copy_from_slice(&tag.to_ne_bytes());
    message[4..].copy_from_slice(&value.to_ne_bytes());
    // SAFETY: writes 8 bytes from a stack buffer.
    unsafe {
        libc::write(report, message.as_ptr().cast(), message.len());
    }
}

/// Checks a system call's result: `-1` is a failure of `step`.
fn check(report: RawFd, step: Step, result: libc::c_long) -> io::Result<()> {
    if result == -1 {
        return failed(report, step);
    }
    Ok(())
}

/// Writes `data` to the file `path` (a /proc file).
fn write_file(path: &CStr, data: &[u8]) -> bool {
    // SAFETY: `path` is a C string; `data` a slice we only read.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let written = libc::write(fd, data.as_ptr().cast(), data.len());
        libc::close(fd);
        usize::try_from(written).is_ok_and(|n| n == data.len())
    }
}

/// The init's first code, on its own stack, sharing capstan's memory
/// (`CLONE_VM`) while capstan's starting thread waits: capstan's signal
/// handlers reset, the id maps of its user namespace written, its standard
/// descriptors set, then [`init_process`] and `exec`. Never returns: it
/// `exec`s or exits, having reported why on the report pipe.
extern "C" fn init_main(context: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `context` is the `InitContext` `start_init` passed, alive
    // while this thread runs (the caller waits in `clone`). Only
    // async-signal-safe system calls follow, on it and on stack values.
    unsafe {
        let context = &mut *context.cast::<InitContext>();
        let report = context.report;
        // No handler of capstan's may run here: reset to the default what
        // had one (what was ignored stays so across exec, as always), and
        // SIGPIPE, which Rust ignores; then the mask `std` gives commands.
        for signal in 1..=libc::SIGRTMAX() {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut action) != 0 {
                continue;
            }
            if signal == libc::SIGPIPE
                || (action.sa_sigaction != libc::SIG_DFL && action.sa_sigaction != libc::SIG_IGN)
            {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        if check(
            report,
            Step::ParentDeath,
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0).into(),
        )
        .is_err()
        {
            libc::_exit(127);
        }
        // capstan died before the line above: its end of the report pipe
        // is closed (the init, in a PID namespace of its own, has no parent
        // to ask about).
        let mut peer = libc::pollfd {
            fd: report,
            events: 0,
            revents: 0,
        };
        if libc::poll(&mut peer, 1, 0) > 0 && peer.revents & libc::POLLERR != 0 {
            libc::_exit(1);
        }
        let setup = context.setup;
        if !write_file(c"/proc/self/setgroups", b"deny")
            || !write_file(c"/proc/self/uid_map", setup.uid_map.as_bytes())
            || !write_file(c"/proc/self/gid_map", setup.gid_map.as_bytes())
        {
            let _ = failed(report, Step::IdMaps);
            libc::_exit(127);
        }
        for (target, fd) in context.io.into_iter().enumerate() {
            let target = target as RawFd;
            if fd < 0 {
                continue;
            }
            let done = if fd == target {
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, target)
            };
            if done < 0 {
                send(
                    report,
                    TAG_EXEC_ERROR,
                    io::Error::last_os_error()
                        .raw_os_error()
                        .unwrap_or(libc::EBADF),
                );
                libc::_exit(127);
            }
        }
        if init_process(setup, report, context.socket).is_err() {
            libc::_exit(127);
        }
        let error = exec_program(context.program);
        send(report, TAG_EXEC_ERROR, error);
        libc::_exit(127)
    }
}

/// `exec`s `program` as `execvp` would (each candidate in turn; a file
/// without `#!` that the kernel will not run, with `/bin/sh`); returns
/// the error if none could be.
///
/// # Safety
///
/// Async-signal-safe; called by the init only.
unsafe fn exec_program(program: &mut Program) -> i32 {
    let mut denied = false;
    let mut last = libc::ENOENT;
    // SAFETY: every pointer is to a C string or a null-terminated array of
    // them, made before the clone and alive until `exec`.
    unsafe {
        for candidate in &program.candidates {
            libc::execve(
                candidate.as_ptr(),
                program.argv.as_ptr(),
                program.envp.as_ptr(),
            );
            let error = io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::ENOENT);
            match error {
                libc::EACCES => denied = true,
                libc::ENOENT | libc::ESTALE | libc::ENOTDIR | libc::ENODEV | libc::ETIMEDOUT => {}
                libc::ENOEXEC => {
                    program.sh_argv[1] = candidate.as_ptr();
                    libc::execve(
                        program.sh_argv[0],
                        program.sh_argv.as_ptr(),
                        program.envp.as_ptr(),
                    );
                    return io::Error::last_os_error()
                        .raw_os_error()
                        .unwrap_or(libc::ENOEXEC);
                }
                other => return other,
            }
            last = error;
        }
    }
    if denied { libc::EACCES } else { last }
}

/// The keeper of a command run without namespaces: the subreaper of the
/// command's processes, so that every one whose parent dies (`setsid`,
/// double-forked, `nohup`) becomes its child rather than escaping to
/// capstan's parent. It forks the command's first process, which starts a
/// session and process group of its own, and waits until that process
/// exits or capstan asks for a kill on the `stop` pipe (or closes it by
/// exiting); then it kills the process group and every process it is the
/// parent of, over and over until none is left, and exits with the first
/// process's status. The command cannot signal the keeper: it lies outside
/// the command's Landlock domain.
fn tree_keeper(setup: &Setup, report: RawFd, stop: RawFd) -> io::Result<()> {
    // SAFETY: async-signal-safe system calls only (see the module
    // documentation); pointers are to stack values.
    unsafe {
        check(
            report,
            Step::Subreaper,
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0).into(),
        )?;
        let first = libc::fork();
        if first < 0 {
            return failed(report, Step::Fork);
        }
        if first == 0 {
            libc::close(stop);
            return command_process(setup, report);
        }
        let pidfd = libc::syscall(libc::SYS_pidfd_open, first, 0u32);
        let Ok(pidfd) = RawFd::try_from(pidfd) else {
            libc::kill(first, libc::SIGKILL);
            send(report, TAG_FAILED_STEP, Step::Subreaper as i32);
            libc::_exit(127);
        };
        if pidfd < 0 {
            libc::kill(first, libc::SIGKILL);
            send(report, TAG_FAILED_STEP, Step::Subreaper as i32);
            libc::_exit(127);
        }
        // Nothing but the stop pipe and the pidfd: holding the command's
        // output pipe would keep it open after the command ends.
        let (low, high) = (stop.min(pidfd), stop.max(pidfd));
        let (low, high) = (low as u32, high as u32);
        if low > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, low - 1, 0u32);
        }
        if high > low + 1 {
            libc::syscall(libc::SYS_close_range, low + 1, high - 1, 0u32);
        }
        libc::syscall(libc::SYS_close_range, high + 1, u32::MAX, 0u32);
        let mut fds = [
            libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        while libc::poll(fds.as_mut_ptr(), 2, -1) < 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
        libc::_exit(end_tree(first));
    }
}

/// Kills every process of the tree below the keeper and reaps them all;
/// returns the exit code of `first` (`128 + signal` if killed).
///
/// # Safety
///
/// Called by the keeper only, between fork and exit.
unsafe fn end_tree(first: libc::pid_t) -> i32 {
    let mut code = 128 + libc::SIGKILL;
    // SAFETY: async-signal-safe system calls on stack values.
    unsafe {
        let keeper = libc::getpid();
        // The first process's group, while its pid (the group's id) cannot
        // be reused: the first process is not reaped yet.
        libc::kill(-first, libc::SIGKILL);
        let mut status = 0;
        let mut record = |reaped: libc::pid_t, status: libc::c_int| {
            if reaped == first {
                if libc::WIFEXITED(status) {
                    code = libc::WEXITSTATUS(status);
                } else if libc::WIFSIGNALED(status) {
                    code = 128 + libc::WTERMSIG(status);
                }
            }
        };
        loop {
            // Reap what has died; when nothing is left, the tree is gone.
            let reaped = libc::waitpid(-1, &mut status, libc::WNOHANG);
            if reaped > 0 {
                record(reaped, status);
                continue;
            }
            if reaped < 0 {
                if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                break;
            }
            // Children left alive: those that left the group, or were
            // orphaned to the keeper. Kill them, then wait for one to die
            // (its own children are then the keeper's, for the next turn).
            kill_children(keeper);
            let reaped = libc::waitpid(-1, &mut status, 0);
            if reaped > 0 {
                record(reaped, status);
            } else if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
    }
    code
}

/// A buffer for `getdents64`, aligned for its records.
#[repr(C, align(8))]
struct DirentBuffer([u8; 4096]);

/// Sends `SIGKILL` to every process whose parent is `parent`, found by
/// reading `/proc` (the one list of a process's children the kernel always
/// offers).
///
/// # Safety
///
/// Async-signal-safe; called by the keeper only.
unsafe fn kill_children(parent: libc::pid_t) {
    // SAFETY: `buffer` is a stack buffer of the size given; records are
    // read within the length the kernel returned.
    unsafe {
        let dir = libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if dir < 0 {
            return;
        }
        let mut buffer = DirentBuffer([0; 4096]);
        loop {
            let read = libc::syscall(
                libc::SYS_getdents64,
                dir,
                buffer.0.as_mut_ptr(),
                buffer.0.len(),
            );
            let Ok(read) = usize::try_from(read) else {
                break;
            };
            if read == 0 {
                break;
            }
            let mut offset = 0;
            while offset + 19 < read {
                let length = usize::from(u16::from_ne_bytes([
                    buffer.0[offset + 16],
                    buffer.0[offset + 17],
                ]));
                if length == 0 || offset + length > read {
                    break;
                }
                let name = &buffer.0[offset + 19..offset + length];
                if let Some(pid) = parse_pid(name)
                    && parent_of(pid) == Some(parent)
                {
                    libc::kill(pid, libc::SIGKILL);
                }
                offset += length;
            }
        }
        libc::close(dir);
    }
}

/// The pid a `/proc` entry's name (NUL-terminated) spells, if it is one.
fn parse_pid(name: &[u8]) -> Option<libc::pid_t> {
    let mut pid: libc::pid_t = 0;
    let mut digits = 0;
    for byte in name {
        match byte {
            b'0'..=b'9' => {
                pid = pid
                    .checked_mul(10)?
                    .checked_add(libc::pid_t::from(byte - b'0'))?;
                digits += 1;
            }
            0 => break,
            _ => return None,
        }
    }
    (digits > 0).then_some(pid)
}

/// The parent of process `pid`, read from `/proc/PID/stat`.
fn parent_of(pid: libc::pid_t) -> Option<libc::pid_t> {
    let mut path = [0u8; 32];
    let prefix = b"/proc/";
    path[..prefix.len()].copy_from_slice(prefix);
    let mut at = prefix.len();
    let mut digits = [0u8; 12];
    let mut count = 0;
    let mut rest = pid;
    loop {
        digits[count] = b'0' + u8::try_from(rest % 10).ok()?;
        count += 1;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for digit in digits[..count].iter().rev() {
        path[at] = *digit;
        at += 1;
    }
    path[at..at + 5].copy_from_slice(b"/stat");
    let mut stat = [0u8; 512];
    // SAFETY: `path` is NUL-terminated (zero-filled past what was
    // written); `stat` a stack buffer of the size given.
    let read = unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let read = libc::read(fd, stat.as_mut_ptr().cast(), stat.len());
        libc::close(fd);
        read
    };
    let stat = &stat[..usize::try_from(read).ok()?];
    // "PID (COMMAND) STATE PPID ...": the command may hold anything, so
    // read from its last ')'.
    let close = stat.iter().rposition(|b| *b == b')')?;
    let mut fields = stat[close + 1..]
        .split(|b| *b == b' ')
        .filter(|f| !f.is_empty());
    let _state = fields.next()?;
    let mut parent: libc::pid_t = 0;
    for byte in fields.next()? {
        if !byte.is_ascii_digit() {
            return None;
        }
        parent = parent
            .checked_mul(10)?
            .checked_add(libc::pid_t::from(byte - b'0'))?;
    }
    Some(parent)
}

/// Capability sets for `capset`, version 3 (two 32-bit words each).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `struct landlock_path_beneath_attr` (packed in the kernel's header).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Process 1 of the namespace: everything up to `exec`.
fn init_process(setup: &Setup, report: RawFd, socket: Option<RawFd>) -> io::Result<()> {
    // SAFETY: async-signal-safe system calls only (see the module
    // documentation); pointers are to C strings prepared before the fork
    // and to stack values.
    unsafe {
        // Nothing inherited reaches the command but what `std` set up.
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        check(
            report,
            Step::ParentDeath,
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0).into(),
        )?;
        check(report, Step::Session, libc::setsid().into())?;
        check(
            report,
            Step::PrivateMounts,
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
            .into(),
        )?;
        check(
            report,
            Step::Proc,
            libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            )
            .into(),
        )?;
        // The command's own pseudo-terminals: a new devpts instance over
        // the host's, which holds the user's terminals (capstan's
        // included). `/dev/ptmx` then makes terminals in it (the kernel
        // takes the instance mounted on `pts` beside it). If it cannot be
        // mounted the command gets no pseudo-terminal: the host's
        // `/dev/pts` and `/dev/ptmx` are never in its rules.
        let terminals = libc::mount(
            c"devpts".as_ptr(),
            c"/dev/pts".as_ptr(),
            c"devpts".as_ptr(),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            c"newinstance,ptmxmode=0666,mode=0620,max=256"
                .as_ptr()
                .cast(),
        ) == 0;
        if !write_file(c"/proc/sys/kernel/pid_max", setup.pid_max.as_bytes())
            && setup.pid_max_required
        {
            return failed(report, Step::PidLimit);
        }
        for path in &setup.read_only {
            bind_read_only(path, report)?;
        }
        if let Some(empty) = &setup.empty {
            for path in &setup.hidden {
                bind_over(empty, path, Step::HideCredential, report)?;
            }
        }
        check(report, Step::Chdir, libc::chdir(setup.cwd.as_ptr()).into())?;
        if let Some(socket) = socket {
            loopback_up(report)?;
            hand_over_listener(socket, report)?;
        }
        // The new /proc and devpts are other file systems than the ones
        // the ruleset was built against: grant them here.
        let proc_fd = libc::open(c"/proc".as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
        if proc_fd < 0 {
            return failed(report, Step::Landlock);
        }
        let granted = grant_opened(setup, proc_fd, setup.proc_access);
        libc::close(proc_fd);
        check(report, Step::Landlock, granted)?;
        if terminals {
            for device in super::files::TERMINAL_DEVICES {
                let fd = libc::open(device.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
                if fd < 0 {
                    continue;
                }
                let granted = grant_opened(setup, fd, setup.terminal_access);
                libc::close(fd);
                check(report, Step::Landlock, granted)?;
            }
        }
    }
    confine(setup, report)
}

/// Adds a Landlock rule granting `access` beneath `fd` (opened `O_PATH`)
/// to the command's ruleset: the system call's result.
///
/// # Safety
///
/// Async-signal-safe; `fd` is an open descriptor.
unsafe fn grant_opened(setup: &Setup, fd: RawFd, access: u64) -> libc::c_long {
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    let rule = PathBeneathAttr {
        allowed_access: access,
        parent_fd: fd,
    };
    // SAFETY: the kernel reads the rule, a stack value of the layout it
    // expects, and two descriptors we hold.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            setup.ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &rule as *const PathBeneathAttr,
            0u32,
        )
    }
}

/// The first process of a command run without namespaces: everything up
/// to `exec`. Its parent, the keeper, kills what is left of its tree.
fn command_process(setup: &Setup, report: RawFd) -> io::Result<()> {
    // SAFETY: async-signal-safe system calls only (see the module
    // documentation).
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        check(
            report,
            Step::ParentDeath,
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0).into(),
        )?;
        check(report, Step::Session, libc::setsid().into())?;
        check(report, Step::Chdir, libc::chdir(setup.cwd.as_ptr()).into())?;
    }
    confine(setup, report)
}

/// What every command gets last: limits, no capabilities, `no_new_privs`,
/// the Landlock domain, the seccomp filters.
fn confine(setup: &Setup, report: RawFd) -> io::Result<()> {
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    // SAFETY: async-signal-safe system calls only (see the module
    // documentation); pointers are to stack values and to data prepared
    // before the fork.
    unsafe {
        let limits = [
            (libc::RLIMIT_NPROC, setup.processes),
            (libc::RLIMIT_DATA, setup.memory),
            (libc::RLIMIT_FSIZE, setup.file_size),
            (libc::RLIMIT_CORE, 0),
        ];
        for (resource, value) in limits {
            let limit = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            check(
                report,
                Step::Limits,
                libc::setrlimit(resource, &limit).into(),
            )?;
        }
        for capability in 0..64 {
            // Past the last capability the kernel answers EINVAL.
            libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0);
        }
        check(
            report,
            Step::Capabilities,
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            )
            .into(),
        )?;
        check(
            report,
            Step::NoNewPrivs,
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).into(),
        )?;
        check(
            report,
            Step::Landlock,
            libc::syscall(
                libc::SYS_landlock_restrict_self,
                setup.ruleset.as_raw_fd(),
                0u32,
            ),
        )?;
        let header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        check(
            report,
            Step::Capabilities,
            libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()),
        )?;
        for filter in &setup.filters {
            let program = libc::sock_fprog {
                len: filter.len() as libc::c_ushort,
                filter: filter.as_ptr() as *mut libc::sock_filter,
            };
            check(
                report,
                Step::Seccomp,
                libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &program as *const libc::sock_fprog,
                    0,
                    0,
                )
                .into(),
            )?;
        }
    }
    Ok(())
}

/// Bind-mounts `path` over itself, read-only, keeping the flags the mount
/// it lies on has (a user namespace may not clear them).
fn bind_read_only(path: &CStr, report: RawFd) -> io::Result<()> {
    bind_over(path, path, Step::ReadOnlyMount, report)
}

/// Bind-mounts `source` over `path`, read-only, keeping the flags the
/// mount it lies on has; a failure is reported as `step`.
fn bind_over(source: &CStr, path: &CStr, step: Step, report: RawFd) -> io::Result<()> {
    // SAFETY: `source` and `path` are C strings; `stat` a zeroed stack
    // value the kernel fills.
    unsafe {
        check(
            report,
            step,
            libc::mount(
                source.as_ptr(),
                path.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            )
            .into(),
        )?;
        let mut stat: libc::statvfs = std::mem::zeroed();
        check(report, step, libc::statvfs(path.as_ptr(), &mut stat).into())?;
        let kept = [
            (libc::ST_NOSUID, libc::MS_NOSUID),
            (libc::ST_NODEV, libc::MS_NODEV),
            (libc::ST_NOEXEC, libc::MS_NOEXEC),
            (libc::ST_NOATIME, libc::MS_NOATIME),
            (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
            (libc::ST_RELATIME, libc::MS_RELATIME),
        ];
        let mut flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY;
        for (st, ms) in kept {
            if stat.f_flag & st != 0 {
                flags |= ms;
            }
        }
        check(
            report,
            step,
            libc::mount(
                std::ptr::null(),
                path.as_ptr(),
                std::ptr::null(),
                flags,
                std::ptr::null(),
            )
            .into(),
        )
    }
}

/// Brings the namespace's loopback interface up.
fn loopback_up(report: RawFd) -> io::Result<()> {
    // SAFETY: `request` is a zeroed stack `ifreq` whose name we fill
    // within its bounds; the kernel reads and writes only that value.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return failed(report, Step::Loopback);
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        request.ifr_name[0] = b'l' as libc::c_char;
        request.ifr_name[1] = b'o' as libc::c_char;
        if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut request) < 0 {
            libc::close(fd);
            return failed(report, Step::Loopback);
        }
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(fd, libc::SIOCSIFFLAGS, &request) < 0 {
            libc::close(fd);
            return failed(report, Step::Loopback);
        }
        libc::close(fd);
    }
    Ok(())
}

/// Listens on 127.0.0.1:[`PROXY_PORT`] in the namespace and sends the
/// listening socket to the host over `socket`.
fn hand_over_listener(socket: RawFd, report: RawFd) -> io::Result<()> {
    // SAFETY: the address, the buffers and the control message are stack
    // values of the sizes given; CMSG_* stay within `control`.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return failed(report, Step::ProxyListener);
        }
        let address = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: PROXY_PORT.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
            },
            sin_zero: [0; 8],
        };
        if libc::bind(
            fd,
            (&address as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) != 0
            || libc::listen(fd, 128) != 0
        {
            libc::close(fd);
            return failed(report, Step::ProxyListener);
        }
        let mut byte = [0u8; 1];
        let mut control = ControlBuffer([0; 64]);
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.0.as_mut_ptr().cast();
        message.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
        let header = libc::CMSG_FIRSTHDR(&message);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<RawFd>(), fd);
        let sent = libc::sendmsg(socket, &message, libc::MSG_NOSIGNAL);
        libc::close(fd);
        if sent < 0 {
            return failed(report, Step::ProxyListener);
        }
    }
    Ok(())
}
