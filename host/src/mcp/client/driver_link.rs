//! A server that lives in the program driving a print-mode session (the
//! Agent SDKs' in-process servers: Python's `create_sdk_mcp_server`,
//! TypeScript's `createSdkMcpServer`, `{"type": "sdk"}`): each JSON-RPC
//! message capstan sends goes to the driver in an `mcp_message` control
//! request, `{"subtype":"mcp_message","server_name":NAME,"message":{...}}`,
//! and the body of its answer, `{"mcp_response":{...}}`, is the server's
//! reply, as Claude Code routes them.
//!
//! Its tools are `mcp__NAME__TOOL` like any server's, under the same
//! policy, permission questions, hooks and audit ([`super::bridge`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::future::LocalBoxFuture;
use serde_json::json;
use tokio::sync::mpsc;

use super::bridge::McpToolSource;
use super::connection::{Incoming, Link};
use super::supervisor::ServerHandle;
use crate::agent::tool::{AgentTool, ToolSource};
use crate::audit::AuditLog;
use crate::hooks::driver::DriverCall;
use crate::mcp::jsonrpc::{Message, RpcError, code};
use crate::mcp::outbox::Outbox;

/// The way to the driver, in a server's definition. Two are the same
/// only when they are the same channel.
#[derive(Clone)]
pub struct DriverChannel(
    /// Sends a control request to the driver.
    pub DriverCall,
);

impl std::fmt::Debug for DriverChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DriverChannel")
    }
}

impl PartialEq for DriverChannel {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for DriverChannel {}

impl serde::Serialize for DriverChannel {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("driver")
    }
}

/// Links server `name` of the driver through `call`. Must be called on
/// the tokio runtime, where its requests are sent from.
pub fn start(name: &str, call: DriverCall) -> Link {
    let (incoming_tx, incoming) = mpsc::unbounded_channel();
    let closed = Arc::new(AtomicBool::new(false));
    let runtime = tokio::runtime::Handle::current();
    let server = name.to_string();
    let sending_closed = closed.clone();
    let sending_tx = incoming_tx.clone();
    let outbox = Outbox::new(Arc::new(move |message: Message| {
        if sending_closed.load(Ordering::SeqCst) {
            return false;
        }
        let request_id = match &message {
            Message::Request { id, .. } => Some(id.clone()),
            _ => None,
        };
        let request = json!({
            "subtype": "mcp_message",
            "server_name": server,
            "message": message.to_json(),
        });
        let call = call.clone();
        let incoming = sending_tx.clone();
        let server = server.clone();
        runtime.spawn(async move {
            let answer = call(request).await;
            // A notification's or a response's answer is only an ack.
            let Some(id) = request_id else { return };
            let reply = match answer {
                Ok(body) => match body.get("mcp_response").cloned() {
                    Some(response) => Message::from_json(response).unwrap_or_else(|bad| {
                        Message::error(
                            id.clone(),
                            RpcError::new(
                                code::INTERNAL_ERROR,
                                format!(
                                    "the driver's server {server} answered with no JSON-RPC response: {}",
                                    bad.error.message
                                ),
                            ),
                        )
                    }),
                    None => Message::error(
                        id,
                        RpcError::new(
                            code::INTERNAL_ERROR,
                            format!("the driver's answer for server {server} has no `mcp_response`"),
                        ),
                    ),
                },
                Err(error) => Message::error(id, RpcError::new(code::INTERNAL_ERROR, error)),
            };
            let _ = incoming.send(Incoming::Message(reply));
        });
        true
    }));
    let stop_closed = closed;
    Link {
        outbox,
        incoming,
        stop: Arc::new(move || {
            if !stop_closed.swap(true, Ordering::SeqCst) {
                let _ = incoming_tx.send(Incoming::Closed("the session ended".into()));
            }
        }),
        stderr: None,
    }
}

/// The driver's servers of a session, added when its `initialize`
/// request names them; their tools are offered as soon as they are.
pub struct DriverServers {
    audit: Option<AuditLog>,
    source: Mutex<Option<Arc<McpToolSource>>>,
    servers: Mutex<Vec<Arc<ServerHandle>>>,
}

impl DriverServers {
    /// None yet; calls will be recorded in `audit`.
    pub fn new(audit: Option<AuditLog>) -> Self {
        Self {
            audit,
            source: Mutex::new(None),
            servers: Mutex::new(Vec::new()),
        }
    }

    /// Offers the tools of `servers` (as well as those added before).
    pub fn add(&self, servers: Vec<Arc<ServerHandle>>) {
        let Ok(mut all) = self.servers.lock() else {
            return;
        };
        all.extend(servers);
        if let Ok(mut source) = self.source.lock() {
            *source = Some(Arc::new(McpToolSource::new(
                all.clone(),
                self.audit.clone(),
            )));
        }
    }

    /// Where their calls are recorded.
    pub fn audit(&self) -> Option<AuditLog> {
        self.audit.clone()
    }

    /// The servers added.
    pub fn servers(&self) -> Vec<Arc<ServerHandle>> {
        self.servers.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn source(&self) -> Option<Arc<McpToolSource>> {
        self.source.lock().ok().and_then(|s| s.clone())
    }
}

impl ToolSource for DriverServers {
    fn tools(&self) -> Vec<AgentTool> {
        self.source().map(|s| s.tools()).unwrap_or_default()
    }

    fn session_ended(&self) -> LocalBoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(source) = self.source() {
                source.session_ended().await;
            }
        })
    }

    fn wait_for<'a>(&'a self, model_name: &'a str) -> LocalBoxFuture<'a, bool> {
        Box::pin(async move {
            match self.source() {
                Some(source) => source.wait_for(model_name).await,
                None => false,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[tokio::test]
    async fn requests_travel_as_mcp_messages_and_answers_come_back() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let call: DriverCall = Arc::new(move |request: Value| {
            record.lock().unwrap().push(request.clone());
            Box::pin(async move {
                let id = request["message"]["id"].clone();
                Ok(json!({"mcp_response": {"jsonrpc": "2.0", "id": id, "result": {"tools": []}}}))
            })
        });
        let mut link = start("calc", call);
        assert!(link.outbox.send(Message::Request {
            id: json!(7),
            method: "tools/list".into(),
            params: None,
        }));
        match link.incoming.recv().await.unwrap() {
            Incoming::Message(Message::Response { id, outcome }) => {
                assert_eq!(id, json!(7));
                assert_eq!(outcome.unwrap(), json!({"tools": []}));
            }
            other => panic!("{other:?}"),
        }
        let request = seen.lock().unwrap()[0].clone();
        assert_eq!(request["subtype"], "mcp_message");
        assert_eq!(request["server_name"], "calc");
        assert_eq!(request["message"]["method"], "tools/list");
        (link.stop)();
        assert!(matches!(
            link.incoming.recv().await.unwrap(),
            Incoming::Closed(_)
        ));
        assert!(!link.outbox.send(Message::notification("x", json!({}))));
    }

    #[tokio::test]
    async fn a_driver_error_fails_the_request() {
        let call: DriverCall =
            Arc::new(|_| Box::pin(async { Err("Server 'calc' not found".to_string()) }));
        let mut link = start("calc", call);
        link.outbox.send(Message::Request {
            id: json!(1),
            method: "initialize".into(),
            params: None,
        });
        match link.incoming.recv().await.unwrap() {
            Incoming::Message(Message::Response { outcome, .. }) => {
                assert!(outcome.unwrap_err().message.contains("not found"));
            }
            other => panic!("{other:?}"),
        }
    }
}
