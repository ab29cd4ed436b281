//! File-system grants: which folders a plugin can see, read-only or
//! read-write.
//!
//! A granted folder becomes a WASI preopen and nothing else exists for the
//! plugin. Paths are resolved and canonicalised when the grant is made, and
//! wasmtime-wasi resolves every guest path beneath the preopen with cap-std,
//! so neither `..` nor a symbolic link can lead outside it. A read-only grant
//! is enforced by the preopen's permissions, whatever the plugin attempts.

use std::path::{Path, PathBuf};

use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

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
/// plugin's own data folder) or an absolute path.
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
