//! Host-side bindings generated from the `capstan:plugin` WIT package.

#![allow(missing_docs)]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "tool-plugin",
    exports: { default: async },
});
