//! Shared pieces of the end-to-end tests: a temporary home and workspace per
//! test, the real `capstan` binary, and fixture plugins built from source.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod agent_sdk;
pub mod fastmcp;
pub mod git_server;
pub mod load;
pub mod mock_model;
pub mod running;
pub mod terminal;

use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Output};
use std::sync::{Mutex, OnceLock};

use assert_cmd::Command;
use tempfile::TempDir;

/// The repository's root folder.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Cargo's target folder for this build.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

/// A compile cache shared by all tests, so each component is compiled once
/// per build rather than once per test. Entries are content-addressed and
/// written atomically, so sharing is safe.
pub fn shared_compile_cache() -> PathBuf {
    target_dir().join("test-compile-cache")
}

/// Gives the home `data` the key of the shared compile cache (see
/// [`shared_compile_cache`]): artifacts are signed with the key of the data
/// folder, so homes share compiled components only if they share the key.
pub fn share_compile_cache_key(data: &Path) {
    let shared = shared_home();
    capstan::sandbox::CacheKey::load_or_create(&shared.compile_cache_key()).unwrap();
    let home = capstan::home::Home::at(data.to_path_buf(), data.join("cache"));
    std::fs::copy(shared.compile_cache_key(), home.compile_cache_key()).unwrap();
}

/// A home for in-process sandboxes sharing the test compile cache: its
/// `compiled` folder holds the components, and its key signs them.
pub fn shared_home() -> capstan::home::Home {
    capstan::home::Home::at(shared_compile_cache(), shared_compile_cache())
}

/// Builds the fixture plugin `tests/fixtures/NAME` for wasm32-wasip2 (once
/// per test process) and returns the component's path.
pub fn fixture(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<Vec<(String, PathBuf)>>> = OnceLock::new();
    let built = BUILT.get_or_init(|| Mutex::new(Vec::new()));
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, path)) = built.iter().find(|(n, _)| n == name) {
        return path.clone();
    }
    let target = target_dir().join("wasm-fixtures");
    let manifest = repo_root()
        .join("tests/fixtures")
        .join(name)
        .join("Cargo.toml");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = StdCommand::new(cargo)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--manifest-path",
        ])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("run cargo to build a fixture");
    assert!(
        output.status.success(),
        "building fixture {name} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let path = target
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", name.replace('-', "_")));
    assert!(path.is_file(), "fixture {name} built no {}", path.display());
    built.push((name.to_string(), path.clone()));
    path
}

/// A temporary home and workspace for one test.
pub struct Env {
    /// `$CAPSTAN_HOME` (and `$HOME`) for the test.
    pub home: TempDir,
    /// The workspace folder the tools see.
    pub ws: TempDir,
    /// A folder beside the workspace that tools must not reach.
    pub outside: TempDir,
}

/// Environment variables that choose a model; removed from every session
/// run, so the developer's own keys never leak into (or steer) a test.
pub const MODEL_VARS: [&str; 6] = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_MODEL",
];

impl Env {
    /// `capstan -p PROMPT` against a mock Anthropic server at `base_url`
    /// with `api_key` and model `model`, without colours and without the
    /// developer's own model variables.
    pub fn anthropic_session(
        &self,
        base_url: &str,
        api_key: &str,
        model: &str,
        prompt: &str,
    ) -> Command {
        Command::from_std(self.anthropic_session_std(base_url, api_key, model, prompt))
    }

    /// [`Env::anthropic_session`] as a `std` command, for a test that
    /// spawns the session and watches it while it runs.
    pub fn anthropic_session_std(
        &self,
        base_url: &str,
        api_key: &str,
        model: &str,
        prompt: &str,
    ) -> StdCommand {
        let mut cmd = self.capstan_std();
        for var in MODEL_VARS {
            cmd.env_remove(var);
        }
        cmd.env("ANTHROPIC_API_KEY", api_key)
            .env("NO_COLOR", "1")
            .args(["--base-url", base_url, "--model", model, "-p", prompt]);
        cmd
    }

