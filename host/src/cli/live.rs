//! What a session shows while a turn runs, at the bottom of stderr: a
//! spinner line saying what is happening and for how long, and under it
//! the last lines of a running command's output, redrawn in place — and the
//! way what calls report as they run (a command's output, plugins' log
//! lines and progress) reaches the user: that area on a terminal, plain
//! lines (with `-v`) when stderr is not one, or JSON events on stdout
//! (`--output-format stream-json`).
//!
//! There is one area per process, as there is one stderr: the frontend's
//! spinner, the calls' reports (from any thread) and the turn's key reader
//! all write through it, so a line printed while the area is drawn goes
//! above it, never through it. Everything shown from a command is untrusted
//! text: its escape sequences are dropped and its other control characters
//! escaped ([`escape::line`]), and each line is cut to the terminal's width
//! so the area always takes the rows it counts.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::{Duration, Instant};

use serde_json::json;
use unicode_width::UnicodeWidthChar;

use super::escape;
use super::render::{StreamJsonFrontend, Style};
use crate::agent::SessionEvents;
use crate::sandbox::{LogLevel, PluginEvent};

/// How many lines of a running command's output the area shows.
pub const TAIL_LINES: usize = 5;

/// The longest unfinished line kept for the area (it shows less anyway).
const MAX_PARTIAL: usize = 4096;

/// How long a wait must last before the spinner appears.
const FIRST_DRAW: Duration = Duration::from_millis(150);

/// How often the area is redrawn (the spinner turns, new output shows).
const REDRAW: Duration = Duration::from_millis(80);

/// The most bytes of one call's output sent as JSON events; the rest is
/// left out of the stream (the result keeps its head and tail).
pub const MAX_STREAMED_OUTPUT: usize = 1 << 20;

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// The area's state.
#[derive(Default)]
struct Area {
    spinner: Option<Spinner>,
    /// Bumped whenever the spinner starts or stops, so a drawing task of
    /// an earlier spinner knows to end.
    generation: u64,
    /// How many output rows are drawn under the spinner line, when the
    /// area is drawn.
    drawn: Option<usize>,
    /// Output of calls, most recently active last.
    tails: Vec<Tail>,
    /// Complete output lines are printed as they come (stderr is not a
    /// terminal and `-v` was given) instead of kept for the area.
    plain_lines: bool,
    style: Option<Style>,
}

struct Spinner {
    label: String,
    started: Instant,
    frame: usize,
}

/// One call's output: its last complete lines and the line in progress.
#[derive(Debug, Default)]
struct Tail {
    call: String,
    lines: VecDeque<String>,
    partial: String,
}

impl Tail {
    /// Adds `text`; returns the lines it completed. A carriage return
    /// starts the line in progress again, as on a terminal (progress bars).
    fn push(&mut self, text: &str) -> Vec<String> {
        let mut done = Vec::new();
        let mut pieces = text.split('\n').peekable();
        while let Some(piece) = pieces.next() {
            let last = pieces.peek().is_none();
            let piece = if last {
                piece
            } else {
                piece.strip_suffix('\r').unwrap_or(piece)
            };
            match piece.rfind('\r') {
                Some(at) => {
                    self.partial.clear();
                    self.partial.push_str(&piece[at + 1..]);
                }
                None => self.partial.push_str(piece),
            }
            if self.partial.len() > MAX_PARTIAL {
                let mut end = MAX_PARTIAL;
                while !self.partial.is_char_boundary(end) {
                    end -= 1;
                }
                self.partial.truncate(end);
            }
            if !last {
                let line = std::mem::take(&mut self.partial);
                self.lines.push_back(line.clone());
                if self.lines.len() > TAIL_LINES {
                    self.lines.pop_front();
                }
                done.push(line);
            }
        }
        done
    }

    /// The lines the area shows: the last complete ones and the one in
    /// progress, at most [`TAIL_LINES`].
    fn shown(&self) -> Vec<&str> {
        let mut lines: Vec<&str> = self.lines.iter().map(String::as_str).collect();
        if !self.partial.is_empty() {
            lines.push(&self.partial);
        }
        let skip = lines.len().saturating_sub(TAIL_LINES);
        lines.split_off(skip)
    }
}

