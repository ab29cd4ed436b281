//! The plugins available to this process, by name.

use std::path::{Path, PathBuf};

use super::builtin::{BUILTIN_PLUGINS, BuiltinPlugin};
use crate::sandbox::tool::valid_tool_name;
use crate::sandbox::{LoadError, LoadedComponent, Sandbox};

/// Where a plugin's component comes from.
#[derive(Debug, Clone)]
pub enum PluginSource {
    /// Embedded in the binary.
    Builtin(&'static BuiltinPlugin),
    /// A component file given on the command line.
    File(PathBuf),
}

/// A plugin could not be added or found.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// No plugin by that name.
    #[error("there is no plugin called `{name}`; available: {}", known.join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: Vec<String>,
    },
    /// Two plugins would share a name.
    #[error("a plugin called `{0}` is already loaded; give the file another name with NAME=PATH")]
    Duplicate(String),
    /// The name cannot be used.
    #[error(
        "`{0}` cannot be a plugin name: use lowercase letters, digits, `-` and `_`, starting with a letter (write NAME=PATH to choose one)"
    )]
    BadName(String),
    /// The component file is missing.
    #[error("cannot read the plugin file {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The component could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
}

/// The plugins of this process: the built-in ones, then any added files.
#[derive(Debug, Clone)]
pub struct Catalog {
    entries: Vec<(String, PluginSource)>,
}

impl Catalog {
    /// The built-in plugins only.
    pub fn builtin() -> Self {
        Self {
            entries: BUILTIN_PLUGINS
                .iter()
                .map(|p| (p.name.to_string(), PluginSource::Builtin(p)))
                .collect(),
        }
    }

    /// Adds a component file, written `PATH` (named after the file, with
    /// `_` turned into `-`) or `NAME=PATH`.
    pub fn add_file(&mut self, spec: &str) -> Result<(), CatalogError> {
        let (name, path) = match spec.split_once('=') {
            Some((name, path)) if !name.contains('/') => (name.to_string(), PathBuf::from(path)),
            _ => {
                let path = PathBuf::from(spec);
                let stem = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().replace('_', "-"))
                    .unwrap_or_default();
                (stem, path)
            }
        };
        if !valid_tool_name(&name) {
            return Err(CatalogError::BadName(name));
        }
        if self.entries.iter().any(|(n, _)| *n == name) {
            return Err(CatalogError::Duplicate(name));
        }
        if let Err(source) = std::fs::metadata(&path) {
            return Err(CatalogError::Unreadable { path, source });
        }
        self.entries.push((name, PluginSource::File(path)));
        Ok(())
    }

    /// Plugin names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// Where plugin `name` comes from.
    pub fn source(&self, name: &str) -> Result<&PluginSource, CatalogError> {
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s)
            .ok_or_else(|| CatalogError::Unknown {
                name: name.to_string(),
                known: self.names().map(str::to_string).collect(),
            })
    }

    /// Loads plugin `name` into the sandbox.
    pub fn load(&self, sandbox: &Sandbox, name: &str) -> Result<LoadedComponent, CatalogError> {
        match self.source(name)? {
            PluginSource::Builtin(p) => Ok(sandbox.load(
                name,
                p.wasm,
                Some(p.sha256),
                &format!("the built-in {name} plugin"),
            )?),
            PluginSource::File(path) => {
                let bytes = read(path)?;
                Ok(sandbox.load(name, &bytes, None, &path.display().to_string())?)
            }
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, CatalogError> {
    std::fs::read(path).map_err(|source| CatalogError::Unreadable {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_named_after_their_stem_or_explicitly() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("my_tool.wasm");
        std::fs::write(&file, b"x").unwrap();
        let mut catalog = Catalog::builtin();
        catalog.add_file(file.to_str().unwrap()).unwrap();
        catalog
            .add_file(&format!("other={}", file.display()))
            .unwrap();
        let names: Vec<&str> = catalog.names().collect();
        assert!(names.contains(&"my-tool") && names.contains(&"other") && names.contains(&"fs"));
        assert!(matches!(
            catalog.add_file(&format!("other={}", file.display())),
            Err(CatalogError::Duplicate(_))
        ));
        assert!(matches!(
            catalog.add_file(&format!("Bad={}", file.display())),
            Err(CatalogError::BadName(_))
        ));
        assert!(matches!(
            catalog.add_file("/nonexistent/x.wasm"),
            Err(CatalogError::Unreadable { .. })
        ));
        assert!(matches!(
            catalog.source("nope"),
            Err(CatalogError::Unknown { .. })
        ));
    }
}
