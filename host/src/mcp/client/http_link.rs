//! A remote server over Streamable HTTP (each message POSTed; the answer a
//! JSON body or an event stream), or the older HTTP+SSE transport (one
//! long GET stream whose first event names where to POST).
//!
//! Every request is sent by [`NetHooks`], the host's one way out for
//! plugins: the server's origin is the only grant, the host resolves the
//! name and refuses loopback, private, link-local and metadata addresses
//! unless the grant names that address, no redirect is followed, secret
//! headers are added by the host on the vetted connection only, and each
//! request is audited (`http_sent`, `http_refused`, `secret_injected`,
//! never a value). A server that answers 401 asks for OAuth, which capstan
//! does not do: the link closes saying to use a header secret.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use tokio::sync::mpsc;
use wasmtime_wasi_http::{RequestOptions, WasiBody, WasiHttpHooks};

use super::connection::{Incoming, Link};
use crate::audit::AuditScope;
use crate::grants::ResolvedSecret;
use crate::grants::net::NetGrant;
use crate::grants::net::send::NetHooks;
use crate::mcp::jsonrpc::{Message, RpcError};
use crate::mcp::outbox::Outbox;

/// The largest JSON body read from a response.
const MAX_BODY: usize = 16 << 20;

/// What every request of one server shares.
struct Remote {
    url: String,
    headers: Vec<(String, String)>,
    net: Vec<NetGrant>,
    secrets: Vec<ResolvedSecret>,
    audit: Option<AuditScope>,
    session: Mutex<Option<String>>,
    protocol: Mutex<Option<String>>,
    /// Where POSTs go for the older transport, once its stream said.
    endpoint: Mutex<Option<String>>,
    incoming: mpsc::UnboundedSender<Incoming>,
    /// How long an answer may pause.
    patience: Duration,
}

/// Why an exchange failed.
enum Failure {
    /// Say it to the request's caller only.
    Request(String),
    /// The link cannot go on.
    Fatal(String),
}

/// Links the server at `url`.
#[allow(clippy::too_many_arguments)]
pub fn start(
    url: String,
    legacy_sse: bool,
    headers: Vec<(String, String)>,
    net: Vec<NetGrant>,
    secrets: Vec<ResolvedSecret>,
    audit: Option<AuditScope>,
    patience: Duration,
) -> Link {
    let (incoming_tx, incoming) = mpsc::unbounded_channel();
    let remote = Arc::new(Remote {
        url,
        headers,
        net,
        secrets,
        audit,
        session: Mutex::default(),
        protocol: Mutex::default(),
        endpoint: Mutex::default(),
        incoming: incoming_tx,
        patience,
    });
    let runtime = tokio::runtime::Handle::current();
    let tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
    // The older transport: messages go out only once the stream named
    // its endpoint, so they wait in order for it.
    let (queue_tx, mut queue_rx) = mpsc::unbounded_channel::<Message>();
    if legacy_sse {
        let stream = remote.clone();
        let (named_tx, named_rx) = tokio::sync::oneshot::channel();
        let task = runtime.spawn(async move {
            stream.legacy_stream(named_tx).await;
        });
        tasks.lock().map(|mut t| t.push(task.abort_handle())).ok();
        let sender = remote.clone();
        let task = runtime.spawn(async move {
            if named_rx.await.is_err() {
                return;
            }
            while let Some(message) = queue_rx.recv().await {
                let id = request_id(&message);
                if let Err(Failure::Request(reason) | Failure::Fatal(reason)) =
                    sender.post(message).await
                {
                    sender.fail(id, reason);
                }
            }
        });
        tasks.lock().map(|mut t| t.push(task.abort_handle())).ok();
    }
    let post_tasks = tasks.clone();
    let post_remote = remote.clone();
    let outbox = Outbox::new(Arc::new(move |message: Message| {
        if legacy_sse {
            return queue_tx.send(message).is_ok();
        }
        let remote = post_remote.clone();
        let task = runtime.spawn(async move {
            let id = request_id(&message);
            match remote.post(message).await {
                Ok(()) => {}
                Err(Failure::Request(reason)) => remote.fail(id, reason),
                Err(Failure::Fatal(reason)) => {
                    let _ = remote.incoming.send(Incoming::Closed(reason));
                }
            }
        });
        if let Ok(mut tasks) = post_tasks.lock() {
            tasks.retain(|t| !t.is_finished());
            tasks.push(task.abort_handle());
        }
        true
    }));
    let stop_remote = remote;
    Link {
        outbox,
        incoming,
        stop: Arc::new(move || {
            if let Ok(tasks) = tasks.lock() {
                for task in tasks.iter() {
                    task.abort();
                }
            }
            let _ = stop_remote
                .incoming
                .send(Incoming::Closed("the connection was closed".to_string()));
        }),
        stderr: None,
    }
}

/// The id of a request, to answer it with an error when sending fails.
fn request_id(message: &Message) -> Option<Value> {
    match message {
        Message::Request { id, .. } => Some(id.clone()),
        _ => None,
    }
}

