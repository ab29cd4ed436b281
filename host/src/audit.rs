//! The audit log: every capability decision a plugin's call caused — a file
//! opened, a request sent or refused, an environment variable read, a secret
//! injected — appended as JSONL, each record hash-chained to the previous
//! one so an edited or truncated log is detected.
//!
//! # Format
//!
//! One JSON object per line, keys sorted (the record's canonical form):
//! `plugin`, `call_id`, `session_id`, `kind` and the event's own fields, plus
//! `seq` (1, 2, ...), `time` (RFC 3339, UTC), `run` (one id per capstan
//! process), `prev` (the previous record's hash; 64 zeros for the first) and
//! `hash`: the hex SHA-256 of `prev` followed by the record's canonical JSON
//! without `hash`.
//!
//! Beside the log, `<log>.head` holds the last record's `seq` and `hash`,
//! rewritten (in place, with the log locked) after appends — at most every 50 ms while
//! records stream in (counted from the log's opening when the head exists
//! already, from its first record otherwise), and when the log is closed —
//! so a log cut at a record boundary, which leaves a valid chain, is still
//! detected. Records written after the head (a process killed within those
//! 50 ms) are accepted when the record the head names is in the chain.
//!
//! # Damage
//!
//! A record whose write was cut short leaves a last line without a newline.
//! [`AuditLog::open`] keeps that line as evidence, ends it with a newline and
//! continues the chain from the last complete record; [`verify`] then reports
//! the cut line. A log whose head file names a record the log no longer ends
//! with (records cut off the end, the end replaced) is still appended to,
//! but its head file is left alone, so later appends do not hide the damage
//! from [`verify`]; moving the log and its head aside starts a new one.
//!
//! Appends from several processes are serialised with an exclusive lock on
//! the log file; a process that finds the file grown by someone else picks
//! the chain up from the new last record.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::timestamp::rfc3339;

/// The `prev` of the first record.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// An audit log file, shared by every call of a process.
#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    path: PathBuf,
    head_path: PathBuf,
    file: File,
    /// The file's length after our last write; another length means
    /// someone else appended and the tip must be read again.
    end: u64,
    seq: u64,
    hash: String,
    run: String,
    /// Whether a write failure was already reported (once is enough).
    reported: bool,
    /// Whether records were appended since the head file was written.
    head_behind: bool,
    /// The head file disagreed with the log when it was opened: it is
    /// left as it is, so `verify` goes on reporting the damage.
    head_frozen: bool,
    /// When the head file was last written by this handle.
    head_written: Option<Instant>,
}

/// How often, at most, the head file is rewritten while records are
/// appended. Rewriting it costs a few appends, so a burst of records
/// updates it once; the last handle to close writes it.
const HEAD_INTERVAL: Duration = Duration::from_millis(50);

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog").finish_non_exhaustive()
    }
}

/// The log could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// A file operation failed.
    #[error("cannot use the audit log {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A call's record could not be written.
    #[error("cannot write the audit log {}: {reason}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// Who caused a record: a plugin's call. Clones share the call's allowance
/// of [`MAX_RECORDS_PER_CALL`] records.
#[derive(Debug, Clone)]
pub struct AuditScope {
    /// Where records go.
    pub log: AuditLog,
    /// The plugin.
    pub plugin: String,
    /// The call (as passed to the plugin in its call context).
    pub call_id: String,
    /// The agent session, if the call was made in one.
    pub session_id: Option<String>,
    /// The call's records: written, and dropped past the allowance.
    counts: Arc<RecordCounts>,
}

/// The most records one call may write. A plugin can cause a record per
/// file it opens or request it tries, thousands a second; past this many
/// the rest are counted, and [`AuditScope::close`] records how many were
/// dropped.
pub const MAX_RECORDS_PER_CALL: u64 = 10_000;

#[derive(Debug, Default)]
struct RecordCounts {
    written: AtomicU64,
    dropped: AtomicU64,
    /// Why a record of the call could not be written, if one could not.
    failure: OnceLock<String>,
}

