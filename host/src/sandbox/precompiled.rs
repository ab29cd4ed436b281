//! Built-in plugins' compiled code, shipped inside the `capstan` binary.
//!
//! The build script compiles each built-in plugin with wasmtime, with the
//! very configuration the runtime engine uses ([`super::engine_config`]),
//! and embeds the artifact page-aligned. On x86_64 Linux the artifact sits
//! in the binary's executable text, so wasmtime runs it in place
//! ([`Component::deserialize_raw`]): no file is read, nothing is copied,
//! and the pages are the binary's own, shared with every other capstan
//! process. The engine's code memory ([`TextCodeMemory`]) knows these
//! ranges are already readable and executable and leaves them alone.
//! Elsewhere wasmtime copies the embedded bytes into memory of its own.
//!
//! Wasmtime registers every loaded code range once in a process-wide map,
//! so a component running in place is made once per process: the first
//! engine to load a built-in gets it and keeps it; any other engine (tests
//! make several) gets a copy of the same bytes.
//!
//! An artifact compiled for CPU features the running machine lacks is
//! refused by wasmtime's compatibility check; the caller then compiles the
//! plugin from its embedded component as for any other plugin.

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
use std::sync::Mutex;

use wasmtime::Engine;
use wasmtime::component::Component;

use crate::sandbox::builtin::BuiltinPlugin;

/// The built-in components running in place, each with the one engine it
/// was loaded into.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
static IN_PLACE: Mutex<Vec<(&'static str, Engine, Component)>> = Mutex::new(Vec::new());

/// The compiled form of built-in `plugin` for `engine`, from the binary; or
/// why it cannot be used on this machine (the caller compiles it instead).
pub fn load(engine: &Engine, plugin: &'static BuiltinPlugin) -> Result<Component, String> {
    if plugin.precompiled.is_empty() {
        return Err("this build of capstan carries no precompiled code for it".into());
    }
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        let mut in_place = IN_PLACE.lock().unwrap_or_else(|p| p.into_inner());
        match in_place.iter().find(|(name, ..)| *name == plugin.name) {
            Some((_, owner, component)) if Engine::same(owner, engine) => {
                return Ok(component.clone());
            }
            Some(_) => {}
            None => {
                // SAFETY: `deserialize_raw` requires bytes made by
                // `Engine::precompile_component` for a compatible engine,
                // which stay valid and unchanged for as long as the
                // component lives, and code pages made executable by the
                // engine's code memory. These bytes were made by the build
                // script's `precompile_component` with this engine's own
                // configuration (`engine_config.rs`, compiled into both);
                // they are a `'static` in the binary's read-only,
                // executable text, which nothing writes; and this engine's
                // code memory is `TextCodeMemory`, for which they are
                // already executable. wasmtime checks the artifact's
                // header, settings and the host's CPU features first and
                // returns an error (not undefined behaviour) on a mismatch,
                // as it does for an engine without this code memory (then
                // the copy below is used). The lock held here makes it the
                // only in-place load of this range in the process, as
                // wasmtime's code registry requires.
                #[allow(unsafe_code)]
                let in_binary = unsafe {
                    Component::deserialize_raw(engine, std::ptr::NonNull::from(plugin.precompiled))
                };
                if let Ok(component) = in_binary {
                    in_place.push((plugin.name, engine.clone(), component.clone()));
                    return Ok(component);
                }
            }
        }
    }
    copied(engine, plugin)
}

/// The compiled form of built-in `plugin`, copied by wasmtime from the
/// binary into memory of the engine's own.
fn copied(engine: &Engine, plugin: &'static BuiltinPlugin) -> Result<Component, String> {
    // SAFETY: `deserialize` requires bytes made by `Component::serialize`
    // or `Engine::precompile_component` for a compatible engine: these were
    // made by the build script's `precompile_component` with the runtime
    // engine's configuration (`engine_config.rs`), and are a `'static` of
    // the binary, which nothing writes. wasmtime checks the header,
    // settings and CPU features and returns an error on a mismatch.
    #[allow(unsafe_code)]
    let component = unsafe { Component::deserialize(engine, plugin.precompiled) };
    component.map_err(|e| format!("{e:#}"))
}