fn area() -> MutexGuard<'static, Area> {
    static AREA: OnceLock<Mutex<Area>> = OnceLock::new();
    AREA.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Area {
    fn tail(&mut self, call: &str) -> &mut Tail {
        match self.tails.iter().position(|t| t.call == call) {
            Some(at) => {
                let tail = self.tails.remove(at);
                self.tails.push(tail);
            }
            None => self.tails.push(Tail {
                call: call.to_string(),
                ..Tail::default()
            }),
        }
        let last = self.tails.len() - 1;
        &mut self.tails[last]
    }

    /// Takes the drawn area off the screen; the cursor is left at the
    /// start of the spinner's line. Returns whether anything was drawn.
    fn erase(&mut self, out: &mut impl Write) -> bool {
        let Some(rows) = self.drawn.take() else {
            return false;
        };
        if rows > 0 {
            let _ = write!(out, "\x1b[{rows}A");
        }
        let _ = write!(out, "\r\x1b[J");
        true
    }

    /// Draws the spinner line and the output of the most recently active
    /// call under it.
    fn draw(&mut self, out: &mut impl Write) {
        self.erase(out);
        let Some(spinner) = &mut self.spinner else {
            return;
        };
        let width = terminal_width();
        let head = format!(
            "{} {} {:.1}s",
            FRAMES[spinner.frame % FRAMES.len()],
            spinner.label,
            spinner.started.elapsed().as_secs_f64()
        );
        spinner.frame += 1;
        let _ = write!(out, "\x1b[2m{}\x1b[0m", cut_to_width(&head, width - 1));
        let style = self.style.unwrap_or(Style::new(false));
        let mut rows = 0;
        if let Some(tail) = self.tails.last() {
            for line in tail.shown() {
                let shown = format!("│ {}", displayable(line));
                let _ = write!(
                    out,
                    "\n  {}",
                    style.dim(&cut_to_width(&shown, width.saturating_sub(3)))
                );
                rows += 1;
            }
        }
        self.drawn = Some(rows);
        let _ = out.flush();
    }
}

/// Starts the spinner with `label` (already safe to print); it and the
/// output under it are drawn every [`REDRAW`] until [`stop_spinner`].
pub fn start_spinner(label: String, style: Style) {
    let generation = {
        let mut area = area();
        let mut err = std::io::stderr().lock();
        area.erase(&mut err);
        let _ = err.flush();
        area.generation += 1;
        area.style = Some(style);
        area.spinner = Some(Spinner {
            label,
            started: Instant::now(),
            frame: 0,
        });
        area.generation
    };
    tokio::spawn(async move {
        tokio::time::sleep(FIRST_DRAW).await;
        loop {
            {
                let mut area = area();
                if area.generation != generation || area.spinner.is_none() {
                    return;
                }
                area.draw(&mut std::io::stderr().lock());
            }
            tokio::time::sleep(REDRAW).await;
        }
    });
}

/// Stops the spinner and takes the area off the screen.
pub fn stop_spinner() {
    let mut area = area();
    area.generation += 1;
    area.spinner = None;
    let mut err = std::io::stderr().lock();
    area.erase(&mut err);
    let _ = err.flush();
}

/// Call `call`'s output is no longer shown (the call finished); with plain
/// lines, its unfinished last line is printed.
pub fn end_call(call: &str) {
    let mut area = area();
    let Some(at) = area.tails.iter().position(|t| t.call == call) else {
        return;
    };
    let tail = area.tails.remove(at);
    if area.plain_lines && !tail.partial.is_empty() {
        print_plain(&area, &tail.partial);
    }
}

/// No call's output is shown any more (the batch of calls is over; calls
/// a sub-agent made have no line of their own to end them).
pub fn end_calls() {
    let calls: Vec<String> = area().tails.iter().map(|t| t.call.clone()).collect();
    for call in calls {
        end_call(&call);
    }
}

/// Prints `line` (already safe to print) above the area.
pub fn print_above(line: &str) {
    let mut area = area();
    let mut err = std::io::stderr().lock();
    area.erase(&mut err);
    let _ = writeln!(err, "{line}");
    let _ = err.flush();
}

