//! `plugin.toml`: a plugin's name, version, components, requested
//! capabilities and limits, validated with errors that name the field and
//! line.
//!
//! ```toml
//! name = "weather"
//! version = "0.2.0"
//! description = "Forecasts from open-meteo.com"
//! authors = ["Ada <ada@example.com>"]
//! components = ["weather.wasm"]
//!
//! [capabilities]
//! fs = [{ path = "$WORKSPACE", access = "read" }]
//! net = ["https://api.open-meteo.com"]
//! env = ["TZ"]
//! secrets = [{ name = "OPEN_METEO_KEY", header = "X-Api-Key", hosts = ["api.open-meteo.com"] }]
//!
//! [limits]
//! memory = "128MiB"
//! timeout = "20s"
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::grants::Capabilities;

/// The manifest's file name, at the root of a plugin folder.
pub const MANIFEST_FILE: &str = "plugin.toml";

/// A validated `plugin.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The plugin's name: lowercase letters, digits, `-` and `_`, starting
    /// with a letter. Its tools are called `NAME.TOOL`.
    pub name: String,
    /// Its version (semver).
    pub version: String,
    /// One line saying what it does.
    pub description: String,
    /// Who wrote it.
    pub authors: Vec<String>,
    /// Its component files, relative to the manifest's folder.
    pub components: Vec<String>,
    /// What it asks to be granted.
    pub capabilities: Capabilities,
    /// Its limits, where it asks for other than the defaults.
    pub limits: ManifestLimits,
}

/// Limits a manifest may set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ManifestLimits {
    /// Linear memory cap in bytes.
    pub memory: Option<u64>,
    /// Time limit per call.
    pub timeout: Option<Duration>,
}

/// A manifest could not be read or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid: the message names the field and line.
    #[error("{}:{line}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The line (1-based) the problem is on.
        line: usize,
        /// What is wrong and how to fix it.
        message: String,
    },
}

impl Manifest {
    /// Reads `plugin.toml` from a plugin folder.
    pub fn load(dir: &Path) -> Result<Self, ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| ManifestError::Unreadable {
            path: path.clone(),
            source,
        })?;
        Self::parse(&text, &path)
    }

    /// Parses and validates a manifest's text; `path` is used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ManifestError> {
        let _ = text;
        Err(ManifestError::Invalid {
            path: path.to_path_buf(),
            line: 1,
            message: "manifest parsing is being written".into(),
        })
    }
}
