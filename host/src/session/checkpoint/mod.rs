//! Checkpoints: what every prompt of a session changed in the workspace,
//! kept so the files (and the conversation) can be put back as they were
//! before that prompt — independent of git.
//!
//! The store lives next to the transcript, in `<session-id>.checkpoints/`:
//!
//! - `manifest.json`: every tracked file of the workspace with its stat
//!   stamp and the blob holding its content as last seen — the previous
//!   content of any file a tool or command changes is therefore already
//!   kept before the change happens;
//! - `log.json`: one checkpoint per prompt (its number, first line, where
//!   its user record begins in the transcript) and the files it changed,
//!   each with the version before and after;
//! - `blobs/`: file contents named by their BLAKE3 hash, each kept once.
//!
//! A session's first walk copies every file, sharing (hard-linking) the
//! copies of the last session of the workspace for files whose stamp did
//! not change since. A prompt begins with a walk that folds in changes made outside capstan
//! (they belong to no prompt); after each batch of tool calls another walk
//! finds what the tools and commands changed. A walk costs one `lstat` per
//! file; only files whose stamp changed are read and copied.
//!
//! The store is bounded: files over [`Limits::max_file_bytes`] are not
//! copied (their changes are listed as not restorable), the first walk
//! copies at most half of [`Limits::max_bytes`], and when a new copy would
//! go over the cap the oldest checkpoints' copies are pruned (their prompts
//! can still be rewound in the conversation, no longer in files).

mod restore;
pub mod scan;

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use restore::{FileProblem, RestoreReport, STAGED_SUFFIX, recover, recover_all};
pub use scan::{Entry, Manifest, Stamp, Version};

use super::now_ms;
use crate::quantity::format_size;

/// The store's format; a higher one is refused rather than misread.
const FORMAT: u32 = 1;

/// How many characters of a prompt a checkpoint keeps.
const PROMPT_CHARS: usize = 4000;

/// How many characters of a prompt's first line a listing shows.
const TITLE_CHARS: usize = 72;

/// Why the checkpoint store could not be read, written or used.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// A file or folder of the store or the workspace failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was tried.
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// A file of the store is not what capstan wrote.
    #[error(
        "the checkpoint file {path} is damaged ({problem}); remove the folder {dir} to start the session's checkpoints afresh"
    )]
    Damaged {
        /// The file.
        path: PathBuf,
        /// The store's folder.
        dir: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// No checkpoint has that number.
    #[error("{}", no_checkpoint(*.number, *.last))]
    NoCheckpoint {
        /// The number asked for.
        number: u32,
        /// The last checkpoint's number (0: none).
        last: u32,
    },
    /// The file copies needed were pruned to keep the store under its cap.
    #[error(
        "the file copies of prompt {pruned} were pruned to keep the checkpoints under {cap}; files can be restored to prompt {oldest} or later (the conversation can still be rewound to any prompt)"
    )]
    Pruned {
        /// The pruned prompt.
        pruned: u32,
        /// The oldest prompt whose files are kept (the next one if none).
        oldest: u32,
        /// The store's cap, in words.
        cap: String,
    },
    /// Another process is rewinding the session.
    #[error(
        "another capstan is rewinding this session right now (its checkpoints are in {dir}); wait for it to finish"
    )]
    Busy {
        /// The store's folder.
        dir: PathBuf,
    },
    /// The transcript does not match the checkpoint.
    #[error(
        "the transcript {path} is shorter than the checkpoint of prompt {number} expects ({problem}); it was changed outside capstan"
    )]
    Transcript {
        /// The transcript.
        path: PathBuf,
        /// The prompt.
        number: u32,
        /// What does not match.
        problem: String,
    },
}

fn no_checkpoint(number: u32, last: u32) -> String {
    if last == 0 {
        format!("this session has no checkpoints, so there is no prompt {number} to rewind to")
    } else {
        format!("there is no prompt {number}; this session's prompts are numbered 1 to {last}")
    }
}

