//! `just bench-cli`: what a user runs, as whole processes, each beside its
//! baseline measured in the same run.
//!
//! Every figure is a whole process started and waited for here (`wait4`:
//! wall time, the CPU time of the process and every process it waited for,
//! its peak resident memory), with the release binary cargo builds for this
//! bench. The commands of a row and their baselines take turns run by run
//! (the order flips every run), so drift of the machine falls on both alike;
//! each is run once before counting. The rows, each with its goal:
//!
//! 1. `capstan tool call fs.read` of a small file, beside `cat` of it;
//! 2. the cached load of the `fs` component, as `-v` reports it;
//! 3. `capstan exec -- true`, beside `bash -c true` and `bwrap … true`;
//! 4. `capstan -p`, one tool turn (fs.read, then an answer) with the
//!    scripted model: time and peak memory;
//! 5. the same turn against a mock Anthropic Messages server on 127.0.0.1
//!    (streamed: a `tool_use` of the read tool, then text), beside Claude
//!    Code on the same mock (`@anthropic-ai/claude-code`, pinned, installed
//!    into `target/bench-cli` by npm on first use); the mock's log shows that
//!    each run made both requests and got the file's text back;
//! 6. the first `capstan -p` with a fresh, empty `CAPSTAN_HOME`, beside the
//!    same run with a warm one: the whole run, and (against the mock server)
//!    from the process's start to the model request's arrival at the mock;
//! 7. the interactive session in a pseudo-terminal, idle 1 s after drawing
//!    its prompt: resident and peak memory (`VmRSS`, `VmHWM`);
//! 8. `capstan mcp serve`, one `fs.read` over raw JSON-RPC, beside
//!    `@modelcontextprotocol/server-filesystem`'s `read_text_file`, the calls
//!    alternating between the two servers.
//!
//! Prints the table as Markdown (aligned, so it reads in a terminal too),
//! with each row's goal and whether it was met; the README quotes it.
//! Everything runs in temporary folders, with a temporary `CAPSTAN_HOME` and
//! `HOME`, and a cleared environment; the only network is 127.0.0.1 (and
//! npm's registry for the first install of the two Node.js packages).
//!
//! Run with `cargo bench -p capstan --bench cli`. `BENCH_CLI_RUNS` sets the
//! runs of the quick commands (rows 1–4; default 30), `BENCH_CLI_SLOW_RUNS`
//! those of the slow ones (rows 5–7; default 20), `BENCH_CLI_CALLS` the MCP
//! calls (default 1000); `BENCH_CLI_QUICK=1` makes them 5, 3 and 200;
//! `BENCH_CLI_ROWS=1,3` measures only those rows; `BENCH_CLI_CAPSTAN` names
//! another binary to measure than the one cargo built; `BENCH_CLI_README=1`
//! puts the report into the README's performance section, between its
//! `bench-cli` markers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
// `wait4` for a child's resource usage, and the pseudo-terminal's
// controlling-terminal set-up, are libc calls.
#![allow(unsafe_code)]

mod support;

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::fmt;
use support::mcp::{RawClient, reference_server, target_dir};

/// The Claude Code release the mock-server row compares with.
const CLAUDE_CODE: &str = "@anthropic-ai/claude-code@2.1.330";

/// What every file read in the bench contains, so a run that did not really
/// read it is caught.
const MARKER: &str = "capstan-bench-cli marker";

/// The bwrap command line of row 3.
const BWRAP: [&str; 9] = [
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--unshare-all",
    "true",
];

/// One finished process.
struct Sample {
    wall: Duration,
    /// User and system time of the process and of every process it waited
    /// for.
    cpu: Duration,
    /// Peak resident memory, KiB (the largest of the process tree's).
    peak_kib: u64,
    stdout: String,
    stderr: String,
}

/// Runs `command` to its end (stdin empty, output to anonymous files) and
/// measures it; an error if it could not start or did not exit with 0.
fn run(command: &mut Command) -> Result<Sample, String> {
    let mut out = tempfile::tempfile().map_err(|e| e.to_string())?;
    let mut err = tempfile::tempfile().map_err(|e| e.to_string())?;
    command
        .stdin(Stdio::null())
        .stdout(out.try_clone().map_err(|e| e.to_string())?)
        .stderr(err.try_clone().map_err(|e| e.to_string())?);
    let started = Instant::now();
    let child = command
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", command.get_program()))?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed `rusage` is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `usage` are valid for writes; `pid` is our
        // child, which std has not waited for (the `Child` is dropped
        // without waiting).
        let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if waited == pid {
            break;
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("wait4: {error}"));
        }
    }
    let wall = started.elapsed();
    drop(child);
    let read = |file: &mut File| {
        let mut text = String::new();
        file.rewind().unwrap();
        file.read_to_string(&mut text).unwrap();
        text
    };
    let sample = Sample {
        wall,
        cpu: timeval(usage.ru_utime) + timeval(usage.ru_stime),
        peak_kib: usage.ru_maxrss as u64,
        stdout: read(&mut out),
        stderr: read(&mut err),
    };
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(format!(
            "{:?} failed (wait status {status}): {}{}",
            command.get_program(),
            last_lines(&sample.stdout),
            last_lines(&sample.stderr)
        ));
    }
    Ok(sample)
}

fn timeval(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
}

/// The end of a process's output, for an error message.
fn last_lines(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(6)..].join(" | ")
}

/// A check of one run's output.
type Check = Box<dyn Fn(&Sample) -> Result<(), String>>;

/// A check that stdout contains `needle`.
fn prints(needle: &'static str) -> Check {
    Box::new(move |s: &Sample| {
        if s.stdout.contains(needle) {
            Ok(())
        } else {
            Err(format!(
                "expected {needle:?} on stdout; got {:?} (stderr: {})",
                last_lines(&s.stdout),
                last_lines(&s.stderr)
            ))
        }
    })
}

