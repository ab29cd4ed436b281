//! File-system grants: which folders a plugin can see, read-only or
//! read-write.
//!
//! A granted folder becomes a WASI preopen and nothing else exists for the
//! plugin. Paths are resolved and canonicalised when the grant is made, and
//! wasmtime-wasi resolves every guest path beneath the preopen with cap-std,
//! so neither `..` nor a symbolic link can lead outside it. A read-only grant
//! is enforced by the preopen's permissions, whatever the plugin attempts.
//!
//! Only regular files and folders can be opened ([`openable`]). A named
//! pipe, a socket or a device inside a granted folder is refused before it
//! is opened: opening a pipe waits for a writer, reading a device may wait
//! for ever, and file operations run on the thread serving the call, where
//! no deadline could end them.

use std::path::{Path, PathBuf};

use wasmtime_wasi::p2::bindings::filesystem::types::DescriptorType;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

/// Whether a path whose stat says `kind` may be opened: regular files,
/// folders and (unresolved) links yes; otherwise why not, in words.
pub fn openable(kind: DescriptorType) -> Result<(), &'static str> {
    match kind {
        DescriptorType::RegularFile | DescriptorType::Directory | DescriptorType::SymbolicLink => {
            Ok(())
        }
        DescriptorType::Fifo => Err("a named pipe (FIFO)"),
        DescriptorType::Socket => Err("a socket"),
        DescriptorType::CharacterDevice => Err("a character device"),
        DescriptorType::BlockDevice => Err("a block device"),
        // How wasmtime-wasi reports a named pipe or a socket.
        DescriptorType::Unknown => Err("a special file (such as a named pipe or a socket)"),
    }
}

/// How a folder may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Read files and list folders.
    Read,
    /// Also create, change, rename and delete.
    ReadWrite,
}

/// A folder as a manifest requests it: `$WORKSPACE`, `$PLUGIN_DATA` (the
/// plugin's own data folder) or an absolute path. Nothing else: `$HOME`,
/// `~` and relative paths are refused, since what they mean depends on who
/// runs the plugin and from where ([`FsRequest::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsRequest {
    /// The folder.
    pub path: String,
    /// `read` or `read-write`.
    pub access: Access,
}

/// One folder a plugin may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsGrant {
    host_path: PathBuf,
    guest_path: String,
    access: Access,
}

