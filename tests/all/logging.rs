//! capstan's own log: the per-session log file under the data folder, the
//! `-v` flags, and secrets that never reach a log line.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use support::mock_model::{Answer, MockModel, Reply};
use support::{Env, assert_exit, fixture, stderr, stdout};

const API_KEY: &str = "sk-ant-LOGSECRET-api-7c41d9";
const PLUGIN_TOKEN: &str = "plugin-LOGSECRET-token-52e0";
const MCP_TOKEN: &str = "mcp-LOGSECRET-header-a93b";

/// A loopback HTTP server answering every request `200 ok`, keeping what it
/// was sent.
fn recording_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = vec![0u8; 64 * 1024];
            let n = stream.read(&mut buf).unwrap_or(0);
            keep.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&buf[..n]).into_owned());
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
            );
        }
    });
    (port, seen)
}

/// Every file under `dir` with its text.
fn files_under(dir: &Path) -> Vec<(std::path::PathBuf, String)> {
    let mut found = Vec::new();
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
                found.push((path, String::from_utf8_lossy(&bytes).into_owned()));
            }
        }
    }
    found
}

fn log_files(env: &Env) -> Vec<(std::path::PathBuf, String)> {
    files_under(&env.home.path().join("logs"))
}

#[test]
fn a_session_at_vv_logs_to_its_file_and_never_a_secret() {
    let env = Env::new();
    let (port, seen) = recording_server();
    let origin = format!("http://127.0.0.1:{port}");
    // A plugin granted a header secret for the local server (secrets go
    // over https only: the call fails at the TLS handshake, after the
    // secret was resolved and added) ...
    let dir = env.outside.path().join("hostile");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixture("hostile"), dir.join("tool.wasm")).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        format!(
            "name = \"hostile\"\nversion = \"0.1.0\"\ndescription = \"Sends requests\"\ncomponents = [\"tool.wasm\"]\n\n[capabilities]\nnet = [\"https://127.0.0.1:{port}\"]\nsecrets = [{{ name = \"LOG_PLUGIN_TOKEN\", header = \"X-Api-Key\", hosts = [\"127.0.0.1\"] }}]\n"
        ),
    )
    .unwrap();
    support::install(&env, &dir);
    // ... and an MCP server with a header secret on it too.
    let added = env
        .capstan()
        .args(["mcp", "add", "web", &format!("{origin}/mcp"), "--yes"])
        .args(["--header-secret", "Authorization=Bearer $LOG_MCP_TOKEN"])
        .output()
        .unwrap();
    assert_exit(&added, 0);

    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Fetching.")
                .call(
                    "c1",
                    "hostile__http-get",
                    json!({ "url": format!("https://127.0.0.1:{port}/data") }),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Done.").anthropic()),
    ]);
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "fetch it");
    cmd.env("LOG_PLUGIN_TOKEN", PLUGIN_TOKEN)
        .env("LOG_MCP_TOKEN", MCP_TOKEN)
        .env_remove("CAPSTAN_LOG")
        .env_remove("RUST_LOG")
        .args(["-vv", "--permission-mode", "bypass"])
        .timeout(Duration::from_secs(180));
    let out = cmd.output().unwrap();
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("Done."), "{}", stdout(&out));

    // The secrets were in use: the server got the MCP server's header, and
    // the plugin's request was attempted.
    let requests = seen.lock().unwrap().join("\n");
    assert!(requests.contains(MCP_TOKEN), "{requests}");
    assert!(
        mock.tool_result("c1").0.contains("TlsProtocolError"),
        "{:?}",
        mock.tool_result("c1")
    );
    let received = mock.received();
    assert_eq!(received[0].header("x-api-key"), Some(API_KEY));

    // The session has its log file, at trace level, with the turn, the
    // model request and the tool call in it.
    let session_id = std::fs::read_dir(env.home.path().join("sessions"))
        .unwrap()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .find_map(|f| {
            let name = f.file_name().into_string().unwrap();
            name.strip_suffix(".jsonl").map(str::to_string)
        })
        .unwrap();
    let logs = log_files(&env);
    let session_log = env
        .home
        .path()
        .join("logs")
        .join(format!("{session_id}.log"));
    let (_, text) = logs
        .iter()
        .find(|(path, _)| *path == session_log)
        .unwrap_or_else(|| panic!("no {} among {logs:?}", session_log.display()));
    for needle in ["session ready", "turn done", "TRACE", "DEBUG"] {
        assert!(text.contains(needle), "no `{needle}` in:\n{text}");
    }
    // Owner-only: a log names the user's files and prompts.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&session_log)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");

    // No secret in any log file, nor on stderr (which -vv logs to).
    for secret in [API_KEY, PLUGIN_TOKEN, MCP_TOKEN] {
        for (path, text) in &logs {
            assert!(!text.contains(secret), "{secret} in {}", path.display());
        }
        assert!(!stderr(&out).contains(secret), "{secret} on stderr");
    }
    assert!(stderr(&out).contains("session ready"), "{}", stderr(&out));
}

#[test]
fn json_output_stays_clean_at_vv_and_the_default_logs_to_the_file_only() {
    let env = Env::new();
    let mock = MockModel::start(vec![Reply::sse(Answer::text("Hi.").anthropic())]);
    let mut cmd = env.anthropic_session(&mock.url(), "k", "mock-model", "hello");
    cmd.env_remove("CAPSTAN_LOG")
        .env_remove("RUST_LOG")
        .args(["-vv", "--output-format", "json"]);
    let out = cmd.output().unwrap();
    assert_exit(&out, 0);
    let result: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(result["result"], "Hi.");

    // Without -v: the log file, and nothing on stderr.
    let env = Env::new();
    let mock = MockModel::start(vec![Reply::sse(Answer::text("Hi.").anthropic())]);
    let mut cmd = env.anthropic_session(&mock.url(), "k", "mock-model", "hello");
    cmd.env_remove("CAPSTAN_LOG").env_remove("RUST_LOG");
    let out = cmd.output().unwrap();
    assert_exit(&out, 0);
    assert!(!stderr(&out).contains("session ready"), "{}", stderr(&out));
    let logs = log_files(&env);
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert!(logs[0].1.contains("INFO"), "{}", logs[0].1);
    assert!(!logs[0].1.contains("DEBUG"), "{}", logs[0].1);
    // The session's line, and none for a turn that went well.
    assert!(logs[0].1.contains("session ready"), "{}", logs[0].1);
    assert!(!logs[0].1.contains("turn done"), "{}", logs[0].1);
    assert!(!logs[0].1.contains("model answered"), "{}", logs[0].1);
}

#[test]
fn capstan_log_off_writes_nothing_and_a_bad_filter_is_named() {
    let env = Env::new();
    let mock = MockModel::start(vec![Reply::sse(Answer::text("Hi.").anthropic())]);
    let mut cmd = env.anthropic_session(&mock.url(), "k", "mock-model", "hello");
    cmd.env("CAPSTAN_LOG", "off");
    let out = cmd.output().unwrap();
    assert_exit(&out, 0);
    assert!(log_files(&env).iter().all(|(_, text)| text.is_empty()));

    let mock = MockModel::start(vec![Reply::sse(Answer::text("Hi.").anthropic())]);
    let mut cmd = env.anthropic_session(&mock.url(), "k", "mock-model", "hello");
    cmd.env("CAPSTAN_LOG", "capstan=loud");
    let out = cmd.output().unwrap();
    assert_exit(&out, 0);
    assert!(
        stderr(&out).contains("ignoring CAPSTAN_LOG=capstan=loud"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).contains("Hi."));
}
