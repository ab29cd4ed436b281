//! Measuring and printing, shared by the benchmarks.

#![allow(dead_code)]

pub mod mcp;

use std::time::{Duration, Instant};

/// The width of a row's label.
pub const LABEL_WIDTH: usize = 56;

/// Percentiles of a set of timings.
pub struct Stats {
    pub p50: Duration,
    pub p90: Duration,
    pub samples: usize,
}

/// Times `samples` runs of `f`.
pub fn measure(samples: usize, mut f: impl FnMut()) -> Stats {
    let times = (0..samples)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect();
    stats(times)
}

/// The percentiles of `times`.
pub fn stats(mut times: Vec<Duration>) -> Stats {
    times.sort();
    let samples = times.len();
    Stats {
        p50: times[samples / 2],
        p90: times[samples * 9 / 10],
        samples,
    }
}

/// Times `samples` runs of `f`, `gap` apart: the way a session's tool
/// calls come, with a model turn between them, which gives the sandbox time
/// to make each plugin's next instance ahead. Only the runs are timed. The
/// caller spins through the gap rather than sleeping, so its core is as warm
/// for each run as back to back.
pub fn measure_spaced(samples: usize, gap: Duration, mut f: impl FnMut()) -> Stats {
    let times = (0..samples)
        .map(|_| {
            let resume = Instant::now() + gap;
            while Instant::now() < resume {
                std::hint::spin_loop();
            }
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect();
    stats(times)
}

/// The header above the rows.
pub fn header(title: &str) {
    println!();
    println!("{title} ({} build)", profile());
    println!(
        "{:<LABEL_WIDTH$} {:>10} {:>10} {:>8}",
        "", "p50", "p90", "samples"
    );
}

/// One row: a label and its percentiles.
pub fn row(label: &str, stats: &Stats) {
    println!(
        "{label:<LABEL_WIDTH$} {:>10} {:>10} {:>8}",
        fmt(stats.p50),
        fmt(stats.p90),
        stats.samples
    );
}

/// A row with a single figure.
pub fn single(label: &str, value: Duration) {
    println!("{label:<LABEL_WIDTH$} {:>10}", fmt(value));
}

/// Says whether a figure met its target.
pub fn target(label: &str, value: Duration, limit: Duration) {
    let verdict = if value <= limit { "met" } else { "MISSED" };
    println!(
        "target {label} <= {}: {} ({verdict})",
        fmt(limit),
        fmt(value)
    );
}

/// `a / b`.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-12)
}

/// A duration in µs, ms or s.
pub fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.1} µs")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// Measures `f` with logging off and with logging on, alternating in
/// `rounds` rounds of each so that drift of the machine falls on both
/// alike; `switch(true)` turns logging on, `switch(false)` off. Returns
/// (off, on).
pub fn measure_logging(
    samples: usize,
    rounds: usize,
    mut switch: impl FnMut(bool),
    mut f: impl FnMut(),
) -> (Stats, Stats) {
    let rounds = rounds.max(1);
    let per_round = (samples / rounds).max(1);
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for round in 0..rounds * 2 {
        let logging = round % 2 == 1;
        switch(logging);
        for _ in 0..per_round {
            let started = Instant::now();
            f();
            let took = started.elapsed();
            if logging {
                on.push(took);
            } else {
                off.push(took);
            }
        }
    }
    switch(false);
    (stats(off), stats(on))
}

/// Four figures: `f(0)` and `f(2)` with logging off, `f(1)` and `f(3)`
/// with it at the default level (`switch(true)`). The samples come in
/// short blocks, each started by a few runs that are not counted, so that
/// what ran before a block does not fall on its first samples. A round
/// measures `f(0)`/`f(1)` in four blocks and then `f(2)`/`f(3)` in four,
/// off-on-on-off in one round and on-off-off-on in the next: the drift of
/// the machine, and whatever the other kind of work left behind, falls
/// on a figure with logging and on the one without alike.
pub fn measure_interleaved(
    samples: usize,
    mut switch: impl FnMut(bool),
    mut f: impl FnMut(usize),
) -> [Stats; 4] {
    const BLOCK: usize = 25;
    const WARM: usize = 3;
    let rounds = samples.div_ceil(2 * BLOCK).max(1);
    let mut taken: [Vec<Duration>; 4] = Default::default();
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [0, 1, 1, 0]
        } else {
            [1, 0, 0, 1]
        };
        for kind in [0, 2] {
            for logging in order {
                let which = kind + logging;
                switch(logging == 1);
                for _ in 0..WARM {
                    f(which);
                }
                for _ in 0..BLOCK {
                    let started = Instant::now();
                    f(which);
                    taken[which].push(started.elapsed());
                }
            }
        }
    }
    switch(false);
    taken.map(stats)
}

/// Prints a figure with logging off and at the default level, side by
/// side, with their ratio.
pub fn logging_row(label: &str, off: &Stats, on: &Stats) {
    println!(
        "{label:<LABEL_WIDTH$} off {:>10}  default level {:>10}  ratio {:.3}",
        fmt(off.p50),
        fmt(on.p50),
        ratio(on.p50, off.p50)
    );
}