/// One capability decision.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AuditEvent {
    /// A file or folder was opened (or refused).
    FileOpened {
        /// The path as the plugin named it, under its granted folder.
        path: String,
        /// `read`, `write`, `create`, `directory`, ...
        mode: String,
        /// Whether the sandbox let it happen.
        allowed: bool,
    },
    /// An HTTP request was sent.
    HttpSent {
        /// GET, POST, ...
        method: String,
        /// The URL, without query values that could carry secrets.
        url: String,
        /// The response status, when one came.
        status: Option<u16>,
    },
    /// An HTTP request was refused before anything was sent.
    HttpRefused {
        /// GET, POST, ...
        method: String,
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// Environment variables were given to the plugin.
    EnvRead {
        /// Their names.
        names: Vec<String>,
    },
    /// A name lookup (`wasi:sockets/ip-name-lookup`) was refused: plugins
    /// never resolve names themselves.
    NameLookupRefused {
        /// The name the plugin tried to resolve.
        name: String,
    },
    /// The call caused more records than one call may write
    /// ([`MAX_RECORDS_PER_CALL`]); this many more were not written.
    RecordsDropped {
        /// How many records were dropped.
        dropped: u64,
        /// How many one call may write.
        limit: u64,
    },
    /// A secret was added to a request, as a header.
    SecretInjected {
        /// The secret's name (never its value).
        name: String,
        /// The host the request went to.
        host: String,
    },
    /// A socket connection was refused.
    SocketRefused {
        /// The address the plugin tried.
        address: String,
    },
    /// A hook answered an event of an agent session with a decision other
    /// than `proceed`, or failed to answer. The record's `plugin` is the
    /// hook and its `call_id` the tool call (or the event) concerned.
    HookDecision {
        /// The event, with Claude Code's name (`PreToolUse`).
        event: String,
        /// `allow`, `ask`, `deny`, `modify`, `add-context`, `keep-going` or
        /// `failed`.
        decision: String,
        /// The reason or text it gave, or why it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// An installed plugin was refused before any of its code ran: at
    /// install (an import its manifest does not justify, a bad signature)
    /// or at load (a file changed since install, a manifest asking more
    /// than was agreed to). The record's `call_id` is `install` or `load`.
    PluginRefused {
        /// Why, as the user was told.
        reason: String,
    },
    /// A native command ran (`capstan exec`, the model's `exec.*` tools).
    /// The record's `plugin` is `exec` and its `call_id` the tool call's.
    CommandRun {
        /// The command string or argv, as run.
        command: String,
        /// The folder it started in.
        cwd: String,
        /// Whether it could write the workspace.
        write: bool,
        /// The origins it could reach through the proxy.
        net: Vec<String>,
        /// Whether it ran in the OS sandbox (`false` only with
        /// `[exec] sandbox = "off"`).
        sandboxed: bool,
        /// `exited`, `timed out` or `cancelled`.
        ending: String,
        /// Its exit code, when it exited (`128 + n` if killed by signal n).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// How long it ran, in milliseconds.
        duration_ms: u64,
        /// What the sandbox refused it, as far as its errors and the
        /// proxy tell (a write into a read-only workspace, an origin not
        /// granted); empty when nothing was seen refused.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        refused: Vec<String>,
    },
    /// A native command started (`capstan exec`, the model's `exec.*`
    /// tools, a local MCP server, a hook's command, a language server),
    /// recorded as it starts; [`AuditEvent::CommandRun`] follows when it
    /// ends. The record's `plugin` is who started it (`exec`, `hooks`,
    /// `mcp__SERVER`, `lsp__SERVER`) and its `call_id` the tool call's.
    CommandStarted {
        /// The command string or argv.
        command: String,
        /// The folder it starts in.
        cwd: String,
        /// Whether it can write the workspace.
        write: bool,
        /// The origins it can reach through the proxy.
        net: Vec<String>,
        /// Whether it runs in the OS sandbox.
        sandboxed: bool,
        /// Its process id, as capstan sees it.
        pid: u32,
    },
    /// A native command was refused before it ran: its sandbox could not be
    /// set up, or it asked for what cannot be granted.
    CommandRefused {
        /// The command string or argv.
        command: String,
        /// Why, as the caller was told.
        reason: String,
    },
    /// What a plugin may touch was changed by `capstan plugin install`,
    /// `update`, `grant`, `revoke` or `remove`. The record's `call_id` is
    /// the command (`install`, ...).
    PluginChanged {
        /// What changed, in words: the version, and the capabilities
        /// granted, given back or taken away.
        change: String,
        /// Where the plugin came from: the folder or archive installed.
        source: String,
        /// Who made the change: the user account that ran capstan.
        user: String,
    },
    /// A tool was called (a plugin's component, a host tool such as
    /// `exec.run`, `skill` or `task`), recorded when the call ends, however
    /// it ends. The record's `plugin` is the tool's plugin (`host` for the
    /// host's bare-named tools) and its `call_id` the model's id for the
    /// call (or the caller's: `capstan tool call`, an MCP client). Calls of
    /// MCP servers' tools are [`AuditEvent::McpToolCalled`].
    ToolCalled {
        /// The tool's full name (`fs.read`, `exec.run`, `task`).
        tool: String,
        /// `ok`, `invalid input`, `denied` (the sandbox refused what it
        /// tried), `failed`, `timed out`, `crashed` or `interrupted`.
        outcome: String,
        /// What the error said, for any outcome but `ok` (at most
        /// [`DETAIL_LIMIT`] bytes).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
        /// How long the call took.
        duration_ms: u64,
    },
    /// A tool call was refused before it ran: by a deny rule, plan mode,
    /// the user, a hook, a skill's `allowed-tools`, or a command line that
    /// did not allow what the call asks for (`--allow-write`). The record's
    /// `call_id` is the model's id for the call.
    CallDenied {
        /// The tool's full name.
        tool: String,
        /// Who refused: `rule (LAYER)`, `mode plan`, `user`, `hook NAME`,
        /// `non-interactive`, `skill NAME`, `command line`, ...
        by: String,
        /// Why, as the model or the user was told.
        reason: String,
    },
    /// A tool of an MCP server was called (`mcp__SERVER__TOOL`). The
    /// record's plugin is `mcp__SERVER`.
    McpToolCalled {
        /// The tool's name on its server.
        tool: String,
        /// `ok`, `tool error`, `failed` (transport, crash, timeout).
        outcome: String,
        /// How long the call took.
        duration_ms: u64,
        /// What the server's sandbox refused it during the call, as its
        /// answer tells ("Read-only file system", "Permission denied");
        /// empty when it tells of nothing refused.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        refused: Vec<String>,
    },
    /// A language server was asked something by the `lsp` tool. The
    /// record's plugin is `lsp__SERVER`.
    LspRequest {
        /// The LSP method (`textDocument/definition`, ...).
        method: String,
        /// The file asked about, relative to the workspace.
        file: String,
        /// `ok`, or why it failed.
        outcome: String,
        /// How long the request took.
        duration_ms: u64,
    },
    /// An MCP server changed state: started, ready, stopped, refused,
    /// restarting. No header value or secret is ever part of it.
    McpServerState {
        /// The new state.
        state: String,
        /// Why, or what it reached.
        detail: String,
    },
}

impl AuditLog {
    /// Records that `plugin` was refused at `stage` (`install` or `load`).
    /// A log that cannot be opened is reported on stderr, like a failed
    /// append.
    pub fn record_refusal(path: &Path, plugin: &str, stage: &str, reason: &str) {
        match Self::open(path) {
            Ok(log) => {
                AuditScope::new(log, plugin, stage, None).record(AuditEvent::PluginRefused {
                    reason: reason.to_string(),
                })
            }
            Err(error) => eprintln!("capstan: {error}"),
        }
    }
}

impl AuditLog {
    /// Records that `command` (`install`, `update`, `grant`, `revoke` or
    /// `remove`) changed what `plugin` may touch, made by the user running
    /// this process. A log that cannot be opened is reported on stderr.
    pub fn record_change(path: &Path, plugin: &str, command: &str, change: &str, source: &str) {
        match Self::open(path) {
            Ok(log) => {
                AuditScope::new(log, plugin, command, None).record(AuditEvent::PluginChanged {
                    change: change.to_string(),
                    source: source.to_string(),
                    user: current_user(),
                })
            }
            Err(error) => eprintln!("capstan: {error}"),
        }
    }
}

/// The user account running this process: as the environment names it,
/// else its user id.
fn current_user() -> String {
    ["USER", "LOGNAME", "USERNAME"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
        .or_else(user_id)
        .unwrap_or_else(|| "an unnamed user".to_string())
}

/// The process's user id, as `uid N`.
#[cfg(unix)]
fn user_id() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .ok()
        .map(|meta| format!("uid {}", meta.uid()))
}

/// The process's user id, where the platform has one.
#[cfg(not(unix))]
fn user_id() -> Option<String> {
    None
}

/// The most bytes of an error kept in a [`AuditEvent::ToolCalled`] record.
pub const DETAIL_LIMIT: usize = 500;

/// `text` cut to at most [`DETAIL_LIMIT`] bytes, at a character boundary.
pub fn detail(text: &str) -> String {
    if text.len() <= DETAIL_LIMIT {
        return text.to_string();
    }
    let mut end = DETAIL_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// One record as read back from the log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AuditRecord {
    /// Its place in the chain, from 1.
    #[serde(default)]
    pub seq: u64,
    /// When it was written (RFC 3339, UTC).
    #[serde(default)]
    pub time: String,
    /// The capstan process that wrote it.
    #[serde(default)]
    pub run: String,
    /// The plugin whose call caused it.
    pub plugin: String,
    /// The call.
    pub call_id: String,
    /// The agent session, if any.
    #[serde(default)]
    pub session_id: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub event: AuditEvent,
    /// The previous record's hash.
    #[serde(default)]
    pub prev: String,
    /// This record's hash.
    #[serde(default)]
    pub hash: String,
}

/// Which records [`read`] returns.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// Only the most recent run (the one that wrote the last record).
    pub last_run: bool,
    /// Only this plugin's records.
    pub plugin: Option<String>,
    /// Only this session's records.
    pub session: Option<String>,
    /// Only this call's records.
    pub call: Option<String>,
    /// At most this many, the most recent ones.
    pub limit: Option<usize>,
}

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Records checked and found good (up to the first problem).
    pub records: u64,
    /// The first problem, if any.
    pub problem: Option<Problem>,
}

