//! The Streamable HTTP transport of the server: one endpoint, `/mcp`.
//!
//! - `POST` carries one JSON-RPC message. A notification or a response is
//!   accepted with 202. A request is answered with JSON, or, for
//!   `tools/call` when the client accepts it, with an event stream that
//!   carries the call's progress notifications (and the server's
//!   `roots/list` request) before the response, then ends.
//! - `initialize` opens a session whose id comes back in `Mcp-Session-Id`;
//!   later requests of the session must carry it (400 without, 404 for an
//!   unknown one). Requests of the stateless revision (`server/discover`,
//!   a revision in `_meta` or in `MCP-Protocol-Version`) need no session,
//!   and closing such a call's stream cancels the call.
//! - `GET` opens the session's stream for server notifications
//!   (`notifications/tools/list_changed`); `DELETE` ends the session.
//!
//! Every request is checked first: a browser page on another origin is
//! refused (`Origin`, 403), and so is a `Host` that is not a loopback name
//! when the server is bound to loopback (DNS rebinding); with a bearer
//! token, a request without it gets 401. A non-loopback address is served
//! only with a token (decided by the command line).

use std::cell::RefCell;
use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body::Frame;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::jsonrpc::{Message, RpcError, code};
use super::outbox::Outbox;
use super::protocol;
use super::server::{Server, Session};

/// The largest request body read.
const MAX_BODY: usize = 4 << 20;

/// The session header.
const SESSION_HEADER: &str = "mcp-session-id";
/// The revision header.
const VERSION_HEADER: &str = "mcp-protocol-version";

/// What every request is checked against.
pub struct Access {
    /// The bearer token requests must carry, if any.
    pub token: Option<String>,
    /// Whether the server is bound to a loopback address.
    pub loopback: bool,
}

struct State {
    server: Rc<Server>,
    access: Access,
    sessions: RefCell<HashMap<String, Rc<Session>>>,
}

