//! What `capstan mcp serve` answers, whatever the transport: the lifecycle
//! (`initialize`, or `server/discover` and per-request revisions), `ping`,
//! `tools/list` and `tools/call`, cancellation, and the requests it sends
//! the client (`roots/list`).
//!
//! Each call runs through the tool's [`ToolHandler`](crate::agent::ToolHandler),
//! as the agent's calls do: a fresh sandbox under what the plugin was
//! granted, audited in the plugin's log. Calls run concurrently, each on a
//! local task of its own (the handlers' futures stay on the serving
//! thread; the sandbox runs each call on a worker thread);
//! `notifications/cancelled` aborts one, which drops its future and so
//! stops the call. A tool's failure is a result with `isError` and the
//! message; a JSON-RPC error means the request itself was wrong.
//!
//! The workspace is `--workspace`, else the client's first root when it
//! declares the roots capability (asked with `roots/list` before the first
//! call, and again after `notifications/roots/list_changed`), else the
//! folder the server was started in. The server watches the lockfile and
//! tells initialized sessions `notifications/tools/list_changed` when the
//! installed tools change.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use super::jsonrpc::{Message, RpcError, code, id_key};
use super::outbox::Outbox;
use super::protocol;
use super::tools::ToolSet;
use crate::agent::{Interrupt, ToolCall};
use crate::home::Home;
use crate::plugin::Writes;
use crate::plugin::store::PluginStore;
use crate::sandbox::{CallError, EventSink, PluginEvent, Sandbox};

/// How long the server waits for the client's answer to `roots/list`
/// before it uses its own workspace.
const ROOTS_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a call that reported progress waits before its response.
const PROGRESS_GAP: Duration = Duration::from_millis(2);

/// How often the lockfile is looked at.
const LOCKFILE_POLL: Duration = Duration::from_millis(500);

/// What the command line decided.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// `--workspace`, which the client's roots do not override.
    pub workspace: Option<PathBuf>,
    /// The folder the server was started in.
    pub current_dir: PathBuf,
    /// `--allow-write`: tools that change files get the workspace writable.
    pub allow_write: bool,
    /// `--plugin` component files.
    pub plugin_files: Vec<String>,
    /// `--verbose`: say on stderr what happens to calls.
    pub verbose: bool,
}

impl ServeOptions {
    fn writes(&self) -> Writes {
        if self.allow_write {
            Writes::WhenAllowed
        } else {
            Writes::Never
        }
    }

    /// The workspace when the client names none.
    pub fn default_workspace(&self) -> &Path {
        self.workspace.as_deref().unwrap_or(&self.current_dir)
    }
}

/// The server: its tools and its sessions; see the [module documentation](self).
pub struct Server {
    home: Home,
    sandbox: Arc<Sandbox>,
    options: ServeOptions,
    /// Tool sets by workspace; emptied when the lockfile changes.
    tools: RefCell<HashMap<PathBuf, Rc<ToolSet>>>,
    sessions: RefCell<Vec<Weak<Session>>>,
}

impl Server {
    /// A server whose tools are loaded for the default workspace now, so a
    /// plugin that cannot be loaded is reported before serving.
    pub async fn start(
        home: Home,
        sandbox: Arc<Sandbox>,
        options: ServeOptions,
    ) -> Result<Rc<Self>, String> {
        let server = Rc::new(Self {
            home,
            sandbox,
            options,
            tools: RefCell::new(HashMap::new()),
            sessions: RefCell::new(Vec::new()),
        });
        let workspace = server.options.default_workspace().to_path_buf();
        server.tool_set(&workspace).await?;
        Ok(server)
    }

    /// The options it was started with.
    pub fn options(&self) -> &ServeOptions {
        &self.options
    }

    /// A new session, told when the tools change once it is initialized;
    /// `notify` is where such notifications go until
    /// [`Session::set_notify`] says otherwise.
    pub fn open_session(&self, notify: Option<Outbox>) -> Rc<Session> {
        let session = Rc::new(Session::new(notify, self.options.verbose));
        let mut sessions = self.sessions.borrow_mut();
        sessions.retain(|s| s.strong_count() > 0);
        sessions.push(Rc::downgrade(&session));
        session
    }

    /// The tools of `workspace`, loaded on first use.
    async fn tool_set(&self, workspace: &Path) -> Result<Rc<ToolSet>, String> {
        if let Some(set) = self.tools.borrow().get(workspace) {
            return Ok(set.clone());
        }
        let set = Rc::new(
            ToolSet::load(
                &self.home,
                &self.sandbox,
                workspace,
                self.options.writes(),
                &self.options.plugin_files,
            )
            .await?,
        );
        self.tools
            .borrow_mut()
            .insert(workspace.to_path_buf(), set.clone());
        Ok(set)
    }