/// How much the store may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes of file copies kept for one session.
    pub max_bytes: u64,
    /// The largest file copied; larger ones are listed, not restorable.
    pub max_file_bytes: u64,
    /// The most files tracked in a workspace.
    pub max_files: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bytes: 512 << 20,
            max_file_bytes: 16 << 20,
            max_files: 200_000,
        }
    }
}

/// One file a prompt changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The path, relative to the workspace.
    pub path: String,
    /// What it was before the prompt's first change to it.
    pub before: Version,
    /// What the prompt left.
    pub after: Version,
    /// When this session last saw it change, in milliseconds since the
    /// epoch (0 in stores written before it was kept).
    #[serde(default)]
    pub ts_ms: u64,
    /// Whether something other than this session changed the file between
    /// two of the prompt's own changes to it: its `before` is then not the
    /// only content a rewind would undo, so the rewind asks first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interleaved: bool,
}

/// What one prompt changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The prompt's number in the session, from 1.
    pub number: u32,
    /// The prompt, cut to 4,000 characters.
    pub prompt: String,
    /// When the prompt was submitted, in milliseconds since the epoch.
    pub ts_ms: u64,
    /// The length of the transcript just before the prompt's record.
    pub transcript_offset: u64,
    /// The files it changed, in the order found.
    pub changes: Vec<Change>,
    /// Whether its file copies were pruned to keep the store bounded.
    #[serde(default)]
    pub pruned: bool,
}

/// What the log file holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Log {
    format: u32,
    /// Bytes of blobs kept.
    stored_bytes: u64,
    checkpoints: Vec<Checkpoint>,
}

/// Which part of a session a rewind puts back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewindScope {
    /// The workspace's files only; the conversation goes on.
    Files,
    /// The conversation only; the files stay as they are.
    Conversation,
    /// Both.
    Both,
}

impl RewindScope {
    /// Whether the files are restored.
    pub fn files(self) -> bool {
        matches!(self, Self::Files | Self::Both)
    }

    /// Whether the conversation is rewound.
    pub fn conversation(self) -> bool {
        matches!(self, Self::Conversation | Self::Both)
    }
}

/// The checkpoint store of one session.
#[derive(Debug)]
pub struct CheckpointStore {
    dir: PathBuf,
    workspace: PathBuf,
    limits: Limits,
    /// Loaded at first use.
    state: Option<State>,
}

/// Another session's manifest, whose copies a first walk may share.
struct Earlier {
    dir: PathBuf,
    manifest: Manifest,
}

#[derive(Debug, Default)]
struct State {
    manifest: Manifest,
    log: Log,
    /// Whether the manifest changed since it was last saved. It is saved
    /// when a prompt begins, after a rewind and when the store is dropped,
    /// not after every walk: a manifest left behind by a killed process
    /// only makes the next walk read a few more files (whatever changed
    /// since is taken in without belonging to a prompt), while the log,
    /// which says what each prompt changed, is saved at every change.
    manifest_dirty: bool,
    /// Whether the workspace was walked once already (the manifest of an
    /// empty folder is empty too, and its first prompt's files are still
    /// that prompt's).
    baselined: bool,
}

/// Where the checkpoints of the session whose transcript is `transcript`
/// are kept.
pub fn store_dir(transcript: &Path) -> PathBuf {
    transcript.with_extension("checkpoints")
}

impl CheckpointStore {
    /// The store in `dir` for `workspace`; nothing is read until it is used.
    pub fn open(dir: PathBuf, workspace: PathBuf, limits: Limits) -> Self {
        Self {
            dir,
            workspace,
            limits,
            state: None,
        }
    }

    /// The store of the session whose transcript is `transcript`, with the
    /// default limits.
    pub fn for_transcript(transcript: &Path, workspace: PathBuf) -> Self {
        Self::open(store_dir(transcript), workspace, Limits::default())
    }

