//! Showing a session: the model's text as it streams, one compact line per
//! tool call, a spinner while waiting, permission prompts — or, for
//! scripts, JSON events.
//!
//! Colours and the spinner appear only on a terminal, and never with
//! `NO_COLOR` set or `--no-color` given. On a terminal the model's text is
//! Markdown rendered as it streams ([`super::markdown`]), and a file a call
//! changed is shown as a diff of what changed once the call is done.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::future::LocalBoxFuture;
use serde_json::Value;

use super::change_preview::{Change, read_for_preview};
use super::escape;
use super::live;
use super::markdown::MarkdownStream;
use super::turn_keys::{Key, TurnKeys};
use crate::agent::SessionEvents;
use crate::agent::{AgentEvent, CompactTrigger, Frontend, PermissionAnswer, PermissionRequest};
use crate::model::Block;
use crate::policy::Outcome;

/// Set by `--no-color`: no colours, no rendered Markdown, as `NO_COLOR`.
static COLOR_OFF: AtomicBool = AtomicBool::new(false);

/// Turns colours (and Markdown rendering) off for the rest of the process
/// (`--no-color`).
pub fn disable_color() {
    COLOR_OFF.store(true, Ordering::Relaxed);
}

/// Whether colours may be used on a terminal: not with `--no-color`, nor
/// with `NO_COLOR` set to anything but the empty string.
fn color_allowed() -> bool {
    !COLOR_OFF.load(Ordering::Relaxed) && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// How many lines of text a diff shown after an edit has at most.
const EDIT_DIFF_LINES: usize = 16;

/// ANSI styling, or none.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    color: bool,
}

impl Style {
    /// Styling for stderr (or stdout): on when it is a terminal, `NO_COLOR`
    /// is not set and `--no-color` was not given.
    pub fn detect(terminal: bool) -> Self {
        Self {
            color: terminal && color_allowed(),
        }
    }

    /// Styling on (`color`) or off.
    pub fn new(color: bool) -> Self {
        Self { color }
    }

    /// Styles `text`, whose own control characters are escaped first
    /// ([`escape::text`]): only the style's sequences reach the terminal.
    fn paint(self, code: &str, text: &str) -> String {
        let text = escape::text(text);
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.into_owned()
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

/// Where the model's text goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextOutput {
    /// Streamed to stdout as it comes (the interactive session).
    Streamed,
    /// Held until its answer is complete: the text of an answer that calls
    /// tools is narration and goes to stderr; the final answer is left for
    /// the caller to print on stdout (`-p` text mode), so stdout carries
    /// the answer alone.
    AnswerOnly,
}

/// The terminal front end: the model's text to stdout, everything else to
/// stderr.
pub struct TerminalFrontend {
    err: Style,
    spinner_allowed: bool,
    /// The spinner (and the running command's output under it) is drawn.
    spinning: bool,
    /// The calls started and not finished yet, with their labels: when one
    /// finishes the spinner goes on for the others.
    running: Vec<(String, String)>,
    interactive: bool,
    at_line_start: bool,
    verbose: bool,
    /// The keyboard while a turn runs (interactive sessions on a terminal).
    keys: Option<TurnKeys>,
    text_output: TextOutput,
    /// The text of the answer in progress, or of the last complete answer
    /// without tool calls, not yet shown (with [`TextOutput::AnswerOnly`]).
    held: String,
    /// Why calls were refused, by call id, until their one line is shown.
    refusals: HashMap<String, String>,
    /// The model's text rendered as Markdown (stdout is a terminal and
    /// colours are allowed), or shown as it comes.
    markdown: Option<MarkdownStream>,
    /// The workspace, whose files changed by calls are shown as diffs.
    workspace: Option<PathBuf>,
    /// The files running calls may change, by call id: the path and its
    /// text before the call (`None`: it did not exist).
    edits: HashMap<String, (String, Option<String>)>,
}

impl TerminalFrontend {
    /// A front end that streams the model's text to stdout; `interactive`
    /// says whether permission prompts may be shown (stdin and stderr are
    /// terminals and this is not `-p`).
    pub fn new(interactive: bool, verbose: bool) -> Self {
        let stderr_tty = std::io::stderr().is_terminal();
        Self {
            err: Style::detect(stderr_tty),
            spinner_allowed: stderr_tty,
            spinning: false,
            running: Vec::new(),
            interactive,
            at_line_start: true,
            verbose,
            text_output: TextOutput::Streamed,
            held: String::new(),
            keys: None,
            refusals: HashMap::new(),
            markdown: (std::io::stdout().is_terminal() && color_allowed())
                .then(MarkdownStream::for_stdout),
            workspace: None,
            edits: HashMap::new(),
        }
    }

