//! The `capstan:plugin/host` interface: what every plugin may call without
//! a grant (logging and progress).

use super::bindings::capstan::plugin::{host, types};
use super::events::{LogLevel, PluginEvent, bounded};
use super::state::CallState;

impl CallState {
    fn report(&mut self, event: PluginEvent) {
        self.touch();
        let len = match &event {
            PluginEvent::Log { message, .. } | PluginEvent::Progress { message, .. } => {
                message.len()
            }
            PluginEvent::CommandOutput { text } => text.len(),
        };
        if !self.reports.admit(len) {
            return;
        }
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
