//! One running language server: a process in the OS sandbox of
//! `exec.run` ([`crate::exec`]) speaking LSP over its stdin and stdout.
//!
//! As for a local MCP server, the process is started and waited for on a
//! thread of its own (the sandbox ties a command's life to the thread that
//! starts it) and dies with every process it started when it is stopped or
//! capstan exits. Its stdout is read on another thread ([`framing`]: capped
//! messages; a stream that breaks the protocol stops the server), its
//! stderr drained all the time keeping only the end, and messages to it
//! are written by a writer thread, so a server that stops reading holds up
//! nobody. Requests the server makes are answered at once
//! (`workspace/configuration` from the definition's `settings`, the rest
//! with `null`); the diagnostics it publishes are kept per document.

use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};

use super::config::LspServerSpec;
use super::framing::{self, Frame};
use crate::exec::{
    Cancel, CommandLine, ErrorTail, ExecGrants, ExecRequest, ServiceError, ServiceSpec, TailReport,
    start_service,
};

/// How the end of a server's standard error is told: its last three
/// lines.
const STDERR_REPORT: TailReport = TailReport {
    lines: 3,
    max_len: 600,
    with_size: false,
};

/// Messages that are not JSON skipped before the server is stopped.
const MAX_SKIPPED: u64 = 100;

/// How long a server asked to stop may take to exit before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(1);

/// The most diagnostics kept for one document.
const MAX_DIAGNOSTICS: usize = 500;

/// The most documents whose diagnostics are kept.
const MAX_DOCUMENTS: usize = 2000;

type Pending = Arc<Mutex<HashMap<i64, oneshot::Sender<Result<Value, String>>>>>;

/// The diagnostics a server published for one document.
#[derive(Debug, Clone, Default)]
pub struct Published {
    /// Bumped by every publication (of any document), so a waiter knows
    /// it is new.
    pub sequence: u64,
    /// The diagnostics.
    pub items: Vec<Value>,
    /// How many there were before the cap.
    pub total: usize,
}

impl Published {
    /// The items of a `textDocument/diagnostic` answer (a full report;
    /// an `unchanged` one, which is never asked for, holds none), capped.
    pub fn of_report(report: &Value) -> Self {
        let all = report
            .get("items")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        Self {
            sequence: 0,
            items: all.iter().take(MAX_DIAGNOSTICS).cloned().collect(),
            total: all.len(),
        }
    }
}

/// A language server, started and initialized.
pub struct Connection {
    name: String,
    next_id: AtomicI64,
    pending: Pending,
    outgoing: std::sync::mpsc::Sender<Vec<u8>>,
    /// Why it stopped, once it has.
    closed: Arc<Mutex<Option<String>>>,
    diagnostics: Arc<Mutex<HashMap<String, Published>>>,
    /// Changed on every publication and when the server stops.
    published: watch::Receiver<u64>,
    cancel: Cancel,
    stderr: Arc<Mutex<ErrorTail>>,
    /// What `initialize` said the server can do.
    pub capabilities: Value,
}

