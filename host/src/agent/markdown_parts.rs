//! The markdown files custom agents and output styles are made of: every
//! `*.md` of a project's or the user's folder, read as someone else's
//! files, and `FOLDER/*.md` of every installed plugin, each checked
//! against the lock. Both kinds are found the same way; only what a file
//! becomes differs.

use std::path::{Path, PathBuf};

use crate::home::Home;
use crate::plugin::lock::Lockfile;
use crate::plugin::store::PluginStore;
use crate::untrusted_folder::UntrustedFolder;

/// What the files are, for messages: `("agent", "agents")`.
pub(super) type Noun = (&'static str, &'static str);

/// A file read: its name without `.md`, its path, its text and where it
/// came from.
pub(super) struct Part {
    pub stem: String,
    pub path: PathBuf,
    pub text: String,
    pub source: String,
}

/// Every `*.md` in `root/rel`, read beneath `root` (a project's files are
/// someone else's: no link leads out, no FIFO, at most `cap` bytes each),
/// in order; a file or folder that cannot be read is a warning in its
/// place.
pub(super) fn in_folder(
    root: &Path,
    rel: &Path,
    source: &str,
    cap: usize,
    (one, many): Noun,
) -> Vec<Result<Part, String>> {
    let dir = root.join(rel);
    let opened = UntrustedFolder::open(root).and_then(|folder| match folder {
        Some(folder) => folder.subfolder(rel),
        None => Ok(None),
    });
    let folder = match opened {
        Ok(Some(folder)) => folder,
        Ok(None) => return Vec::new(),
        Err(e) => return vec![Err(format!("skipped the {many} in {}: {e}", dir.display()))],
    };
    let names = match folder.entry_names() {
        Ok(names) => names,
        Err(e) => return vec![Err(format!("skipped the {many} in {}: {e}", dir.display()))],
    };
    let mut parts = Vec::new();
    for name in names {
        let Some(stem) = name.strip_suffix(".md") else {
            continue;
        };
        let path = dir.join(&name);
        match folder.read(Path::new(&name), cap) {
            Ok(Some(read)) if !read.more => parts.push(Ok(Part {
                stem: stem.to_string(),
                text: read.text(),
                path,
                source: source.to_string(),
            })),
            Ok(Some(_)) => parts.push(Err(format!(
                "skipped the {one} {}: larger than {} KiB",
                path.display(),
                cap >> 10
            ))),
            Ok(None) => {}
            Err(e) => parts.push(Err(format!("skipped the {one} {}: {e}", path.display()))),
        }
    }
    parts
}

/// `folder/*.md` (`folder` ends in `/`) of every installed plugin, each
/// file's hash checked against the lock.
pub(super) fn in_installed_plugins(home: &Home, folder: &str) -> Vec<Result<Part, String>> {
    let store = PluginStore::new(home.plugins_dir());
    let Ok(lock) = Lockfile::load(&store.lock_path()) else {
        // The skills' discovery reports an unreadable lockfile.
        return Vec::new();
    };
    let mut parts = Vec::new();
    for (plugin, entry) in &lock.plugins {
        let locked = crate::skills::LockedFiles {
            plugin: plugin.clone(),
            root: entry.dir(store.root()),
            files: entry.files.clone(),
            source: entry.source.clone(),
        };
        for rel in entry.files.keys() {
            let Some(stem) = rel
                .strip_prefix(folder)
                .and_then(|name| name.strip_suffix(".md"))
                .filter(|stem| !stem.contains('/'))
            else {
                continue;
            };
            parts.push(locked.read(rel).map(|bytes| Part {
                stem: stem.to_string(),
                text: String::from_utf8_lossy(&bytes).into_owned(),
                path: locked.root.join(rel),
                source: format!("plugin {plugin}"),
            }));
        }
    }
    parts
}
