//! Putting files back as they were before a prompt, and cutting the
//! transcript back to it.
//!
//! Files are only ever written beneath the workspace, through folders that
//! are real folders (never a symbolic link), each replaced whole by a
//! rename. A file whose content is no longer what the last prompt that
//! changed it left (the user or another program edited it since) is
//! reported and left as it is, unless the caller forces the restore.

use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use super::scan::{self, Stamp};
use super::{
    CheckpointError, CheckpointStore, Durability, Entry, RewindScope, Version, format_size,
    write_atomically,
};
use crate::session::record::{Event, Record};

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
    /// Files changed since by something other than capstan, left as they
    /// are.
    pub conflicts: Vec<FileProblem>,
    /// Files whose earlier content was not kept or could not be written.
    pub failed: Vec<FileProblem>,
    /// Whether the conversation was cut back.
    pub conversation_rewound: bool,
    /// The rewound prompt's text (first line), to type again or change.
    pub prompt: String,
}

impl CheckpointStore {
    /// Puts back what `scope` names as it was before prompt `number`:
    /// the files its and later prompts changed, and/or the conversation
    /// (the transcript at `transcript` is cut before the prompt's record,
    /// atomically, and those prompts' checkpoints are forgotten). With
    /// `force`, files changed since by something else are overwritten too.
    pub fn rewind(
        &mut self,
        transcript: &Path,
        number: u32,
        scope: RewindScope,
        force: bool,
    ) -> Result<RestoreReport, CheckpointError> {
        let checkpoint = self.find(number)?.clone();
        let mut report = RestoreReport {
            prompt: checkpoint.prompt.clone(),
            ..RestoreReport::default()
        };
        if scope.files() {
            self.restore_files(number, force, &mut report)?;
        }
        if scope.conversation() {
            cut_transcript(transcript, checkpoint.transcript_offset, number)?;
            self.drop_from(number)?;
            report.conversation_rewound = true;
        }
        Ok(report)
    }

    /// Restores the files of prompts `number` and later.
    fn restore_files(
        &mut self,
        number: u32,
        force: bool,
        report: &mut RestoreReport,
    ) -> Result<(), CheckpointError> {
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
        // For each path: what it was before the first of these prompts
        // changed it, and what the last of them left.
        let mut targets: BTreeMap<String, (Version, Version, u32)> = BTreeMap::new();
        for checkpoint in &later {
            for change in &checkpoint.changes {
                targets
                    .entry(change.path.clone())
                    .and_modify(|t| {
                        t.1 = change.after.clone();
                        t.2 = checkpoint.number;
                    })
                    .or_insert((
                        change.before.clone(),
                        change.after.clone(),
                        checkpoint.number,
                    ));
            }
        }
        let mut already_back = Vec::new();
        for (path, (target, expected, last_prompt)) in targets {
            let full = match beneath(self.workspace(), &path) {
                Ok(full) => full,
                Err(reason) => {
                    report.failed.push(FileProblem { path, reason });
                    continue;
                }
            };
            let current = current_version(&full);
            if current.same_content(&target) {
                self.note_restored(&path, &full, &target)?;
                already_back.push(path);
                continue;
            }
            if !force && !current.same_content(&expected) {
                let reason = match (&current, &expected) {
                    (Version::Absent, _) => format!(
                        "deleted since prompt {last_prompt} by something other than capstan; left deleted"
                    ),
                    (_, Version::Untracked { .. }) => format!(
                        "capstan kept no copy of what prompt {last_prompt} left, so it cannot tell whether it changed since; left as it is"
                    ),
                    _ => format!(
                        "changed since prompt {last_prompt} by something other than capstan; left as it is"
                    ),
                };
                report.conflicts.push(FileProblem { path, reason });
                continue;
            }
            match &target {
                Version::Untracked { reason } => report.failed.push(FileProblem {
                    path,
                    reason: format!("its earlier content was not kept: it was {reason}"),
                }),
                Version::Absent => match remove(self.workspace(), &full) {
                    Ok(()) => {
                        self.note_restored(&path, &full, &target)?;
                        report.removed.push(path);
                    }
                    Err(reason) => report.failed.push(FileProblem { path, reason }),
                },
                Version::File { blob, mode } => {
                    let written = self
                        .read_blob(blob)
                        .and_then(|content| write_file(self.workspace(), &full, &content, *mode));
                    match written {
                        Ok(()) => {
                            self.note_restored(&path, &full, &target)?;
                            report.restored.push(path);
                        }
                        Err(reason) => report.failed.push(FileProblem { path, reason }),
                    }
                }
            }
        }
        let undone: Vec<&str> = report
            .restored
            .iter()
            .chain(&report.removed)
            .chain(&already_back)
            .map(String::as_str)
            .collect();
        self.forget_undone(number, &undone)?;
        self.save_manifest()
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

/// Writes `content` to `full` whole (a temporary file renamed over it).
fn write_file(workspace: &Path, full: &Path, content: &[u8], mode: u32) -> Result<(), String> {
    real_folders(workspace, full)?;
    write_atomically(full, content, "restore", Durability::Synced)
        .and_then(|()| {
            fs::set_permissions(full, fs::Permissions::from_mode(mode)).map_err(|source| {
                CheckpointError::Io {
                    action: "set the permissions of",
                    path: full.to_path_buf(),
                    source,
                }
            })
        })
        .map_err(|e| e.to_string())
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
