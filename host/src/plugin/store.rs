//! The plugin store under the data folder: one folder per installed
//! plugin version, and each plugin's own data folder.
//!
//! ```text
//! <plugins>/capstan.lock
//! <plugins>/store/<name>/<version>-<first 12 hex of the package digest>/
//! <plugins>/data/<name>/
//! ```
//!
//! A package is the files [`super::package::select`] chooses from a plugin
//! folder; a store folder holds exactly those (and the signature
//! `plugin.minisig`). Its digest is the sha256 of its listing: one line
//! `<sha256>  <relative path>` per file, sorted by path — the text a
//! signature signs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::sandbox::engine::sha256_hex;

/// The signature file at a package's root.
pub const SIGNATURE_FILE: &str = "plugin.minisig";

/// The most a package may hold, all files together.
pub const MAX_PACKAGE_BYTES: u64 = 512 << 20;

/// The most files a package may hold.
pub const MAX_PACKAGE_FILES: usize = 10_000;

/// Where plugins live.
#[derive(Debug, Clone)]
pub struct PluginStore {
    root: PathBuf,
}

/// A package's files could not be read or stored.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The package holds something that is not a plain file or folder.
    #[error(
        "{} is a {kind}; a plugin package may hold only plain files and folders",
        path.display()
    )]
    NotAPlainFile {
        /// The entry.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// The package is too large.
    #[error("the package is too large: {what}; a plugin package may hold at most {} MiB in {} files", MAX_PACKAGE_BYTES >> 20, MAX_PACKAGE_FILES)]
    TooLarge {
        /// What went over.
        what: String,
    },
    /// A `[package]` pattern cannot be compiled.
    #[error("a [package] pattern in plugin.toml is not valid: {reason}")]
    Pattern {
        /// Why.
        reason: String,
    },
    /// A path cannot be used in a package.
    #[error("{} cannot be stored in a plugin package: its name is not valid UTF-8", path.display())]
    NotUtf8 {
        /// The path.
        path: PathBuf,
    },
}

/// The files of a package: relative path (`/`-separated) to sha256.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileHashes(pub BTreeMap<String, String>);

impl FileHashes {
    /// The listing a signature signs: `<sha256>  <path>\n` per file, sorted.
    pub fn listing(&self) -> String {
        self.0
            .iter()
            .map(|(path, hash)| format!("{hash}  {path}\n"))
            .collect()
    }

    /// The package digest: the sha256 of the listing.
    pub fn digest(&self) -> String {
        sha256_hex(self.listing().as_bytes())
    }
}

impl PluginStore {
    /// The store in `plugins_dir` (`Home::plugins_dir()`).
    pub fn new(plugins_dir: PathBuf) -> Self {
        Self { root: plugins_dir }
    }

    /// The plugins folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The lockfile.
    pub fn lock_path(&self) -> PathBuf {
        self.root.join("capstan.lock")
    }

    /// The folder of every stored version of plugin `name`.
    pub fn plugin_dir(&self, name: &str) -> PathBuf {
        self.root.join("store").join(name)
    }

    /// The folder of one version of a plugin, relative to the plugins folder.
    pub fn package_folder(name: &str, version: &str, digest: &str) -> String {
        let short = digest.get(..12).unwrap_or(digest);
        format!("store/{name}/{version}-{short}")
    }

    /// Plugin `name`'s own data folder.
    pub fn data_dir(&self, name: &str) -> PathBuf {
        self.root.join("data").join(name)
    }

    /// Where packages are unpacked or staged before being moved into place.
    pub fn staging_dir(&self) -> PathBuf {
        self.root.join("staging")
    }
}

impl FileHashes {
    /// The size of the package in `dir`, all files together, in bytes.
    pub fn total_bytes(&self, dir: &Path) -> u64 {
        self.0
            .keys()
            .filter_map(|rel| std::fs::metadata(dir.join(rel)).ok())
            .map(|meta| meta.len())
            .sum()
    }
}

/// Hashes the files `rels` (relative, `/`-separated) of the package in
/// `dir`, within the package size caps.
pub fn hash_files(dir: &Path, rels: &[String]) -> Result<FileHashes, StoreError> {
    if rels.len() > MAX_PACKAGE_FILES {
        return Err(StoreError::TooLarge {
            what: format!("{} files", rels.len()),
        });
    }
    let mut files = BTreeMap::new();
    let mut total = 0u64;
    for rel in rels {
        add_file(&mut files, &mut total, rel.clone(), &dir.join(rel))?;
    }
    Ok(FileHashes(files))
}

/// Hashes every plain file under `dir` except hidden ones and the
/// signature: a store folder's contents, or a folder that holds only its
/// package. Links and special files are refused.
pub fn hash_package(dir: &Path) -> Result<FileHashes, StoreError> {
    let mut files = BTreeMap::new();
    let mut total = 0u64;
    walk(dir, dir, &mut |rel, path| {
        add_file(&mut files, &mut total, rel, path)?;
        if files.len() > MAX_PACKAGE_FILES {
            return Err(StoreError::TooLarge {
                what: format!("more than {MAX_PACKAGE_FILES} files"),
            });
        }
        Ok(())
    })?;
    Ok(FileHashes(files))
}

