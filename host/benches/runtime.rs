//! `just bench`: the runtime's figures, each beside a baseline measured in
//! the same run.
//!
//! - a fresh-instance call of `fs.read` on a small file, in-process, against
//!   spawning `cat` on the same file (target: p50 ≤ 50 µs);
//! - the same call made as a session makes it, from outside a runtime with
//!   two workers (the call's task runs on one of them);
//! - the same call with file operations served on tokio's blocking pool;
//! - compiling the `fs` component once, loading it from the compile cache
//!   (a sealed, mapped entry) and loading the built-in from the code
//!   precompiled into the binary (targets: ≤ 1 ms);
//! - a whole `capstan tool call fs.read ...` process, against `cat`
//!   (target: p50 ≤ 20 ms);
//! - the fresh-instance call with logging off and at the default level (a
//!   log file, as a session has), rounds of each alternating (target: at
//!   most 5% apart).
//!
//! Run with `cargo bench -p capstan --bench runtime`; set `BENCH_SAMPLES` to
//! scale the number of samples (default 3000 in-process calls), and
//! `BENCH_CALLS_ONLY=1` to run only the in-process call loop (for a profiler).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use support::{header, logging_row, measure, measure_logging, ratio, row, single, target};

use capstan::grants::Grants;
use capstan::sandbox::builtin;
use capstan::sandbox::{CacheOutcome, CallOptions, FileIo, LoadedComponent, Sandbox};

fn main() {
    let samples: usize = std::env::var("BENCH_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let process_samples = (samples / 10).max(20);

    let dir = tempfile::tempdir().unwrap();
    // Logging as a session has it (a log file, the default level), turned
    // off and on between rounds of the same measurement.
    let log = capstan::logging::init_in(dir.path().join("logs"), "bench.log", "off").unwrap();
    let switch = |on: bool| {
        let filter = if on {
            capstan::logging::default_filter(0)
        } else {
            "off"
        };
        log.set_filter(filter).unwrap();
    };
    let ws = dir.path().join("ws");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&ws).unwrap();
    let small: String = (1..=40)
        .map(|i| format!("line {i} of a small file\n"))
        .collect();
    std::fs::write(ws.join("small.txt"), &small).unwrap();
    let input = r#"{"path":"small.txt"}"#;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let fs_plugin = builtin::find("fs").unwrap();

    // Compile once, then load from the cache.
    let mut sandbox =
        Sandbox::new(&capstan::home::Home::at(home.clone(), home.join("cache"))).unwrap();
    let started = Instant::now();
    let fs = sandbox
        .load("fs", fs_plugin.wasm, Some(fs_plugin.sha256), "fs")
        .unwrap();
    let first_compile = started.elapsed();
    assert_eq!(fs.cache_outcome(), CacheOutcome::Compiled);
    let cached_load = measure(50, || {
        let loaded = sandbox
            .load("fs", fs_plugin.wasm, Some(fs_plugin.sha256), "fs")
            .unwrap();
        assert_eq!(loaded.cache_outcome(), CacheOutcome::Hit);
    });
    let builtin_load = measure(50, || {
        let loaded = sandbox.load_builtin(fs_plugin).unwrap();
        assert_eq!(loaded.cache_outcome(), CacheOutcome::Precompiled);
    });

    let options = CallOptions {
        grants: Grants::workspace(&ws, false, sandbox.own_folders()).unwrap(),
        ..CallOptions::default()
    };
    let call = |sandbox: &Sandbox, fs: &LoadedComponent| {
        let out = rt
            .block_on(sandbox.call_tool(fs, "read", input, &options))
            .unwrap();
        assert!(out.to_text().contains("line 40 of a small file"));
    };
    for _ in 0..200 {
        call(&sandbox, &fs);
    }
    let (in_process, in_process_logged) =
        measure_logging(samples, 4, switch, || call(&sandbox, &fs));
    if std::env::var_os("BENCH_CALLS_ONLY").is_some() {
        // For profilers: the in-process call loop and nothing else.
        row("fs.read, fresh instance, in-process", &in_process);
        return;
    }
    // As a session calls: from the thread running its loop, on a runtime
    // with two workers, one of which runs the call's task.
    let workers = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let session_call = || {
        let out = workers
            .block_on(sandbox.call_tool(&fs, "read", input, &options))
            .unwrap();
        assert!(out.to_text().contains("line 40 of a small file"));
    };
    for _ in 0..200 {
        session_call();
    }
    let two_workers = measure(samples, session_call);
    sandbox.set_file_io(FileIo::BlockingPool);
    for _ in 0..200 {
        call(&sandbox, &fs);
    }
    let blocking_pool = measure(samples, || call(&sandbox, &fs));

    let cat = measure(process_samples, || {
        let out = Command::new("cat")
            .arg(ws.join("small.txt"))
            .output()
            .unwrap();
        assert_eq!(out.stdout.len(), small.len());
    });

    let capstan = env!("CARGO_BIN_EXE_capstan");
    let whole = |ws: &Path| {
        let out = Command::new(capstan)
            .args(["tool", "call", "fs.read", input])
            .current_dir(ws)
            .env("CAPSTAN_HOME", &home)
            .env_remove("CAPSTAN_CACHE_DIR")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    whole(&ws);
    let process = measure(process_samples, || whole(&ws));

    let wasm_kib = fs_plugin.wasm.len() as f64 / 1024.0;
    header("capstan runtime benchmark");
    row("fs.read, fresh instance, in-process", &in_process);
    row("  same, on two workers, as a session calls", &two_workers);
    row("  same, file I/O on tokio's blocking pool", &blocking_pool);
    row("cat small.txt, a native process (baseline)", &cat);
    row("capstan tool call fs.read, whole process", &process);
    row("fs component, load from the compile cache", &cached_load);
    row(
        "fs component, load precompiled in the binary",
        &builtin_load,
    );
    single(
        &format!("fs component ({wasm_kib:.0} KiB), first compile"),
        first_compile,
    );
    println!();
    println!(
        "in-process sandboxed fs.read is {:.1}x faster than spawning cat (p50)",
        ratio(cat.p50, in_process.p50)
    );
    println!(
        "serving file I/O on the calling thread is {:.1}x faster than the blocking pool (p50)",
        ratio(blocking_pool.p50, in_process.p50)
    );
    println!(
        "a whole capstan process takes {:.1}x the time of spawning cat (p50)",
        ratio(process.p50, cat.p50)
    );
    println!(
        "loading from the compile cache is {:.0}x faster than the first compile",
        ratio(first_compile, cached_load.p50)
    );
    println!(
        "loading precompiled from the binary is {:.0}x faster than the first compile",
        ratio(first_compile, builtin_load.p50)
    );
    println!();
    println!("logging (a log file at the default level) against logging off, p50:");
    logging_row(
        "  fs.read, fresh instance, in-process",
        &in_process,
        &in_process_logged,
    );
    println!();
    target(
        "fresh-instance fs.read p50",
        in_process.p50,
        Duration::from_micros(50),
    );
    target(
        "fresh-instance fs.read with logging at the default level, against off",
        in_process_logged.p50,
        in_process.p50.mul_f64(1.05),
    );
    target(
        "cached component load p50",
        cached_load.p50,
        Duration::from_millis(1),
    );
    target(
        "built-in component load from the binary p50",
        builtin_load.p50,
        Duration::from_millis(1),
    );
    target(
        "whole-process tool call p50",
        process.p50,
        Duration::from_millis(20),
    );
}
