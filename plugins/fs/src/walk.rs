//! Walking a folder the way a developer would search it, for `glob` and
//! `grep`: files in a stable order (sorted by name within each folder), not
//! descending into `.git`, and skipping what `.gitignore` and `.ignore`
//! files say to ignore, including those in the folders between the
//! workspace and the searched folder.
//!
//! Hidden files are searched (`.github/`, `.env.example`): for a coding
//! agent they are ordinary project files. Symbolic links are visited as
//! links, not followed.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::{DirEntry, Match, WalkBuilder};

/// The ignore files read in each folder, in the order git and ripgrep give
/// them precedence (later wins).
const IGNORE_FILE_NAMES: [&str; 2] = [".gitignore", ".ignore"];

/// What a walk met besides the files it visited.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct WalkReport {
    /// Entries that could not be read and were skipped.
    pub unreadable: usize,
}

/// What a visited entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    Regular,
    /// A symbolic link, not followed: it may point to a file or a folder,
    /// inside the workspace or not.
    SymbolicLink,
}

/// Calls `visit` with each file and symbolic link under `root`, until it
/// breaks. `workspace` bounds the folders whose ignore files apply from
/// above `root`.
pub fn visit_files(
    root: &Path,
    workspace: &Path,
    mut visit: impl FnMut(&Path, FileKind) -> ControlFlow<()>,
) -> WalkReport {
    let ignores_above = ignore_files_above(root, workspace);
    let walker = WalkBuilder::new(root)
        .hidden(false)
        .parents(false)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |entry| keep_entry(entry, &ignores_above))
        .build();
    let mut report = WalkReport::default();
    for entry in walker {
        let entry = match entry {
            Ok(entry) => entry,
            Err(_) => {
                report.unreadable += 1;
                continue;
            }
        };
        let kind = match entry.file_type() {
            Some(kind) if kind.is_file() => FileKind::Regular,
            Some(kind) if kind.is_symlink() => FileKind::SymbolicLink,
            _ => continue,
        };
        if visit(entry.path(), kind).is_break() {
            break;
        }
    }
    report
}

/// Whether the walk should yield (and, for a folder, enter) `entry`.
fn keep_entry(entry: &DirEntry, ignores_above: &[Gitignore]) -> bool {
    if entry.depth() == 0 {
        // The root was asked for by name: search it even if ignored.
        return true;
    }
    if entry.file_name() == ".git" {
        return false;
    }
    let is_dir = entry.file_type().is_some_and(|kind| kind.is_dir());
    // The deepest ignore file with an opinion decides.
    for ignores in ignores_above.iter().rev() {
        match ignores.matched(entry.path(), is_dir) {
            Match::Ignore(_) => return false,
            Match::Whitelist(_) => return true,
            Match::None => {}
        }
    }
    true
}

/// Loads the ignore files of the workspace and of each folder between it
/// and `root` (not `root` itself: the walk reads those), outermost first.
fn ignore_files_above(root: &Path, workspace: &Path) -> Vec<Gitignore> {
    let Ok(below) = root.strip_prefix(workspace) else {
        return Vec::new();
    };
    let mut parts: Vec<_> = below.components().collect();
    if parts.pop().is_none() {
        // The root is the workspace.
        return Vec::new();
    }
    let mut folder = workspace.to_path_buf();
    let mut folders = vec![folder.clone()];
    for part in parts {
        folder.push(part);
        folders.push(folder.clone());
    }
    folders
        .iter()
        .map(PathBuf::as_path)
        .filter_map(ignore_files_in)
        .collect()
}

/// The ignore rules of one folder, if it has any.
fn ignore_files_in(folder: &Path) -> Option<Gitignore> {
    let mut builder = GitignoreBuilder::new(folder);
    for name in IGNORE_FILE_NAMES {
        // A missing or unreadable ignore file is no rule, as in git.
        let _ = builder.add(folder.join(name));
    }
    builder.build().ok().filter(|rules| !rules.is_empty())
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        dir
    }

    fn files_under(root: &Path, workspace: &Path) -> Vec<String> {
        let mut found = Vec::new();
        visit_files(root, workspace, |path, kind| {
            let shown = path.strip_prefix(workspace).unwrap().display().to_string();
            found.push(match kind {
                FileKind::Regular => shown,
                FileKind::SymbolicLink => format!("{shown}@"),
            });
            ControlFlow::Continue(())
        });
        found
    }

    #[test]
    fn skips_git_and_gitignored_files_in_name_order() {
        let dir = tree(&[
            (".gitignore", "target/\n*.log\n"),
            (".git/HEAD", "ref"),
            (".github/ci.yml", ""),
            ("b.rs", ""),
            ("a.rs", ""),
            ("debug.log", ""),
            ("target/out.rs", ""),
            ("src/lib.rs", ""),
        ]);
        #[cfg(unix)]
        std::os::unix::fs::symlink("src", dir.path().join("src-link")).unwrap();
        assert_eq!(
            files_under(dir.path(), dir.path()),
            vec![
                ".github/ci.yml",
                ".gitignore",
                "a.rs",
                "b.rs",
                "src/lib.rs",
                "src-link@"
            ]
        );
    }

    #[test]
    fn ignore_files_above_the_root_apply() {
        let dir = tree(&[
            (".gitignore", "*.log\n/src/gen/\n"),
            ("src/.ignore", "secret.rs\n"),
            ("src/app/main.rs", ""),
            ("src/app/debug.log", ""),
            ("src/app/secret.rs", ""),
            ("src/gen/x.rs", ""),
        ]);
        let root = dir.path().join("src");
        assert_eq!(
            files_under(&root, dir.path()),
            vec!["src/.ignore", "src/app/main.rs"]
        );
        let app = dir.path().join("src/app");
        assert_eq!(files_under(&app, dir.path()), vec!["src/app/main.rs"]);
    }

    #[test]
    fn an_ignored_root_asked_for_by_name_is_searched() {
        let dir = tree(&[(".gitignore", "target/\n"), ("target/out.rs", "")]);
        let root = dir.path().join("target");
        assert_eq!(files_under(&root, dir.path()), vec!["target/out.rs"]);
    }

    #[test]
    fn a_break_stops_the_walk() {
        let dir = tree(&[("a", ""), ("b", ""), ("c", "")]);
        let mut seen = 0;
        visit_files(dir.path(), dir.path(), |_, _| {
            seen += 1;
            if seen == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert_eq!(seen, 2);
    }
}
