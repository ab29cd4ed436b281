# capstan's developer tasks. `./dev RECIPE` installs `just` and the wasm
# target first; `just RECIPE` works once they are there.

set shell := ["bash", "-euo", "pipefail", "-c"]

wasm_target := "wasm32-wasip2"
# Kept equal to host/src/scaffold/toolchain.rs.
componentize_py := "componentize-py==0.25.0"
componentize_js := "@bytecodealliance/componentize-js@0.23.0"

# List the recipes.
default:
    @just --list

# Install the Rust target the plugins build for, and the pinned Python and
# JavaScript component toolchains (into .toolchains/, which the tests use).
setup: toolchains
    rustup target list --installed | grep -qx {{wasm_target}} || rustup target add {{wasm_target}}

# componentize-py (in a virtualenv) and componentize-js (an npm prefix),
# pinned, under .toolchains/; the same layout `capstan plugin toolchain` makes.
# Then the MCP clients the `mcp` tests drive `capstan mcp serve` with.
toolchains: mcp-clients agent-sdks
    #!/usr/bin/env bash
    set -euo pipefail
    if [ ! -f .toolchains/python/.capstan-installed ]; then
        echo "setup: installing {{componentize_py}} into .toolchains/python" >&2
        python3 -m venv .toolchains/python
        .toolchains/python/bin/pip install --quiet --disable-pip-version-check {{componentize_py}}
        touch .toolchains/python/.capstan-installed
    fi
    if [ ! -f .toolchains/js/.capstan-installed ]; then
        command -v npm >/dev/null || { echo "setup: npm is needed for componentize-js; install Node.js 18+ (e.g. apt-get install nodejs npm)" >&2; exit 1; }
        echo "setup: installing {{componentize_js}} into .toolchains/js" >&2
        mkdir -p .toolchains/js
        npm install --silent --no-audit --no-fund --prefix .toolchains/js {{componentize_js}}
        touch .toolchains/js/.capstan-installed
    fi

# The official MCP Python SDK, its 1.x and its current 2.x line, each in a
# virtualenv under target/mcp-venvs, and the TypeScript SDK under
# target/mcp-node (where tests/mcp.rs looks for them).
mcp-clients:
    #!/usr/bin/env bash
    set -euo pipefail
    for pair in "mcp1:mcp>=1,<2" "mcp2:mcp>=2,<3"; do
        name="${pair%%:*}"; spec="${pair#*:}"
        dir="target/mcp-venvs/$name"
        if [ ! -f "$dir/.capstan-installed" ]; then
            echo "setup: installing '$spec' into $dir" >&2
            python3 -m venv "$dir"
            "$dir/bin/pip" install --quiet --disable-pip-version-check "$spec"
            printf '%s' "$spec" > "$dir/.capstan-installed"
        fi
    done
    if [ ! -f target/mcp-node/.capstan-installed ]; then
        command -v npm >/dev/null || { echo "setup: npm is needed for the MCP TypeScript SDK; install Node.js 18+" >&2; exit 1; }
        echo "setup: installing @modelcontextprotocol/sdk@1 into target/mcp-node" >&2
        mkdir -p target/mcp-node
        npm install --silent --no-audit --no-fund --prefix target/mcp-node @modelcontextprotocol/sdk@1
        printf '%s' "@modelcontextprotocol/sdk@1" > target/mcp-node/.capstan-installed
    fi

# The official Agent SDKs the `agent_sdk` tests drive capstan with, pinned:
# Python `claude-agent-sdk` in target/agent-sdks/python, TypeScript
# `@anthropic-ai/claude-agent-sdk` (and its peers) in target/agent-sdks/node,
# and the real Claude Code CLI in target/agent-sdks/claude-code, whose output
# on a mock model is the golden capstan's stream-json is compared with.
agent-sdks:
    #!/usr/bin/env bash
    set -euo pipefail
    dir=target/agent-sdks
    py="claude-agent-sdk==0.2.189"
    if [ "$(cat $dir/python/.capstan-installed 2>/dev/null)" != "$py" ]; then
        echo "setup: installing $py into $dir/python" >&2
        python3 -m venv $dir/python
        $dir/python/bin/pip install --quiet --disable-pip-version-check "$py"
        printf '%s' "$py" > $dir/python/.capstan-installed
    fi
    command -v npm >/dev/null || { echo "setup: npm is needed for the Agent SDK tests; install Node.js 18+" >&2; exit 1; }
    node="@anthropic-ai/claude-agent-sdk@0.3.333 @anthropic-ai/sdk@0.93.0 @modelcontextprotocol/sdk@1.29.0 zod@4"
    if [ "$(cat $dir/node/.capstan-installed 2>/dev/null)" != "$node" ]; then
        echo "setup: installing $node into $dir/node" >&2
        mkdir -p $dir/node
        # The SDK's optional native CLI is left out: the tests name the binary.
        npm install --silent --no-audit --no-fund --omit=optional --prefix $dir/node $node
        printf '%s' "$node" > $dir/node/.capstan-installed
    fi
    cc="@anthropic-ai/claude-code@2.1.330"
    if [ "$(cat $dir/claude-code/.capstan-installed 2>/dev/null)" != "$cc" ]; then
        echo "setup: installing $cc into $dir/claude-code" >&2
        mkdir -p $dir/claude-code
        npm install --silent --no-audit --no-fund --prefix $dir/claude-code "$cc"
        pkg=$dir/claude-code/node_modules/@anthropic-ai/claude-code
        # npm may skip the postinstall that puts the native binary in place.
        DISABLE_TELEMETRY=1 $pkg/bin/claude.exe --version >/dev/null 2>&1 || (cd $pkg && node install.cjs)
        DISABLE_TELEMETRY=1 $pkg/bin/claude.exe --version >/dev/null
        printf '%s' "$cc" > $dir/claude-code/.capstan-installed
    fi

