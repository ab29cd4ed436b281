//! A long-lived service in the OS sandbox: a local MCP server, a language
//! server.
//!
//! [`start_service`] starts the process and waits for it on a thread of its
//! own (the sandbox ties a command's life to the thread that starts it), so
//! it dies with every process it started when it is cancelled or capstan
//! exits; how it ended is said in words to a callback. Its standard error
//! is drained all the time on another thread (a flood never blocks the
//! service or capstan), keeping only the last [`ERROR_TAIL`] bytes in an
//! [`ErrorTail`] for reports. Its standard input and output are the
//! caller's.

use std::io::{PipeReader, PipeWriter, Read};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::{AttachedPipes, Cancel, Ending, ExecGrants, ExecRequest, RunningCommand};

/// How much of the end of a service's standard error is kept.
pub const ERROR_TAIL: usize = 4096;

/// How the end of a service's standard error is told in reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TailReport {
    /// How many of its last non-blank lines are shown.
    pub lines: usize,
    /// The longest report, in bytes (longer ones end with `…`).
    pub max_len: usize,
    /// Whether the report says how many bytes it wrote in all (and is
    /// made even when those were blank lines only).
    pub with_size: bool,
}

/// The end of a service's standard error, and how much it wrote in all.
#[derive(Debug)]
pub struct ErrorTail {
    tail: Vec<u8>,
    total: u64,
    report: TailReport,
}

impl ErrorTail {
    /// An empty one, told as `report` says.
    pub fn new(report: TailReport) -> Self {
        Self {
            tail: Vec::new(),
            total: 0,
            report,
        }
    }

    /// Adds what the service wrote next.
    pub fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        self.tail.extend_from_slice(chunk);
        if self.tail.len() > ERROR_TAIL {
            let cut = self.tail.len() - ERROR_TAIL;
            self.tail.drain(..cut);
        }
    }

    /// Its last lines (and its size, if the report says so), when it wrote
    /// anything.
    pub fn summary(&self) -> Option<String> {
        if self.total == 0 {
            return None;
        }
        let text = String::from_utf8_lossy(&self.tail);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        if lines.is_empty() && !self.report.with_size {
            return None;
        }
        let skip = lines.len().saturating_sub(self.report.lines);
        let last = lines[skip..].join(" | ");
        let mut summary = if self.report.with_size {
            format!("its stderr ({} bytes) ended with: ", self.total)
        } else {
            "its stderr ended with: ".to_string()
        };
        summary.push_str(&crate::escape::line(&last));
        if summary.len() > self.report.max_len {
            let mut end = self.report.max_len;
            while !summary.is_char_boundary(end) {
                end -= 1;
            }
            summary.truncate(end);
            summary.push('…');
        }
        Some(summary)
    }
}

/// What [`start_service`] starts.
pub struct ServiceSpec {
    /// The command, its sandbox and its audit scope.
    pub request: ExecRequest,
    /// What it is granted.
    pub grants: ExecGrants,
    /// Variables with their values, added to its scrubbed environment.
    pub env: Vec<(String, String)>,
    /// The name of the thread that waits for it; its stderr reader is
    /// `THREAD-stderr`.
    pub thread: String,
    /// What it is called in the words of its ending (`the server`).
    pub noun: &'static str,
    /// How its standard error is told in reports.
    pub tail: TailReport,
}

/// A service started: its standard input and output, and the end of its
/// standard error.
pub struct Service {
    /// Its standard input.
    pub stdin: PipeWriter,
    /// Its standard output.
    pub stdout: PipeReader,
    /// The end of its standard error, as it is drained.
    pub stderr: Arc<Mutex<ErrorTail>>,
}

/// Why a service did not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    /// No thread could be started for it, or that thread ended early.
    #[error("{0}")]
    Thread(String),
    /// The command itself could not be started (its sandbox, its program).
    #[error("{0}")]
    Start(String),
}

