//! `just bench`: a tool call through `capstan mcp serve`, as another agent
//! makes it.
//!
//! The real binary is started with `mcp serve` over stdio and driven by a
//! raw JSON-RPC client (this file: write a line, read a line; an SDK client
//! would add its own hundreds of microseconds): `fs.read` of a small file,
//! back to back and with a 1 ms gap between calls (the way an agent's calls
//! come). Beside it, in the same run, `@modelcontextprotocol/server-filesystem`'s
//! `read_text_file` of the same file, driven the same way, when Node.js and
//! npm are there (installed into `target/mcp-bench` on first use).
//! Target: capstan's p50 ≤ 150 µs.
//!
//! Run with `cargo bench -p capstan --bench mcp`; `BENCH_SAMPLES` sets the
//! number of calls (default 1000).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod support;

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use support::mcp::{RawClient, reference_server};
use support::{header, measure, measure_spaced, ratio, row, target};

fn main() {
    let samples: usize = std::env::var("BENCH_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let ws_path = ws.path().canonicalize().unwrap();
    let text: String = (1..=20)
        .map(|n| format!("line {n} of a small file\n"))
        .collect();
    std::fs::write(ws_path.join("small.txt"), &text).unwrap();

    let mut command = Command::new(env!("CARGO_BIN_EXE_capstan"));
    command
        .args(["mcp", "serve"])
        .current_dir(&ws_path)
        .env("CAPSTAN_HOME", home.path())
        .env("HOME", home.path());
    let mut capstan = RawClient::start(command);
    let read = json!({ "path": "small.txt" });
    for _ in 0..100 {
        capstan.call("fs__read", &read);
    }
    let back_to_back = measure(samples, || capstan.call("fs__read", &read));
    let spaced = measure_spaced(samples, Duration::from_millis(1), || {
        capstan.call("fs__read", &read)
    });
    drop(capstan);

    let reference = reference_server().map(|entry| {
        let mut command = Command::new("node");
        command.arg(entry).arg(&ws_path).current_dir(&ws_path);
        let mut client = RawClient::start(command);
        let read = json!({ "path": ws_path.join("small.txt") });
        for _ in 0..100 {
            client.call("read_text_file", &read);
        }
        measure(samples, || client.call("read_text_file", &read))
    });

    header("capstan mcp serve (stdio, raw JSON-RPC client)");
    row("capstan mcp serve: fs.read of a small file", &back_to_back);
    row("the same, 1 ms between calls", &spaced);
    match &reference {
        Ok(stats) => {
            row("server-filesystem (Node.js): read_text_file", stats);
            println!();
            println!(
                "capstan fs.read / server-filesystem read_text_file: {:.2}x (p50; below 1 is faster)",
                ratio(back_to_back.p50, stats.p50)
            );
        }
        Err(why) => {
            println!("server-filesystem: skipped ({why}; install Node.js 18+ and npm to compare)")
        }
    }
    println!();
    target(
        "capstan mcp serve fs.read p50",
        back_to_back.p50,
        Duration::from_micros(150),
    );
}