impl VerifyReport {
    /// Whether the whole log checked out.
    pub fn is_intact(&self) -> bool {
        self.problem.is_none()
    }
}

/// The first bad record of a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The line (from 1) where it was found; for a problem with the end of
    /// the log, the last line.
    pub line: u64,
    /// Whether the problem is with the end of the log as a whole (records
    /// cut off after its last line, or an end that is not the one the head
    /// file recorded) rather than with one line.
    pub at_end: bool,
    /// The record's `seq`, when known.
    pub seq: Option<u64>,
    /// What kind of damage.
    pub kind: ProblemKind,
    /// A sentence saying what is wrong.
    pub detail: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.at_end {
            write!(f, "its end, after line {}", self.line)?;
        } else {
            write!(f, "line {}", self.line)?;
        }
        if let Some(seq) = self.seq {
            write!(f, " (record {seq})")?;
        }
        write!(f, ": {}: {}", self.kind.name(), self.detail)
    }
}

/// Kinds of damage [`verify`] tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// A record's contents no longer match its hash, or it is not a record.
    Edited,
    /// Records are out of order, or one appears twice.
    Reordered,
    /// Records are missing from the middle of the chain.
    Missing,
    /// The log ends early: records were cut off the end, or a line was cut
    /// mid-write.
    Truncated,
    /// The head file disagrees with the log.
    HeadMismatch,
}

impl ProblemKind {
    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Edited => "edited",
            Self::Reordered => "reordered",
            Self::Missing => "missing records",
            Self::Truncated => "truncated",
            Self::HeadMismatch => "head mismatch",
        }
    }
}

/// The head file kept beside `log`.
pub fn head_path(log: &Path) -> PathBuf {
    let mut name = log.file_name().unwrap_or_default().to_os_string();
    name.push(".head");
    log.with_file_name(name)
}

/// The id of this capstan process in the log's `run` field.
fn run_id() -> &'static str {
    static RUN: OnceLock<String> = OnceLock::new();
    RUN.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        format!("run-{nanos:x}-{}", std::process::id())
    })
}

impl AuditLog {
    /// Opens (creating it and its folders if needed) the log at `path`, and
    /// reads the end of an existing log to continue its chain.
    pub fn open(path: &Path) -> Result<Self, AuditError> {
        let io = |source| AuditError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(io)?;
        let head_path = head_path(path);
        file.lock().map_err(io)?;
        remove_orphaned_heads(&head_path);
        let continued = continue_chain(&mut file)
            .and_then(|(end, tip)| Ok((end, head_disagrees(&head_path, &tip)?, tip)));
        let _ = file.unlock();
        let (end, damaged, tip) = continued.map_err(io)?;
        // A head that exists already counts as just written: records that
        // follow within HEAD_INTERVAL (a command's start and end) update it
        // once, when they stop or the log is closed, not each time.
        let head_written = head_path.exists().then(Instant::now);
        if damaged {
            eprintln!(
                "capstan: warning: the audit log {} was cut or changed after it was last \
                 written; `capstan audit verify` shows where. New records are still added.",
                path.display()
            );
        }
        Ok(Self {
            inner: Arc::new(Mutex::new(Inner {
                path: path.to_path_buf(),
                head_path,
                head_frozen: damaged,
                file,
                end,
                seq: tip.seq,
                hash: tip.hash,
                run: run_id().to_string(),
                reported: false,
                head_behind: false,
                head_written,
            })),
        })
    }

    /// The log file.
    pub fn path(&self) -> PathBuf {
        self.inner
            .lock()
            .map(|inner| inner.path.clone())
            .unwrap_or_default()
    }

    /// Appends one record for `scope` (see [`AuditScope::record`]); why it
    /// could not be written, if it could not.
    fn append(&self, scope: &AuditScope, event: &AuditEvent) -> Result<(), String> {
        let Ok(mut inner) = self.inner.lock() else {
            return Err("another thread failed while writing it".to_string());
        };
        let mut fields = Map::new();
        fields.insert("plugin".into(), Value::from(scope.plugin.as_str()));
        fields.insert("call_id".into(), Value::from(scope.call_id.as_str()));
        fields.insert(
            "session_id".into(),
            scope.session_id.as_deref().map_or(Value::Null, Value::from),
        );
        if let Ok(Value::Object(event)) = serde_json::to_value(event) {
            fields.extend(event);
        }
        // Grant decisions at debug level: the record names what was decided
        // (paths, hosts, secret names), never a secret's value.
        tracing::debug!(
            target: "capstan::grants",
            record = tracing::field::display(serde_json::Value::Object(fields.clone())),
            "capability"
        );
        let Err(error) = inner.append(fields) else {
            return Ok(());
        };
        if !inner.reported {
            inner.reported = true;
            eprintln!(
                "capstan: cannot write the audit log {}: {error}",
                inner.path.display()
            );
        }
        Err(error.to_string())
    }
}

