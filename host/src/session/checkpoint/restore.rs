//! Putting files back as they were before a prompt, and cutting the
//! transcript back to it.
//!
//! Files are only ever written beneath the workspace, through folders that
//! are real folders (never a symbolic link), each replaced whole by a
//! rename of a copy staged in the store (on another file system, a hidden
//! `.NAME.capstan-rewind` file beside it). A file whose content is no
//! longer what the last prompt that changed it left (the user or another
//! program edited it since), that something else changed between the
//! session's own changes, or that another session of the workspace changed
//! since the prompt began, is reported and left as it is, unless the
//! caller forces the restore.
//!
//! A rewind is journaled: before the first file is touched, what it will
//! do is saved (`rewind.json`, flushed to disk); it is removed when
//! everything is done. A rewind that was killed half-way is completed by
//! [`recover`] at the next start in the workspace or the next rewind.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::scan::{self, Stamp};
use super::{
    CheckpointError, CheckpointStore, Durability, Entry, Log, RewindScope, Version, format_size,
    write_atomically,
};
use crate::session::record::{Event, Record};

/// The journal of a rewind under way, in the store's folder.
const JOURNAL: &str = "rewind.json";

/// The lock a rewind holds, so a start does not complete a live one.
const LOCK: &str = "rewind.lock";

/// Where restored contents are staged before being renamed into place.
const STAGING: &str = "staging";

/// The suffix of a file staged beside its target when the store is on
/// another file system.
pub const STAGED_SUFFIX: &str = ".capstan-rewind";

/// A file a restore did not put back, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProblem {
    /// The path, relative to the workspace.
    pub path: String,
    /// Why, in words.
    pub reason: String,
}

/// What a rewind did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Files written back with their earlier content.
    pub restored: Vec<String>,
    /// Files removed because they did not exist before.
    pub removed: Vec<String>,
    /// Files changed since by something other than this session, left as
    /// they are.
    pub conflicts: Vec<FileProblem>,
    /// Files whose earlier content was not kept or could not be written.
    pub failed: Vec<FileProblem>,
    /// Whether the conversation was cut back.
    pub conversation_rewound: bool,
    /// The rewound prompt's text (first line), to type again or change.
    pub prompt: String,
    /// An interrupted rewind completed first, in words.
    pub recovered: Option<String>,
}

/// What a rewind is about to do, saved before it starts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Journal {
    /// The prompt rewound to.
    number: u32,
    /// Whether the files are restored.
    files: bool,
    /// Whether the conversation is cut back.
    conversation: bool,
    /// Whether files changed by something else are overwritten.
    force: bool,
    /// Where the transcript is cut.
    transcript_offset: u64,
    /// Each file to put back: what it held when the rewind was planned,
    /// and what it gets.
    actions: Vec<Action>,
}

#[cfg(test)]
impl Journal {
    /// The journal of a files-only rewind to prompt `number`.
    pub(super) fn for_test(number: u32, actions: Vec<Action>) -> Self {
        Self {
            number,
            files: true,
            conversation: false,
            force: false,
            transcript_offset: 0,
            actions,
        }
    }
}

/// One file a rewind puts back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Action {
    path: String,
    from: Version,
    to: Version,
}

/// What a rewind would do to the files.
pub(super) struct Plan {
    pub(super) actions: Vec<Action>,
    conflicts: Vec<FileProblem>,
    failed: Vec<FileProblem>,
}

/// Completes a rewind of the session whose checkpoints are in `dir` that
/// was interrupted (the process killed), if there is one and no process is
/// running it; says what was done.
pub fn recover(dir: &Path, workspace: &Path) -> Result<Option<String>, CheckpointError> {
    if !dir.join(JOURNAL).is_file() {
        return Ok(None);
    }
    let mut store = CheckpointStore::open(
        dir.to_path_buf(),
        workspace.to_path_buf(),
        super::Limits::default(),
    );
    let Some(_lock) = store.lock(false)? else {
        return Ok(None);
    };
    let transcript = dir.with_extension("jsonl");
    store.recover_locked(&transcript)
}

