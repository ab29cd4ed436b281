//! The error a tool returns.

use std::fmt;
use std::io;

use crate::bindings::exports::capstan::plugin::tool::ToolError as WitToolError;

/// Why a tool call did not succeed. The message is shown to the model, so say
/// what went wrong and, where possible, what to do instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolError {
    /// The input was not valid. Name the field in the message.
    InvalidInput(String),
    /// The sandbox refused something the tool tried to do.
    Denied(String),
    /// The tool ran and could not do what was asked.
    Failed(String),
}

impl ToolError {
    /// An invalid-input error.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::InvalidInput(message.into())
    }

    /// A denied error.
    pub fn denied(message: impl Into<String>) -> Self {
        Self::Denied(message.into())
    }

    /// A failed error.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }

    /// Turns an I/O error met while doing `what` (for example
    /// `"cannot read src/main.rs"`) into a tool error. A permission error
    /// becomes [`ToolError::Denied`], because in the sandbox it means the
    /// path or the kind of access was not granted.
    pub fn from_io(err: &io::Error, what: impl fmt::Display) -> Self {
        // Only the paths capstan keeps read-only under every write grant
        // are refused as a read-only file system (EROFS is 69 in WASI).
        if err.kind() == io::ErrorKind::ReadOnlyFilesystem || err.raw_os_error() == Some(69) {
            return Self::Denied(format!(
                "{what}: refused: capstan keeps this path read-only for plugins even when the workspace is writable, because files there (such as .git, .vscode or .envrc) can run code later, outside the sandbox; commit with the git plugin's tools (git.add, git.commit), and ask the user to make any other change there"
            ));
        }
        match err.kind() {
            io::ErrorKind::PermissionDenied => Self::Denied(format!(
                "{what}: refused by the sandbox: this plugin was not granted that access (a path outside its folders, a write to a read-only folder, or the network)"
            )),
            io::ErrorKind::NotFound => Self::Failed(format!("{what}: no such file or folder")),
            _ => match err.raw_os_error() {
                // ENOTCAPABLE: the path lies outside every granted folder.
                Some(76) => {
                    Self::Denied(format!("{what}: outside the folders this tool was granted"))
                }
                _ => Self::Failed(format!("{what}: {err}")),
            },
        }
    }

    /// The message, without the kind.
    pub fn message(&self) -> &str {
        match self {
            Self::InvalidInput(m) | Self::Denied(m) | Self::Failed(m) => m,
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidInput(m) => write!(f, "invalid input: {m}"),
            Self::Denied(m) => write!(f, "denied: {m}"),
            Self::Failed(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for ToolError {}

impl From<ToolError> for WitToolError {
    fn from(err: ToolError) -> Self {
        match err {
            ToolError::InvalidInput(m) => WitToolError::InvalidInput(m),
            ToolError::Denied(m) => WitToolError::Denied(m),
            ToolError::Failed(m) => WitToolError::Failed(m),
        }
    }
}
