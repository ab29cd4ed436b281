//! The protected paths of a workspace at any depth ([`PROTECTED`] names, the
//! targets of `gitdir:` files, folders git takes for a repository), found
//! before a command that may write the workspace runs — to keep them
//! read-only — and again after it ended, to put aside the ones it created.
//!
//! A read-only mount (or, without namespaces, Landlock) keeps what exists
//! from changing, but nothing in the kernel refuses *creating* a `.git` in
//! a writable folder: a command may `git init` and plant a hook. So what a
//! command created is renamed aside when it ends (`sub/.git` becomes
//! `sub/.git.capstan-quarantined`), where git, Claude Code, capstan,
//! editors and direnv no longer find it, and the user and the model are
//! told. A folder git would take for a repository whatever its name (a
//! bare one) loses its `HEAD` instead (`HEAD.capstan-quarantined`), which
//! is what makes git take it for one.
//!
//! The walk reads each folder once (its listing gives each entry's type),
//! follows no link and does not descend into protected entries, which are
//! protected whole.

use std::collections::HashSet;
use std::fs::FileType;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::grants::fs::{PROTECTED, protected_name};

/// The suffix a protected entry a command created is renamed with.
pub const QUARANTINE_SUFFIX: &str = ".capstan-quarantined";

/// The largest `.git` file read for its `gitdir:` line.
const GITDIR_FILE_MAX: u64 = 4096;

/// The protected entries of a workspace.
#[derive(Debug, Default)]
pub(super) struct ProtectedScan {
    /// The real paths to keep read-only, none inside another: each
    /// protected entry (what a link named so points to, when that lies in
    /// the workspace), the target of each `gitdir:` file in the workspace,
    /// each folder git takes for a repository.
    pub paths: Vec<PathBuf>,
    /// The entries as found (not following links).
    found: Vec<Found>,
}

/// A protected entry, as found.
#[derive(Debug)]
struct Found {
    /// Where it is (its name, not what a link leads to).
    path: PathBuf,
    /// Its device and inode, which stay when its folder is renamed.
    id: (u64, u64),
    /// What makes it protected.
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// One of [`PROTECTED`] by name.
    Named,
    /// A folder git takes for a repository, whatever its name.
    GitDir,
}

/// A protected entry a command created, and where it was put aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// Where the command created it.
    pub path: PathBuf,
    /// What it was renamed to, or why it could not be.
    pub moved_to: Result<PathBuf, String>,
}

impl Quarantined {
    /// One line for the user or the model.
    pub fn describe(&self) -> String {
        let shown = |p: &Path| p.display().to_string();
        match &self.moved_to {
            Ok(to) => format!(
                "the command created {}, which can make code run outside the sandbox (git hooks and config, agent or editor settings); capstan renamed it to {} so that nothing uses it. Commands and plugins may not create .git, .claude and the other protected paths at any depth: if it is wanted, the user inspects it and renames it back",
                shown(&self.path),
                shown(to)
            ),
            Err(error) => format!(
                "the command created {}, which can make code run outside the sandbox (git hooks and config, agent or editor settings), and capstan could not rename it aside ({error}): remove it before running git or an editor there",
                shown(&self.path)
            ),
        }
    }
}

/// Walks `workspace` (canonical) for its protected entries.
pub(super) fn scan(workspace: &Path) -> ProtectedScan {
    let mut scan = ProtectedScan::default();
    let mut folders = vec![workspace.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(listing) = std::fs::read_dir(&folder) else {
            continue;
        };
        let entries: Vec<(std::ffi::OsString, FileType)> = listing
            .flatten()
            .filter_map(|e| Some((e.file_name(), e.file_type().ok()?)))
            .collect();
        if folder != workspace && lists_git_dir(&entries) {
            scan.add(&folder, Kind::GitDir, workspace);
            continue;
        }
        for (name, kind) in entries {
            let path = folder.join(&name);
            if name.to_str().and_then(protected_name).is_some() {
                scan.add(&path, Kind::Named, workspace);
            } else if kind.is_dir() {
                folders.push(path);
            }
        }
    }
    scan.paths.sort();
    scan.paths.dedup();
    let mut outermost: Vec<PathBuf> = Vec::new();
    for path in std::mem::take(&mut scan.paths) {
        if !outermost.iter().any(|outer| path.starts_with(outer)) {
            outermost.push(path);
        }
    }
    scan.paths = outermost;
    scan
}