/// Completes the interrupted rewinds of every session of the workspace
/// whose transcripts are in `sessions`; what was done, one line each.
pub fn recover_all(sessions: &Path, workspace: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(sessions) else {
        return Vec::new();
    };
    let mut said = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        if dir.extension().is_none_or(|e| e != "checkpoints") {
            continue;
        }
        match recover(&dir, workspace) {
            Ok(Some(text)) => said.push(text),
            Ok(None) => {}
            Err(e) => said.push(format!("an interrupted rewind could not be completed: {e}")),
        }
    }
    said
}

impl CheckpointStore {
    /// Puts back what `scope` names as it was before prompt `number`:
    /// the files its and later prompts changed, and/or the conversation
    /// (the transcript at `transcript` is cut before the prompt's record,
    /// atomically, and those prompts' checkpoints are forgotten). With
    /// `force`, files changed since by something else are overwritten too.
    /// A rewind interrupted earlier is completed first.
    pub fn rewind(
        &mut self,
        transcript: &Path,
        number: u32,
        scope: RewindScope,
        force: bool,
    ) -> Result<RestoreReport, CheckpointError> {
        let Some(_lock) = self.lock(true)? else {
            return Err(CheckpointError::Busy {
                dir: self.dir().to_path_buf(),
            });
        };
        let recovered = self.recover_locked(transcript)?;
        let checkpoint = self.find(number)?.clone();
        let mut report = RestoreReport {
            prompt: checkpoint.prompt.clone(),
            recovered,
            ..RestoreReport::default()
        };
        let actions = if scope.files() {
            let plan = self.plan(number, force)?;
            report.conflicts = plan.conflicts;
            report.failed = plan.failed;
            plan.actions
        } else {
            Vec::new()
        };
        let journal = Journal {
            number,
            files: scope.files(),
            conversation: scope.conversation(),
            force,
            transcript_offset: checkpoint.transcript_offset,
            actions,
        };
        self.save_journal(&journal)?;
        self.carry_out(transcript, &journal, &mut report)?;
        Ok(report)
    }

    /// The files a rewind to prompt `number` would leave as they are
    /// because something other than this session changed them since (what
    /// `/rewind` asks about before overwriting them).
    pub fn conflicts(&mut self, number: u32) -> Result<Vec<FileProblem>, CheckpointError> {
        Ok(self.plan(number, false)?.conflicts)
    }

    /// Completes the rewind whose journal is in the store, if any; the
    /// caller holds the lock.
    fn recover_locked(&mut self, transcript: &Path) -> Result<Option<String>, CheckpointError> {
        let Some(journal) = self.read_json::<Journal>(JOURNAL)? else {
            self.clear_staging(&[]);
            return Ok(None);
        };
        let mut report = RestoreReport::default();
        self.carry_out(transcript, &journal, &mut report)?;
        let mut text = format!(
            "a rewind to before prompt {} was interrupted; it is now complete",
            journal.number
        );
        let done = report.restored.len() + report.removed.len();
        if journal.files {
            text.push_str(&format!(" ({done} file(s) put back"));
            if !report.conflicts.is_empty() || !report.failed.is_empty() {
                let left: Vec<String> = report
                    .conflicts
                    .iter()
                    .chain(&report.failed)
                    .map(|p| format!("{}: {}", p.path, p.reason))
                    .collect();
                text.push_str(&format!("; left as they are: {}", left.join("; ")));
            }
            text.push(')');
        }
        if journal.conversation {
            text.push_str("; the conversation was cut back");
        }
        Ok(Some(text))
    }