# Build the capstan binary (release), with its built-in plugins embedded.
build: setup
    cargo build --release -p capstan

# Build the first-party plugins as components (target/wasm-plugins/...), and
# package the installable ones as target/plugins/NAME (plugin.toml + component).
plugins: setup
    cargo build --release --target {{wasm_target}} --manifest-path plugins/Cargo.toml --target-dir target/wasm-plugins
    @ls -la target/wasm-plugins/{{wasm_target}}/release/*.wasm
    for name in guard-secrets protect-paths; do \
        mkdir -p "target/plugins/$name"; \
        cp "plugins/$name/plugin.toml" "target/plugins/$name/"; \
        cp "target/wasm-plugins/{{wasm_target}}/release/capstan_plugin_${name//-/_}.wasm" "target/plugins/$name/${name//-/_}.wasm"; \
    done
    @echo "install with: capstan plugin install target/plugins/guard-secrets (or protect-paths)"

# Run every test: host unit and end-to-end tests, SDK tests, plugin unit tests.
test: setup
    cargo test --workspace
    cargo test --manifest-path plugins/Cargo.toml --target-dir target/plugin-tests

# Fuzz one target with cargo-fuzz (`cargo install cargo-fuzz`) for SECONDS;
# `just fuzz-list` names the targets. New inputs go to fuzz/corpus/TARGET,
# crashes to fuzz/artifacts/TARGET (docs/testing.md).
fuzz target seconds="600":
    mkdir -p fuzz/corpus/{{target}}
    cargo fuzz run --sanitizer none --debug-assertions {{target}} fuzz/corpus/{{target}} fuzz/seeds/{{target}} -- -max_total_time={{seconds}}

# The fuzz targets.
fuzz-list:
    cargo fuzz list

# Print the dependencies between host/src's modules; fail on a cycle or on
# an edge the layout forbids (docs/architecture.md, "Module dependencies").
module-graph:
    python3 .ci/module-graph

# Check formatting and lints, host and guests alike, and the module graph.
lint: setup module-graph
    cargo fmt --all --check
    cargo fmt --all --check --manifest-path plugins/Cargo.toml
    cargo fmt --all --check --manifest-path tests/fixtures/misbehave/Cargo.toml
    cargo fmt --all --check --manifest-path tests/fixtures/hostile/Cargo.toml
    cargo fmt --all --check --manifest-path tests/fixtures/skill-kit/Cargo.toml
    cargo fmt --all --check --manifest-path tests/fixtures/hook-echo/Cargo.toml
    cargo fmt --all --check --manifest-path tests/fixtures/bad-describe/Cargo.toml
    cargo fmt --all --check --manifest-path fuzz/Cargo.toml
    cargo clippy --workspace --all-targets -- -D warnings
    cargo clippy --manifest-path plugins/Cargo.toml --target {{wasm_target}} --target-dir target/wasm-plugins --release -- -D warnings

# Format everything.
fmt:
    cargo fmt --all
    cargo fmt --all --manifest-path plugins/Cargo.toml
    cargo fmt --all --manifest-path tests/fixtures/misbehave/Cargo.toml
    cargo fmt --all --manifest-path tests/fixtures/hostile/Cargo.toml
    cargo fmt --all --manifest-path tests/fixtures/skill-kit/Cargo.toml
    cargo fmt --all --manifest-path tests/fixtures/hook-echo/Cargo.toml
    cargo fmt --all --manifest-path tests/fixtures/bad-describe/Cargo.toml
    cargo fmt --all --manifest-path fuzz/Cargo.toml

# The in-process benches: fresh-instance call, compile and cached load,
# whole-process call; the agent loop's overhead per turn and its startup;
# Python and JavaScript tools beside the Rust one, and the memory an idle
# session keeps; a call through `capstan mcp serve` beside
# @modelcontextprotocol/server-filesystem. Then `bench-cli`'s table.
# Measure everything: the in-process benches, then the whole-process table.
bench: setup
    cargo bench -p capstan --bench runtime
    cargo bench -p capstan --bench agent
    cargo bench -p capstan --bench hooks
    cargo bench -p capstan --bench exec
    cargo bench -p capstan --bench languages
    cargo bench -p capstan --bench mcp
    cargo bench -p capstan --bench checkpoint
    cargo bench -p capstan --bench render
    cargo bench -p capstan --bench cli

# Rows: tool call, cached load, exec, -p scripted and against
# a mock Anthropic server beside Claude Code, first run, idle session, MCP
# per call; each with its goal met or missed. `just bench-cli quick` for a
# short look; BENCH_CLI_RUNS and the other settings in host/benches/cli.rs.
# Installs Claude Code and server-filesystem into target/ (npm) on first use.
# Whole processes as a user runs them, each beside its baseline: a table.
bench-cli mode="full":
    rustup target list --installed | grep -qx {{wasm_target}} || rustup target add {{wasm_target}}
    BENCH_CLI_QUICK={{ if mode == "quick" { "1" } else { "0" } }} cargo bench -p capstan --bench cli

# Makes host/hot-text.txt again: the functions a start-up runs, which
# host/build.rs gathers at the front of the binary's text. Links the release
# binary with the list, runs -p, tool call, a fresh home and the interactive
# session under perf (page faults), adds what they touched; a few rounds.
# Linux x86_64 with perf; after a dependency or toolchain update.
hot-text:
    python3 host/hot-text.py

# An agent session on a sample project with the offline scripted model (no
# API key needed): it runs the project's tests in the sandbox, read-only,
# without asking; its edit is refused in print mode, then asked at a terminal
# (a pseudo-terminal that docs/demo/interactive.py answers) along with a test
# run that writes the project; then the tools called directly.
demo: build
    #!/usr/bin/env bash
    set -euo pipefail
    capstan="$PWD/target/release/capstan"
    script="$PWD/docs/demo/script.json"
    interactive="$PWD/docs/demo/interactive.py"
    export CAPSTAN_HOME="$(mktemp -d)"
    project="$(mktemp -d)"
    trap 'rm -rf "$CAPSTAN_HOME" "$project"' EXIT
    cp -R docs/demo/project/. "$project/"
    cd "$project"
    run() { printf '\n\033[1m$ capstan %s\033[0m\n' "$*"; "$capstan" "$@" || echo "(exit code $?)"; }
    echo "# An agent session. The model runs the tests (cargo test, in the sandbox: the project read-only, no network),"
    echo "# which needs no permission. Print mode cannot ask, so the edit is refused; the model is told how to allow it, and says so:"
    run -p "Rename greet to welcome" --model "scripted:$script"
    echo; echo "# The same session at a terminal shows the tests' output as they run, and asks before the edit and before the"
    echo "# test run that writes the project. Nobody is at this one: docs/demo/interactive.py runs it in a pseudo-terminal,"
    echo "# types y at each question, then /exit:"
    printf '\n\033[1m$ capstan "Rename greet to welcome" --model scripted:%s\033[0m\n' "$script"
    python3 "$interactive" y "$capstan" "Rename greet to welcome" --model "scripted:$script" || echo "(exit code $?)"
    run session list
    echo; echo "# Tools can be called directly too; each call is a fresh sandbox that sees only the workspace:"
    run tool list
    run tool call fs.grep '{"pattern":"fn \\w+","glob":"**/*.rs"}'
    run tool call fs.edit '{"path":"src/main.rs","old":"hello, {}","new":"ahoy, {}"}'
    run tool call fs.edit '{"path":"src/main.rs","old":"hello, {}","new":"ahoy, {}"}' --allow-write
    run tool call fs.read '{"path":"src/main.rs","limit":3}'
    echo; echo "# A command's network is off unless granted; a refused request is named, even when the command says nothing:"
    run tool call exec.run '{"command":"curl -s https://example.com"}'
    echo; echo "# Nothing outside the workspace exists for a tool:"
    run tool call fs.read '{"path":"/etc/passwd"}'
    run tool call fs.read '{"path":"../../etc/passwd"}'

# Install every Claude Code plugin fixture (tests/fixtures/claude-plugins)
# and print how many install cleanly, with warnings or not at all, and the
# share of their skills and commands that import with no warning.
compat:
    cargo test -p capstan --test all claude_plugins::compat -- --nocapture
    cargo test -p capstan --lib skills::text::tests::arguments_follow_claude_codes_rules -- --nocapture
