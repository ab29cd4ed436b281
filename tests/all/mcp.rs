//! `capstan mcp serve` driven by clients nobody on the project wrote: the
//! official MCP Python SDK, both its 1.x line and the current 2.x line
//! (installed once into `target/mcp-venvs`, as `just setup` does), over
//! stdio and Streamable HTTP; and a raw JSON-RPC client for what an SDK
//! hides (ordering of concurrent answers, the stateless revision's wire
//! rules, HTTP access checks).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::fastmcp::sdk_python;
use support::{Env, fixture, stderr, target_dir};

// ---------------------------------------------------------------------------
// The Python SDK clients

fn sdk1() -> PathBuf {
    sdk_python("mcp1", "mcp>=1,<2")
}

fn sdk2() -> PathBuf {
    sdk_python("mcp2", "mcp>=2,<3")
}

/// The npm prefix holding `@modelcontextprotocol/sdk`, installed once
/// under `target/mcp-node`.
fn ts_sdk() -> PathBuf {
    static INSTALLING: Mutex<()> = Mutex::new(());
    let _guard = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    let prefix = target_dir().join("mcp-node");
    let marker = prefix.join(".capstan-installed");
    if marker.is_file() {
        return prefix;
    }
    std::fs::create_dir_all(&prefix).unwrap();
    let out = Command::new("npm")
        .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg("@modelcontextprotocol/sdk@1")
        .output()
        .expect("npm is needed for the MCP client tests (Node.js 18+)");
    assert!(
        out.status.success(),
        "npm install @modelcontextprotocol/sdk into {} failed (the MCP client tests need the npm registry once; `just setup` installs it):\n{}",
        prefix.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&marker, "@modelcontextprotocol/sdk@1").unwrap();
    prefix
}

fn client_script(name: &str) -> PathBuf {
    support::repo_root().join("tests/mcp_clients").join(name)
}

/// A workspace with the files the client script reads, and the `capstan mcp
/// serve` command line that serves it (with the misbehave fixture).
fn workspace() -> Env {
    let env = Env::new();
    env.write("hello.txt", "hello from the workspace\n");
    for n in 0..20 {
        env.write(&format!("many/f{n}.txt"), format!("file number {n}\n"));
    }
    env
}

