//! `just bench`: how long the model's text takes to reach the terminal.
//!
//! A mock model streams an answer of 1,000 text deltas — headings,
//! paragraphs with bold and code spans (some split across deltas), lists,
//! a code block and a table — through the agent loop to the terminal front
//! end, whose stdout is a pseudo-terminal. Each delta carries a marker; a
//! reader on the terminal's other side notes when each marker appears.
//! The time from a delta's arrival to its appearance is measured with
//! Markdown rendering on (target: p50 ≤ 5 ms) and beside it with rendering
//! off (`--no-color`), as a ratio.
//!
//! By design some text waits for more: a code line for its end (the next
//! delta here), a table for its last row, a span for its closer. That shows
//! in the p90, not in the p50.
//!
//! Run with `cargo bench -p capstan --bench render`; `BENCH_RUNS` sets how
//! many answers are streamed each way (default 5).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
// Pointing stdout at the pseudo-terminal takes dup/dup2 (libc): the
// descriptors are ours, and stdout is put back before anything else is
// printed.
#![allow(unsafe_code)]

mod support;

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::{fmt, header, ratio, row, stats, target};

use capstan::agent::{Agent, AgentConfig, Interrupt, Toolbox, TurnEnd};
use capstan::cli::render::{TerminalFrontend, disable_color};
use capstan::model::{
    EventSink, ModelFuture, Provider, Request, Response, StopReason, StreamEvent, Usage,
};
use capstan::policy::{Mode, Policy};
use capstan::sandbox::Sandbox;

/// How many deltas an answer has.
const DELTAS: usize = 1000;

/// The pause between deltas (a fast model streams a token every few ms).
const GAP: Duration = Duration::from_micros(500);

/// When each delta was handed to the agent, by marker.
type Sent = Arc<Mutex<Vec<Option<Instant>>>>;

/// Streams the answer, noting when each delta is sent.
struct MockModel {
    deltas: Vec<String>,
    sent: Sent,
}

impl Provider for MockModel {
    fn name(&self) -> &str {
        "mock"
    }

    fn stream<'a>(&'a self, _request: &'a Request, events: EventSink<'a>) -> ModelFuture<'a> {
        Box::pin(async move {
            for (n, delta) in self.deltas.iter().enumerate() {
                std::thread::sleep(GAP);
                self.sent.lock().unwrap()[n] = Some(Instant::now());
                events(StreamEvent::TextDelta(delta.clone()));
            }
            Ok(Response {
                content: vec![capstan::model::Block::Text {
                    text: self.deltas.concat(),
                }],
                stop_reason: StopReason::EndTurn,
                usage: Usage::default(),
            })
        })
    }
}

/// Delta `n`'s marker: `x0042`.
fn marker(n: usize) -> String {
    format!("x{n:04}")
}

/// The answer, in deltas, each with one marker.
fn answer() -> Vec<String> {
    (0..DELTAS)
        .map(|n| {
            let m = marker(n);
            match n % 100 {
                0 => format!("\n## Part {m}\n\n"),
                13 | 37 => format!(" **split {m}"),
                14 | 38 => format!(" {m} bold** and"),
                1..=48 if n % 7 == 0 => format!(" **bold {m}**"),
                1..=48 if n % 11 == 0 => format!(" `code {m}` spans"),
                1..=48 => format!(" words {m}"),
                49 => format!(" end {m}.\n\n"),
                50..=63 => format!("- item {m} of the list\n"),
                64 => format!("\n```rust\nlet {m} = 64;"),
                65..=78 => format!("\nlet {m} = {n};"),
                79 => format!("\n```\n\nAfter the code {m}."),
                80 => format!("\n\n| name | value |\n|---|---:|\n| {m} | 80 |\n"),
                81..=89 => format!("| {m} | {n} |\n"),
                90 => format!("\nAfter the table {m}"),
                _ => format!(" and {m} more"),
            }
        })
        .collect()
}

/// Where each marker was first seen on the terminal.
type Seen = Arc<Mutex<Vec<Option<Instant>>>>;