/// Whether `ptr..ptr+len` lies within one built-in plugin's embedded
/// artifact.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn is_embedded(ptr: *const u8, len: usize) -> bool {
    let (start, end) = (ptr as usize, (ptr as usize).saturating_add(len));
    crate::sandbox::builtin::BUILTIN_PLUGINS.iter().any(|p| {
        let from = p.precompiled.as_ptr() as usize;
        from <= start && end <= from + p.precompiled.len()
    })
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub use text_code::TextCodeMemory;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod text_code {
    use std::sync::Arc;

    use wasmtime::CustomCodeMemory;

    /// The engine's code memory: code within the binary's embedded
    /// artifacts is already readable and executable and left as it is;
    /// any other code (compiled now, or mapped from the compile cache) is
    /// switched between read-write and read-execute with `mprotect`, as
    /// wasmtime does itself. x86_64 keeps instruction caches coherent, so
    /// no flush is needed.
    #[derive(Debug)]
    pub struct TextCodeMemory;

    /// Page size of x86_64 Linux.
    const PAGE: usize = 4096;

    impl TextCodeMemory {
        /// The code memory to configure an engine with.
        pub fn shared() -> Arc<dyn CustomCodeMemory> {
            Arc::new(Self)
        }

        fn protect(ptr: *const u8, len: usize, prot: libc::c_int) -> wasmtime::Result<()> {
            if len == 0 || super::is_embedded(ptr, len) {
                return Ok(());
            }
            // SAFETY: wasmtime passes a page-aligned range of a mapping it
            // owns (its code memory, see `CustomCodeMemory`), with no code
            // of it running while it is made writable; changing that range's
            // protection touches nothing else.
            #[allow(unsafe_code)]
            let done = unsafe { libc::mprotect(ptr.cast_mut().cast(), len, prot) };
            if done == 0 {
                Ok(())
            } else {
                Err(wasmtime::Error::msg(format!(
                    "cannot change the protection of compiled code: {}",
                    std::io::Error::last_os_error()
                )))
            }
        }
    }

    impl CustomCodeMemory for TextCodeMemory {
        fn required_alignment(&self) -> usize {
            PAGE
        }

        fn publish_executable(&self, ptr: *const u8, len: usize) -> wasmtime::Result<()> {
            Self::protect(ptr, len, libc::PROT_READ | libc::PROT_EXEC)
        }

        fn unpublish_executable(&self, ptr: *const u8, len: usize) -> wasmtime::Result<()> {
            Self::protect(ptr, len, libc::PROT_READ | libc::PROT_WRITE)
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::grants::{Grants, OwnFolders};
    use crate::sandbox::builtin::BUILTIN_PLUGINS;
    use crate::sandbox::{CacheOutcome, CallOptions, Sandbox};

    /// Every built-in loads from the binary, in the first engine of the
    /// process to ask and in any other (tests make several), runs, is
    /// parked and linked again, and leaves the compile cache empty.
    #[tokio::test]
    async fn builtins_load_from_the_binary_in_every_engine_and_write_no_cache() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.txt"), "read from the binary's code\n").unwrap();
        let options = CallOptions {
            grants: Grants::workspace(dir.path(), false, &OwnFolders::default()).unwrap(),
            ..CallOptions::default()
        };
        for round in 0..2 {
            let home = crate::home::Home::at(
                dir.path().join(format!("home{round}")),
                dir.path().join(format!("cache{round}")),
            );
            let sandbox = Sandbox::new(&home).unwrap();
            for plugin in BUILTIN_PLUGINS {
                // Twice in one engine: the second shares the first's code.
                for _ in 0..2 {
                    let loaded = sandbox.load_builtin(plugin).unwrap();
                    assert_eq!(loaded.cache_outcome(), CacheOutcome::Precompiled);
                    assert_eq!(loaded.precompiled_fallback(), None);
                    let tools = sandbox.describe(&loaded).await.unwrap();
                    assert!(!tools.is_empty(), "{}", plugin.name);
                }
            }
            let fs = sandbox
                .load_builtin(crate::sandbox::builtin::find("fs").unwrap())
                .unwrap();
            let output = sandbox
                .call_tool(&fs, "read", r#"{"path":"x.txt"}"#, &options)
                .await
                .unwrap();
            assert!(format!("{output:?}").contains("read from the binary's code"));
            // Parked while idle, linked again from the binary by the next call.
            crate::sandbox::warm::tests::until_ready(&fs).await;
            assert!(sandbox.park_now() > 0);
            assert!(fs.is_parked());
            let output = sandbox
                .call_tool(&fs, "read", r#"{"path":"x.txt"}"#, &options)
                .await
                .unwrap();
            assert!(format!("{output:?}").contains("read from the binary's code"));
            assert!(!fs.is_parked());
            let cached = std::fs::read_dir(home.compile_cache_dir())
                .map(|entries| entries.count())
                .unwrap_or(0);
            assert_eq!(cached, 0, "nothing written to the compile cache");
        }
    }
}