    /// Handles one message from `session`'s client. Answers go to `reply`;
    /// `header_version` is the revision an HTTP request's
    /// `MCP-Protocol-Version` header names.
    pub fn handle(
        self: &Rc<Self>,
        session: &Rc<Session>,
        message: Message,
        reply: &Outbox,
        header_version: Option<&str>,
    ) {
        match message {
            Message::Request { id, method, params } => {
                self.request(session, id, &method, params, reply, header_version);
            }
            Message::Notification { method, params } => {
                session.notification(&method, params.as_ref());
            }
            Message::Response { id, outcome } => session.answered(&id, outcome),
        }
    }

    fn request(
        self: &Rc<Self>,
        session: &Rc<Session>,
        id: Value,
        method: &str,
        params: Option<Value>,
        reply: &Outbox,
        header_version: Option<&str>,
    ) {
        let answer = |outcome: Result<Value, RpcError>| {
            reply.send(Message::Response {
                id: id.clone(),
                outcome,
            });
        };
        if method == "server/discover" {
            return answer(Ok(self.discover()));
        }
        let names_version = protocol::requested_version(params.as_ref()).is_some()
            || header_version == Some(protocol::V2026_07_28);
        let stateless = names_version && method != "initialize";
        if stateless && let Err(error) = protocol::stateless_version(params.as_ref()) {
            return answer(Err(error));
        }
        if !stateless {
            match method {
                "initialize" => {
                    return answer(session.initialize(params.as_ref(), &self.instructions()));
                }
                "ping" => return answer(Ok(json!({}))),
                _ if session.version().is_none() => {
                    return answer(Err(RpcError::new(
                        code::INVALID_REQUEST,
                        format!(
                            "`{method}` before `initialize`: open the session with `initialize` first, or name protocol version {} in the request's `_meta` (\"{}\")",
                            protocol::V2026_07_28,
                            protocol::META_PROTOCOL_VERSION
                        ),
                    )));
                }
                _ => {}
            }
        }
        let stamp = move |result: Value| stamp_stateless(result, stateless);
        match method {
            "tools/list" => {
                let server = self.clone();
                let reply = reply.clone();
                // The tools are loaded at start, so this is answered at once
                // unless the lockfile changed since.
                tokio::task::spawn_local(async move {
                    let workspace = server.options.default_workspace().to_path_buf();
                    let outcome = match server.tool_set(&workspace).await {
                        Ok(set) => {
                            let mut result = json!({ "tools": set.listing() });
                            if stateless {
                                // The tools change when plugins are installed:
                                // not to be cached.
                                result["ttlMs"] = json!(0);
                                result["cacheScope"] = json!("private");
                            }
                            Ok(stamp(result))
                        }
                        Err(e) => Err(RpcError::new(code::INTERNAL_ERROR, e)),
                    };
                    reply.send(Message::Response { id, outcome });
                });
            }
            "tools/call" => self.start_call(session, id, params, reply, stateless),
            "ping" => answer(Ok(stamp(json!({})))),
            other => answer(Err(RpcError::new(
                code::METHOD_NOT_FOUND,
                format!("method `{other}` is not offered by capstan's MCP server"),
            ))),
        }
    }

    /// `server/discover`: the revisions, capabilities and identity.
    fn discover(&self) -> Value {
        stamp_stateless(
            json!({
                "supportedVersions": protocol::SUPPORTED,
                "capabilities": capabilities(),
                "serverInfo": server_info(),
                "instructions": self.instructions(),
                "ttlMs": 0,
                "cacheScope": "private",
            }),
            true,
        )
    }

    fn instructions(&self) -> String {
        let writes = if self.options.allow_write {
            "tools that change files may write it"
        } else {
            "it is read-only (the server was started without --allow-write)"
        };
        format!(
            "capstan's tools: each call runs in a fresh WebAssembly sandbox that reaches only the workspace and what the user granted its plugin. The workspace is the client's first root, or the folder the server was started in; {writes}."
        )
    }