    /// The store's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The checkpoints, oldest first.
    pub fn checkpoints(&mut self) -> Result<&[Checkpoint], CheckpointError> {
        Ok(&self.state()?.log.checkpoints)
    }

    /// Bytes of file copies kept.
    pub fn stored_bytes(&mut self) -> Result<u64, CheckpointError> {
        Ok(self.state()?.log.stored_bytes)
    }

    /// Starts the checkpoint of a prompt whose transcript record will begin
    /// at `transcript_offset`: changes made since the last walk (outside
    /// capstan) are taken in without belonging to any prompt. Returns the
    /// prompt's number.
    pub fn begin_prompt(
        &mut self,
        prompt: &str,
        transcript_offset: u64,
    ) -> Result<u32, CheckpointError> {
        self.scan(false)?;
        self.flush()?;
        let state = self.state()?;
        let number = state.log.checkpoints.last().map_or(1, |c| c.number + 1);
        state.log.checkpoints.push(Checkpoint {
            number,
            prompt: cut(prompt.trim(), PROMPT_CHARS),
            ts_ms: now_ms(),
            transcript_offset,
            changes: Vec::new(),
            pruned: false,
        });
        self.save_log()?;
        Ok(number)
    }

    /// Takes in what changed in the workspace since the last walk without
    /// giving it to any prompt: call it just before running something for
    /// the prompt (tool calls, commands), so that what another session or
    /// program changed while this one waited for the model or the user is
    /// not counted as this session's.
    pub fn note_outside_changes(&mut self) -> Result<(), CheckpointError> {
        self.scan(false).map(drop)
    }

    /// Finds what changed in the workspace since the last walk and adds it
    /// to the latest prompt's checkpoint; returns what was added. Call it
    /// after anything run for the prompt (tool calls, commands), having
    /// called [`CheckpointStore::note_outside_changes`] just before.
    pub fn record_changes(&mut self) -> Result<Vec<Change>, CheckpointError> {
        let attribute = self.state()?.log.checkpoints.last().is_some();
        self.scan(attribute)
    }

    /// Saves the manifest if a walk changed it since it was last saved;
    /// the agent calls it when a turn ends.
    pub fn flush(&mut self) -> Result<(), CheckpointError> {
        if self.state.as_ref().is_some_and(|s| s.manifest_dirty) {
            self.save_manifest()?;
        }
        Ok(())
    }

    /// The transcript's length before prompt `number`'s record.
    pub fn transcript_offset(&mut self, number: u32) -> Result<u64, CheckpointError> {
        Ok(self.find(number)?.transcript_offset)
    }

    /// The checkpoint of prompt `number`.
    pub fn find(&mut self, number: u32) -> Result<&Checkpoint, CheckpointError> {
        let state = self.state()?;
        let last = state.log.checkpoints.last().map_or(0, |c| c.number);
        state
            .log
            .checkpoints
            .iter()
            .find(|c| c.number == number)
            .ok_or(CheckpointError::NoCheckpoint { number, last })
    }

    /// Forgets the checkpoints of prompt `number` and later (their prompts
    /// were rewound out of the conversation) and the copies only they used.
    pub fn drop_from(&mut self, number: u32) -> Result<(), CheckpointError> {
        let state = self.state()?;
        let keep = state
            .log
            .checkpoints
            .iter()
            .position(|c| c.number >= number)
            .unwrap_or(state.log.checkpoints.len());
        let dropped: Vec<Checkpoint> = state.log.checkpoints.drain(keep..).collect();
        let candidates: Vec<Version> = dropped
            .into_iter()
            .flat_map(|c| c.changes)
            .flat_map(|c| [c.before, c.after])
            .collect();
        self.collect(&candidates)?;
        self.save_manifest()?;
        self.save_log()
    }