fn serve_args(extra: &[&str]) -> Vec<String> {
    let misbehave = fixture("misbehave");
    let mut args: Vec<String> = vec![
        "mcp".into(),
        "serve".into(),
        "-v".into(),
        "--plugin".into(),
        format!("misbehave={}", misbehave.display()),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Runs the Python client script with `python` and `config`; returns what
/// it saw.
fn run_client(python: &Path, config: Value) -> Value {
    run_script(python, &client_script("python_sdk.py"), config)
}

/// Runs the TypeScript client script with `config`.
fn run_ts_client(mut config: Value) -> Value {
    config["sdk"] = json!(ts_sdk());
    run_script(
        Path::new("node"),
        &client_script("typescript_sdk.mjs"),
        config,
    )
}

fn run_script(program: &Path, script: &Path, config: Value) -> Value {
    let out = Command::new(program)
        .arg(script)
        .arg(config.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the SDK client failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The client config for a server the client starts over stdio.
fn stdio_config(env: &Env, mode: &str, steps: &[&str], errlog: &Path, extra: &[&str]) -> Value {
    let mut command = vec![env!("CARGO_BIN_EXE_capstan").to_string()];
    command.extend(serve_args(extra));
    json!({
        "transport": "stdio",
        "command": command,
        "cwd": env.ws.path(),
        "env": {
            "CAPSTAN_HOME": env.home.path(),
            "HOME": env.home.path(),
            "CAPSTAN_CACHE_DIR": support::shared_compile_cache(),
            "PATH": std::env::var("PATH").unwrap_or_default(),
        },
        "errlog": errlog,
        "mode": mode,
        "steps": steps,
    })
}

const ALL_STEPS: [&str; 9] = [
    "tools",
    "read",
    "invalid",
    "tool_error",
    "missing_file",
    "unknown",
    "concurrent",
    "progress",
    "cancel",
];

/// Checks what the client saw for each of [`ALL_STEPS`].
fn check_steps(seen: &Value) {
    let tools = &seen["tools"];
    let names: Vec<&str> = tools["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    for expected in ["fs__read", "fs__write", "fs__edit", "misbehave__sleep"] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let read = &tools["fs__read"];
    assert_eq!(read["title"], "fs.read", "{read}");
    assert_eq!(read["inputSchema"]["type"], "object", "{read}");
    assert!(
        read["inputSchema"]["properties"]["path"].is_object(),
        "{read}"
    );
    assert!(!read["description"].as_str().unwrap().is_empty());
    assert_eq!(read["annotations"]["readOnlyHint"], true, "{read}");
    assert_eq!(read["annotations"]["openWorldHint"], false, "{read}");
    let write = &tools["fs__write"];
    assert_eq!(write["annotations"]["readOnlyHint"], false, "{write}");
    assert_eq!(write["annotations"]["destructiveHint"], true, "{write}");

    assert_eq!(seen["read"]["isError"], false, "{seen}");
    assert!(
        seen["read"]["text"]
            .as_str()
            .unwrap()
            .contains("hello from the workspace"),
        "{seen}"
    );
    assert_eq!(seen["invalid"]["isError"], true, "{seen}");
    assert!(
        seen["invalid"]["text"].as_str().unwrap().contains("path"),
        "the invalid input error names the missing field: {seen}"
    );
    assert_eq!(seen["tool_error"]["isError"], true, "{seen}");
    assert!(
        seen["tool_error"]["text"]
            .as_str()
            .unwrap()
            .contains("it broke"),
        "{seen}"
    );
    assert_eq!(seen["missing_file"]["isError"], true, "{seen}");
    assert!(
        seen["missing_file"]["text"]
            .as_str()
            .unwrap()
            .contains("missing.txt"),
        "{seen}"
    );
    assert_eq!(seen["unknown"]["raised"], true, "{seen}");
    assert!(
        seen["unknown"]["message"]
            .as_str()
            .unwrap()
            .contains("nosuch__tool"),
        "{seen}"
    );
    let many = seen["concurrent"].as_array().unwrap();
    assert_eq!(many.len(), 20);
    for (n, result) in many.iter().enumerate() {
        assert_eq!(result["isError"], false, "{result}");
        assert!(
            result["text"]
                .as_str()
                .unwrap()
                .contains(&format!("file number {n}\n")),
            "call {n} got another file's answer: {result}"
        );
    }
    let progress = &seen["progress"];
    assert_eq!(progress["result"]["text"], "done", "{progress}");
    let reports = progress["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 1, "{progress}");
    assert_eq!(reports[0]["progress"].as_f64(), Some(1.0), "{progress}");
    assert_eq!(reports[0]["total"].as_f64(), Some(2.0), "{progress}");
    assert_eq!(reports[0]["message"], "working", "{progress}");
    assert_eq!(seen["cancel"]["cancelled"], true, "{seen}");
    assert_eq!(seen["cancel"]["after"]["isError"], false, "{seen}");
}

/// The server's stderr shows that the cancelled call was stopped when the
/// client cancelled it (it logs that with -v), not merely when the session
/// ended.
fn assert_call_cancelled(server_log: &str) {
    assert!(
        server_log
            .lines()
            .any(|line| line.contains("cancelled call") && !line.contains("(the session ended)")),
        "the server did not stop the cancelled call:\n{server_log}"
    );
}

#[test]
fn python_sdk_1_over_stdio_lists_calls_fails_cancels_and_runs_calls_concurrently() {
    let python = sdk1();
    let env = workspace();
    let errlog = env.home.path().join("server.log");
    let seen = run_client(
        &python,
        stdio_config(&env, "legacy", &ALL_STEPS, &errlog, &[]),
    );
    assert_eq!(seen["protocolVersion"], "2025-11-25", "{seen}");
    assert_eq!(seen["serverName"], "capstan", "{seen}");
    check_steps(&seen);
    assert_call_cancelled(&std::fs::read_to_string(&errlog).unwrap());
}

#[test]
fn python_sdk_1_negotiates_each_handshake_revision() {
    let python = sdk1();
    let env = workspace();
    let errlog = env.home.path().join("server.log");
    // A revision the server does not speak is answered with its latest.
    for (asked, agreed) in [
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2025-03-26", "2025-11-25"),
    ] {
        let mut config = stdio_config(&env, "legacy", &["read"], &errlog, &[]);
        config["version"] = json!(asked);
        let seen = run_client(&python, config);
        assert_eq!(seen["protocolVersion"], agreed, "asked {asked}: {seen}");
        assert_eq!(seen["read"]["isError"], false, "{seen}");
    }
}

#[test]
fn python_sdk_2_over_stdio_in_each_mode() {
    let python = sdk2();
    let env = workspace();
    for (mode, version) in [
        ("legacy", "2025-11-25"),
        ("auto", "2026-07-28"),
        ("modern", "2026-07-28"),
    ] {
        let errlog = env.home.path().join(format!("server-{mode}.log"));
        let seen = run_client(&python, stdio_config(&env, mode, &ALL_STEPS, &errlog, &[]));
        assert_eq!(seen["protocolVersion"], version, "{mode}: {seen}");
        check_steps(&seen);
        assert_call_cancelled(&std::fs::read_to_string(&errlog).unwrap());
    }
}

#[test]
fn typescript_sdk_over_stdio() {
    let env = workspace();
    let errlog = env.home.path().join("server.log");
    let seen = run_ts_client(stdio_config(&env, "legacy", &ALL_STEPS, &errlog, &[]));
    assert_eq!(seen["protocolVersion"], "2025-11-25", "{seen}");
    assert_eq!(seen["serverName"], "capstan", "{seen}");
    check_steps(&seen);
    assert_call_cancelled(&std::fs::read_to_string(&errlog).unwrap());
}

#[test]
fn the_clients_root_is_the_workspace_unless_one_is_given() {
    let env = workspace();
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    std::fs::write(root_path.join("only-in-root.txt"), "from the root\n").unwrap();
    let errlog = env.home.path().join("server.log");
    for client in ["python 1", "python 2", "typescript"] {
        let mut config = stdio_config(&env, "legacy", &["roots"], &errlog, &[]);
        config["roots"] = json!(root_path);
        let seen = match client {
            "python 1" => run_client(&sdk1(), config),
            "python 2" => run_client(&sdk2(), config),
            _ => run_ts_client(config),
        };
        assert_eq!(seen["roots"]["isError"], false, "{seen}");
        assert!(
            seen["roots"]["text"]
                .as_str()
                .unwrap()
                .contains("from the root"),
            "{seen}"
        );
    }
    // --workspace wins over the roots.
    let mut config = stdio_config(
        &env,
        "legacy",
        &["roots", "read"],
        &errlog,
        &["--workspace", env.ws.path().to_str().unwrap()],
    );
    config["roots"] = json!(root_path);
    let seen = run_client(&sdk1(), config);
    assert_eq!(seen["roots"]["isError"], true, "{seen}");
    assert_eq!(seen["read"]["isError"], false, "{seen}");
}

#[test]
fn writes_only_with_allow_write() {
    let env = workspace();
    let errlog = env.home.path().join("server.log");
    let seen = run_client(
        &sdk1(),
        stdio_config(&env, "legacy", &["write"], &errlog, &[]),
    );
    assert_eq!(seen["write"]["isError"], true, "{seen}");
    assert!(
        seen["write"]["text"]
            .as_str()
            .unwrap()
            .contains("--allow-write"),
        "{seen}"
    );
    assert!(!env.ws.path().join("written.txt").exists());
    let seen = run_client(
        &sdk1(),
        stdio_config(&env, "legacy", &["write"], &errlog, &["--allow-write"]),
    );
    assert_eq!(seen["write"]["isError"], false, "{seen}");
    assert_eq!(env.read("written.txt"), "new");
}

// ---------------------------------------------------------------------------
// HTTP

/// A server started with `--http 127.0.0.1:0` (plus `extra`), and the
/// address it serves.
struct HttpServer {
    child: Child,
    addr: String,
    log: std::sync::Arc<Mutex<String>>,
}

impl HttpServer {
    fn start(env: &Env, extra: &[&str], vars: &[(&str, &str)]) -> Self {
        let mut args = serve_args(&["--http", "127.0.0.1:0"]);
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut command = env.capstan_std();
        command
            .args(&args)
            .stdin(Stdio::null())
            .stderr(Stdio::piped());
        for (name, value) in vars {
            command.env(name, value);
        }
        let mut child = command.spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap());
        let mut addr = None;
        let mut seen = String::new();
        while addr.is_none() {
            let mut line = String::new();
            assert!(
                lines.read_line(&mut line).unwrap() > 0,
                "the server ended before serving:\n{seen}"
            );
            seen.push_str(&line);
            if let Some(rest) = line.trim().strip_prefix("capstan mcp: serving http://") {
                addr = Some(rest.trim_end_matches("/mcp").to_string());
            }
        }
        let log = std::sync::Arc::new(Mutex::new(seen));
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                sink.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        Self {
            child,
            addr: addr.unwrap(),
            log,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The server's stderr so far, once `needle` is in it (or after 10 s).
    fn log_with(&self, needle: &str) -> String {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let log = self.log.lock().unwrap().clone();
            if log.contains(needle) || Instant::now() > until {
                return log;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_config(server: &HttpServer, mode: &str, steps: &[&str]) -> Value {
    json!({ "transport": "http", "url": server.url(), "mode": mode, "steps": steps })
}

#[test]
fn python_sdk_1_over_http() {
    let env = workspace();
    let server = HttpServer::start(&env, &[], &[]);
    let seen = run_client(&sdk1(), http_config(&server, "legacy", &ALL_STEPS));
    assert_eq!(seen["protocolVersion"], "2025-11-25", "{seen}");
    check_steps(&seen);
    assert_call_cancelled(&server.log_with("cancelled call"));
}

#[test]
fn typescript_sdk_over_http() {
    let env = workspace();
    let server = HttpServer::start(&env, &[], &[]);
    let seen = run_ts_client(http_config(&server, "legacy", &ALL_STEPS));
    assert_eq!(seen["protocolVersion"], "2025-11-25", "{seen}");
    check_steps(&seen);
    assert_call_cancelled(&server.log_with("cancelled call"));
}

#[test]
fn python_sdk_2_over_http_in_each_mode() {
    let env = workspace();
    for (mode, version) in [
        ("legacy", "2025-11-25"),
        ("auto", "2026-07-28"),
        ("modern", "2026-07-28"),
    ] {
        let server = HttpServer::start(&env, &[], &[]);
        let seen = run_client(&sdk2(), http_config(&server, mode, &ALL_STEPS));
        assert_eq!(seen["protocolVersion"], version, "{mode}: {seen}");
        check_steps(&seen);
        assert_call_cancelled(&server.log_with("cancelled call"));
    }
}

/// One HTTP/1.1 exchange on a fresh connection: the status, the headers
/// (lowercased names) and the body.
fn http(addr: &str, method: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut request = format!(
        "{method} /mcp HTTP/1.1\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        request.push_str(&format!("host: {addr}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        unchunk(body)
    } else {
        body.to_string()
    };
    (status, head.to_ascii_lowercase(), body)
}

fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    out
}

const JSON_HEADERS: [(&str, &str); 2] = [
    ("content-type", "application/json"),
    ("accept", "application/json, text/event-stream"),
];

fn initialize_body() -> String {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "raw", "version": "1" } },
    })
    .to_string()
}

#[test]
fn http_refuses_other_origins_rebound_hosts_and_unknown_sessions() {
    let env = workspace();
    let server = HttpServer::start(&env, &[], &[]);
    let addr = server.addr.as_str();
    let evil = [("origin", "https://evil.example")];
    let (status, _, _) = http(
        addr,
        "POST",
        &[&JSON_HEADERS[..], &evil].concat(),
        &initialize_body(),
    );
    assert_eq!(status, 403);
    let rebound = [("host", "evil.example")];
    let (status, _, _) = http(
        addr,
        "POST",
        &[&JSON_HEADERS[..], &rebound].concat(),
        &initialize_body(),
    );
    assert_eq!(status, 403);

    let (status, head, body) = http(addr, "POST", &JSON_HEADERS, &initialize_body());
    assert_eq!(status, 200, "{body}");
    let session = head
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(session.len(), 32);
    let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }).to_string();
    let (status, _, body) = http(addr, "POST", &JSON_HEADERS, &list);
    assert_eq!(status, 400, "a request without the session id: {body}");
    let unknown = [("mcp-session-id", "00000000000000000000000000000000")];
    let (status, _, _) = http(addr, "POST", &[&JSON_HEADERS[..], &unknown].concat(), &list);
    assert_eq!(status, 404);
    let ours = [("mcp-session-id", session.as_str())];
    let (status, _, body) = http(addr, "POST", &[&JSON_HEADERS[..], &ours].concat(), &list);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("fs__read"), "{body}");
    let (status, _, _) = http(addr, "DELETE", &ours, "");
    assert_eq!(status, 200);
    let (status, _, _) = http(addr, "POST", &[&JSON_HEADERS[..], &ours].concat(), &list);
    assert_eq!(status, 404, "the session ended");
    let bad_version = [("mcp-protocol-version", "1999-01-01")];
    let (status, _, body) = http(
        addr,
        "POST",
        &[&JSON_HEADERS[..], &bad_version].concat(),
        &list,
    );
    assert_eq!(status, 400, "{body}");
}

#[test]
fn http_on_other_addresses_needs_a_bearer_token() {
    let env = workspace();
    let out = env
        .capstan()
        .args(["mcp", "serve", "--http", "0.0.0.0:0"])
        .env_remove("CAPSTAN_MCP_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("without a bearer token"),
        "{}",
        stderr(&out)
    );

    let server = HttpServer::start(&env, &[], &[("CAPSTAN_MCP_TOKEN", "s3cret-token")]);
    let addr = server.addr.as_str();
    let (status, head, _) = http(addr, "POST", &JSON_HEADERS, &initialize_body());
    assert_eq!(status, 401);
    assert!(head.contains("www-authenticate: bearer"), "{head}");
    let wrong = [("authorization", "Bearer s3cret-tokeN")];
    let (status, _, _) = http(
        addr,
        "POST",
        &[&JSON_HEADERS[..], &wrong].concat(),
        &initialize_body(),
    );
    assert_eq!(status, 401);
    let right = [("authorization", "Bearer s3cret-token")];
    let (status, _, body) = http(
        addr,
        "POST",
        &[&JSON_HEADERS[..], &right].concat(),
        &initialize_body(),
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn http_stateless_requests_need_no_session_and_match_their_headers() {
    let env = workspace();
    let server = HttpServer::start(&env, &[], &[]);
    let addr = server.addr.as_str();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let call = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": { "name": "fs__read", "arguments": { "path": "hello.txt" }, "_meta": meta },
    })
    .to_string();
    let routing = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "fs__read"),
    ];
    let (status, head, body) = http(addr, "POST", &[&JSON_HEADERS[..], &routing].concat(), &call);
    assert_eq!(status, 200, "{body}");
    assert!(!head.contains("mcp-session-id"), "{head}");
    assert!(head.contains("text/event-stream"), "{head}");
    let data = body.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
    let response: Value = serde_json::from_str(data).unwrap();
    assert_eq!(response["id"], 7);
    assert_eq!(response["result"]["resultType"], "complete", "{response}");
    assert!(
        response["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hello from the workspace")
    );
    // The name header says another tool than the body.
    let lying = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "fs__write"),
    ];
    let (status, _, body) = http(addr, "POST", &[&JSON_HEADERS[..], &lying].concat(), &call);
    assert_eq!(status, 400);
    let response: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(response["error"]["code"], -32020, "{response}");
}

