//! Every file or folder a plugin opens is recorded in the audit log: the
//! path, the mode, and whether the sandbox allowed it.
//!
//! Opens go through one WASI function, `[method]descriptor.open-at` of
//! `wasi:filesystem/types`. The linker's definition from wasmtime-wasi is
//! replaced by one that runs wasmtime-wasi's own implementation — so the
//! sandbox's checks are exactly the same — and then records the outcome
//! through the call's [`AuditScope`](crate::audit::AuditScope).
//! Calls without an audit log pay one `Option` check.
//!
//! Before the open, the path is looked at (a stat through wasmtime-wasi,
//! beneath the same folder): what [`crate::grants::fs::openable`] refuses
//! — a named pipe, a device — is never opened, since the open could block
//! the thread serving the call past any deadline. The plugin gets
//! `unsupported`.
//!
//! The recorded path is relative to the granted folder it lies in. Plugins
//! built on wasi-libc (Rust's `std::fs` included) open every path from the
//! granted folder itself, and the path they pass is recorded as it is. A
//! plugin can also open a path from a folder it opened earlier; then the
//! folder's own place under its grant is found (on Linux, from the open
//! folder handles) and put in front. Where that cannot be found, the path is
//! recorded as passed, prefixed with `?/`.

use std::future::Future;
use std::sync::Arc;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::filesystem::{WasiFilesystemCtxView, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::preopens;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, Descriptor, DescriptorFlags, ErrorCode, HostDescriptor, OpenFlags, PathFlags,
};

use super::state::CallState;
use crate::audit::AuditEvent;

/// The interface as wasmtime-wasi 48 defines it in the linker; components
/// importing any 0.2.x version are linked to it.
const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

/// The function every file and folder open goes through.
const OPEN_AT: &str = "[method]descriptor.open-at";

/// Replaces wasmtime-wasi's `open-at` (already in `linker`) with the
/// recording one.
pub(super) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let defined = linker
        .instance(FILESYSTEM_TYPES)
        .and_then(|mut types| types.func_wrap_async(OPEN_AT, open_at));
    linker.allow_shadowing(false);
    defined
}

type OpenAtParams = (
    Resource<Descriptor>,
    PathFlags,
    String,
    OpenFlags,
    DescriptorFlags,
);
type OpenAtResult = (Result<Resource<Descriptor>, ErrorCode>,);

fn open_at(
    mut store: StoreContextMut<'_, CallState>,
    (dir, path_flags, path, open_flags, flags): OpenAtParams,
) -> Box<dyn Future<Output = wasmtime::Result<OpenAtResult>> + Send + '_> {
    Box::new(async move {
        let state = store.data_mut();
        let changes = flags.contains(DescriptorFlags::WRITE)
            || open_flags.intersects(OpenFlags::CREATE | OpenFlags::TRUNCATE);
        if changes
            && let Some(code) =
                super::fs_protect::refusal(state, &dir, &path, mode_verb(open_flags))
        {
            return Ok((Err(code),));
        }
        let audited = state.audit.is_some();
        let mut view = state.filesystem();
        let named = audited.then(|| match folder_under_grant(&mut view, &dir) {
            Some(folder) if folder.is_empty() => path.clone(),
            Some(folder) => format!("{folder}/{path}"),
            None => format!("?/{path}"),
        });
        let looked_at = HostDescriptor::stat_at(
            &mut view,
            Resource::new_borrow(dir.rep()),
            path_flags,
            path.clone(),
        )
        .await;
        let refused = match looked_at {
            Ok(stat) => crate::grants::fs::openable(stat.type_).is_err(),
            // Missing (to be created) or unreachable: the open decides.
            Err(_) => false,
        };
        let opened = if refused {
            Err(ErrorCode::Unsupported)
        } else {
            match HostDescriptor::open_at(&mut view, dir, path_flags, path, open_flags, flags).await
            {
                Ok(descriptor) => Ok(descriptor),
                // A trap (a bad handle) stays a trap; an error code goes
                // back to the plugin.
                Err(err) => Err(types::Host::convert_error_code(&mut view, err)?),
            }
        };
        if let (Some(path), Some(scope)) = (named, &state.audit) {
            scope.record(AuditEvent::FileOpened {
                path,
                mode: mode(open_flags, flags),
                allowed: !refused && !matches!(&opened, Err(code) if is_refusal(code)),
            });
        }
        Ok((opened,))
    })
}

/// Where the folder `dir` lies under the granted folder containing it:
/// `""` for a granted folder itself, `sub/dir` for one opened beneath it,
/// `None` when that cannot be told.
fn folder_under_grant(
    view: &mut WasiFilesystemCtxView<'_>,
    dir: &Resource<Descriptor>,
) -> Option<String> {
    let Ok(Descriptor::Dir(base)) = view.table.get(dir) else {
        return None;
    };
    let base = base.dir.clone();
    // The granted folders, listed into a scratch table so the plugin's own
    // table is untouched.
    let mut scratch = ResourceTable::new();
    let mut granted = WasiFilesystemCtxView {
        ctx: &mut *view.ctx,
        table: &mut scratch,
    };
    let roots = preopens::Host::get_directories(&mut granted).ok()?;
    let mut folders = Vec::with_capacity(roots.len());
    for (root, _) in roots {
        if let Ok(Descriptor::Dir(root)) = scratch.get(&root) {
            if Arc::ptr_eq(&root.dir, &base) {
                return Some(String::new());
            }
            folders.push(root.dir.clone());
        }
    }
    place_under(&base, &folders)
}