    /// Walks the workspace and brings the manifest up to date; with
    /// `attribute`, each change joins the latest checkpoint.
    fn scan(&mut self, attribute: bool) -> Result<Vec<Change>, CheckpointError> {
        let now = scan::now_ns();
        let walked = scan::walk(&self.workspace, self.limits.max_files);
        let ts_ms = now_ms();
        let baseline = !self.state()?.baselined;
        if baseline {
            // Saved even when empty, so a later process knows the first
            // walk was made.
            let state = self.state()?;
            state.baselined = true;
            state.manifest_dirty = true;
        }
        let earlier = if baseline {
            self.earlier_session()
        } else {
            None
        };
        let mut changes = Vec::new();
        let mut garbage = Vec::new();
        let mut manifest_changed = false;
        for (path, (stamp, mode)) in &walked.files {
            let (before, same_stamp) = match self.state()?.manifest.get(path) {
                Some(entry) if entry.stamp == *stamp && !entry.racy => continue,
                Some(entry) => (entry.version.clone(), entry.stamp == *stamp),
                None => (Version::Absent, false),
            };
            let reused = match &earlier {
                Some(earlier) => self.reuse(earlier, path, *stamp)?,
                None => None,
            };
            let after = match reused {
                Some(version) => version,
                None => self.keep(path, *stamp, *mode, baseline, attribute)?,
            };
            manifest_changed = true;
            self.state()?
                .manifest
                .insert(path.clone(), Entry::new(*stamp, after.clone(), now));
            // A file not copied changed if its stamp did.
            let changed = !before.same_content(&after)
                || (matches!(after, Version::Untracked { .. }) && !same_stamp);
            if changed && !baseline {
                changes.push(Change {
                    path: path.clone(),
                    before,
                    after,
                    ts_ms,
                    interleaved: false,
                });
            } else if !before.same_content(&after) {
                garbage.push(before);
            }
        }
        if !walked.truncated {
            let gone: Vec<String> = self
                .state()?
                .manifest
                .keys()
                .filter(|path| !walked.files.contains_key(*path))
                .cloned()
                .collect();
            for path in gone {
                if let Some(entry) = self.state()?.manifest.remove(&path) {
                    manifest_changed = true;
                    changes.push(Change {
                        path,
                        before: entry.version,
                        after: Version::Absent,
                        ts_ms,
                        interleaved: false,
                    });
                }
            }
        }
        if attribute {
            self.attribute(&changes, &mut garbage)?;
        } else {
            garbage.extend(changes.iter().map(|c| c.before.clone()));
        }
        self.collect(&garbage)?;
        if manifest_changed {
            self.state()?.manifest_dirty = true;
        }
        if attribute && !changes.is_empty() {
            self.save_log()?;
        }
        Ok(if attribute { changes } else { Vec::new() })
    }

    /// The most recently saved manifest of another session of the same
    /// workspace (the store folders beside this one), to take unchanged
    /// files' copies from instead of reading them again.
    fn earlier_session(&self) -> Option<Earlier> {
        let sessions = self.dir.parent()?;
        let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
        for entry in fs::read_dir(sessions).ok()?.flatten() {
            let dir = entry.path();
            if dir == self.dir || dir.extension().is_none_or(|e| e != "checkpoints") {
                continue;
            }
            let Ok(modified) = fs::metadata(dir.join("manifest.json")).and_then(|m| m.modified())
            else {
                continue;
            };
            if newest.as_ref().is_none_or(|(time, _)| modified > *time) {
                newest = Some((modified, dir));
            }
        }
        let (_, dir) = newest?;
        let bytes = fs::read(dir.join("manifest.json")).ok()?;
        let manifest = serde_json::from_slice(&bytes).ok()?;
        Some(Earlier { dir, manifest })
    }

