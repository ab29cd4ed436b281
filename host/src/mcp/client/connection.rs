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
    /// `tools/list_changed` notifications received, and how many of them
    /// the tool list was refreshed after.
    tools_changes: Arc<(AtomicU64, AtomicU64)>,
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
            tools_changes: Arc::default(),
        });
        let pending = connection.pending.clone();
        let tools_changes = connection.tools_changes.clone();
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
                            tools_changes.0.fetch_add(1, Ordering::AcqRel);
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

    /// How many `tools/list_changed` notifications arrived so far.
    pub fn tools_changes_seen(&self) -> u64 {
        self.tools_changes.0.load(Ordering::Acquire)
    }

    /// Records that the tool list was refreshed after `seen` notifications.
    pub fn tools_refreshed(&self, seen: u64) {
        self.tools_changes.1.fetch_max(seen, Ordering::AcqRel);
    }

    /// Whether the server said its tools changed and the list was not
    /// refreshed since: a call that made the server add a tool returns,
    /// and the bridge waits for the refresh so the next model request
    /// offers it.
    pub fn tools_stale(&self) -> bool {
        self.tools_changes.1.load(Ordering::Acquire) < self.tools_changes_seen()
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A link whose server is the test: what capstan sends comes out of
    /// the returned receiver, and what the test pushes arrives.
    fn fake_link() -> (
        Link,
        mpsc::UnboundedSender<Incoming>,
        std::sync::mpsc::Receiver<Message>,
    ) {
        let (incoming_tx, incoming) = mpsc::unbounded_channel();
        let (sent_tx, sent) = std::sync::mpsc::channel();
        let sent_tx = Mutex::new(sent_tx);
        let link = Link {
            outbox: Outbox::new(Arc::new(move |m| {
                sent_tx.lock().map(|s| s.send(m).is_ok()).unwrap_or(false)
            })),
            incoming,
            stop: Arc::new(|| {}),
            stderr: None,
        };
        (link, incoming_tx, sent)
    }

    #[tokio::test]
    async fn answers_match_requests_and_notifications_reach_the_supervisor() {
        let (link, server, sent) = fake_link();
        let (events_tx, mut events) = mpsc::unbounded_channel();
        let connection = Connection::open(link, json!({"roots": []}), events_tx);
        let call = connection.request(
            "tools/list",
            json!({}),
            Duration::from_secs(5),
            std::future::pending(),
        );
        let answer = async {
            let (request, sent) = tokio::task::spawn_blocking(move || (sent.recv().unwrap(), sent))
                .await
                .unwrap();
            let Message::Request { id, method, .. } = request else {
                panic!("a request");
            };
            assert_eq!(method, "tools/list");
            server
                .send(Incoming::Message(Message::notification(
                    "notifications/tools/list_changed",
                    json!({}),
                )))
                .unwrap();
            server
                .send(Incoming::Message(Message::result(id, json!({"tools": []}))))
                .unwrap();
            (server, sent)
        };
        let (result, (server, _sent)) = tokio::join!(call, answer);
        assert_eq!(result.unwrap(), json!({"tools": []}));
        assert_eq!(events.recv().await, Some(ServerEvent::ToolsChanged));
        // A server that goes away fails what waits, and says why.
        let waiting = connection.request(
            "tools/call",
            json!({}),
            Duration::from_secs(5),
            std::future::pending(),
        );
        let close = async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            server
                .send(Incoming::Closed("the server exited with code 3".into()))
                .unwrap();
        };
        let (failed, ()) = tokio::join!(waiting, close);
        assert_eq!(
            failed,
            Err(RequestError::Closed("the server exited with code 3".into()))
        );
        assert_eq!(
            events.recv().await,
            Some(ServerEvent::Closed("the server exited with code 3".into()))
        );
    }

    #[tokio::test]
    async fn a_request_without_an_answer_times_out_and_is_cancelled() {
        let (link, _server, sent) = fake_link();
        let (events_tx, _events) = mpsc::unbounded_channel();
        let connection = Connection::open(link, json!({}), events_tx);
        let outcome = connection
            .request(
                "tools/call",
                json!({}),
                Duration::from_millis(20),
                std::future::pending(),
            )
            .await;
        assert_eq!(
            outcome,
            Err(RequestError::Timeout(Duration::from_millis(20)))
        );
        let _request = sent.recv().unwrap();
        let cancelled = sent.recv().unwrap();
        assert_eq!(cancelled.method(), Some("notifications/cancelled"));
    }
}