// ---------------------------------------------------------------------------
// A raw client over stdio

/// `capstan mcp serve` over stdio, spoken to one JSON line at a time.
struct RawServer {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl RawServer {
    fn start(env: &Env, extra: &[&str]) -> Self {
        let mut child = env
            .capstan_std()
            .args(serve_args(extra))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next message, or `None` at the end of the output.
    fn next(&mut self) -> Option<Value> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line).unwrap() == 0 {
            return None;
        }
        Some(serde_json::from_str(&line).unwrap())
    }

    /// Reads until the response to `id`; returns it with what came before.
    fn until(&mut self, id: &Value) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let message = self.next().expect("the server ended its output");
            if message.get("id") == Some(id) && message.get("method").is_none() {
                return (message, before);
            }
            before.push(message);
        }
    }

    fn initialize(&mut self) {
        self.send(serde_json::from_str(&initialize_body()).unwrap());
        let (response, _) = self.until(&json!(1));
        assert_eq!(response["result"]["protocolVersion"], "2025-11-25");
        self.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    }

    /// Closes stdin and reads everything left, then the server's stderr.
    fn finish(mut self) -> (Vec<Value>, String) {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        while let Some(message) = self.next() {
            rest.push(message);
        }
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the server exited with {status}");
        let mut log = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut log)
            .unwrap();
        (rest, log)
    }
}