    /// The version of `path` from an earlier session's copy, linked into
    /// this store, if the file's stamp is the one that session saw (and
    /// was not too fresh to trust).
    fn reuse(
        &mut self,
        earlier: &Earlier,
        path: &str,
        stamp: Stamp,
    ) -> Result<Option<Version>, CheckpointError> {
        let Some(Entry {
            stamp: seen,
            version: version @ Version::File { blob, .. },
            racy: false,
        }) = earlier.manifest.get(path)
        else {
            return Ok(None);
        };
        if *seen != stamp {
            return Ok(None);
        }
        let mine = self.blob_path(blob);
        if mine.exists() {
            return Ok(Some(version.clone()));
        }
        if self.state()?.log.stored_bytes + stamp.size > self.limits.max_bytes / 2 {
            return Ok(None);
        }
        let dir = self.dir.join("blobs");
        fs::create_dir_all(&dir).map_err(|source| CheckpointError::Io {
            action: "create the checkpoint folder",
            path: dir.clone(),
            source,
        })?;
        // Copies are never changed once written, so two stores may share
        // one; removing either store's folder leaves the other's intact.
        if fs::hard_link(earlier.dir.join("blobs").join(blob), &mine).is_err() {
            return Ok(None);
        }
        self.state()?.log.stored_bytes += stamp.size;
        Ok(Some(version.clone()))
    }

    /// Adds `changes` to the latest checkpoint: a file it already changed
    /// keeps its first `before`; one changed back to how it was drops out.
    fn attribute(
        &mut self,
        changes: &[Change],
        garbage: &mut Vec<Version>,
    ) -> Result<(), CheckpointError> {
        let state = self.state()?;
        let Some(checkpoint) = state.log.checkpoints.last_mut() else {
            return Ok(());
        };
        for change in changes {
            match checkpoint
                .changes
                .iter()
                .position(|c| c.path == change.path)
            {
                Some(index) => {
                    let earlier = &mut checkpoint.changes[index];
                    // Between the prompt's two changes, something else
                    // changed the file (a walk before the calls took it in).
                    let unknown = matches!(earlier.after, Version::Untracked { .. })
                        || matches!(change.before, Version::Untracked { .. });
                    if !unknown && !earlier.after.same_content(&change.before) {
                        earlier.interleaved = true;
                    }
                    garbage.push(std::mem::replace(&mut earlier.after, change.after.clone()));
                    earlier.ts_ms = change.ts_ms;
                    if earlier.before.same_content(&earlier.after)
                        && !earlier.interleaved
                        && !matches!(earlier.after, Version::Untracked { .. })
                    {
                        checkpoint.changes.remove(index);
                    }
                }
                None => checkpoint.changes.push(change.clone()),
            }
        }
        Ok(())
    }

    /// Copies the file at `path` into the store, unless it is too large or
    /// the store is full; returns its version.
    fn keep(
        &mut self,
        path: &str,
        stamp: Stamp,
        mode: u32,
        baseline: bool,
        attributing: bool,
    ) -> Result<Version, CheckpointError> {
        if stamp.size > self.limits.max_file_bytes {
            return Ok(Version::Untracked {
                reason: format!(
                    "larger than {}, the most a checkpoint copies",
                    format_size(self.limits.max_file_bytes)
                ),
            });
        }
        let full = self.workspace.join(path);
        let content = match scan::read_without_waiting(&full) {
            Ok(content) => content,
            Err(e) => {
                return Ok(Version::Untracked {
                    reason: format!("could not be read ({e})"),
                });
            }
        };
        let blob = blake3::hash(&content).to_hex().to_string();
        let size = content.len() as u64;
        let blob_path = self.blob_path(&blob);
        if blob_path.exists() {
            return Ok(Version::File { blob, mode });
        }
        let cap = if baseline {
            self.limits.max_bytes / 2
        } else {
            self.limits.max_bytes
        };
        while self.state()?.log.stored_bytes + size > cap {
            if baseline || !self.prune_oldest(attributing)? {
                return Ok(Version::Untracked {
                    reason: format!(
                        "the checkpoints are full ({} kept)",
                        format_size(self.limits.max_bytes)
                    ),
                });
            }
        }
        self.write_blob(&blob_path, &content)?;
        self.state()?.log.stored_bytes += size;
        Ok(Version::File { blob, mode })
    }

