//! `just bench`: a tool call through `capstan mcp serve`, as another agent
//! makes it.
//!
//! The real binary is started with `mcp serve` over stdio and driven by a
//! raw JSON-RPC client (this file: write a line, read a line; an SDK client
//! would add its own hundreds of microseconds): `fs.read` of a small file,
//! back to back and with a 1 ms gap between calls (the way an agent's calls
//! come). Beside it, in the same run, `@modelcontextprotocol/server-filesystem`'s
//! `read_text_file` of the same file, driven the same way, when Node.js and
//! npm are there (installed into `target/mcp-bench` on first use).
//! Target: capstan's p50 at most a quarter of server-filesystem's, back to
//! back and spaced.
//!
//! Run with `cargo bench -p capstan --bench mcp`; `BENCH_SAMPLES` sets the
//! number of calls (default 1000). `CAPSTAN_BENCH_BIN` measures another
//! capstan binary than the one built; `CAPSTAN_BENCH_BASELINE` names a
//! second one (an earlier build) measured in the same run, for a ratio.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::mcp::{RawClient, reference_server};
use support::{Stats, header, ratio, row, stats, target};

fn main() {
    let samples: usize = std::env::var("BENCH_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    // A home each: the servers' audit logs are their own.
    let homes = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let ws = tempfile::tempdir().unwrap();
    let ws_path = ws.path().canonicalize().unwrap();
    let text: String = (1..=20)
        .map(|n| format!("line {n} of a small file\n"))
        .collect();
    std::fs::write(ws_path.join("small.txt"), &text).unwrap();

    let binary = std::env::var_os("CAPSTAN_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_capstan")));
    let baseline = std::env::var_os("CAPSTAN_BENCH_BASELINE").map(PathBuf::from);
    let capstan = |binary: &Path, home: &Path| {
        let mut command = Command::new(binary);
        command
            .args(["mcp", "serve"])
            .current_dir(&ws_path)
            .env("CAPSTAN_HOME", home)
            .env("HOME", home);
        Server {
            client: RawClient::start(command),
            tool: "fs__read",
            arguments: json!({ "path": "small.txt" }),
        }
    };
    let mut servers = vec![capstan(&binary, homes[0].path())];
    if let Some(path) = &baseline {
        servers.push(capstan(path, homes[1].path()));
    }
    let reference = reference_server().map(|entry| {
        let mut command = Command::new("node");
        command.arg(entry).arg(&ws_path).current_dir(&ws_path);
        Server {
            client: RawClient::start(command),
            tool: "read_text_file",
            arguments: json!({ "path": ws_path.join("small.txt") }),
        }
    });
    let reference_skipped = match reference {
        Ok(server) => {
            servers.push(server);
            None
        }
        Err(why) => Some(why),
    };
    for server in &mut servers {
        for _ in 0..100 {
            server.call();
        }
    }
    // The servers take turns, a round of calls each, so a machine busy
    // with something else for a while weighs on all of them alike.
    let back_to_back = in_turns(&mut servers, samples, None);
    let spaced = in_turns(&mut servers, samples, Some(Duration::from_millis(1)));
    drop(servers);
    let (back_to_back, spaced) = (&back_to_back, &spaced);
    let (b2b_capstan, gap_capstan) = (&back_to_back[0], &spaced[0]);
    let earlier = baseline
        .as_ref()
        .map(|path| (path, &back_to_back[1], &spaced[1]));
    let reference = match &reference_skipped {
        None => Ok((back_to_back.last().unwrap(), spaced.last().unwrap())),
        Some(why) => Err(why),
    };

    header("capstan mcp serve (stdio, raw JSON-RPC client; the servers take turns)");
    row("capstan mcp serve: fs.read of a small file", b2b_capstan);
    row("the same, 1 ms between calls", gap_capstan);
    if let Some((path, b2b, gap)) = &earlier {
        row(&format!("baseline {}", path.display()), b2b);
        row("baseline, 1 ms between calls", gap);
    }
    match &reference {
        Ok((b2b, gap)) => {
            row("server-filesystem (Node.js): read_text_file", b2b);
            row("server-filesystem, 1 ms between calls", gap);
            println!();
            println!(
                "capstan fs.read / server-filesystem read_text_file, p50: {:.2}x back to back, {:.2}x 1 ms apart (goal: at most 0.25x)",
                ratio(b2b_capstan.p50, b2b.p50),
                ratio(gap_capstan.p50, gap.p50),
            );
            if let Some((_, old_b2b, old_gap)) = &earlier {
                println!(
                    "baseline / server-filesystem, p50: {:.2}x back to back, {:.2}x 1 ms apart",
                    ratio(old_b2b.p50, b2b.p50),
                    ratio(old_gap.p50, gap.p50),
                );
            }
            println!();
            target(
                "capstan mcp serve fs.read p50, back to back (a quarter of server-filesystem's)",
                b2b_capstan.p50,
                b2b.p50 / 4,
            );
            target("the same, 1 ms between calls", gap_capstan.p50, gap.p50 / 4);
        }
        Err(why) => {
            println!("server-filesystem: skipped ({why}; install Node.js 18+ and npm to compare)")
        }
    }
}

/// A server under measurement and the call it is timed on.
struct Server {
    client: RawClient,
    tool: &'static str,
    arguments: Value,
}

impl Server {
    fn call(&mut self) {
        self.client.call(self.tool, &self.arguments);
    }
}

/// How many calls a server makes in one turn.
const ROUND: usize = 50;

/// `samples` timed calls of each server, in turns of [`ROUND`] calls,
/// `gap` apart if given; each server's timings.
fn in_turns(servers: &mut [Server], samples: usize, gap: Option<Duration>) -> Vec<Stats> {
    let mut times: Vec<Vec<Duration>> = servers.iter().map(|_| Vec::new()).collect();
    while times[0].len() < samples {
        let round = ROUND.min(samples - times[0].len());
        for (server, times) in servers.iter_mut().zip(&mut times) {
            for _ in 0..round {
                if let Some(gap) = gap {
                    // Spun, not slept, as `measure_spaced` does.
                    let resume = Instant::now() + gap;
                    while Instant::now() < resume {
                        std::hint::spin_loop();
                    }
                }
                let started = Instant::now();
                server.call();
                times.push(started.elapsed());
            }
        }
    }
    times.into_iter().map(stats).collect()
}
