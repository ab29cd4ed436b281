//! One live connection to an MCP server: JSON-RPC requests matched to
//! their responses, the server's own requests answered, its notifications
//! passed on, whatever the transport ([`super::stdio_link`],
//! [`super::http_link`]).
//!
//! A transport is a [`Link`]: an [`Outbox`] for the messages capstan
//! sends, a channel of what arrives ([`Incoming`]), and a way to stop it.
//! When the link closes (the process exited, the HTTP session ended, the
//! output was garbage) every request waiting fails with the reason, and
//! the supervisor hears of it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::mcp::jsonrpc::{Message, RpcError, code, id_key};
use crate::mcp::outbox::Outbox;

/// What a transport passes on.
#[derive(Debug)]
pub enum Incoming {
    /// A message from the server.
    Message(Message),
    /// Something the server wrote that is not a message, reported once in
    /// a while (bounded).
    Noise(String),
    /// The link is gone, and why.
    Closed(String),
}

/// A transport, started.
pub struct Link {
    /// Where messages to the server go.
    pub outbox: Outbox,
    /// What arrives.
    pub incoming: mpsc::UnboundedReceiver<Incoming>,
    /// Stops the transport (kills the process, ends the HTTP session).
    pub stop: Arc<dyn Fn() + Send + Sync>,
    /// What the server wrote to its standard error lately, for reports.
    pub stderr: Option<Arc<Mutex<super::stdio_link::ErrorTail>>>,
}

/// What a connection tells its supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// `notifications/tools/list_changed`.
    ToolsChanged,
    /// The link closed, and why.
    Closed(String),
    /// Noise on the link (output that is not JSON-RPC).
    Noise(String),
}

/// Why a request got no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The server answered with an error.
    #[error("{0}")]
    Rpc(String),
    /// No answer in time.
    #[error("no answer within {}", crate::quantity::TimeSpan(*.0))]
    Timeout(Duration),
    /// The connection is gone.
    #[error("{0}")]
    Closed(String),
    /// The call was cancelled by the user.
    #[error("cancelled")]
    Cancelled,
}

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Result<Value, RpcError>>>>>;

/// A live connection; see the [module documentation](self).
pub struct Connection {
    outbox: Outbox,
    pending: Pending,
    next_id: AtomicU64,
    closed: Arc<Mutex<Option<String>>>,
    stop: Arc<dyn Fn() + Send + Sync>,
    stderr: Option<Arc<Mutex<super::stdio_link::ErrorTail>>>,
}

impl Connection {
    /// Runs `link`: what arrives is dispatched on a task of its own; events
    /// go to `events`. `roots` is what the server gets for `roots/list`.
    pub fn open(link: Link, roots: Value, events: mpsc::UnboundedSender<ServerEvent>) -> Arc<Self> {
        let Link {
            outbox,
            mut incoming,
            stop,
            stderr,
        } = link;
        let connection = Arc::new(Self {
            outbox: outbox.clone(),
            pending: Pending::default(),
            next_id: AtomicU64::new(1),
            closed: Arc::default(),
            stop,
            stderr,
        });
        let pending = connection.pending.clone();
        let closed = connection.closed.clone();
        tokio::spawn(async move {
            let reason = loop {
                let Some(item) = incoming.recv().await else {
                    break "the connection ended".to_string();
                };
                match item {
                    Incoming::Message(Message::Response { id, outcome }) => {
                        let waiting = pending.lock().ok().and_then(|mut p| p.remove(&id_key(&id)));
                        if let Some(waiting) = waiting {
                            let _ = waiting.send(outcome);
                        }
                    }
                    Incoming::Message(Message::Request { id, method, .. }) => {
                        let answer = match method.as_str() {
                            "ping" => Message::result(id, json!({})),
                            "roots/list" => Message::result(id, roots.clone()),
                            other => Message::error(
                                id,
                                RpcError::new(
                                    code::METHOD_NOT_FOUND,
                                    format!("capstan does not offer `{other}` to servers"),
                                ),
                            ),
                        };
                        outbox.send(answer);
                    }
                    Incoming::Message(Message::Notification { method, .. }) => {
                        if method == "notifications/tools/list_changed" {
                            let _ = events.send(ServerEvent::ToolsChanged);
                        }
                    }
                    Incoming::Noise(note) => {
                        let _ = events.send(ServerEvent::Noise(note));
                    }
                    Incoming::Closed(reason) => break reason,
                }
            };
            if let Ok(mut closed) = closed.lock() {
                closed.get_or_insert(reason.clone());
            }
            let waiting: Vec<_> = pending
                .lock()
                .map(|mut p| p.drain().collect())
                .unwrap_or_default();
            for (_, sender) in waiting {
                let _ = sender.send(Err(RpcError::new(code::INTERNAL_ERROR, reason.clone())));
            }
            let _ = events.send(ServerEvent::Closed(reason));
        });
        connection
    }

    /// Why the connection closed, if it did.
    pub fn closed(&self) -> Option<String> {
        self.closed.lock().ok().and_then(|c| c.clone())
    }

    /// The end of the server's standard error, if it has one.
    pub fn stderr_tail(&self) -> Option<String> {
        let tail = self.stderr.as_ref()?.lock().ok()?;
        tail.summary()
    }

    /// Stops the server (the supervisor restarts it).
    pub fn stop(&self, reason: &str) {
        if let Ok(mut closed) = self.closed.lock() {
            closed.get_or_insert(reason.to_string());
        }
        (self.stop)();
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) {
        self.outbox.send(Message::notification(method, params));
    }

    /// Sends request `method` and waits at most `timeout` for its result;
    /// `cancel` (when it completes first) abandons it, telling the server.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: impl std::future::Future<Output = ()>,
    ) -> Result<Value, RequestError> {
        if let Some(reason) = self.closed() {
            return Err(RequestError::Closed(reason));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let key = id_key(&json!(id));
        let (sender, receiver) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(key.clone(), sender);
        }
        let sent = self.outbox.send(Message::Request {
            id: json!(id),
            method: method.to_string(),
            params: Some(params),
        });
        if !sent {
            self.forget(&key);
            return Err(RequestError::Closed(
                self.closed()
                    .unwrap_or_else(|| "the server's input is closed".to_string()),
            ));
        }
        let outcome = tokio::select! {
            answer = receiver => answer.map_err(|_| RequestError::Closed(
                self.closed().unwrap_or_else(|| "the connection ended".to_string()),
            )),
            () = tokio::time::sleep(timeout) => Err(RequestError::Timeout(timeout)),
            () = cancel => Err(RequestError::Cancelled),
        };
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(if self.closed().is_some() {
                RequestError::Closed(error.message)
            } else {
                RequestError::Rpc(error.message)
            }),
            Err(error) => {
                self.forget(&key);
                if matches!(error, RequestError::Timeout(_) | RequestError::Cancelled) {
                    self.notify(
                        "notifications/cancelled",
                        json!({ "requestId": id, "reason": error.to_string() }),
                    );
                }
                Err(error)
            }
        }
    }

    fn forget(&self, key: &str) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.remove(key);
        }
    }
}