/// Reads the terminal's output, noting when each marker first appears.
fn watch(master: OwnedFd, seen: Seen) {
    std::thread::spawn(move || {
        let mut output = std::fs::File::from(master);
        let mut buffer = [0u8; 65536];
        let mut tail: Vec<u8> = Vec::new();
        while let Ok(n) = output.read(&mut buffer) {
            if n == 0 {
                break;
            }
            let now = Instant::now();
            tail.extend_from_slice(&buffer[..n]);
            let mut seen = seen.lock().unwrap();
            for at in 0..tail.len().saturating_sub(4) {
                if tail[at] != b'x' || !tail[at + 1..at + 5].iter().all(u8::is_ascii_digit) {
                    continue;
                }
                let id: usize = std::str::from_utf8(&tail[at + 1..at + 5])
                    .unwrap()
                    .parse()
                    .unwrap();
                if id < seen.len() && seen[id].is_none() {
                    seen[id] = Some(now);
                }
            }
            // A marker cut between two reads is found in the next.
            let keep = tail.len().min(4);
            tail.drain(..tail.len() - keep);
        }
    });
}

fn main() {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sandbox = Sandbox::new(&capstan::home::Home::at(home.clone(), home.join("cache"))).unwrap();

    let size = nix::pty::Winsize {
        ws_row: 50,
        ws_col: 100,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).unwrap();
    let seen: Seen = Arc::new(Mutex::new(vec![None; DELTAS]));
    watch(pty.master, seen.clone());
    let sent: Sent = Arc::new(Mutex::new(vec![None; DELTAS]));
    let mut agent = Agent::new(
        Box::new(MockModel {
            deltas: answer(),
            sent: sent.clone(),
        }),
        Toolbox::new(sandbox),
        Policy::new(Mode::Default, Vec::new()),
        AgentConfig::new("mock", "bench"),
        dir.path().to_path_buf(),
        None,
    );
    let interrupt = Interrupt::new();

    // Streams the answer `runs` times to the terminal; the latencies of
    // every delta of every run.
    let stream = |agent: &mut Agent| -> Vec<Duration> {
        let _ = std::io::stdout().flush();
        // SAFETY: duplicating and replacing descriptor 1 with one we own;
        // the original is restored below.
        let saved = unsafe { libc::dup(1) };
        assert!(saved >= 0);
        assert!(unsafe { libc::dup2(pty.slave.as_raw_fd(), 1) } >= 0);
        let mut latencies = Vec::new();
        for _ in 0..runs {
            seen.lock().unwrap().fill(None);
            sent.lock().unwrap().fill(None);
            agent.clear(None).unwrap();
            let mut frontend = TerminalFrontend::new(false, false);
            let report = rt
                .block_on(agent.run_turn("write", &mut frontend, &interrupt))
                .unwrap();
            assert_eq!(report.end, TurnEnd::Finished(StopReason::EndTurn));
            drop(frontend);
            let deadline = Instant::now() + Duration::from_secs(5);
            while seen.lock().unwrap().iter().any(Option::is_none) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            let seen = seen.lock().unwrap();
            let sent = sent.lock().unwrap();
            for n in 0..DELTAS {
                let (Some(sent), Some(seen)) = (sent[n], seen[n]) else {
                    panic!("marker {} never appeared on the terminal", marker(n));
                };
                latencies.push(seen.saturating_duration_since(sent));
            }
        }
        let _ = std::io::stdout().flush();
        // SAFETY: putting back the descriptor saved above.
        unsafe {
            libc::dup2(saved, 1);
            libc::close(saved);
        }
        latencies
    };

    let rendered = stats(stream(&mut agent));
    // Rendering off, as with --no-color: the text as it comes.
    disable_color();
    let plain = stats(stream(&mut agent));

    header("capstan terminal rendering benchmark");
    println!(
        "{runs} answers of {DELTAS} deltas each way, {} apart; time from a delta's arrival to its marker on the terminal",
        fmt(GAP)
    );
    row("delta to terminal, Markdown rendered", &rendered);
    row("delta to terminal, plain (--no-color)", &plain);
    println!(
        "rendered/plain p50 ratio: {:.2}x",
        ratio(rendered.p50, plain.p50)
    );
    target(
        "delta to terminal p50, Markdown rendered",
        rendered.p50,
        Duration::from_millis(5),
    );
}
