//! The `[exec]` section of the settings, and the grants it resolves to.
//!
//! ```toml
//! [exec]
//! sandbox = "on"                      # "off" runs commands unsandboxed (loud warning)
//! namespaces = "on"                   # "off": Landlock + seccomp only, network off
//! read = ["~/.cargo", "~/.rustup"]    # tool homes commands may read (replaces the defaults)
//! write = ["~/.cargo/registry"]       # folders commands may also write
//! net = ["https://index.crates.io"]   # origins reachable through the proxy
//! env = ["RUST_LOG"]                  # variables passed beside PATH, HOME, LANG, TERM, TMPDIR
//! timeout = "2m"                      # default for a command, at most 10m
//! max_processes = 1024
//! max_memory = "8GiB"                 # per process (data segment)
//! max_file_size = "1GiB"
//! ```
//!
//! Only the user's own config and the project local config may set it: a
//! repository's `.capstan/config.toml` could otherwise widen what its own
//! commands reach.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::audit::AuditScope;
use crate::grants::fs::OwnFolders;
use crate::grants::net::NetGrant;
use crate::quantity::{parse_duration, parse_size};

/// How long a command may run when the call does not say.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// The longest a command run to completion may be given.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// Tool homes commands may read when `[exec] read` is not set: the
/// toolchains and package caches of the common languages. Those that do not
/// exist are skipped.
pub const DEFAULT_READ: &[&str] = &[
    "~/.cargo",
    "~/.rustup",
    "~/.npm",
    "~/.nvm",
    "~/.cache/pip",
    "~/.pyenv",
    "~/.local/bin",
    "~/.local/lib",
    "~/go",
    "~/.m2",
    "~/.gradle",
];

/// Folders of the user's home that hold credentials: no `[exec]` folder
/// (nor the workspace) may be one of them, lie inside one or enclose one.
pub const SECRET_FOLDERS: &[&str] = &[
    "~/.ssh",
    "~/.aws",
    "~/.gnupg",
    "~/.config/gh",
    "~/.docker",
    "~/.kube",
    "~/.netrc",
    "~/.git-credentials",
];

/// Variables holding the model providers' API keys: never passed to a
/// command, even when `[exec] env` names them.
pub const MODEL_KEYS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
];

/// The `[exec]` section as written in one settings file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecSettings {
    /// `"on"` (the default) or `"off"`.
    pub sandbox: Option<SandboxSetting>,
    /// `"on"` (the default: when the system allows user namespaces) or
    /// `"off"`: commands get no namespaces, as on a system without user
    /// namespaces (Landlock and seccomp only, the network off).
    pub namespaces: Option<SandboxSetting>,
    /// Folders commands may read; [`DEFAULT_READ`] when not set.
    pub read: Option<Vec<String>>,
    /// Folders commands may read and write.
    #[serde(default)]
    pub write: Vec<String>,
    /// Origins commands may reach through the proxy.
    #[serde(default)]
    pub net: Vec<NetGrant>,
    /// Environment variables passed to commands, by name.
    #[serde(default)]
    pub env: Vec<String>,
    /// The default time a command may run (`2m`, `90s`).
    pub timeout: Option<String>,
    /// The most processes (and threads) a command may have at once.
    pub max_processes: Option<u32>,
    /// The most memory one process of a command may use (`8GiB`).
    pub max_memory: Option<String>,
    /// The largest file a command may write (`1GiB`).
    pub max_file_size: Option<String>,
}

/// Whether commands run in the OS sandbox (`sandbox`), or get namespaces
/// (`namespaces`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxSetting {
    /// In the sandbox (the default).
    On,
    /// Unsandboxed: only for kernels without Landlock, with a warning.
    Off,
}

