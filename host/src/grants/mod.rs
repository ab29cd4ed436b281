//! Capabilities a plugin may be granted, one module per kind.
//!
//! Each module owns its piece of the story: how the grant is written, how a
//! request is checked against it, and how it is wired into the sandbox. At
//! this stage only file-system grants exist; a plugin gets no environment
//! variables, no network and no sockets.

pub mod fs;

use wasmtime_wasi::WasiCtxBuilder;

pub use fs::{Access, FsGrant, GrantError};

/// Everything one call is granted.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    /// Folders the call can see, each read-only or read-write.
    pub fs: Vec<FsGrant>,
    /// The folder that counts as the workspace, if any: its guest path is
    /// passed to the plugin in the call context.
    pub workspace: Option<FsGrant>,
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
            fs: Vec::new(),
            workspace: Some(FsGrant::new(dir, access)?),
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

    /// Wires every grant into a WASI context under construction.
    pub fn apply(&self, wasi: &mut WasiCtxBuilder) -> Result<(), GrantError> {
        for grant in self.workspace.iter().chain(&self.fs) {
            grant.apply(wasi)?;
        }
        Ok(())
    }
}