fn no_check() -> Check {
    Box::new(|_| Ok(()))
}

/// One contender of a row: how to make its command, and how to tell that a
/// run did its work.
struct Contender {
    make: Box<dyn FnMut() -> Command>,
    check: Check,
}

fn contender(make: impl FnMut() -> Command + 'static, check: Check) -> Contender {
    Contender {
        make: Box::new(make),
        check,
    }
}

/// Runs every contender once (not counted), then `runs` times each, taking
/// turns run by run, the order reversed every other run. `after` sees each
/// counted run (its contender's index) and may reject it.
fn alternate(
    runs: usize,
    contenders: &mut [Contender],
    mut after: impl FnMut(usize, &Sample) -> Result<(), String>,
) -> Result<Vec<Vec<Sample>>, String> {
    let mut samples: Vec<Vec<Sample>> = contenders.iter().map(|_| Vec::new()).collect();
    for round in 0..=runs {
        let mut order: Vec<usize> = (0..contenders.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for which in order {
            let contender = &mut contenders[which];
            let sample = run(&mut (contender.make)())?;
            (contender.check)(&sample)?;
            after(which, &sample)?;
            if round > 0 {
                samples[which].push(sample);
            }
        }
    }
    Ok(samples)
}

fn median<T: Copy + PartialOrd>(values: impl IntoIterator<Item = T>) -> Option<T> {
    let mut values: Vec<T> = values.into_iter().collect();
    if values.is_empty() {
        return None;
    }
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    Some(values[values.len() / 2])
}

fn wall(samples: &[Sample]) -> Duration {
    median(samples.iter().map(|s| s.wall)).unwrap()
}

fn cpu(samples: &[Sample]) -> Duration {
    median(samples.iter().map(|s| s.cpu)).unwrap()
}

fn peak(samples: &[Sample]) -> u64 {
    median(samples.iter().map(|s| s.peak_kib)).unwrap()
}

/// KiB as MB (2^20 bytes), as `ps` and `/proc` readers print them.
fn mb(kib: u64) -> String {
    format!("{:.1} MB", kib as f64 / 1024.0)
}

fn times(a: f64, b: f64) -> f64 {
    a / b.max(1e-12)
}

/// Whether a row met its goal.
#[derive(Clone, Copy, PartialEq)]
enum Verdict {
    Pass,
    Miss,
    /// Not measured (the reason is in the row).
    None,
}

impl Verdict {
    fn of(met: bool) -> Self {
        if met { Self::Pass } else { Self::Miss }
    }

    fn and(self, other: Self) -> Self {
        match (self, other) {
            (Self::None, _) | (_, Self::None) => Self::None,
            (Self::Pass, Self::Pass) => Self::Pass,
            _ => Self::Miss,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Miss => "**miss**",
            Self::None => "n/a",
        }
    }
}

/// One line of the table.
struct Row {
    what: String,
    median: String,
    cpu: String,
    peak: String,
    baseline: String,
    ratio: String,
    goal: String,
    verdict: Verdict,
}

impl Row {
    fn new(what: &str, goal: &str) -> Self {
        Self {
            what: what.into(),
            median: "—".into(),
            cpu: "—".into(),
            peak: "—".into(),
            baseline: "—".into(),
            ratio: "—".into(),
            goal: goal.into(),
            verdict: Verdict::None,
        }
    }

    /// The row of a measurement that could not be made.
    fn failed(what: &str, goal: &str, why: &str) -> Self {
        let mut row = Self::new(what, goal);
        row.median = format!("not measured: {}", why.replace('|', "/"));
        row
    }

    /// Median wall time, CPU and peak memory of `samples`.
    fn measured(mut self, samples: &[Sample]) -> Self {
        self.median = fmt(wall(samples));
        self.cpu = fmt(cpu(samples));
        self.peak = mb(peak(samples));
        self
    }

    fn cells(&self) -> [&str; 8] {
        [
            &self.what,
            &self.median,
            &self.cpu,
            &self.peak,
            &self.baseline,
            &self.ratio,
            &self.goal,
            self.verdict.word(),
        ]
    }
}

/// `rows` as a Markdown table with aligned columns.
fn table(rows: &[Row]) -> String {
    let head = [
        "what the user runs",
        "median",
        "CPU",
        "peak RSS",
        "baseline, same run (median)",
        "ratio",
        "goal",
        "result",
    ];
    let mut widths = head.map(|h| h.chars().count());
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row.cells()) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 8]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell}{}", " ".repeat(width - cell.chars().count())))
            .collect();
        format!("| {} |\n", padded.join(" | "))
    };
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    let mut text = line(head) + &format!("|-{}-|\n", rule.join("-|-"));
    for row in rows {
        text += &line(row.cells());
    }
    text
}

/// The benchmark's settings and its temporary world.
struct Bench {
    capstan: PathBuf,
    runs: usize,
    slow_runs: usize,
    calls: usize,
    /// A `CAPSTAN_HOME` whose compile cache is warm.
    home: PathBuf,
    /// The workspace the commands run in: `small.txt` is the file read.
    ws: PathBuf,
    /// The scripted model's one tool turn.
    script: PathBuf,
    /// Where temporary homes are made.
    scratch: PathBuf,
    notes: Vec<String>,
}