    /// Shows what calls changed in files of `workspace`, as diffs, once
    /// they are done.
    pub fn show_edits_in(&mut self, workspace: PathBuf) {
        self.workspace = Some(workspace);
    }

    /// Gives the front end the keyboard for a turn, for its questions.
    pub fn attach_keys(&mut self, keys: Option<TurnKeys>) {
        self.keys = keys;
    }

    /// Takes the keyboard back at the end of a turn.
    pub fn detach_keys(&mut self) -> Option<TurnKeys> {
        self.keys.take()
    }

    /// The front end of `-p` text mode: it never asks, and writes nothing
    /// to stdout. The text of each answer that calls tools is narration,
    /// shown on stderr once the answer is complete; the final answer is the
    /// caller's to print (see [`TerminalFrontend::show_held_as_narration`]).
    pub fn answer_only(verbose: bool) -> Self {
        let mut frontend = Self::new(false, verbose);
        frontend.text_output = TextOutput::AnswerOnly;
        // Stdout carries the answer alone, as written: scripts read it.
        frontend.markdown = None;
        frontend
    }

    /// Shows the text held back so far (an answer cut short, or one a Stop
    /// hook sent the model on from) on stderr, as narration.
    pub fn show_held_as_narration(&mut self) {
        let text = std::mem::take(&mut self.held);
        let text = text.trim_end();
        if text.is_empty() {
            return;
        }
        self.stop_spinner();
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{}", self.err.dim(text));
        let _ = err.flush();
    }

    /// The style for stderr.
    pub fn err_style(&self) -> Style {
        self.err
    }

    /// Ends the model's text with a newline if it did not.
    pub fn finish_line(&mut self) {
        self.stop_spinner();
        if let Some(markdown) = &mut self.markdown {
            let rest = markdown.finish();
            if !rest.is_empty() {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(rest.as_bytes());
                let _ = out.flush();
            }
            self.at_line_start = true;
            return;
        }
        if !self.at_line_start {
            println!();
            self.at_line_start = true;
        }
    }

    /// Where the session's calls report to while this front end shows
    /// it: a running command's last lines under the spinner on a terminal
    /// (see [`live`]).
    pub fn call_events(&self) -> SessionEvents {
        live::terminal_events(self.spinner_allowed, self.verbose, self.err)
    }

    fn start_spinner(&mut self, label: &str) {
        self.stop_spinner();
        if self.spinner_allowed {
            live::start_spinner(label.to_string(), self.err);
            self.spinning = true;
        }
    }

