//! Host-side bindings generated from the `capstan:plugin` WIT package, one
//! module per world. The worlds share their imports (`host`, `types`), so
//! one linker serves them all.

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

/// The skill world's exports. Its one import (`host`) is the tool world's.
pub mod skill_world {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "skill-plugin",
        exports: { default: async },
        with: {
            "capstan:plugin/host": crate::sandbox::bindings::capstan::plugin::host,
        },
    });
}