    /// Starts a `tools/call` on a task of its own, cancellable by its id.
    fn start_call(
        self: &Rc<Self>,
        session: &Rc<Session>,
        id: Value,
        params: Option<Value>,
        reply: &Outbox,
        stateless: bool,
    ) {
        let key = id_key(&id);
        if session.in_flight.borrow().contains_key(&key) {
            reply.send(Message::error(
                id,
                RpcError::new(
                    code::INVALID_REQUEST,
                    "a request with this id is still running",
                ),
            ));
            return;
        }
        let interrupt = Interrupt::new();
        let task = {
            let (server, session, reply) = (self.clone(), session.clone(), reply.clone());
            let (interrupt, key) = (interrupt.clone(), key.clone());
            tokio::task::spawn_local(async move {
                let outcome = server
                    .call(&session, params, &reply, &interrupt, &key, stateless)
                    .await
                    .map(|result| stamp_stateless(result, stateless));
                session.in_flight.borrow_mut().remove(&key);
                reply.send(Message::Response { id, outcome });
            })
        };
        session.in_flight.borrow_mut().insert(
            key,
            Running {
                abort: task.abort_handle(),
                interrupt,
            },
        );
    }

    async fn call(
        &self,
        session: &Session,
        params: Option<Value>,
        reply: &Outbox,
        interrupt: &Interrupt,
        call_id: &str,
        stateless: bool,
    ) -> Result<Value, RpcError> {
        let params = params.unwrap_or_else(|| json!({}));
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(RpcError::new(
                code::INVALID_PARAMS,
                "tools/call needs the tool's \"name\"",
            ));
        };
        let input = match params.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(arguments @ Value::Object(_)) => arguments.clone(),
            Some(_) => {
                return Err(RpcError::new(
                    code::INVALID_PARAMS,
                    "\"arguments\" must be a JSON object",
                ));
            }
        };
        let token = params
            .get("_meta")
            .and_then(|meta| meta.get("progressToken"))
            .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
            .cloned();
        let workspace = if stateless {
            self.options.default_workspace().to_path_buf()
        } else {
            self.workspace(session, reply).await
        };
        let tools = self
            .tool_set(&workspace)
            .await
            .map_err(|e| RpcError::new(code::INTERNAL_ERROR, e))?;
        let Some(tool) = tools.find(name) else {
            return Err(RpcError::new(
                code::INVALID_PARAMS,
                format!(
                    "unknown tool `{name}`; the tools are {}",
                    tools.names().join(", ")
                ),
            ));
        };
        let progress = Arc::new(AtomicBool::new(false));
        let events = token.map(|token| progress_sink(reply.clone(), token, progress.clone()));
        let outcome = tool
            .call(ToolCall {
                input: &input,
                call_id,
                session_id: None,
                interrupt,
                events: events.as_ref(),
                audit: tools.audit(),
                session: None,
                reach: crate::agent::tool::Reach::FULL,
            })
            .await;
        if progress.load(Ordering::Relaxed) {
            // A client may drop a progress notification that arrives in the
            // same read as the response (the TypeScript SDK handles
            // notifications a tick after responses, and a response ends the
            // call's progress): give the last report a moment to go first.
            tokio::time::sleep(PROGRESS_GAP).await;
        }
        Ok(match outcome.result {
            Ok(text) => json!({
                "content": [{ "type": "text", "text": text }],
                "isError": false,
            }),
            Err(error) => {
                let mut message = error.to_string();
                if matches!(error, CallError::Denied(_))
                    && !self.options.allow_write
                    && !tool.spec.read_only
                {
                    message.push_str(
                        " (the workspace is read-only: the server was started without --allow-write)",
                    );
                }
                json!({
                    "content": [{ "type": "text", "text": message }],
                    "isError": true,
                })
            }
        })
    }

    /// The workspace of `session`'s next call: `--workspace`, else the
    /// client's first root if it has roots, else the starting folder.
    async fn workspace(&self, session: &Session, reply: &Outbox) -> PathBuf {
        if let Some(dir) = &self.options.workspace {
            return dir.clone();
        }
        if !session.roots_capable.get() {
            return self.options.current_dir.clone();
        }
        let mut roots = session.roots.lock().await;
        if roots.is_none() {
            *roots = Some(session.ask_roots(reply).await);
        }
        roots
            .clone()
            .flatten()
            .unwrap_or_else(|| self.options.current_dir.clone())
    }

    /// Watches the lockfile: when installed plugins change, the tools are
    /// loaded again and, if they differ, initialized sessions are told.
    pub fn watch_lockfile(self: &Rc<Self>) {
        let server = Rc::downgrade(self);
        let path = PluginStore::new(self.home.plugins_dir()).lock_path();
        tokio::task::spawn_local(async move {
            let mut seen = stamp(&path);
            loop {
                tokio::time::sleep(LOCKFILE_POLL).await;
                let now = stamp(&path);
                if now == seen {
                    continue;
                }
                seen = now;
                let Some(server) = server.upgrade() else {
                    return;
                };
                server.reload().await;
            }
        });
    }

    async fn reload(&self) {
        let workspace = self.options.default_workspace().to_path_buf();
        let before = self
            .tools
            .borrow()
            .get(&workspace)
            .map(|set| set.listing().clone());
        let after = match ToolSet::load(
            &self.home,
            &self.sandbox,
            &workspace,
            self.options.writes(),
            &self.options.plugin_files,
        )
        .await
        {
            Ok(set) => set,
            Err(e) => {
                eprintln!("capstan mcp: the installed plugins changed but cannot be loaded: {e}");
                return;
            }
        };
        let changed = before.as_ref() != Some(after.listing());
        let mut tools = self.tools.borrow_mut();
        tools.clear();
        tools.insert(workspace, Rc::new(after));
        drop(tools);
        if changed {
            for session in self.sessions.borrow().iter().filter_map(Weak::upgrade) {
                session.notify(Message::notification(
                    "notifications/tools/list_changed",
                    json!({}),
                ));
            }
        }
    }
}

