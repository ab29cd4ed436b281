//! Showing a session: the model's text as it streams, one compact line per
//! tool call, a spinner while waiting, permission prompts — or, for
//! scripts, JSON events.
//!
//! Colours and the spinner appear only on a terminal, and never with
//! `NO_COLOR` set.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::agent::{AgentEvent, CompactTrigger, Frontend, PermissionAnswer, PermissionRequest};
use crate::policy::Outcome;

/// ANSI styling, or none.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    color: bool,
}

impl Style {
    /// Styling for stderr (or stdout): on when it is a terminal and
    /// `NO_COLOR` is not set.
    pub fn detect(terminal: bool) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self {
            color: terminal && !no_color,
        }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    /// Dim text.
    pub fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }

    /// Bold text.
    pub fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }

    /// Red text.
    pub fn red(self, text: &str) -> String {
        self.paint("31", text)
    }

    /// Green text.
    pub fn green(self, text: &str) -> String {
        self.paint("32", text)
    }

    /// Yellow text.
    pub fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }

    /// Cyan text.
    pub fn cyan(self, text: &str) -> String {
        self.paint("36", text)
    }
}

/// A spinner on stderr, redrawn by a background task until stopped.
struct Spinner {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Spinner {
    fn start(label: String) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
            let started = Instant::now();
            let mut frame = 0;
            // Draw only if the wait is noticeable.
            tokio::time::sleep(Duration::from_millis(150)).await;
            while !flag.load(Ordering::SeqCst) {
                {
                    let mut err = std::io::stderr().lock();
                    let _ = write!(
                        err,
                        "\r\x1b[2K\x1b[2m{} {label} {:.1}s\x1b[0m",
                        FRAMES[frame % FRAMES.len()],
                        started.elapsed().as_secs_f64()
                    );
                    let _ = err.flush();
                }
                frame += 1;
                tokio::time::sleep(Duration::from_millis(80)).await;
            }
        });
        Self { stop, task }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.abort();
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
}

/// The terminal front end: text to stdout, everything else to stderr.
pub struct TerminalFrontend {
    err: Style,
    spinner_allowed: bool,
    spinner: Option<Spinner>,
    interactive: bool,
    at_line_start: bool,
    verbose: bool,
    /// Why calls were refused, by call id, until their one line is shown.
    refusals: HashMap<String, String>,
}

impl TerminalFrontend {
    /// A front end; `interactive` says whether permission prompts may be
    /// shown (stdin and stderr are terminals and this is not `-p`).
    pub fn new(interactive: bool, verbose: bool) -> Self {
        let stderr_tty = std::io::stderr().is_terminal();
        Self {
            err: Style::detect(stderr_tty),
            spinner_allowed: stderr_tty,
            spinner: None,
            interactive,
            at_line_start: true,
            verbose,
            refusals: HashMap::new(),
        }
    }

    /// The style for stderr.
    pub fn err_style(&self) -> Style {
        self.err
    }

    /// Ends the model's text with a newline if it did not.
    pub fn finish_line(&mut self) {
        self.stop_spinner();
        if !self.at_line_start {
            println!();
            self.at_line_start = true;
        }
    }

    fn start_spinner(&mut self, label: &str) {
        self.stop_spinner();
        if self.spinner_allowed {
            self.spinner = Some(Spinner::start(label.to_string()));
        }
    }

    fn stop_spinner(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.stop();
        }
    }

    fn line(&mut self, text: &str) {
        self.finish_line();
        eprintln!("{text}");
    }
}

impl Drop for TerminalFrontend {
    fn drop(&mut self) {
        self.stop_spinner();
    }
}