impl ProtectedScan {
    /// Records the protected entry `path`, and the real paths it protects.
    fn add(&mut self, path: &Path, kind: Kind, workspace: &Path) {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        self.found.push(Found {
            path: path.to_path_buf(),
            id: (meta.dev(), meta.ino()),
            kind,
        });
        let inside = |p: &Path| p.starts_with(workspace) && p != workspace;
        if meta.file_type().is_symlink() {
            // A link leading elsewhere in the workspace protects what it
            // leads to; one leading out leads nowhere writable.
            if let Ok(real) = path.canonicalize()
                && inside(&real)
            {
                self.paths.push(real);
            }
            return;
        }
        self.paths.push(path.to_path_buf());
        if meta.is_file()
            && path.file_name().is_some_and(|n| n == ".git")
            && let Some(target) = gitdir_target(path)
            && inside(&target)
        {
            self.paths.push(target);
        }
    }

    /// The identities of the entries found.
    fn ids(&self) -> HashSet<(u64, u64)> {
        self.found.iter().map(|f| f.id).collect()
    }
}

/// Whether a folder listing `entries` is one git takes for a repository
/// (see [`crate::grants::fs::is_git_dir`]).
fn lists_git_dir(entries: &[(std::ffi::OsString, FileType)]) -> bool {
    let kind = |name: &str| entries.iter().find(|(n, _)| n == name).map(|(_, k)| *k);
    let Some(head) = kind("HEAD") else {
        return false;
    };
    !head.is_dir()
        && (kind("commondir").is_some_and(|k| k.is_file())
            || (kind("objects").is_some_and(|k| k.is_dir())
                && kind("refs").is_some_and(|k| k.is_dir())))
}

