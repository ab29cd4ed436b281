//! Where capstan keeps its data and caches.
//!
//! `$CAPSTAN_HOME` puts everything under one folder (tests always set it).
//! Otherwise data goes to `$XDG_DATA_HOME/capstan` (`~/.local/share/capstan`),
//! caches to `$XDG_CACHE_HOME/capstan` (`~/.cache/capstan`) and the user's
//! settings to `$XDG_CONFIG_HOME/capstan` (`~/.config/capstan`).
//! `$CAPSTAN_CACHE_DIR` moves the compile cache alone, which lets several
//! homes share compiled components; `$CAPSTAN_TOOLCHAINS` moves the
//! plugin compilers (`<data>/toolchains` otherwise).
//!
//! No grant may reach any of these folders ([`Home::own_folders`]): they
//! hold the lockfile, the compiled components, the audit log and the
//! compilers capstan runs.

use std::env;
use std::path::{Path, PathBuf};

/// capstan's folders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    data: PathBuf,
    cache: PathBuf,
    config: PathBuf,
    toolchains: PathBuf,
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
        Self::from_vars(|name| {
            env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
    }

    /// The folders, from environment variables looked up by `var`.
    fn from_vars(var: impl Fn(&str) -> Option<PathBuf>) -> Result<Self, NoHome> {
        let (data, cache, config) = if let Some(root) = var("CAPSTAN_HOME") {
            (root.clone(), root.join("cache"), root)
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
            let config = var("XDG_CONFIG_HOME")
                .or_else(|| home.as_ref().map(|h| h.join(".config")))
                .ok_or(NoHome)?
                .join("capstan");
            (data, cache, config)
        };
        let cache = var("CAPSTAN_CACHE_DIR").unwrap_or(cache);
        let toolchains = var("CAPSTAN_TOOLCHAINS").unwrap_or_else(|| data.join("toolchains"));
        Ok(Self {
            data,
            cache,
            config,
            toolchains,
        })
    }

    /// Folders rooted at explicit paths; the user's settings live in the
    /// data folder.
    pub fn at(data: PathBuf, cache: PathBuf) -> Self {
        Self {
            config: data.clone(),
            toolchains: data.join("toolchains"),
            data,
            cache,
        }
    }

    /// The same folders, with the user's settings in `config` instead.
    pub fn with_config_dir(mut self, config: PathBuf) -> Self {
        self.config = config;
        self
    }

    /// The data folder.
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// The folder of the user's settings.
    pub fn config_dir(&self) -> &Path {
        &self.config
    }

    /// The user's settings file, `config.toml` in [`Home::config_dir`].
    pub fn config_file(&self) -> PathBuf {
        self.config.join("config.toml")
    }

    /// Where per-workspace state kept outside the workspace lives (such as
    /// the project local settings), one folder per workspace.
    pub fn projects_dir(&self) -> PathBuf {
        self.data.join("projects")
    }

    /// Where session transcripts are kept, one folder per workspace.
    pub fn sessions_dir(&self) -> PathBuf {
        self.data.join("sessions")
    }

    /// The audit log of what plugins touched.
    pub fn audit_log(&self) -> PathBuf {
        self.data.join("audit").join("audit.jsonl")
    }

    /// Where capstan's own log files are written, one per session
    /// (`logging`).
    pub fn logs_dir(&self) -> PathBuf {
        self.data.join("logs")
    }

    /// Where installed plugins, their lockfile and their data live.
    pub fn plugins_dir(&self) -> PathBuf {
        self.data.join("plugins")
    }

    /// Where compiled components are kept.
    pub fn compile_cache_dir(&self) -> PathBuf {
        self.cache.join("compiled")
    }

    /// The key that signs compiled components, kept in the data folder
    /// (beside the lockfile, where no grant reaches) rather than beside the
    /// components it vouches for.
    pub fn compile_cache_key(&self) -> PathBuf {
        self.data.join("compile-cache.key")
    }

    /// Where the plugin compilers (componentize-py, componentize-js) are
    /// installed.
    pub fn toolchains_dir(&self) -> &Path {
        &self.toolchains
    }

    /// capstan's own folders, each with what it holds: the data, the
    /// user's settings, the caches and the compilers. No grant may reach
    /// them (see [`crate::grants::fs::OwnFolders`]).
    pub fn own_folders(&self) -> Vec<(PathBuf, &'static str)> {
        vec![
            (self.data.clone(), "capstan's data folder"),
            (self.config.clone(), "capstan's settings folder"),
            (self.cache.clone(), "capstan's cache folder"),
            (self.toolchains.clone(), "capstan's plugin compilers"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<PathBuf> {
        let pairs: Vec<(String, PathBuf)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), PathBuf::from(v)))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn capstan_home_holds_the_config() {
        let home = Home::from_vars(vars(&[("CAPSTAN_HOME", "/c"), ("HOME", "/h")])).unwrap();
        assert_eq!(home.config_dir(), Path::new("/c"));
        assert_eq!(home.config_file(), Path::new("/c/config.toml"));
        assert_eq!(home.projects_dir(), Path::new("/c/projects"));
    }

    #[test]
    fn config_follows_xdg_or_home() {
        let home = Home::from_vars(vars(&[("HOME", "/h")])).unwrap();
        assert_eq!(
            home.config_file(),
            Path::new("/h/.config/capstan/config.toml")
        );
        assert_eq!(home.data_dir(), Path::new("/h/.local/share/capstan"));
        let xdg = Home::from_vars(vars(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "/x")])).unwrap();
        assert_eq!(xdg.config_dir(), Path::new("/x/capstan"));
        assert!(Home::from_vars(vars(&[])).is_err());
    }

    #[test]
    fn at_keeps_config_in_data() {
        let home = Home::at("/d".into(), "/k".into());
        assert_eq!(home.config_file(), Path::new("/d/config.toml"));
        let moved = home.with_config_dir("/e".into());
        assert_eq!(moved.config_file(), Path::new("/e/config.toml"));
    }
}