/// The path of the open folder `base` under whichever of `roots` holds it,
/// from the operating system's record of open handles.
#[cfg(target_os = "linux")]
fn place_under(base: &std::fs::File, roots: &[Arc<std::fs::File>]) -> Option<String> {
    use std::os::fd::AsRawFd;
    let location = |file: &std::fs::File| {
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
    };
    let base = location(base)?;
    roots.iter().find_map(|root| {
        let root = location(root)?;
        let below = base.strip_prefix(&root).ok()?;
        below.to_str().map(str::to_string)
    })
}

#[cfg(not(target_os = "linux"))]
fn place_under(_base: &std::fs::File, _roots: &[Arc<std::fs::File>]) -> Option<String> {
    None
}

/// What an open that changes a file does, in words.
fn mode_verb(open_flags: OpenFlags) -> &'static str {
    if open_flags.contains(OpenFlags::CREATE) {
        "create"
    } else {
        "write"
    }
}

/// Whether an open failed because the sandbox refused it (a write under a
/// read-only grant, a path leading outside the granted folder), rather than
/// for a reason of the file system (no such file).
fn is_refusal(code: &ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::NotPermitted | ErrorCode::Access | ErrorCode::ReadOnly
    )
}

/// The mode of an open in words: `read`, `write`, `create`, `truncate`,
/// `directory`, joined with `+` (`write+create+truncate`); `path` for an
/// open that neither reads nor writes (to look at its metadata).
fn mode(open_flags: OpenFlags, flags: DescriptorFlags) -> String {
    let words = [
        (flags.contains(DescriptorFlags::READ), "read"),
        (
            flags.intersects(DescriptorFlags::WRITE | DescriptorFlags::MUTATE_DIRECTORY),
            "write",
        ),
        (
            open_flags.intersects(OpenFlags::CREATE | OpenFlags::EXCLUSIVE),
            "create",
        ),
        (open_flags.contains(OpenFlags::TRUNCATE), "truncate"),
        (open_flags.contains(OpenFlags::DIRECTORY), "directory"),
    ];
    let mode: Vec<&str> = words
        .into_iter()
        .filter_map(|(on, word)| on.then_some(word))
        .collect();
    if mode.is_empty() {
        "path".to_string()
    } else {
        mode.join("+")
    }
}

#[cfg(test)]
mod tests {
    use wasmtime_wasi::WasiCtxBuilder;
    use wasmtime_wasi::filesystem::FsPerms;

    use super::*;

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn folders_opened_under_a_grant_are_placed_under_it() {
        let granted = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(granted.path().join("sub/deeper")).unwrap();
        let mut ctx = WasiCtxBuilder::new()
            .preopened_dir(granted.path(), "/ws", FsPerms::ReadWrite)
            .unwrap()
            .build();
        let mut table = ResourceTable::new();
        let mut view = WasiFilesystemCtxView {
            ctx: ctx.filesystem(),
            table: &mut table,
        };
        let roots = preopens::Host::get_directories(&mut view).unwrap();
        let root = Resource::<Descriptor>::new_borrow(roots[0].0.rep());
        assert_eq!(folder_under_grant(&mut view, &root).as_deref(), Some(""));
        let root = Resource::<Descriptor>::new_borrow(roots[0].0.rep());
        let sub = HostDescriptor::open_at(
            &mut view,
            root,
            PathFlags::empty(),
            "sub/deeper".into(),
            OpenFlags::DIRECTORY,
            DescriptorFlags::READ,
        )
        .await
        .unwrap();
        assert_eq!(
            folder_under_grant(&mut view, &sub).as_deref(),
            Some("sub/deeper")
        );
    }

    #[test]
    fn modes_are_named_in_words() {
        assert_eq!(mode(OpenFlags::empty(), DescriptorFlags::READ), "read");
        assert_eq!(
            mode(
                OpenFlags::CREATE | OpenFlags::EXCLUSIVE,
                DescriptorFlags::WRITE
            ),
            "write+create"
        );
        assert_eq!(
            mode(
                OpenFlags::CREATE | OpenFlags::TRUNCATE,
                DescriptorFlags::READ | DescriptorFlags::WRITE
            ),
            "read+write+create+truncate"
        );
        assert_eq!(
            mode(OpenFlags::DIRECTORY, DescriptorFlags::READ),
            "read+directory"
        );
        assert_eq!(mode(OpenFlags::empty(), DescriptorFlags::empty()), "path");
    }
}