    /// A fresh, empty home and workspace. The home gets the shared compile
    /// cache's key, so components compiled by one test are not compiled
    /// again by the next.
    pub fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        share_compile_cache_key(home.path());
        Self {
            home,
            ws: tempfile::tempdir().unwrap(),
            outside: tempfile::tempdir().unwrap(),
        }
    }

    /// The workspace's canonical path (as tools see it).
    pub fn ws_path(&self) -> PathBuf {
        self.ws.path().canonicalize().unwrap()
    }

    /// The `capstan` binary, run in the workspace with the test's home.
    pub fn capstan(&self) -> Command {
        Command::from_std(self.capstan_std())
    }

    /// The same as [`Env::capstan`], as a plain std command (for spawning
    /// the binary and reading its output while it runs).
    pub fn capstan_std(&self) -> StdCommand {
        let mut cmd = StdCommand::new(env!("CARGO_BIN_EXE_capstan"));
        cmd.current_dir(self.ws.path())
            .env("CAPSTAN_HOME", self.home.path())
            .env("HOME", self.home.path())
            .env("CAPSTAN_CACHE_DIR", shared_compile_cache())
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CACHE_HOME");
        cmd
    }

    /// `capstan tool call NAME INPUT` with extra arguments.
    pub fn call(&self, name: &str, input: &str, extra: &[&str]) -> Command {
        let mut cmd = self.capstan();
        cmd.args(["tool", "call", name, input]).args(extra);
        cmd
    }

    /// Writes a file in the workspace, creating folders.
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.ws.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    /// Writes a file in the folder outside the workspace and returns its
    /// absolute path.
    pub fn write_outside(&self, rel: &str, content: &str) -> PathBuf {
        let path = self.outside.path().canonicalize().unwrap().join(rel);
        std::fs::write(&path, content).unwrap();
        path
    }

    /// A path to `rel` in the outside folder written relative to the
    /// workspace with `..`.
    pub fn dotdot_outside(&self, rel: &str) -> String {
        let name = self.outside.path().file_name().unwrap().to_str().unwrap();
        format!("../{name}/{rel}")
    }

    /// Reads a file in the workspace.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.ws.path().join(rel)).unwrap()
    }
}

/// The text a finished command printed on stdout.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The text a finished command printed on stderr.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts that a finished command exited with `code`, showing both of its
/// streams if it did not (or if a signal ended it).
pub fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "unexpected exit ({})\nstdout:\n{}\nstderr:\n{}",
        out.status,
        stdout(out),
        stderr(out)
    );
}

/// `capstan plugin install DIR --yes` in `env`; fails the test unless it
/// succeeds.
pub fn install(env: &Env, dir: &Path) -> Output {
    let out = env
        .capstan()
        .args(["plugin", "install", dir.to_str().unwrap(), "--yes"])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    out
}

/// The text of `env`'s plugin lockfile (empty when there is none).
pub fn lock(env: &Env) -> String {
    std::fs::read_to_string(env.home.path().join("plugins/capstan.lock")).unwrap_or_default()
}

/// Every record of `env`'s audit log, oldest first (none when there is no
/// log yet).
pub fn audit_records(env: &Env) -> Vec<serde_json::Value> {
    std::fs::read_to_string(env.home.path().join("audit/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The first-party fs tool's component, as the build made it.
pub fn fs_component() -> PathBuf {
    let path = target_dir().join("wasm-plugins/wasm32-wasip2/release/capstan_plugin_fs.wasm");
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

/// The SHA-256 of the file at `path`, in lowercase hex.
pub fn sha256(path: &Path) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(std::fs::read(path).unwrap());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs `cmd` to its end and returns what it printed with the most
/// resident memory it held, in bytes: the kernel's own high-water mark
/// (`ru_maxrss`, the `VmHWM` of `/proc`), as `wait4` reports it for this
/// child alone when it ends. Exact whatever the machine's load (nothing
/// polls), and blind to every other process of the test binary, which
/// runs other tests at the same time. It includes the child's own children
/// it waited for; capstan's memory is the larger in every use here.
#[cfg(target_os = "linux")]
#[allow(
    clippy::zombie_processes,
    reason = "the child is reaped by `wait_with_usage`, with wait4 rather than `Child::wait`"
)]
pub fn run_measuring_peak(mut cmd: StdCommand) -> (Output, u64) {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut stream: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            stream.read_to_end(&mut bytes).unwrap();
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let (status, max_rss_kib) = wait_with_usage(child.id());
    let output = Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    assert!(max_rss_kib > 0, "the kernel reported no memory for the run");
    (output, max_rss_kib << 10)
}

/// Waits for child `pid` to end and returns its wait status and its peak
/// resident memory in KiB. The `Child` it came from must not be waited for
/// afterwards (it is gone).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn wait_with_usage(pid: u32) -> (i32, u64) {
    let pid = libc::pid_t::try_from(pid).unwrap();
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is plain old data, so all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers are to live locals of the right types, and
        // `pid` is a child of this process that nothing else waits for.
        let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if waited == pid {
            break;
        }
        let error = std::io::Error::last_os_error();
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::Interrupted,
            "waiting for {pid}: {error}"
        );
    }
    (status, u64::try_from(usage.ru_maxrss).unwrap())
}

/// The host pids of processes whose command line contains `needle`.
pub fn pids_running(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline)
            .replace('\0', " ")
            .contains(needle)
        {
            found.push(pid);
        }
    }
    found
}

/// Whether process `pid` still exists (a zombie counts as gone), after a
/// bounded wait for it to go.
pub fn still_alive(pid: u32) -> bool {
    for _ in 0..100 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"));
        match status {
            Err(_) => return false,
            Ok(text) if text.contains("State:\tZ") => return false,
            Ok(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
    true
}

/// The names in a folder, sorted, hidden ones included.
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
