//! The MCP servers the user consented to, and the ones they added.
//!
//! `mcp-servers.toml` in the plugins folder records, for each server the
//! user allowed, the fingerprint of its definition
//! ([`ServerSpec::fingerprint`]), where it was defined, when, and what it
//! reaches in words. A server runs only while its definition still has the
//! fingerprint consented to: a project that changes its `.mcp.json` asks
//! again. Servers added with `capstan mcp add` (and those of Claude Code
//! plugins) keep their definition here too.
//!
//! Every change is a read-modify-write under the plugins' cross-process
//! lock ([`Lockfile::modify`] on the plugin lockfile), written through a
//! temporary file and a rename, so a reader sees the old file or the new
//! one and two capstan processes never lose each other's change.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::config::{ServerEntry, ServerSpec};
use crate::home::Home;
use crate::plugin::lock::Lockfile;

/// The store's format version.
const FORMAT: u32 = 1;

/// The whole store.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsentStore {
    /// The format version.
    #[serde(default)]
    pub version: u32,
    /// Servers defined here (`capstan mcp add`, Claude Code plugins), by
    /// name.
    #[serde(default)]
    pub added: BTreeMap<String, AddedServer>,
    /// Consents, by server name.
    #[serde(default)]
    pub approved: BTreeMap<String, Approval>,
}

/// A server defined in the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddedServer {
    /// Who added it: `capstan mcp add`, or `plugin NAME`.
    pub added_by: String,
    /// The definition.
    pub definition: ServerEntry,
}

/// One consent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    /// The fingerprint of the definition consented to.
    pub fingerprint: String,
    /// Where it was defined.
    pub source: String,
    /// When (RFC 3339).
    pub approved_at: String,
    /// What it reaches, as shown when the user consented.
    pub reach: Vec<String>,
}

/// The store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ConsentError {
    /// Reading or writing failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a store this capstan reads.
    #[error("{} is damaged: {message}; remove it and add the servers again", path.display())]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The plugins' lock could not be taken.
    #[error("cannot lock the plugins folder: {0}")]
    Lock(String),
}

/// Where the store is kept.
pub fn store_path(home: &Home) -> PathBuf {
    home.plugins_dir().join("mcp-servers.toml")
}

impl ConsentStore {
    /// Reads the store at `path`; a missing file is an empty store.
    pub fn load(path: &Path) -> Result<Self, ConsentError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self {
                    version: FORMAT,
                    ..Self::default()
                });
            }
            Err(source) => {
                return Err(ConsentError::Io {
                    action: "read",
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let store: Self = toml::from_str(&text).map_err(|e| ConsentError::Damaged {
            path: path.to_path_buf(),
            message: e.message().trim().to_string(),
        })?;
        if store.version != FORMAT {
            return Err(ConsentError::Damaged {
                path: path.to_path_buf(),
                message: format!("format version {} is not {FORMAT}", store.version),
            });
        }
        Ok(store)
    }

    /// Writes the store to `path` through a temporary file and a rename.
    fn save(&self, path: &Path) -> Result<(), ConsentError> {
        let io = |action| {
            move |source| ConsentError::Io {
                action,
                path: path.to_path_buf(),
                source,
            }
        };
        let text = toml::to_string(self).map_err(|e| ConsentError::Damaged {
            path: path.to_path_buf(),
            message: format!("it cannot be written: {e}"),
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io("create the folder of"))?;
        let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(io("write"))?;
        temp.write_all(
            b"# Written by capstan: the MCP servers you allowed and the ones you added.\n# Change it with `capstan mcp add|remove|approve`, not by hand.\n",
        )
        .and_then(|()| temp.write_all(text.as_bytes()))
        .and_then(|()| temp.as_file().sync_all())
        .map_err(io("write"))?;
        temp.persist(path).map_err(|e| ConsentError::Io {
            action: "replace",
            path: path.to_path_buf(),
            source: e.error,
        })?;
        Ok(())
    }

    /// Changes the store of `home` with `change` under the plugins' lock,
    /// and saves it when `change` returns `Ok(true)`.
    pub fn modify<T>(
        home: &Home,
        change: impl FnOnce(&mut Self) -> Result<(T, bool), ConsentError>,
    ) -> Result<T, ConsentError> {
        let lock_path = home.plugins_dir().join("capstan.lock");
        let _guard = Lockfile::modify(&lock_path).map_err(|e| ConsentError::Lock(e.to_string()))?;
        Self::modify_locked(home, change)
    }

    /// [`Self::modify`] for a caller that already holds the plugins' lock
    /// (the plugin installer).
    pub fn modify_locked<T>(
        home: &Home,
        change: impl FnOnce(&mut Self) -> Result<(T, bool), ConsentError>,
    ) -> Result<T, ConsentError> {
        let path = store_path(home);
        let mut store = Self::load(&path)?;
        store.version = FORMAT;
        let (value, changed) = change(&mut store)?;
        if changed {
            store.save(&path)?;
        }
        Ok(value)
    }

    /// The definitions kept here, as `(name, source, entry)`.
    pub fn definitions(&self) -> Vec<(String, String, ServerEntry)> {
        self.added
            .iter()
            .map(|(name, added)| {
                (
                    name.clone(),
                    added.added_by.clone(),
                    added.definition.clone(),
                )
            })
            .collect()
    }

    /// Whether `spec`, exactly as defined now, was consented to.
    pub fn allows(&self, spec: &ServerSpec) -> bool {
        self.approved
            .get(&spec.name)
            .is_some_and(|a| a.fingerprint == spec.fingerprint())
    }

    /// Records consent to `spec`.
    pub fn approve(&mut self, spec: &ServerSpec) {
        self.approved.insert(
            spec.name.clone(),
            Approval {
                fingerprint: spec.fingerprint(),
                source: spec.source.clone(),
                approved_at: crate::timestamp::now_rfc3339(),
                reach: spec.reach(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn consent_holds_for_the_definition_consented_to_only() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().join("data"), dir.path().join("cache"));
        let entry = ServerEntry {
            command: Some("srv".into()),
            ..ServerEntry::default()
        };
        let spec = entry.to_spec("s", "capstan mcp add", None).unwrap();
        ConsentStore::modify(&home, |store| {
            store.added.insert(
                "s".into(),
                AddedServer {
                    added_by: "capstan mcp add".into(),
                    definition: entry.clone(),
                },
            );
            store.approve(&spec);
            Ok(((), true))
        })
        .unwrap();
        let store = ConsentStore::load(&store_path(&home)).unwrap();
        assert!(store.allows(&spec));
        assert_eq!(store.definitions().len(), 1);
        let mut wider = entry.clone();
        wider.workspace = Some("write".into());
        assert!(!store.allows(&wider.to_spec("s", "capstan mcp add", None).unwrap()));
        std::fs::write(
            store_path(&home),
            "version = 1\n[approved.s]\nfingerprint = 3\n",
        )
        .unwrap();
        assert!(matches!(
            ConsentStore::load(&store_path(&home)),
            Err(ConsentError::Damaged { .. })
        ));
    }
}