impl Frontend for TerminalFrontend {
    fn event(&mut self, event: AgentEvent<'_>) {
        match event {
            AgentEvent::Thinking => self.start_spinner("thinking"),
            AgentEvent::Text(text) => {
                self.stop_spinner();
                if text.is_empty() {
                    return;
                }
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
                self.at_line_start = text.ends_with('\n');
            }
            AgentEvent::PreparingTool { tool } => {
                self.finish_line();
                self.start_spinner(&format!("preparing {tool}"));
            }
            AgentEvent::Retrying {
                attempt,
                after,
                reason,
            } => {
                let text = format!(
                    "{reason}; retrying (attempt {attempt}) in {:.1}s",
                    after.as_secs_f64()
                );
                self.line(&self.err.yellow(&text));
                self.start_spinner("waiting to retry");
            }
            AgentEvent::Answer(_) => self.finish_line(),
            AgentEvent::Permission { id, tool, decision } => {
                if decision.outcome != Outcome::Allow {
                    // Shown on the call's own line when it finishes, so a
                    // refusal is one line, with the whole reason.
                    self.refusals
                        .insert(id.to_string(), decision.reason.clone());
                } else if self.verbose {
                    let text = format!("  allowed {tool}: {}", decision.reason);
                    self.line(&self.err.dim(&text));
                }
            }
            AgentEvent::ToolStarted { tool, input, .. } => {
                self.finish_line();
                let label = format!("{tool} {}", key_argument(input));
                self.start_spinner(label.trim_end());
            }
            AgentEvent::ToolFinished {
                id,
                tool,
                input,
                is_error,
                output,
                duration,
            } => {
                let mark = if is_error {
                    self.err.red("✗")
                } else {
                    self.err.green("✓")
                };
                let argument = key_argument(input);
                if let Some(reason) = self.refusals.remove(id) {
                    let text = format!(
                        "{mark} {} {} {}",
                        self.err.bold(tool),
                        self.err.cyan(&argument),
                        self.err.yellow(&format!("· denied: {reason}"))
                    );
                    self.line(&text);
                    return;
                }
                let summary = summarise_output(output, is_error);
                let text = format!(
                    "{mark} {} {} {}",
                    self.err.bold(tool),
                    self.err.cyan(&argument),
                    self.err
                        .dim(&format!("· {summary} · {}", format_duration(duration)))
                );
                self.line(&text);
            }
            AgentEvent::ToolResults(_) => {
                // Refusals whose call line never came still get said.
                let mut left: Vec<(String, String)> = self.refusals.drain().collect();
                left.sort();
                for (_, reason) in left {
                    self.line(&self.err.yellow(&format!("  denied: {reason}")));
                }
            }
            AgentEvent::Usage(usage) => {
                if self.verbose {
                    let text = format!(
                        "  tokens: {} in, {} out, {} cache read, {} cache write",
                        usage.input_tokens,
                        usage.output_tokens,
                        usage.cache_read_tokens,
                        usage.cache_write_tokens
                    );
                    self.line(&self.err.dim(&text));
                }
            }
            AgentEvent::Notice(text) => self.line(&self.err.yellow(text)),
            AgentEvent::Compacting { trigger } => {
                self.finish_line();
                if trigger == CompactTrigger::Auto {
                    self.line(&self.err.dim(
                        "the conversation is nearing the model's context window; compacting it",
                    ));
                }
                self.start_spinner("summarizing the conversation");
            }
            AgentEvent::Compacted(report) => {
                self.stop_spinner();
                let before = report
                    .tokens_before
                    .map(|tokens| format!(", about {tokens} tokens"))
                    .unwrap_or_default();
                let text = format!(
                    "compacted: {} messages{before} replaced by a summary of {} characters",
                    report.messages_before,
                    report.summary.chars().count()
                );
                self.line(&self.err.dim(&text));
            }
        }
    }

    fn can_prompt(&self) -> bool {
        self.interactive
    }

    fn ask(&mut self, request: &PermissionRequest<'_>) -> PermissionAnswer {
        self.finish_line();
        let tool = &request.tool.name;
        let style = self.err;
        eprintln!(
            "{} {} {}",
            style.yellow("?"),
            style.bold(&format!("Run {tool}")),
            style.cyan(&key_argument(request.input))
        );
        eprintln!("  {}", style.dim(&preview_input(request.input)));
        eprintln!("  {}", style.dim(&format!("why: {}", request.reason)));
        eprintln!(
            "  [y] yes, once   [s] yes, {tool} for this session   [a] always {tool} in this project   [n] no, and tell the model why"
        );
        let Ok(mut editor) = rustyline::DefaultEditor::new() else {
            return PermissionAnswer::Deny {
                reason: Some("the terminal could not be read".into()),
            };
        };
        loop {
            match editor.readline("  allow? [y/s/a/n] ") {
                Ok(answer) => match answer.trim().to_ascii_lowercase().as_str() {
                    "y" | "yes" => return PermissionAnswer::AllowOnce,
                    "s" | "session" => return PermissionAnswer::AllowSession,
                    "a" | "always" => return PermissionAnswer::AllowAlways,
                    "n" | "no" | "" => {
                        let reason = editor
                            .readline("  why not? (optional, goes to the model) ")
                            .ok()
                            .filter(|r| !r.trim().is_empty());
                        return PermissionAnswer::Deny { reason };
                    }
                    _ => eprintln!("  please answer y, s, a or n"),
                },
                Err(rustyline::error::ReadlineError::Interrupted) => {
                    return PermissionAnswer::Interrupt;
                }
                Err(_) => return PermissionAnswer::Deny { reason: None },
            }
        }
    }
}

/// Prints events as JSON lines on stdout (`--output-format stream-json`).
pub struct StreamJsonFrontend;

impl StreamJsonFrontend {
    /// Prints one event.
    pub fn emit(value: &Value) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{value}");
        let _ = out.flush();
    }
}

