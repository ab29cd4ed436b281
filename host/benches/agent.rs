//! `just bench`: the agent loop's figures, each beside a baseline measured
//! in the same run.
//!
//! - one turn in which a model answering instantly asks for 5 `fs.read`
//!   calls at once and then finishes: the loop's whole cost per turn
//!   (target: p50 ≤ 1 ms), against the same 5 calls made directly;
//! - startup: a whole `capstan -p` process with the first-party plugins and
//!   a scripted model that answers at once, and the time it reports from
//!   start to the first prompt (target: ≤ 50 ms), against spawning `cat`.
//! - the turn and the direct calls with logging off and at the default
//!   level (a log file, as a session has), in blocks that alternate: the
//!   loop overhead moves by at most 5%.
//!
//! Run with `cargo bench -p capstan --bench agent`; `BENCH_SAMPLES` scales
//! the number of samples (default 6000 turns); `BENCH_LOG_FILTER` replaces
//! the default level's filter in the logging figures (`warn,capstan=debug`
//! measures what `-v` costs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use support::{fmt, header, logging_row, measure, measure_interleaved, ratio, row, single, target};

use capstan::agent::{Agent, AgentConfig, AgentEvent, Frontend, Interrupt, Toolbox, TurnEnd};
use capstan::model::{
    Block, EventSink, ModelFuture, Provider, Request, Response, Role, StopReason, Usage,
};
use capstan::plugin::Catalog;
use capstan::policy::{Mode, Policy};
use capstan::sandbox::{Limits, Sandbox};

/// Answers at once: five reads for a user's prompt, then a closing text.
struct InstantModel;

impl Provider for InstantModel {
    fn name(&self) -> &str {
        "instant"
    }

    fn stream<'a>(&'a self, request: &'a Request, _events: EventSink<'a>) -> ModelFuture<'a> {
        let after_tools = request
            .messages
            .last()
            .is_some_and(|m| matches!(m.content.first(), Some(Block::ToolResult { .. })));
        Box::pin(async move {
            let (content, stop_reason) = if after_tools {
                (
                    vec![Block::Text {
                        text: "done".into(),
                    }],
                    StopReason::EndTurn,
                )
            } else {
                let calls = (0..5)
                    .map(|i| Block::ToolUse {
                        id: format!("call_{i}"),
                        name: "fs__read".into(),
                        input: serde_json::json!({ "path": format!("file{i}.txt") }),
                    })
                    .collect();
                (calls, StopReason::ToolUse)
            };
            Ok(Response {
                content,
                stop_reason,
                usage: Usage::default(),
            })
        })
    }
}

struct Quiet;

