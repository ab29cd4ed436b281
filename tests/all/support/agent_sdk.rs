//! The official Agent SDKs and the real Claude Code CLI, as `just
//! agent-sdks` installs them under `target/agent-sdks`: a test writes a
//! short Python or JavaScript program against the SDK, runs it with the
//! `capstan` binary as the SDK's CLI (or with Claude Code, for a golden
//! taken on the same mock model), and asserts on what happened.
//!
//! Every program gets, in its environment:
//! - `CLI`: the path of the CLI to drive (`cli_path` in Python,
//!   `pathToClaudeCodeExecutable` in TypeScript);
//! - `WS`: the workspace folder (also the program's current folder);
//! - the model variables pointing at the mock server (`ANTHROPIC_BASE_URL`,
//!   `ANTHROPIC_API_KEY`), and a temporary `HOME` and `CAPSTAN_HOME`.

use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Output, Stdio};

use super::{Env, MODEL_VARS, shared_compile_cache, target_dir};

/// The API key the SDK programs hand to the CLI.
pub const API_KEY: &str = "sk-ant-sdk-mock-1";

/// The model name the programs' CLI is told to use.
pub const MODEL: &str = "claude-sonnet-4-5";

/// How long a whole SDK program may run before the test gives up.
pub const PROGRAM_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

fn installed(dir: &Path) -> PathBuf {
    assert!(
        dir.join(".capstan-installed").is_file(),
        "{} is missing: run `just agent-sdks` (the test suite's set-up installs it)",
        dir.display()
    );
    dir.to_path_buf()
}

/// The Python interpreter of the virtualenv holding `claude-agent-sdk`.
pub fn python() -> PathBuf {
    installed(&target_dir().join("agent-sdks/python")).join("bin/python3")
}

/// The `node_modules` folder holding `@anthropic-ai/claude-agent-sdk`.
pub fn node_modules() -> PathBuf {
    installed(&target_dir().join("agent-sdks/node")).join("node_modules")
}

/// The real Claude Code CLI's native binary.
pub fn claude_code() -> PathBuf {
    installed(&target_dir().join("agent-sdks/claude-code"))
        .join("node_modules/@anthropic-ai/claude-code/bin/claude.exe")
}

/// Which CLI an SDK program drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cli {
    /// The `capstan` binary under test.
    Capstan,
    /// The real Claude Code, for goldens.
    ClaudeCode,
}

impl Cli {
    /// The binary's path.
    pub fn path(self) -> PathBuf {
        match self {
            Self::Capstan => PathBuf::from(env!("CARGO_BIN_EXE_capstan")),
            Self::ClaudeCode => claude_code(),
        }
    }
}

impl Env {
    /// A command that runs the CLI `cli` directly (not through an SDK),
    /// in the workspace, against the mock model at `base_url`, with the
    /// environment both CLIs need to run offline and unattended.
    pub fn cli_std(&self, cli: Cli, base_url: &str) -> StdCommand {
        let mut cmd = StdCommand::new(cli.path());
        self.sdk_environment(&mut cmd, cli, base_url);
        cmd
    }

    /// Runs the Python program `source` (which imports `claude_agent_sdk`)
    /// with `CLI` naming `cli`; stdout and stderr are captured.
    pub fn sdk_python(&self, cli: Cli, base_url: &str, source: &str) -> Output {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("program.py");
        std::fs::write(&program, source).unwrap();
        let mut cmd = StdCommand::new(python());
        cmd.arg(&program);
        self.sdk_environment(&mut cmd, cli, base_url);
        run_bounded(cmd)
    }

    /// Runs the JavaScript module `source` (which imports
    /// `@anthropic-ai/claude-agent-sdk`) with Node, `CLI` naming `cli`.
    pub fn sdk_node(&self, cli: Cli, base_url: &str, source: &str) -> Output {
        let dir = tempfile::tempdir().unwrap();
        // ES modules resolve packages from the folders above the module,
        // not from NODE_PATH: a link beside the program finds the SDK.
        std::os::unix::fs::symlink(node_modules(), dir.path().join("node_modules")).unwrap();
        let program = dir.path().join("program.mjs");
        std::fs::write(&program, source).unwrap();
        let mut cmd = StdCommand::new("node");
        cmd.arg(&program);
        self.sdk_environment(&mut cmd, cli, base_url);
        run_bounded(cmd)
    }

    fn sdk_environment(&self, cmd: &mut StdCommand, cli: Cli, base_url: &str) {
        for var in MODEL_VARS {
            cmd.env_remove(var);
        }
        cmd.current_dir(self.ws.path())
            .env("CLI", cli.path())
            .env("WS", self.ws_path())
            .env("HOME", self.home.path())
            .env("CAPSTAN_HOME", self.home.path())
            .env("CAPSTAN_CACHE_DIR", shared_compile_cache())
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env("ANTHROPIC_BASE_URL", base_url)
            .env("ANTHROPIC_API_KEY", API_KEY)
            .env("ANTHROPIC_MODEL", MODEL)
            .env("NO_COLOR", "1")
            // Claude Code, offline and unattended: no telemetry, no update
            // checks, and bypass mode allowed as root.
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("IS_SANDBOX", "1")
            // The Python SDK's check of the CLI's version.
            .env("CLAUDE_AGENT_SDK_SKIP_VERSION_CHECK", "1");
    }
}

/// Runs `cmd` to its end, killing it after [`PROGRAM_TIMEOUT`] (the test
/// then fails with what it printed so far).
pub fn run_bounded(mut cmd: StdCommand) -> Output {
    use std::os::unix::process::CommandExt;
    // A group of its own, so a timeout kills the CLI it started too.
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cmd.spawn().expect("start the SDK program");
    let pid = child.id();
    let (done, finished) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let output = child.wait_with_output();
        let _ = done.send(());
        output
    });
    if finished.recv_timeout(PROGRAM_TIMEOUT).is_err() {
        // The child is not reaped before the waiter returns, so its
        // group id still names it.
        let _ = StdCommand::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .status();
        let output = waiter.join().unwrap().unwrap();
        panic!(
            "the SDK program ran over {PROGRAM_TIMEOUT:?}\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    waiter.join().unwrap().unwrap()
}

/// The JSON values a program printed, one per stdout line (lines that are
/// not JSON are left out).
pub fn json_lines(output: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The value `v` of the line a program printed as `{"label": LABEL, "v":
/// ...}` (among `lines`, the JSON lines of `output`); fails the test with
/// everything the program printed when there is none.
pub fn labelled(output: &Output, lines: &[serde_json::Value], label: &str) -> serde_json::Value {
    lines
        .iter()
        .find(|line| line["label"] == label)
        .map(|line| line["v"].clone())
        .unwrap_or_else(|| {
            panic!(
                "no {label}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        })
}