impl Frontend for StreamJsonFrontend {
    fn event(&mut self, event: AgentEvent<'_>) {
        let value = match event {
            AgentEvent::Thinking | AgentEvent::PreparingTool { .. } => return,
            AgentEvent::Text(text) => json!({ "type": "text_delta", "text": text }),
            AgentEvent::Retrying {
                attempt,
                after,
                reason,
            } => json!({
                "type": "retry",
                "attempt": attempt,
                "after_ms": u64::try_from(after.as_millis()).unwrap_or(u64::MAX),
                "reason": reason,
            }),
            AgentEvent::Answer(message) => json!({ "type": "assistant", "message": message }),
            AgentEvent::Permission { id, tool, decision } => json!({
                "type": "permission",
                "tool_use_id": id,
                "tool": tool,
                "outcome": if decision.outcome == Outcome::Allow { "allow" } else { "deny" },
                "reason": decision.reason,
            }),
            AgentEvent::ToolStarted { id, tool, input } => json!({
                "type": "tool_started", "tool_use_id": id, "tool": tool, "input": input,
            }),
            AgentEvent::ToolFinished {
                id,
                tool,
                is_error,
                output,
                duration,
                ..
            } => json!({
                "type": "tool_result",
                "tool_use_id": id,
                "tool": tool,
                "is_error": is_error,
                "content": output,
                "duration_ms": duration.as_secs_f64() * 1e3,
            }),
            AgentEvent::ToolResults(message) => json!({ "type": "user", "message": message }),
            AgentEvent::Usage(usage) => json!({ "type": "usage", "usage": usage }),
            AgentEvent::Notice(text) => json!({ "type": "notice", "text": text }),
            AgentEvent::Compacting { .. } => return,
            AgentEvent::Compacted(report) => json!({
                "type": "compact",
                "trigger": report.trigger.name(),
                "messages_before": report.messages_before,
                "tokens_before": report.tokens_before,
                "summary": report.summary,
            }),
        };
        Self::emit(&value);
    }
}

/// Shows nothing while running (`--output-format json` prints one result
/// at the end).
pub struct SilentFrontend;

impl Frontend for SilentFrontend {
    fn event(&mut self, _event: AgentEvent<'_>) {}
}

/// The argument that says most about a call: its path, pattern, URL or
/// first string, cut to 60 characters.
pub fn key_argument(input: &Value) -> String {
    let Some(object) = input.as_object() else {
        return String::new();
    };
    let text = ["path", "pattern", "url", "query", "command", "name"]
        .iter()
        .find_map(|key| object.get(*key).and_then(Value::as_str))
        .or_else(|| object.values().find_map(Value::as_str))
        .unwrap_or_default();
    let line = text.lines().next().unwrap_or_default();
    cut(line, 60)
}

fn cut(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        text.to_string()
    } else {
        let mut cut: String = text.chars().take(chars - 1).collect();
        cut.push('…');
        cut
    }
}

/// A few words on a result: the first line of an error, or how many lines
/// a success returned.
fn summarise_output(output: &str, is_error: bool) -> String {
    if is_error {
        return cut(output.lines().next().unwrap_or_default(), 100);
    }
    let lines = output.lines().count();
    match lines {
        0 => "no output".to_string(),
        1 => cut(output.trim(), 60),
        n => format!("{n} lines"),
    }
}

/// The input as compact JSON, cut to a few hundred characters.
fn preview_input(input: &Value) -> String {
    cut(&input.to_string(), 300)
}

/// "0.4 ms", "12 ms", "1.3 s".
pub fn format_duration(duration: Duration) -> String {
    let ms = duration.as_secs_f64() * 1e3;
    if ms < 10.0 {
        format!("{ms:.1} ms")
    } else if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.1} s", ms / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_argument_prefers_paths_and_is_cut() {
        assert_eq!(key_argument(&json!({"limit": 3, "path": "a.rs"})), "a.rs");
        assert_eq!(key_argument(&json!({"other": "x"})), "x");
        assert_eq!(key_argument(&json!({})), "");
        let long = "x".repeat(100);
        assert_eq!(key_argument(&json!({ "path": long })).chars().count(), 60);
    }

    #[test]
    fn outputs_and_durations_are_summarised() {
        assert_eq!(summarise_output("a\nb\nc", false), "3 lines");
        assert_eq!(summarise_output("", false), "no output");
        assert_eq!(summarise_output("boom\nmore", true), "boom");
        assert_eq!(format_duration(Duration::from_micros(420)), "0.4 ms");
        assert_eq!(format_duration(Duration::from_millis(1300)), "1.3 s");
    }

    #[test]
    fn no_colour_without_a_terminal() {
        assert_eq!(Style::detect(false).red("x"), "x");
    }
}