impl Bench {
    /// A command with a cleared environment: `PATH`, the temporary homes,
    /// the workspace as its folder.
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        self.command_in(program, &self.home)
    }

    fn command_in(&self, program: impl AsRef<std::ffi::OsStr>, home: &Path) -> Command {
        let mut command = Command::new(program);
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("CAPSTAN_HOME", home)
            .env("LANG", "C.UTF-8")
            .current_dir(&self.ws);
        command
    }

    fn capstan(&self, args: &[&str]) -> Command {
        let mut command = self.command(&self.capstan);
        command.args(args);
        command
    }

    fn scripted_turn(&self, home: &Path) -> Command {
        let mut command = self.command_in(&self.capstan, home);
        command
            .args(["-p", "Read small.txt", "--model"])
            .arg(format!("scripted:{}", self.script.display()));
        command
    }
}

/// Row 1 and 2: `capstan tool call fs.read` beside `cat`, and the cached
/// load `-v` reports (from the same kind of run, with `-v`).
fn tool_call(bench: &Bench) -> Vec<Row> {
    let what = "`capstan tool call fs.read`";
    let goal = "≤ 3× `cat`";
    let load_what = "cached load of the `fs` component (`-v` prints it)";
    let load_goal = "≤ 1 ms";
    let input = r#"{"path":"small.txt"}"#;
    let call = |verbose: bool| {
        let mut command = bench.capstan(&["tool", "call", "fs.read", input]);
        if verbose {
            command.arg("-v");
        }
        command
    };
    let (plain, verbose) = (call(false), call(true));
    let mut cat = bench.command("cat");
    cat.arg("small.txt");
    let mut contenders = [
        contender(command_copier(plain), prints(MARKER)),
        contender(command_copier(cat), prints(MARKER)),
        contender(command_copier(verbose), prints(MARKER)),
    ];
    let mut loads = Vec::new();
    let mut unparsed = None;
    let measured = alternate(bench.runs, &mut contenders, |which, sample| {
        if which == 2 {
            match load_ms(&sample.stderr) {
                Some(ms) => loads.push(ms),
                None => unparsed = Some(last_lines(&sample.stderr)),
            }
        }
        Ok(())
    });
    let samples = match measured {
        Ok(samples) => samples,
        Err(why) => {
            return vec![
                Row::failed(what, goal, &why),
                Row::failed(load_what, load_goal, &why),
            ];
        }
    };
    let mut row = Row::new(what, goal).measured(&samples[0]);
    let ratio = times(
        wall(&samples[0]).as_secs_f64(),
        wall(&samples[1]).as_secs_f64(),
    );
    row.baseline = format!("`cat`: {}", fmt(wall(&samples[1])));
    row.ratio = format!("{ratio:.1}×");
    row.verdict = Verdict::of(ratio <= 3.0);

    let mut load = Row::new(load_what, load_goal);
    match median(loads.iter().copied()) {
        Some(ms) => {
            load.median = fmt(Duration::from_secs_f64(ms / 1e3));
            load.verdict = Verdict::of(ms <= 1.0);
        }
        None => {
            load.median = "n/a".into();
            load.ratio = "`-v` printed no load time".into();
            if let Some(stderr) = unparsed {
                eprintln!("bench-cli: no load time found in `-v` output: {stderr}");
            }
        }
    }
    vec![row, load]
}

/// The load time of the `fs` plugin in a `-v` run's stderr, in ms: the
/// last "in N ms" (or µs, s) of the line that names `plugin fs`, unless
/// that line says it was compiled.
fn load_ms(stderr: &str) -> Option<f64> {
    stderr
        .lines()
        .filter(|line| line.contains("plugin fs ") && !line.contains("compiled (once"))
        .find_map(|line| {
            let at = line.rfind(" in ")?;
            let mut words = line[at + 4..].split_whitespace();
            let number: f64 = words.next()?.parse().ok()?;
            let unit = words.next()?.trim_end_matches(|c: char| !c.is_alphabetic());
            match unit {
                "ms" => Some(number),
                "µs" | "us" => Some(number / 1e3),
                "s" => Some(number * 1e3),
                _ => None,
            }
        })
}

/// Row 3: `capstan exec -- true` beside `bash -c true` and bwrap.
fn exec(bench: &mut Bench) -> Vec<Row> {
    let what = "`capstan exec -- true`";
    let goal = "≤ 2.5× `bash -c true`, below bwrap";
    let has_bwrap = Command::new("bwrap")
        .args(BWRAP)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_bwrap {
        bench
            .notes
            .push("bwrap is missing or cannot run here: row 3 has no bwrap baseline.".into());
    }
    let command = |program: &Path, args: &[&str]| {
        let mut command = bench.command(program);
        command.args(args);
        command_copier(command)
    };
    let mut contenders = vec![
        contender(command(&bench.capstan, &["exec", "--", "true"]), no_check()),
        contender(command(Path::new("bash"), &["-c", "true"]), no_check()),
    ];
    if has_bwrap {
        contenders.push(contender(command(Path::new("bwrap"), &BWRAP), no_check()));
    }
    let samples = match alternate(bench.runs, &mut contenders, |_, _| Ok(())) {
        Ok(samples) => samples,
        Err(why) => return vec![Row::failed(what, goal, &why)],
    };
    let mut row = Row::new(what, goal).measured(&samples[0]);
    let ours = wall(&samples[0]).as_secs_f64();
    let to_bash = times(ours, wall(&samples[1]).as_secs_f64());
    row.baseline = format!("`bash -c true`: {}", fmt(wall(&samples[1])));
    row.ratio = format!("{to_bash:.1}×");
    let mut verdict = Verdict::of(to_bash <= 2.5);
    if has_bwrap {
        let to_bwrap = times(ours, wall(&samples[2]).as_secs_f64());
        row.baseline += &format!("; `bwrap … true`: {}", fmt(wall(&samples[2])));
        row.ratio += &format!("; {to_bwrap:.2}× bwrap");
        verdict = verdict.and(Verdict::of(to_bwrap < 1.0));
    } else {
        row.baseline += "; bwrap: not installed";
    }
    row.verdict = verdict;
    vec![row]
}

