//! How long each start-up phase of this process took: read the settings,
//! set up the sandbox, list the plugins, load a component, start the
//! proxy, build the session… `capstan -vv` prints the breakdown, so a
//! command that got slower shows where.
//!
//! Phases are recorded in the order they end; one that runs several times
//! (a component load per plugin) is listed each time, with its detail.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One phase: its name, what it was about (a plugin's name), how long.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// What was done, e.g. `config` or `component load`.
    pub name: &'static str,
    /// Which one, when the phase repeats (a plugin's name); may be empty.
    pub detail: String,
    /// How long it took.
    pub took: Duration,
}

/// The phases recorded so far in this process.
static PHASES: Mutex<Vec<Phase>> = Mutex::new(Vec::new());

/// At most this many phases are kept: a long session loading plugins again
/// and again must not grow the list for ever.
const MAX_PHASES: usize = 256;

/// Records that phase `name` (about `detail`) ran from `started` until now.
pub fn record(name: &'static str, detail: impl Into<String>, started: Instant) {
    let took = started.elapsed();
    let detail = detail.into();
    tracing::debug!(
        phase = name,
        detail = detail.as_str(),
        took_us = took.as_micros() as u64,
        "start-up phase"
    );
    let mut phases = PHASES.lock().unwrap_or_else(|p| p.into_inner());
    if phases.len() < MAX_PHASES {
        phases.push(Phase { name, detail, took });
    }
}

/// Records that phase `name` ran from `clock` until now, and restarts
/// `clock` for the next phase: for a sequence of phases.
pub fn lap(name: &'static str, clock: &mut Instant) {
    record(name, String::new(), *clock);
    *clock = Instant::now();
}

/// Runs `work` as phase `name` and records how long it took.
pub fn time<T>(name: &'static str, work: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let value = work();
    record(name, String::new(), started);
    value
}

/// The phases recorded so far, in the order they ended.
pub fn phases() -> Vec<Phase> {
    PHASES.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The breakdown as one line per phase, `since_start` (the time from the
/// process's start to now) first: what `-vv` prints.
pub fn report(since_start: Duration) -> String {
    let mut text = format!(
        "capstan: start-up breakdown ({:.2} ms since the process started):\n",
        ms(since_start)
    );
    for phase in phases() {
        let name = if phase.detail.is_empty() {
            phase.name.to_string()
        } else {
            format!("{} ({})", phase.name, phase.detail)
        };
        text.push_str(&format!("  {name:<32} {:>8.2} ms\n", ms(phase.took)));
    }
    text
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_listed_in_order_with_their_details() {
        let started = Instant::now();
        record("test phase one", "fs", started);
        let value = time("test phase two", || 7);
        assert_eq!(value, 7);
        let phases = phases();
        let one = phases
            .iter()
            .position(|p| p.name == "test phase one")
            .unwrap();
        let two = phases
            .iter()
            .position(|p| p.name == "test phase two")
            .unwrap();
        assert!(one < two);
        assert_eq!(phases[one].detail, "fs");
        let report = report(Duration::from_millis(3));
        assert!(report.contains("test phase one (fs)"), "{report}");
        assert!(report.contains("test phase two"), "{report}");
        assert!(
            report.starts_with("capstan: start-up breakdown (3.00 ms"),
            "{report}"
        );
    }
}
