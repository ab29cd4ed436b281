//! Exit codes: each kind of failure has its own, so scripts can branch.

use std::process::ExitCode;

use crate::sandbox::CallError;

/// Why `capstan` exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything worked.
    Success = 0,
    /// capstan itself could not do its job (a broken component file, a
    /// folder that cannot be granted, an unwritable cache).
    Error = 1,
    /// The command line was wrong, or named a tool that does not exist.
    Usage = 2,
    /// The tool rejected its input.
    InvalidInput = 3,
    /// The sandbox refused what the tool tried.
    Denied = 4,
    /// The tool ran and reported a failure.
    ToolFailed = 5,
    /// The plugin crashed, ran out of time or memory, or returned too much.
    PluginCrashed = 6,
    /// The model's provider refused or failed the request (bad key, unknown
    /// model, too many retries).
    Model = 7,
    /// The agent reached its limit of model requests (`--max-turns`).
    MaxTurns = 8,
    /// Consent was not given: the user said no, or nobody could be asked
    /// (no terminal and no `--yes`).
    Refused = 9,
    /// An installed plugin failed its integrity check (a file changed or is
    /// missing), or its manifest asks for more than the user agreed to; or
    /// a session did not start because a guard hook plugin cannot run.
    Integrity = 10,
    /// `capstan audit verify` found the audit log edited or truncated.
    AuditDamaged = 11,
    /// The user interrupted the session (Ctrl-C).
    Interrupted = 130,
    /// Whatever read capstan's output stopped reading (`capstan ... | head`),
    /// so the rest was not printed; the code a shell gives a program ended
    /// by SIGPIPE.
    OutputClosed = 141,
}

impl Exit {
    /// The exit code for a failed call.
    pub fn for_call_error(err: &CallError) -> Self {
        match err {
            CallError::InvalidInput(_) => Self::InvalidInput,
            CallError::Denied(_) => Self::Denied,
            CallError::Failed(_) => Self::ToolFailed,
            CallError::UnknownTool { .. } => Self::Usage,
            CallError::Setup { .. } => Self::Error,
            CallError::Timeout { .. }
            | CallError::MemoryLimit { .. }
            | CallError::HostResources { .. }
            | CallError::HeadersTooLarge { .. }
            | CallError::OutputTooLarge { .. }
            | CallError::Crashed { .. } => Self::PluginCrashed,
        }
    }

    /// A short name for machine-readable output.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Success => "ok",
            Self::Error => "error",
            Self::Usage => "usage",
            Self::InvalidInput => "invalid_input",
            Self::Denied => "denied",
            Self::ToolFailed => "tool_failed",
            Self::PluginCrashed => "plugin_crashed",
            Self::Model => "model_error",
            Self::MaxTurns => "max_turns",
            Self::Refused => "refused",
            Self::Integrity => "integrity",
            Self::AuditDamaged => "audit_damaged",
            Self::Interrupted => "interrupted",
            Self::OutputClosed => "output_closed",
        }
    }
}

/// A failure that ends a command: what to tell the user and how to exit.
/// Every command's failures take this one shape.
#[derive(Debug)]
pub struct Failure {
    /// What failed and what to do about it.
    pub message: String,
    /// The exit code.
    pub exit: Exit,
}

impl Failure {
    /// A failure exiting with `exit`, saying `message`.
    pub fn new(exit: Exit, message: impl ToString) -> Self {
        Self {
            message: message.to_string(),
            exit,
        }
    }

    /// Prints the message as `error: ...` on stderr, and gives the exit code.
    pub fn report(self) -> Exit {
        eprintln!("error: {}", super::escape::message(&self.message));
        self.exit
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit as u8)
    }
}

/// The table shown at the end of `--help` (a macro so it can be joined to
/// other help text with `concat!`).
macro_rules! exit_codes_help {
    () => {
        "\
Exit codes:
  0  success
  1  capstan could not do its job (broken component, unusable folder, ...)
  2  usage error, or an unknown tool
  3  the tool rejected its input
  4  denied by the sandbox (e.g. a write without --allow-write)
  5  the tool ran and failed (e.g. file not found)
  6  the plugin crashed, timed out, or hit a memory or output limit
  7  the model's provider refused or failed the request
  8  the agent reached its --max-turns limit
  9  refused: consent to a plugin's capabilities was not given
  10  an installed plugin failed its integrity check or needs consent again
  11  the audit log is damaged (edited or truncated; audit verify)
  130  interrupted (Ctrl-C)
  141  the output was closed early (e.g. piped into head)"
    };
}
pub(crate) use exit_codes_help;

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Exit; 14] = [
        Exit::Success,
        Exit::Error,
        Exit::Usage,
        Exit::InvalidInput,
        Exit::Denied,
        Exit::ToolFailed,
        Exit::PluginCrashed,
        Exit::Model,
        Exit::MaxTurns,
        Exit::Refused,
        Exit::Integrity,
        Exit::AuditDamaged,
        Exit::Interrupted,
        Exit::OutputClosed,
    ];

    #[test]
    fn the_help_table_has_one_row_per_code() {
        let table = exit_codes_help!();
        let codes: Vec<u8> = table
            .lines()
            .skip(1)
            .map(|line| line.split_whitespace().next().unwrap().parse().unwrap())
            .collect();
        let expected: Vec<u8> = ALL.iter().map(|exit| *exit as u8).collect();
        assert_eq!(codes, expected);
        assert!(table.contains("\n  11  the audit log is damaged"));
        assert!(table.contains("\n  9  refused: consent"));
    }
}