/// The lockfile's identity and change time, or `None` when there is none.
fn stamp(path: &Path) -> Option<(u64, SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some((meta.len(), meta.modified().ok()?, inode))
}

/// A stateless request's result carries its type and the server's
/// identity; other results are left as they are.
fn stamp_stateless(mut result: Value, stateless: bool) -> Value {
    if stateless {
        result["resultType"] = json!("complete");
        result["_meta"] = json!({ protocol::META_SERVER_INFO: server_info() });
    }
    result
}

fn capabilities() -> Value {
    json!({ "tools": { "listChanged": true } })
}

fn server_info() -> Value {
    json!({
        "name": "capstan",
        "title": "capstan",
        "version": env!("CARGO_PKG_VERSION"),
    })
}

/// Sends the plugin's progress reports as `notifications/progress` for
/// `token`, each one further than the last (as MCP requires).
fn progress_sink(reply: Outbox, token: Value, sent: Arc<AtomicBool>) -> EventSink {
    let last = Mutex::new(None::<u64>);
    Arc::new(move |_plugin: &str, event: PluginEvent| {
        let PluginEvent::Progress {
            message,
            done,
            total,
        } = event
        else {
            return;
        };
        let Ok(mut last) = last.lock() else {
            return;
        };
        if last.is_some_and(|last| done <= last) {
            return;
        }
        *last = Some(done);
        let mut params = json!({ "progressToken": token, "progress": done, "message": message });
        if let Some(total) = total {
            params["total"] = json!(total);
        }
        reply.send(Message::notification("notifications/progress", params));
        sent.store(true, Ordering::Relaxed);
    })
}

/// A call under way.
struct Running {
    abort: AbortHandle,
    interrupt: Interrupt,
}

/// One client's session: the revision agreed on, what the client can do,
/// its calls under way and the answers the server waits for.
pub struct Session {
    version: Cell<Option<&'static str>>,
    initialized: Cell<bool>,
    roots_capable: Cell<bool>,
    /// `None` until asked; then the first root, if any.
    roots: tokio::sync::Mutex<Option<Option<PathBuf>>>,
    in_flight: RefCell<HashMap<String, Running>>,
    waiting: RefCell<HashMap<String, oneshot::Sender<Result<Value, RpcError>>>>,
    next_request: Cell<u64>,
    notify: RefCell<Option<Outbox>>,
    verbose: bool,
}

impl Session {
    fn new(notify: Option<Outbox>, verbose: bool) -> Self {
        Self {
            version: Cell::new(None),
            initialized: Cell::new(false),
            roots_capable: Cell::new(false),
            roots: tokio::sync::Mutex::new(None),
            in_flight: RefCell::new(HashMap::new()),
            waiting: RefCell::new(HashMap::new()),
            next_request: Cell::new(0),
            notify: RefCell::new(notify),
            verbose,
        }
    }

