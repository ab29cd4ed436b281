//! The first-party plugins compiled into the binary by the build script.

/// A plugin shipped inside the `capstan` binary.
#[derive(Debug)]
pub struct BuiltinPlugin {
    /// The plugin's name, the prefix of its tools (`fs` in `fs.read`).
    pub name: &'static str,
    /// The component's bytes.
    pub wasm: &'static [u8],
    /// The SHA-256 of the bytes, computed at build time.
    pub sha256: &'static str,
    /// The component compiled by wasmtime at build time, page-aligned (in
    /// the binary's executable text on x86_64 Linux), loaded by
    /// [`crate::sandbox::precompiled`]; empty when the build made none.
    pub precompiled: &'static [u8],
}

/// Bytes aligned to a page, as wasmtime needs for code it runs in place.
#[repr(C, align(4096))]
struct PageAligned<T: ?Sized>(T);

// The embedded artifacts, one `static` each (written by the build script).
include!(concat!(env!("OUT_DIR"), "/builtin_artifacts.rs"));

/// Every built-in plugin.
pub static BUILTIN_PLUGINS: &[BuiltinPlugin] =
    include!(concat!(env!("OUT_DIR"), "/builtin_plugins.rs"));

/// The built-in plugin called `name`.
pub fn find(name: &str) -> Option<&'static BuiltinPlugin> {
    BUILTIN_PLUGINS.iter().find(|p| p.name == name)
}
