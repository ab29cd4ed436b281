//! capstan's own log: `tracing` spans and events, filtered by
//! `CAPSTAN_LOG` (or `RUST_LOG`) or by `-v`/`-vv`, written to a log file
//! per session under the data folder and, when asked, to stderr.
//!
//! - The filter is `CAPSTAN_LOG` if set, else `RUST_LOG`, else capstan's
//!   own targets at `info` (`debug` with `-v`, `trace` with `-vv`) and
//!   everything else at `warn`. `CAPSTAN_LOG=off` turns logging off.
//! - The file is `<data>/logs/<session id>.log` for a session (one file per
//!   session, appended to when it is resumed) and
//!   `<data>/logs/capstan-<command>.log`
//!   for other commands (`capstan-start.log` for a session that ended
//!   before it had an id); it rolls over at a size and the folder keeps a
//!   bounded number of files ([`file`]). Lines are formatted and written
//!   by a thread of their own, fed through a bounded queue ([`record`]):
//!   logging never waits on the disk, and a turn spends on a line only
//!   the copying of its values.
//! - stderr gets the same lines only with `-v` (and never in the
//!   interactive session, whose screen it would break); stdout never does,
//!   so `-p --output-format json` and `mcp serve` stay clean.
//!
//! Secrets are never logged: the events carry names, counts, statuses and
//! durations, never API keys, header values or injected secrets, and the
//! types that hold those redact their `Debug` output.

pub mod file;
pub mod record;

use std::path::PathBuf;
use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

use crate::home::Home;
use file::{Fallback, FileSink};

/// Where a run's log file goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogFile {
    /// A session's: named once the session has an id ([`name_session`]).
    Session,
    /// A command's own file, `<data>/logs/NAME.log`.
    Named(String),
    /// No file.
    None,
}

/// How a run logs.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// How many `-v` were given.
    pub verbosity: u8,
    /// Whether log lines also go to stderr.
    pub stderr: bool,
    /// The log file.
    pub file: LogFile,
}

/// The process's log file, once logging has started.
static FILE: OnceLock<(FileSink, PathBuf)> = OnceLock::new();

/// Keeps the log running; dropping it writes what is still queued.
pub struct LogGuard {
    filter: Option<reload::Handle<EnvFilter, Registry>>,
    sink: Option<FileSink>,
}

impl LogGuard {
    /// Replaces the filter (directives as in `CAPSTAN_LOG`).
    pub fn set_filter(&self, directives: &str) -> Result<(), String> {
        let filter = EnvFilter::builder()
            .parse(directives)
            .map_err(|e| format!("bad log filter `{directives}`: {e}"))?;
        match &self.filter {
            Some(handle) => handle.reload(filter).map_err(|e| e.to_string()),
            None => Err("logging is not running".into()),
        }
    }

    /// Writes every queued line to the file.
    pub fn flush(&self) {
        if let Some(sink) = &self.sink {
            sink.flush();
        }
    }
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        self.flush();
    }
}

/// The filter for `verbosity` when neither `CAPSTAN_LOG` nor `RUST_LOG`
/// is set.
pub fn default_filter(verbosity: u8) -> &'static str {
    match verbosity {
        0 => "warn,capstan=info",
        1 => "warn,capstan=debug",
        _ => "warn,capstan=trace",
    }
}

/// The filter directives in force, and a warning when a variable's could
/// not be used.
fn filter_directives(verbosity: u8) -> (EnvFilter, Option<String>) {
    for var in ["CAPSTAN_LOG", "RUST_LOG"] {
        let Ok(value) = std::env::var(var) else {
            continue;
        };
        if value.trim().is_empty() {
            continue;
        }
        match EnvFilter::builder().parse(&value) {
            Ok(filter) => return (filter, None),
            Err(error) => {
                let warning = format!(
                    "capstan: ignoring {var}={value}: {error}; use levels such as `debug` or `capstan=trace,warn`"
                );
                return (EnvFilter::new(default_filter(verbosity)), Some(warning));
            }
        }
    }
    (EnvFilter::new(default_filter(verbosity)), None)
}