    /// The revision agreed on by `initialize`, if it was.
    pub fn version(&self) -> Option<&'static str> {
        self.version.get()
    }

    /// Sends server-initiated notifications to `notify` from now on (an
    /// HTTP client's event stream).
    pub fn set_notify(&self, notify: Option<Outbox>) {
        *self.notify.borrow_mut() = notify;
    }

    /// How many calls are under way.
    pub fn calls_running(&self) -> usize {
        self.in_flight.borrow().len()
    }

    /// Stops every call under way, for `reason` (the client went away).
    pub fn cancel_all(&self, reason: &str) {
        let running: Vec<_> = self.in_flight.borrow_mut().drain().collect();
        for (id, running) in running {
            self.stop(&id, running, reason);
        }
    }

    fn stop(&self, id: &str, running: Running, reason: &str) {
        running.interrupt.raise();
        running.abort.abort();
        if self.verbose {
            eprintln!("capstan mcp: cancelled call {id} ({reason})");
        }
    }

    fn notify(&self, message: Message) {
        if !self.initialized.get() {
            return;
        }
        if let Some(notify) = self.notify.borrow().as_ref() {
            notify.send(message);
        }
    }

    fn initialize(&self, params: Option<&Value>, instructions: &str) -> Result<Value, RpcError> {
        if self.version.get().is_some() {
            return Err(RpcError::new(
                code::INVALID_REQUEST,
                "the session is already initialized",
            ));
        }
        let requested = params
            .and_then(|p| p.get("protocolVersion"))
            .and_then(Value::as_str);
        let version = protocol::negotiate_initialize(requested);
        let roots = params
            .and_then(|p| p.get("capabilities"))
            .and_then(|c| c.get("roots"))
            .is_some_and(Value::is_object);
        self.roots_capable.set(roots);
        self.version.set(Some(version));
        Ok(json!({
            "protocolVersion": version,
            "capabilities": capabilities(),
            "serverInfo": server_info(),
            "instructions": instructions,
        }))
    }

    fn notification(&self, method: &str, params: Option<&Value>) {
        match method {
            "notifications/initialized" => self.initialized.set(true),
            "notifications/cancelled" => {
                let Some(id) = params.and_then(|p| p.get("requestId")) else {
                    return;
                };
                let key = id_key(id);
                let running = self.in_flight.borrow_mut().remove(&key);
                if let Some(running) = running {
                    let reason = params
                        .and_then(|p| p.get("reason"))
                        .and_then(Value::as_str)
                        .unwrap_or("no reason given");
                    self.stop(&key, running, &crate::escape::line(reason));
                }
            }
            "notifications/roots/list_changed" => {
                if let Ok(mut roots) = self.roots.try_lock() {
                    *roots = None;
                }
            }
            _ => {}
        }
    }

    fn answered(&self, id: &Value, outcome: Result<Value, RpcError>) {
        if let Some(waiting) = self.waiting.borrow_mut().remove(&id_key(id)) {
            let _ = waiting.send(outcome);
        }
    }

    /// Asks the client for its roots through `reply` and returns the
    /// first that is a local folder; `None` when it has none, says no, or
    /// does not answer in time.
    async fn ask_roots(&self, reply: &Outbox) -> Option<PathBuf> {
        let n = self.next_request.get() + 1;
        self.next_request.set(n);
        let id = json!(format!("capstan-{n}"));
        let (tx, rx) = oneshot::channel();
        self.waiting.borrow_mut().insert(id_key(&id), tx);
        let sent = reply.send(Message::Request {
            id: id.clone(),
            method: "roots/list".into(),
            params: None,
        });
        let answer = if sent {
            tokio::time::timeout(ROOTS_TIMEOUT, rx).await.ok()
        } else {
            None
        };
        self.waiting.borrow_mut().remove(&id_key(&id));
        let roots = answer?.ok()?.ok()?;
        roots
            .get("roots")?
            .as_array()?
            .iter()
            .filter_map(|root| root.get("uri")?.as_str().and_then(file_uri_path))
            .find(|path| path.is_dir())
    }
}

/// The local path of a `file://` URI (percent-decoded), if it is one.
pub fn file_uri_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    // `file://localhost/x` and `file:///x` name the same path.
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return None;
    }
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        Some(PathBuf::from(std::ffi::OsString::from_vec(decoded)))
    }
    #[cfg(not(unix))]
    {
        String::from_utf8(decoded).ok().map(PathBuf::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_become_paths() {
        assert_eq!(
            file_uri_path("file:///home/a%20b/x"),
            Some(PathBuf::from("/home/a b/x"))
        );
        assert_eq!(
            file_uri_path("file://localhost/srv"),
            Some(PathBuf::from("/srv"))
        );
        assert_eq!(file_uri_path("https://example.com/"), None);
        assert_eq!(file_uri_path("file://host/share"), None);
        assert_eq!(file_uri_path("file:///bad%zz"), None);
        assert_eq!(
            file_uri_path("file:///cut%2"),
            Some(PathBuf::from("/cut%2"))
        );
    }
}