/// Prints a notice of capstan's own (`capstan: interrupting…`) from any
/// thread: above the area if it is drawn, else on a line of its own after
/// whatever was being written.
pub fn notice(text: &str) {
    let mut area = area();
    let mut err = std::io::stderr().lock();
    if !area.erase(&mut err) {
        let _ = writeln!(err);
    }
    let _ = writeln!(err, "{text}");
    let _ = err.flush();
}

fn print_plain(area: &Area, line: &str) {
    let style = area.style.unwrap_or(Style::new(false));
    eprintln!("  {}", style.dim(&format!("│ {}", displayable(line))));
}

/// Where an interactive or `-p` text session sends what its calls report:
/// on a terminal (`tty`), a command's last lines under the spinner and
/// progress as its line in progress; otherwise complete output lines and
/// progress printed as plain lines with `verbose`, nothing without. Plugin
/// log lines of warning level and above always show; the others with
/// `verbose`.
pub fn terminal_events(tty: bool, verbose: bool, style: Style) -> SessionEvents {
    {
        let mut area = area();
        area.plain_lines = !tty && verbose;
        area.style = Some(style);
    }
    Arc::new(
        move |call: &str, plugin: &str, event: PluginEvent| match event {
            PluginEvent::CommandOutput { text } => {
                let mut area = area();
                let done = area.tail(call).push(&text);
                if area.plain_lines {
                    for line in done {
                        print_plain(&area, &line);
                    }
                } else if !tty {
                    // Nothing is shown: keep no lines for it.
                    area.tails.retain(|t| t.call != call);
                }
            }
            PluginEvent::Progress {
                message,
                done,
                total,
            } => {
                let line = match total {
                    Some(total) => format!("[{plugin}] {message} ({done}/{total})"),
                    None => format!("[{plugin}] {message} ({done})"),
                };
                if tty {
                    let mut area = area();
                    let tail = area.tail(call);
                    tail.partial.clear();
                    tail.partial.push_str(&line);
                } else if verbose {
                    print_above(&style.dim(&escape::line(&line)));
                }
            }
            PluginEvent::Log { level, message } => {
                if level < LogLevel::Warn && !verbose {
                    return;
                }
                let text = format!(
                    "[{}] {}: {}",
                    escape::line(plugin),
                    level_name(level),
                    escape::line(&message)
                );
                let text = match level {
                    LogLevel::Error => style.red(&text),
                    LogLevel::Warn => style.yellow(&text),
                    _ => style.dim(&text),
                };
                print_above(&text);
            }
        },
    )
}

/// Where a `--output-format stream-json` session sends what its calls
/// report: one JSON event per report on stdout (`tool_output`, `tool_log`,
/// `tool_progress`), each with the session's id, at most
/// [`MAX_STREAMED_OUTPUT`] bytes of each call's output.
pub fn json_events(session_id: String) -> SessionEvents {
    let streamed: Mutex<HashMap<String, usize>> = Mutex::default();
    Arc::new(move |call: &str, source: &str, event: PluginEvent| {
        let value = match event {
            PluginEvent::CommandOutput { text } => {
                let mut streamed = streamed.lock().unwrap_or_else(|p| p.into_inner());
                let sent = streamed.entry(call.to_string()).or_default();
                if *sent >= MAX_STREAMED_OUTPUT {
                    return;
                }
                let mut end = text.len().min(MAX_STREAMED_OUTPUT - *sent);
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                *sent += end;
                let mut value = json!({
                    "type": "tool_output",
                    "tool_use_id": call,
                    "source": source,
                    "text": &text[..end],
                });
                if end < text.len() || *sent >= MAX_STREAMED_OUTPUT {
                    *sent = MAX_STREAMED_OUTPUT;
                    value["left_out"] = json!(format!(
                        "output past {} KiB is left out of the stream; the tool_result keeps its head and tail",
                        MAX_STREAMED_OUTPUT >> 10
                    ));
                }
                value
            }
            PluginEvent::Log { level, message } => json!({
                "type": "tool_log",
                "tool_use_id": call,
                "source": source,
                "level": level_name(level),
                "message": message,
            }),
            PluginEvent::Progress {
                message,
                done,
                total,
            } => json!({
                "type": "tool_progress",
                "tool_use_id": call,
                "source": source,
                "message": message,
                "done": done,
                "total": total,
            }),
        };
        let mut value = value;
        value["session_id"] = json!(session_id);
        StreamJsonFrontend::emit(&value);
    })
}

