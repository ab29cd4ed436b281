//! Name lookups through `wasi:sockets/ip-name-lookup`: always refused, and
//! every attempt recorded.
//!
//! A plugin never resolves names itself: its HTTP requests are resolved and
//! vetted by the host ([`super::send`]). wasmtime-wasi refuses lookups when
//! they are not allowed, but silently; the linker's `resolve-addresses` is
//! replaced here by one that records the name in the call's audit log
//! (`name_lookup_refused`) and answers `access-denied`.

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::ResolveAddressStream;
use wasmtime_wasi::p2::bindings::sockets::network::{ErrorCode, Network};

use crate::audit::{AuditEvent, AuditScope};

/// The interface as wasmtime-wasi 48 defines it in the linker; components
/// importing any 0.2.x version are linked to it.
const IP_NAME_LOOKUP: &str = "wasi:sockets/ip-name-lookup@0.2.12";

/// The one function of the interface that starts a lookup.
const RESOLVE_ADDRESSES: &str = "resolve-addresses";

/// The longest name recorded; a longer one is cut (a plugin chooses it).
const MAX_RECORDED_NAME: usize = 255;

/// Replaces wasmtime-wasi's `resolve-addresses` (already in `linker`) with
/// the refusing, recording one. `audit` gives a store's audit scope; it is
/// called once per attempt, so the store's owner can also note that the
/// guest reached the host.
pub(crate) fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    audit: fn(&mut T) -> Option<&AuditScope>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let defined = linker.instance(IP_NAME_LOOKUP).and_then(|mut lookup| {
        lookup.func_wrap(RESOLVE_ADDRESSES, move |store, args| {
            refuse_lookup(store, args, audit)
        })
    });
    linker.allow_shadowing(false);
    defined
}

type LookupResult = (Result<Resource<ResolveAddressStream>, ErrorCode>,);

fn refuse_lookup<T>(
    mut store: StoreContextMut<'_, T>,
    (_network, name): (Resource<Network>, String),
    audit: fn(&mut T) -> Option<&AuditScope>,
) -> wasmtime::Result<LookupResult> {
    if let Some(scope) = audit(store.data_mut()) {
        scope.record(AuditEvent::NameLookupRefused {
            name: recorded_name(name),
        });
    }
    Ok((Err(ErrorCode::AccessDenied),))
}

/// `name`, cut to [`MAX_RECORDED_NAME`] bytes.
fn recorded_name(mut name: String) -> String {
    if name.len() > MAX_RECORDED_NAME {
        let mut end = MAX_RECORDED_NAME;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
        name.push('…');
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut_on_a_character_boundary() {
        assert_eq!(recorded_name("example.com".into()), "example.com");
        let long = "é".repeat(200);
        let cut = recorded_name(long);
        assert!(cut.len() <= MAX_RECORDED_NAME + '…'.len_utf8());
        assert!(cut.ends_with('…'));
    }
}