    /// Does what `journal` says (again, if it was begun): every file not
    /// yet put back is, unless something changed it since the plan; then
    /// the checkpoints and the transcript follow, and the journal goes.
    fn carry_out(
        &mut self,
        transcript: &Path,
        journal: &Journal,
        report: &mut RestoreReport,
    ) -> Result<(), CheckpointError> {
        self.clear_staging(&journal.actions);
        let mut undone = Vec::new();
        for action in &journal.actions {
            let full = match beneath(self.workspace(), &action.path) {
                Ok(full) => full,
                Err(reason) => {
                    report.failed.push(FileProblem {
                        path: action.path.clone(),
                        reason,
                    });
                    continue;
                }
            };
            let current = current_version(&full);
            if current.same_content(&action.to) {
                self.note_restored(&action.path, &full, &action.to)?;
                undone.push(action.path.clone());
                if !action.from.same_content(&action.to) {
                    // Put back before an interruption.
                    match action.to {
                        Version::Absent => report.removed.push(action.path.clone()),
                        _ => report.restored.push(action.path.clone()),
                    }
                }
                continue;
            }
            if !journal.force && !current.same_content(&action.from) {
                report.conflicts.push(FileProblem {
                    path: action.path.clone(),
                    reason: "changed by something other than capstan while the rewind ran; left as it is".to_string(),
                });
                continue;
            }
            let staging = self.dir().join(STAGING);
            let outcome = match &action.to {
                Version::Absent => remove(self.workspace(), &full),
                Version::File { blob, mode } => self.read_blob(blob).and_then(|content| {
                    write_file(self.workspace(), &staging, &full, &content, *mode)
                }),
                Version::Untracked { reason } => {
                    Err(format!("its earlier content was not kept: it was {reason}"))
                }
            };
            match outcome {
                Ok(()) => {
                    self.note_restored(&action.path, &full, &action.to)?;
                    undone.push(action.path.clone());
                    match action.to {
                        Version::Absent => report.removed.push(action.path.clone()),
                        _ => report.restored.push(action.path.clone()),
                    }
                }
                Err(reason) => report.failed.push(FileProblem {
                    path: action.path.clone(),
                    reason,
                }),
            }
        }
        // Every staged copy was renamed into place or removed.
        let _ = fs::remove_dir(self.dir().join(STAGING));
        if journal.files {
            let undone: Vec<&str> = undone.iter().map(String::as_str).collect();
            self.forget_undone(journal.number, &undone)?;
            self.save_manifest()?;
        }
        if journal.conversation {
            cut_transcript(transcript, journal.transcript_offset, journal.number)?;
            self.drop_from(journal.number)?;
            report.conversation_rewound = true;
        }
        self.remove_journal()
    }

    /// What restoring the files of prompts `number` and later would do.
    pub(super) fn plan(&mut self, number: u32, force: bool) -> Result<Plan, CheckpointError> {
        let max_bytes = self.limits().max_bytes;
        let checkpoints = self.checkpoints()?.to_vec();
        let later: Vec<_> = checkpoints.iter().filter(|c| c.number >= number).collect();
        if let Some(pruned) = later.iter().rev().find(|c| c.pruned) {
            let oldest = checkpoints
                .iter()
                .filter(|c| c.number > pruned.number && !c.pruned)
                .map(|c| c.number)
                .next()
                .unwrap_or(pruned.number + 1);
            return Err(CheckpointError::Pruned {
                pruned: pruned.number,
                oldest,
                cap: format_size(max_bytes),
            });
        }
        let since_ms = later.first().map_or(0, |c| c.ts_ms);
        // For each path: what it was before the first of these prompts
        // changed it, what the last of them left, the last prompt, and
        // whether something else changed it between their changes.
        let mut targets: BTreeMap<String, Target> = BTreeMap::new();
        for checkpoint in &later {
            for change in &checkpoint.changes {
                targets
                    .entry(change.path.clone())
                    .and_modify(|t| {
                        let unknown = matches!(t.expected, Version::Untracked { .. })
                            || matches!(change.before, Version::Untracked { .. });
                        if change.interleaved
                            || (!unknown && !t.expected.same_content(&change.before))
                        {
                            t.interleaved_in.get_or_insert(checkpoint.number);
                        }
                        t.expected = change.after.clone();
                        t.last_prompt = checkpoint.number;
                    })
                    .or_insert(Target {
                        target: change.before.clone(),
                        expected: change.after.clone(),
                        last_prompt: checkpoint.number,
                        interleaved_in: change.interleaved.then_some(checkpoint.number),
                    });
            }
        }
        let paths: BTreeSet<String> = targets.keys().cloned().collect();
        let others = if force {
            BTreeMap::new()
        } else {
            self.changed_by_other_sessions(since_ms, &paths)
        };
        let mut plan = Plan {
            actions: Vec::new(),
            conflicts: Vec::new(),
            failed: Vec::new(),
        };
        for (path, t) in targets {
            let full = match beneath(self.workspace(), &path) {
                Ok(full) => full,
                Err(reason) => {
                    plan.failed.push(FileProblem { path, reason });
                    continue;
                }
            };
            let current = current_version(&full);
            if current.same_content(&t.target) {
                plan.actions.push(Action {
                    path,
                    from: current.clone(),
                    to: t.target,
                });
                continue;
            }
            let conflict = if force {
                None
            } else if let Some(session) = others.get(&path) {
                Some(format!(
                    "also changed by session {session} since prompt {number} began (two sessions share this workspace); left as it is"
                ))
            } else if let Some(prompt) = t.interleaved_in {
                Some(format!(
                    "changed by something other than this session between its own changes (prompt {prompt}); left as it is"
                ))
            } else if !current.same_content(&t.expected) {
                let last_prompt = t.last_prompt;
                Some(match (&current, &t.expected) {
                    (Version::Absent, _) => format!(
                        "deleted since prompt {last_prompt} by something other than capstan; left deleted"
                    ),
                    (_, Version::Untracked { .. }) => format!(
                        "capstan kept no copy of what prompt {last_prompt} left, so it cannot tell whether it changed since; left as it is"
                    ),
                    _ => format!(
                        "changed since prompt {last_prompt} by something other than capstan; left as it is"
                    ),
                })
            } else {
                None
            };
            if let Some(reason) = conflict {
                plan.conflicts.push(FileProblem { path, reason });
                continue;
            }
            if let Version::Untracked { reason } = &t.target {
                plan.failed.push(FileProblem {
                    path,
                    reason: format!("its earlier content was not kept: it was {reason}"),
                });
                continue;
            }
            plan.actions.push(Action {
                path,
                from: current,
                to: t.target,
            });
        }
        Ok(plan)
    }

