//! Installed plugins' files the model may read: the store folder of each
//! installed plugin that brings `SKILL.md` skills or Claude Code commands,
//! so that a path a skill's text names (`${CLAUDE_PLUGIN_ROOT}/...`,
//! `${CLAUDE_SKILL_DIR}/...`) opens with the built-in `fs.read`. The
//! folders are granted read-only ([`crate::grants::FsGrant::installed_files`]),
//! and only those whose every file still matches the lockfile: a changed
//! plugin is not offered (its skills are refused too).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use super::lock::Lockfile;
use super::package::skill_file_in_plugin;
use super::store::PluginStore;
use crate::sandbox::engine::sha256_hex;

/// The readable folders of one home's installed plugins, found and checked
/// once per process, on first use.
#[derive(Debug, Clone, Default)]
pub struct ReadablePluginFiles {
    plugins_dir: Option<PathBuf>,
    checked: Arc<OnceLock<Vec<PathBuf>>>,
}

impl ReadablePluginFiles {
    /// The plugins installed in `plugins_dir` (`Home::plugins_dir()`).
    pub fn of(plugins_dir: PathBuf) -> Self {
        Self {
            plugins_dir: Some(plugins_dir),
            checked: Arc::default(),
        }
    }

    /// The store folders the model may read, each intact.
    pub fn folders(&self) -> &[PathBuf] {
        self.checked.get_or_init(|| {
            let Some(plugins_dir) = &self.plugins_dir else {
                return Vec::new();
            };
            let store = PluginStore::new(plugins_dir.clone());
            let Ok(lock) = Lockfile::load(&store.lock_path()) else {
                return Vec::new();
            };
            lock.plugins
                .values()
                .filter(|entry| {
                    entry
                        .files
                        .keys()
                        .any(|rel| skill_file_in_plugin(rel).is_some())
                })
                .map(|entry| (entry.dir(store.root()), &entry.files))
                .filter(|(dir, files)| {
                    files.iter().all(|(rel, sha256)| {
                        std::fs::read(dir.join(rel))
                            .is_ok_and(|bytes| sha256_hex(&bytes) == *sha256)
                    })
                })
                .map(|(dir, _)| dir)
                .collect()
        })
    }
}