impl Inner {
    fn append(&mut self, fields: Map<String, Value>) -> std::io::Result<()> {
        self.file.lock()?;
        let result = self.append_locked(fields);
        let _ = self.file.unlock();
        result
    }

    fn append_locked(&mut self, mut fields: Map<String, Value>) -> std::io::Result<()> {
        let len = self.file.metadata()?.len();
        if len != self.end {
            let (end, tip) = continue_chain(&mut self.file)?;
            self.end = end;
            self.seq = tip.seq;
            self.hash = tip.hash;
        }
        let seq = self.seq + 1;
        fields.insert("seq".into(), Value::from(seq));
        fields.insert("time".into(), Value::from(rfc3339(SystemTime::now())));
        fields.insert("run".into(), Value::from(self.run.as_str()));
        fields.insert("prev".into(), Value::from(self.hash.as_str()));
        let hash = chain_hash(&self.hash, &canonical_record(&fields, None));
        let mut line = canonical_record(&fields, Some(&hash));
        line.push(b'\n');
        // One write of the whole line: readers and a later `open` see either
        // all of it or a cut line, never two records interleaved.
        self.file.write_all(&line)?;
        self.file.flush()?;
        self.end += line.len() as u64;
        self.seq = seq;
        self.hash = hash;
        self.head_behind = true;
        if self
            .head_written
            .is_none_or(|at| at.elapsed() >= HEAD_INTERVAL)
        {
            self.write_head()?;
        }
        Ok(())
    }

    /// Records the tip in the head file, unless another process has
    /// appended since (its head is newer). Called with the file locked.
    fn write_head(&mut self) -> std::io::Result<()> {
        if self.head_behind && !self.head_frozen && self.file.metadata()?.len() == self.end {
            write_head(&self.head_path, self.seq, &self.hash)?;
        }
        self.head_behind = false;
        self.head_written = Some(Instant::now());
        Ok(())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.head_behind && self.file.lock().is_ok() {
            let _ = self.write_head();
            let _ = self.file.unlock();
        }
    }
}

impl AuditScope {
    /// The scope of call `call_id` of `plugin`, in agent session
    /// `session_id` if any, recording into `log`.
    pub fn new(log: AuditLog, plugin: &str, call_id: &str, session_id: Option<&str>) -> Self {
        Self {
            log,
            plugin: plugin.to_string(),
            call_id: call_id.to_string(),
            session_id: session_id.map(str::to_string),
            counts: Arc::default(),
        }
    }

