//! The lockfile: what was installed, from where, the sha256 of every file,
//! and the capabilities the user granted.
//!
//! `capstan.lock` in the plugins folder is TOML, one table per plugin,
//! written in a stable order (plugins and files sorted by name) through a
//! temporary file and a rename, so a reader never sees half of it:
//!
//! ```toml
//! version = 1
//!
//! [plugins.weather]
//! version = "0.2.0"
//! source = "/home/ada/src/weather"
//! installed_at = "2025-01-31T09:00:00Z"
//! signer = "unsigned"
//! folder = "store/weather/0.2.0-3f2a9c0d1b7e"
//! digest = "3f2a9c0d1b7e…"
//!
//! [plugins.weather.files]
//! "plugin.toml" = "9b1f…"
//! "weather.wasm" = "c0de…"
//! ```
//!
//! followed by the plugin's `components` (path, hash, exports, and for a
//! hook component the events it subscribed to when the user agreed),
//! `consented` (what the manifest requested when the user last agreed),
//! `granted` (what calls get: the consented capabilities minus those
//! revoked since), `folders` (each absolute folder requested, as written,
//! with the folder it resolved to when the user agreed) and `limits`.
//!
//! What the user agreed to stays what runs: a granted folder that resolves
//! elsewhere later (a symbolic link on its way changed) is not given to the
//! plugin, and a hook component that subscribes to other events than the
//! lock records is not run. Entries written before capstan recorded
//! `folders` and `subscriptions` are completed at their first use, with
//! what they resolve to and subscribe to then ([`Lockfile::complete`]): the
//! user agreed to them as they were, and from then on they are held there.
//!
//! Every change is a read-modify-write under an exclusive lock on
//! `capstan.lock.guard` beside it ([`Lockfile::modify`]), held across the
//! read, the change and the rename, so two capstan processes installing,
//! updating, granting, revoking or removing at once each keep their effect.
//! Readers need no lock: the rename means they see the old file or the new
//! one.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::grants::Capabilities;
use crate::hooks::Subscription;
use crate::quantity::{Size, TimeSpan};

/// The lockfile's format version.
const FORMAT: u32 = 1;

/// The whole lockfile.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lockfile {
    /// The format version.
    pub version: u32,
    /// Installed plugins by name.
    #[serde(default)]
    pub plugins: BTreeMap<String, LockEntry>,
}

/// One installed plugin.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockEntry {
    /// The plugin's version.
    pub version: String,
    /// Where it was installed from (canonical path of the folder or archive).
    pub source: String,
    /// When it was installed or last updated (UTC, RFC 3339).
    pub installed_at: String,
    /// Who signed the package, or `unsigned`.
    pub signer: String,
    /// Its folder, relative to the plugins folder.
    pub folder: String,
    /// The package digest: the sha256 of its file listing.
    pub digest: String,
    /// The sha256 of every file, by relative path (`/`-separated).
    pub files: BTreeMap<String, String>,
    /// Its components.
    #[serde(default)]
    pub components: Vec<LockComponent>,
    /// What the manifest requested when the user last agreed.
    #[serde(default)]
    pub consented: Capabilities,
    /// What its calls get.
    #[serde(default)]
    pub granted: Capabilities,
    /// Each absolute folder requested, as written, and the folder it
    /// resolved to when the user agreed (symbolic links followed): calls
    /// get the folder only while it still resolves there.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub folders: BTreeMap<String, String>,
    /// Its limits, where the manifest set them.
    #[serde(default)]
    pub limits: LockLimits,
    /// The secrets the user granted a Claude Code plugin's command hooks,
    /// scripts and inline commands, by name: set as environment variables
    /// when they run, never stored here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hook_secrets: Vec<String>,
}

/// One component of an installed plugin.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockComponent {
    /// The file, relative to the plugin's folder.
    pub path: String,
    /// Its sha256.
    pub sha256: String,
    /// The plugin interfaces it exports: `tool`, `hook`, `skill`.
    pub exports: Vec<String>,
    /// For a hook component, the events it subscribed to when the user
    /// agreed; `None` in entries written before capstan recorded them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscriptions: Option<Vec<Subscription>>,
}

