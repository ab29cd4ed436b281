# capstan's developer tasks. `./dev RECIPE` installs `just` and the wasm
# target first; `just RECIPE` works once they are there.

set shell := ["bash", "-euo", "pipefail", "-c"]

wasm_target := "wasm32-wasip2"

# List the recipes.
default:
    @just --list

# Install the Rust target the plugins build for.
setup:
    rustup target list --installed | grep -qx {{wasm_target}} || rustup target add {{wasm_target}}

# Build the capstan binary (release), with its built-in plugins embedded.
build: setup
    cargo build --release -p capstan

# Build the first-party plugins as components (target/wasm-plugins/...).
plugins: setup
    cargo build --release --target {{wasm_target}} --manifest-path plugins/Cargo.toml --target-dir target/wasm-plugins
    @ls -la target/wasm-plugins/{{wasm_target}}/release/*.wasm

# Run every test: host unit and end-to-end tests, SDK tests, plugin unit tests.
test: setup
    cargo test --workspace
    cargo test --manifest-path plugins/Cargo.toml --target-dir target/plugin-tests

# Check formatting and lints, host and guests alike.
lint: setup
    cargo fmt --all --check
    cargo fmt --all --check --manifest-path plugins/Cargo.toml
    cargo fmt --all --check --manifest-path tests/fixtures/misbehave/Cargo.toml
    cargo clippy --workspace --all-targets -- -D warnings
    cargo clippy --manifest-path plugins/Cargo.toml --target {{wasm_target}} --target-dir target/wasm-plugins --release -- -D warnings

# Format everything.
fmt:
    cargo fmt --all
    cargo fmt --all --manifest-path plugins/Cargo.toml
    cargo fmt --all --manifest-path tests/fixtures/misbehave/Cargo.toml

# Measure: fresh-instance call, compile and cached load, whole-process call;
# the agent loop's overhead per turn and its startup.
bench: setup
    cargo bench -p capstan --bench runtime
    cargo bench -p capstan --bench agent

# Try the tools on a sample project (no API key needed).
demo: build
    #!/usr/bin/env bash
    set -euo pipefail
    capstan="$PWD/target/release/capstan"
    export CAPSTAN_HOME="$(mktemp -d)"
    project="$(mktemp -d)"
    trap 'rm -rf "$CAPSTAN_HOME" "$project"' EXIT
    mkdir -p "$project/src"
    printf 'fn greet(name: &str) -> String {\n    format!("hello, {}", name)\n}\n\nfn main() {\n    println!("{}", greet("world"));\n}\n' > "$project/src/main.rs"
    printf '# Sample\nA tiny project for the capstan demo.\n' > "$project/README.md"
    printf 'target/\n' > "$project/.gitignore"
    cd "$project"
    run() { printf '\n\033[1m$ capstan %s\033[0m\n' "$*"; "$capstan" "$@" || echo "(exit code $?)"; }
    run --version
    run tool list
    run tool call fs.ls '{}'
    run tool call fs.read '{"path":"src/main.rs","offset":1,"limit":3}'
    run tool call fs.grep '{"pattern":"fn \\w+","glob":"**/*.rs"}'
    run tool call fs.glob '{"pattern":"**/*"}'
    echo; echo "# Without --allow-write the workspace is read-only, so the sandbox refuses the edit:"
    run tool call fs.edit '{"path":"src/main.rs","old":"hello","new":"ahoy"}'
    run tool call fs.edit '{"path":"src/main.rs","old":"hello","new":"ahoy"}' --allow-write
    run tool call fs.read '{"path":"src/main.rs","limit":3}'
    echo; echo "# Nothing outside the workspace exists for a tool:"
    run tool call fs.read '{"path":"/etc/passwd"}'
    run tool call fs.read '{"path":"../../etc/passwd"}'
