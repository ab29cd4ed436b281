//! Session transcripts: every session is an append-only JSONL file, one
//! record per line, written and flushed as things happen so a killed process
//! loses at most the line it was writing.
//!
//! Files live under `<data>/sessions/<workspace-key>/<session-id>.jsonl`.
//! The workspace key is a readable slug of the canonical workspace path plus
//! a short hash of it; the session id is 16 random hex digits.
//!
//! - [`record`]: the record types and the format version;
//! - [`transcript`]: writing a transcript, new or resumed;
//! - [`load`]: reading one back into a conversation the model APIs accept;
//! - [`catalog`]: listing a workspace's sessions and finding one by id prefix;
//! - [`checkpoint`]: what each prompt changed in the workspace, and
//!   rewinding files and conversation to before a prompt;
//! - [`recap`]: what a resumed session shows of what happened.

pub mod catalog;
pub mod checkpoint;
pub mod load;
pub mod recap;
pub mod record;
pub mod transcript;

#[cfg(test)]
mod tests;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::home::Home;

pub use catalog::SessionSummary;
pub use load::{LoadWarning, LoadedSession};
pub use transcript::TranscriptWriter;

/// Why a session could not be written, read or found.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The workspace folder could not be resolved.
    #[error(
        "cannot resolve the workspace folder {path}: {source}; run capstan from an existing folder"
    )]
    Workspace {
        /// The folder given.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// A file or folder could not be created, written or read.
    #[error(
        "cannot {action} {path}: {source}; check that the folder exists and is writable, or set CAPSTAN_HOME"
    )]
    Io {
        /// What capstan tried ("create the session transcript", ...).
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// A record could not be written because the disk (or the user's
    /// quota) is full.
    #[error(
        "cannot write to the session transcript {path}: the disk is full; {} free some space, then resume the session with --continue",
        if *cut_back { "the record being written was not kept;" } else { "the record being written was cut short and is removed when the session is resumed;" }
    )]
    DiskFull {
        /// The transcript.
        path: PathBuf,
        /// Whether the part of the record written was cut off again.
        cut_back: bool,
    },
    /// A line in the middle of a transcript is not a valid record.
    #[error(
        "the session transcript {path} is damaged at line {line}: {problem}; each line is one JSON record — repair or delete that line to resume the session, or start a new one"
    )]
    Corrupt {
        /// The transcript.
        path: PathBuf,
        /// The line's number, counting from 1.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// The workspace has no sessions.
    #[error("there are no saved sessions for {workspace}; start one without --continue")]
    NoSessions {
        /// The canonical workspace path.
        workspace: PathBuf,
    },
    /// No session id starts with the prefix.
    #[error(
        "no session of {workspace} has an id starting with `{prefix}`; list the sessions to see their ids"
    )]
    NotFound {
        /// The canonical workspace path.
        workspace: PathBuf,
        /// What was asked for.
        prefix: String,
    },
    /// A chosen session id is not a UUID.
    #[error(
        "`{id}` is not a valid session id; --session-id takes a UUID such as 123e4567-e89b-42d3-a456-426614174000"
    )]
    BadId {
        /// What was given.
        id: String,
    },
    /// A chosen session id belongs to a session already.
    #[error(
        "session id {id} is already in use; pass another UUID to --session-id, or --resume {id} to take that session up"
    )]
    IdTaken {
        /// The id.
        id: String,
    },
    /// Several session ids start with the prefix.
    #[error("`{prefix}` matches {count} sessions ({examples}); give more of the id")]
    Ambiguous {
        /// What was asked for.
        prefix: String,
        /// How many matched.
        count: usize,
        /// Some of the matching ids, comma-separated.
        examples: String,
    },
}

/// The saved sessions of one workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sessions {
    workspace: PathBuf,
    dir: PathBuf,
}

impl Sessions {
    /// The sessions of `workspace` (canonicalised) kept under `home`.
    pub fn for_workspace(home: &Home, workspace: &Path) -> Result<Self, SessionError> {
        let workspace = fs::canonicalize(workspace).map_err(|source| SessionError::Workspace {
            path: workspace.to_path_buf(),
            source,
        })?;
        let dir = home.sessions_dir().join(workspace_key(&workspace));
        Ok(Self { workspace, dir })
    }

    /// The canonical workspace path.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The folder holding this workspace's transcripts.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the transcript of session `id` is (or would be).
    pub fn transcript_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.jsonl"))
    }

    /// Where the checkpoints of session `id` are (or would be).
    pub fn checkpoint_dir(&self, id: &str) -> PathBuf {
        checkpoint::store_dir(&self.transcript_path(id))
    }

    /// Removes session `id`: its checkpoints first, then its transcript
    /// (so a failure leaves a session that can still be listed and removed
    /// again, never checkpoints without their session).
    pub fn remove(&self, id: &str) -> Result<(), SessionError> {
        let checkpoints = self.checkpoint_dir(id);
        match fs::remove_dir_all(&checkpoints) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(SessionError::Io {
                    action: "remove the checkpoints of",
                    path: checkpoints,
                    source,
                });
            }
        }
        let transcript = self.transcript_path(id);
        fs::remove_file(&transcript).map_err(|source| SessionError::Io {
            action: "remove the session transcript",
            path: transcript.clone(),
            source,
        })?;
        let _ = fs::remove_file(transcript::disk_full_marker(&transcript));
        Ok(())
    }
}

/// The folder name for a workspace: the tail of its path as a slug, and
/// 12 hex digits of its SHA-256 so different paths never share a folder.
pub fn workspace_key(canonical_workspace: &Path) -> String {
    const SLUG_CHARS: usize = 40;
    let text = canonical_workspace.to_string_lossy();
    let mut slug = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_matches('-');
    let tail_start = slug
        .char_indices()
        .rev()
        .nth(SLUG_CHARS - 1)
        .map_or(0, |(i, _)| i);
    let slug = slug[tail_start..].trim_start_matches('-');
    let digest = Sha256::digest(canonical_workspace.as_os_str().as_encoded_bytes());
    let hash: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    if slug.is_empty() {
        hash
    } else {
        format!("{slug}-{hash}")
    }
}

/// `text` as a session id if it is a UUID (8-4-4-4-12 hex digits), in
/// lower case; `None` otherwise.
pub fn session_uuid(text: &str) -> Option<String> {
    let groups: Vec<&str> = text.split('-').collect();
    let sizes = [8, 4, 4, 4, 12];
    let valid = groups.len() == sizes.len()
        && groups.iter().zip(sizes).all(|(group, size)| {
            group.len() == size && group.bytes().all(|b| b.is_ascii_hexdigit())
        });
    valid.then(|| text.to_ascii_lowercase())
}

/// A fresh session id, a version-4 UUID as Claude Code's session ids are
/// (typed SDK consumers read them as UUIDs): 122 bits from the system's
/// random source, mixed with the time, the process id and a counter so
/// ids differ even where `/dev/urandom` is missing.
pub fn new_session_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = Sha256::new();
    let mut random = [0u8; 16];
    if let Ok(mut urandom) = fs::File::open("/dev/urandom") {
        // A failed read leaves zeros; the time, pid and counter still vary.
        let _ = urandom.read_exact(&mut random);
    }
    hasher.update(random);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.update(nanos.to_le_bytes());
    hasher.update(std::process::id().to_le_bytes());
    hasher.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Now, in milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