impl Remote {
    fn fail(&self, id: Option<Value>, reason: String) {
        if let Some(id) = id {
            let _ = self.incoming.send(Incoming::Message(Message::error(
                id,
                RpcError::new(-32000, reason),
            )));
        }
    }

    /// Sends `request` through the host's checks and returns the response.
    async fn send(
        &self,
        request: Request<WasiBody>,
        between_bytes: Duration,
    ) -> Result<http::Response<WasiBody>, String> {
        let mut hooks = NetHooks::new(&self.net, &self.secrets);
        hooks.audit = self.audit.clone();
        let options = RequestOptions {
            connect_timeout: Some(Duration::from_secs(30)),
            first_byte_timeout: Some(self.patience),
            between_bytes_timeout: Some(between_bytes),
        };
        let sent = hooks.send_request(request, Some(options), Box::new(async { Ok(()) }));
        match Box::into_pin(sent).await {
            Ok((response, io)) => {
                tokio::spawn(async move {
                    let _ = Box::into_pin(io).await;
                });
                Ok(response)
            }
            Err(error) => {
                let refusals = hooks.refusals();
                Err(match refusals.last() {
                    Some(refusal) => format!("refused by capstan: {}", refusal.text),
                    None => format!("the request failed: {error}"),
                })
            }
        }
    }