    /// Appends one record. A record that cannot be written is reported on
    /// stderr (once per log) and remembered: [`AuditScope::close`] then
    /// fails, and so does the call. Past
    /// [`MAX_RECORDS_PER_CALL`] records of this call, the record is only
    /// counted; [`AuditScope::close`] records how many were dropped.
    ///
    /// A record is one JSON object per line with `plugin`, `call_id`,
    /// `session_id`, `kind` and the event's own fields at the top level,
    /// plus the chaining fields described in the module documentation.
    pub fn record(&self, event: AuditEvent) {
        let written = self.counts.written.fetch_add(1, Ordering::Relaxed);
        if written >= MAX_RECORDS_PER_CALL {
            self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Err(reason) = self.log.append(self, &event) {
            let _ = self.counts.failure.set(reason);
        }
    }

    /// Ends the call's records: if some were dropped, one more record says
    /// how many. Records after this start a new allowance. Fails if a
    /// record of the call could not be written: a call whose capability
    /// decisions were not all recorded must not count as done.
    pub fn close(&self) -> Result<(), AuditError> {
        let dropped = self.counts.dropped.swap(0, Ordering::Relaxed);
        self.counts.written.store(0, Ordering::Relaxed);
        if dropped > 0 {
            let event = AuditEvent::RecordsDropped {
                dropped,
                limit: MAX_RECORDS_PER_CALL,
            };
            if let Err(reason) = self.log.append(self, &event) {
                let _ = self.counts.failure.set(reason);
            }
        }
        match self.counts.failure.get() {
            Some(reason) => Err(AuditError::Write {
                path: self.log.path(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }
}

/// The last record of a chain: where the next one continues.
struct Tip {
    seq: u64,
    hash: String,
}

/// Reads the end of an open log: the last complete record, and (if the last
/// line was cut mid-write) ends that line so the next record starts on its
/// own. Returns the file's length afterwards and the chain's tip.
fn continue_chain(file: &mut File) -> std::io::Result<(u64, Tip)> {
    let mut len = file.metadata()?.len();
    let tip = find_tip(file, len)?;
    if len > 0 && read_at(file, len - 1, 1)? != b"\n" {
        file.write_all(b"\n")?;
        len += 1;
    }
    Ok((len, tip))
}

/// Scans back from the end of the file for the last line that is a JSON
/// object, and takes its `seq` and `hash`. Lines that are not (a line cut
/// mid-write) are skipped. Only the lines scanned are read.
fn find_tip(file: &mut File, len: u64) -> std::io::Result<Tip> {
    let mut line_end = len;
    // A final newline ends the last line; it does not start an empty one.
    if line_end > 0 && read_at(file, line_end - 1, 1)? == b"\n" {
        line_end -= 1;
    }
    loop {
        let start = line_start(file, line_end)?;
        let line = read_at(file, start, (line_end - start) as usize)?;
        if let Ok(Value::Object(record)) = serde_json::from_slice::<Value>(&line) {
            return Ok(Tip {
                seq: record.get("seq").and_then(Value::as_u64).unwrap_or(0),
                hash: record
                    .get("hash")
                    .and_then(Value::as_str)
                    .unwrap_or(GENESIS_HASH)
                    .to_string(),
            });
        }
        if start == 0 {
            return Ok(Tip {
                seq: 0,
                hash: GENESIS_HASH.to_string(),
            });
        }
        line_end = start - 1;
    }
}

/// Where the line ending at `end` starts: just after the previous newline,
/// or at 0.
fn line_start(file: &mut File, end: u64) -> std::io::Result<u64> {
    const CHUNK: u64 = 8 << 10;
    let mut pos = end;
    while pos > 0 {
        let from = pos.saturating_sub(CHUNK);
        let chunk = read_at(file, from, (pos - from) as usize)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(from + i as u64 + 1);
        }
        pos = from;
    }
    Ok(0)
}

fn read_at(file: &mut File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0; len];
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(&mut buf)?;
    Ok(buf)
}

/// Whether the head file names a record the log no longer ends with or
/// goes beyond: the log was cut or its end replaced. A head behind the log
/// (records written after it) or no head at all is not taken as damage.
fn head_disagrees(head: &Path, tip: &Tip) -> std::io::Result<bool> {
    Ok(match read_head(head)? {
        None => false,
        Some(Err(_)) => true,
        Some(Ok(head)) => head.seq > tip.seq || (head.seq == tip.seq && head.hash != tip.hash),
    })
}

/// Removes the temporary head files (`<head>.tmp-PID`) of processes that
/// ended between writing one and renaming it into place (a process ends
/// while another thread of it closes its log). Called with the log locked;
/// a file of a live process, this one included, is left alone.
fn remove_orphaned_heads(head: &Path) {
    let (Some(dir), Some(name)) = (head.parent(), head.file_name()) else {
        return;
    };
    // Without /proc nothing tells a live process from a dead one.
    if !Path::new("/proc/self").exists() {
        return;
    }
    let mut prefix = name.to_os_string();
    prefix.push(".tmp-");
    let prefix = prefix.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The size of the head file: its JSON padded with spaces, so that a head
/// written over a longer one leaves nothing of it.
const HEAD_SIZE: usize = 128;

/// Records the chain's tip beside the log, in place: one write of
/// [`HEAD_SIZE`] bytes at the start of the file, with the log locked (and
/// read with it locked). Replacing the file by a rename instead frees the
/// old file's block every time, which on a file system mounted with
/// `discard` waits for the disk (a millisecond here). A head that is not a
/// plain file is replaced as before: temp file, then rename.
fn write_head(head: &Path, seq: u64, hash: &str) -> std::io::Result<()> {
    let mut text = format!("{{\"hash\":\"{hash}\",\"seq\":{seq}}}");
    while text.len() + 1 < HEAD_SIZE {
        text.push(' ');
    }
    text.push('\n');
    #[cfg(target_os = "linux")]
    {
        if write_head_in_place(head, &text).is_ok() {
            return Ok(());
        }
    }
    let mut temp = head.as_os_str().to_os_string();
    temp.push(format!(".tmp-{}", std::process::id()));
    let temp = PathBuf::from(temp);
    std::fs::write(&temp, text)?;
    std::fs::rename(&temp, head)
}

/// Writes `text` over the start of the head file, never through a link.
#[cfg(target_os = "linux")]
fn write_head_in_place(head: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW)
        .open(head)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("the head is not a plain file"));
    }
    file.write_all_at(text.as_bytes(), 0)?;
    if file.metadata()?.len() > text.len() as u64 {
        file.set_len(text.len() as u64)?;
    }
    Ok(())
}

/// The hash chaining a record to the previous one.
fn chain_hash(prev: &str, canonical: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev.as_bytes());
    hasher.update(canonical);
    hex(&hasher.finalize())
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// A JSON value with object keys sorted at every level and no whitespace:
/// the same record always gives the same bytes.
fn canonical_json(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    write_canonical(value, &mut out);
    out
}

/// The canonical form of a record's `fields`, with `"hash": hash` among
/// them when given (in its sorted place): the same bytes as
/// [`canonical_json`] of the record with that field, made in one pass
/// without copying the record.
fn canonical_record(fields: &Map<String, Value>, hash: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    let mut entries: Vec<(&str, Option<&Value>)> = fields
        .iter()
        .filter(|(key, _)| hash.is_none() || key.as_str() != "hash")
        .map(|(key, value)| (key.as_str(), Some(value)))
        .collect();
    if hash.is_some() {
        entries.push(("hash", None));
    }
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_str(key, &mut out);
        out.push(b':');
        match (value, hash) {
            (Some(value), _) => write_canonical(value, &mut out),
            (None, Some(hash)) => write_json_str(hash, &mut out),
            (None, None) => out.extend_from_slice(b"null"),
        }
    }
    out.push(b'}');
    out
}