impl ExecSettings {
    /// Takes every value `later` sets; lists are joined.
    pub fn override_with(&mut self, later: ExecSettings) {
        let ExecSettings {
            sandbox,
            namespaces,
            read,
            write,
            net,
            env,
            timeout,
            max_processes,
            max_memory,
            max_file_size,
        } = later;
        self.sandbox = sandbox.or(self.sandbox.take());
        self.namespaces = namespaces.or(self.namespaces.take());
        self.read = match (self.read.take(), read) {
            (Some(mut a), Some(b)) => {
                a.extend(b);
                Some(a)
            }
            (a, b) => b.or(a),
        };
        self.write.extend(write);
        self.net.extend(net);
        self.env.extend(env);
        self.timeout = timeout.or(self.timeout.take());
        self.max_processes = max_processes.or(self.max_processes.take());
        self.max_memory = max_memory.or(self.max_memory.take());
        self.max_file_size = max_file_size.or(self.max_file_size.take());
    }

    /// Whether any key is set.
    pub fn is_set(&self) -> bool {
        self != &Self::default()
    }
}

/// Limits on a command's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecLimits {
    /// The most processes and threads at once.
    pub processes: u32,
    /// The most memory (data segment) per process, in bytes.
    pub memory: u64,
    /// The largest file a process may write, in bytes.
    pub file_size: u64,
}

impl Default for ExecLimits {
    fn default() -> Self {
        Self {
            processes: 1024,
            memory: 8 << 30,
            file_size: 1 << 30,
        }
    }
}

/// What the session lets native commands reach, resolved from the
/// settings: every folder canonical and checked.
#[derive(Debug, Clone)]
pub struct ExecGrants {
    /// The workspace (canonical); read-only unless a call may write.
    pub workspace: PathBuf,
    /// Folders readable by every command.
    pub read: Vec<PathBuf>,
    /// Folders writable by every command.
    pub write: Vec<PathBuf>,
    /// Origins every command may reach through the proxy.
    pub net: Vec<NetGrant>,
    /// Environment variables passed to commands, by name.
    pub env: Vec<String>,
    /// The time a command gets when its call does not say.
    pub timeout: Duration,
    /// Process limits.
    pub limits: ExecLimits,
    /// Whether the OS sandbox is on.
    pub sandboxed: bool,
    /// Whether commands may get namespaces (when the system allows user
    /// namespaces); `[exec] namespaces = "off"` says no.
    pub namespaces: bool,
    /// The user's home folder: `HOME` of unsandboxed commands; sandboxed
    /// ones get a private home where its readable tool folders appear
    /// ([`temp_area`](super::temp_area)).
    pub home: Option<PathBuf>,
    /// Where commands and refusals are recorded.
    pub audit: Option<AuditScope>,
    /// Secrets set as environment variables of every command run under
    /// these grants (a Claude Code plugin's hooks and inline commands,
    /// granted at install); empty for the session's own commands.
    pub secrets: SecretEnv,
}

/// Secrets given to commands as environment variables: names and values.
/// Its `Debug` output names them without their values.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretEnv(pub Vec<(String, String)>);

impl std::fmt::Debug for SecretEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(name, _)| name))
            .finish()
    }
}

impl SecretEnv {
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `text` with every value replaced by `[secret NAME]`, so what a
    /// command prints never carries one into a transcript or a log.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (name, value) in &self.0 {
            if !value.is_empty() && out.contains(value.as_str()) {
                out = out.replace(value.as_str(), &format!("[secret {name}]"));
            }
        }
        out
    }
}