    /// Prunes the file copies of the oldest checkpoint that still has them
    /// (never the latest while it is being recorded); whether one was.
    fn prune_oldest(&mut self, keep_latest: bool) -> Result<bool, CheckpointError> {
        let state = self.state()?;
        let eligible = if keep_latest {
            state.log.checkpoints.len().saturating_sub(1)
        } else {
            state.log.checkpoints.len()
        };
        let Some(checkpoint) = state.log.checkpoints[..eligible]
            .iter_mut()
            .find(|c| !c.pruned && !c.changes.is_empty())
        else {
            return Ok(false);
        };
        checkpoint.pruned = true;
        let candidates: Vec<Version> = std::mem::take(&mut checkpoint.changes)
            .into_iter()
            .flat_map(|c| [c.before, c.after])
            .collect();
        self.collect(&candidates)?;
        self.save_log()?;
        Ok(true)
    }

    /// Deletes the blobs among `candidates` that nothing refers to any more.
    fn collect(&mut self, candidates: &[Version]) -> Result<(), CheckpointError> {
        let blobs: HashSet<&str> = candidates
            .iter()
            .filter_map(|v| match v {
                Version::File { blob, .. } => Some(blob.as_str()),
                _ => None,
            })
            .collect();
        if blobs.is_empty() {
            return Ok(());
        }
        let state = self.state.get_or_insert_with(State::default);
        let mut referenced: HashSet<&str> = HashSet::new();
        let versions = state.manifest.values().map(|e| &e.version).chain(
            state
                .log
                .checkpoints
                .iter()
                .flat_map(|c| c.changes.iter().flat_map(|c| [&c.before, &c.after])),
        );
        for version in versions {
            if let Version::File { blob, .. } = version
                && blobs.contains(blob.as_str())
            {
                referenced.insert(blob);
            }
        }
        let mut freed = 0;
        for blob in blobs.difference(&referenced) {
            let path = self.dir.join("blobs").join(blob);
            if let Ok(metadata) = fs::metadata(&path)
                && fs::remove_file(&path).is_ok()
            {
                freed += metadata.len();
            }
        }
        state.log.stored_bytes = state.log.stored_bytes.saturating_sub(freed);
        Ok(())
    }

    /// Where the blob `hash` is.
    fn blob_path(&self, hash: &str) -> PathBuf {
        self.dir.join("blobs").join(hash)
    }

    /// Writes a blob whole, or not at all.
    fn write_blob(&self, path: &Path, content: &[u8]) -> Result<(), CheckpointError> {
        let dir = self.dir.join("blobs");
        fs::create_dir_all(&dir).map_err(|source| CheckpointError::Io {
            action: "create the checkpoint folder",
            path: dir.clone(),
            source,
        })?;
        write_atomically(
            path,
            content,
            "save a file copy for the checkpoint",
            Durability::Cached,
        )
    }

    /// The loaded state.
    fn state(&mut self) -> Result<&mut State, CheckpointError> {
        if self.state.is_none() {
            let manifest = self.read_json::<Manifest>("manifest.json")?;
            let log = self.read_json::<Log>("log.json")?;
            let log = match log {
                Some(log) if log.format > FORMAT => {
                    return Err(CheckpointError::Damaged {
                        path: self.dir.join("log.json"),
                        dir: self.dir.clone(),
                        problem: format!(
                            "written in format {}, newer than this capstan's {FORMAT}",
                            log.format
                        ),
                    });
                }
                Some(log) => log,
                None => Log {
                    format: FORMAT,
                    ..Log::default()
                },
            };
            self.state = Some(State {
                baselined: manifest.is_some() || !log.checkpoints.is_empty(),
                manifest: manifest.unwrap_or_default(),
                log,
                manifest_dirty: false,
            });
        }
        Ok(self.state.get_or_insert_with(State::default))
    }

