//! `just bench`: what the OS sandbox costs a native command.
//!
//! - `true` run in-process through `capstan::exec::run`, its sandbox set up
//!   and torn down each time (Landlock rules, namespaces, seccomp, limits,
//!   temporary folder, audit off); target: p50 ≤ 3 ms, ≤ 2.5x the bare
//!   spawn, faster than bubblewrap;
//! - the same with the network granted (the proxy's listener and thread);
//! - spawning `bash -c true` with no sandbox;
//! - `bwrap --ro-bind / / --unshare-net --unshare-pid true`, when bubblewrap
//!   is installed.
//!
//! Run with `cargo bench -p capstan --bench exec`; `BENCH_SAMPLES` sets the
//! number of runs (default 300).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use support::{header, measure, ratio, row, target};

#[cfg(target_os = "linux")]
fn main() {
    use capstan::exec::{Cancel, CommandLine, ExecGrants, ExecRequest, ExecSettings};
    use capstan::grants::OwnFolders;
    use capstan::grants::net::NetGrant;

    let samples: usize = std::env::var("BENCH_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let ws = tempfile::tempdir().unwrap();
    let grants = ExecGrants::resolve(
        &ExecSettings::default(),
        ws.path(),
        None,
        &OwnFolders::default(),
    )
    .unwrap();
    let cancel = Cancel::new();
    let request = ExecRequest::new(CommandLine::Argv(vec!["true".into()]));
    let run = |request: &ExecRequest| {
        let outcome = capstan::exec::run(request, &grants, &cancel, &mut |_| {}).unwrap();
        assert_eq!(outcome.exit_code(), 0);
    };
    // Warm up: the seccomp filter is compiled once per process.
    run(&request);
    let sandboxed = measure(samples, || run(&request));
    let net_request = ExecRequest {
        net: vec![NetGrant::parse("https://example.com").unwrap()],
        ..request.clone()
    };
    let with_net = measure(samples, || run(&net_request));
    let shell_request = ExecRequest::new(CommandLine::Shell("true".into()));
    let shell = measure(samples, || run(&shell_request));
    let bare = measure(samples, || {
        let status = Command::new("bash")
            .args(["-c", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    });
    let bwrap_args = [
        "--ro-bind",
        "/",
        "/",
        "--unshare-net",
        "--unshare-pid",
        "true",
    ];
    let bwrap_works = Command::new("bwrap")
        .args(bwrap_args)
        .status()
        .is_ok_and(|s| s.success());
    let bwrap = bwrap_works.then(|| {
        measure(samples, || {
            let status = Command::new("bwrap").args(bwrap_args).status().unwrap();
            assert!(status.success());
        })
    });

    header("capstan exec sandbox benchmark");
    row(
        "exec.run `true` in the sandbox (set up + torn down)",
        &sandboxed,
    );
    row("exec.run `bash -c true` in the sandbox", &shell);
    row("exec.run `true` with a network grant (proxy)", &with_net);
    row("spawn `bash -c true`, no sandbox", &bare);
    match &bwrap {
        Some(bwrap) => row(
            "bwrap --ro-bind / / --unshare-net --unshare-pid true",
            bwrap,
        ),
        None => println!("bwrap: not installed (apt-get install -y bubblewrap), skipped"),
    }
    println!();
    println!(
        "sandboxed `bash -c true` / bare `bash -c true`: {:.2}x (p50)",
        ratio(shell.p50, bare.p50)
    );
    println!(
        "sandboxed `true` / bare `bash -c true`: {:.2}x (p50)",
        ratio(sandboxed.p50, bare.p50)
    );
    if let Some(bwrap) = &bwrap {
        println!(
            "sandboxed `true` / bwrap `true`: {:.2}x (p50; below 1 is faster)",
            ratio(sandboxed.p50, bwrap.p50)
        );
    }
    println!();
    target(
        "exec.run `true`, sandbox set up and torn down, p50",
        sandboxed.p50,
        Duration::from_millis(3),
    );
    target(
        "exec.run `true` p50 vs 2.5x bare `bash -c true`",
        sandboxed.p50,
        bare.p50.mul_f64(2.5),
    );
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("the exec sandbox benchmark needs Linux");
}