/// A grant could not be made.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    /// The folder does not exist or cannot be resolved.
    #[error("cannot grant access to {}: {}", path.display(), explain(source))]
    Unresolvable {
        /// The path asked for.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The path is not a folder.
    #[error("cannot grant access to {}: it is not a folder", path.display())]
    NotAFolder {
        /// The path asked for.
        path: PathBuf,
    },
    /// The path cannot be shown to a plugin as text.
    #[error("cannot grant access to {}: its path is not valid UTF-8", path.display())]
    NotUtf8 {
        /// The path asked for.
        path: PathBuf,
    },
    /// A requested path is not one a plugin may ask for.
    #[error("cannot grant access to `{path}`: {reason}")]
    InvalidRequest {
        /// The path as written.
        path: String,
        /// Why, and what to write instead.
        reason: String,
    },
    /// The plugin's data folder could not be created.
    #[error("cannot create the plugin data folder {}: {}", path.display(), explain(source))]
    CreateDataFolder {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The sandbox could not open the folder.
    #[error("cannot open {} for the sandbox: {reason}", path.display())]
    Preopen {
        /// The folder.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// Says why a path could not be resolved, in words rather than an errno.
fn explain(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::NotFound => "no such folder".to_string(),
        std::io::ErrorKind::PermissionDenied => {
            "permission denied (capstan itself may not open it)".to_string()
        }
        _ => {
            let text = err.to_string();
            match text.find(" (os error") {
                Some(end) => text[..end].to_string(),
                None => text,
            }
        }
    }
}

/// The workspace, as a manifest writes it.
pub const WORKSPACE: &str = "$WORKSPACE";
/// The plugin's own data folder, as a manifest writes it.
pub const PLUGIN_DATA: &str = "$PLUGIN_DATA";

impl FsRequest {
    /// A request for `path` with `access`, checked.
    pub fn parse(path: &str, access: Access) -> Result<Self, GrantError> {
        let request = Self {
            path: path.to_string(),
            access,
        };
        request.validate()?;
        Ok(request)
    }

    /// Checks that the path is `$WORKSPACE`, `$PLUGIN_DATA` or an absolute
    /// path without `..`, and not the root of the file system.
    pub fn validate(&self) -> Result<(), GrantError> {
        check_path(&self.path).map_err(|reason| GrantError::InvalidRequest {
            path: self.path.clone(),
            reason,
        })
    }

    /// The request in plain words: `the workspace (read-only)`.
    pub fn describe(&self) -> String {
        let what = match self.path.as_str() {
            WORKSPACE => "the workspace".to_string(),
            PLUGIN_DATA => "its own data folder".to_string(),
            other => other.to_string(),
        };
        let access = match self.access {
            Access::Read => "read-only",
            Access::ReadWrite => "read-write",
        };
        format!("{what} ({access})")
    }

    /// Whether a grant of `granted` covers this request: the same folder
    /// (or, for absolute paths, a folder inside it) with enough access.
    pub fn is_within(&self, granted: &FsRequest) -> bool {
        let access_ok = self.access == Access::Read || granted.access == Access::ReadWrite;
        let inside = if self.path.starts_with('$') || granted.path.starts_with('$') {
            self.path == granted.path
        } else {
            Path::new(&self.path).starts_with(Path::new(&granted.path))
        };
        access_ok && inside
    }

    /// Resolves the request to a folder: `$WORKSPACE` is `workspace`,
    /// `$PLUGIN_DATA` is `plugin_data` (created if missing), and an absolute
    /// path is itself, which must exist.
    pub fn resolve(&self, workspace: &Path, plugin_data: &Path) -> Result<FsGrant, GrantError> {
        self.validate()?;
        match self.path.as_str() {
            WORKSPACE => FsGrant::new(workspace, self.access),
            PLUGIN_DATA => {
                std::fs::create_dir_all(plugin_data).map_err(|source| {
                    GrantError::CreateDataFolder {
                        path: plugin_data.to_path_buf(),
                        source,
                    }
                })?;
                FsGrant::new(plugin_data, self.access)
            }
            other => FsGrant::new(Path::new(other), self.access),
        }
    }
}

/// Why `path` cannot be requested, if it cannot.
fn check_path(path: &str) -> Result<(), String> {
    if path == WORKSPACE || path == PLUGIN_DATA {
        return Ok(());
    }
    if path.starts_with('~') || path.starts_with("$HOME") {
        return Err(
            "the home folder cannot be granted; ask for `$WORKSPACE`, `$PLUGIN_DATA` (the plugin's own data folder) or a specific absolute folder".to_string(),
        );
    }
    if let Some(var) = path.strip_prefix('$') {
        return Err(format!(
            "`${var}` is not a known folder; use `$WORKSPACE`, `$PLUGIN_DATA` or an absolute path"
        ));
    }
    let as_path = Path::new(path);
    if !as_path.is_absolute() {
        return Err(
            "a relative path means something different wherever capstan runs; use `$WORKSPACE`, `$PLUGIN_DATA` or an absolute path".to_string(),
        );
    }
    if as_path
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err("the path must not contain `..`; write the folder it means".to_string());
    }
    if as_path.parent().is_none() {
        return Err(
            "the root of the file system cannot be granted; name the folder the plugin needs"
                .to_string(),
        );
    }
    Ok(())
}

impl FsGrant {
    /// Grants `path` (resolved now, symbolic links included) with `access`.
    /// The plugin sees the folder at its real absolute path, so paths a user
    /// or the model writes mean the same inside and outside the sandbox.
    pub fn new(path: &Path, access: Access) -> Result<Self, GrantError> {
        let host_path = path
            .canonicalize()
            .map_err(|source| GrantError::Unresolvable {
                path: path.to_path_buf(),
                source,
            })?;
        if !host_path.is_dir() {
            return Err(GrantError::NotAFolder {
                path: path.to_path_buf(),
            });
        }
        let guest_path = host_path
            .to_str()
            .ok_or_else(|| GrantError::NotUtf8 {
                path: path.to_path_buf(),
            })?
            .to_string();
        Ok(Self {
            host_path,
            guest_path,
            access,
        })
    }

    /// The folder on the host.
    pub fn host_path(&self) -> &Path {
        &self.host_path
    }

    /// The folder as the plugin sees it.
    pub fn guest_path(&self) -> &str {
        &self.guest_path
    }

    /// How it may be used.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Whether a host path lies inside this grant and the access suffices.
    /// The sandbox enforces this by construction; the check lets the host
    /// explain a decision before running anything.
    pub fn permits(&self, path: &Path, access: Access) -> bool {
        let inside = path.starts_with(&self.host_path);
        inside && (access == Access::Read || self.access == Access::ReadWrite)
    }

    /// Adds the folder to a WASI context as a preopen.
    pub fn apply(&self, wasi: &mut WasiCtxBuilder) -> Result<(), GrantError> {
        let perms = match self.access {
            Access::Read => FsPerms::ReadOnly,
            Access::ReadWrite => FsPerms::ReadWrite,
        };
        wasi.preopened_dir(&self.host_path, &self.guest_path, perms)
            .map(|_| ())
            .map_err(|e| GrantError::Preopen {
                path: self.host_path.clone(),
                reason: format!("{e:#}"),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(path: &str, access: Access) -> FsRequest {
        FsRequest {
            path: path.to_string(),
            access,
        }
    }

    #[test]
    fn requests_name_the_workspace_the_data_folder_or_an_absolute_path() {
        for path in [WORKSPACE, PLUGIN_DATA, "/srv/data", "/tmp"] {
            assert!(FsRequest::parse(path, Access::Read).is_ok(), "{path}");
        }
    }

    #[test]
    fn other_paths_are_refused_with_a_reason() {
        for (path, says) in [
            ("$HOME", "home folder"),
            ("$HOME/.ssh", "home folder"),
            ("~", "home folder"),
            ("~/notes", "home folder"),
            ("$TMPDIR", "not a known folder"),
            ("$workspace", "not a known folder"),
            ("data", "relative"),
            ("./data", "relative"),
            ("", "relative"),
            ("/srv/../etc", "`..`"),
            ("/", "root"),
        ] {
            let err = FsRequest::parse(path, Access::Read).unwrap_err();
            assert!(matches!(err, GrantError::InvalidRequest { .. }), "{path}");
            assert!(err.to_string().contains(says), "{path}: {err}");
        }
    }

    #[test]
    fn requests_resolve_to_folders() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).unwrap();
        let data = dir.path().join("plugins").join("weather").join("data");
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap();

        let ws = request(WORKSPACE, Access::Read)
            .resolve(&workspace, &data)
            .unwrap();
        assert_eq!(ws.host_path(), workspace.canonicalize().unwrap());
        assert_eq!(ws.access(), Access::Read);
        assert!(!data.exists());

        let own = request(PLUGIN_DATA, Access::ReadWrite)
            .resolve(&workspace, &data)
            .unwrap();
        assert!(data.is_dir());
        assert_eq!(own.host_path(), data.canonicalize().unwrap());
        assert_eq!(own.access(), Access::ReadWrite);

        let abs = request(other.to_str().unwrap(), Access::Read)
            .resolve(&workspace, &data)
            .unwrap();
        assert_eq!(abs.host_path(), other.canonicalize().unwrap());

        assert!(matches!(
            request("~/x", Access::Read).resolve(&workspace, &data),
            Err(GrantError::InvalidRequest { .. })
        ));
        assert!(matches!(
            request(dir.path().join("missing").to_str().unwrap(), Access::Read)
                .resolve(&workspace, &data),
            Err(GrantError::Unresolvable { .. })
        ));
    }

    #[test]
    fn a_data_folder_that_cannot_be_created_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let err = request(PLUGIN_DATA, Access::Read)
            .resolve(dir.path(), &file.join("data"))
            .unwrap_err();
        assert!(matches!(err, GrantError::CreateDataFolder { .. }), "{err}");
    }

    #[test]
    fn requests_are_within_wider_grants_only() {
        let ws_read = request(WORKSPACE, Access::Read);
        let ws_write = request(WORKSPACE, Access::ReadWrite);
        assert!(ws_read.is_within(&ws_write));
        assert!(ws_read.is_within(&ws_read));
        assert!(!ws_write.is_within(&ws_read));
        assert!(!ws_read.is_within(&request(PLUGIN_DATA, Access::ReadWrite)));
        let srv = request("/srv", Access::ReadWrite);
        assert!(request("/srv/data", Access::Read).is_within(&srv));
        assert!(!request("/srvdata", Access::Read).is_within(&srv));
        assert!(!srv.is_within(&request("/srv/data", Access::ReadWrite)));
    }

    #[test]
    fn requests_are_described_in_words() {
        assert_eq!(
            request(WORKSPACE, Access::Read).describe(),
            "the workspace (read-only)"
        );
        assert_eq!(
            request(PLUGIN_DATA, Access::ReadWrite).describe(),
            "its own data folder (read-write)"
        );
        assert_eq!(request("/srv", Access::Read).describe(), "/srv (read-only)");
    }

    #[test]
    fn grants_are_canonical_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let grant = FsGrant::new(&sub.join("..").join("sub"), Access::Read).unwrap();
        assert_eq!(grant.host_path(), sub.canonicalize().unwrap());
        assert!(grant.permits(&grant.host_path().join("a.txt"), Access::Read));
        assert!(!grant.permits(&grant.host_path().join("a.txt"), Access::ReadWrite));
        assert!(!grant.permits(dir.path(), Access::Read));
    }

    #[test]
    fn missing_folders_and_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            FsGrant::new(&dir.path().join("nope"), Access::Read),
            Err(GrantError::Unresolvable { .. })
        ));
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        assert!(matches!(
            FsGrant::new(&file, Access::Read),
            Err(GrantError::NotAFolder { .. })
        ));
    }
}