/// Limits recorded from the manifest, written as the manifest writes them
/// (`memory = "128MiB"`, `timeout = "20s"`; see [`crate::quantity`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(from = "LimitsTable", into = "LimitsTable")]
pub struct LockLimits {
    /// Memory cap in bytes.
    pub memory: Option<u64>,
    /// Time limit per call, in milliseconds.
    pub timeout_ms: Option<u64>,
}

/// The `limits` table of a lockfile entry as written. Lockfiles written
/// before sizes and durations had one spelling hold `memory` as bytes
/// (still a size) and `timeout_ms`; both are read.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsTable {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    memory: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout: Option<TimeSpan>,
    #[serde(default, skip_serializing)]
    timeout_ms: Option<u64>,
}

impl From<LimitsTable> for LockLimits {
    fn from(table: LimitsTable) -> Self {
        let timeout = table
            .timeout
            .map(|t| u64::try_from(t.0.as_millis()).unwrap_or(u64::MAX));
        Self {
            memory: table.memory.map(|size| size.0),
            timeout_ms: timeout.or(table.timeout_ms),
        }
    }
}

impl From<LockLimits> for LimitsTable {
    fn from(limits: LockLimits) -> Self {
        Self {
            memory: limits.memory.map(Size),
            timeout: limits
                .timeout_ms
                .map(|ms| TimeSpan(std::time::Duration::from_millis(ms))),
            timeout_ms: None,
        }
    }
}

/// The lockfile could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Reading or writing failed.
    #[error("cannot {action} the plugin lockfile {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid lockfile.
    #[error(
        "the plugin lockfile {}{} is damaged: {message}; restore it from a backup, or move it aside and install the plugins again with `capstan plugin install SOURCE`",
        path.display(),
        line.map(|l| format!(":{l}")).unwrap_or_default()
    )]
    Damaged {
        /// The file.
        path: PathBuf,
        /// The line, when known.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
}

impl Lockfile {
    /// Reads the lockfile at `path`; a missing file is an empty lockfile.
    pub fn load(path: &Path) -> Result<Self, LockError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self {
                    version: FORMAT,
                    plugins: BTreeMap::new(),
                });
            }
            Err(source) => {
                return Err(LockError::Io {
                    action: "read",
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let lock: Self = toml::from_str(&text).map_err(|e| {
            let line = e
                .span()
                .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
            LockError::Damaged {
                path: path.to_path_buf(),
                line,
                message: e.message().trim().to_string(),
            }
        })?;
        if lock.version != FORMAT {
            return Err(LockError::Damaged {
                path: path.to_path_buf(),
                line: Some(1),
                message: format!(
                    "format version {} is not the one this capstan writes ({FORMAT})",
                    lock.version
                ),
            });
        }
        Ok(lock)
    }

    /// Writes the lockfile to `path` through a temporary file.
    pub fn save(&self, path: &Path) -> Result<(), LockError> {
        let io = |action| {
            move |source| LockError::Io {
                action,
                path: path.to_path_buf(),
                source,
            }
        };
        let text = toml::to_string(self).map_err(|e| LockError::Damaged {
            path: path.to_path_buf(),
            line: None,
            message: format!("it cannot be written: {e}"),
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io("create the folder of"))?;
        let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(io("write"))?;
        temp.write_all(b"# Written by capstan: the installed plugins, their files' sha256 and what\n# they were granted. Change it with `capstan plugin ...`, not by hand.\n")
            .and_then(|()| temp.write_all(text.as_bytes()))
            .and_then(|()| temp.as_file().sync_all())
            .map_err(io("write"))?;
        temp.persist(path).map_err(|e| LockError::Io {
            action: "replace",
            path: path.to_path_buf(),
            source: e.error,
        })?;
        Ok(())
    }
}

/// The lockfile, read while holding the cross-process lock that every
/// change takes: change [`LockedLockfile::lock`] and [`LockedLockfile::save`]
/// it before the guard is dropped.
#[derive(Debug)]
pub struct LockedLockfile {
    /// The lockfile as it was when the lock was taken.
    pub lock: Lockfile,
    path: PathBuf,
    /// The open guard file; its lock is released when this is dropped.
    guard: File,
}

impl Lockfile {
    /// Takes the cross-process lock of the lockfile at `path` (waiting for
    /// another capstan process to finish its change), then reads it.
    pub fn modify(path: &Path) -> Result<LockedLockfile, LockError> {
        let guard_path = guard_path(path);
        let io = |action| {
            let guard_path = guard_path.clone();
            move |source| LockError::Io {
                action,
                path: guard_path,
                source,
            }
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| LockError::Io {
                action: "create the folder of",
                path: path.to_path_buf(),
                source,
            })?;
        }
        let guard = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&guard_path)
            .map_err(io("open the lock guard"))?;
        guard.lock().map_err(io("lock"))?;
        let lock = Self::load(path)?;
        Ok(LockedLockfile {
            lock,
            path: path.to_path_buf(),
            guard,
        })
    }
}