/// Row 4: `capstan -p`, one tool turn with the scripted model.
fn scripted(bench: &Bench) -> Vec<Row> {
    let what = "`capstan -p` one tool turn, scripted";
    let goal = "≤ 15 ms, ≤ 20 MB";
    let command = bench.scripted_turn(&bench.home);
    let copy = command_copier(command);
    let mut contenders = [contender(copy, prints(MARKER_ANSWER))];
    let samples = match alternate(bench.runs, &mut contenders, |_, s| read_happened(s)) {
        Ok(samples) => samples,
        Err(why) => return vec![Row::failed(what, goal, &why)],
    };
    let mut row = Row::new(what, goal).measured(&samples[0]);
    row.verdict = Verdict::of(
        wall(&samples[0]) <= Duration::from_millis(15) && peak(&samples[0]) <= 20 * 1024,
    );
    vec![row]
}

/// The scripted model's final answer.
const MARKER_ANSWER: &str = "bench-cli: the file was read";

/// Whether a print-mode run's tool line shows the read done.
fn read_happened(sample: &Sample) -> Result<(), String> {
    if sample.stderr.contains("✓ fs.read small.txt") {
        Ok(())
    } else {
        Err(format!(
            "the run did not show the fs.read of small.txt: {}",
            last_lines(&sample.stderr)
        ))
    }
}

/// A closure that makes copies of `command` (program, arguments,
/// environment, folder).
fn command_copier(command: Command) -> impl FnMut() -> Command + 'static {
    move || {
        let mut copy = Command::new(command.get_program());
        copy.args(command.get_args()).env_clear();
        for (key, value) in command.get_envs() {
            if let Some(value) = value {
                copy.env(key, value);
            }
        }
        if let Some(dir) = command.get_current_dir() {
            copy.current_dir(dir);
        }
        copy
    }
}

/// Row 6: the first `capstan -p` with a fresh, empty `CAPSTAN_HOME`,
/// beside the same run warm.
fn first_run(bench: &Bench) -> Vec<Row> {
    let what = "first `-p` with a fresh `CAPSTAN_HOME`";
    let goal = "≤ 2× warm";
    let fresh_homes = Arc::new(Mutex::new(Vec::<tempfile::TempDir>::new()));
    let homes = fresh_homes.clone();
    let scratch = bench.scratch.clone();
    let fresh_template = bench.scripted_turn(&bench.home);
    let fresh = move || {
        let home = tempfile::tempdir_in(&scratch).unwrap();
        let mut command = Command::new(fresh_template.get_program());
        command
            .args(fresh_template.get_args())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("CAPSTAN_HOME", home.path())
            .env("LANG", "C.UTF-8");
        if let Some(dir) = fresh_template.get_current_dir() {
            command.current_dir(dir);
        }
        // The previous run's home goes once this one is made.
        let mut homes = homes.lock().unwrap();
        homes.clear();
        homes.push(home);
        command
    };
    let mut contenders = [
        contender(fresh, prints(MARKER_ANSWER)),
        contender(
            command_copier(bench.scripted_turn(&bench.home)),
            prints(MARKER_ANSWER),
        ),
    ];
    let measured = alternate(bench.slow_runs, &mut contenders, |_, s| read_happened(s));
    fresh_homes.lock().unwrap().clear();
    let samples = match measured {
        Ok(samples) => samples,
        Err(why) => return vec![Row::failed(what, goal, &why)],
    };
    let mut row = Row::new(what, goal).measured(&samples[0]);
    let ratio = times(
        wall(&samples[0]).as_secs_f64(),
        wall(&samples[1]).as_secs_f64(),
    );
    row.baseline = format!("the same run warm: {}", fmt(wall(&samples[1])));
    row.ratio = format!("{ratio:.1}×");
    row.verdict = Verdict::of(ratio <= 2.0);
    vec![row]
}

/// Row 6, second line: from the start of `capstan -p` to its first model
/// request's arrival at the mock server, with a fresh, empty
/// `CAPSTAN_HOME` beside a warm one, in turns. Each run is waited for to
/// its end (the tool turn is served whole).
fn first_request(bench: &Bench) -> Vec<Row> {
    let what = "fresh `CAPSTAN_HOME`: start to the first model request";
    let goal = "≤ 2× warm";
    let server = MockServer::start(bench.ws.join("small.txt"));
    let command = |home: &Path| {
        let mut command = bench.command_in(&bench.capstan, home);
        command
            .args(["-p", "Read small.txt"])
            .env("ANTHROPIC_BASE_URL", &server.url)
            .env("ANTHROPIC_API_KEY", "test")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command
    };
    let once = |home: &Path| -> Result<Duration, String> {
        server.take();
        server.take_arrivals();
        let started = Instant::now();
        let status = command(home).status().map_err(|e| e.to_string())?;
        let arrivals = server.take_arrivals();
        let log = server.take();
        if !status.success() || !log.iter().any(|(_, a)| *a == Answered::ToolUse) {
            return Err(format!(
                "capstan -p against the mock failed ({status}; mock's log: {log:?})"
            ));
        }
        let first = arrivals.iter().min().ok_or("no request reached the mock")?;
        Ok(first.saturating_duration_since(started))
    };
    // The warm home has its caches: one run fills them.
    let warm_home = tempfile::tempdir_in(&bench.scratch).unwrap();
    if let Err(why) = once(warm_home.path()) {
        return vec![Row::failed(what, goal, &why)];
    }
    let (mut fresh, mut warm) = (Vec::new(), Vec::new());
    for run in 0..bench.slow_runs.max(1) {
        let home = tempfile::tempdir_in(&bench.scratch).unwrap();
        let mut measure_fresh = || once(home.path()).map(|d| fresh.push(d));
        let outcome = if run % 2 == 0 {
            measure_fresh().and_then(|()| once(warm_home.path()).map(|d| warm.push(d)))
        } else {
            once(warm_home.path())
                .map(|d| warm.push(d))
                .and_then(|()| measure_fresh())
        };
        if let Err(why) = outcome {
            return vec![Row::failed(what, goal, &why)];
        }
    }
    let (fresh, warm) = (
        median(fresh.iter().copied()).unwrap(),
        median(warm.iter().copied()).unwrap(),
    );
    let ratio = times(fresh.as_secs_f64(), warm.as_secs_f64());
    let mut row = Row::new(what, goal);
    row.median = format!("{} to the request", fmt(fresh));
    row.baseline = format!("the same warm: {}", fmt(warm));
    row.ratio = format!("{ratio:.1}×");
    row.verdict = Verdict::of(ratio <= 2.0);
    vec![row]
}

