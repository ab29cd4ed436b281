//! Logging and progress reports to the host.
//!
//! These need no grant. Log lines are tagged with the plugin and the call;
//! `warn` and `error` lines are shown to the user.

use crate::bindings::capstan::plugin::host::{self, LogLevel};

/// Logs a debug line.
pub fn debug(message: &str) {
    host::log(LogLevel::Debug, message);
}

/// Logs an informational line.
pub fn info(message: &str) {
    host::log(LogLevel::Info, message);
}

/// Logs a warning, shown to the user.
pub fn warn(message: &str) {
    host::log(LogLevel::Warn, message);
}

/// Logs an error, shown to the user.
pub fn error(message: &str) {
    host::log(LogLevel::Error, message);
}

/// Reports progress on a long call: `done` out of `total` units, if known.
pub fn progress(message: &str, done: u64, total: Option<u64>) {
    host::progress(message, done, total);
}