impl Lockfile {
    /// Completes plugin `name`'s entry in the lockfile at `path` with what
    /// an older capstan did not record (see the [module
    /// documentation](self)): under the lock, `change` is applied to the
    /// entry and saved, provided the entry is still the one with `digest`
    /// (an update meanwhile recorded its own). Returns whether it was.
    pub fn complete(
        path: &Path,
        name: &str,
        digest: &str,
        change: impl FnOnce(&mut LockEntry),
    ) -> Result<bool, LockError> {
        let mut locked = Self::modify(path)?;
        let Some(entry) = locked.lock.plugins.get_mut(name) else {
            return Ok(false);
        };
        if entry.digest != digest {
            return Ok(false);
        }
        change(entry);
        locked.save()?;
        Ok(true)
    }
}

impl LockedLockfile {
    /// Writes the changed lockfile, still holding the lock.
    pub fn save(&self) -> Result<(), LockError> {
        self.lock.save(&self.path)
    }
}

impl Drop for LockedLockfile {
    fn drop(&mut self) {
        let _ = self.guard.unlock();
    }
}

/// The file whose lock serialises changes to the lockfile at `path`.
fn guard_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".guard");
    path.with_file_name(name)
}

impl LockEntry {
    /// The plugin's folder.
    pub fn dir(&self, plugins_dir: &Path) -> PathBuf {
        plugins_dir.join(&self.folder)
    }

    /// The component exporting the tool interface, if any.
    pub fn tool_component(&self) -> Option<&LockComponent> {
        self.components
            .iter()
            .find(|c| c.exports.iter().any(|e| e == "tool"))
    }