/// What the mock model server answered to one request.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Answered {
    /// A `tool_use` of the read tool.
    ToolUse,
    /// The final text, to a request carrying the read's result; whether the
    /// result held the file's text.
    Final { saw_file: bool },
    /// Text to a request that offered no read tool (a side request).
    Side,
    /// A token count, or 404 for anything else.
    Other,
}

/// A mock Anthropic Messages API server on 127.0.0.1: each request that
/// offers a read tool (`Read`, as Claude Code names it, or `fs__read`) is
/// answered with a streamed `tool_use` reading the bench's file, and once
/// the result comes back, with a streamed final text. Keeps connections
/// alive, as Node.js clients expect.
struct MockServer {
    url: String,
    log: Arc<Mutex<Vec<(String, Answered)>>>,
    /// When each request's line arrived.
    arrivals: Arc<Mutex<Vec<Instant>>>,
}

impl MockServer {
    fn start(file: PathBuf) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let (shared, arrived) = (log.clone(), arrivals.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (log, file, arrived) = (shared.clone(), file.clone(), arrived.clone());
                std::thread::spawn(move || {
                    let _ = serve_connection(stream, &file, &log, &arrived);
                });
            }
        });
        Self { url, log, arrivals }
    }

    /// When the requests since the last call arrived.
    fn take_arrivals(&self) -> Vec<Instant> {
        std::mem::take(&mut *self.arrivals.lock().unwrap())
    }

    /// What the server answered since the last call.
    fn take(&self) -> Vec<(String, Answered)> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}

fn serve_connection(
    stream: TcpStream,
    file: &Path,
    log: &Mutex<Vec<(String, Answered)>>,
    arrivals: &Mutex<Vec<Instant>>,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(());
        }
        arrivals.lock().unwrap().push(Instant::now());
        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_string();
        let path = parts.next().unwrap_or_default().to_string();
        let (mut length, mut chunked) = (0usize, false);
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 {
                return Ok(());
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
                if name == "content-length" {
                    length = value.parse().unwrap_or(0);
                } else if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
                    chunked = true;
                }
            }
        }
        let body = if chunked {
            read_chunked(&mut reader)?
        } else {
            let mut body = vec![0; length];
            reader.read_exact(&mut body)?;
            body
        };
        let (status, content_type, reply, answered) = answer(&method, &path, &body, file);
        log.lock().unwrap().push((path, answered));
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nrequest-id: req_bench\r\n\r\n",
            reply.len()
        );
        // One write for the whole reply: a second small write would wait
        // for the client's delayed acknowledgement of the first (Nagle),
        // adding ~40 ms to every request of capstan and Claude Code alike.
        let mut whole = head.into_bytes();
        whole.extend_from_slice(reply.as_bytes());
        writer.write_all(&whole)?;
        writer.flush()?;
    }
}

fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size)?;
        let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk)?;
        if size == 0 {
            return Ok(body);
        }
        body.extend_from_slice(&chunk[..size]);
    }
}

/// The mock's answer to one request: status line tail, content type, body
/// and what it was.
fn answer(
    method: &str,
    path: &str,
    body: &[u8],
    file: &Path,
) -> (&'static str, &'static str, String, Answered) {
    let route = path.split('?').next().unwrap_or_default();
    if method == "POST" && route.ends_with("/count_tokens") {
        let reply = json!({ "input_tokens": 100 }).to_string();
        return ("200 OK", "application/json", reply, Answered::Other);
    }
    if method != "POST" || route != "/v1/messages" {
        let reply = json!({"type": "error", "error": {"type": "not_found_error", "message": path}});
        return (
            "404 Not Found",
            "application/json",
            reply.to_string(),
            Answered::Other,
        );
    }
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let tools: Vec<&str> = request["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    let last = request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let results: Vec<&Value> = last["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .collect()
        })
        .unwrap_or_default();
    let read_tool = if tools.contains(&"Read") {
        Some(("Read", json!({ "file_path": file })))
    } else if tools.contains(&"fs__read") {
        Some(("fs__read", json!({ "path": "small.txt" })))
    } else {
        None
    };
    let (blocks, answered) = match read_tool {
        Some((name, input)) if results.is_empty() => (
            vec![json!({"type": "tool_use", "id": "toolu_bench_1", "name": name, "input": input})],
            Answered::ToolUse,
        ),
        Some(_) => {
            let saw_file = results.iter().any(|r| r.to_string().contains(MARKER));
            (
                vec![json!({"type": "text", "text": MARKER_ANSWER})],
                Answered::Final { saw_file },
            )
        }
        None => (vec![json!({"type": "text", "text": "ok"})], Answered::Side),
    };
    let stop = if answered == Answered::ToolUse {
        "tool_use"
    } else {
        "end_turn"
    };
    if request["stream"] != json!(true) {
        let reply = json!({"id": "msg_bench", "type": "message", "role": "assistant",
            "model": request["model"], "content": blocks, "stop_reason": stop,
            "stop_sequence": null, "usage": {"input_tokens": 100, "output_tokens": 10}});
        return ("200 OK", "application/json", reply.to_string(), answered);
    }
    (
        "200 OK",
        "text/event-stream",
        stream(&request, &blocks, stop),
        answered,
    )
}