fn call(id: Value, tool: &str, arguments: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": tool, "arguments": arguments } })
}

#[test]
fn calls_run_concurrently_and_a_cancelled_call_is_stopped_and_never_answered() {
    let env = workspace();
    let mut server = RawServer::start(&env, &[]);
    server.initialize();
    // A call that sleeps for 25 s, then twenty quick reads: the reads are
    // all answered while the first call still runs.
    server.send(call(
        json!("slow"),
        "misbehave__sleep",
        json!({ "bytes": 25 }),
    ));
    for n in 0..20 {
        server.send(call(
            json!(100 + n),
            "fs__read",
            json!({ "path": format!("many/f{n}.txt") }),
        ));
    }
    let mut answered = Vec::new();
    while answered.len() < 20 {
        let message = server.next().unwrap();
        assert_ne!(
            message["id"], "slow",
            "the slow call blocked the others: {message}"
        );
        let id = message["id"].as_u64().unwrap();
        let text = message["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains(&format!("file number {}\n", id - 100)),
            "{message}"
        );
        answered.push(id);
    }
    server.send(
        json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": { "requestId": "slow", "reason": "changed my mind" } }),
    );
    server.send(json!({ "jsonrpc": "2.0", "id": "after", "method": "ping" }));
    let (pong, before) = server.until(&json!("after"));
    assert_eq!(pong["result"], json!({}));
    assert!(before.is_empty(), "{before:?}");
    // At the end of its input the server answers every call still running
    // before it exits: the cancelled one is not among them.
    let (rest, log) = server.finish();
    assert!(rest.iter().all(|m| m["id"] != "slow"), "{rest:?}");
    assert!(log.contains("cancelled call \"slow\""), "{log}");
}