/// Starts `spec` on a thread of its own that waits for it until it ends or
/// `cancel` is raised, then calls `on_end` with how it ended (`NOUN exited
/// with code N`, `NOUN ran out of time`, `NOUN was stopped`) and the end of
/// its standard error.
pub fn start_service(
    spec: ServiceSpec,
    cancel: &Cancel,
    on_end: impl FnOnce(String, &Arc<Mutex<ErrorTail>>) + Send + 'static,
) -> Result<Service, ServiceError> {
    let ServiceSpec {
        request,
        grants,
        env,
        thread,
        noun,
        tail,
    } = spec;
    let stderr = Arc::new(Mutex::new(ErrorTail::new(tail)));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let waiter_cancel = cancel.clone();
    let waiter_stderr = stderr.clone();
    let drained = Arc::new(Drained::default());
    let waiter_drained = drained.clone();
    std::thread::Builder::new()
        .name(thread.clone())
        .spawn(move || {
            let running = match RunningCommand::start_attached(&request, &grants, &env) {
                Ok((running, pipes)) => {
                    let _ = ready_tx.send(Ok(pipes));
                    running
                }
                Err(error) => {
                    let _ = ready_tx.send(Err(error.to_string()));
                    return;
                }
            };
            let outcome = running.wait(&waiter_cancel, &mut |_| {});
            // What it wrote last is read before its end is told.
            waiter_drained.wait(DRAIN_WAIT);
            on_end(describe_ending(noun, outcome.ending), &waiter_stderr);
        })
        .map_err(|e| ServiceError::Thread(format!("cannot start a thread for the server: {e}")))?;
    let AttachedPipes {
        stdin,
        stdout,
        stderr: mut errors,
    } = ready_rx
        .recv()
        .map_err(|_| ServiceError::Thread("the server's thread ended before it started".into()))?
        .map_err(ServiceError::Start)?;

    let tail = stderr.clone();
    let _ = std::thread::Builder::new()
        .name(format!("{thread}-stderr"))
        .spawn(move || {
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(n) = errors.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut tail) = tail.lock() {
                    tail.push(&buf[..n]);
                }
            }
            drained.set();
        });
    Ok(Service {
        stdin,
        stdout,
        stderr,
    })
}

/// How long the end of a service waits for its standard error to be read
/// to its end (a process it left behind may hold the pipe open).
const DRAIN_WAIT: Duration = Duration::from_millis(500);

/// Set once a service's standard error was read to its end.
#[derive(Default)]
struct Drained {
    done: Mutex<bool>,
    changed: Condvar,
}

impl Drained {
    fn set(&self) {
        if let Ok(mut done) = self.done.lock() {
            *done = true;
        }
        self.changed.notify_all();
    }

    /// Waits until set, `limit` at most.
    fn wait(&self, limit: Duration) {
        if let Ok(done) = self.done.lock() {
            let _ = self.changed.wait_timeout_while(done, limit, |done| !*done);
        }
    }
}

/// How a service called `noun` ended, in words.
fn describe_ending(noun: &str, ending: Ending) -> String {
    match ending {
        Ending::Exited(code) => format!("{noun} exited with code {code}"),
        Ending::TimedOut => format!("{noun} ran out of time"),
        Ending::Cancelled => format!("{noun} was stopped"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZED: TailReport = TailReport {
        lines: 5,
        max_len: 800,
        with_size: true,
    };
    const PLAIN: TailReport = TailReport {
        lines: 3,
        max_len: 600,
        with_size: false,
    };

    #[test]
    fn nothing_written_is_no_summary() {
        assert_eq!(ErrorTail::new(SIZED).summary(), None);
        assert_eq!(ErrorTail::new(PLAIN).summary(), None);
    }

    #[test]
    fn the_last_lines_are_told_escaped() {
        let mut tail = ErrorTail::new(PLAIN);
        tail.push(b"one\ntwo\n\nthree\x1b[31m\nfour\n");
        assert_eq!(
            tail.summary().as_deref(),
            Some("its stderr ended with: two | three\\x1b[31m | four")
        );
        let mut sized = ErrorTail::new(SIZED);
        sized.push(b"a\nb\n");
        assert_eq!(
            sized.summary().as_deref(),
            Some("its stderr (4 bytes) ended with: a | b")
        );
    }

    #[test]
    fn blank_output_is_told_only_with_its_size() {
        let mut sized = ErrorTail::new(SIZED);
        sized.push(b"\n\n  \n");
        assert_eq!(
            sized.summary().as_deref(),
            Some("its stderr (5 bytes) ended with: ")
        );
        let mut plain = ErrorTail::new(PLAIN);
        plain.push(b"\n\n  \n");
        assert_eq!(plain.summary(), None);
    }

    #[test]
    fn only_the_end_is_kept_and_the_report_is_capped() {
        let mut tail = ErrorTail::new(PLAIN);
        for _ in 0..10 {
            tail.push(&[b'x'; 1000]);
        }
        assert_eq!(tail.total, 10_000);
        assert_eq!(tail.tail.len(), ERROR_TAIL);
        let summary = tail.summary().unwrap_or_default();
        assert!(summary.ends_with('…'), "{summary}");
        assert_eq!(summary.len(), 600 + '…'.len_utf8());
    }

    #[test]
    fn endings_are_told_with_the_noun() {
        assert_eq!(
            describe_ending("the server", Ending::Exited(3)),
            "the server exited with code 3"
        );
        assert_eq!(
            describe_ending("the language server", Ending::TimedOut),
            "the language server ran out of time"
        );
        assert_eq!(
            describe_ending("the server", Ending::Cancelled),
            "the server was stopped"
        );
    }
}
