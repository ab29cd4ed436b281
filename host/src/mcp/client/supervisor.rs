//! The life of each server in a session: started in the background as the
//! session starts (never holding up the first prompt), initialized, its
//! tools listed and offered once it is ready, listed again on
//! `notifications/tools/list_changed`, and restarted with backoff (1 s, 2 s,
//! 4 s, … at most 60 s) when it crashes, closes or a call times out.
//!
//! Servers that can never start as defined — not consented to, a local
//! server without the whole OS sandbox, a remote server that wants OAuth,
//! a secret with no value — are not retried; their state says why.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::config::{ServerSpec, Transport};
use super::connection::{Connection, Link, RequestError, ServerEvent};
use crate::audit::{AuditEvent, AuditLog, AuditScope};
use crate::exec::ExecGrants;
use crate::grants::{ResolvedSecret, SecretValues};
use crate::mcp::protocol;

/// How long starting (initialize and the first tools/list) may take.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest pause between restarts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// How long a server must stay up for its backoff to start over.
const STABLE: Duration = Duration::from_secs(30);

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Starting (attempt number).
    Starting(u32),
    /// Ready, with its tools listed.
    Ready,
    /// Down; restarted after the pause.
    Restarting {
        /// Why it went down.
        reason: String,
        /// When the next attempt starts.
        at: Instant,
    },
    /// Not started, and it will not be: why, and what to do.
    Refused(String),
    /// Turned off by the program driving the session (`mcp_toggle`); it
    /// starts again when turned on.
    Disabled,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Starting(1) => write!(f, "starting"),
            Status::Starting(n) => write!(f, "starting (attempt {n})"),
            Status::Ready => write!(f, "ready"),
            Status::Restarting { reason, at } => {
                let secs = at.saturating_duration_since(Instant::now()).as_secs();
                write!(f, "down ({reason}); restarting in {secs} s")
            }
            Status::Refused(reason) => write!(f, "not started: {reason}"),
            Status::Disabled => write!(f, "disabled"),
        }
    }
}

/// A tool as its server described it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteTool {
    /// Its name on the server.
    pub name: String,
    /// What it says it does.
    pub description: String,
    /// Its input schema.
    pub input_schema: Value,
    /// Its annotations (`readOnlyHint`, ...), as sent.
    pub annotations: Value,
}

/// What can be seen of a server from outside.
#[derive(Debug, Clone)]
pub struct ServerView {
    /// Its status.
    pub status: Status,
    /// Its tools (when ready, or as last listed).
    pub tools: Vec<RemoteTool>,
    /// How many times it was started.
    pub starts: u32,
    /// The last noise it made (output that is not JSON-RPC, stderr).
    pub notes: Vec<String>,
    /// Whether its last start got it ready (a server that went down after
    /// being ready is likely back soon; one that fails to start is not).
    pub was_ready: bool,
    /// Why it last went down or failed to start, if it did.
    pub last_failure: Option<String>,
}

/// One server of a session.
pub struct ServerHandle {
    /// Its definition.
    pub spec: ServerSpec,
    view: Mutex<ServerView>,
    connection: Mutex<Option<Arc<Connection>>>,
    /// Bumped on every change of the tools, so the bridge rebuilds.
    generation: std::sync::atomic::AtomicU64,
    /// Raised when the session ends: the server is stopped and not
    /// restarted.
    stopping: tokio::sync::watch::Sender<bool>,
    /// Whether its supervisor is running, and whether it has ended.
    supervised: std::sync::atomic::AtomicBool,
    ended: std::sync::atomic::AtomicBool,
    /// Turned off by the driver; the supervisor waits until it is on.
    disabled: std::sync::atomic::AtomicBool,
    /// Bumped to cut a pause between restarts short (a reconnect, or the
    /// server turned on or off).
    nudge: tokio::sync::watch::Sender<u64>,
}

/// What a session gives its servers: the base sandbox for local ones, the
/// secrets for remote ones, the audit log, the roots.
#[derive(Clone)]
pub struct Launcher {
    /// The session's `[exec]` grants, the base of a local server's sandbox
    /// (or why commands cannot run).
    pub exec: Result<ExecGrants, String>,
    /// Secret values (`[secrets]` of the user config).
    pub secrets: SecretValues,
    /// The audit log.
    pub audit: Option<AuditLog>,
    /// The workspace, offered as the client's root.
    pub workspace: std::path::PathBuf,
}

impl ServerHandle {
    /// A server not started yet.
    pub fn new(spec: ServerSpec, status: Status) -> Arc<Self> {
        Arc::new(Self {
            spec,
            view: Mutex::new(ServerView {
                status,
                tools: Vec::new(),
                starts: 0,
                notes: Vec::new(),
                was_ready: false,
                last_failure: None,
            }),
            connection: Mutex::new(None),
            generation: std::sync::atomic::AtomicU64::new(0),
            stopping: tokio::sync::watch::Sender::new(false),
            supervised: std::sync::atomic::AtomicBool::new(false),
            ended: std::sync::atomic::AtomicBool::new(false),
            disabled: std::sync::atomic::AtomicBool::new(false),
            nudge: tokio::sync::watch::Sender::new(0),
        })
    }