fn write_json_str(text: &str, out: &mut Vec<u8>) {
    // Writing into a Vec cannot fail; the escaping is serde_json's, as in
    // `Value`'s own output.
    let _ = serde_json::to_writer(&mut *out, text);
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json_str(key, out);
                out.push(b':');
                write_canonical(item, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        // Strings, numbers, booleans and null exactly as `Value` prints
        // them; writing into a Vec cannot fail.
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

/// Checks a whole log: every record's hash, the chain of `prev` links, the
/// `seq` numbers, and the head file. A log that does not exist (and has no
/// head) is an empty, intact log.
pub fn verify(path: &Path) -> Result<VerifyReport, AuditError> {
    let io = |source| AuditError::Io {
        path: path.to_path_buf(),
        source,
    };
    // Read with the log locked (shared): writers update the head in place
    // while they hold the lock.
    let (head, bytes) = match File::open(path) {
        Ok(mut file) => {
            file.lock_shared().map_err(io)?;
            let head = read_head(&head_path(path));
            let mut bytes = Vec::new();
            let read = file.read_to_end(&mut bytes);
            let _ = file.unlock();
            read.map_err(io)?;
            (head.map_err(io)?, bytes)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            (read_head(&head_path(path)).map_err(io)?, Vec::new())
        }
        Err(e) => return Err(io(e)),
    };
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let ends_with_newline = bytes.last() == Some(&b'\n');
    if ends_with_newline || bytes.is_empty() {
        lines.pop();
    }
    let mut checker = Chain {
        seq: 0,
        hash: GENESIS_HASH.to_string(),
        records: 0,
        watch_seq: match &head {
            Some(Ok(head)) => head.seq,
            _ => 0,
        },
        hash_at_watch: None,
    };
    for (index, line) in lines.iter().enumerate() {
        let number = index as u64 + 1;
        let is_last = index + 1 == lines.len();
        let rest = &lines[index + 1..];
        if let Some(problem) = checker.check(number, line, is_last && !ends_with_newline, rest) {
            return Ok(VerifyReport {
                records: checker.records,
                problem: Some(problem),
            });
        }
    }
    let problem = check_head(head, &checker, lines.len() as u64);
    Ok(VerifyReport {
        records: checker.records,
        problem,
    })
}

/// The chain as checked so far.
struct Chain {
    seq: u64,
    hash: String,
    records: u64,
    /// The record the head file names, and its hash once seen.
    watch_seq: u64,
    hash_at_watch: Option<String>,
}

impl Chain {
    /// Checks the line numbered `number`; `rest` are the lines after it,
    /// used to tell a line cut mid-write (the log continued after it) from
    /// an edited one, and moved records from missing ones.
    fn check(
        &mut self,
        number: u64,
        line: &[u8],
        cut_at_end: bool,
        rest: &[&[u8]],
    ) -> Option<Problem> {
        let problem = |seq, kind, detail: String| {
            Some(Problem {
                line: number,
                at_end: false,
                seq,
                kind,
                detail,
            })
        };
        let Ok(Value::Object(mut record)) = serde_json::from_slice::<Value>(line) else {
            if cut_at_end {
                return problem(
                    None,
                    ProblemKind::Truncated,
                    "the last line is an incomplete record: its write was cut short".into(),
                );
            }
            let continues = rest
                .first()
                .and_then(|next| serde_json::from_slice::<Value>(next).ok())
                .is_some_and(|next| {
                    next.get("seq").and_then(Value::as_u64) == Some(self.seq + 1)
                        && next.get("prev").and_then(Value::as_str) == Some(self.hash.as_str())
                });
            return if continues {
                problem(
                    None,
                    ProblemKind::Truncated,
                    "an incomplete record (its write was cut short; the log continues after it)"
                        .into(),
                )
            } else {
                problem(
                    None,
                    ProblemKind::Edited,
                    "the line is not a JSON record".into(),
                )
            };
        };
        let seq = record.get("seq").and_then(Value::as_u64);
        let prev = record
            .get("prev")
            .and_then(Value::as_str)
            .map(str::to_string);
        let hash = record.remove("hash");
        let (Some(seq), Some(prev), Some(Value::String(hash))) = (seq, prev, hash) else {
            return problem(
                seq,
                ProblemKind::Edited,
                "the record has no seq, prev or hash field".into(),
            );
        };
        if chain_hash(&prev, &canonical_json(&Value::Object(record))) != hash {
            return problem(
                Some(seq),
                ProblemKind::Edited,
                "its contents do not match its hash: it was changed after it was written".into(),
            );
        }
        let expected = self.seq + 1;
        if seq > expected {
            let later = rest.iter().any(|line| {
                serde_json::from_slice::<Value>(line)
                    .is_ok_and(|r| r.get("seq").and_then(Value::as_u64) == Some(expected))
            });
            if later {
                return problem(
                    Some(seq),
                    ProblemKind::Reordered,
                    format!("it comes before record {expected}: records are out of order"),
                );
            }
            let missing = if seq - expected == 1 {
                format!("record {expected} is missing before it")
            } else {
                format!("records {expected} to {} are missing before it", seq - 1)
            };
            return problem(Some(seq), ProblemKind::Missing, missing);
        }
        if seq < expected {
            return problem(
                Some(seq),
                ProblemKind::Reordered,
                format!(
                    "it comes after record {}: records are out of order",
                    self.seq
                ),
            );
        }
        if prev != self.hash {
            return problem(
                Some(seq),
                ProblemKind::Edited,
                format!(
                    "it does not link to the record before it: record {} was changed or replaced",
                    self.seq
                ),
            );
        }
        if seq == self.watch_seq {
            self.hash_at_watch = Some(hash.clone());
        }
        self.seq = seq;
        self.hash = hash;
        self.records += 1;
        None
    }
}

/// The head file's contents.
#[derive(serde::Deserialize)]
struct Head {
    seq: u64,
    hash: String,
}

/// Reads the head file: `Ok(None)` if there is none, `Ok(Some(Err))` if it
/// is unreadable as a head.
fn read_head(path: &Path) -> std::io::Result<Option<Result<Head, String>>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(
            serde_json::from_slice::<Head>(&bytes).map_err(|e| e.to_string()),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn check_head(head: Option<Result<Head, String>>, chain: &Chain, lines: u64) -> Option<Problem> {
    let problem = |kind, detail: String| {
        Some(Problem {
            line: lines.max(1),
            at_end: true,
            seq: (chain.seq > 0).then_some(chain.seq),
            kind,
            detail,
        })
    };
    match head {
        None if chain.seq == 0 => None,
        None => problem(
            ProblemKind::HeadMismatch,
            "the head file beside the log is missing, so a cut-off end cannot be ruled out".into(),
        ),
        Some(Err(reason)) => problem(
            ProblemKind::HeadMismatch,
            format!("the head file beside the log is unreadable ({reason})"),
        ),
        Some(Ok(head)) if head.seq > chain.seq => problem(
            ProblemKind::Truncated,
            format!(
                "the log ends at record {} but {} were written: records were cut off the end",
                chain.seq, head.seq
            ),
        ),
        // Records appended since the head was last written (it is written
        // at most every HEAD_INTERVAL, and when the log is closed): fine as
        // long as the record it names is the one in the log.
        Some(Ok(head)) if head.seq < chain.seq => {
            if chain.hash_at_watch.as_deref() == Some(head.hash.as_str()) {
                None
            } else {
                problem(
                    ProblemKind::HeadMismatch,
                    format!(
                        "record {} is not the one the head file recorded: the log was rewritten",
                        head.seq
                    ),
                )
            }
        }
        Some(Ok(head)) if head.hash != chain.hash => problem(
            ProblemKind::HeadMismatch,
            format!(
                "record {} is not the one the head file recorded: the end of the log was replaced",
                chain.seq
            ),
        ),
        Some(Ok(_)) => None,
    }
}

/// Reads records from the log, oldest first. Lines that are not records
/// (a line cut mid-write) are skipped; [`verify`] reports them. A log that
/// does not exist has no records.
pub fn read(path: &Path, filter: &AuditFilter) -> Result<Vec<AuditRecord>, AuditError> {
    let io = |source| AuditError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(e)),
    };
    let run = if filter.last_run {
        let len = file.metadata().map_err(io)?.len();
        Some(last_run(&mut file, len).map_err(io)?)
    } else {
        None
    };
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    let limit = filter.limit.unwrap_or(usize::MAX);
    let mut kept = VecDeque::new();
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(io)?;
        let Ok(record) = serde_json::from_slice::<AuditRecord>(&line) else {
            continue;
        };
        let wanted = run.as_ref().is_none_or(|run| *run == record.run)
            && filter.plugin.as_ref().is_none_or(|p| *p == record.plugin)
            && filter.call.as_ref().is_none_or(|c| *c == record.call_id)
            && filter
                .session
                .as_ref()
                .is_none_or(|s| record.session_id.as_ref() == Some(s));
        if wanted && limit > 0 {
            if kept.len() == limit {
                kept.pop_front();
            }
            kept.push_back(record);
        }
    }
    Ok(kept.into())
}

