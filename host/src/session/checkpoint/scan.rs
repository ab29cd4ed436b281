//! The workspace as a checkpoint sees it: a stat-based manifest of its
//! files, walked without following symbolic links and without entering
//! folders that only hold what tools regenerate (`target/`,
//! `node_modules/`, `.git/` ...). A file whose size, times or inode differ
//! from the manifest is read again; every other file costs one `lstat`.

use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Folders never walked: version-control internals and build or dependency
/// output that a command regenerates. Their changes are not checkpointed.
pub const SKIPPED_DIRS: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    ".jj",
    "target",
    "node_modules",
    "__pycache__",
    ".venv",
    ".mypy_cache",
    ".pytest_cache",
    ".tox",
    ".gradle",
    ".cache",
];

/// What a file was at one moment, as far as restoring it goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Version {
    /// There was no file.
    Absent,
    /// A file whose content is the blob named by its BLAKE3 hash.
    File {
        /// The content's BLAKE3 hash, hex.
        blob: String,
        /// The permission bits.
        mode: u32,
    },
    /// A file whose content was not kept (larger than the per-file limit,
    /// unreadable, or over the store's size cap); it cannot be restored.
    Untracked {
        /// Why its content was not kept.
        reason: String,
    },
}

impl Version {
    /// Whether two versions hold the same content (the mode aside).
    pub fn same_content(&self, other: &Version) -> bool {
        match (self, other) {
            (Version::Absent, Version::Absent) => true,
            (Version::File { blob: a, .. }, Version::File { blob: b, .. }) => a == b,
            _ => false,
        }
    }
}

/// The stat facts that tell whether a file changed without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Status-change time, nanoseconds since the epoch.
    pub ctime_ns: i128,
    /// Inode number.
    pub ino: u64,
}

impl Stamp {
    /// The stamp of `metadata`.
    pub fn of(metadata: &fs::Metadata) -> Self {
        Self {
            size: metadata.size(),
            mtime_ns: i128::from(metadata.mtime()) * 1_000_000_000
                + i128::from(metadata.mtime_nsec()),
            ctime_ns: i128::from(metadata.ctime()) * 1_000_000_000
                + i128::from(metadata.ctime_nsec()),
            ino: metadata.ino(),
        }
    }
}

/// One file of the manifest: its stamp and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The stamp when it was last looked at.
    pub stamp: Stamp,
    /// Its content then.
    pub version: Version,
    /// Whether it was modified so shortly before it was looked at that a
    /// second write within the file system's clock tick could leave the
    /// same stamp; such a file is read again at the next walk.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub racy: bool,
}

/// How close to the walk a modification makes a stamp untrustworthy:
/// file times advance by the kernel's clock tick (up to 10 ms), so a
/// generous margin.
const RACY_NS: i128 = 100_000_000;

impl Entry {
    /// The entry of a file with `stamp` holding `version`, looked at
    /// `now_ns` (nanoseconds since the epoch).
    pub fn new(stamp: Stamp, version: Version, now_ns: i128) -> Self {
        Self {
            racy: stamp.mtime_ns + RACY_NS > now_ns || stamp.ctime_ns + RACY_NS > now_ns,
            stamp,
            version,
        }
    }
}

/// Now, in nanoseconds since the epoch.
pub fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
}

/// Every tracked file of the workspace, by path relative to it (`/`
/// separated, as walked).
pub type Manifest = BTreeMap<String, Entry>;

/// The regular files under `root`, with their stamps and permission bits,
/// by relative path. Folders that cannot be read are skipped (a command
/// cannot have changed through capstan what capstan cannot read either).
pub fn walk(root: &Path, max_files: usize) -> Walked {
    let mut walked = Walked::default();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                // Paths that are not UTF-8 are not tracked.
                continue;
            };
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            let rel = if prefix.is_empty() {
                name.to_string()
            } else {
                format!("{prefix}/{name}")
            };
            if file_type.is_dir() {
                if !SKIPPED_DIRS.contains(&name) {
                    stack.push((entry.path(), rel));
                }
            } else if file_type.is_file() {
                if is_transient(name) {
                    continue;
                }
                if walked.files.len() >= max_files {
                    walked.truncated = true;
                    continue;
                }
                match entry.metadata() {
                    Ok(metadata) => {
                        walked
                            .files
                            .insert(rel, (Stamp::of(&metadata), metadata.mode() & 0o7777));
                    }
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(_) => {}
                }
            }
        }
    }
    walked
}

/// Whether `name` is one of capstan's own short-lived files: a copy a
/// rewind stages beside its target, or the fs tools' temporary and lock
/// files. They belong to no prompt, and a rewind must never restore one.
fn is_transient(name: &str) -> bool {
    name.ends_with(super::STAGED_SUFFIX)
        || name.contains(".capstan-tmp-")
        || name.ends_with(".capstan-lock")
}

/// What a walk found.
#[derive(Debug, Default)]
pub struct Walked {
    /// Each regular file's stamp and permission bits.
    pub files: BTreeMap<String, (Stamp, u32)>,
    /// Whether files were left out because there were more than the limit.
    pub truncated: bool,
}

/// Reads the regular file at `path` for a checkpoint without ever waiting:
/// opened with `O_NONBLOCK`, so a file another process holds a lease on
/// fails at once (`EWOULDBLOCK`) instead of stalling the session, and with
/// `O_NOFOLLOW`, so a file swapped for a symbolic link is not followed.
pub fn read_without_waiting(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)?;
    let mut content = Vec::new();
    file.read_to_end(&mut content)?;
    Ok(content)
}