/// `blocks` as an Anthropic Messages event stream.
fn stream(request: &Value, blocks: &[Value], stop: &str) -> String {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut body = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_bench", "type": "message",
            "role": "assistant", "content": [], "model": request["model"], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 100, "output_tokens": 1}}}),
    );
    for (index, block) in blocks.iter().enumerate() {
        let (start, delta) = if block["type"] == "tool_use" {
            let mut start = block.clone();
            start["input"] = json!({});
            let delta =
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()});
            (start, delta)
        } else {
            let delta = json!({"type": "text_delta", "text": block["text"]});
            (json!({"type": "text", "text": ""}), delta)
        };
        body += &event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        );
        body += &event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
        body += &event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    body += &event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 10}}),
    );
    body + &event("message_stop", json!({"type": "message_stop"}))
}

/// Claude Code's binary, installed into `target/bench-cli/claude-code` by
/// npm on first use (its postinstall, which puts the native binary in
/// place, run by hand when npm skipped it).
fn claude_code() -> Result<PathBuf, String> {
    let prefix = target_dir().join("bench-cli/claude-code");
    let package = prefix.join("node_modules/@anthropic-ai/claude-code");
    let binary = package.join("bin/claude.exe");
    let works = |binary: &Path| {
        Command::new(binary)
            .arg("--version")
            .env("DISABLE_TELEMETRY", "1")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if works(&binary) {
        return Ok(binary);
    }
    std::fs::create_dir_all(&prefix).map_err(|e| e.to_string())?;
    eprintln!(
        "bench-cli: installing {CLAUDE_CODE} into {}",
        prefix.display()
    );
    let status = Command::new("npm")
        .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg(CLAUDE_CODE)
        .status()
        .map_err(|e| format!("npm is not installed ({e})"))?;
    if !status.success() {
        return Err(format!("npm install {CLAUDE_CODE} failed ({status})"));
    }
    if !works(&binary) {
        let status = Command::new("node")
            .arg("install.cjs")
            .current_dir(&package)
            .status()
            .map_err(|e| format!("node is not installed ({e})"))?;
        if !status.success() || !works(&binary) {
            return Err(format!(
                "{CLAUDE_CODE} installed, but its binary does not run ({status})"
            ));
        }
    }
    Ok(binary)
}

/// Row 5: one tool turn against the mock server, capstan beside Claude Code.
fn mock_server(bench: &mut Bench) -> Vec<Row> {
    let what = "`capstan -p` one tool turn against a mock Anthropic server";
    let goal = "≥ 20× faster, ≥ 10× less memory than Claude Code";
    let server = MockServer::start(bench.ws.join("small.txt"));
    let mut ours = bench.capstan(&["-p", "Read small.txt"]);
    ours.env("ANTHROPIC_BASE_URL", &server.url)
        .env("ANTHROPIC_API_KEY", "test");
    let mut contenders = vec![contender(command_copier(ours), prints(MARKER_ANSWER))];
    let claude = claude_code();
    let claude_home = tempfile::tempdir_in(&bench.scratch).unwrap();
    match &claude {
        Ok(binary) => {
            let mut theirs = bench.command_in(binary, claude_home.path());
            theirs
                .env_remove("CAPSTAN_HOME")
                .env("ANTHROPIC_BASE_URL", &server.url)
                .env("ANTHROPIC_API_KEY", "test")
                .env("DISABLE_TELEMETRY", "1")
                .env("DISABLE_AUTOUPDATER", "1")
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                .env("IS_SANDBOX", "1")
                .args(["-p", "Read small.txt", "--dangerously-skip-permissions"]);
            contenders.push(contender(command_copier(theirs), prints(MARKER_ANSWER)));
        }
        Err(why) => bench.notes.push(format!(
            "Claude Code could not be installed ({why}): row 5 has no baseline."
        )),
    }
    server.take();
    let mut extra = [0usize; 2];
    let measured = alternate(bench.slow_runs, &mut contenders, |which, _| {
        let log = server.take();
        let tool_use = log.iter().any(|(_, a)| *a == Answered::ToolUse);
        let saw_file = log
            .iter()
            .any(|(_, a)| *a == Answered::Final { saw_file: true });
        if !(tool_use && saw_file) {
            return Err(format!(
                "{} did not make both requests with the file's text (mock's log: {log:?})",
                ["capstan", "Claude Code"][which]
            ));
        }
        extra[which] = extra[which].max(log.len());
        Ok(())
    });
    let samples = match measured {
        Ok(samples) => samples,
        Err(why) => return vec![Row::failed(what, goal, &why)],
    };
    let mut row = Row::new(what, goal).measured(&samples[0]);
    if samples.len() == 2 && !samples[1].is_empty() {
        let (them, us) = (&samples[1], &samples[0]);
        let faster = times(wall(them).as_secs_f64(), wall(us).as_secs_f64());
        let less_cpu = times(cpu(them).as_secs_f64(), cpu(us).as_secs_f64());
        let less_memory = times(peak(them) as f64, peak(us) as f64);
        row.baseline = format!(
            "Claude Code {}: {}, {} CPU, {}",
            CLAUDE_CODE.rsplit('@').next().unwrap_or_default(),
            fmt(wall(them)),
            fmt(cpu(them)),
            mb(peak(them))
        );
        row.ratio =
            format!("{faster:.1}× faster, {less_cpu:.1}× less CPU, {less_memory:.1}× less memory");
        row.verdict = Verdict::of(faster >= 20.0 && less_memory >= 10.0);
        bench.notes.push(format!(
            "Row 5: the mock's log shows every run's tool_use and the request with the file's text; at most {} requests per capstan run, {} per Claude Code run.",
            extra[0], extra[1]
        ));
    } else {
        row.baseline = "Claude Code: not installed".into();
    }
    vec![row]
}

/// Row 7: the interactive session, idle 1 s after drawing its prompt.
fn idle_session(bench: &Bench) -> Vec<Row> {
    let what = "interactive session, idle after start";
    let goal = "≤ 30 MB idle, ≤ 40 MB peak";
    let mut figures = Vec::new();
    for _ in 0..bench.slow_runs.max(1) {
        match one_idle_session(bench) {
            Ok(figure) => figures.push(figure),
            Err(why) => return vec![Row::failed(what, goal, &why)],
        }
    }
    let ready = median(figures.iter().map(|f| f.0)).unwrap();
    let rss = median(figures.iter().map(|f| f.1)).unwrap();
    let hwm = median(figures.iter().map(|f| f.2)).unwrap();
    let mut row = Row::new(what, goal);
    row.median = format!("{} RSS idle (prompt after {})", mb(rss), fmt(ready));
    row.peak = format!("{} (`VmHWM`)", mb(hwm));
    row.verdict = Verdict::of(rss <= 30 * 1024 && hwm <= 40 * 1024);
    vec![row]
}

/// One interactive session in a pseudo-terminal: the time to its prompt,
/// then its `VmRSS` and `VmHWM` (KiB) after 1 s idle.
fn one_idle_session(bench: &Bench) -> Result<(Duration, u64, u64), String> {
    let size = nix::pty::Winsize {
        ws_row: 40,
        ws_col: 120,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).map_err(|e| e.to_string())?;
    let mut command = bench.command(&bench.capstan);
    command
        .arg("--model")
        .arg(format!("scripted:{}", bench.script.display()))
        .env("TERM", "xterm-256color");
    let stdio = || Stdio::from(pty.slave.try_clone().unwrap());
    command.stdin(stdio()).stdout(stdio()).stderr(stdio());
    // SAFETY: between fork and exec only async-signal-safe calls: a new
    // session, then the pty (standard input) as its controlling terminal.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = command.spawn().map_err(|e| e.to_string())?;
    drop(pty.slave);
    let screen = Arc::new(Mutex::new(String::new()));
    let mut keyboard = File::from(pty.master.try_clone().map_err(|e| e.to_string())?);
    {
        let screen = screen.clone();
        let mut output = File::from(pty.master);
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = output.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                screen
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });
    }
    // The prompt: the banner's last line, then "> ".
    let ready = loop {
        let shown = screen.lock().unwrap().clone();
        if let Some(at) = shown.find("Ctrl-D exits")
            && shown[at..].contains("> ")
        {
            break started.elapsed();
        }
        if started.elapsed() > Duration::from_secs(30) || child.try_wait().ok().flatten().is_some()
        {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "the session drew no prompt: {:?}",
                last_lines(&shown)
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    std::thread::sleep(Duration::from_secs(1));
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()))
        .map_err(|e| e.to_string())?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    let (rss, hwm) = (field("VmRSS:"), field("VmHWM:"));
    // Ctrl-D at an empty prompt ends the session.
    let _ = keyboard.write_all(b"\x04");
    let deadline = Instant::now() + Duration::from_secs(5);
    while child.try_wait().ok().flatten().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.wait();
    match (rss, hwm) {
        (Some(rss), Some(hwm)) => Ok((ready, rss, hwm)),
        _ => Err("no VmRSS/VmHWM in /proc/PID/status".into()),
    }
}

