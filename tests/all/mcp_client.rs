//! capstan as an MCP client: real servers nobody on the project wrote (a
//! FastMCP server of the official Python SDK, over stdio and Streamable
//! HTTP, and `@modelcontextprotocol/server-filesystem` from npm) run inside
//! capstan's grants, their tools bridged as `mcp__SERVER__TOOL` into `-p`
//! sessions driven by the mock model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::fastmcp::{
    API_KEY, add_stdio, assert_ok, put_server, python_prefix, sdk1_python, session, venv,
};
use support::mock_model::script;
use support::{Env, stderr, stdout, target_dir};

fn list_json(env: &Env) -> Value {
    let out = env
        .capstan()
        .args(["mcp", "list", "--json"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert_ok(&out);
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// Every file under `dir`, read as text.
fn all_text_under(dir: &Path) -> String {
    let mut text = String::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                text.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }
    text
}

#[test]
fn mcp_add_list_remove_round_trip_with_consent() {
    let env = Env::new();
    put_server(&env);
    // Without a terminal and without --yes nothing is added.
    let refused = env
        .capstan()
        .args(["mcp", "add", "fx", "--read"])
        .arg(venv())
        .arg("--")
        .arg(sdk1_python())
        .args(["fastmcp_server.py", "stdio"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("pass --yes"),
        "{}",
        stderr(&refused)
    );
    assert!(stderr(&refused).contains("reads the workspace (read-only)"));
    assert!(stderr(&refused).contains("no network"));

    let added = add_stdio(&env, "fx", &[], &[]);
    assert_ok(&added);
    let listed = list_json(&env);
    let server = &listed["servers"][0];
    assert_eq!(server["name"], "fx");
    assert_eq!(server["allowed"], true);
    assert_eq!(server["state"], "ready", "{listed}");
    let tools: Vec<&str> = server["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"mcp__fx__echo"), "{tools:?}");
    let echo = server["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__fx__echo")
        .unwrap();
    assert_eq!(echo["read_only"], true);
    let human = env
        .capstan()
        .args(["mcp", "list"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(
        stdout(&human).contains("grant: no network"),
        "{}",
        stdout(&human)
    );
    assert!(stdout(&human).contains("tool:  mcp__fx__note (asks)"));

    let removed = env
        .capstan()
        .args(["mcp", "remove", "fx"])
        .output()
        .unwrap();
    assert_ok(&removed);
    let after = list_json(&env);
    assert_eq!(after["servers"], json!([]));
    let again = env
        .capstan()
        .args(["mcp", "remove", "fx"])
        .output()
        .unwrap();
    assert!(!again.status.success());
}

#[test]
fn a_project_mcp_json_server_runs_only_once_approved_as_defined() {
    let env = Env::new();
    put_server(&env);
    let python = sdk1_python();
    let definition = |extra: &str| {
        format!(
            r#"{{"mcpServers": {{"proj": {{"command": "{}", "args": ["fastmcp_server.py", "stdio"], "read": ["{}", "{}"]{extra}}}}}}}"#,
            python.display(),
            venv().display(),
            python_prefix().display()
        )
    };
    env.write(".mcp.json", definition(""));
    let listed = list_json(&env);
    assert_eq!(listed["servers"][0]["allowed"], false);
    assert!(
        listed["servers"][0]["state"]
            .as_str()
            .unwrap()
            .contains("capstan mcp approve proj")
    );
    let approved = env
        .capstan()
        .args(["mcp", "approve", "proj", "--yes"])
        .output()
        .unwrap();
    assert_ok(&approved);
    assert_eq!(list_json(&env)["servers"][0]["state"], "ready");
    // A definition that asks for more is not allowed by the old consent.
    env.write(".mcp.json", definition(r#", "workspace": "write""#));
    assert_eq!(list_json(&env)["servers"][0]["allowed"], false);
}

#[test]
fn a_bridged_tool_runs_in_a_print_session_under_rules_and_is_audited() {
    let env = Env::new();
    assert_ok(&add_stdio(&env, "fx", &[], &[]));
    env.write("notes/keep.txt", "kept");
    let mock = script(&[
        ("c1", "mcp__fx__echo", json!({"text": "hello"})),
        ("c2", "mcp__fx__note", json!({"name": "n.txt", "text": "x"})),
        ("c3", "mcp__fx__peek", json!({"path": "notes/keep.txt"})),
    ]);
    let out = session(&env, &mock, &["--deny", "mcp__fx__peek"]);
    assert_ok(&out);
    // Read-only: ran without asking.
    assert_eq!(mock.result_of("c1"), "echo: hello");
    // Not read-only: default mode asks, and -p has nobody to ask.
    let note = mock.result_of("c2");
    assert!(note.contains("mcp__fx__note"), "{note}");
    assert!(!env.ws.path().join("n.txt").exists());
    // A deny rule in Claude Code's naming applies.
    let peek = mock.result_of("c3");
    assert!(peek.contains("denied"), "{peek}");

    let records = support::audit_records(&env);
    let called: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "mcp_tool_called")
        .collect();
    assert_eq!(called.len(), 1, "{records:?}");
    assert_eq!(called[0]["plugin"], "mcp__fx");
    assert_eq!(called[0]["tool"], "echo");
    assert_eq!(called[0]["outcome"], "ok");
}

#[test]
fn the_os_sandbox_holds_a_local_server_to_its_grants() {
    let env = Env::new();
    assert_ok(&add_stdio(&env, "fx", &[], &[]));
    env.write("inside.txt", "inside text");
    let secret = env.write_outside("secret.txt", "outside secret");
    // A server that writes needs the workspace granted: its note fails.
    let mock = script(&[
        ("c1", "mcp__fx__peek", json!({"path": "inside.txt"})),
        (
            "c2",
            "mcp__fx__peek",
            json!({"path": secret.display().to_string()}),
        ),
        (
            "c3",
            "mcp__fx__fetch",
            json!({"url": "http://example.com/"}),
        ),
        ("c4", "mcp__fx__whoami", json!({})),
        ("c5", "mcp__fx__note", json!({"name": "n.txt", "text": "x"})),
    ]);
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "go");
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("MY_PRIVATE_TOKEN", "do-not-pass")
        .args(["--allow", "mcp__fx__note"])
        .timeout(Duration::from_secs(180));
    let out = cmd.output().unwrap();
    assert_ok(&out);
    assert_eq!(mock.result_of("c1"), "inside text");
    let outside = mock.result_of("c2");
    assert!(!outside.contains("outside secret"), "{outside}");
    assert!(
        outside.contains("ermission denied") || outside.contains("No such file"),
        "{outside}"
    );
    let fetched = mock.result_of("c3");
    assert!(!fetched.contains("Example Domain"), "{fetched}");
    let vars = mock.result_of("c4");
    assert!(!vars.contains("MY_PRIVATE_TOKEN"), "{vars}");
    assert!(!vars.contains("ANTHROPIC_API_KEY"), "{vars}");
    assert!(!vars.contains("CAPSTAN_HOME"), "{vars}");
    let note = mock.result_of("c5");
    assert!(
        note.contains("Read-only file system") || note.contains("ermission denied"),
        "{note}"
    );
    assert!(!env.ws.path().join("n.txt").exists());
}

#[test]
fn a_server_granted_the_workspace_writes_it() {
    let env = Env::new();
    assert_ok(&add_stdio(&env, "fx", &["--write-workspace"], &[]));
    let mock = script(&[("c1", "mcp__fx__note", json!({"name": "n.txt", "text": "x"}))]);
    let out = session(&env, &mock, &["--allow", "mcp__fx"]);
    assert_ok(&out);
    assert_eq!(mock.result_of("c1"), "wrote n.txt");
    assert_eq!(env.read("n.txt"), "x");
}

#[test]
fn crashes_hangs_and_floods_become_tool_errors_and_the_server_restarts() {
    let env = Env::new();
    assert_ok(&add_stdio(&env, "fx", &["--timeout", "3s"], &[]));
    let mock = script(&[
        ("c1", "mcp__fx__crash", json!({})),
        ("c2", "mcp__fx__echo", json!({"text": "after the crash"})),
        ("c3", "mcp__fx__hang", json!({})),
        ("c4", "mcp__fx__echo", json!({"text": "after the hang"})),
        ("c5", "mcp__fx__flood", json!({})),
        ("c6", "mcp__fx__echo", json!({"text": "after the flood"})),
    ]);
    let out = session(&env, &mock, &["--allow", "mcp__fx"]);
    assert_ok(&out);
    let crash = mock.result_of("c1");
    assert!(crash.contains("went down during the call"), "{crash}");
    assert_eq!(mock.result_of("c2"), "echo: after the crash");
    let hang = mock.result_of("c3");
    assert!(hang.contains("ran past its time limit"), "{hang}");
    assert_eq!(mock.result_of("c4"), "echo: after the hang");
    assert_eq!(mock.result_of("c5"), "flooded");
    assert_eq!(mock.result_of("c6"), "echo: after the flood");
    let records = support::audit_records(&env);
    let downs = records
        .iter()
        .filter(|r| r["kind"] == "mcp_server_state" && r["state"] == "down")
        .count();
    assert!(downs >= 2, "{records:?}");
}

/// A local server whose stdout is garbage: stopped as broken, reported.
#[test]
fn a_server_writing_garbage_on_stdout_is_stopped_and_reported() {
    let env = Env::new();
    env.write(
        "garbage.sh",
        "while true; do echo 'not json at all'; done\n",
    );
    let out = env
        .capstan()
        .args(["mcp", "add", "junk", "--yes", "--", "bash", "garbage.sh"])
        .output()
        .unwrap();
    assert_ok(&out);
    let listed = list_json(&env);
    let state = listed["servers"][0]["state"].as_str().unwrap().to_string();
    assert!(state.contains("not JSON-RPC"), "{state}");
    assert!(state.contains("restarting"), "{state}");
}

/// A free port on loopback.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The FastMCP fixture over Streamable HTTP on a free port; killed on drop.
struct HttpServer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_server(mode: &str) -> HttpServer {
    let dir = tempfile::tempdir().unwrap();
    let script = support::repo_root().join("tests/fixtures/mcp/fastmcp_server.py");
    let port = free_port();
    let child = Command::new(sdk1_python())
        .arg(script)
        .arg(mode)
        .arg(port.to_string())
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the FastMCP server did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    HttpServer {
        child,
        port,
        _dir: dir,
    }
}

#[test]
fn a_remote_server_gets_its_header_secret_which_nobody_sees() {
    let server = http_server("http");
    let env = Env::new();
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let added = env
        .capstan()
        .args(["mcp", "add", "web", &url, "--yes", "--header-secret"])
        .arg("Authorization=Bearer $WEB_TOKEN")
        .output()
        .unwrap();
    assert_ok(&added);
    assert!(stderr(&added).contains("sends your secret WEB_TOKEN as the header Authorization"));
    let mock = script(&[
        ("c1", "mcp__web__echo", json!({"text": "over http"})),
        ("c2", "mcp__web__auth", json!({})),
    ]);
    let token = "sekrit-token-4242";
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "go");
    cmd.env("WEB_TOKEN", token)
        .timeout(Duration::from_secs(180));
    let out = cmd.output().unwrap();
    assert_ok(&out);
    assert_eq!(mock.result_of("c1"), "echo: over http");
    assert_eq!(
        mock.result_of("c2"),
        format!("authorization: {} characters, bearer=True", 7 + token.len())
    );
    // Not in the transcript, the audit log or anything else capstan wrote,
    // nor in what the model was sent.
    assert!(!all_text_under(env.home.path()).contains(token));
    for received in mock.received() {
        assert!(!received.body.to_string().contains(token));
    }
    let records = support::audit_records(&env);
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "secret_injected" && r["name"] == "WEB_TOKEN"),
        "{records:?}"
    );
}

#[test]
fn the_older_sse_transport_works_too() {
    let server = http_server("sse");
    let env = Env::new();
    let url = format!("http://127.0.0.1:{}/sse", server.port);
    let added = env
        .capstan()
        .args(["mcp", "add", "old", &url, "--transport", "sse", "--yes"])
        .output()
        .unwrap();
    assert_ok(&added);
    let mock = script(&[("c1", "mcp__old__echo", json!({"text": "over sse"}))]);
    let out = session(&env, &mock, &[]);
    assert_ok(&out);
    assert_eq!(mock.result_of("c1"), "echo: over sse");
}

#[test]
fn a_remote_server_on_an_origin_that_resolves_to_loopback_is_refused() {
    let server = http_server("http");
    let env = Env::new();
    let url = format!("http://localhost:{}/mcp", server.port);
    let added = env
        .capstan()
        .args(["mcp", "add", "local", &url, "--yes"])
        .output()
        .unwrap();
    assert_ok(&added);
    let listed = list_json(&env);
    let state = listed["servers"][0]["state"].as_str().unwrap();
    assert!(state.contains("not started"), "{state}");
    assert!(state.contains("resolves to 127.0.0.1"), "{state}");
    let records = support::audit_records(&env);
    assert!(
        records.iter().any(|r| r["kind"] == "http_refused"),
        "{records:?}"
    );
}

#[test]
fn a_server_that_wants_oauth_is_told_to_use_a_header_secret() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("oauth.py");
    std::fs::write(
        &script,
        r#"
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"')
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#,
    )
    .unwrap();
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(port.to_string())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    let env = Env::new();
    let url = format!("http://127.0.0.1:{port}/mcp");
    assert_ok(
        &env.capstan()
            .args(["mcp", "add", "oauthy", &url, "--yes"])
            .output()
            .unwrap(),
    );
    let listed = list_json(&env);
    let _ = child.kill();
    let _ = child.wait();
    let state = listed["servers"][0]["state"].as_str().unwrap();
    assert!(state.contains("needs OAuth"), "{state}");
    assert!(state.contains("--header-secret"), "{state}");
}

/// `@modelcontextprotocol/server-filesystem`, the npm reference server,
/// installed into `target/mcp-bench` (as the bench does).
fn filesystem_server() -> PathBuf {
    let prefix = target_dir().join("mcp-bench");
    let entry = prefix.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    if !entry.is_file() {
        std::fs::create_dir_all(&prefix).unwrap();
        let status = Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg("@modelcontextprotocol/server-filesystem")
            .status()
            .expect("npm is needed for the server-filesystem test");
        assert!(status.success());
    }
    entry
}

#[test]
fn server_filesystem_under_the_sandbox_reads_the_workspace_only() {
    let entry = filesystem_server();
    let package = target_dir().join("mcp-bench");
    let env = Env::new();
    env.write("readme.txt", "workspace file");
    let secret = env.write_outside("private.txt", "private outside");
    // The server itself would allow all of `/`; the sandbox does not.
    let added = env
        .capstan()
        .args(["mcp", "add", "files", "--yes", "--read"])
        .arg(&package)
        .args(["--", "node"])
        .arg(&entry)
        .arg("/")
        .output()
        .unwrap();
    assert_ok(&added);
    let mock = script(&[
        (
            "c1",
            "mcp__files__read_text_file",
            json!({"path": env.ws_path().join("readme.txt").display().to_string()}),
        ),
        (
            "c2",
            "mcp__files__read_text_file",
            json!({"path": secret.display().to_string()}),
        ),
        (
            "c3",
            "mcp__files__write_file",
            json!({"path": env.ws_path().join("new.txt").display().to_string(), "content": "x"}),
        ),
    ]);
    let out = session(&env, &mock, &["--allow", "mcp__files__write_file"]);
    assert_ok(&out);
    assert_eq!(mock.result_of("c1"), "workspace file");
    let outside = mock.result_of("c2");
    assert!(!outside.contains("private outside"), "{outside}");
    let written = mock.result_of("c3");
    assert!(!env.ws.path().join("new.txt").exists(), "{written}");
}

/// A minimal MCP server in bash, for places where nothing else may be
/// readable: answers initialize, tools/list (one read-only tool) and
/// tools/call.
const BASH_SERVER: &str = r#"while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  case "$line" in
    *'"initialize"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"b","version":"1"}}}\n' "$id";;
    *'"tools/list"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"hello","description":"Say hello","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}}\n' "$id";;
    *'"tools/call"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"hello from bash"}]}}\n' "$id";;
  esac
done"#;

#[test]
fn a_claude_code_plugins_mcp_server_is_imported_shown_at_consent_and_bridged() {
    let env = Env::new();
    let plugin = env.outside.path().join("cc-mcp");
    std::fs::create_dir_all(plugin.join(".claude-plugin")).unwrap();
    std::fs::write(
        plugin.join(".claude-plugin/plugin.json"),
        r#"{"name": "cc-mcp", "version": "1.0.0", "description": "An MCP server"}"#,
    )
    .unwrap();
    std::fs::create_dir_all(plugin.join("skills/greeting")).unwrap();
    std::fs::write(
        plugin.join("skills/greeting/SKILL.md"),
        "---\nname: greeting\ndescription: How to greet.\n---\nUse the greet server.\n",
    )
    .unwrap();
    let servers =
        json!({"mcpServers": {"greet": {"command": "bash", "args": ["-c", BASH_SERVER]}}});
    std::fs::write(plugin.join(".mcp.json"), servers.to_string()).unwrap();
    let installed = support::install(&env, &plugin);
    assert_ok(&installed);
    let shown = stderr(&installed);
    assert!(shown.contains("MCP servers"), "{shown}");
    assert!(
        shown.contains("greet: runs `bash -c") && shown.contains("in the OS sandbox"),
        "{shown}"
    );
    let listed = list_json(&env);
    let server = &listed["servers"][0];
    assert_eq!(server["name"], "cc-mcp-greet");
    assert_eq!(server["allowed"], true);
    assert_eq!(server["state"], "ready", "{listed}");
    let mock = script(&[("c1", "mcp__cc-mcp-greet__hello", json!({}))]);
    let out = session(&env, &mock, &[]);
    assert_ok(&out);
    assert_eq!(mock.result_of("c1"), "hello from bash");
}

#[test]
fn hooks_see_bridged_tools_under_their_claude_code_names_and_decide() {
    let env = Env::new();
    assert_ok(&add_stdio(&env, "fx", &["--write-workspace"], &[]));
    let mock = script(&[
        ("c1", "mcp__fx__echo", json!({"text": "[PreToolUse:deny]"})),
        (
            "c2",
            "mcp__fx__note",
            json!({"name": "h.txt", "text": "[PreToolUse:allow]"}),
        ),
        ("c3", "mcp__fx__echo", json!({"text": "plain"})),
    ]);
    let echo = format!("hook-echo={}", support::fixture("hook-echo").display());
    let out = session(&env, &mock, &["--plugin", &echo]);
    assert_ok(&out);
    // The hook's deny stops the call before the server sees it.
    let denied = mock.result_of("c1");
    assert!(
        denied.contains("hook hook-echo blocked this call"),
        "{denied}"
    );
    // The hook's allow spares the question default mode would ask.
    assert_eq!(mock.result_of("c2"), "wrote h.txt");
    assert_eq!(env.read("h.txt"), "[PreToolUse:allow]");
    assert_eq!(mock.result_of("c3"), "echo: plain");
    let shown = stderr(&out);
    assert!(shown.contains("saw PreToolUse mcp__fx__echo"), "{shown}");
    assert!(shown.contains("saw PostToolUse mcp__fx__echo"), "{shown}");
}

#[test]
fn without_the_whole_os_sandbox_a_local_server_is_refused_with_the_reason() {
    let env = Env::new();
    std::fs::write(
        env.home.path().join("config.toml"),
        "[exec]\nnamespaces = \"off\"\n",
    )
    .unwrap();
    let added = env
        .capstan()
        .args(["mcp", "add", "b", "--yes", "--", "bash", "-c", BASH_SERVER])
        .output()
        .unwrap();
    assert_ok(&added);
    let listed = list_json(&env);
    let state = listed["servers"][0]["state"].as_str().unwrap();
    assert!(
        state.contains("runs only inside the whole OS sandbox")
            && state.contains("namespaces = \"off\""),
        "{state}"
    );
}
