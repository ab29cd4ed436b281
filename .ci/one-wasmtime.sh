#!/bin/sh
# Checks that cargo builds wasmtime (and Cranelift) once, although the build
# script (host/build.rs) depends on it too: the build dependencies in
# host/Cargo.toml and [profile.release.build-override] must keep the build
# script's graph identical to the binary's. Needs a nightly toolchain (for
# --unit-graph); builds nothing. Prints each command's count of compiled
# (not only checked) library units; fails if any is above 1. (`cargo check`
# and `clippy` check the binary's wasmtime and compile the build script's:
# one of each.)
set -eu
cd "$(dirname "$0")/.."
status=0
count() {
    # $1: label; the rest: cargo arguments
    label=$1; shift
    counts=$(cargo +nightly "$@" --unit-graph -Z unstable-options 2>/dev/null | python3 -c '
import json, sys
units = json.load(sys.stdin)["units"]
def libs(name):
    return sum(1 for u in units
               if u["pkg_id"].split("#")[-1].split("@")[0] == name
               and u["mode"] == "build" and u["target"]["kind"] == ["lib"])
print(libs("wasmtime"), libs("cranelift-codegen"))
')
    set -- $counts
    echo "$label: wasmtime $1, cranelift-codegen $2"
    if [ "$1" != 1 ] || [ "$2" != 1 ]; then status=1; fi
}
count "test --workspace --no-run" test --workspace --no-run
count "build --release -p capstan" build --release -p capstan
count "bench -p capstan --no-run" bench -p capstan --no-run
count "check -p capstan --all-targets (as clippy)" check -p capstan --all-targets
exit $status
