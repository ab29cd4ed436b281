//! Capabilities a plugin may be granted, one module per kind.
//!
//! Each module owns its piece of the story: how the grant is written in a
//! manifest, how a request is checked against it, how it is wired into the
//! sandbox, and what it writes to the audit log:
//!
//! - [`fs`]: folders, read-only or read-write (WASI preopens);
//! - [`net`]: `scheme://host[:port]` patterns, checked on every outgoing
//!   `wasi:http` request; sockets are always off;
//! - [`env`]: environment variables by name, nothing else;
//! - [`secrets`]: values the host adds to requests as headers, which the
//!   plugin never sees.
//!
//! [`Capabilities`] is what a manifest requests and what the lockfile
//! records as granted; [`Grants`] is what one call actually gets.

pub mod env;
pub mod fs;
pub mod net;
pub mod secrets;

use std::sync::{Arc, OnceLock};

use wasmtime_wasi::filesystem::WasiFilesystemCtx;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder};

pub use env::EnvGrant;
pub use fs::{Access, FsGrant, FsRequest, GrantError};
pub use net::NetGrant;
pub use secrets::{ResolvedSecret, SecretGrant};

/// What a plugin requests in its manifest's `[capabilities]`, or what the
/// user granted it (as recorded in the lockfile).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    /// Folders, read or read-write.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fs: Vec<FsRequest>,
    /// Hosts it may send HTTP requests to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub net: Vec<NetGrant>,
    /// Environment variables it may read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvGrant>,
    /// Secrets the host adds to its requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<SecretGrant>,
}

/// Everything one call is granted.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    /// Folders the call can see, each read-only or read-write.
    pub fs: Vec<FsGrant>,
    /// The folder that counts as the workspace, if any: its guest path is
    /// passed to the plugin in the call context.
    pub workspace: Option<FsGrant>,
    /// Where outgoing HTTP requests may go; nowhere by default.
    pub net: Vec<NetGrant>,
    /// Environment variables the plugin sees, by name; values are read
    /// from the host's environment at call time.
    pub env: Vec<EnvGrant>,
    /// Secrets added as headers to requests to their hosts.
    pub secrets: Vec<ResolvedSecret>,
    opened: OpenedFolders,
}

/// The granted folders, opened once and shared by every call made with
/// these grants (and their clones): a preopen is a handle to a folder, and
/// each call's instance gets its own reference to it, so opening the folder
/// again per call would only cost time.
#[derive(Clone, Default)]
struct OpenedFolders(Arc<OnceLock<(bool, WasiFilesystemCtx)>>);

impl std::fmt::Debug for OpenedFolders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let opened = self.0.get().is_some();
        f.debug_struct("OpenedFolders")
            .field("opened", &opened)
            .finish()
    }
}

impl Grants {
    /// Grants access to `workspace` only, writable or not.
    pub fn workspace(dir: &std::path::Path, writable: bool) -> Result<Self, GrantError> {
        let access = if writable {
            Access::ReadWrite
        } else {
            Access::Read
        };
        Ok(Self {
            workspace: Some(FsGrant::new(dir, access)?),
            ..Self::default()
        })
    }

    /// No access to anything.
    pub fn none() -> Self {
        Self::default()
    }

    /// The workspace path as the plugin sees it.
    pub fn workspace_guest_path(&self) -> Option<&str> {
        self.workspace.as_ref().map(FsGrant::guest_path)
    }

    /// Wires every grant into a fresh WASI context. `blocking_file_io` says
    /// whether file operations may be served on the calling thread.
    pub fn apply(&self, wasi: &mut WasiCtx, blocking_file_io: bool) -> Result<(), GrantError> {
        *wasi.filesystem() = match self.opened.0.get() {
            Some((mode, folders)) if *mode == blocking_file_io => folders.clone(),
            _ => {
                let folders = self.open_folders(blocking_file_io)?;
                // The first mode asked for is kept; calls in another mode
                // (only benchmarks switch) open their folders each time.
                let _ = self.opened.0.set((blocking_file_io, folders.clone()));
                folders
            }
        };
        Ok(())
    }

    fn open_folders(&self, blocking_file_io: bool) -> Result<WasiFilesystemCtx, GrantError> {
        let mut builder = WasiCtxBuilder::new();
        builder.allow_blocking_current_thread(blocking_file_io);
        for grant in self.workspace.iter().chain(&self.fs) {
            grant.apply(&mut builder)?;
        }
        Ok(builder.build().filesystem().clone())
    }
}
