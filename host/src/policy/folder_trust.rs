//! Which project folders' hooks the user trusts to run.
//!
//! A project's `.claude/settings.json` and `.claude/settings.local.json`
//! can define command hooks, which run on every event of a session started
//! there — a cloned repository could otherwise run its commands as soon as
//! capstan starts in it. As Claude Code asks "Do you trust the files in
//! this folder?", capstan runs a folder's hooks only once the user has
//! trusted that folder's hook set: the trust is recorded per folder with
//! the sha256 of the hooks as written, so a changed hook set asks again.
//!
//! The record is `trusted-folders.json` in capstan's data folder, written
//! whole to a temporary file and renamed over the old one.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The record's file name, in the data folder.
pub const TRUST_FILE: &str = "trusted-folders.json";

/// The trusted hook sets, by folder.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    /// Canonical folder → what of it is trusted.
    #[serde(default)]
    folders: BTreeMap<String, Trusted>,
}

/// What of a folder the user trusts.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Trusted {
    /// The sha256 of the hook set trusted ([`hook_set_digest`]).
    hooks: String,
    /// When (RFC 3339).
    at: String,
}

/// The trust record of one data folder.
#[derive(Debug, Clone)]
pub struct FolderTrust {
    file: PathBuf,
}

/// The sha256 (hex) of a folder's hook set: each settings file's name and
/// its `hooks` value as written, in order.
pub fn hook_set_digest(parts: &[(&str, &serde_json::Value)]) -> String {
    let mut hasher = Sha256::new();
    for (name, hooks) in parts {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update(hooks.to_string().as_bytes());
        hasher.update([0]);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl FolderTrust {
    /// The record in `data_dir`.
    pub fn new(data_dir: &Path) -> Self {
        Self {
            file: data_dir.join(TRUST_FILE),
        }
    }

    /// Where it is kept.
    pub fn file(&self) -> &Path {
        &self.file
    }

    fn read(&self) -> Result<Record, String> {
        match std::fs::read(&self.file) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                format!(
                    "{} is not valid ({e}); remove it to be asked again",
                    self.file.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Record::default()),
            Err(e) => Err(format!("cannot read {}: {e}", self.file.display())),
        }
    }

    /// Whether the hook set `digest` of `folder` is trusted. An unreadable
    /// record trusts nothing.
    pub fn is_trusted(&self, folder: &Path, digest: &str) -> bool {
        self.read().is_ok_and(|record| {
            record
                .folders
                .get(&folder.display().to_string())
                .is_some_and(|t| t.hooks == digest)
        })
    }

    /// Records that the hook set `digest` of `folder` is trusted (replacing
    /// what was trusted there before).
    pub fn trust(&self, folder: &Path, digest: &str) -> Result<(), String> {
        let mut record = self.read()?;
        record.folders.insert(
            folder.display().to_string(),
            Trusted {
                hooks: digest.to_string(),
                at: crate::timestamp::now_rfc3339(),
            },
        );
        let dir = self
            .file
            .parent()
            .ok_or_else(|| format!("{} has no folder", self.file.display()))?;
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let mut temp = tempfile::NamedTempFile::new_in(dir)
            .map_err(|e| format!("cannot write in {}: {e}", dir.display()))?;
        let text = serde_json::to_vec_pretty(&record).map_err(|e| e.to_string())?;
        temp.write_all(&text)
            .and_then(|()| temp.as_file().sync_all())
            .map_err(|e| format!("cannot write {}: {e}", self.file.display()))?;
        temp.persist(&self.file)
            .map_err(|e| format!("cannot write {}: {}", self.file.display(), e.error))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_trusted_hook_set_is_remembered_and_a_changed_one_is_not() {
        let data = tempfile::tempdir().unwrap();
        let trust = FolderTrust::new(data.path());
        let folder = Path::new("/projects/a");
        let hooks = json!({"PreToolUse": [{"hooks": [{"type": "command", "command": "x"}]}]});
        let digest = hook_set_digest(&[("settings.json", &hooks)]);
        assert!(!trust.is_trusted(folder, &digest));
        trust.trust(folder, &digest).unwrap();
        assert!(trust.is_trusted(folder, &digest));
        assert!(!trust.is_trusted(Path::new("/projects/b"), &digest));
        let changed = json!({"PreToolUse": [{"hooks": [{"type": "command", "command": "y"}]}]});
        let other = hook_set_digest(&[("settings.json", &changed)]);
        assert_ne!(digest, other);
        assert!(!trust.is_trusted(folder, &other));
        // The same hooks in the other file are another set.
        assert_ne!(digest, hook_set_digest(&[("settings.local.json", &hooks)]));
        // Trusting the new set replaces the old one.
        trust.trust(folder, &other).unwrap();
        assert!(trust.is_trusted(folder, &other));
        assert!(!trust.is_trusted(folder, &digest));
    }

    #[test]
    fn a_damaged_record_trusts_nothing_and_is_not_overwritten() {
        let data = tempfile::tempdir().unwrap();
        std::fs::write(data.path().join(TRUST_FILE), "{nope").unwrap();
        let trust = FolderTrust::new(data.path());
        assert!(!trust.is_trusted(Path::new("/p"), "d"));
        let err = trust.trust(Path::new("/p"), "d").unwrap_err();
        assert!(err.contains("remove it to be asked again"), "{err}");
        assert_eq!(
            std::fs::read_to_string(data.path().join(TRUST_FILE)).unwrap(),
            "{nope"
        );
    }
}