impl Frontend for Quiet {
    fn event(&mut self, _event: AgentEvent<'_>) {}
}

fn main() {
    let samples: usize = std::env::var("BENCH_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6000);
    let process_samples = (samples / 20).max(20);

    let dir = tempfile::tempdir().unwrap();
    // Logging as a session has it (a log file, the default level), turned
    // off and on between rounds of the same measurement.
    let log = capstan::logging::init_in(dir.path().join("logs"), "bench.log", "off").unwrap();
    // `BENCH_LOG_FILTER` replaces the default level's filter, to see what
    // a part of the logging costs (`warn`: the subscriber, but no lines).
    let on_filter = std::env::var("BENCH_LOG_FILTER")
        .unwrap_or_else(|_| capstan::logging::default_filter(0).to_string());
    let switch = |on: bool| {
        let filter = if on { on_filter.as_str() } else { "off" };
        log.set_filter(filter).unwrap();
    };
    let ws = dir.path().join("ws");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&ws).unwrap();
    for i in 0..5 {
        let text: String = (1..=40)
            .map(|n| format!("line {n} of file {i}\n"))
            .collect();
        std::fs::write(ws.join(format!("file{i}.txt")), text).unwrap();
    }

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sandbox = Sandbox::new(&capstan::home::Home::at(
        home.to_path_buf(),
        home.join("cache"),
    ))
    .unwrap();
    let mut toolbox = rt
        .block_on(Toolbox::load(
            sandbox,
            &Catalog::builtin(),
            &ws,
            Limits::default(),
        ))
        .unwrap();
    // Every call is recorded in the audit log, as in a session
    // (`BENCH_AUDIT=off` leaves it out, to see what recording costs).
    if std::env::var("BENCH_AUDIT").as_deref() != Ok("off") {
        let log = capstan::audit::AuditLog::open(&home.join("audit/audit.jsonl")).unwrap();
        toolbox.set_audit(log);
    }

    // Baseline: the same five calls, made directly one after another.
    let read = toolbox.find("fs__read").unwrap().clone();
    let inputs: Vec<serde_json::Value> = (0..5)
        .map(|i| serde_json::json!({ "path": format!("file{i}.txt") }))
        .collect();
    let direct = |toolbox: &Toolbox| {
        rt.block_on(async {
            for input in &inputs {
                let (result, _) = toolbox.call(&read, input, None).await;
                assert!(result.unwrap().contains("line 40"));
            }
        });
    };
    for _ in 0..100 {
        direct(&toolbox);
    }

    let mut agent = Agent::new(
        Box::new(InstantModel),
        toolbox,
        Policy::new(Mode::Default, Vec::new()),
        AgentConfig::new("instant", "bench"),
        ws.clone(),
        None,
    );
    let interrupt = Interrupt::new();
    let turn = |agent: &mut Agent| {
        agent.clear(None).unwrap();
        let report = rt
            .block_on(agent.run_turn("read the files", &mut Quiet, &interrupt))
            .unwrap();
        assert_eq!(report.end, TurnEnd::Finished(StopReason::EndTurn));
        assert_eq!(report.tool_calls, 5);
        let results = &agent.messages()[2];
        assert_eq!(results.role, Role::User);
        assert!(results.content.iter().all(|b| matches!(
            b,
            Block::ToolResult { is_error: false, content, .. } if content.contains("line 40")
        )));
    };
    for _ in 0..100 {
        turn(&mut agent);
    }
    // The four figures are sampled in alternating blocks, so that the
    // machine's drift during the run reaches each alike: the direct calls
    // and the turn, each with logging off and at the default level.
    let [direct_calls, direct_logged, turns, turns_logged] =
        measure_interleaved(samples, switch, |which| match which {
            0 | 1 => direct(agent.toolbox()),
            _ => turn(&mut agent),
        });
    log.flush();
    let logged = std::fs::read_to_string(dir.path().join("logs/bench.log")).unwrap();
    if std::env::var_os("BENCH_LOG_FILTER").is_none() {
        // A turn that goes well writes no line at the default level.
        assert!(!logged.contains("turn done"), "{logged}");
    }

    // Startup: whole processes with a scripted model that answers at once.
    let script = dir.path().join("hello.json");
    std::fs::write(&script, r#"{"turns":[{"text":"hello"}]}"#).unwrap();
    let capstan = env!("CARGO_BIN_EXE_capstan");
    let mut ready_ms = Vec::new();
    let session = |ws: &Path, ready_ms: &mut Vec<f64>| {
        let out = Command::new(capstan)
            .args(["-p", "hi", "-v", "--model"])
            .arg(format!("scripted:{}", script.display()))
            .current_dir(ws)
            .env("CAPSTAN_HOME", &home)
            .env_remove("CAPSTAN_CACHE_DIR")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("hello"));
        let ready = stderr
            .lines()
            .find_map(|l| l.strip_prefix("capstan: session ready in "))
            .and_then(|l| l.strip_suffix(" ms"))
            .and_then(|ms| ms.parse::<f64>().ok())
            .expect("print mode with -v reports when the session is ready");
        ready_ms.push(ready);
    };
    session(&ws, &mut ready_ms);
    ready_ms.clear();
    let process = measure(process_samples, || session(&ws, &mut ready_ms));
    ready_ms.sort_by(f64::total_cmp);
    let ready_p50 = Duration::from_secs_f64(ready_ms[ready_ms.len() / 2] / 1e3);
    let cat = measure(process_samples, || {
        let out = Command::new("cat")
            .arg(ws.join("file0.txt"))
            .output()
            .unwrap();
        assert!(out.status.success());
    });

    header("capstan agent benchmark");
    row("turn: instant model, 5 parallel fs.read, answer", &turns);
    row(
        "  baseline: the same 5 fs.read calls, made directly",
        &direct_calls,
    );
    row("capstan -p with a scripted model, whole process", &process);
    single(
        "  of which: start to first prompt (reported by -v)",
        ready_p50,
    );
    row("cat, a native process (baseline)", &cat);
    println!();
    let overhead = turns.p50.saturating_sub(direct_calls.p50);
    println!(
        "a whole turn costs {:.2}x the bare tool calls: {} of loop overhead (p50)",
        ratio(turns.p50, direct_calls.p50),
        fmt(overhead)
    );
    println!(
        "a whole capstan -p session takes {:.1}x the time of spawning cat (p50)",
        ratio(process.p50, cat.p50)
    );
    println!();
    println!("logging (a log file at the default level) against logging off, p50:");
    logging_row("  turn: 5 parallel fs.read", &turns, &turns_logged);
    logging_row(
        "  the same 5 calls, made directly",
        &direct_calls,
        &direct_logged,
    );
    let overhead_logged = turns_logged.p50.saturating_sub(direct_logged.p50);
    println!(
        "{:<w$} off {:>10}  default level {:>10}  ratio {:.3}",
        "  loop overhead",
        fmt(overhead),
        fmt(overhead_logged),
        ratio(overhead_logged, overhead),
        w = support::LABEL_WIDTH
    );
    println!();
    target(
        "turn with 5 parallel fs.read, model excluded, p50",
        turns.p50,
        Duration::from_millis(1),
    );
    target(
        "loop overhead with logging at the default level, against off",
        overhead_logged,
        overhead.mul_f64(1.05),
    );
    target(
        "startup to first prompt p50",
        ready_p50,
        Duration::from_millis(50),
    );
}