/// Serves `server` on `listener` until the process ends.
pub async fn serve(server: Rc<Server>, listener: TcpListener, access: Access) {
    let state = Rc::new(State {
        server,
        access,
        sessions: RefCell::new(HashMap::new()),
    });
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        tokio::task::spawn_local(async move {
            let service = hyper::service::service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(handle(&state, request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(state: &Rc<State>, request: Request<Incoming>) -> Response<Body> {
    if request.uri().path() != "/mcp" {
        return plain(StatusCode::NOT_FOUND, "not found: the MCP endpoint is /mcp");
    }
    if let Err(refusal) = check_access(&state.access, request.headers()) {
        return refusal;
    }
    match *request.method() {
        Method::POST => post(state, request).await,
        Method::GET => get(state, request.headers()),
        Method::DELETE => delete(state, request.headers()),
        _ => {
            let mut response = plain(
                StatusCode::METHOD_NOT_ALLOWED,
                "use POST, GET or DELETE on /mcp",
            );
            response.headers_mut().insert(
                header::ALLOW,
                header::HeaderValue::from_static("GET, POST, DELETE"),
            );
            response
        }
    }
}

/// Refuses other origins, rebinding `Host` names and missing tokens.
#[allow(clippy::result_large_err)]
fn check_access(access: &Access, headers: &HeaderMap) -> Result<(), Response<Body>> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(host_name);
    if access.loopback && !host.as_deref().is_some_and(is_loopback_name) {
        return Err(plain(
            StatusCode::FORBIDDEN,
            "forbidden: this server answers only requests addressed to localhost",
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let allowed = origin.to_str().ok().and_then(origin_host).is_some_and(|o| {
            is_loopback_name(&o) || host.as_ref().is_some_and(|h| h.eq_ignore_ascii_case(&o))
        });
        if !allowed {
            return Err(plain(
                StatusCode::FORBIDDEN,
                "forbidden: requests from this origin are not accepted",
            ));
        }
    }
    if let Some(token) = &access.token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        if !same_secret(given.as_bytes(), token.as_bytes()) {
            let mut response = plain(
                StatusCode::UNAUTHORIZED,
                "unauthorized: send the server's token as `Authorization: Bearer TOKEN`",
            );
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            return Err(response);
        }
    }
    Ok(())
}

/// Compares two secrets in time that does not depend on where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The host name of a `Host` header value, without the port, lowercased.
fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']')
            .next()
            .map(|h| format!("[{h}]"))
            .unwrap_or_default()
    } else {
        host.rsplit_once(':')
            .map_or(host, |(name, _)| name)
            .to_string()
    };
    name.to_ascii_lowercase()
}

/// The host name of an `Origin` header value.
fn origin_host(origin: &str) -> Option<String> {
    let (_, rest) = origin.split_once("://")?;
    Some(host_name(rest.split('/').next()?))
}

fn is_loopback_name(name: &str) -> bool {
    matches!(name, "localhost" | "[::1]")
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

async fn post(state: &Rc<State>, request: Request<Incoming>) -> Response<Body> {
    let headers = request.headers().clone();
    let header_version = headers
        .get(VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(version) = &header_version
        && !protocol::is_supported(version)
    {
        return rpc_error_response(StatusCode::BAD_REQUEST, protocol::unsupported(version));
    }
    let body = match http_body_util::Limited::new(request.into_body(), MAX_BODY)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(e) => {
            return rpc_error_response(
                StatusCode::BAD_REQUEST,
                RpcError::new(
                    code::INVALID_REQUEST,
                    format!("cannot read the request body (at most {MAX_BODY} bytes): {e}"),
                ),
            );
        }
    };
    let message = match Message::parse(&body) {
        Ok(message) => message,
        Err(unreadable) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                &Message::error(unreadable.id, unreadable.error),
            );
        }
    };
    let stateless = matches!(message.method(), Some("server/discover"))
        || protocol::requested_version(message.params()).is_some()
        || header_version.as_deref() == Some(protocol::V2026_07_28);
    if let Err(mismatch) = check_routing_headers(&message, &headers) {
        return json_response(StatusCode::BAD_REQUEST, &mismatch);
    }
    let initialize = matches!(&message, Message::Request { method, .. } if method == "initialize");
    let mut new_session_id = None;
    let session = if stateless && !initialize {
        state.server.open_session(None)
    } else if initialize {
        let id = new_session_id_text();
        let session = state.server.open_session(None);
        state
            .sessions
            .borrow_mut()
            .insert(id.clone(), session.clone());
        new_session_id = Some(id);
        session
    } else {
        match session_of(state, &headers) {
            Ok(session) => session,
            Err(response) => return response,
        }
    };
    let Message::Request { id, method, .. } = &message else {
        let reply = Outbox::closed();
        state
            .server
            .handle(&session, message, &reply, header_version.as_deref());
        return plain(StatusCode::ACCEPTED, "");
    };
    let (id, streamed) = (
        id.clone(),
        method == "tools/call" && accepts_events(&headers),
    );
    let (tx, rx) = mpsc::unbounded_channel::<Message>();
    let reply = Outbox::new(Arc::new(move |message: Message| {
        // Without an event stream only the response can be delivered.
        if !streamed && !matches!(message, Message::Response { .. }) {
            return false;
        }
        tx.send(message).is_ok()
    }));
    state
        .server
        .handle(&session, message, &reply, header_version.as_deref());
    drop(reply);
    let mut response = if streamed {
        let body = Body::Events(EventStream {
            rx,
            until: Some(id),
            done: false,
            cancel_on_drop: (stateless && !initialize).then_some(session),
        });
        let mut response = Response::new(body);
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("text/event-stream"),
        );
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-cache"),
        );
        response
    } else {
        let mut rx = rx;
        let mut answer = None;
        while let Some(message) = rx.recv().await {
            if matches!(&message, Message::Response { id: answered, .. } if *answered == id) {
                answer = Some(message);
                break;
            }
        }
        match answer {
            Some(message) => json_response(StatusCode::OK, &message),
            None => rpc_error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                RpcError::new(code::INTERNAL_ERROR, "the request ended without an answer"),
            ),
        }
    };
    if let Some(id) = new_session_id
        && let Ok(value) = header::HeaderValue::from_str(&id)
    {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

/// A stateless request must say in its headers what its body says: the
/// revision (`MCP-Protocol-Version`), the method (`Mcp-Method`) and, for a
/// call, the tool (`Mcp-Name`), so that a proxy routing on the headers
/// routes what the server runs.
#[allow(clippy::result_large_err)]
fn check_routing_headers(message: &Message, headers: &HeaderMap) -> Result<(), Message> {
    let Message::Request { id, method, params } = message else {
        return Ok(());
    };
    let Some(version) = protocol::requested_version(params.as_ref()) else {
        return Ok(());
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let mismatch = |what: &str| {
        Err(Message::error(
            id.clone(),
            RpcError::new(
                protocol::code::HEADER_MISMATCH,
                format!("the {what} header does not match the request body"),
            ),
        ))
    };
    if header(VERSION_HEADER) != Some(version) {
        return mismatch("MCP-Protocol-Version");
    }
    if header("mcp-method") != Some(method.as_str()) {
        return mismatch("Mcp-Method");
    }
    if method == "tools/call"
        && let Some(name) = params
            .as_ref()
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
        && header("mcp-name") != Some(name)
    {
        return mismatch("Mcp-Name");
    }
    Ok(())
}

fn get(state: &Rc<State>, headers: &HeaderMap) -> Response<Body> {
    let session = match session_of(state, headers) {
        Ok(session) => session,
        Err(response) => return response,
    };
    if !accepts_events(headers) {
        return plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "GET /mcp opens an event stream: send `Accept: text/event-stream`",
        );
    }
    let (tx, rx) = mpsc::unbounded_channel::<Message>();
    session.set_notify(Some(Outbox::new(Arc::new(move |message| {
        tx.send(message).is_ok()
    }))));
    let mut response = Response::new(Body::Events(EventStream {
        rx,
        until: None,
        done: false,
        cancel_on_drop: None,
    }));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    response
}

fn delete(state: &Rc<State>, headers: &HeaderMap) -> Response<Body> {
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return plain(StatusCode::BAD_REQUEST, "missing Mcp-Session-Id");
    };
    match state.sessions.borrow_mut().remove(id) {
        Some(session) => {
            session.cancel_all("the session ended");
            session.set_notify(None);
            plain(StatusCode::OK, "")
        }
        None => plain(StatusCode::NOT_FOUND, "no such session"),
    }
}

