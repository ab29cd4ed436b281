//! Credential files inside the tool folders commands may read, through the
//! real binary, with a user home of the test's own (never the real one):
//! each listed credential file is planted with a secret, and a command
//! reads them through `capstan exec` (with and without namespaces), through
//! the model's `exec.run` in a `-p` session against the mock model, and
//! through a local MCP stdio server (the FastMCP fixture) — and never gets
//! a secret, while the tool folders' other files stay readable. A user who
//! names one in `[exec] read` gets it readable, with a warning.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::json;
use support::fastmcp::{API_KEY, add_stdio, assert_ok};
use support::mock_model::script;
use support::{Env, stderr, stdout};
use tempfile::TempDir;

/// Each credential file, relative to the home, and its secret.
const CREDENTIALS: &[(&str, &str)] = &[
    (".cargo/credentials.toml", "SECRET-CARGO-TOML"),
    (".cargo/credentials", "SECRET-CARGO-OLD"),
    (".m2/settings.xml", "SECRET-MAVEN-PASSWORD"),
    (".m2/settings-security.xml", "SECRET-MAVEN-MASTER"),
    (".gradle/gradle.properties", "SECRET-GRADLE-SIGNING"),
    (".npmrc", "SECRET-NPM-TOKEN"),
    (".pypirc", "SECRET-PYPI-TOKEN"),
    (".docker/config.json", "SECRET-DOCKER-AUTH"),
    (".kube/config", "SECRET-KUBE-TOKEN"),
    (".config/gh/hosts.yml", "SECRET-GH-TOKEN"),
    (".netrc", "SECRET-NETRC-PASSWORD"),
    (".git-credentials", "SECRET-GIT-CREDENTIALS"),
    (".config/git/credentials", "SECRET-GIT-CONFIG-CREDENTIALS"),
];

/// Other files of the same tool folders, which commands still read.
const VISIBLE: &[(&str, &str)] = &[
    (".cargo/config.toml", "visible-cargo-config"),
    (".cargo/bin/tool", "visible-cargo-bin"),
    (".m2/repository/a/a.pom", "visible-maven-repository"),
    (".gradle/init.gradle", "visible-gradle-init"),
    (".config/git/ignore", "visible-git-ignore"),
];

/// The folders readable beside the defaults: the git config folder (its
/// `credentials` must still be hidden).
const CONFIG: &str =
    "[exec]\nread = [\"~/.cargo\", \"~/.m2\", \"~/.gradle\", \"~/.npm\", \"~/.config/git\"]\n";

/// A fake user home holding every credential file and the visible ones.
fn fake_home() -> TempDir {
    let home = tempfile::tempdir().unwrap();
    for (rel, text) in CREDENTIALS.iter().chain(VISIBLE) {
        let path = home.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("{text}\n")).unwrap();
    }
    std::fs::create_dir_all(home.path().join(".npm")).unwrap();
    home
}

/// Every path a command may try for each file: through the private `HOME`
/// (`$HOME/.cargo` is a link to the user's `~/.cargo`) and by its real
/// path.
fn paths(home: &Path, files: &[(&str, &str)]) -> Vec<String> {
    let home = home.canonicalize().unwrap();
    files
        .iter()
        .flat_map(|(rel, _)| [format!("$HOME/{rel}"), home.join(rel).display().to_string()])
        .collect()
}

fn cat_all(home: &Path) -> String {
    let mut script = String::new();
    for path in paths(home, CREDENTIALS).iter().chain(&paths(home, VISIBLE)) {
        script.push_str(&format!("cat \"{path}\" 2>&1; "));
    }
    script.push_str("echo end");
    script
}

fn assert_secrets_hidden(text: &str) {
    for (rel, secret) in CREDENTIALS {
        assert!(!text.contains(secret), "{rel} was read:\n{text}");
    }
}

fn assert_visible(text: &str) {
    for (rel, visible) in VISIBLE {
        assert!(
            text.matches(visible).count() == 2,
            "{rel} not readable (twice):\n{text}"
        );
    }
}

fn setup(namespaces: bool) -> (Env, TempDir) {
    let env = Env::new();
    let mut config = CONFIG.to_string();
    if !namespaces {
        config.push_str("namespaces = \"off\"\n");
    }
    std::fs::write(env.home.path().join("config.toml"), config).unwrap();
    (env, fake_home())
}