/// Row 8: `capstan mcp serve`, raw JSON-RPC `fs.read`, beside
/// server-filesystem's `read_text_file`, call by call.
fn mcp(bench: &mut Bench) -> Vec<Row> {
    let what = "`capstan mcp serve`, raw JSON-RPC `fs.read` per call";
    let goal = "≤ 0.25× server-filesystem";
    let mut ours = bench.capstan(&["mcp", "serve"]);
    ours.stderr(Stdio::null());
    let mut capstan = RawClient::start(ours);
    let read = json!({ "path": "small.txt" });
    let reference = reference_server().map(|entry| {
        let mut command = bench.command("node");
        command.arg(entry).arg(&bench.ws).stderr(Stdio::null());
        RawClient::start(command)
    });
    let their_read = json!({ "path": bench.ws.join("small.txt") });
    for _ in 0..100 {
        capstan.call("fs__read", &read);
    }
    let mut reference = match reference {
        Ok(client) => Some(client),
        Err(why) => {
            bench.notes.push(format!(
                "server-filesystem could not be installed ({why}): row 8 has no baseline."
            ));
            None
        }
    };
    if let Some(client) = &mut reference {
        for _ in 0..100 {
            client.call("read_text_file", &their_read);
        }
    }
    let (mut us, mut them) = (Vec::new(), Vec::new());
    for call in 0..bench.calls {
        if call % 2 == 0 {
            let started = Instant::now();
            capstan.call("fs__read", &read);
            us.push(started.elapsed());
        }
        if let Some(client) = &mut reference {
            let started = Instant::now();
            client.call("read_text_file", &their_read);
            them.push(started.elapsed());
        }
        if call % 2 == 1 {
            let started = Instant::now();
            capstan.call("fs__read", &read);
            us.push(started.elapsed());
        }
    }
    let p50 = median(us.iter().copied()).unwrap();
    let mut row = Row::new(what, goal);
    row.median = format!("{} p50", fmt(p50));
    if let Some(theirs) = median(them.iter().copied()) {
        let ratio = times(p50.as_secs_f64(), theirs.as_secs_f64());
        row.baseline = format!("server-filesystem `read_text_file`: {} p50", fmt(theirs));
        row.ratio = format!("{ratio:.2}×");
        row.verdict = Verdict::of(ratio <= 0.25);
    } else {
        row.baseline = "server-filesystem: not installed".into();
    }
    vec![row]
}