fn level_name(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Error => "error",
        LogLevel::Warn => "warning",
        LogLevel::Info => "info",
        LogLevel::Debug => "debug",
        LogLevel::Trace => "trace",
    }
}

/// Where a session's calls report to: set once the front end is chosen
/// (the tools are set up before it). Reports before then are dropped.
#[derive(Clone, Default)]
pub struct EventRoute(Arc<RwLock<Option<SessionEvents>>>);

impl EventRoute {
    /// A route going nowhere yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The sink to give the tools: it forwards to wherever the route goes.
    pub fn sink(&self) -> SessionEvents {
        let route = self.0.clone();
        Arc::new(move |call: &str, source: &str, event: PluginEvent| {
            let target = route.read().ok().and_then(|target| target.clone());
            if let Some(target) = target {
                target(call, source, event);
            }
        })
    }

    /// Sends reports to `events` from now on.
    pub fn set(&self, events: SessionEvents) {
        if let Ok(mut target) = self.0.write() {
            *target = Some(events);
        }
    }
}

/// A line of command output as the area shows it: escape sequences
/// (colours, cursor moves, titles) dropped, tabs as spaces, every other
/// control character escaped.
fn displayable(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => match chars.peek() {
                // CSI: parameters, then a final byte.
                Some('[') => {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('\x40'..='\x7e').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC (titles, clipboard, links): to BEL or ST.
                Some(']') => {
                    chars.next();
                    while let Some(c) = chars.next() {
                        if c == '\x07' || (c == '\x1b' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                // Any other escape: it and the character after it.
                Some(_) => {
                    chars.next();
                }
                None => {}
            },
            '\t' => plain.push_str("    "),
            c => plain.push(c),
        }
    }
    escape::line(&plain).into_owned()
}

/// `text` cut to `width` columns, with `…` where it was cut.
fn cut_to_width(text: &str, width: usize) -> String {
    let total: usize = text.chars().map(|c| c.width().unwrap_or(0)).sum();
    if total <= width {
        return text.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    out
}

/// The terminal's width in columns (80 when it cannot be told).
fn terminal_width() -> usize {
    terminal_size::terminal_size_of(std::io::stderr())
        .map_or(80, |(terminal_size::Width(w), _)| usize::from(w))
        .max(20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_keeps_the_last_lines_and_the_one_in_progress() {
        let mut tail = Tail::default();
        let done = tail.push("one\ntwo\r\nthr");
        assert_eq!(done, ["one", "two"]);
        assert_eq!(tail.shown(), ["one", "two", "thr"]);
        tail.push("ee\n");
        for n in 4..=9 {
            tail.push(&format!("line {n}\n"));
        }
        assert_eq!(tail.shown().len(), TAIL_LINES);
        assert_eq!(tail.shown()[TAIL_LINES - 1], "line 9");
        // A progress bar rewrites its line with carriage returns.
        tail.push("10%\r50%\r100%");
        assert_eq!(tail.shown().last(), Some(&"100%"));
    }

    #[test]
    fn output_shown_carries_no_escape_sequence() {
        let hostile =
            "\x1b]0;owned\x07red \x1b[31mtext\x1b[0m\x1b]52;c;Zm9v\x1b\\ \x07bell\x1bc\u{9b}2J";
        let shown = displayable(hostile);
        assert!(!shown.contains('\x1b'), "{shown:?}");
        assert!(!shown.contains('\x07'), "{shown:?}");
        assert!(!shown.contains('\u{9b}'), "{shown:?}");
        assert!(shown.starts_with("red text "), "{shown:?}");
        assert_eq!(displayable("a\tb"), "a    b");
    }

    #[test]
    fn lines_are_cut_to_the_width() {
        assert_eq!(cut_to_width("abcdef", 10), "abcdef");
        assert_eq!(cut_to_width("abcdef", 4), "abc…");
        // Wide characters count twice.
        assert_eq!(cut_to_width("日本語テキスト", 7), "日本語…");
    }
}
