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

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::{header, measure, measure_spaced, ratio, row, target};

/// A server started as a child process, spoken to line by line.
struct RawClient {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    line: String,
}

impl RawClient {
    fn start(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the MCP server");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut client = Self {
            child,
            stdin,
            stdout,
            next_id: 0,
            line: String::new(),
        };
        let init = client.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": { "name": "bench", "version": "1" },
            }),
        );
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        client.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        client
    }

    fn send(&mut self, message: &Value) {
        let mut bytes = serde_json::to_vec(message).unwrap();
        bytes.push(b'\n');
        self.stdin.write_all(&bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and reads lines until its response.
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        loop {
            self.line.clear();
            let read = self.stdout.read_line(&mut self.line).unwrap();
            assert!(read > 0, "the server closed its output");
            let message: Value = serde_json::from_str(&self.line).unwrap();
            if message.get("id") == Some(&json!(id)) {
                return message;
            }
        }
    }

    /// One `tools/call`, checked to have succeeded.
    fn call(&mut self, tool: &str, arguments: &Value) {
        let response = self.request(
            "tools/call",
            json!({ "name": tool, "arguments": arguments }),
        );
        let result = &response["result"];
        let failed = result.get("isError").and_then(Value::as_bool) == Some(true);
        assert!(
            result.get("content").is_some() && !failed,
            "{tool} failed: {response}"
        );
    }
}

impl Drop for RawClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// `@modelcontextprotocol/server-filesystem`'s entry point, installed into
/// `target/mcp-bench` if npm is there; `None` (with the reason) otherwise.
fn reference_server() -> Result<PathBuf, String> {
    let prefix = target_dir().join("mcp-bench");
    let entry = prefix.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    if entry.is_file() {
        return Ok(entry);
    }
    if Command::new("node").arg("--version").output().is_err() {
        return Err("node is not installed".into());
    }
    std::fs::create_dir_all(&prefix).map_err(|e| e.to_string())?;
    let status = Command::new("npm")
        .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg("@modelcontextprotocol/server-filesystem")
        .status()
        .map_err(|e| format!("npm is not installed ({e})"))?;
    if !status.success() || !entry.is_file() {
        return Err(format!("npm install failed ({status})"));
    }
    Ok(entry)
}

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
