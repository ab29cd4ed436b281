//! Host-side bindings generated from the `capstan:plugin` WIT package.

#![allow(missing_docs)]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "tool-plugin",
    imports: { "capstan:plugin/exec": async },
    exports: { default: async },
});

/// The hook world's exports. Its imports (`host`, `types`) are the tool
/// world's, so one linker serves both.
pub mod hook_world {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "hook-plugin",
        exports: { default: async },
        with: {
            "capstan:plugin/types": crate::sandbox::bindings::capstan::plugin::types,
            "capstan:plugin/host": crate::sandbox::bindings::capstan::plugin::host,
        },
    });
}
