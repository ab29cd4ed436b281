//! A raw JSON-RPC client for MCP servers over stdio, and the reference
//! server the MCP benchmarks compare capstan's with.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

/// A server started as a child process, spoken to line by line.
pub struct RawClient {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    line: String,
}

impl RawClient {
    /// Starts `command` (its stderr as the caller set it, inherited by
    /// default) and initialises the MCP session.
    pub fn start(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
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

    /// Writes one message as a line.
    pub fn send(&mut self, message: &Value) {
        let mut bytes = serde_json::to_vec(message).unwrap();
        bytes.push(b'\n');
        self.stdin.write_all(&bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and reads lines until its response.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
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
    pub fn call(&mut self, tool: &str, arguments: &Value) {
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

/// The build's target folder (`CARGO_TARGET_DIR` or the workspace's).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// `@modelcontextprotocol/server-filesystem`'s entry point, installed into
/// `target/mcp-bench` if npm is there; `None` (with the reason) otherwise.
pub fn reference_server() -> Result<PathBuf, String> {
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
