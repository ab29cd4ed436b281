//! Every file or folder a plugin opens is recorded in the audit log: the
//! path, the mode, and whether the sandbox allowed it.
//!
//! Opens go through one WASI function, `[method]descriptor.open-at` of
//! `wasi:filesystem/types`. The linker's definition from wasmtime-wasi is
//! replaced by one that runs wasmtime-wasi's own implementation — so the
//! sandbox's checks are exactly the same — and then records the outcome
//! through the call's [`AuditScope`](crate::policy::audit::AuditScope).
//! Calls without an audit log pay one `Option` check.
//!
//! The recorded path is the one the plugin passed, relative to the folder
//! descriptor it opened from. Plugins built on wasi-libc (Rust's `std::fs`
//! included) open every path from the granted folder itself, so for them it
//! is the path relative to the granted folder.

use std::future::Future;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::WasiFilesystemView;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, Descriptor, DescriptorFlags, ErrorCode, HostDescriptor, OpenFlags, PathFlags,
};

use super::call::CallState;
use crate::policy::audit::AuditEvent;

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
        let named = state.audit.is_some().then(|| path.clone());
        let mut view = state.filesystem();
        let opened = match HostDescriptor::open_at(
            &mut view, dir, path_flags, path, open_flags, flags,
        )
        .await
        {
            Ok(descriptor) => Ok(descriptor),
            // A trap (a bad handle) stays a trap; an error code goes back
            // to the plugin.
            Err(err) => Err(types::Host::convert_error_code(&mut view, err)?),
        };
        if let (Some(path), Some(scope)) = (named, &state.audit) {
            scope.record(AuditEvent::FileOpened {
                path,
                mode: mode(open_flags, flags),
                allowed: !matches!(&opened, Err(code) if is_refusal(code)),
            });
        }
        Ok((opened,))
    })
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
    use super::*;

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
