//! `just bench`: what the OS sandbox costs a native command.
//!
//! - `true` run in-process through `capstan::exec::run`, its sandbox set up
//!   and torn down each time (Landlock rules, namespaces, seccomp, limits,
//!   temporary folder, audit off); target: p50 ≤ 3 ms, ≤ 2.5x the bare
//!   spawn, faster than bubblewrap;
//! - the same with the network granted (the proxy's listener and thread);
//! - the same without namespaces (`[exec] namespaces = "off"`, as on a
//!   system without user namespaces: Landlock, seccomp, a subreaper);
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

use support::{Stats, header, ratio, row, single, target};

/// The tenth percentile of each row, kept beside its `Stats`: on a shared
/// machine the slow runs are other processes' doing, the fast ones show
/// what the sandbox itself costs.
struct Measured {
    stats: Stats,
    p10: Duration,
}

/// Times `samples` runs of `f`.
fn measure(samples: usize, mut f: impl FnMut()) -> Measured {
    let mut times = Vec::with_capacity(samples);
    let stats = support::measure(samples, || {
        let started = std::time::Instant::now();
        f();
        times.push(started.elapsed());
    });
    times.sort();
    Measured {
        p10: times[times.len() / 10],
        stats,
    }
}

impl std::ops::Deref for Measured {
    type Target = Stats;
    fn deref(&self) -> &Stats {
        &self.stats
    }
}

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
    // Warm up: once per process, the seccomp filter is compiled, the
    // system's Landlock rules opened and the shared network namespace made.
    run(&request);
    let sandboxed = measure(samples, || run(&request));
    let net_request = ExecRequest {
        net: vec![NetGrant::parse("https://example.com").unwrap()],
        ..request.clone()
    };
    let with_net = measure(samples, || run(&net_request));
    let flat_grants = ExecGrants {
        namespaces: false,
        ..grants.clone()
    };
    let without_namespaces = measure(samples, || {
        let outcome = capstan::exec::run(&request, &flat_grants, &cancel, &mut |_| {}).unwrap();
        assert_eq!(outcome.exit_code(), 0);
    });
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
    row("exec.run `true` without namespaces", &without_namespaces);
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
        println!(
            "sandboxed `bash -c true` / bwrap `true`: {:.2}x (p50; below 1 is faster)",
            ratio(shell.p50, bwrap.p50)
        );
    }
    println!();
    println!("tenth percentile (the runs least disturbed by other processes):");
    let mut tenth = vec![
        ("exec.run `true` in the sandbox", &sandboxed),
        ("exec.run `bash -c true` in the sandbox", &shell),
        ("exec.run `true` without namespaces", &without_namespaces),
        ("spawn `bash -c true`, no sandbox", &bare),
    ];
    if let Some(bwrap) = &bwrap {
        tenth.push(("bwrap ... true", bwrap));
    }
    for (label, measured) in &tenth {
        single(label, measured.p10);
    }
    println!(
        "p10: sandboxed `true` / bare `bash -c true`: {:.2}x; sandboxed `bash -c true` / bare: {:.2}x",
        ratio(sandboxed.p10, bare.p10),
        ratio(shell.p10, bare.p10)
    );
    if let Some(bwrap) = &bwrap {
        println!(
            "p10: sandboxed `true` / bwrap `true`: {:.2}x; sandboxed `bash -c true` / bwrap: {:.2}x",
            ratio(sandboxed.p10, bwrap.p10),
            ratio(shell.p10, bwrap.p10)
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