    fn build(
        &self,
        method: http::Method,
        url: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Request<WasiBody>, String> {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("`{url}` is not a valid URL: {e}"))?;
        let authority = uri
            .authority()
            .map(|a| a.as_str().to_string())
            .ok_or_else(|| format!("`{url}` names no host"))?;
        let mut builder = Request::builder().method(method).uri(uri);
        builder = builder
            .header("host", authority)
            .header("accept", "application/json, text/event-stream");
        if body.is_some() {
            builder = builder.header("content-type", "application/json");
        }
        for (name, value) in &self.headers {
            let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) else {
                return Err(format!("the header {name} is not valid"));
            };
            builder = builder.header(name, value);
        }
        if let Some(session) = self.session.lock().ok().and_then(|s| s.clone()) {
            builder = builder.header("mcp-session-id", session);
        }
        if let Some(version) = self.protocol.lock().ok().and_then(|s| s.clone()) {
            builder = builder.header("mcp-protocol-version", version);
        }
        let body = Full::new(Bytes::from(body.unwrap_or_default()))
            .map_err(|never| match never {})
            .boxed_unsync();
        builder
            .body(body)
            .map_err(|e| format!("the request to {url} cannot be made: {e}"))
    }

    /// POSTs one message and passes on what comes back.
    async fn post(&self, message: Message) -> Result<(), Failure> {
        let url = self
            .endpoint
            .lock()
            .ok()
            .and_then(|e| e.clone())
            .unwrap_or_else(|| self.url.clone());
        let request = self
            .build(http::Method::POST, &url, Some(message.to_line()))
            .map_err(Failure::Request)?;
        let response = self.send(request, self.patience).await.map_err(|reason| {
            if message.method() == Some("initialize") {
                Failure::Fatal(reason)
            } else {
                Failure::Request(reason)
            }
        })?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED
            || (status == StatusCode::FORBIDDEN
                && response.headers().contains_key("www-authenticate"))
        {
            return Err(Failure::Fatal(oauth_message(&self.url, response.headers())));
        }
        if let Some(session) = response.headers().get("mcp-session-id")
            && let Ok(session) = session.to_str()
            && let Ok(mut slot) = self.session.lock()
        {
            *slot = Some(session.to_string());
        }
        if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            return Ok(());
        }
        if status == StatusCode::NOT_FOUND && self.session.lock().is_ok_and(|s| s.is_some()) {
            return Err(Failure::Fatal(
                "the server ended the session (HTTP 404 for its session id)".to_string(),
            ));
        }
        let is_stream = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut body = response.into_body();
        if !status.is_success() {
            let text = read_body(&mut body, 2048).await.unwrap_or_default();
            let text: String = String::from_utf8_lossy(&text).chars().take(300).collect();
            return Err(Failure::Request(format!(
                "the server answered HTTP {status}: {}",
                crate::escape::line(text.trim())
            )));
        }
        if is_stream {
            self.read_stream(&mut body, false).await;
            return Ok(());
        }
        let bytes = read_body(&mut body, MAX_BODY)
            .await
            .map_err(Failure::Request)?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        self.pass_on(&bytes);
        Ok(())
    }

    /// Passes on the message (or batch) in `bytes`.
    fn pass_on(&self, bytes: &[u8]) {
        let value: Value = match serde_json::from_slice(bytes) {
            Ok(value) => value,
            Err(_) => {
                let _ = self.incoming.send(Incoming::Noise(
                    "the server sent a body that is not JSON-RPC".to_string(),
                ));
                return;
            }
        };
        let values = match value {
            Value::Array(items) => items,
            single => vec![single],
        };
        for value in values {
            if let Some(version) = value
                .pointer("/result/protocolVersion")
                .and_then(Value::as_str)
                && let Ok(mut slot) = self.protocol.lock()
            {
                *slot = Some(version.to_string());
            }
            match Message::from_json(value) {
                Ok(message) => {
                    let _ = self.incoming.send(Incoming::Message(message));
                }
                Err(_) => {
                    let _ = self.incoming.send(Incoming::Noise(
                        "the server sent JSON that is not JSON-RPC".to_string(),
                    ));
                }
            }
        }
    }

    /// Reads server-sent events from `body`, passing on each message; with
    /// `legacy`, the `endpoint` event names where to POST.
    async fn read_stream(&self, body: &mut WasiBody, legacy: bool) -> Option<()> {
        let mut buffer: Vec<u8> = Vec::new();
        let mut event = String::new();
        let mut data = String::new();
        loop {
            let frame = body.frame().await?.ok()?;
            let Ok(chunk) = frame.into_data() else {
                continue;
            };
            buffer.extend_from_slice(&chunk);
            if buffer.len() > MAX_BODY {
                let _ = self.incoming.send(Incoming::Noise(
                    "an event longer than 16 MiB was dropped".to_string(),
                ));
                buffer.clear();
            }
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                let line = line.trim_end_matches(['\n', '\r']);
                if line.is_empty() {
                    if !data.is_empty() {
                        if legacy && event == "endpoint" {
                            let target = self.resolve_endpoint(data.trim());
                            if let Ok(mut slot) = self.endpoint.lock() {
                                *slot = Some(target);
                            }
                        } else {
                            self.pass_on(data.as_bytes());
                        }
                    }
                    event.clear();
                    data.clear();
                } else if let Some(value) = line.strip_prefix("data:") {
                    if !data.is_empty() {
                        data.push('\n');
                    }
                    data.push_str(value.strip_prefix(' ').unwrap_or(value));
                } else if let Some(value) = line.strip_prefix("event:") {
                    event = value.trim().to_string();
                }
            }
        }
    }

    /// The older transport's endpoint, which may be a path on the origin.
    fn resolve_endpoint(&self, target: &str) -> String {
        if target.contains("://") {
            return target.to_string();
        }
        let after_scheme = self.url.find("://").map_or(0, |i| i + 3);
        let origin_end = self.url[after_scheme..]
            .find('/')
            .map_or(self.url.len(), |i| after_scheme + i);
        format!("{}{}", &self.url[..origin_end], target)
    }

    /// The older transport's GET stream: names the endpoint, then carries
    /// every message from the server until it ends.
    async fn legacy_stream(&self, named: tokio::sync::oneshot::Sender<()>) {
        let request = match self.build(http::Method::GET, &self.url, None) {
            Ok(request) => request,
            Err(reason) => {
                let _ = self.incoming.send(Incoming::Closed(reason));
                return;
            }
        };
        let response = match self.send(request, Duration::from_secs(24 * 3600)).await {
            Ok(response) => response,
            Err(reason) => {
                let _ = self.incoming.send(Incoming::Closed(reason));
                return;
            }
        };
        if response.status() == StatusCode::UNAUTHORIZED {
            let message = oauth_message(&self.url, response.headers());
            let _ = self.incoming.send(Incoming::Closed(message));
            return;
        }
        if !response.status().is_success() {
            let _ = self.incoming.send(Incoming::Closed(format!(
                "the server's event stream answered HTTP {}",
                response.status()
            )));
            return;
        }
        let mut body = response.into_body();
        let mut named = Some(named);
        // The endpoint comes first; the rest of the stream is read below.
        let waiter = async {
            loop {
                if self.endpoint.lock().is_ok_and(|e| e.is_some()) {
                    if let Some(named) = named.take() {
                        let _ = named.send(());
                    }
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            std::future::pending::<()>().await;
        };
        tokio::select! {
            _ = self.read_stream(&mut body, true) => {}
            () = waiter => {}
        }
        let _ = self.incoming.send(Incoming::Closed(
            "the server closed its event stream".to_string(),
        ));
    }
}

/// Reads at most `limit` bytes of `body`.
async fn read_body(body: &mut WasiBody, limit: usize) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("reading the answer failed: {e}"))?;
        if let Ok(chunk) = frame.into_data() {
            bytes.extend_from_slice(&chunk);
            if bytes.len() > limit {
                return Err(format!("the answer is over {limit} bytes"));
            }
        }
    }
    Ok(bytes)
}

/// What to say to a server that wants OAuth.
fn oauth_message(url: &str, headers: &http::HeaderMap) -> String {
    let metadata = headers
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.split(',')
                .find_map(|part| part.trim().strip_prefix("resource_metadata="))
                .map(|m| m.trim_matches('"').to_string())
        });
    let mut message = format!("{url} needs OAuth (it answered 401 Unauthorized");
    if let Some(metadata) = metadata {
        message.push_str(&format!(", metadata at {}", crate::escape::line(&metadata)));
    }
    message.push_str(
        "), which capstan does not support; give it a token instead: capstan mcp add NAME URL --header-secret 'Authorization=Bearer $TOKEN'",
    );
    message
}