/// The `[exec]` settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ExecConfigError {
    /// A folder reaches capstan's own folders.
    #[error("[exec] {key}: {source}")]
    OwnFolder {
        /// `read`, `write` or `workspace`.
        key: &'static str,
        /// Why.
        source: crate::grants::fs::GrantError,
    },
    /// A folder holds, or lies inside, credentials.
    #[error(
        "[exec] {key}: {} would let commands reach {} (credentials); list the tool folders commands need instead",
        path.display(), secret.display()
    )]
    SecretFolder {
        /// `read`, `write` or `workspace`.
        key: &'static str,
        /// The folder asked for.
        path: PathBuf,
        /// The credentials folder it reaches.
        secret: PathBuf,
    },
    /// The workspace cannot be resolved.
    #[error("cannot use the workspace {} for commands: {source}", path.display())]
    Workspace {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A value is not valid.
    #[error("[exec] {key}: {message}")]
    Invalid {
        /// The key.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
}

impl ExecGrants {
    /// Resolves `settings` for commands run in `workspace`, with the user's
    /// home `home` (for `~`) and capstan's folders `own`, which no folder
    /// may reach.
    pub fn resolve(
        settings: &ExecSettings,
        workspace: &Path,
        home: Option<&Path>,
        own: &OwnFolders,
    ) -> Result<Self, ExecConfigError> {
        let workspace_path =
            workspace
                .canonicalize()
                .map_err(|source| ExecConfigError::Workspace {
                    path: workspace.to_path_buf(),
                    source,
                })?;
        let secrets: Vec<PathBuf> = SECRET_FOLDERS
            .iter()
            .filter_map(|s| expand(s, home))
            .map(|p| resolve_existing(&p))
            .collect();
        check_folder("workspace", workspace, &workspace_path, own, &secrets)?;

        let read_list: Vec<String> = match &settings.read {
            Some(list) => list.clone(),
            None => DEFAULT_READ.iter().map(|s| s.to_string()).collect(),
        };
        let mut read = Vec::new();
        for entry in &read_list {
            if let Some(path) = folder(entry, home, "read")? {
                check_folder("read", Path::new(entry), &path, own, &secrets)?;
                read.push(path);
            }
        }
        let mut write = Vec::new();
        for entry in &settings.write {
            if let Some(path) = folder(entry, home, "write")? {
                check_folder("write", Path::new(entry), &path, own, &secrets)?;
                write.push(path);
            }
        }
        for name in &settings.env {
            if name.is_empty() || name.contains('=') || name.starts_with("CAPSTAN_") {
                return Err(ExecConfigError::Invalid {
                    key: "env",
                    message: format!(
                        "`{name}` cannot be passed to commands (a variable name without `=`, not one of capstan's own CAPSTAN_ variables)"
                    ),
                });
            }
            if MODEL_KEYS.contains(&name.as_str()) {
                return Err(ExecConfigError::Invalid {
                    key: "env",
                    message: format!(
                        "`{name}` holds a model API key, which commands never see; remove it from [exec] env"
                    ),
                });
            }
        }
        let timeout = match &settings.timeout {
            None => DEFAULT_TIMEOUT,
            Some(text) => parse_duration(text)
                .map_err(|message| ExecConfigError::Invalid {
                    key: "timeout",
                    message,
                })?
                .min(MAX_TIMEOUT),
        };
        let defaults = ExecLimits::default();
        let size = |key: &'static str, text: &Option<String>, default: u64| match text {
            None => Ok(default),
            Some(text) => {
                parse_size(text).map_err(|message| ExecConfigError::Invalid { key, message })
            }
        };
        let limits = ExecLimits {
            processes: settings.max_processes.unwrap_or(defaults.processes),
            memory: size("max_memory", &settings.max_memory, defaults.memory)?,
            file_size: size("max_file_size", &settings.max_file_size, defaults.file_size)?,
        };
        if limits.processes < 8 {
            return Err(ExecConfigError::Invalid {
                key: "max_processes",
                message: format!(
                    "{} is too few for a shell and its commands; give at least 8",
                    limits.processes
                ),
            });
        }
        Ok(Self {
            workspace: workspace_path,
            read,
            write,
            net: settings.net.clone(),
            env: settings.env.clone(),
            timeout,
            limits,
            sandboxed: settings.sandbox != Some(SandboxSetting::Off),
            namespaces: settings.namespaces != Some(SandboxSetting::Off),
            home: home.map(Path::to_path_buf),
            audit: None,
            secrets: SecretEnv::default(),
        })
    }
}

/// `text` with a leading `~` replaced by `home`; `None` when it needs a
/// home and there is none.
fn expand(text: &str, home: Option<&Path>) -> Option<PathBuf> {
    if text == "~" {
        return home.map(Path::to_path_buf);
    }
    match text.strip_prefix("~/") {
        Some(rest) => home.map(|h| h.join(rest)),
        None => Some(PathBuf::from(text)),
    }
}

