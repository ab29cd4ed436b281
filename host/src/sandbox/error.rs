//! What can go wrong loading a component or calling into it.

use std::path::PathBuf;
use std::time::Duration;

/// A component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file is not WebAssembly at all.
    #[error(
        "{origin} is not a WebAssembly file (it does not start with `\\0asm`); a plugin must be a component built for wasm32-wasip2"
    )]
    NotWasm {
        /// Where the bytes came from.
        origin: String,
    },
    /// The file is a core module, not a component.
    #[error(
        "{origin} is a core WebAssembly module, not a component; build it for the wasm32-wasip2 target (or wrap it with `wasm-tools component new`)"
    )]
    CoreModule {
        /// Where the bytes came from.
        origin: String,
    },
    /// The component failed validation or compilation.
    #[error("{origin} is not a valid WebAssembly component: {reason}")]
    Invalid {
        /// Where the bytes came from.
        origin: String,
        /// What wasmtime said.
        reason: String,
    },
    /// The component needs something the host does not provide, or does not
    /// export what a plugin must.
    #[error("{origin} cannot run as a capstan plugin: {reason}")]
    Incompatible {
        /// Where the bytes came from.
        origin: String,
        /// What is missing.
        reason: String,
    },
    /// A file could not be read or written.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What the host was doing.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The engine could not be set up.
    #[error("cannot set up the WebAssembly engine: {0}")]
    Engine(String),
    /// The compiled form of a component is no longer in the compile cache,
    /// or no longer intact.
    #[error(
        "the compiled form of {origin} is missing from the compile cache or was changed ({}); start capstan again to compile it anew",
        path.display()
    )]
    NotCached {
        /// Where the component came from.
        origin: String,
        /// The cache entry.
        path: PathBuf,
    },
}

/// A call into a plugin did not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The tool rejected its input.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The sandbox refused something the tool tried.
    #[error("denied: {0}")]
    Denied(String),
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
    /// No such tool in the plugin.
    #[error("unknown tool `{name}`{}", suggest(known))]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// The tools that do exist.
        known: Vec<String>,
    },
    /// The call ran past its deadline and was stopped.
    #[error("plugin {plugin} was stopped after {}: it ran past its time limit", human_duration(*limit))]
    Timeout {
        /// The plugin.
        plugin: String,
        /// The limit it ran into.
        limit: Duration,
    },
    /// The call tried to use more memory than allowed and was stopped.
    #[error("plugin {plugin} was stopped: it tried to use more than {} of memory", human_size(*limit))]
    MemoryLimit {
        /// The plugin.
        plugin: String,
        /// The limit in bytes.
        limit: u64,
    },
    /// The call held more resources in the host at once (open files,
    /// streams, HTTP headers and requests) than its memory limit allows
    /// ([`super::Limits::host_resources`]), and was stopped.
    #[error("plugin {plugin} was stopped: it held more than {limit} resources in the host at once (files, streams, HTTP headers and requests), as many as its {} memory limit allows", human_size(*memory))]
    HostResources {
        /// The plugin.
        plugin: String,
        /// How many resources it may hold.
        limit: usize,
        /// Its memory limit in bytes, from which that follows.
        memory: u64,
    },
    /// The call built an HTTP header set (the headers or trailers of a
    /// request or response) larger than the host holds
    /// ([`super::Limits::FIELDS_BYTES`]), and was stopped.
    #[error("plugin {plugin} was stopped: it built a set of HTTP headers over the {} the host holds for one request or response", human_size(*limit as u64))]
    HeadersTooLarge {
        /// The plugin.
        plugin: String,
        /// The most one set may hold, in bytes.
        limit: usize,
    },
    /// The call returned more than the result-size cap.
    #[error("plugin {plugin} returned {} of output, more than the {} allowed", human_size(*size), human_size(*limit))]
    OutputTooLarge {
        /// The plugin.
        plugin: String,
        /// The size of what it returned.
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// The plugin trapped or panicked.
    #[error("plugin {plugin} crashed: {reason}{}", stderr_tail(stderr))]
    Crashed {
        /// The plugin.
        plugin: String,
        /// The trap.
        reason: String,
        /// What the plugin wrote to stderr (a panic message, usually).
        stderr: String,
    },
    /// The host could not set the call up.
    #[error("cannot start plugin {plugin}: {reason}")]
    Setup {
        /// The plugin.
        plugin: String,
        /// Why.
        reason: String,
    },
}

impl CallError {
    /// Whether the plugin itself misbehaved (trap, timeout, cap), as opposed
    /// to the tool reporting an error.
    pub fn is_crash(&self) -> bool {
        matches!(
            self,
            Self::Timeout { .. }
                | Self::MemoryLimit { .. }
                | Self::HostResources { .. }
                | Self::HeadersTooLarge { .. }
                | Self::OutputTooLarge { .. }
                | Self::Crashed { .. }
        )
    }
}

fn suggest(known: &[String]) -> String {
    if known.is_empty() {
        String::new()
    } else {
        format!("; available: {}", known.join(", "))
    }
}

fn stderr_tail(stderr: &str) -> String {
    let trimmed = stderr.trim();
    if trimmed.is_empty() {
        return String::new();
    }
    // Rust's hint about RUST_BACKTRACE cannot be acted on inside the sandbox.
    let lines: Vec<&str> = trimmed
        .lines()
        .filter(|l| !l.starts_with("note: run with `RUST_BACKTRACE"))
        .collect();
    let tail = &lines[lines.len().saturating_sub(12)..];
    format!("\n  plugin stderr:\n    {}", tail.join("\n    "))
}

/// Formats a byte count the way a person reads it.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{} {unit}", bytes / size);
        }
        if bytes >= size {
            return format!("{:.1} {unit}", bytes as f64 / size as f64);
        }
    }
    format!("{bytes} bytes")
}

/// Formats a duration the way a person reads it.
pub fn human_duration(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{} ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}