    /// Starts the server again now: a running one is stopped and
    /// restarted, one waiting to restart stops waiting. A server that was
    /// refused or turned off is not started; the error says why.
    pub fn reconnect(&self) -> Result<(), String> {
        match self.view().status {
            Status::Refused(reason) => return Err(reason),
            Status::Disabled => {
                return Err(format!(
                    "MCP server {} is disabled; turn it on first (mcp_toggle)",
                    self.spec.name
                ));
            }
            _ => {}
        }
        if let Some(connection) = self.connection() {
            connection.stop("reconnect asked by the driver");
        }
        self.nudge.send_modify(|n| *n += 1);
        Ok(())
    }

    /// Turns the server off (stopping it) or on again (starting it).
    pub fn set_enabled(&self, enabled: bool) -> Result<(), String> {
        if let Status::Refused(reason) = self.view().status {
            return Err(reason);
        }
        self.disabled
            .store(!enabled, std::sync::atomic::Ordering::SeqCst);
        if !enabled && let Some(connection) = self.connection() {
            connection.stop("turned off by the driver");
        }
        self.nudge.send_modify(|n| *n += 1);
        Ok(())
    }

    fn is_disabled(&self) -> bool {
        self.disabled.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Stops the server for good (the session ends): its process is
    /// stopped, its end recorded, and it is not restarted.
    pub fn stop(&self) {
        self.stopping.send_replace(true);
        if let Some(connection) = self.connection() {
            connection.stop("the session ended");
        }
    }

    /// Whether its supervisor is still running (the server has not been
    /// stopped for good, or its end is not recorded yet).
    pub fn is_supervised(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.supervised.load(Ordering::Acquire) && !self.ended.load(Ordering::Acquire)
    }

    fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// Records that the server was stopped as the session ended, and ends
    /// its supervisor.
    fn stopped(&self, audit: Option<&AuditLog>) {
        self.record(audit, "stopped", "the session ended");
        self.ended.store(true, std::sync::atomic::Ordering::Release);
    }

    /// What it looks like now.
    pub fn view(&self) -> ServerView {
        self.view.lock().map(|v| v.clone()).unwrap_or(ServerView {
            status: Status::Refused("its state cannot be read".into()),
            tools: Vec::new(),
            starts: 0,
            notes: Vec::new(),
            was_ready: false,
            last_failure: None,
        })
    }

    /// Bumped whenever its tools change.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Its connection, when ready.
    pub fn connection(&self) -> Option<Arc<Connection>> {
        self.connection.lock().ok().and_then(|c| c.clone())
    }

    fn set_status(&self, status: Status) {
        if let Ok(mut view) = self.view.lock() {
            match status {
                Status::Ready => view.was_ready = true,
                Status::Refused(_) => view.was_ready = false,
                _ => {}
            }
            view.status = status;
        }
    }

    fn set_tools(&self, tools: Vec<RemoteTool>) {
        if let Ok(mut view) = self.view.lock() {
            view.tools = tools;
        }
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    fn note(&self, note: String) {
        if let Ok(mut view) = self.view.lock() {
            view.notes.push(note);
            if view.notes.len() > 5 {
                view.notes.remove(0);
            }
        }
    }

    fn record(&self, audit: Option<&AuditLog>, state: &str, detail: &str) {
        if let Some(log) = audit {
            let scope = AuditScope::new(
                log.clone(),
                &format!("mcp__{}", self.spec.name),
                "mcp",
                None,
            );
            scope.record(AuditEvent::McpServerState {
                state: state.to_string(),
                detail: detail.to_string(),
            });
        }
    }

    /// Runs the server for the rest of the session: starts it, restarts
    /// it when it goes down.
    pub async fn supervise(self: Arc<Self>, launcher: Launcher) {
        self.supervised
            .store(true, std::sync::atomic::Ordering::Release);
        let mut attempt = 0u32;
        let mut failures = 0u32;
        let mut nudged = self.nudge.subscribe();
        loop {
            if self.is_stopping() {
                self.stopped(launcher.audit.as_ref());
                return;
            }
            if self.is_disabled() {
                self.set_status(Status::Disabled);
                self.set_tools(Vec::new());
                let mut stopping = self.stopping.subscribe();
                tokio::select! {
                    _ = nudged.changed() => {}
                    _ = stopping.wait_for(|stop| *stop) => {}
                }
                continue;
            }
            attempt += 1;
            self.set_status(Status::Starting(attempt));
            if let Ok(mut view) = self.view.lock() {
                view.starts = attempt;
            }
            let started = Instant::now();
            let (events_tx, mut events) = mpsc::unbounded_channel();
            let reason = match self.connect(&launcher, events_tx).await {
                Err(Start::Refused(reason)) => {
                    self.record(launcher.audit.as_ref(), "refused", &reason);
                    self.set_status(Status::Refused(reason));
                    self.ended.store(true, std::sync::atomic::Ordering::Release);
                    return;
                }
                Err(Start::Failed(reason)) => {
                    if let Ok(mut view) = self.view.lock() {
                        view.was_ready = false;
                    }
                    reason
                }
                Ok(connection) => {
                    self.record(
                        launcher.audit.as_ref(),
                        "ready",
                        &format!("{} tools", self.view().tools.len()),
                    );
                    self.set_status(Status::Ready);
                    // Stopped (or turned off) while it was starting: stop
                    // it now.
                    if self.is_stopping() {
                        connection.stop("the session ended");
                    } else if self.is_disabled() {
                        connection.stop("turned off by the driver");
                    }
                    let reason = self.serve(&connection, &mut events).await;
                    if let Ok(mut slot) = self.connection.lock() {
                        *slot = None;
                    }
                    connection.stop(&reason);
                    reason
                }
            };
            let reason = match self.connection_tail(&reason) {
                Some(tail) => format!("{reason}; {tail}"),
                None => reason,
            };
            if self.is_disabled() {
                continue;
            }
            if started.elapsed() > STABLE {
                failures = 0;
            }
            failures += 1;
            let pause = Duration::from_secs(1u64 << (failures - 1).min(6)).min(MAX_BACKOFF);
            if self.is_stopping() {
                self.stopped(launcher.audit.as_ref());
                return;
            }
            self.record(launcher.audit.as_ref(), "down", &reason);
            if let Ok(mut view) = self.view.lock() {
                view.last_failure = Some(reason.clone());
            }
            self.set_status(Status::Restarting {
                reason,
                at: Instant::now() + pause,
            });
            let mut stopping = self.stopping.subscribe();
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                _ = stopping.wait_for(|stop| *stop) => {}
                _ = nudged.changed() => {}
            }
        }
    }

    fn connection_tail(&self, _reason: &str) -> Option<String> {
        self.view.lock().ok().and_then(|v| {
            v.notes
                .iter()
                .rev()
                .find(|n| n.starts_with("its stderr"))
                .cloned()
        })
    }

    /// Waits for the connection to close, refreshing the tools on the way;
    /// returns why it closed.
    async fn serve(
        &self,
        connection: &Arc<Connection>,
        events: &mut mpsc::UnboundedReceiver<ServerEvent>,
    ) -> String {
        loop {
            let Some(event) = events.recv().await else {
                return "the connection ended".to_string();
            };
            match event {
                ServerEvent::ToolsChanged => {
                    let seen = connection.tools_changes_seen();
                    match list_tools(connection).await {
                        Ok(tools) => self.set_tools(tools),
                        Err(e) => self.note(format!("listing its tools again failed: {e}")),
                    }
                    connection.tools_refreshed(seen);
                }
                ServerEvent::Noise(note) => self.note(note),
                ServerEvent::Closed(reason) => {
                    if let Some(tail) = connection.stderr_tail() {
                        self.note(tail);
                    }
                    return reason;
                }
            }
        }
    }

    /// Starts the transport, initializes and lists the tools.
    async fn connect(
        &self,
        launcher: &Launcher,
        events: mpsc::UnboundedSender<ServerEvent>,
    ) -> Result<Arc<Connection>, Start> {
        let link = self.link(launcher)?;
        let roots = json!({ "roots": [{
            "uri": format!("file://{}", launcher.workspace.display()),
            "name": "workspace",
        }]});
        let connection = Connection::open(link, roots, events);
        let never = std::future::pending::<()>;
        let init = connection
            .request(
                "initialize",
                json!({
                    "protocolVersion": protocol::V2025_11_25,
                    "capabilities": { "roots": { "listChanged": false } },
                    "clientInfo": { "name": "capstan", "version": env!("CARGO_PKG_VERSION") },
                }),
                START_TIMEOUT,
                never(),
            )
            .await;
        let failed = |e: RequestError, connection: &Arc<Connection>| {
            let mut reason = format!("initialize failed: {e}");
            if let Some(tail) = connection.stderr_tail() {
                reason.push_str("; ");
                reason.push_str(&tail);
            }
            connection.stop(&reason);
            if reason.contains("needs OAuth") || reason.contains("refused by capstan") {
                Start::Refused(reason)
            } else {
                Start::Failed(reason)
            }
        };
        let init = init.map_err(|e| failed(e, &connection))?;
        let version = init
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !version.is_empty() && !protocol::is_supported(version) && version != "2025-03-26" {
            let reason = format!("the server speaks MCP {version}, which capstan does not");
            connection.stop(&reason);
            return Err(Start::Refused(reason));
        }
        connection.notify("notifications/initialized", json!({}));
        let tools = list_tools(&connection)
            .await
            .map_err(|e| failed(e, &connection))?;
        self.set_tools(tools);
        if let Ok(mut slot) = self.connection.lock() {
            *slot = Some(connection.clone());
        }
        Ok(connection)
    }

    /// The transport for this server.
    fn link(&self, launcher: &Launcher) -> Result<Link, Start> {
        let spec = &self.spec;
        let audit = launcher
            .audit
            .as_ref()
            .map(|log| AuditScope::new(log.clone(), &format!("mcp__{}", spec.name), "mcp", None));
        match &spec.transport {
            Transport::Stdio { argv, env } => {
                if let Some(locked) = &spec.locked_files {
                    locked.verify().map_err(Start::Refused)?;
                }
                let base = launcher.exec.clone().map_err(|why| {
                    Start::Refused(format!("local servers cannot run here: {why}"))
                })?;
                let grants = local_grants(spec, base, audit).map_err(Start::Refused)?;
                #[cfg(target_os = "linux")]
                {
                    if let Some(gap) = crate::exec::sandbox_gap(&grants) {
                        return Err(Start::Refused(format!(
                            "a local MCP server runs only inside the whole OS sandbox, and here {gap}"
                        )));
                    }
                    let env: Vec<(String, String)> = env
                        .iter()
                        .map(|(name, value)| {
                            let (value, _) =
                                super::config::expand_vars(value, |n| std::env::var(n).ok());
                            (name.clone(), value)
                        })
                        .collect();
                    super::stdio_link::start(
                        &spec.name,
                        argv.clone(),
                        env,
                        spec.write_workspace,
                        grants,
                    )
                    .map_err(|e| Start::Failed(format!("cannot start it: {e}")))
                }
                #[cfg(not(target_os = "linux"))]
                {
                    let _ = (argv, env, grants);
                    Err(Start::Refused(format!(
                        "local servers need the OS sandbox, which runs only on Linux for now ({} does not have it)",
                        std::env::consts::OS
                    )))
                }
            }
            Transport::Driver { channel } => {
                Ok(super::driver_link::start(&spec.name, channel.0.clone()))
            }
            Transport::Http {
                url,
                legacy_sse,
                headers,
                secrets,
            } => {
                let resolved: Vec<ResolvedSecret> = crate::grants::secrets::resolve(
                    secrets,
                    |name| std::env::var(name).ok(),
                    &launcher.secrets,
                )
                .map_err(|e| Start::Refused(e.to_string()))?;
                Ok(super::http_link::start(
                    url.clone(),
                    *legacy_sse,
                    headers.clone(),
                    spec.net.clone(),
                    resolved,
                    audit,
                    spec.timeout,
                ))
            }
        }
    }
}

/// The sandbox of a local server: the session's base (system folders,
/// tool homes, limits) with only the server's own folders, origins and
/// variables added (the workspace is writable only when granted), and none of
/// the session's `[exec]` network or variables.
pub fn local_grants(
    spec: &ServerSpec,
    mut grants: ExecGrants,
    audit: Option<AuditScope>,
) -> Result<ExecGrants, String> {
    for folder in &spec.read {
        let path = folder
            .canonicalize()
            .map_err(|e| format!("cannot read {}: {e}", folder.display()))?;
        grants.read.push(path);
    }
    for folder in &spec.write {
        let path = folder
            .canonicalize()
            .map_err(|e| format!("cannot use {}: {e}", folder.display()))?;
        grants.write.push(path);
    }
    grants.net = spec.net.clone();
    grants.env = Vec::new();
    grants.audit = audit;
    Ok(grants)
}

/// Why a server did not start.
enum Start {
    /// It never will as defined.
    Refused(String),
    /// It may next time.
    Failed(String),
}

/// Lists the server's tools, following `nextCursor`.
async fn list_tools(connection: &Arc<Connection>) -> Result<Vec<RemoteTool>, RequestError> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let params = match &cursor {
            Some(cursor) => json!({ "cursor": cursor }),
            None => json!({}),
        };
        let page = connection
            .request("tools/list", params, START_TIMEOUT, std::future::pending())
            .await?;
        for tool in page
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            tools.push(RemoteTool {
                name: name.to_string(),
                description: tool
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                input_schema: tool
                    .get("inputSchema")
                    .cloned()
                    .unwrap_or_else(|| json!({ "type": "object" })),
                annotations: tool.get("annotations").cloned().unwrap_or(Value::Null),
            });
        }
        cursor = page
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_string);
        if cursor.is_none() {
            break;
        }
    }
    Ok(tools)
}