#[test]
fn stateless_requests_need_no_handshake_and_unknown_revisions_are_refused() {
    let env = workspace();
    let mut server = RawServer::start(&env, &[]);
    let meta = |version: &str| {
        json!({ "io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientCapabilities": {} })
    };
    server.send(
        json!({ "jsonrpc": "2.0", "id": 1, "method": "server/discover",
                        "params": { "_meta": meta("2026-07-28") } }),
    );
    let (discover, _) = server.until(&json!(1));
    let result = &discover["result"];
    assert_eq!(
        result["supportedVersions"],
        json!(["2026-07-28", "2025-11-25", "2025-06-18"])
    );
    assert_eq!(result["capabilities"]["tools"]["listChanged"], true);
    assert_eq!(result["resultType"], "complete");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "capstan"
    );
    server.send(json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "fs.read", "arguments": { "path": "hello.txt" },
                    "_meta": meta("2026-07-28") } }));
    let (called, _) = server.until(&json!(2));
    assert_eq!(called["result"]["isError"], false, "{called}");
    assert_eq!(called["result"]["resultType"], "complete", "{called}");
    server.send(json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/list",
                        "params": { "_meta": meta("2031-01-01") } }));
    let (refused, _) = server.until(&json!(3));
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    assert_eq!(refused["error"]["data"]["requested"], "2031-01-01");
    assert!(
        refused["error"]["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28"))
    );
    // Neither a handshake nor a revision: told how to start.
    server.send(json!({ "jsonrpc": "2.0", "id": 4, "method": "tools/list" }));
    let (early, _) = server.until(&json!(4));
    assert!(
        early["error"]["message"]
            .as_str()
            .unwrap()
            .contains("initialize"),
        "{early}"
    );
    // Not JSON, and not a message: errors with the id when there is one.
    server
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"{oops\n")
        .unwrap();
    let (garbled, _) = server.until(&Value::Null);
    assert_eq!(garbled["error"]["code"], -32700);
    server.send(json!({ "id": 5, "method": "ping" }));
    let (invalid, _) = server.until(&json!(5));
    assert_eq!(invalid["error"]["code"], -32600);
    server.finish();
}