/// Reads the file at `path` and records its SHA-256 under `rel`, adding its
/// size to `total`, which may not pass [`MAX_PACKAGE_BYTES`].
fn add_file(
    files: &mut BTreeMap<String, String>,
    total: &mut u64,
    rel: String,
    path: &Path,
) -> Result<(), StoreError> {
    let bytes = std::fs::read(path).map_err(|source| StoreError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    })?;
    *total += bytes.len() as u64;
    if *total > MAX_PACKAGE_BYTES {
        return Err(StoreError::TooLarge {
            what: format!("more than {} MiB", MAX_PACKAGE_BYTES >> 20),
        });
    }
    files.insert(rel, sha256_hex(&bytes));
    Ok(())
}

/// Calls `visit(relative path, path)` for every package file under `dir`.
fn walk(
    root: &Path,
    dir: &Path,
    visit: &mut dyn FnMut(String, &Path) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| StoreError::Io {
            action,
            path,
            source,
        }
    };
    let mut entries = std::fs::read_dir(dir)
        .map_err(io("list", dir))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io("list", dir))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(StoreError::NotUtf8 { path });
        };
        if name.starts_with('.') || (dir == root && name == SIGNATURE_FILE) {
            continue;
        }
        let kind = entry.file_type().map_err(io("inspect", &path))?;
        if kind.is_dir() {
            walk(root, &path, visit)?;
        } else if kind.is_file() {
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            visit(rel, &path)?;
        } else {
            let kind = if kind.is_symlink() {
                "symbolic link"
            } else {
                "special file (device, socket or pipe)"
            };
            return Err(StoreError::NotAPlainFile { path, kind });
        }
    }
    Ok(())
}

/// Copies the listed files (and the signature, if any) from `from` into a
/// new folder `to`, through a temporary folder beside it and a rename.
/// Each copied file is hashed again, so what lands in the store is what was
/// checked. If `to` already exists with the same files, it is kept.
pub fn copy_package(from: &Path, files: &FileHashes, to: &Path) -> Result<(), StoreError> {
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| StoreError::Io {
            action,
            path,
            source,
        }
    };
    let listed: Vec<String> = files.0.keys().cloned().collect();
    if to.is_dir() && hash_files(to, &listed).is_ok_and(|found| &found == files) {
        return Ok(());
    }
    let parent = to.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io("create", parent))?;
    let temp = tempfile::Builder::new()
        .prefix(".installing-")
        .tempdir_in(parent)
        .map_err(io("create a folder in", parent))?;
    let signature = from.join(SIGNATURE_FILE);
    let extra = signature
        .is_file()
        .then(|| SIGNATURE_FILE.to_string())
        .into_iter();
    for rel in files.0.keys().cloned().chain(extra) {
        let source = from.join(&rel);
        let target = temp.path().join(&rel);
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        }
        let bytes = std::fs::read(&source).map_err(io("read", &source))?;
        if let Some(expected) = files.0.get(&rel)
            && sha256_hex(&bytes) != *expected
        {
            return Err(StoreError::Io {
                action: "copy",
                path: source,
                source: std::io::Error::other("the file changed while it was being installed"),
            });
        }
        std::fs::write(&target, &bytes).map_err(io("write", &target))?;
        keep_executable(&source, &target).map_err(io("set the mode of", &target))?;
    }
    if to.exists() {
        std::fs::remove_dir_all(to).map_err(io("replace", to))?;
    }
    let temp = temp.keep();
    std::fs::rename(&temp, to).map_err(|source| {
        let _ = std::fs::remove_dir_all(&temp);
        StoreError::Io {
            action: "move into place",
            path: to.to_path_buf(),
            source,
        }
    })?;
    Ok(())
}

/// Gives `to` the executable bits of `from` (scripts a Claude Code
/// plugin's hooks run), and nothing else of its mode.
pub fn keep_executable(from: &Path, to: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if std::fs::metadata(from)?.permissions().mode() & 0o111 != 0 {
            std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    #[cfg(not(unix))]
    let _ = (from, to);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_hash_their_plain_files_and_copy() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(src.join("sub")).unwrap();
        std::fs::create_dir_all(src.join(".git")).unwrap();
        std::fs::write(src.join("plugin.toml"), "a").unwrap();
        std::fs::write(src.join("sub/x.wasm"), "b").unwrap();
        std::fs::write(src.join(".git/HEAD"), "c").unwrap();
        std::fs::write(src.join(SIGNATURE_FILE), "sig").unwrap();
        let files = hash_package(&src).unwrap();
        let names: Vec<&str> = files.0.keys().map(String::as_str).collect();
        assert_eq!(names, ["plugin.toml", "sub/x.wasm"]);
        assert!(files.listing().ends_with("  sub/x.wasm\n"));
        assert_eq!(files.digest().len(), 64);

        let to = dir.path().join("store/demo/0.1.0-abc");
        copy_package(&src, &files, &to).unwrap();
        assert_eq!(hash_package(&to).unwrap(), files);
        assert!(to.join(SIGNATURE_FILE).is_file());
        // Copying again over an identical folder keeps it.
        copy_package(&src, &files, &to).unwrap();
    }

    #[test]
    fn links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), "a").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("b")).unwrap();
        let err = hash_package(dir.path()).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
    }

    #[test]
    fn folders_carry_the_short_digest() {
        assert_eq!(
            PluginStore::package_folder("w", "1.0.0", "0123456789abcdef"),
            "store/w/1.0.0-0123456789ab"
        );
    }
}
