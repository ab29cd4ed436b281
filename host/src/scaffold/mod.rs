//! Plugin projects in Rust, Python and JavaScript: `capstan new` writes one
//! that builds and installs without edits, and `capstan plugin build` turns
//! any of them into a component.
//!
//! A project is a folder with a `plugin.toml` whose `[build]` table says how
//! to build it:
//!
//! ```toml
//! [build]
//! lang = "python"          # rust | python | js
//! source = "app.py"        # python and js: the module that registers the tools
//! exports = ["tool"]       # tool, hook, skill: what the component offers
//! ```
//!
//! The build writes what it needs under the project's hidden `.capstan/`
//! folder (the WIT, the world, an entry module, Rust's target folder), which
//! packages leave out; the component goes where `components` says.

pub mod build;
mod embedded;
pub mod new;
pub mod socket_stubs;
pub mod toolchain;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A language a plugin can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Rust, with `capstan-sdk` (tools) or wit-bindgen (hooks, skills).
    Rust,
    /// Python, built with componentize-py.
    Python,
    /// JavaScript, built with componentize-js.
    Js,
}

impl Lang {
    /// The name used on the command line and in `plugin.toml`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rust => "rust",
            Self::Python => "python",
            Self::Js => "js",
        }
    }
}

impl fmt::Display for Lang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Lang {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "rust" | "rs" => Ok(Self::Rust),
            "python" | "py" => Ok(Self::Python),
            "js" | "javascript" => Ok(Self::Js),
            other => Err(format!(
                "unknown language `{other}`; choose rust, python or js"
            )),
        }
    }
}

/// What a plugin offers: the plugin interface its component exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `capstan:plugin/tool`.
    Tool,
    /// `capstan:plugin/hook`.
    Hook,
    /// `capstan:plugin/skill`.
    Skill,
}

impl Kind {
    /// The interface's short name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Hook => "hook",
            Self::Skill => "skill",
        }
    }
}

impl FromStr for Kind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "tool" => Ok(Self::Tool),
            "hook" => Ok(Self::Hook),
            "skill" => Ok(Self::Skill),
            other => Err(format!("unknown export `{other}`; use tool, hook or skill")),
        }
    }
}

/// A project could not be written or built.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// A file could not be read or written.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done ("write", "read", ...).
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The folder to create already exists and is not empty.
    #[error("{} already exists and is not empty; choose another name or --dir", .0.display())]
    Exists(PathBuf),
    /// The project's `plugin.toml` does not say how to build it.
    #[error("{}: {message}", path.display())]
    Config {
        /// The manifest.
        path: PathBuf,
        /// What is wrong and what to write instead.
        message: String,
    },
    /// A toolchain the build needs is not installed.
    #[error(
        "{what} is not installed, so this {lang} plugin cannot be built.\nInstall it with:\n    {install}"
    )]
    MissingToolchain {
        /// The language.
        lang: Lang,
        /// What is missing.
        what: String,
        /// The one command that installs it.
        install: String,
    },
    /// A build step ran and failed.
    #[error("{step} failed{}\n{output}", status.map(|s| format!(" (exit code {s})")).unwrap_or_default())]
    StepFailed {
        /// The step ("componentize-py", "cargo build", ...).
        step: String,
        /// Its exit code, if it exited.
        status: Option<i32>,
        /// The end of what it printed.
        output: String,
    },
}

/// Reads a file, naming it in the error.
fn read(path: &Path) -> Result<String, ProjectError> {
    std::fs::read_to_string(path).map_err(|source| ProjectError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    })
}

/// Writes a file atomically (a temporary file in the same folder, then a
/// rename), creating its folder. The file gets the permissions of any new
/// file the user makes (0644 under the usual umask 022), not the
/// owner-only ones of a temporary file.
fn write(path: &Path, contents: &[u8]) -> Result<(), ProjectError> {
    let io = |action: &'static str, source: std::io::Error| ProjectError::Io {
        action,
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io("create the folder of", e))?;
    let mut builder = tempfile::Builder::new();
    // Read and write for all, less the umask, as `open` does for any new file.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let mut temp = builder.tempfile_in(dir).map_err(|e| io("write", e))?;
    std::io::Write::write_all(&mut temp, contents).map_err(|e| io("write", e))?;
    temp.persist(path).map_err(|e| io("write", e.error))?;
    Ok(())
}

/// Writes a file only if its contents differ; says whether it did.
fn refresh(path: &Path, contents: &str) -> Result<bool, ProjectError> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == contents) {
        return Ok(false);
    }
    write(path, contents.as_bytes())?;
    Ok(true)
}
