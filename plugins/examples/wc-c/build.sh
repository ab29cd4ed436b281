#!/usr/bin/env bash
# Builds wc.wasm from wc.c: C bindings from wit-bindgen's C generator,
# clang and wasi-libc for wasm32-wasi, and rustup's wasm-component-ld to
# link and adapt the module into a component. Needs:
#   apt-get install clang lld wasi-libc libclang-rt-dev-wasm32
#   cargo install wit-bindgen-cli@0.51.0 --no-default-features --features c
#   rustup (for wasm-component-ld)
set -euo pipefail
cd "$(dirname "$0")"
wit=../../../wit
wit-bindgen c "$wit" --world tool-plugin --out-dir gen
clang --target=wasm32-wasi -O2 -c wc.c -o gen/wc.o
clang --target=wasm32-wasi -O2 -c gen/tool_plugin.c -o gen/tool_plugin.o
component_ld="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/wasm-component-ld"
wasm_ld="$(command -v wasm-ld || ls /usr/bin/wasm-ld-* | head -n1)"
builtins="$(clang --target=wasm32-wasi -print-libgcc-file-name)"
"$component_ld" --wasm-ld-path "$wasm_ld" --wasi-adapter reactor \
    -m wasm32 -L/usr/lib/wasm32-wasi /usr/lib/wasm32-wasi/crt1-reactor.o --entry _initialize \
    gen/wc.o gen/tool_plugin.o gen/tool_plugin_component_type.o -lc "$builtins" -o wc.wasm
ls -l wc.wasm