fn capstan_exec(env: &Env, home: &Path, script: &str) -> Output {
    let mut cmd = env.capstan_std();
    cmd.env("HOME", home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(["exec", "--", "bash", "-c", script]);
    cmd.output().unwrap()
}

fn through_capstan_exec(namespaces: bool) {
    let (env, home) = setup(namespaces);
    // The control: the test itself reads every secret.
    let control = std::process::Command::new("bash")
        .args(["-c", &cat_all(home.path())])
        .env("HOME", home.path())
        .output()
        .unwrap();
    for (_, secret) in CREDENTIALS {
        assert!(stdout(&control).contains(secret));
    }
    let out = capstan_exec(&env, home.path(), &cat_all(home.path()));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(text.contains("end"), "{text}");
    assert_secrets_hidden(&text);
    assert_visible(&text);
    // Listing a tool folder still works, and the hidden file is no way in.
    let out = capstan_exec(
        &env,
        home.path(),
        "ls $HOME/.cargo/ && cp $HOME/.cargo/credentials.toml /tmp/x 2>&1; \
         cat $HOME/.cargo/* 2>&1; grep -r SECRET $HOME/.cargo/ $HOME/.m2/ 2>&1; echo end",
    );
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(text.contains("config.toml"), "{text}");
    assert!(text.contains("end"), "{text}");
    assert_secrets_hidden(&text);
}

#[test]
fn credential_files_are_unreadable_through_capstan_exec() {
    through_capstan_exec(true);
}

#[test]
fn without_namespaces_credential_files_are_unreadable_through_capstan_exec() {
    through_capstan_exec(false);
}

fn through_exec_run(namespaces: bool) {
    let (env, home) = setup(namespaces);
    let mock = script(&[(
        "t1",
        "exec__run",
        json!({"command": cat_all(home.path()), "description": "read"}),
    )]);
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "go");
    cmd.env("HOME", home.path())
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .timeout(Duration::from_secs(120));
    let out = cmd.output().unwrap();
    assert_ok(&out);
    let result = mock.result_of("t1");
    assert!(result.contains("end"), "{result}");
    assert_secrets_hidden(&result);
    assert_visible(&result);
    // Nothing of them reached the transcript or the audit log either.
    let mut stored = String::new();
    let mut stack = vec![env.home.path().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl" || e == "log") {
                stored.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
            }
        }
    }
    assert_secrets_hidden(&stored);
}

#[test]
fn credential_files_are_unreadable_through_exec_run() {
    through_exec_run(true);
}

#[test]
fn without_namespaces_credential_files_are_unreadable_through_exec_run() {
    through_exec_run(false);
}

#[test]
fn credential_files_are_unreadable_through_a_local_mcp_server() {
    let (env, home) = setup(true);
    assert_ok(&add_stdio(&env, "fx", &[], &[]));
    let real = home.path().canonicalize().unwrap();
    let mut calls = Vec::new();
    let all: Vec<(&str, &str)> = CREDENTIALS.iter().chain(VISIBLE).copied().collect();
    for (i, (rel, _)) in all.iter().enumerate() {
        calls.push((
            format!("c{i}"),
            "mcp__fx__peek",
            json!({"path": real.join(rel).display().to_string()}),
        ));
    }
    let steps: Vec<(&str, &str, serde_json::Value)> = calls
        .iter()
        .map(|(id, tool, input)| (id.as_str(), *tool, input.clone()))
        .collect();
    let mock = script(&steps);
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "go");
    cmd.env("HOME", home.path())
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .timeout(Duration::from_secs(180));
    let out = cmd.output().unwrap();
    assert_ok(&out);
    for (i, (rel, text)) in all.iter().enumerate() {
        let result = mock.result_of(&format!("c{i}"));
        if CREDENTIALS.iter().any(|(r, _)| r == rel) {
            assert!(!result.contains(text), "{rel} was read: {result}");
        } else {
            assert!(result.contains(text), "{rel} not readable: {result}");
        }
    }
}

#[test]
fn a_credential_file_named_in_exec_read_is_readable_with_a_warning() {
    let env = Env::new();
    let home = fake_home();
    std::fs::write(
        env.home.path().join("config.toml"),
        "[exec]\nread = [\"~/.cargo\", \"~/.cargo/credentials.toml\"]\n",
    )
    .unwrap();
    let out = capstan_exec(
        &env,
        home.path(),
        "cat $HOME/.cargo/credentials.toml $HOME/.cargo/credentials 2>&1; echo end",
    );
    let text = stdout(&out);
    assert!(text.contains("SECRET-CARGO-TOML"), "{text}");
    assert!(!text.contains("SECRET-CARGO-OLD"), "{text}");
    let warning = stderr(&out);
    assert!(
        warning.contains("credentials.toml") && warning.contains("the model"),
        "{warning}"
    );
}
