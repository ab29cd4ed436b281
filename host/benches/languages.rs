//! `just bench`: what a tool written in Python or JavaScript costs, beside
//! the built-in Rust `fs` component measured in the same run.
//!
//! For the `capstan new tool` template in each language (built here with
//! `capstan plugin build`'s library, through the toolchains `just setup`
//! installs into `.toolchains/`): the component's size, its first compile,
//! loading it from the compile cache, and a fresh-instance call (targets:
//! Python ≤ 1 ms, JavaScript ≤ 0.4 ms).
//!
//! Every call gets a fresh instance, used once. A call is timed two ways:
//! with calls 5 ms apart, the way a session's come (a model turn between
//! them), which leaves the sandbox time to make the plugin's next instance
//! ahead and to reset the last one's memory off the call's path; and back to
//! back, where most calls make their own instance.
//!
//! Run with `cargo bench -p capstan --bench languages`; `BENCH_SAMPLES`
//! sets the number of calls (default 1000), `BENCH_LANGS` (`python`, `js`,
//! comma-separated) which languages are measured (default both).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::{Stats, header, measure, measure_spaced, ratio, row, single, target};

use capstan::grants::Grants;
use capstan::plugin::builtin;
use capstan::sandbox::{CallOptions, LoadedComponent, Sandbox};
use capstan::scaffold::toolchain::Toolchains;
use capstan::scaffold::{Kind, Lang, build, new};

/// How far apart the session-like calls are.
const GAP: Duration = Duration::from_millis(5);

struct Figures {
    lang: Lang,
    size: u64,
    first_compile: Duration,
    cached_load: Stats,
    sha256: Duration,
    call: Stats,
    back_to_back: Stats,
}

fn main() {
    let samples: usize = std::env::var("BENCH_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let toolchains = Toolchains::at(repo.join(".toolchains"));
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("small.txt"), "a small file\n").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sandbox = Sandbox::new(&capstan::home::Home::at(
        dir.path().join("home"),
        dir.path().join("cache"),
    ))
    .unwrap();
    let options = CallOptions {
        grants: Grants::workspace(&ws, false, sandbox.own_folders()).unwrap(),
        ..CallOptions::default()
    };
    let call = |component: &LoadedComponent, tool: &str, input: &str| {
        rt.block_on(sandbox.call_tool(component, tool, input, &options))
            .unwrap()
    };

    // The baseline: the built-in Rust fs component.
    let fs_plugin = builtin::find("fs").unwrap();
    let fs = sandbox
        .load("fs", fs_plugin.wasm, Some(fs_plugin.sha256), "fs")
        .unwrap();
    for _ in 0..100 {
        call(&fs, "read", r#"{"path":"small.txt"}"#);
    }
    let rust_call = measure_spaced(samples, GAP, || {
        call(&fs, "read", r#"{"path":"small.txt"}"#);
    });
    let rust_back_to_back = measure(samples, || {
        call(&fs, "read", r#"{"path":"small.txt"}"#);
    });

    let mut figures = Vec::new();
    let only = std::env::var("BENCH_LANGS").unwrap_or_default();
    for lang in [Lang::Python, Lang::Js] {
        if !only.is_empty() && !only.split(',').any(|l| l == lang.to_string()) {
            continue;
        }
        let project = dir.path().join(format!("hello-{lang}"));
        new::create(&project, "hello", Kind::Tool, lang).unwrap();
        let built = match build::build(&project, &toolchains) {
            Ok(report) => report,
            Err(err) => {
                eprintln!("skipping {lang}: {err}");
                continue;
            }
        };
        let wasm = std::fs::read(&built.component).unwrap();
        let origin = built.component.display().to_string();
        let started = Instant::now();
        let sha256 = capstan::sandbox::engine::sha256_hex(&wasm);
        let sha256_time = started.elapsed();
        let started = Instant::now();
        let component = sandbox
            .load("hello", &wasm, Some(&sha256), &origin)
            .unwrap();
        let first_compile = started.elapsed();
        let load = || {
            sandbox
                .load("hello", &wasm, Some(&sha256), &origin)
                .unwrap();
        };
        // Every load reads the entry and checks its MAC (see
        // `compile_cache`).
        let cached_load = measure(20, load);
        let input = r#"{"name":"Ada"}"#;
        for _ in 0..100 {
            call(&component, "hello", input);
        }
        let call_stats = measure_spaced(samples, GAP, || {
            let out = call(&component, "hello", input);
            assert_eq!(out.to_text(), "Hello, Ada!");
        });
        let back_to_back = measure(samples, || {
            call(&component, "hello", input);
        });
        figures.push(Figures {
            lang,
            size: wasm.len() as u64,
            first_compile,
            cached_load,
            sha256: sha256_time,
            call: call_stats,
            back_to_back,
        });
    }

    header("tools in other languages, a fresh instance per call");
    row("Rust fs.read, calls 5 ms apart (baseline)", &rust_call);
    row("  back to back", &rust_back_to_back);
    for f in &figures {
        let name = match f.lang {
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
            Lang::Rust => "Rust",
        };
        row(&format!("{name} hello, calls 5 ms apart"), &f.call);
        row("  back to back", &f.back_to_back);
        row(
            &format!("  {name} component, load from the compile cache"),
            &f.cached_load,
        );
        single(
            &format!(
                "  {name} component ({:.1} MB), first compile",
                f.size as f64 / 1e6
            ),
            f.first_compile,
        );
        single("    its SHA-256 (the integrity check at load)", f.sha256);
    }
    println!();
    for f in &figures {
        println!(
            "a {} call takes {:.1}x the time of the Rust fs.read call (p50; back to back {:.1}x)",
            f.lang,
            ratio(f.call.p50, rust_call.p50),
            ratio(f.back_to_back.p50, rust_back_to_back.p50),
        );
    }
    println!();
    for f in &figures {
        let limit = match f.lang {
            Lang::Python => Duration::from_millis(1),
            _ => Duration::from_micros(400),
        };
        target(
            &format!("{} fresh-instance call p50", f.lang),
            f.call.p50,
            limit,
        );
    }
}