#[test]
fn installing_a_plugin_while_serving_changes_the_list_and_its_calls_are_audited() {
    let env = workspace();
    let mut server = RawServer::start(&env, &[]);
    server.initialize();
    server.send(json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }));
    let (listed, _) = server.until(&json!(2));
    let names = |listed: &Value| -> Vec<String> {
        listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(!names(&listed).iter().any(|n| n.starts_with("slowpoke__")));

    let package = env.home.path().join("slowpoke");
    std::fs::create_dir_all(&package).unwrap();
    let fs = target_dir().join("wasm-plugins/wasm32-wasip2/release/capstan_plugin_fs.wasm");
    assert!(fs.is_file(), "{} was not built", fs.display());
    std::fs::copy(fs, package.join("tool.wasm")).unwrap();
    std::fs::write(
        package.join("plugin.toml"),
        "name = \"slowpoke\"\nversion = \"1.0.0\"\ndescription = \"Test tools\"\nauthors = [\"Test <t@example.com>\"]\ncomponents = [\"tool.wasm\"]\n[capabilities]\nfs = [{ path = \"$WORKSPACE\", access = \"read\" }]\n",
    )
    .unwrap();
    let out = env
        .capstan()
        .args(["plugin", "install", package.to_str().unwrap(), "--yes"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    // The server looks at the lockfile twice a second.
    let changed = server.next().unwrap();
    assert_eq!(
        changed["method"], "notifications/tools/list_changed",
        "{changed}"
    );
    server.send(json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/list" }));
    let (listed, _) = server.until(&json!(3));
    assert!(names(&listed).contains(&"slowpoke__read".to_string()));

    server.send(call(
        json!(4),
        "slowpoke__read",
        json!({ "path": "hello.txt" }),
    ));
    let (read, _) = server.until(&json!(4));
    assert_eq!(read["result"]["isError"], false, "{read}");
    server.finish();
    let audit = std::fs::read_to_string(env.home.path().join("audit/audit.jsonl")).unwrap();
    assert!(
        audit.lines().any(|line| {
            let record: Value = serde_json::from_str(line).unwrap();
            record["plugin"] == "slowpoke"
                && record["kind"] == "file_opened"
                && record["path"]
                    .as_str()
                    .unwrap_or_default()
                    .ends_with("hello.txt")
        }),
        "{audit}"
    );
}
