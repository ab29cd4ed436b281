//! Credential files inside the folders commands may read: hidden from
//! every command, whatever folder they lie in (`~/.cargo` is readable by
//! default; its `credentials.toml` is not).
//!
//! With namespaces an empty, read-only file is mounted over each; without,
//! the folder holding one is listed entry by entry without it (the folder
//! itself can still be listed, the file not opened). A user who wants one
//! readable all the same names the file itself in `[exec] read`.

use std::path::{Path, PathBuf};

/// Credential files of the user's home, as `folder`, `file name`: a file
/// name ending in `*` stands for every name starting so and ending with
/// the folder's `.xml` (Maven's `settings.xml`, `settings-security.xml`).
pub const CREDENTIAL_FILES: &[(&str, &str)] = &[
    (".cargo", "credentials"),
    (".cargo", "credentials.toml"),
    (".m2", "settings*.xml"),
    (".gradle", "gradle.properties"),
    ("", ".npmrc"),
    ("", ".pypirc"),
    ("", ".netrc"),
    ("", ".git-credentials"),
    (".docker", "config.json"),
    (".kube", "config"),
    (".config/gh", "hosts.yml"),
    (".config/git", "credentials"),
    (".config/pip", "pip.conf"),
    (".pip", "pip.conf"),
];

/// The credential files of `home` that lie in one of `folders` (canonical
/// folders commands may read or write) and exist, as they are named there
/// (not following a link), but those of `named`: files the user named
/// in `[exec] read` or `write` themselves.
pub fn hidden_in(folders: &[PathBuf], home: Option<&Path>, named: &[PathBuf]) -> Vec<PathBuf> {
    let Some(home) = home else {
        return Vec::new();
    };
    let home = home.canonicalize().unwrap_or_else(|_| home.to_path_buf());
    let mut hidden = Vec::new();
    for (folder, pattern) in CREDENTIAL_FILES {
        let holder = if folder.is_empty() {
            home.clone()
        } else {
            home.join(folder)
        };
        let Ok(holder) = holder.canonicalize() else {
            continue;
        };
        if !folders.iter().any(|f| holder.starts_with(f)) {
            continue;
        }
        for file in matching(&holder, pattern) {
            let real = file.canonicalize().unwrap_or_else(|_| file.clone());
            if named.iter().any(|n| *n == file || *n == real) {
                continue;
            }
            // A link hides what it leads to as well, where a folder
            // commands may read holds that.
            if real != file
                && folders.iter().any(|f| real.starts_with(f))
                && !hidden.contains(&real)
            {
                hidden.push(real);
            }
            if !hidden.contains(&file) {
                hidden.push(file);
            }
        }
    }
    hidden
}

/// The entries of `holder` that `pattern` names and that exist.
fn matching(holder: &Path, pattern: &str) -> Vec<PathBuf> {
    match pattern.split_once('*') {
        None => {
            let file = holder.join(pattern);
            if std::fs::symlink_metadata(&file).is_ok() {
                vec![file]
            } else {
                Vec::new()
            }
        }
        Some((start, end)) => std::fs::read_dir(holder)
            .map(|entries| {
                entries
                    .flatten()
                    .filter(|e| {
                        let name = e.file_name();
                        let name = name.to_string_lossy();
                        name.starts_with(start) && name.ends_with(end)
                    })
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Folders of `granted` with a `hidden` file beneath, replaced by their
/// entries but the hidden ones (recursing into a folder on the way to one);
/// the folders so replaced, which keep only the right to be listed, come
/// back as the second list.
pub(super) fn without_hidden(
    granted: &[PathBuf],
    hidden: &[PathBuf],
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut kept = Vec::new();
    let mut listed_only = Vec::new();
    for folder in granted {
        if !hidden.iter().any(|h| h.starts_with(folder) && h != folder) {
            kept.push(folder.clone());
            continue;
        }
        let mut stack = vec![folder.clone()];
        while let Some(dir) = stack.pop() {
            listed_only.push(dir.clone());
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if hidden.contains(&path) {
                    continue;
                }
                let holds_hidden = hidden.iter().any(|h| h.starts_with(&path) && *h != path);
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                if holds_hidden && is_dir {
                    stack.push(path);
                } else {
                    kept.push(path);
                }
            }
        }
    }
    (kept, listed_only)
}

/// Words for a user whose `[exec] read` or `write` names credential files
/// of `grants`: every command, and so the model, can read them.
pub fn grants_warning(grants: &super::ExecGrants) -> Option<String> {
    let named: Vec<PathBuf> = grants.read.iter().chain(&grants.write).cloned().collect();
    named_warning(&named, grants.home.as_deref())
}

/// Words for a user who named credential files in `[exec] read` or
/// `write`: every command, and so the model, can read them.
pub fn named_warning(named: &[PathBuf], home: Option<&Path>) -> Option<String> {
    let home = home?;
    let home = home.canonicalize().unwrap_or_else(|_| home.to_path_buf());
    let credentials: Vec<String> = named
        .iter()
        .filter(|path| {
            CREDENTIAL_FILES.iter().any(|(folder, pattern)| {
                let holder = if folder.is_empty() {
                    home.clone()
                } else {
                    home.join(folder)
                };
                let holder = holder.canonicalize().unwrap_or(holder);
                path.parent() == Some(holder.as_path())
                    && path.file_name().is_some_and(|name| {
                        let name = name.to_string_lossy();
                        match pattern.split_once('*') {
                            None => name == *pattern,
                            Some((start, end)) => name.starts_with(start) && name.ends_with(end),
                        }
                    })
            })
        })
        .map(|p| p.display().to_string())
        .collect();
    if credentials.is_empty() {
        return None;
    }
    Some(format!(
        "warning: [exec] read names {}, which hold credentials: every command — and so the model, through exec.run — can read them; remove them from [exec] read unless you mean that",
        credentials.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn credential_files_in_readable_folders_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        for file in [
            ".cargo/credentials.toml",
            ".cargo/config.toml",
            ".m2/settings.xml",
            ".m2/settings-security.xml",
            ".m2/repository/a.jar",
            ".gradle/gradle.properties",
            ".npmrc",
        ] {
            let path = home.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "secret").unwrap();
        }
        let folders = vec![home.join(".cargo"), home.join(".m2")];
        let mut hidden = hidden_in(&folders, Some(&home), &[]);
        hidden.sort();
        assert_eq!(
            hidden,
            [
                home.join(".cargo/credentials.toml"),
                home.join(".m2/settings-security.xml"),
                home.join(".m2/settings.xml"),
            ]
        );
        let (kept, listed) = without_hidden(&folders, &hidden);
        assert_eq!(listed, folders);
        assert!(kept.contains(&home.join(".cargo/config.toml")));
        assert!(kept.contains(&home.join(".m2/repository")));
        // Named itself: readable, with a warning.
        let named = [home.join(".cargo/credentials.toml")];
        assert!(!hidden_in(&folders, Some(&home), &named).contains(&named[0]));
        let warning = named_warning(&named, Some(&home)).unwrap();
        assert!(warning.contains("credentials.toml"), "{warning}");
        assert_eq!(named_warning(&folders, Some(&home)), None);
        assert!(!kept.iter().any(|k| hidden.contains(k)));
    }
}