/// The canonical folder an `[exec]` entry names, or `None` when it does not
/// exist (a tool not installed).
fn folder(
    entry: &str,
    home: Option<&Path>,
    key: &'static str,
) -> Result<Option<PathBuf>, ExecConfigError> {
    let Some(path) = expand(entry, home) else {
        return Ok(None);
    };
    if !path.is_absolute() {
        return Err(ExecConfigError::Invalid {
            key,
            message: format!("`{entry}` is not an absolute path (or one starting with ~/)"),
        });
    }
    match path.canonicalize() {
        Ok(path) => Ok(Some(path)),
        // A tool home that does not exist is skipped: tools come and go.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ExecConfigError::Invalid {
            key,
            message: format!("cannot use `{entry}`: {e}"),
        }),
    }
}

/// Checks that `resolved` (asked for as `path`) reaches neither capstan's
/// folders nor a credentials folder.
fn check_folder(
    key: &'static str,
    path: &Path,
    resolved: &Path,
    own: &OwnFolders,
    secrets: &[PathBuf],
) -> Result<(), ExecConfigError> {
    own.check(path, resolved, None)
        .map_err(|source| ExecConfigError::OwnFolder { key, source })?;
    for secret in secrets {
        if secret.starts_with(resolved) || resolved.starts_with(secret) {
            return Err(ExecConfigError::SecretFolder {
                key,
                path: path.to_path_buf(),
                secret: secret.clone(),
            });
        }
    }
    Ok(())
}

/// `path` with links resolved as far as it exists, the rest appended.
fn resolve_existing(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut existing = path;
    loop {
        if let Ok(real) = existing.canonicalize() {
            return missing.iter().rev().fold(real, |acc, part| acc.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn folders_reaching_credentials_are_refused() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
        let settings = ExecSettings {
            read: Some(vec!["~".into()]),
            ..ExecSettings::default()
        };
        let err = ExecGrants::resolve(
            &settings,
            ws.path(),
            Some(home.path()),
            &OwnFolders::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains(".ssh"), "{err}");
        let err = ExecGrants::resolve(
            &ExecSettings::default(),
            home.path(),
            Some(home.path()),
            &OwnFolders::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("workspace"), "{err}");
    }

    #[test]
    fn later_settings_override_and_lists_join() {
        let mut a = ExecSettings {
            env: vec!["A".into()],
            timeout: Some("1m".into()),
            ..ExecSettings::default()
        };
        a.override_with(ExecSettings {
            env: vec!["B".into()],
            timeout: Some("2m".into()),
            ..ExecSettings::default()
        });
        assert_eq!(a.env, ["A", "B"]);
        assert_eq!(a.timeout.as_deref(), Some("2m"));
    }

    #[test]
    fn bad_values_say_what_is_wrong() {
        let ws = tempfile::tempdir().unwrap();
        let settings = ExecSettings {
            env: vec!["CAPSTAN_HOME".into()],
            ..ExecSettings::default()
        };
        let err =
            ExecGrants::resolve(&settings, ws.path(), None, &OwnFolders::default()).unwrap_err();
        assert!(err.to_string().contains("CAPSTAN_"), "{err}");
        let settings = ExecSettings {
            env: vec!["ANTHROPIC_API_KEY".into()],
            ..ExecSettings::default()
        };
        let err =
            ExecGrants::resolve(&settings, ws.path(), None, &OwnFolders::default()).unwrap_err();
        assert!(err.to_string().contains("model API key"), "{err}");
        let settings = ExecSettings {
            read: Some(vec!["relative/dir".into()]),
            ..ExecSettings::default()
        };
        let err =
            ExecGrants::resolve(&settings, ws.path(), None, &OwnFolders::default()).unwrap_err();
        assert!(err.to_string().contains("absolute"), "{err}");
    }
}
