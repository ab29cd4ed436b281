//! Planted code stays inert: under a write grant, a component cannot
//! write, create, rename, link or delete the paths that make code run later
//! outside every sandbox ([`crate::grants::fs::PROTECTED`]: `.git`,
//! `.vscode`, `.envrc`, ...), at the top of any folder granted read-write.
//!
//! wasmtime-wasi's functions that change a folder's content are replaced
//! in the linker by ones that first find where the path really lands —
//! from the folder handle the plugin passed (on Linux, through the
//! operating system's record of open handles) and the path, `..` and
//! symbolic links resolved — and refuse with `read-only` when it lands in a
//! protected path; otherwise they run wasmtime-wasi's own implementation.
//! Opening a file for writing, creating or truncating goes through
//! [`super::fs_audit`]'s `open-at`, which asks [`refusal`] first.
//!
//! A refusal is recorded in the audit log and reported to the user as a
//! warning naming the path and what to do instead (the git plugin commits;
//! other changes there are the user's to make).

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::FsPerms;
use wasmtime_wasi::filesystem::{WasiFilesystemCtxView, WasiFilesystemView};
use wasmtime_wasi::p2::FsResult;
use wasmtime_wasi::p2::bindings::filesystem::preopens;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, Descriptor, ErrorCode, HostDescriptor, PathFlags,
};

use super::events::{LogLevel, PluginEvent};
use super::state::CallState;
use crate::audit::AuditEvent;

/// The interface as wasmtime-wasi 48 defines it in the linker.
const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

type FsOutcome = wasmtime::Result<(Result<(), ErrorCode>,)>;
type Boxed<'a> = Box<dyn Future<Output = FsOutcome> + Send + 'a>;

/// Replaces wasmtime-wasi's functions that change a folder (already in
/// `linker`) with ones that refuse protected paths.
pub(super) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let defined = define(linker);
    linker.allow_shadowing(false);
    defined
}

fn define(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    let mut types = linker.instance(FILESYSTEM_TYPES)?;
    types.func_wrap_async(
        "[method]descriptor.create-directory-at",
        create_directory_at,
    )?;
    types.func_wrap_async(
        "[method]descriptor.remove-directory-at",
        remove_directory_at,
    )?;
    types.func_wrap_async("[method]descriptor.unlink-file-at", unlink_file_at)?;
    types.func_wrap_async("[method]descriptor.symlink-at", symlink_at)?;
    types.func_wrap_async("[method]descriptor.rename-at", rename_at)?;
    types.func_wrap_async("[method]descriptor.link-at", link_at)?;
    Ok(())
}

fn create_directory_at(
    mut store: StoreContextMut<'_, CallState>,
    (dir, path): (Resource<Descriptor>, String),
) -> Boxed<'_> {
    Box::new(async move {
        let state = store.data_mut();
        if let Some(code) = refusal(state, &dir, &path, "create the folder") {
            return Ok((Err(code),));
        }
        let mut view = state.filesystem();
        let done = HostDescriptor::create_directory_at(&mut view, dir, path).await;
        finish(&mut view, done)
    })
}

fn remove_directory_at(
    mut store: StoreContextMut<'_, CallState>,
    (dir, path): (Resource<Descriptor>, String),
) -> Boxed<'_> {
    Box::new(async move {
        let state = store.data_mut();
        if let Some(code) = refusal(state, &dir, &path, "remove the folder") {
            return Ok((Err(code),));
        }
        let mut view = state.filesystem();
        let done = HostDescriptor::remove_directory_at(&mut view, dir, path).await;
        finish(&mut view, done)
    })
}

fn unlink_file_at(
    mut store: StoreContextMut<'_, CallState>,
    (dir, path): (Resource<Descriptor>, String),
) -> Boxed<'_> {
    Box::new(async move {
        let state = store.data_mut();
        if let Some(code) = refusal(state, &dir, &path, "delete") {
            return Ok((Err(code),));
        }
        let mut view = state.filesystem();
        let done = HostDescriptor::unlink_file_at(&mut view, dir, path).await;
        finish(&mut view, done)
    })
}

fn symlink_at(
    mut store: StoreContextMut<'_, CallState>,
    (dir, target, link): (Resource<Descriptor>, String, String),
) -> Boxed<'_> {
    Box::new(async move {
        let state = store.data_mut();
        if let Some(code) = refusal(state, &dir, &link, "create a link at") {
            return Ok((Err(code),));
        }
        let mut view = state.filesystem();
        let done = HostDescriptor::symlink_at(&mut view, dir, target, link).await;
        finish(&mut view, done)
    })
}

