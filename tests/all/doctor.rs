//! `capstan doctor`: the report a bug needs, with what to fix, against a
//! temporary home and a mock model server on loopback.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::net::TcpListener;
use std::path::Path;

use serde_json::Value;
use support::mock_model::MockModel;
use support::{Env, MODEL_VARS, assert_exit, fs_component, stdout};

const API_KEY: &str = "sk-doctor-key-never-printed-31f8";

fn package(root: &Path, name: &str) -> std::path::PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fs_component(), dir.join("tool.wasm")).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        format!(
            "name = \"{name}\"\nversion = \"0.1.0\"\ndescription = \"Test plugin {name}\"\ncomponents = [\"tool.wasm\"]\n[capabilities]\nfs = [{{ path = \"$WORKSPACE\", access = \"read\" }}]\n"
        ),
    )
    .unwrap();
    dir
}

fn doctor(env: &Env, base_url: &str, extra: &[&str]) -> std::process::Output {
    let mut cmd = env.capstan();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("ANTHROPIC_API_KEY", API_KEY)
        .env("ANTHROPIC_BASE_URL", base_url)
        .arg("doctor")
        .args(extra);
    cmd.output().unwrap()
}

fn check<'a>(report: &'a Value, section: &str, name: &str) -> &'a Value {
    report["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["title"] == section)
        .unwrap_or_else(|| panic!("no section {section} in {report:#}"))["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"].as_str().unwrap().starts_with(name))
        .unwrap_or_else(|| panic!("no check {name} in {section}: {report:#}"))
}

#[test]
fn doctor_reports_versions_reachability_integrity_and_servers() {
    let env = Env::new();
    let outside = env.outside.path().canonicalize().unwrap();
    support::install(&env, &package(&outside, "intact"));
    support::install(&env, &package(&outside, "tampered"));
    let store = env.home.path().join("plugins/store/tampered");
    let folder = std::fs::read_dir(store)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(folder.join("tool.wasm")).unwrap();
    bytes.extend_from_slice(b"\0\0\0\0");
    std::fs::write(folder.join("tool.wasm"), bytes).unwrap();
    // A project server nobody approved yet.
    env.write(
        ".mcp.json",
        r#"{"mcpServers": {"notes": {"command": "notes-server", "args": []}}}"#,
    );

    let mock = MockModel::start(Vec::new());
    let out = doctor(&env, &mock.url(), &["--json"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(!text.contains(API_KEY), "the key was printed");
    let report: Value = serde_json::from_str(&text).unwrap();

    assert_eq!(
        check(&report, "capstan", "version")["detail"],
        env!("CARGO_PKG_VERSION")
    );
    let wasmtime = check(&report, "capstan", "wasmtime")["detail"]
        .as_str()
        .unwrap();
    assert!(wasmtime.starts_with("48."), "{wasmtime}");
    assert!(
        check(&report, "capstan", "built with")["detail"]
            .as_str()
            .unwrap()
            .starts_with("rustc ")
    );
    let data = check(&report, "folders", "data");
    assert_eq!(data["status"], "ok", "{data}");
    assert!(
        data["detail"]
            .as_str()
            .unwrap()
            .contains(env.home.path().to_str().unwrap())
    );

    // The model server was asked once, without the key.
    let reachable = check(&report, "model", "reachable");
    assert_eq!(reachable["status"], "ok", "{reachable}");
    assert!(
        reachable["detail"]
            .as_str()
            .unwrap()
            .starts_with("HTTP 500")
    );
    let received = mock.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].method, "GET");
    assert_eq!(received[0].header("x-api-key"), None);
    assert_eq!(check(&report, "model", "provider")["detail"], "anthropic");

    let intact = check(&report, "installed plugins", "intact");
    assert_eq!(intact["status"], "ok", "{intact}");
    let tampered = check(&report, "installed plugins", "tampered");
    assert_eq!(tampered["status"], "problem", "{tampered}");
    assert!(
        tampered["detail"]
            .as_str()
            .unwrap()
            .contains("modified: tool.wasm"),
        "{tampered}"
    );
    assert!(
        tampered["fix"]
            .as_str()
            .unwrap()
            .contains("capstan plugin install"),
        "{tampered}"
    );

    let notes = check(&report, "MCP servers", "notes");
    assert_eq!(notes["status"], "warning", "{notes}");
    assert_eq!(notes["fix"], "capstan mcp approve notes");

    let landlock = check(&report, "kernel sandbox (for native commands)", "landlock");
    assert!(
        landlock["status"] == "ok" && landlock["detail"].as_str().unwrap().starts_with("ABI ")
            || landlock["status"] == "problem",
        "{landlock}"
    );
    check(
        &report,
        "kernel sandbox (for native commands)",
        "user and network namespaces",
    );
    check(&report, "plugin toolchains", "rust");
    check(&report, "compile cache", "entries");
    assert!(report["problems"].as_u64().unwrap() >= 1);
}

#[test]
fn doctor_text_names_what_to_fix_and_still_exits_zero() {
    let env = Env::new();
    // A closed port: the server cannot be reached.
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let out = doctor(&env, &format!("http://127.0.0.1:{port}"), &[]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(!text.contains(API_KEY), "the key was printed");
    for needle in [
        "capstan\n",
        "folders\n",
        "model\n",
        "plugin toolchains\n",
        "kernel sandbox (for native commands)\n",
        "compile cache\n",
        "installed plugins\n",
        "MCP servers\n",
        "logs\n",
    ] {
        assert!(text.contains(needle), "no section {needle:?} in:\n{text}");
    }
    let line = text
        .lines()
        .position(|l| l.contains("reachable:"))
        .unwrap_or_else(|| panic!("{text}"));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[line].contains("PROBLEM"), "{text}");
    assert!(
        lines[line + 1]
            .trim_start()
            .starts_with("fix: check the base URL"),
        "{text}"
    );

    // --offline leaves the server alone.
    let out = doctor(&env, &format!("http://127.0.0.1:{port}"), &["--offline"]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("not checked (--offline)"));
}