    /// The paths among `paths` that another session of the workspace saw
    /// change at `since_ms` or later, with that session's id.
    fn changed_by_other_sessions(
        &self,
        since_ms: u64,
        paths: &BTreeSet<String>,
    ) -> BTreeMap<String, String> {
        let mut found = BTreeMap::new();
        let Some(sessions) = self.dir().parent() else {
            return found;
        };
        let Ok(entries) = fs::read_dir(sessions) else {
            return found;
        };
        for entry in entries.flatten() {
            let dir = entry.path();
            if dir == self.dir() || dir.extension().is_none_or(|e| e != "checkpoints") {
                continue;
            }
            let Some(log) = fs::read(dir.join("log.json"))
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Log>(&bytes).ok())
            else {
                continue;
            };
            let id = dir
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            for checkpoint in &log.checkpoints {
                for change in &checkpoint.changes {
                    let seen = if change.ts_ms > 0 {
                        change.ts_ms
                    } else {
                        checkpoint.ts_ms
                    };
                    if seen >= since_ms && paths.contains(&change.path) {
                        found
                            .entry(change.path.clone())
                            .or_insert_with(|| id.clone());
                    }
                }
            }
        }
        found
    }

    /// Takes the store's rewind lock (waiting for it with `wait`); `None`
    /// when another process holds it and `wait` is false.
    fn lock(&self, wait: bool) -> Result<Option<fs::File>, CheckpointError> {
        let io = |source| CheckpointError::Io {
            action: "lock the checkpoints of",
            path: self.dir().to_path_buf(),
            source,
        };
        fs::create_dir_all(self.dir()).map_err(io)?;
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir().join(LOCK))
            .map_err(io)?;
        if wait {
            file.lock().map_err(io)?;
            return Ok(Some(file));
        }
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(fs::TryLockError::WouldBlock) => Ok(None),
            Err(fs::TryLockError::Error(e)) => Err(io(e)),
        }
    }

    /// Saves the journal, flushed to disk, before anything is changed.
    pub(super) fn save_journal(&self, journal: &Journal) -> Result<(), CheckpointError> {
        let bytes = serde_json::to_vec(journal).unwrap_or_default();
        write_atomically(
            &self.dir().join(JOURNAL),
            &bytes,
            "save the rewind journal",
            Durability::Synced,
        )
    }

    /// Removes the journal: the rewind is complete.
    fn remove_journal(&self) -> Result<(), CheckpointError> {
        let path = self.dir().join(JOURNAL);
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(source) => {
                return Err(CheckpointError::Io {
                    action: "remove the rewind journal",
                    path,
                    source,
                });
            }
        }
        if let Ok(folder) = fs::File::open(self.dir()) {
            let _ = folder.sync_all();
        }
        Ok(())
    }

    /// Removes what an interrupted rewind staged: the store's staging
    /// folder, and the hidden staged files beside the files of `actions`.
    fn clear_staging(&self, actions: &[Action]) {
        let _ = fs::remove_dir_all(self.dir().join(STAGING));
        for action in actions {
            if let Ok(full) = beneath(self.workspace(), &action.path) {
                let _ = fs::remove_file(staged_beside(&full));
            }
        }
    }

    /// Drops from the checkpoints of prompt `number` and later their
    /// changes to the files now put back, which those prompts no longer
    /// hold: a later rewind to an earlier prompt then expects the restored
    /// content, not what the undone prompts had left.
    fn forget_undone(&mut self, number: u32, undone: &[&str]) -> Result<(), CheckpointError> {
        let mut candidates = Vec::new();
        let state = self.state.get_or_insert_with(Default::default);
        for checkpoint in state
            .log
            .checkpoints
            .iter_mut()
            .filter(|c| c.number >= number)
        {
            checkpoint.changes.retain(|change| {
                let keep = !undone.contains(&change.path.as_str());
                if !keep {
                    candidates.push(change.before.clone());
                    candidates.push(change.after.clone());
                }
                keep
            });
        }
        self.collect(&candidates)?;
        self.save_log()
    }

    /// Records in the manifest that `path` now holds `version`, so the next
    /// walk does not count the restore as a change of the next prompt.
    fn note_restored(
        &mut self,
        path: &str,
        full: &Path,
        version: &Version,
    ) -> Result<(), CheckpointError> {
        let state = self.state()?;
        match fs::symlink_metadata(full) {
            Ok(metadata) if metadata.is_file() => {
                state.manifest.insert(
                    path.to_string(),
                    Entry::new(Stamp::of(&metadata), version.clone(), scan::now_ns()),
                );
            }
            _ => {
                state.manifest.remove(path);
            }
        }
        Ok(())
    }
}