/// The run that wrote the last record ("" for an empty log).
fn last_run(file: &mut File, len: u64) -> std::io::Result<String> {
    let mut line_end = len;
    loop {
        if line_end == 0 {
            return Ok(String::new());
        }
        if read_at(file, line_end - 1, 1)? == b"\n" {
            line_end -= 1;
            continue;
        }
        let start = line_start(file, line_end)?;
        let line = read_at(file, start, (line_end - start) as usize)?;
        if let Ok(record) = serde_json::from_slice::<AuditRecord>(&line) {
            return Ok(record.run);
        }
        line_end = start;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(log: &AuditLog, plugin: &str, call: &str) -> AuditScope {
        AuditScope::new(log.clone(), plugin, call, Some("s-1"))
    }

    #[test]
    fn a_record_is_written_in_its_canonical_form_with_its_hash_in_place() {
        let record = serde_json::json!({
            "plugin": "fs",
            "kind": "file_opened",
            "path": "dir/\"odd\"\u{7}\u{e9}\u{1f600}.txt",
            "nested": { "z": [1, -2.5, null, true], "a": { "y": "\n", "b": false } },
            "seq": 18446744073709551615u64,
            "prev": GENESIS_HASH,
        });
        let Value::Object(fields) = record.clone() else {
            unreachable!()
        };
        // Keys sorted at every level, no whitespace: serde_json's own
        // compact output of a sorted map.
        let expected = serde_json::to_string(&record).unwrap();
        assert_eq!(
            String::from_utf8(canonical_record(&fields, None)).unwrap(),
            expected
        );
        assert_eq!(
            String::from_utf8(canonical_json(&record)).unwrap(),
            expected
        );
        let mut hashed = record.clone();
        hashed["hash"] = Value::from("abc");
        assert_eq!(
            String::from_utf8(canonical_record(&fields, Some("abc"))).unwrap(),
            serde_json::to_string(&hashed).unwrap()
        );
    }

    fn opened(path: &str) -> AuditEvent {
        AuditEvent::FileOpened {
            path: path.into(),
            mode: "read".into(),
            allowed: true,
        }
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn a_record_that_cannot_be_written_fails_the_call_at_close() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("audit");
        let log = AuditLog::open(&folder.join("audit.jsonl")).unwrap();
        // The folder goes away and a file takes its place: the open log
        // still takes appends, but its head can no longer be written, so
        // the record is not fully written.
        std::fs::rename(&folder, dir.path().join("moved")).unwrap();
        std::fs::write(&folder, "not a folder").unwrap();
        let failing = scope(&log, "p", "c-1");
        failing.record(opened("/b"));
        let error = failing.close().unwrap_err();
        assert!(
            matches!(&error, AuditError::Write { path, .. } if path.ends_with("audit.jsonl")),
            "{error}"
        );
        assert!(
            error.to_string().contains("cannot write the audit log"),
            "{error}"
        );
        // Every later close of that call says so too.
        assert!(failing.close().is_err());
        let fine = AuditLog::open(&dir.path().join("other/audit.jsonl")).unwrap();
        let ok = scope(&fine, "p", "c-2");
        ok.record(opened("/a"));
        assert!(ok.close().is_ok());
    }

    #[test]
    fn records_carry_the_stable_fields_and_a_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        scope(&log, "weather", "call-1").record(AuditEvent::HttpSent {
            method: "GET".into(),
            url: "https://api.open-meteo.com/v1/forecast".into(),
            status: Some(200),
        });
        scope(&log, "weather", "call-1").record(opened("x.txt"));
        let lines = lines(&path);
        assert_eq!(lines.len(), 2);
        let first: Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(first["plugin"], "weather");
        assert_eq!(first["call_id"], "call-1");
        assert_eq!(first["session_id"], "s-1");
        assert_eq!(first["kind"], "http_sent");
        assert_eq!(first["status"], 200);
        assert_eq!(first["seq"], 1);
        assert_eq!(first["prev"], GENESIS_HASH);
        assert!(first["time"].as_str().unwrap().ends_with('Z'));
        let second: Value = serde_json::from_str(&lines[1]).unwrap();
        assert_eq!(second["seq"], 2);
        assert_eq!(second["prev"], first["hash"]);
        assert_eq!(second["run"], first["run"]);
        let report = verify(&path).unwrap();
        assert_eq!(report.records, 2);
        assert!(report.is_intact(), "{report:?}");
    }

    #[test]
    fn a_reopened_log_continues_its_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        for n in 0..3 {
            let log = AuditLog::open(&path).unwrap();
            scope(&log, "p", &format!("call-{n}")).record(opened("a"));
        }
        let report = verify(&path).unwrap();
        assert_eq!(report.records, 3);
        assert!(report.is_intact(), "{report:?}");
    }

    #[test]
    fn two_handles_on_one_file_keep_one_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let a = AuditLog::open(&path).unwrap();
        let b = AuditLog::open(&path).unwrap();
        for n in 0..5 {
            scope(&a, "a", &format!("call-{n}")).record(opened("x"));
            scope(&b, "b", &format!("call-{n}")).record(opened("y"));
        }
        let report = verify(&path).unwrap();
        assert_eq!(report.records, 10);
        assert!(report.is_intact(), "{report:?}");
    }

    #[test]
    fn a_head_left_half_written_by_an_ended_process_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        drop(AuditLog::open(&path).unwrap());
        let head = head_path(&path);
        let temp = |pid: u32| {
            let mut name = head.as_os_str().to_os_string();
            name.push(format!(".tmp-{pid}"));
            PathBuf::from(name)
        };
        // A process id above any the kernel hands out (pid_max ≤ 2^22).
        let ended = temp(4_194_305);
        // Process 1 is always alive.
        let live = temp(1);
        std::fs::write(&ended, "{").unwrap();
        std::fs::write(&live, "{").unwrap();
        let log = AuditLog::open(&path).unwrap();
        scope(&log, "a", "call-1").record(opened("x"));
        drop(log);
        assert!(!ended.exists(), "the ended process's file is removed");
        assert!(live.exists(), "a live process's file is left to it");
        assert!(verify(&path).unwrap().is_intact());
    }

    #[test]
    fn concurrent_writers_on_separate_handles_keep_one_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let shared = AuditLog::open(&path).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let path = path.clone();
                let shared = shared.clone();
                std::thread::spawn(move || {
                    // Half the threads share one handle, half open their own
                    // (as separate processes would).
                    let log = if t % 2 == 0 {
                        shared
                    } else {
                        AuditLog::open(&path).unwrap()
                    };
                    for n in 0..250 {
                        scope(&log, &format!("t{t}"), &format!("call-{n}")).record(opened("x"));
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        drop(shared);
        let report = verify(&path).unwrap();
        assert_eq!(report.records, 1000);
        assert!(report.is_intact(), "{report:?}");
    }

    #[test]
    fn a_cut_last_line_is_kept_reported_and_written_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        scope(&log, "p", "c").record(opened("a"));
        scope(&log, "p", "c").record(opened("b"));
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, &text[..text.len() - 20]).unwrap();
        let report = verify(&path).unwrap();
        assert_eq!(report.records, 1);
        let problem = report.problem.unwrap();
        assert_eq!((problem.kind, problem.line), (ProblemKind::Truncated, 2));

        let log = AuditLog::open(&path).unwrap();
        scope(&log, "p", "c").record(opened("c"));
        let lines = lines(&path);
        assert_eq!(lines.len(), 3, "{lines:?}");
        let third: Value = serde_json::from_str(&lines[2]).unwrap();
        assert_eq!(third["seq"], 2);
        let report = verify(&path).unwrap();
        let problem = report.problem.unwrap();
        assert_eq!((problem.kind, problem.line), (ProblemKind::Truncated, 2));
        assert!(problem.detail.contains("continues"), "{problem}");
    }

    #[test]
    fn damage_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        for n in 0..4 {
            scope(&log, "p", &format!("call-{n}")).record(opened("a"));
        }
        drop(log);
        let good = lines(&path);
        let check = |lines: &[String], kind, line| {
            std::fs::write(&path, lines.join("\n") + "\n").unwrap();
            let problem = verify(&path).unwrap().problem.unwrap();
            assert_eq!((problem.kind, problem.line), (kind, line), "{problem}");
        };
        let mut edited = good.clone();
        edited[1] = edited[1].replace("call-1", "call-9");
        check(&edited, ProblemKind::Edited, 2);
        let mut swapped = good.clone();
        swapped.swap(1, 2);
        check(&swapped, ProblemKind::Reordered, 2);
        let mut dropped = good.clone();
        dropped.remove(1);
        check(&dropped, ProblemKind::Missing, 2);
        let mut duplicated = good.clone();
        duplicated.insert(2, good[1].clone());
        check(&duplicated, ProblemKind::Reordered, 3);
        check(&good[..3], ProblemKind::Truncated, 3);
        std::fs::write(&path, good.join("\n") + "\n").unwrap();
        assert!(verify(&path).unwrap().is_intact());
    }

    #[test]
    fn appending_to_a_cut_log_does_not_hide_the_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        for n in 0..4 {
            scope(&log, "p", &format!("call-{n}")).record(opened("a"));
        }
        drop(log);
        let good = lines(&path);
        for keep in [2, 3] {
            std::fs::write(&path, good[..keep].join("\n") + "\n").unwrap();
            // A later run appends one or two records, reaching and passing
            // the head's seq with records of its own.
            let log = AuditLog::open(&path).unwrap();
            scope(&log, "p", "again").record(opened("b"));
            scope(&log, "p", "again").record(opened("c"));
            drop(log);
            let problem = verify(&path).unwrap().problem;
            let problem = problem.unwrap_or_else(|| panic!("cut to {keep} went unnoticed"));
            assert!(
                matches!(
                    problem.kind,
                    ProblemKind::Truncated | ProblemKind::HeadMismatch
                ),
                "{problem}"
            );
        }
    }

    #[test]
    fn reads_filter_by_run_plugin_call_and_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        for n in 0..6 {
            let plugin = if n % 2 == 0 { "even" } else { "odd" };
            scope(&log, plugin, &format!("call-{n}")).record(opened(&format!("f{n}")));
        }
        let all = read(&path, &AuditFilter::default()).unwrap();
        assert_eq!(all.len(), 6);
        assert_eq!(all[0].seq, 1);
        let even = AuditFilter {
            plugin: Some("even".into()),
            limit: Some(2),
            ..AuditFilter::default()
        };
        let calls: Vec<_> = read(&path, &even)
            .unwrap()
            .into_iter()
            .map(|r| r.call_id)
            .collect();
        assert_eq!(calls, ["call-2", "call-4"]);
        let call = AuditFilter {
            call: Some("call-3".into()),
            ..AuditFilter::default()
        };
        assert_eq!(read(&path, &call).unwrap()[0].event, opened("f3"));
        // Another run appends: only its records are the last run.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"call_id\":\"c\",\"kind\":\"env_read\",\"names\":[\"A\"],\"plugin\":\"q\",\"run\":\"other\",\"session_id\":null}\n");
        std::fs::write(&path, text).unwrap();
        let last = AuditFilter {
            last_run: true,
            ..AuditFilter::default()
        };
        let last = read(&path, &last).unwrap();
        assert_eq!(last.len(), 1);
        assert_eq!(last[0].plugin, "q");
    }

    #[test]
    fn many_appends_stay_cheap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        let scope = scope(&log, "p", "call-1");
        let start = std::time::Instant::now();
        for n in 0..10_000 {
            scope.record(opened(&format!("src/file-{n}.rs")));
        }
        let elapsed = start.elapsed();
        eprintln!(
            "10000 audit records appended in {elapsed:?} ({:?} each)",
            elapsed / 10_000
        );
        let report = verify(&path).unwrap();
        assert_eq!(report.records, 10_000);
        assert!(report.is_intact());
        // The tip of a big log is found without reading it all.
        let log = AuditLog::open(&path).unwrap();
        scope_record_continues(&log, &path);
    }

    fn scope_record_continues(log: &AuditLog, path: &Path) {
        scope(log, "p", "call-2").record(opened("last"));
        let report = verify(path).unwrap();
        assert_eq!(report.records, 10_001);
        assert!(report.is_intact());
    }
}