    /// Its components that export hooks.
    pub fn hook_components(&self) -> impl Iterator<Item = &LockComponent> {
        self.components
            .iter()
            .filter(|c| c.exports.iter().any(|e| e == "hook"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timestamp::now_rfc3339;

    fn entry() -> LockEntry {
        LockEntry {
            hook_secrets: Vec::new(),
            version: "0.1.0".into(),
            source: "/src/demo".into(),
            installed_at: now_rfc3339(),
            signer: "unsigned".into(),
            folder: "store/demo/0.1.0-abc".into(),
            digest: "abc".into(),
            files: BTreeMap::from([("plugin.toml".into(), "11".into())]),
            components: vec![LockComponent {
                path: "demo.wasm".into(),
                sha256: "22".into(),
                exports: vec!["tool".into()],
                subscriptions: None,
            }],
            consented: Capabilities::default(),
            granted: Capabilities::default(),
            folders: BTreeMap::new(),
            limits: LockLimits {
                memory: Some(1 << 20),
                timeout_ms: None,
            },
        }
    }

    #[test]
    fn a_lockfile_survives_a_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("capstan.lock");
        assert!(Lockfile::load(&path).unwrap().plugins.is_empty());
        let mut lock = Lockfile::load(&path).unwrap();
        lock.plugins.insert("demo".into(), entry());
        lock.save(&path).unwrap();
        assert_eq!(Lockfile::load(&path).unwrap(), lock);
        assert_eq!(
            lock.plugins["demo"].tool_component().unwrap().path,
            "demo.wasm"
        );
    }

    /// Every kind of capability, as a manifest requests it, is written to
    /// the lockfile in the manifest's own schema, read back unchanged, and
    /// becomes what a call gets.
    #[test]
    fn each_capability_round_trips_from_manifest_through_lockfile_to_a_call() {
        use crate::grants::{Access, FsGrant, Grants, OwnFolders, SecretValues};
        use crate::plugin::manifest::Manifest;

        let dir = tempfile::tempdir().unwrap();
        let srv = dir.path().join("srv");
        let workspace = dir.path().join("ws");
        std::fs::create_dir(&srv).unwrap();
        std::fs::create_dir(&workspace).unwrap();
        let manifest = Manifest::parse(
            &format!(
                r#"name = "rt"
version = "1.0.0"
description = "Round trip"
components = ["rt.wasm"]

[capabilities]
fs = [{{ path = "$WORKSPACE" }}, {{ path = "{}", access = "read-write" }}]
net = ["https://api.example.com", "HTTPS://*.Example.org:8443/"]
env = ["TZ"]
secrets = [{{ name = "RT_TOKEN", header = "Authorization", format = "Bearer {{}}", hosts = ["api.example.com"] }}]

[limits]
memory = "64MiB"
timeout = "1500ms"
"#,
                srv.display()
            ),
            Path::new("plugin.toml"),
        )
        .unwrap();
        let requested = manifest.capabilities.clone();

        let path = dir.path().join("capstan.lock");
        let mut lock = Lockfile::load(&path).unwrap();
        let mut recorded = entry();
        recorded.consented = requested.clone();
        recorded.granted = requested.clone();
        recorded.limits = LockLimits {
            memory: manifest.limits.memory,
            timeout_ms: Some(1500),
        };
        lock.plugins.insert("rt".into(), recorded);
        lock.save(&path).unwrap();

        // Written as a manifest writes it, in normal form.
        let text = std::fs::read_to_string(&path).unwrap();
        for written in [
            "path = \"$WORKSPACE\"",
            "access = \"read\"",
            "access = \"read-write\"",
            "\"https://*.example.org:8443\"",
            "env = [\"TZ\"]",
            "format = \"Bearer {}\"",
            "memory = \"64MiB\"",
            "timeout = \"1500ms\"",
        ] {
            assert!(text.contains(written), "{written} in:\n{text}");
        }
        let back = Lockfile::load(&path).unwrap();
        assert_eq!(back, lock);
        let granted = &back.plugins["rt"].granted;
        assert_eq!(granted, &requested);

        // One schema: the lockfile's table is a manifest's [capabilities].
        let table = toml::to_string(&BTreeMap::from([("capabilities", granted)])).unwrap();
        let again = Manifest::parse(
            &format!(
                "name = \"rt\"\nversion = \"1.0.0\"\ndescription = \"d\"\ncomponents = []\n\n{table}"
            ),
            Path::new("plugin.toml"),
        )
        .unwrap();
        assert_eq!(again.capabilities, requested);

        // And a call gets each of them.
        let config = dir.path().join("config.toml");
        let values = SecretValues::from_pairs(&config, [("RT_TOKEN", "t0ken")]);
        let consented = crate::grants::fs::consented_folders(
            &granted.resolve_folders(&OwnFolders::default()).unwrap(),
        )
        .unwrap();
        let grants = Grants::for_plugin(
            granted,
            &workspace,
            &dir.path().join("data"),
            &values,
            &OwnFolders::default(),
            &consented,
        )
        .unwrap();
        assert_eq!(
            grants.workspace.as_ref().map(FsGrant::access),
            Some(Access::Read)
        );
        assert_eq!(grants.fs.len(), 1);
        assert_eq!(grants.fs[0].host_path(), srv.canonicalize().unwrap());
        assert_eq!(grants.fs[0].access(), Access::ReadWrite);
        assert_eq!(grants.net, requested.net);
        assert_eq!(grants.env, requested.env);
        assert_eq!(grants.secrets.len(), 1);
        assert_eq!(grants.secrets[0].header_value(), "Bearer t0ken");
    }

    #[test]
    fn folders_and_subscriptions_round_trip_and_older_entries_still_load() {
        use crate::hooks::{HookEvent, Subscription};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("capstan.lock");
        let mut recorded = entry();
        recorded
            .folders
            .insert("/srv/current".into(), "/srv/releases/42".into());
        recorded.components.push(LockComponent {
            path: "hook.wasm".into(),
            sha256: "33".into(),
            exports: vec!["hook".into()],
            subscriptions: Some(vec![
                Subscription {
                    event: HookEvent::PreToolUse,
                    matcher: Some("fs.write".into()),
                },
                Subscription {
                    event: HookEvent::Stop,
                    matcher: None,
                },
            ]),
        });
        let mut lock = Lockfile::load(&path).unwrap();
        lock.plugins.insert("demo".into(), recorded);
        lock.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("\"/srv/current\" = \"/srv/releases/42\""),
            "{text}"
        );
        assert!(text.contains("event = \"PreToolUse\""), "{text}");
        assert_eq!(Lockfile::load(&path).unwrap(), lock);

        // An entry written before either was recorded.
        let mut old = entry();
        old.components[0].exports = vec!["hook".into()];
        let mut lock = Lockfile::load(&path).unwrap();
        lock.plugins.insert("old".into(), old);
        lock.save(&path).unwrap();
        let back = Lockfile::load(&path).unwrap();
        assert!(back.plugins["old"].folders.is_empty());
        assert!(back.plugins["old"].components[0].subscriptions.is_none());

        // Completed under the lock, only while the entry is the same.
        assert!(
            Lockfile::complete(&path, "old", "abc", |e| {
                e.folders.insert("/a".into(), "/b".into());
            })
            .unwrap()
        );
        assert!(!Lockfile::complete(&path, "old", "other-digest", |_| {}).unwrap());
        assert_eq!(
            Lockfile::load(&path).unwrap().plugins["old"].folders["/a"],
            "/b"
        );
    }

    #[test]
    fn limits_written_before_one_spelling_are_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("capstan.lock");
        let mut lock = Lockfile::load(&path).unwrap();
        lock.plugins.insert("demo".into(), entry());
        lock.save(&path).unwrap();
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("memory = \"1MiB\"", "memory = 1048576\ntimeout_ms = 2500");
        std::fs::write(&path, text).unwrap();
        let limits = Lockfile::load(&path).unwrap().plugins["demo"].limits;
        assert_eq!(limits.memory, Some(1 << 20));
        assert_eq!(limits.timeout_ms, Some(2500));
    }

    #[test]
    fn a_damaged_lockfile_names_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("capstan.lock");
        std::fs::write(&path, "version = 1\n\n[plugins.demo]\nversion = 3\n").unwrap();
        let err = Lockfile::load(&path).unwrap_err().to_string();
        assert!(err.contains("capstan.lock:4"), "{err}");
        assert!(err.contains("capstan plugin install"), "{err}");
        std::fs::write(&path, "version = 7\n").unwrap();
        let err = Lockfile::load(&path).unwrap_err().to_string();
        assert!(err.contains("format version 7"), "{err}");
    }

    #[test]
    fn changes_under_the_lock_from_many_threads_all_stay() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("capstan.lock");
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let path = path.clone();
                std::thread::spawn(move || {
                    for n in 0..5 {
                        let mut locked = Lockfile::modify(&path).unwrap();
                        locked.lock.plugins.insert(format!("p{t}-{n}"), entry());
                        locked.save().unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(Lockfile::load(&path).unwrap().plugins.len(), 40);
        assert!(dir.path().join("capstan.lock.guard").is_file());
    }
}