/// `path` (relative, `/`-separated) joined to `workspace`, refused if it
/// could lead out of it.
fn beneath(workspace: &Path, path: &str) -> Result<PathBuf, String> {
    let relative = Path::new(path);
    if relative.as_os_str().is_empty()
        || relative
            .components()
            .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err("its path is not a plain path inside the workspace; skipped".to_string());
    }
    Ok(workspace.join(relative))
}

/// What the file at `full` holds now, without following a symbolic link.
fn current_version(full: &Path) -> Version {
    match fs::symlink_metadata(full) {
        Err(e) if e.kind() == ErrorKind::NotFound => Version::Absent,
        Err(e) => Version::Untracked {
            reason: format!("unreadable ({e})"),
        },
        Ok(metadata) if !metadata.is_file() => Version::Untracked {
            reason: "no longer a regular file".to_string(),
        },
        Ok(metadata) => match scan::read_without_waiting(full) {
            Ok(content) => Version::File {
                blob: blake3::hash(&content).to_hex().to_string(),
                mode: metadata.permissions().mode() & 0o7777,
            },
            Err(e) => Version::Untracked {
                reason: format!("unreadable ({e})"),
            },
        },
    }
}

/// Makes sure every folder between `workspace` and `full` is a real folder
/// (creating missing ones), so nothing written through them lands
/// elsewhere.
fn real_folders(workspace: &Path, full: &Path) -> Result<(), String> {
    let Some(parent) = full.parent() else {
        return Ok(());
    };
    let Ok(relative) = parent.strip_prefix(workspace) else {
        return Err("outside the workspace; skipped".to_string());
    };
    let mut dir = workspace.to_path_buf();
    for component in relative.components() {
        dir.push(component);
        match fs::symlink_metadata(&dir) {
            Ok(metadata) if metadata.is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "{} is now a symbolic link or a file, not a folder; skipped so nothing outside the workspace is written",
                    dir.strip_prefix(workspace).unwrap_or(&dir).display()
                ));
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                fs::create_dir(&dir)
                    .map_err(|e| format!("cannot create the folder {}: {e}", dir.display()))?;
            }
            Err(e) => return Err(format!("cannot look at {}: {e}", dir.display())),
        }
    }
    Ok(())
}

