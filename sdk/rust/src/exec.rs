//! Running the native programs the plugin was granted (`exec` in its
//! `plugin.toml`), with an argument list — never a shell string.
//!
//! ```no_run
//! use capstan_sdk::exec::Command;
//!
//! # fn main() -> Result<(), capstan_sdk::ToolError> {
//! let status = Command::new("git").args(["status", "--short"]).run()?;
//! if status.success() {
//!     println!("{}", status.stdout);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The host checks the arguments against the grant's patterns before
//! anything runs, and runs the program in its OS sandbox with the plugin's
//! own folders, origins and variables. Output is capped (the first 10 KiB
//! and the last 20 KiB of each stream, with a note where the middle was
//! left out).

use std::fmt;
use std::time::Duration;

use crate::ToolError;
use crate::bindings::capstan::plugin::exec as wit;

/// A program to run, built up with its arguments and options.
#[derive(Debug, Clone, Default)]
pub struct Command {
    program: String,
    args: Vec<String>,
    cwd: Option<String>,
    stdin: Option<Vec<u8>>,
    timeout: Option<Duration>,
}

/// How a program ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Its exit code: 124 when it ran out of time, 128 + n when killed by
    /// signal n.
    pub exit_code: i32,
    /// Whether it ran out of time.
    pub timed_out: bool,
    /// Its standard output, capped.
    pub stdout: String,
    /// Its standard error, capped.
    pub stderr: String,
    /// Bytes of output left out, from both.
    pub omitted: u64,
}

impl Outcome {
    /// Whether it exited with code 0.
    pub fn success(&self) -> bool {
        self.exit_code == 0 && !self.timed_out
    }
}

/// Why a program did not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecError {
    /// No grant allows this program with these arguments; the message
    /// names what was granted.
    NotGranted(String),
    /// The folder is not inside a granted folder.
    BadFolder(String),
    /// The sandbox could not be set up or the program could not start.
    Failed(String),
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotGranted(m) => write!(f, "not granted: {m}"),
            Self::BadFolder(m) | Self::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ExecError {}

impl From<ExecError> for ToolError {
    fn from(error: ExecError) -> Self {
        match error {
            ExecError::NotGranted(m) => ToolError::denied(m),
            ExecError::BadFolder(m) => ToolError::invalid_input(m),
            ExecError::Failed(m) => ToolError::failed(m),
        }
    }
}

impl Command {
    /// The program `program`, as its grant names it (`git`).
    pub fn new(program: impl Into<String>) -> Self {
        Self {
            program: program.into(),
            ..Self::default()
        }
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Starts it in `dir`, a folder as the plugin sees it (inside a
    /// granted folder); the workspace by default.
    pub fn cwd(mut self, dir: impl AsRef<std::path::Path>) -> Self {
        self.cwd = Some(dir.as_ref().to_string_lossy().into_owned());
        self
    }

    /// Gives it `bytes` to read on its standard input.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// Lets it run at most `timeout` (and never past the call's own time).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The arguments so far.
    pub fn get_args(&self) -> &[String] {
        &self.args
    }

    /// Runs it to its end.
    pub fn run(&self) -> Result<Outcome, ExecError> {
        let command = wit::Command {
            program: self.program.clone(),
            args: self.args.clone(),
            cwd: self.cwd.clone(),
            stdin: self.stdin.clone(),
            timeout_ms: self
                .timeout
                .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        };
        match wit::run(&command) {
            Ok(outcome) => Ok(Outcome {
                exit_code: outcome.exit_code,
                timed_out: outcome.timed_out,
                stdout: outcome.stdout,
                stderr: outcome.stderr,
                omitted: outcome.omitted,
            }),
            Err(wit::ExecError::NotGranted(m)) => Err(ExecError::NotGranted(m)),
            Err(wit::ExecError::BadFolder(m)) => Err(ExecError::BadFolder(m)),
            Err(wit::ExecError::Failed(m)) => Err(ExecError::Failed(m)),
        }
    }
}
