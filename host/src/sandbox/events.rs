//! What a plugin reports while it runs (log lines, progress), where it
//! goes, and how much of it one call may send.

use std::sync::Arc;

/// Something a plugin reported while running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginEvent {
    /// A log line.
    Log {
        /// How important.
        level: LogLevel,
        /// The line.
        message: String,
    },
    /// Progress on a long call.
    Progress {
        /// What it is doing.
        message: String,
        /// Units done.
        done: u64,
        /// Units in all, if known.
        total: Option<u64>,
    },
    /// Output of a native command the call runs (the host's `exec.run`),
    /// as it arrives: untrusted text, escaped wherever it is shown.
    CommandOutput {
        /// The text, in the pieces it arrived in (whole characters).
        text: String,
    },
}

/// How important a log line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Very detailed.
    Trace,
    /// For debugging.
    Debug,
    /// For information.
    Info,
    /// Something the user should see.
    Warn,
    /// Something went wrong.
    Error,
}

/// Receives what plugins report, tagged with the plugin's name.
pub type EventSink = Arc<dyn Fn(&str, PluginEvent) + Send + Sync>;

/// The longest log or progress message kept; longer ones are cut.
const MAX_MESSAGE: usize = 4096;

/// The most log lines and progress reports one call may send; later ones
/// are counted and dropped.
pub const MAX_REPORTS_PER_CALL: u64 = 1000;

/// The most bytes of log and progress messages one call may send.
pub const MAX_REPORT_BYTES_PER_CALL: u64 = 256 << 10;

/// What one call has sent through the `host` interface, against its allowance
/// ([`MAX_REPORTS_PER_CALL`], [`MAX_REPORT_BYTES_PER_CALL`]): a plugin that
/// logs in a loop cannot flood the terminal or the host's memory.
#[derive(Debug, Default)]
pub(super) struct ReportBudget {
    sent: u64,
    bytes: u64,
    dropped: u64,
    dropped_bytes: u64,
}

impl ReportBudget {
    /// Whether a message of `len` bytes may still be sent; counts it either
    /// way.
    pub(super) fn admit(&mut self, len: usize) -> bool {
        let len = u64::try_from(len).unwrap_or(u64::MAX);
        if self.sent < MAX_REPORTS_PER_CALL
            && self.bytes.saturating_add(len) <= MAX_REPORT_BYTES_PER_CALL
        {
            self.sent += 1;
            self.bytes += len;
            true
        } else {
            self.dropped += 1;
            self.dropped_bytes = self.dropped_bytes.saturating_add(len);
            false
        }
    }

    /// The line saying what was dropped, if anything was.
    pub(super) fn dropped_notice(&self) -> Option<PluginEvent> {
        (self.dropped > 0).then(|| PluginEvent::Log {
            level: LogLevel::Warn,
            message: format!(
                "{} more log lines and progress reports ({} bytes) were dropped: a call may send at most {MAX_REPORTS_PER_CALL} ({} KiB)",
                self.dropped,
                self.dropped_bytes,
                MAX_REPORT_BYTES_PER_CALL >> 10
            ),
        })
    }
}

/// `message`, cut to [`MAX_MESSAGE`] bytes.
pub(super) fn bounded(mut message: String) -> String {
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}