    /// Reads one of the store's JSON files; `None` if it does not exist.
    fn read_json<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<T>, CheckpointError> {
        let path = self.dir.join(name);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(CheckpointError::Io {
                    action: "read",
                    path,
                    source,
                });
            }
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| CheckpointError::Damaged {
                path,
                dir: self.dir.clone(),
                problem: e.to_string(),
            })
    }

    fn save_manifest(&mut self) -> Result<(), CheckpointError> {
        let state = self.state()?;
        let bytes = serde_json::to_vec(&state.manifest).unwrap_or_default();
        state.manifest_dirty = false;
        self.save("manifest.json", &bytes)
    }

    fn save_log(&mut self) -> Result<(), CheckpointError> {
        let bytes = serde_json::to_vec(&self.state()?.log).unwrap_or_default();
        self.save("log.json", &bytes)
    }

    fn save(&self, name: &str, bytes: &[u8]) -> Result<(), CheckpointError> {
        fs::create_dir_all(&self.dir).map_err(|source| CheckpointError::Io {
            action: "create the checkpoint folder",
            path: self.dir.clone(),
            source,
        })?;
        write_atomically(
            &self.dir.join(name),
            bytes,
            "save the checkpoints",
            Durability::Cached,
        )
    }

    /// The workspace.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The content of blob `hash`, checked against its name.
    fn read_blob(&self, hash: &str) -> Result<Vec<u8>, String> {
        let content = fs::read(self.blob_path(hash))
            .map_err(|e| format!("its saved copy cannot be read ({e})"))?;
        if blake3::hash(&content).to_hex().as_str() != hash {
            return Err("its saved copy is damaged".to_string());
        }
        Ok(content)
    }

    /// The checkpoints by number, for callers that list them.
    pub fn by_number(&mut self) -> Result<BTreeMap<u32, Checkpoint>, CheckpointError> {
        Ok(self
            .state()?
            .log
            .checkpoints
            .iter()
            .map(|c| (c.number, c.clone()))
            .collect())
    }
}

impl Drop for CheckpointStore {
    fn drop(&mut self) {
        // Best effort: a manifest not saved costs the next walk some
        // reads, nothing more.
        let _ = self.flush();
    }
}

/// How sure a write must be to survive a crash of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// Flushed to disk before the rename: the user's files and transcript.
    Synced,
    /// Renamed without waiting for the disk: the store's own files, which
    /// the next walk can make again.
    Cached,
}

/// Writes `bytes` to a temporary file beside `path` and renames it over
/// `path`, so a reader sees the old file or the new one, never half of it;
/// with [`Durability::Synced`] the data reaches the disk before the rename.
pub(crate) fn write_atomically(
    path: &Path,
    bytes: &[u8],
    action: &'static str,
    durability: Durability,
) -> Result<(), CheckpointError> {
    let io = |source| CheckpointError::Io {
        action,
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    if durability == Durability::Synced {
        file.as_file().sync_data().map_err(io)?;
    }
    file.persist(path).map_err(|e| io(e.error))?;
    if durability == Durability::Synced
        && let Ok(folder) = fs::File::open(dir)
    {
        // The rename itself reaches the disk with the folder.
        let _ = folder.sync_all();
    }
    Ok(())
}

impl Checkpoint {
    /// The prompt's first line, cut for a listing.
    pub fn title(&self) -> String {
        let line = self
            .prompt
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        cut(line.trim(), TITLE_CHARS)
    }
}

/// `text` cut to `max` characters, marked with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() > max {
        let kept: String = text.chars().take(max).collect();
        format!("{kept}…")
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests;