fn rename_at(
    mut store: StoreContextMut<'_, CallState>,
    (from_dir, from, to_dir, to): (Resource<Descriptor>, String, Resource<Descriptor>, String),
) -> Boxed<'_> {
    Box::new(async move {
        let state = store.data_mut();
        if let Some(code) = refusal(state, &from_dir, &from, "rename")
            .or_else(|| refusal(state, &to_dir, &to, "rename to"))
        {
            return Ok((Err(code),));
        }
        let mut view = state.filesystem();
        let done = HostDescriptor::rename_at(&mut view, from_dir, from, to_dir, to).await;
        finish(&mut view, done)
    })
}

type LinkAtParams = (
    Resource<Descriptor>,
    PathFlags,
    String,
    Resource<Descriptor>,
    String,
);

fn link_at(
    mut store: StoreContextMut<'_, CallState>,
    (from_dir, flags, from, to_dir, to): LinkAtParams,
) -> Boxed<'_> {
    Box::new(async move {
        // A hard link to a protected file would make it writable under
        // another name; a link into a protected folder plants.
        let state = store.data_mut();
        if let Some(code) = refusal(state, &from_dir, &from, "link")
            .or_else(|| refusal(state, &to_dir, &to, "link to"))
        {
            return Ok((Err(code),));
        }
        let mut view = state.filesystem();
        let done = HostDescriptor::link_at(&mut view, from_dir, flags, from, to_dir, to).await;
        finish(&mut view, done)
    })
}

/// wasmtime-wasi's outcome as the plugin gets it: an error code, or a trap
/// for a bad handle.
fn finish(view: &mut WasiFilesystemCtxView<'_>, done: FsResult<()>) -> FsOutcome {
    match done {
        Ok(()) => Ok((Ok(()),)),
        Err(err) => Ok((Err(types::Host::convert_error_code(view, err)?),)),
    }
}

/// Whether changing `path` beneath the folder `dir` is refused because it
/// lands in a protected path: if so, the refusal is recorded and reported,
/// and the error code for the plugin comes back. `what` says what the
/// plugin tried ("delete", "write").
pub(super) fn refusal(
    state: &mut CallState,
    dir: &Resource<Descriptor>,
    path: &str,
    what: &str,
) -> Option<ErrorCode> {
    let mut view = state.filesystem();
    let roots = writable_roots(&mut view);
    if roots.is_empty() {
        // Nothing is writable: wasmtime-wasi refuses every change itself.
        return None;
    }
    let Some(base) = folder_location(&mut view, dir) else {
        // Where the folder is cannot be told: refuse rather than guess.
        return Some(ErrorCode::Access);
    };
    let (name, _) = crate::grants::fs::protected_path(&base.join(path), &roots)?;
    let shown = base.join(path).display().to_string();
    if let Some(scope) = &state.audit {
        scope.record(AuditEvent::FileOpened {
            path: shown.clone(),
            mode: format!("{what} (refused: {name} stays read-only)"),
            allowed: false,
        });
    }
    if let Some(sink) = &state.events {
        sink(
            &state.plugin,
            PluginEvent::Log {
                level: LogLevel::Warn,
                message: format!(
                    "refused to {what} {shown}: capstan keeps {name} read-only for plugins even under a write grant, since files there can run code later outside the sandbox; commit with the git plugin's tools, and make other changes there yourself"
                ),
            },
        );
    }
    Some(ErrorCode::ReadOnly)
}

/// The real paths of the granted folders the plugin may write.
fn writable_roots(view: &mut WasiFilesystemCtxView<'_>) -> Vec<PathBuf> {
    let mut scratch = ResourceTable::new();
    let mut granted = WasiFilesystemCtxView {
        ctx: &mut *view.ctx,
        table: &mut scratch,
    };
    let Ok(roots) = preopens::Host::get_directories(&mut granted) else {
        return Vec::new();
    };
    roots
        .into_iter()
        .filter_map(|(root, _)| match scratch.get(&root) {
            Ok(Descriptor::Dir(dir)) if dir.perms == FsPerms::ReadWrite => location(&dir.dir),
            _ => None,
        })
        .collect()
}

/// Where the folder handle `dir` is on the host.
fn folder_location(
    view: &mut WasiFilesystemCtxView<'_>,
    dir: &Resource<Descriptor>,
) -> Option<PathBuf> {
    match view.table.get(dir) {
        Ok(Descriptor::Dir(base)) => location(&base.dir),
        _ => None,
    }
}

/// Where an open file or folder is, from the operating system's record of
/// open handles.
#[cfg(target_os = "linux")]
fn location(file: &Arc<std::fs::File>) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

#[cfg(not(target_os = "linux"))]
fn location(_file: &Arc<std::fs::File>) -> Option<PathBuf> {
    None
}
