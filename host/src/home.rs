//! Where capstan keeps its data and caches.
//!
//! `$CAPSTAN_HOME` puts everything under one folder (tests always set it).
//! Otherwise data goes to `$XDG_DATA_HOME/capstan` (`~/.local/share/capstan`)
//! and caches to `$XDG_CACHE_HOME/capstan` (`~/.cache/capstan`).
//! `$CAPSTAN_CACHE_DIR` moves the compile cache alone, which lets several
//! homes share compiled components.

use std::env;
use std::path::PathBuf;

/// capstan's folders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    data: PathBuf,
    cache: PathBuf,
}

/// No folder could be chosen.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot tell where to keep capstan's data: neither CAPSTAN_HOME nor HOME is set; set CAPSTAN_HOME to a folder"
)]
pub struct NoHome;

impl Home {
    /// The folders, from the environment.
    pub fn from_env() -> Result<Self, NoHome> {
        let var = |name: &str| {
            env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let (data, cache) = if let Some(root) = var("CAPSTAN_HOME") {
            (root.clone(), root.join("cache"))
        } else {
            let home = var("HOME");
            let data = var("XDG_DATA_HOME")
                .or_else(|| home.as_ref().map(|h| h.join(".local/share")))
                .ok_or(NoHome)?
                .join("capstan");
            let cache = var("XDG_CACHE_HOME")
                .or_else(|| home.as_ref().map(|h| h.join(".cache")))
                .ok_or(NoHome)?
                .join("capstan");
            (data, cache)
        };
        let cache = var("CAPSTAN_CACHE_DIR").unwrap_or(cache);
        Ok(Self { data, cache })
    }

    /// Folders rooted at explicit paths.
    pub fn at(data: PathBuf, cache: PathBuf) -> Self {
        Self { data, cache }
    }

    /// The data folder.
    pub fn data_dir(&self) -> &std::path::Path {
        &self.data
    }

    /// Where session transcripts are kept, one folder per workspace.
    pub fn sessions_dir(&self) -> PathBuf {
        self.data.join("sessions")
    }

    /// Where compiled components are kept.
    pub fn compile_cache_dir(&self) -> PathBuf {
        self.cache.join("compiled")
    }
}