    fn stop_spinner(&mut self) {
        if self.spinning {
            live::stop_spinner();
            self.spinning = false;
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
            AgentEvent::Thinking => {
                // An answer held as final was not: the model goes on.
                self.show_held_as_narration();
                self.start_spinner("thinking");
            }
            AgentEvent::Text(text) if self.text_output == TextOutput::AnswerOnly => {
                self.held.push_str(text);
            }
            AgentEvent::Text(text) => {
                self.stop_spinner();
                if text.is_empty() {
                    return;
                }
                let shown = match &mut self.markdown {
                    Some(markdown) => markdown.push(text),
                    None => escape::text(text).into_owned(),
                };
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(shown.as_bytes());
                let _ = out.flush();
                self.at_line_start = text.ends_with('\n');
            }
            AgentEvent::PreparingTool { tool } => {
                self.finish_line();
                self.start_spinner(&format!("preparing {}", escape::line(tool)));
            }
            AgentEvent::Retrying {
                attempt,
                after,
                reason,
            } => {
                let text = format!(
                    "{}; retrying (attempt {attempt}) in {:.1}s",
                    escape::line(reason),
                    after.as_secs_f64()
                );
                self.line(&self.err.yellow(&text));
                self.start_spinner("waiting to retry");
            }
            AgentEvent::Answer(message) => {
                let calls_tools = message
                    .content
                    .iter()
                    .any(|block| matches!(block, Block::ToolUse { .. }));
                if calls_tools {
                    self.show_held_as_narration();
                }
                self.finish_line();
            }
            AgentEvent::Permission { id, tool, decision } => {
                if decision.outcome != Outcome::Allow {
                    // Shown on the call's own line when it finishes, so a
                    // refusal is one line, with the whole reason.
                    self.refusals
                        .insert(id.to_string(), decision.reason.clone());
                } else if self.verbose {
                    let text = format!(
                        "  allowed {}: {}",
                        escape::line(tool),
                        escape::line(&decision.reason)
                    );
                    self.line(&self.err.dim(&text));
                }
            }
            AgentEvent::ToolStarted { id, tool, input } => {
                self.finish_line();
                self.note_file_before(id, input);
                let label = format!("{} {}", escape::line(tool), key_argument(input));
                let label = label.trim_end().to_string();
                self.start_spinner(&label);
                self.running.push((id.to_string(), label));
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
                live::end_call(id);
                self.running.retain(|(running, _)| running != id);
                if let Some(reason) = self.refusals.remove(id) {
                    let text = format!(
                        "{mark} {} {} {}",
                        self.err.bold(&escape::line(tool)),
                        self.err.cyan(&argument),
                        self.err
                            .yellow(&format!("· denied: {}", escape::line(&reason)))
                    );
                    self.line(&text);
                    return;
                }
                let edit = self.edits.remove(id);
                if let Some(change) = edit.and_then(|edit| self.file_change(edit, is_error)) {
                    self.show_edit(&mark, tool, &argument, &change, duration);
                } else {
                    let summary = summarise_output(output, is_error);
                    let text = format!(
                        "{mark} {} {} {}",
                        self.err.bold(&escape::line(tool)),
                        self.err.cyan(&argument),
                        self.err
                            .dim(&format!("· {summary} · {}", format_duration(duration)))
                    );
                    self.line(&text);
                }
                // Calls of the same batch still running keep the spinner.
                if let Some((_, label)) = self.running.last() {
                    let label = label.clone();
                    self.start_spinner(&label);
                }
            }
            AgentEvent::ToolResults(_) => {
                self.running.clear();
                self.edits.clear();
                live::end_calls();
                // Refusals whose call line never came still get said.
                let mut left: Vec<(String, String)> = self.refusals.drain().collect();
                left.sort();
                for (_, reason) in left {
                    let text = format!("  denied: {}", escape::line(&reason));
                    self.line(&self.err.yellow(&text));
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
            AgentEvent::Notice(text) => self.line(&self.err.yellow(&escape::line(text))),
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

    fn ask<'a>(
        &'a mut self,
        request: &'a PermissionRequest<'a>,
    ) -> LocalBoxFuture<'a, PermissionAnswer> {
        // The terminal is read on this thread, as the turn waits for the
        // answer anyway.
        Box::pin(std::future::ready(self.ask_terminal(request)))
    }
}

impl TerminalFrontend {
    /// Before a call that may change a file of the workspace runs: keeps
    /// the file's text, to show what the call changed.
    fn note_file_before(&mut self, id: &str, input: &Value) {
        let Some(workspace) = &self.workspace else {
            return;
        };
        if Change::of_call(input, |_| None).is_none() {
            return;
        }
        let Some(path) = input.get("path").and_then(Value::as_str) else {
            return;
        };
        let before = read_for_preview(workspace, path);
        self.edits
            .insert(id.to_string(), (path.to_string(), before));
    }

    /// What a finished call changed in the file it was given, if it
    /// succeeded and changed anything.
    fn file_change(&self, edit: (String, Option<String>), is_error: bool) -> Option<Change> {
        let workspace = self.workspace.as_ref()?;
        if is_error {
            return None;
        }
        let (path, before) = edit;
        let after = read_for_preview(workspace, &path)?;
        match before {
            Some(before) if before == after => None,
            Some(before) => Some(Change::Modify {
                path,
                before,
                after,
                whole_file: true,
            }),
            None => Some(Change::Create {
                path,
                content: after,
            }),
        }
    }

    /// A call's line with the lines it added and removed, and the diff
    /// under it, cut after [`EDIT_DIFF_LINES`] lines.
    fn show_edit(
        &mut self,
        mark: &str,
        tool: &str,
        argument: &str,
        change: &Change,
        duration: Duration,
    ) {
        let (added, removed) = change.counts();
        let style = self.err;
        let counts = match change {
            Change::Create { .. } => style.green(&format!("new file, +{added}")),
            Change::Modify { .. } => format!(
                "{} {}",
                style.green(&format!("+{added}")),
                style.red(&format!("-{removed}"))
            ),
        };
        let text = format!(
            "{mark} {} {} {counts} {}",
            style.bold(&escape::line(tool)),
            style.cyan(argument),
            style.dim(&format!("· {}", format_duration(duration)))
        );
        self.line(&text);
        for line in change.render_at_most(style, EDIT_DIFF_LINES) {
            self.line(&format!("    {line}"));
        }
    }

    /// Puts the permission question on the terminal and reads the answer.
    fn ask_terminal(&mut self, request: &PermissionRequest<'_>) -> PermissionAnswer {
        self.finish_line();
        let tool = escape::line(&request.tool.name);
        let style = self.err;
        let change = Change::of_call(request.input, |path| {
            read_for_preview(request.workspace, path)
        });
        let scope = crate::policy::web_hosts::host_scope(&request.tool.name, request.input);
        match &change {
            // A per-host tool: the question names the host, at the moment
            // the call would reach it.
            _ if scope.is_some() => {
                let question = scope.as_ref().map(|s| s.question()).unwrap_or_default();
                eprintln!(
                    "{} {} {}",
                    style.yellow("?"),
                    style.bold(&escape::line(&question)),
                    style.cyan(&key_argument(request.input))
                );
                for line in preview_input(request.input) {
                    eprintln!("  {}", style.dim(&line));
                }
            }
            Some(change) => {
                eprintln!(
                    "{} {} {} {}",
                    style.yellow("?"),
                    style.bold(&format!("Run {tool}")),
                    style.cyan(&escape::line(change.path())),
                    style.dim(&format!("({})", change.summary()))
                );
                for line in change.render(style) {
                    eprintln!("  {line}");
                }
            }
            None => {
                eprintln!(
                    "{} {} {}",
                    style.yellow("?"),
                    style.bold(&format!("Run {tool}")),
                    style.cyan(&key_argument(request.input))
                );
                for line in preview_input(request.input) {
                    eprintln!("  {}", style.dim(&line));
                }
            }
        }
        eprintln!(
            "  {}",
            style.dim(&format!("why: {}", escape::line(request.reason)))
        );
        if !request.needs.granted.is_empty() {
            let granted = request.needs.granted.join("; ");
            eprintln!(
                "  {}",
                style.dim(&format!("it was granted: {}", escape::line(&granted)))
            );
        }
        match &scope {
            Some(scope) => eprintln!(
                "  [y] once   [s] {origin} for this session   [a] always {origin} in this project   [n] deny {origin} for this session",
                origin = escape::line(&scope.origin.to_string())
            ),
            None => eprintln!(
                "  [y] yes, once   [s] yes, {tool} for this session   [a] always {tool} in this project   [n] no, and tell the model why"
            ),
        }
        match &self.keys {
            Some(keys) => ask_with_keys(keys),
            None => ask_with_lines(),
        }
    }
}

/// Reads the answer to a permission question from the turn's keyboard
/// reader: one key (y, s, a, n — Enter means no), and for "no" an optional
/// reason line. Ctrl-C or Esc stop the turn. Only keys pressed after the
/// question was shown count.
fn ask_with_keys(keys: &TurnKeys) -> PermissionAnswer {
    keys.question();
    let answer = read_choice(keys);
    keys.end_question();
    answer
}

fn read_choice(keys: &TurnKeys) -> PermissionAnswer {
    prompt_text("  allow? [y/s/a/n] ");
    loop {
        let Some(key) = keys.next_answer_key() else {
            return PermissionAnswer::Deny {
                reason: Some("the terminal closed".into()),
            };
        };
        let choice = match key {
            Key::CtrlC | Key::Esc => {
                prompt_text("\n");
                return PermissionAnswer::Interrupt;
            }
            Key::Enter => 'n',
            Key::Char(c) => c.to_ascii_lowercase(),
            Key::Backspace => continue,
        };
        let answer = match choice {
            'y' => PermissionAnswer::AllowOnce,
            's' => PermissionAnswer::AllowSession,
            'a' => PermissionAnswer::AllowAlways,
            'n' => {
                prompt_text("n\n  why not? (optional, goes to the model; Enter to skip) ");
                return match read_reason(keys) {
                    Some(reason) => PermissionAnswer::Deny {
                        reason: (!reason.trim().is_empty()).then_some(reason),
                    },
                    None => PermissionAnswer::Interrupt,
                };
            }
            _ => {
                prompt_text("\n  please answer y, s, a or n: ");
                continue;
            }
        };
        prompt_text(&format!("{choice}\n"));
        return answer;
    }
}

/// A line typed for the reason of a refusal, echoed as typed; `None` when
/// the user pressed Ctrl-C.
fn read_reason(keys: &TurnKeys) -> Option<String> {
    let mut line = String::new();
    loop {
        match keys.next_answer_key() {
            None | Some(Key::Enter) | Some(Key::Esc) => {
                prompt_text("\n");
                return Some(line);
            }
            Some(Key::CtrlC) => {
                prompt_text("\n");
                return None;
            }
            Some(Key::Backspace) => {
                if line.pop().is_some() {
                    prompt_text("\u{8} \u{8}");
                }
            }
            Some(Key::Char(c)) => {
                line.push(c);
                prompt_text(&c.to_string());
            }
        }
    }
}

/// The permission question without a keyboard reader (stdin is not a
/// terminal): one line per answer.
fn ask_with_lines() -> PermissionAnswer {
    let read_line = || {
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim().to_string()),
        }
    };
    loop {
        prompt_text("  allow? [y/s/a/n] ");
        let Some(answer) = read_line() else {
            return PermissionAnswer::Deny { reason: None };
        };
        match answer.to_ascii_lowercase().as_str() {
            "y" | "yes" => return PermissionAnswer::AllowOnce,
            "s" | "session" => return PermissionAnswer::AllowSession,
            "a" | "always" => return PermissionAnswer::AllowAlways,
            "n" | "no" | "" => {
                prompt_text("  why not? (optional, goes to the model) ");
                let reason = read_line().filter(|r| !r.is_empty());
                return PermissionAnswer::Deny { reason };
            }
            _ => eprintln!("  please answer y, s, a or n"),
        }
    }
}

/// Writes part of a question to stderr, without a newline unless given.
fn prompt_text(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
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
    cut(&escape::line(line), 60)
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
        return cut(
            &escape::line(output.lines().next().unwrap_or_default()),
            100,
        );
    }
    let lines = output.lines().count();
    match lines {
        0 => "no output".to_string(),
        1 => cut(&escape::line(output.trim()), 60),
        n => format!("{n} lines"),
    }
}

/// A call's input for a permission question: indented JSON, its strings'
/// control characters escaped, at most [`PREVIEW_LINES`] lines.
fn preview_input(input: &Value) -> Vec<String> {
    let text = serde_json::to_string_pretty(input).unwrap_or_else(|_| input.to_string());
    let total = text.lines().count();
    let mut lines: Vec<String> = text
        .lines()
        .take(PREVIEW_LINES)
        .map(|line| cut(&escape::line(line), 200))
        .collect();
    if total > PREVIEW_LINES {
        lines.push(format!("… {} more lines", total - PREVIEW_LINES));
    }
    lines
}

/// How many lines of a call's input a permission question shows.
const PREVIEW_LINES: usize = 24;

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
    use serde_json::json;

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