/// Starts logging for this process. Problems (no data folder, a bad
/// filter) are reported on stderr and leave the run going without that
/// part: logging never stops a command.
pub fn init(options: &LogOptions) -> LogGuard {
    let (filter, warning) = filter_directives(options.verbosity);
    if let Some(warning) = warning {
        eprintln!("{warning}");
    }
    let sink = match &options.file {
        LogFile::None => None,
        file => match Home::from_env() {
            Ok(home) => start_file(&home, file),
            Err(_) => None,
        },
    };
    init_with(filter, sink, options.stderr)
}

/// Starts logging with `directives` (as in `CAPSTAN_LOG`) to a log file in
/// `dir`, named `name`: for benchmarks, which compare a run with logging
/// off to one at the default level in one process.
pub fn init_in(dir: PathBuf, name: &str, directives: &str) -> Result<LogGuard, String> {
    let filter = EnvFilter::builder()
        .parse(directives)
        .map_err(|e| format!("bad log filter `{directives}`: {e}"))?;
    let sink = FileSink::start(dir.clone(), Fallback(name.into()))
        .map_err(|e| format!("cannot start the log writer: {e}"))?;
    let path = dir.join(name);
    sink.open(path.clone());
    let _ = FILE.set((sink.clone(), path));
    Ok(init_with(filter, Some(sink), false))
}

fn start_file(home: &Home, file: &LogFile) -> Option<FileSink> {
    let dir = home.logs_dir();
    let fallback = match file {
        LogFile::Named(name) => format!("{name}.log"),
        _ => "capstan-start.log".to_string(),
    };
    let sink = FileSink::start(dir.clone(), Fallback(fallback.clone().into())).ok()?;
    let path = dir.join(&fallback);
    if let LogFile::Named(_) = file {
        sink.open(path.clone());
    }
    let _ = FILE.set((sink.clone(), path));
    Some(sink)
}

fn init_with(filter: EnvFilter, sink: Option<FileSink>, stderr: bool) -> LogGuard {
    let (filter, handle) = reload::Layer::new(filter);
    let file_layer = sink.clone().map(record::FileLayer::new);
    let stderr_layer = stderr.then(|| {
        tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .fmt_fields(StderrFields::default())
            .with_writer(std::io::stderr)
    });
    let subscriber = Registry::default()
        .with(filter)
        .with(file_layer)
        .with(stderr_layer);
    let installed = tracing::subscriber::set_global_default(subscriber).is_ok();
    LogGuard {
        filter: installed.then_some(handle),
        sink,
    }
}

/// The fields of stderr's lines: formatted as the file's, under a type of
/// their own, because each formatter keeps a span's formatted fields in the
/// span under its type, and two of one type would both append a field
/// recorded later.
#[derive(Default)]
struct StderrFields(tracing_subscriber::fmt::format::DefaultFields);

impl<'writer> tracing_subscriber::fmt::FormatFields<'writer> for StderrFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        writer: tracing_subscriber::fmt::format::Writer<'writer>,
        fields: R,
    ) -> std::fmt::Result {
        self.0.format_fields(writer, fields)
    }
}

/// Sends the rest of this process's log (and what was logged before) to
/// the file of session `id`, `<data>/logs/<id>.log`.
pub fn name_session(id: &str) {
    if let Some((sink, path)) = FILE.get()
        && let Some(dir) = path.parent()
    {
        let named = dir.join(format!("{id}.log"));
        sink.open(named);
        tracing::info!(
            session = id,
            version = env!("CARGO_PKG_VERSION"),
            pid = std::process::id(),
            "session log"
        );
    }
}

/// The folder log files are written to, when logging to a file.
pub fn log_dir() -> Option<PathBuf> {
    FILE.get()
        .and_then(|(_, path)| path.parent().map(PathBuf::from))
}