/// The README's lines between these two hold the last report.
const README_START: &str =
    "<!-- bench-cli: start (just bench-cli with BENCH_CLI_README=1 rewrites this) -->";
const README_END: &str = "<!-- bench-cli: end -->";

/// Puts `report` between the README's markers (written beside it and
/// renamed over it, so it is never half-written).
fn write_into_readme(report: &str) -> Result<PathBuf, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (Some(start), Some(end)) = (text.find(README_START), text.find(README_END)) else {
        return Err(format!(
            "{} has no {README_START:?} … {README_END:?} markers",
            path.display()
        ));
    };
    if end < start {
        return Err(format!("{}: the markers are out of order", path.display()));
    }
    let updated = format!("{}{README_START}\n{report}{}", &text[..start], &text[end..]);
    let temporary = path.with_extension("md.bench-cli");
    std::fs::write(&temporary, updated).map_err(|e| e.to_string())?;
    std::fs::rename(&temporary, &path).map_err(|e| e.to_string())?;
    Ok(path)
}

fn env_number(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The machine, as the README describes where its figures come from.
fn machine() -> String {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = read("/proc/sys/kernel/osrelease");
    let load = read("/proc/loadavg");
    format!(
        "{cores} cores ({model}), Linux {}, load average {} at the start",
        kernel.trim(),
        load.split_whitespace().next().unwrap_or("?")
    )
}

fn today() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn main() {
    let quick = std::env::var_os("BENCH_CLI_QUICK").is_some_and(|v| v != "0");
    let runs = env_number("BENCH_CLI_RUNS").unwrap_or(if quick { 5 } else { 30 });
    let slow_runs = env_number("BENCH_CLI_SLOW_RUNS").unwrap_or(if quick { 3 } else { 20 });
    let calls = env_number("BENCH_CLI_CALLS").unwrap_or(if quick { 200 } else { 1000 });
    let only: Option<Vec<usize>> = std::env::var("BENCH_CLI_ROWS")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect());
    let wanted = |row: usize| only.as_ref().is_none_or(|rows| rows.contains(&row));

    let machine = machine();
    let started = Instant::now();
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().canonicalize().unwrap();
    let (home, ws) = (root.join("home"), root.join("ws"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let text: String = std::iter::once(format!("{MARKER}\n"))
        .chain((2..=20).map(|n| format!("line {n} of a small file\n")))
        .collect();
    std::fs::write(ws.join("small.txt"), text).unwrap();
    let script = root.join("one-tool-turn.json");
    let turns = json!({ "turns": [
        { "tool_calls": [ { "tool": "fs.read", "input": { "path": "small.txt" } } ] },
        { "text": MARKER_ANSWER },
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let mut bench = Bench {
        capstan: std::env::var_os("BENCH_CLI_CAPSTAN").map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_capstan")),
            PathBuf::from,
        ),
        runs,
        slow_runs,
        calls,
        home,
        ws,
        script,
        scratch: root.clone(),
        notes: Vec::new(),
    };
    // Warm the compile cache: every built-in component is compiled once.
    if let Err(why) = run(&mut bench.scripted_turn(&bench.home)) {
        panic!("capstan -p with the scripted model failed: {why}");
    }

    eprintln!(
        "bench-cli: {runs} runs per quick command, {slow_runs} per slow one, {calls} MCP calls"
    );
    let mut rows = Vec::new();
    if wanted(1) || wanted(2) {
        rows.extend(tool_call(&bench));
    }
    if wanted(3) {
        rows.extend(exec(&mut bench));
    }
    if wanted(4) {
        rows.extend(scripted(&bench));
    }
    if wanted(5) {
        rows.extend(mock_server(&mut bench));
    }
    if wanted(6) {
        rows.extend(first_run(&bench));
        rows.extend(first_request(&bench));
    }
    if wanted(7) {
        rows.extend(idle_session(&bench));
    }
    if wanted(8) {
        rows.extend(mcp(&mut bench));
    }

    let missed = rows.iter().filter(|r| r.verdict == Verdict::Miss).count();
    let met = rows.iter().filter(|r| r.verdict == Verdict::Pass).count();
    let mut report = format!(
        "Whole processes, release build, measured {} on {machine}; medians of {runs} runs \
         (rows 5–7: {slow_runs}; MCP: {calls} calls), each run beside its baseline, in turns \
         (`just bench-cli`):\n\n{}\n",
        today(),
        table(&rows)
    );
    for note in &bench.notes {
        report += &format!("{note}\n\n");
    }
    report += &format!(
        "Goals met: {met}, missed: {missed}, not measured: {}.\n",
        rows.len() - met - missed
    );
    println!();
    print!("{report}");
    println!("({} in all)", fmt(started.elapsed()));
    if std::env::var_os("BENCH_CLI_README").is_some_and(|v| v != "0") {
        match write_into_readme(&report) {
            Ok(path) => println!("the table is now in {}", path.display()),
            Err(why) => eprintln!("bench-cli: the README was not changed: {why}"),
        }
    }
}