/// Writes `content` to `full` whole: staged in `staging` (the store's
/// folder, so an interrupted rewind leaves nothing in the workspace),
/// flushed to disk with its permission bits, and renamed over it. When the
/// store is on another file system, the staged file is a hidden
/// `.NAME.capstan-rewind` beside it instead, which the next rewind or start
/// removes if the process was killed before the rename.
fn write_file(
    workspace: &Path,
    staging: &Path,
    full: &Path,
    content: &[u8],
    mode: u32,
) -> Result<(), String> {
    real_folders(workspace, full)?;
    fs::create_dir_all(staging)
        .map_err(|e| format!("cannot create the folder {}: {e}", staging.display()))?;
    let name = blake3::hash(full.as_os_str().as_encoded_bytes()).to_hex();
    let staged = staging.join(&name.as_str()[..32]);
    stage(&staged, content, mode)?;
    match fs::rename(&staged, full) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::CrossesDevices => {
            let _ = fs::remove_file(&staged);
            let beside = staged_beside(full);
            stage(&beside, content, mode)?;
            fs::rename(&beside, full).map_err(|e| {
                let _ = fs::remove_file(&beside);
                format!("cannot write it: {e}")
            })?;
        }
        Err(e) => {
            let _ = fs::remove_file(&staged);
            return Err(format!("cannot write it: {e}"));
        }
    }
    if let Some(folder) = full.parent()
        && let Ok(folder) = fs::File::open(folder)
    {
        // The rename itself reaches the disk with the folder.
        let _ = folder.sync_all();
    }
    Ok(())
}

/// Writes `content` with permission bits `mode` to a new file at `path`,
/// flushed to disk.
fn stage(path: &Path, content: &[u8], mode: u32) -> Result<(), String> {
    let written = fs::File::create(path).and_then(|mut file| {
        file.write_all(content)?;
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.sync_data()
    });
    written.map_err(|e| {
        let _ = fs::remove_file(path);
        format!(
            "cannot stage its earlier content in {}: {e}",
            path.display()
        )
    })
}

/// The hidden file beside `full` that a restore stages into when the store
/// is on another file system.
fn staged_beside(full: &Path) -> PathBuf {
    let name = full
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    full.with_file_name(format!(".{name}{STAGED_SUFFIX}"))
}

/// What a restore puts back for one path.
struct Target {
    /// Its content before the first rewound prompt changed it.
    target: Version,
    /// What the last rewound prompt that changed it left.
    expected: Version,
    /// That prompt.
    last_prompt: u32,
    /// The first rewound prompt between whose changes to it something
    /// else changed it.
    interleaved_in: Option<u32>,
}

/// Removes the file at `full` (a file the prompts created).
fn remove(workspace: &Path, full: &Path) -> Result<(), String> {
    real_folders(workspace, full)?;
    match fs::remove_file(full) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot remove it: {e}")),
    }
}

/// Cuts the transcript at `path` back to its first `offset` bytes (the end
/// of the record before prompt `number`), writing the shorter file beside
/// it and renaming it over, then records the rewind.
fn cut_transcript(path: &Path, offset: u64, number: u32) -> Result<(), CheckpointError> {
    let bytes = fs::read(path).map_err(|source| CheckpointError::Io {
        action: "read the session transcript",
        path: path.to_path_buf(),
        source,
    })?;
    let problem = |problem: String| CheckpointError::Transcript {
        path: path.to_path_buf(),
        number,
        problem,
    };
    let offset = usize::try_from(offset).map_err(|_| problem("offset too large".into()))?;
    if offset > bytes.len() {
        return Err(problem(format!(
            "{} bytes, the prompt's record begins at byte {offset}",
            bytes.len()
        )));
    }
    if offset > 0 && bytes[offset - 1] != b'\n' {
        return Err(problem(format!(
            "byte {offset} is not the beginning of a record"
        )));
    }
    let mut kept = bytes[..offset].to_vec();
    let record = Record {
        ts_ms: super::now_ms(),
        event: Event::Rewound { prompt: number },
    };
    if let Ok(line) = serde_json::to_string(&record) {
        kept.extend_from_slice(line.as_bytes());
        kept.push(b'\n');
    }
    write_atomically(
        path,
        &kept,
        "rewrite the session transcript",
        Durability::Synced,
    )
}