/// The folder a `.git` file's `gitdir:` line points to, resolved.
pub(super) fn gitdir_target(file: &Path) -> Option<PathBuf> {
    let meta = std::fs::metadata(file).ok()?;
    if !meta.is_file() || meta.len() > GITDIR_FILE_MAX {
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let base = file.parent()?;
    base.join(target).canonicalize().ok()
}

/// Walks `workspace` again after a command and renames aside every
/// protected entry that was not there `before` (by identity: a folder the
/// command renamed keeps its entries) and lies in none of `exempt` (the
/// paths the command was allowed to write).
pub(super) fn quarantine_new(
    workspace: &Path,
    before: &ProtectedScan,
    exempt: &[PathBuf],
) -> Vec<Quarantined> {
    let known = before.ids();
    scan(workspace)
        .found
        .into_iter()
        .filter(|f| !known.contains(&f.id))
        .filter(|f| !exempt.iter().any(|e| f.path.starts_with(e)))
        .map(|f| Quarantined {
            moved_to: quarantine(&f),
            path: f.path,
        })
        .collect()
}

/// Renames `found` aside (a folder git takes for a repository: its `HEAD`).
fn quarantine(found: &Found) -> Result<PathBuf, String> {
    let from = match found.kind {
        Kind::Named => found.path.clone(),
        Kind::GitDir => found.path.join("HEAD"),
    };
    let name = from
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut last_error = String::new();
    for n in 1..=20 {
        let to = from.with_file_name(if n == 1 {
            format!("{name}{QUARANTINE_SUFFIX}")
        } else {
            format!("{name}{QUARANTINE_SUFFIX}-{n}")
        });
        if std::fs::symlink_metadata(&to).is_ok() {
            continue;
        }
        match std::fs::rename(&from, &to) {
            Ok(()) => {
                return Ok(match found.kind {
                    Kind::Named => to,
                    Kind::GitDir => found.path.clone(),
                });
            }
            Err(error) => last_error = error.to_string(),
        }
    }
    if last_error.is_empty() {
        last_error = "every quarantine name is taken".to_string();
    }
    Err(last_error)
}

/// The paths of [`PROTECTED`] at the top of `workspace` (canonical) that
/// exist, resolved: a protected name that is a link to elsewhere in the
/// workspace protects what it points to (a link out of the workspace
/// leads nowhere writable). Enough where the workspace is read-only to
/// the command but for some of these.
pub(super) fn top_level(workspace: &Path) -> Vec<PathBuf> {
    PROTECTED
        .iter()
        .filter_map(|name| workspace.join(name).canonicalize().ok())
        .filter(|path| path.starts_with(workspace) && path != workspace)
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        (dir, ws)
    }

    #[test]
    fn protected_entries_are_found_at_any_depth() {
        let (_dir, ws) = workspace();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(ws.join("sub/.git/hooks")).unwrap();
        std::fs::create_dir_all(ws.join("a/b/c/.claude")).unwrap();
        std::fs::write(ws.join("a/b/.envrc"), "").unwrap();
        std::fs::create_dir_all(ws.join("real-hooks")).unwrap();
        std::os::unix::fs::symlink(ws.join("real-hooks"), ws.join("a/.husky")).unwrap();
        std::os::unix::fs::symlink("/etc", ws.join("a/b/.vscode")).unwrap();
        // A `gitdir:` file and its target, which is a repository's folder.
        std::fs::create_dir_all(ws.join("store/objects")).unwrap();
        std::fs::create_dir_all(ws.join("store/refs")).unwrap();
        std::fs::write(ws.join("store/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::create_dir_all(ws.join("wt")).unwrap();
        std::fs::write(ws.join("wt/.git"), "gitdir: ../store\n").unwrap();
        // Not descended into: protected whole.
        std::fs::create_dir_all(ws.join(".git/modules/x/.claude")).unwrap();
        let mut expected = vec![
            ws.join(".git"),
            ws.join("a/b/.envrc"),
            ws.join("a/b/c/.claude"),
            ws.join("real-hooks"),
            ws.join("store"),
            ws.join("sub/.git"),
            ws.join("wt/.git"),
        ];
        expected.sort();
        assert_eq!(scan(&ws).paths, expected);
    }

    #[test]
    fn created_entries_are_renamed_aside_and_old_ones_kept() {
        let (_dir, ws) = workspace();
        std::fs::create_dir_all(ws.join("old/.git")).unwrap();
        let before = scan(&ws);
        // A folder holding an old entry renamed: not new.
        std::fs::rename(ws.join("old"), ws.join("moved")).unwrap();
        std::fs::create_dir_all(ws.join("x/y/.git/hooks")).unwrap();
        std::fs::write(ws.join("x/.mcp.json"), "{}").unwrap();
        std::fs::create_dir_all(ws.join("bare/objects")).unwrap();
        std::fs::create_dir_all(ws.join("bare/refs")).unwrap();
        std::fs::write(ws.join("bare/HEAD"), "x").unwrap();
        std::fs::create_dir_all(ws.join("allowed/.git")).unwrap();
        let done = quarantine_new(&ws, &before, &[ws.join("allowed")]);
        let mut paths: Vec<&Path> = done.iter().map(|q| q.path.as_path()).collect();
        paths.sort();
        assert_eq!(
            paths,
            [ws.join("bare"), ws.join("x/.mcp.json"), ws.join("x/y/.git")]
        );
        assert!(done.iter().all(|q| q.moved_to.is_ok()), "{done:?}");
        assert!(!ws.join("x/y/.git").exists());
        assert!(ws.join("x/y/.git.capstan-quarantined/hooks").is_dir());
        assert!(ws.join("x/.mcp.json.capstan-quarantined").is_file());
        assert!(!ws.join("bare/HEAD").exists());
        assert!(!crate::grants::fs::is_git_dir(&ws.join("bare")));
        assert!(ws.join("moved/.git").is_dir());
        assert!(ws.join("allowed/.git").is_dir());
        let line = done[0].describe();
        assert!(line.contains("renamed it to"), "{line}");
        // A second plant of the same name gets another name.
        std::fs::create_dir_all(ws.join("x/y/.git")).unwrap();
        let again = quarantine_new(&ws, &before, &[ws.join("allowed")]);
        assert_eq!(again.len(), 1, "{again:?}");
        assert_eq!(
            again[0].moved_to,
            Ok(ws.join("x/y/.git.capstan-quarantined-2"))
        );
    }

    #[test]
    fn only_existing_top_level_paths_are_returned() {
        let (_dir, ws) = workspace();
        std::fs::create_dir(ws.join(".git")).unwrap();
        std::fs::write(ws.join(".envrc"), "").unwrap();
        std::fs::create_dir(ws.join("real-hooks")).unwrap();
        std::os::unix::fs::symlink(ws.join("real-hooks"), ws.join(".husky")).unwrap();
        assert_eq!(
            top_level(&ws),
            [ws.join(".git"), ws.join(".envrc"), ws.join("real-hooks")]
        );
    }
}
