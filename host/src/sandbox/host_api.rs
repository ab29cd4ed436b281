//! The `capstan:plugin/host` interface: what every plugin may call without
//! a grant (logging and progress).

use std::sync::Arc;

use super::bindings::capstan::plugin::{host, types};
use super::call::CallState;

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

fn bounded(mut message: String) -> String {
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

impl CallState {
    fn report(&mut self, event: PluginEvent) {
        self.touch();
        if let Some(sink) = &self.events {
            sink(&self.plugin, event);
        }
    }
}

impl host::Host for CallState {
    fn log(&mut self, level: host::LogLevel, message: String) {
        let level = match level {
            host::LogLevel::Trace => LogLevel::Trace,
            host::LogLevel::Debug => LogLevel::Debug,
            host::LogLevel::Info => LogLevel::Info,
            host::LogLevel::Warn => LogLevel::Warn,
            host::LogLevel::Error => LogLevel::Error,
        };
        self.report(PluginEvent::Log {
            level,
            message: bounded(message),
        });
    }

    fn progress(&mut self, message: String, done: u64, total: Option<u64>) {
        self.report(PluginEvent::Progress {
            message: bounded(message),
            done,
            total,
        });
    }
}

impl types::Host for CallState {}
