//! `just bench`: what a hook costs.
//!
//! - dispatching PreToolUse to one Rust hook component (the `hook-echo`
//!   test fixture: match, fresh instance, call, combine), against spawning
//!   a process per hook and feeding it the JSON, as Claude Code's shell
//!   hooks do (`/bin/sh -c 'cat >/dev/null'`); target: p50 ≤ 100 µs;
//! - the same for the first-party guard-secrets hook, which scans the
//!   input with its detectors.
//!
//! Run with `cargo bench -p capstan --bench hooks`; `BENCH_SAMPLES` scales
//! the number of in-process dispatches (default 3000).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use support::{header, measure, ratio, row, target};

use capstan::grants::Grants;
use capstan::hooks::{self, HOOK_LIMITS, HookComponent, HookEvent, HookSet, SessionFacts};
use capstan::policy::Mode;
use capstan::sandbox::{CallOptions, Sandbox};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

/// Builds the hook-echo fixture as the tests do and returns its path.
fn hook_echo() -> PathBuf {
    let target = target_dir().join("wasm-fixtures");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--manifest-path",
        ])
        .arg(repo_root().join("tests/fixtures/hook-echo/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .unwrap();
    assert!(status.success(), "building the hook-echo fixture failed");
    target.join("wasm32-wasip2/release/hook_echo.wasm")
}

fn load(
    sandbox: &Arc<Sandbox>,
    rt: &tokio::runtime::Runtime,
    name: &str,
    path: &Path,
    ws: &Path,
) -> HookSet {
    let bytes = std::fs::read(path).unwrap();
    let component = sandbox
        .load_plugin(name, &bytes, None, &path.display().to_string())
        .unwrap();
    let options = CallOptions {
        grants: Grants::workspace(ws, false, &capstan::grants::OwnFolders::default()).unwrap(),
        limits: HOOK_LIMITS,
        ..CallOptions::default()
    };
    let hook = rt
        .block_on(HookComponent::load(sandbox.clone(), component, options))
        .unwrap();
    HookSet::new(vec![Arc::new(hook)]).unwrap()
}

fn main() {
    let samples: usize = std::env::var("BENCH_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let process_samples = (samples / 10).max(20);
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sandbox = Arc::new(
        Sandbox::new(&capstan::home::Home::at(
            dir.path().join("home"),
            dir.path().join("cache"),
        ))
        .unwrap(),
    );

    let facts = SessionFacts {
        session_id: "bench-session",
        transcript_path: None,
        cwd: &ws,
        mode: Mode::Default,
    };
    let content: String = (1..=40).map(|i| format!("let line_{i} = {i};\n")).collect();
    let payload = hooks::payload(
        HookEvent::PreToolUse,
        &facts,
        json!({
            "tool_name": "fs.write",
            "tool_input": {"path": "src/lib.rs", "content": content},
            "tool_use_id": "toolu_bench",
        }),
    );
    let text = payload.to_string();

    let dispatch = |set: &HookSet| {
        let answers = rt.block_on(set.dispatch(HookEvent::PreToolUse, &payload));
        let combined = hooks::combine(HookEvent::PreToolUse, &answers);
        assert_eq!(answers.len(), 1);
        assert!(combined.denied().is_none(), "{combined:?}");
    };

    let echo = load(&sandbox, &rt, "hook-echo", &hook_echo(), &ws);
    for _ in 0..200 {
        dispatch(&echo);
    }
    let echo_stats = measure(samples, || dispatch(&echo));

    let guard_path = target_dir().join("plugins/guard-secrets/guard_secrets.wasm");
    let guard_stats = guard_path.is_file().then(|| {
        let guard = load(&sandbox, &rt, "guard-secrets", &guard_path, &ws);
        for _ in 0..50 {
            dispatch(&guard);
        }
        measure((samples / 5).max(100), || dispatch(&guard))
    });

    let spawn = measure(process_samples, || {
        let mut child = Command::new("/bin/sh")
            .args(["-c", "cat >/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
    });

    header("capstan hooks benchmark");
    row(
        "PreToolUse to one Rust hook component (hook-echo)",
        &echo_stats,
    );
    if let Some(guard) = &guard_stats {
        row("PreToolUse to guard-secrets (scans the input)", guard);
    }
    row(
        "a process per hook: sh -c 'cat >/dev/null' fed the JSON",
        &spawn,
    );
    println!();
    println!(
        "dispatching to a sandboxed hook component is {:.1}x faster than spawning a process per hook (p50)",
        ratio(spawn.p50, echo_stats.p50)
    );
    if let Some(guard) = &guard_stats {
        println!(
            "guard-secrets, scanning {} bytes, is {:.1}x faster than spawning a process (p50)",
            content.len(),
            ratio(spawn.p50, guard.p50)
        );
    }
    println!();
    target(
        "PreToolUse dispatch to one hook p50",
        echo_stats.p50,
        Duration::from_micros(100),
    );
}