#[allow(clippy::result_large_err)]
fn session_of(state: &State, headers: &HeaderMap) -> Result<Rc<Session>, Response<Body>> {
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return Err(rpc_error_response(
            StatusCode::BAD_REQUEST,
            RpcError::new(
                code::INVALID_REQUEST,
                "missing Mcp-Session-Id: send `initialize` first and pass the id it returns",
            ),
        ));
    };
    state.sessions.borrow().get(id).cloned().ok_or_else(|| {
        rpc_error_response(
            StatusCode::NOT_FOUND,
            RpcError::new(
                code::INVALID_REQUEST,
                "unknown Mcp-Session-Id: the session ended; send `initialize` again",
            ),
        )
    })
}

fn accepts_events(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"))
}

/// A session id: 128 random bits in hex.
fn new_session_id_text() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // The system's random source failing is not expected; fall back
        // to the time and a counter, still unique within this server.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        bytes = nanos.to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Body::Full(Some(Bytes::from_static(text.as_bytes()))));
    *response.status_mut() = status;
    response
}

fn json_response(status: StatusCode, message: &Message) -> Response<Body> {
    let bytes = serde_json::to_vec(&message.to_json()).unwrap_or_default();
    let mut response = Response::new(Body::Full(Some(Bytes::from(bytes))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

fn rpc_error_response(status: StatusCode, error: RpcError) -> Response<Body> {
    json_response(status, &Message::error(Value::Null, error))
}

/// A response body: all at once, or server-sent events.
pub enum Body {
    /// The whole body.
    Full(Option<Bytes>),
    /// Messages as server-sent events.
    Events(EventStream),
}

/// Messages as `event: message` server-sent events, until the response
/// to `until` has gone (or for ever, for a session's own stream).
pub struct EventStream {
    rx: mpsc::UnboundedReceiver<Message>,
    until: Option<Value>,
    done: bool,
    /// A stateless call's session, whose call stops if the client closes
    /// the stream before the response.
    cancel_on_drop: Option<Rc<Session>>,
}

impl Drop for EventStream {
    fn drop(&mut self) {
        if !self.done
            && let Some(session) = &self.cancel_on_drop
        {
            session.cancel_all("the client closed the call's stream");
        }
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Body::Events(stream) => {
                if stream.done {
                    return Poll::Ready(None);
                }
                match stream.rx.poll_recv(cx) {
                    Poll::Ready(Some(message)) => {
                        if let (Some(until), Message::Response { id, .. }) =
                            (&stream.until, &message)
                            && id == until
                        {
                            stream.done = true;
                        }
                        let mut event = b"event: message\ndata: ".to_vec();
                        event.extend(serde_json::to_vec(&message.to_json()).unwrap_or_default());
                        event.extend(b"\n\n");
                        Poll::Ready(Some(Ok(Frame::data(Bytes::from(event)))))
                    }
                    Poll::Ready(None) => {
                        stream.done = true;
                        Poll::Ready(None)
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn origins_hosts_and_tokens_are_checked() {
        let local = Access {
            token: None,
            loopback: true,
        };
        assert!(check_access(&local, &headers(&[("host", "127.0.0.1:7331")])).is_ok());
        assert!(check_access(&local, &headers(&[("host", "localhost")])).is_ok());
        assert!(check_access(&local, &headers(&[("host", "[::1]:80")])).is_ok());
        let lookalike = headers(&[("host", "127.0.0.1.evil.example")]);
        assert!(check_access(&local, &lookalike).is_err());
        // DNS rebinding: a page at evil.example resolving to 127.0.0.1.
        let rebound = headers(&[("host", "evil.example:7331")]);
        assert_eq!(
            check_access(&local, &rebound).unwrap_err().status(),
            StatusCode::FORBIDDEN
        );
        let cross = headers(&[
            ("host", "127.0.0.1:7331"),
            ("origin", "https://evil.example"),
        ]);
        assert_eq!(
            check_access(&local, &cross).unwrap_err().status(),
            StatusCode::FORBIDDEN
        );
        let same = headers(&[
            ("host", "127.0.0.1:7331"),
            ("origin", "http://localhost:3000"),
        ]);
        assert!(check_access(&local, &same).is_ok());

        let remote = Access {
            token: Some("s3cret".into()),
            loopback: false,
        };
        let no_token = headers(&[("host", "10.0.0.5:7331")]);
        assert_eq!(
            check_access(&remote, &no_token).unwrap_err().status(),
            StatusCode::UNAUTHORIZED
        );
        let wrong = headers(&[
            ("host", "10.0.0.5:7331"),
            ("authorization", "Bearer s3creT"),
        ]);
        assert!(check_access(&remote, &wrong).is_err());
        let right = headers(&[
            ("host", "10.0.0.5:7331"),
            ("authorization", "Bearer s3cret"),
        ]);
        assert!(check_access(&remote, &right).is_ok());
        let same_origin = headers(&[
            ("host", "10.0.0.5:7331"),
            ("origin", "https://10.0.0.5:7331"),
            ("authorization", "Bearer s3cret"),
        ]);
        assert!(check_access(&remote, &same_origin).is_ok());
    }

    #[test]
    fn session_ids_are_random_hex() {
        let (a, b) = (new_session_id_text(), new_session_id_text());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