/// `path` as a `file://` URI.
pub fn uri_of(path: &Path) -> String {
    let mut uri = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        if byte.is_ascii_alphanumeric() || b"/-_.~".contains(&byte) {
            uri.push(byte as char);
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

/// The path of a `file://` URI, if it is one.
pub fn path_of(uri: &str) -> Option<std::path::PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(byte) = rest
                .get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    Some(std::path::PathBuf::from(
        String::from_utf8_lossy(&out).into_owned(),
    ))
}

impl Connection {
    /// Starts `spec` under `grants` (the workspace read-only, its plugin's
    /// folder readable, no network) in `workspace`, and initializes it.
    pub async fn start(
        spec: &LspServerSpec,
        grants: ExecGrants,
        workspace: &Path,
    ) -> Result<Arc<Self>, String> {
        let connection = Self::spawn(spec, grants)?;
        let root = uri_of(workspace);
        let folder_name = workspace
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "workspace".to_string());
        let params = json!({
            "processId": std::process::id(),
            "clientInfo": {"name": "capstan", "version": env!("CARGO_PKG_VERSION")},
            "rootUri": root,
            "rootPath": workspace.display().to_string(),
            "workspaceFolders": [{"uri": root, "name": folder_name}],
            "initializationOptions": spec.initialization_options,
            "capabilities": {
                "general": {"positionEncodings": ["utf-16"]},
                "workspace": {
                    "configuration": true,
                    "workspaceFolders": true,
                    "symbol": {},
                },
                "textDocument": {
                    "synchronization": {"didSave": true, "dynamicRegistration": false},
                    "hover": {"contentFormat": ["markdown", "plaintext"]},
                    "definition": {"linkSupport": true},
                    "implementation": {"linkSupport": true},
                    "references": {},
                    "documentSymbol": {"hierarchicalDocumentSymbolSupport": true},
                    "callHierarchy": {},
                    "publishDiagnostics": {"versionSupport": true, "relatedInformation": false},
                    "diagnostic": {"dynamicRegistration": false, "relatedDocumentSupport": false},
                },
                "window": {"workDoneProgress": false},
            },
        });
        let answer = connection
            .request("initialize", params, spec.startup_timeout)
            .await
            .map_err(|e| format!("it did not initialize: {e}"));
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => {
                connection.stop();
                return Err(e);
            }
        };
        let mut connection = connection;
        if let Some(this) = Arc::get_mut(&mut connection) {
            this.capabilities = answer.get("capabilities").cloned().unwrap_or(Value::Null);
        }
        connection.notify("initialized", json!({}));
        if !spec.settings.is_null() {
            connection.notify(
                "workspace/didChangeConfiguration",
                json!({ "settings": spec.settings }),
            );
        }
        Ok(connection)
    }

    fn spawn(spec: &LspServerSpec, grants: ExecGrants) -> Result<Arc<Self>, String> {
        let mut argv = vec![spec.command.clone()];
        argv.extend(spec.args.iter().cloned());
        let mut request = ExecRequest::new(CommandLine::Argv(argv));
        request.call_id = format!("lsp__{}", spec.name);
        request.write = false;
        request.timeout = None;
        request.separate_errors = true;
        let cancel = Cancel::new();
        let closed: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let (published_tx, published) = watch::channel(0u64);
        let published_tx = Arc::new(published_tx);
        let service = ServiceSpec {
            request,
            grants,
            env: spec.env.clone(),
            thread: format!("lsp-{}", spec.name),
            noun: "the language server",
            tail: STDERR_REPORT,
        };
        let on_end = {
            let closed = closed.clone();
            let pending = pending.clone();
            let published_tx = published_tx.clone();
            move |how: String, stderr: &Arc<Mutex<ErrorTail>>| {
                let mut why = match closed.lock() {
                    Ok(mut slot) => slot.get_or_insert(how).clone(),
                    Err(_) => how,
                };
                if let Some(tail) = stderr.lock().ok().and_then(|t| t.summary()) {
                    why.push_str(&format!("; {tail}"));
                }
                if let Ok(mut slot) = closed.lock() {
                    *slot = Some(why.clone());
                }
                fail_all(&pending, &why);
                published_tx.send_modify(|n| *n += 1);
            }
        };
        let pipes = start_service(service, &cancel, on_end).map_err(|e| match e {
            ServiceError::Thread(why) => why,
            ServiceError::Start(e) => format!("cannot start `{}`: {e}", spec.command_line()),
        })?;
        let stderr = pipes.stderr;

        let (outgoing, outgoing_rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let mut input = pipes.stdin;
        let _ = std::thread::Builder::new()
            .name(format!("lsp-{}-stdin", spec.name))
            .spawn(move || {
                while let Ok(bytes) = outgoing_rx.recv() {
                    if input
                        .write_all(&bytes)
                        .and_then(|()| input.flush())
                        .is_err()
                    {
                        break;
                    }
                }
            });

        let diagnostics: Arc<Mutex<HashMap<String, Published>>> =
            Arc::new(Mutex::new(HashMap::new()));
        {
            let output = pipes.stdout;
            let pending = pending.clone();
            let diagnostics = diagnostics.clone();
            let closed = closed.clone();
            let cancel = cancel.clone();
            let replies = outgoing.clone();
            let settings = spec.settings.clone();
            let _ = std::thread::Builder::new()
                .name(format!("lsp-{}-stdout", spec.name))
                .spawn(move || {
                    let reader = Reader {
                        pending,
                        diagnostics,
                        published: published_tx,
                        replies,
                        settings,
                    };
                    let why = reader.run(BufReader::new(output));
                    if let Some(why) = why {
                        if let Ok(mut slot) = closed.lock() {
                            slot.get_or_insert(why);
                        }
                        cancel.cancel();
                    }
                });
        }
        Ok(Arc::new(Self {
            name: spec.name.clone(),
            next_id: AtomicI64::new(1),
            pending,
            outgoing,
            closed,
            diagnostics,
            published,
            cancel,
            stderr,
            capabilities: Value::Null,
        }))
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Why it stopped, if it has.
    pub fn closed(&self) -> Option<String> {
        self.closed.lock().ok().and_then(|c| c.clone())
    }

    /// Sends request `method` and waits for its answer at most `timeout`.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, String> {
        if let Some(why) = self.closed() {
            return Err(why);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(id, tx);
        }
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if self.outgoing.send(framing::frame(&message)).is_err() {
            self.forget(id);
            return Err(self
                .closed()
                .unwrap_or_else(|| "the language server stopped reading".to_string()));
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(self
                .closed()
                .unwrap_or_else(|| "the language server stopped".to_string())),
            Err(_) => {
                self.forget(id);
                self.notify("$/cancelRequest", json!({ "id": id }));
                Err(format!(
                    "the language server did not answer {method} within {} s",
                    timeout.as_secs()
                ))
            }
        }
    }

    fn forget(&self, id: i64) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.remove(&id);
        }
    }

    /// Sends notification `method`.
    pub fn notify(&self, method: &str, params: Value) {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        let _ = self.outgoing.send(framing::frame(&message));
    }

    /// The diagnostics last published for `uri`.
    pub fn diagnostics(&self, uri: &str) -> Option<Published> {
        self.diagnostics.lock().ok()?.get(uri).cloned()
    }

    /// Whether it offers pull diagnostics (`textDocument/diagnostic`).
    pub fn pulls_diagnostics(&self) -> bool {
        self.capabilities
            .get("diagnosticProvider")
            .is_some_and(|provider| !provider.is_null() && provider != &Value::Bool(false))
    }

    /// The current publication count, to wait for a newer one.
    pub fn publication(&self) -> u64 {
        *self.published.borrow()
    }

    /// Waits at most `timeout` for diagnostics of `uri` published after
    /// publication `after`; whether some came.
    pub async fn wait_for_diagnostics(&self, uri: &str, after: u64, timeout: Duration) -> bool {
        let mut published = self.published.clone();
        let fresh = |this: &Self| this.diagnostics(uri).is_some_and(|p| p.sequence > after);
        let wait = async {
            loop {
                if fresh(self) {
                    return true;
                }
                if self.closed().is_some() || published.changed().await.is_err() {
                    return fresh(self);
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.unwrap_or(false)
    }

    /// Asks the server to shut down and exit, then stops it (and every
    /// process it started) shortly after, whether it did or not.
    pub fn stop(&self) {
        if self.closed().is_some() {
            self.cancel.cancel();
            return;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let _ = self.outgoing.send(framing::frame(
            &json!({"jsonrpc": "2.0", "id": id, "method": "shutdown", "params": null}),
        ));
        let _ = self.outgoing.send(framing::frame(
            &json!({"jsonrpc": "2.0", "method": "exit", "params": null}),
        ));
        let cancel = self.cancel.clone();
        let _ = std::thread::Builder::new()
            .name(format!("lsp-{}-stop", self.name))
            .spawn(move || {
                std::thread::sleep(STOP_GRACE);
                cancel.cancel();
            });
    }

    /// The end of its stderr, for reports.
    pub fn error_tail(&self) -> Option<String> {
        self.stderr.lock().ok().and_then(|t| t.summary())
    }
}

fn fail_all(pending: &Pending, why: &str) {
    let waiting: Vec<_> = match pending.lock() {
        Ok(mut pending) => pending.drain().map(|(_, tx)| tx).collect(),
        Err(_) => Vec::new(),
    };
    for tx in waiting {
        let _ = tx.send(Err(why.to_string()));
    }
}

/// The stdout side: answers, the server's requests, its notifications.
struct Reader {
    pending: Pending,
    diagnostics: Arc<Mutex<HashMap<String, Published>>>,
    published: Arc<watch::Sender<u64>>,
    replies: std::sync::mpsc::Sender<Vec<u8>>,
    settings: Value,
}

impl Reader {
    /// Reads until the stream ends (`None`) or breaks (why).
    fn run(&self, mut output: impl std::io::BufRead) -> Option<String> {
        let mut skipped = 0u64;
        loop {
            match framing::read_frame(&mut output) {
                Frame::End => return None,
                Frame::Broken(why) => {
                    return Some(format!("the language server was stopped: it wrote {why}"));
                }
                Frame::Skipped(_) => {
                    skipped += 1;
                    if skipped > MAX_SKIPPED {
                        return Some(format!(
                            "the language server was stopped: it wrote more than {MAX_SKIPPED} messages that are not JSON"
                        ));
                    }
                }
                Frame::Message(message) => self.handle(message),
            }
        }
    }

    fn handle(&self, message: Value) {
        let method = message.get("method").and_then(Value::as_str);
        let id = message.get("id").cloned();
        match (method, id) {
            (None, Some(id)) => {
                let Some(id) = id.as_i64() else { return };
                let Some(tx) = self.pending.lock().ok().and_then(|mut p| p.remove(&id)) else {
                    return;
                };
                let answer = match message.get("error") {
                    Some(error) => Err(format!(
                        "the language server answered with an error: {}",
                        crate::escape::line(
                            error
                                .get("message")
                                .and_then(Value::as_str)
                                .unwrap_or("(no message)")
                        )
                    )),
                    None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                };
                let _ = tx.send(answer);
            }
            (Some(method), Some(id)) => {
                let result = match method {
                    "workspace/configuration" => {
                        let items = message
                            .pointer("/params/items")
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default();
                        Value::Array(
                            items
                                .iter()
                                .map(|item| {
                                    self.setting(item.get("section").and_then(Value::as_str))
                                })
                                .collect(),
                        )
                    }
                    "workspace/workspaceFolders" => Value::Null,
                    _ => Value::Null,
                };
                let reply = json!({"jsonrpc": "2.0", "id": id, "result": result});
                let _ = self.replies.send(framing::frame(&reply));
            }
            (Some("textDocument/publishDiagnostics"), None) => {
                let Some(uri) = message.pointer("/params/uri").and_then(Value::as_str) else {
                    return;
                };
                let all = message
                    .pointer("/params/diagnostics")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let total = all.len();
                let items: Vec<Value> = all.into_iter().take(MAX_DIAGNOSTICS).collect();
                // The count is bumped while the map is held, so a waiter
                // woken by it finds the new entry.
                if let Ok(mut map) = self.diagnostics.lock() {
                    if map.len() >= MAX_DOCUMENTS && !map.contains_key(uri) {
                        return;
                    }
                    let mut sequence = 0;
                    self.published.send_modify(|n| {
                        *n += 1;
                        sequence = *n;
                    });
                    map.insert(
                        uri.to_string(),
                        Published {
                            sequence,
                            items,
                            total,
                        },
                    );
                }
            }
            _ => {}
        }
    }

    /// The value of settings section `section` (`a.b`), or all of them.
    fn setting(&self, section: Option<&str>) -> Value {
        let Some(section) = section.filter(|s| !s.is_empty()) else {
            return self.settings.clone();
        };
        let mut value = &self.settings;
        for key in section.split('.') {
            match value.get(key) {
                Some(inner) => value = inner,
                None => return Value::Null,
            }
        }
        value.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip() {
        let path = Path::new("/tmp/a b/ü.py");
        let uri = uri_of(path);
        assert_eq!(uri, "file:///tmp/a%20b/%C3%BC.py");
        assert_eq!(path_of(&uri).unwrap(), path);
        assert!(path_of("untitled:1").is_none());
    }
}
