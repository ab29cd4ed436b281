//! Sending a plugin's `wasi:http` request: checked against the call's
//! grants, resolved and vetted by the host, connected to the vetted
//! address, with granted secrets added and every decision audited.
//!
//! Nothing here follows a redirect: a 3xx is the plugin's response like any
//! other. A request the grants refuse is recorded as `http_refused`; one
//! that passes them as `http_sent`, with the response status, or with none
//! when it could not be delivered (no such name, connection refused,
//! timeout). Request and response bodies are capped at [`REQUEST_BODY_LIMIT`]
//! and [`RESPONSE_BODY_LIMIT`]; a response body that grows past its cap
//! ends with an error the plugin sees.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wasmtime_wasi::sockets::SocketAddrUse;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::{NetGrant, NetPolicy, Origin, RequestHost, Scheme, host_matches};
use crate::audit::{AuditEvent, AuditScope};
use crate::grants::ResolvedSecret;

/// The largest request body a plugin may send: 16 MiB.
pub const REQUEST_BODY_LIMIT: u64 = 16 << 20;

/// The largest response body a plugin may receive: 16 MiB. Past it the
/// body stream ends with `http-response-body-size`.
pub const RESPONSE_BODY_LIMIT: u64 = 16 << 20;

/// How long resolving and connecting may take unless the request asks for
/// less (or more).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the response head may take, by default.
const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the response body may pause between chunks, by default.
const BETWEEN_BYTES_TIMEOUT: Duration = Duration::from_secs(60);

/// What the future `send_request` returns resolves to.
type Sent = Result<
    (
        Response<WasiBody>,
        Box<dyn Future<Output = Result<(), Error>> + Send>,
    ),
    Error,
>;

/// Decides at the moment of access whether a request may go to an origin
/// the call's grants do not name (the built-in `web` plugin's hosts, which
/// the user allows one by one): `Ok` lets this request's exact origin
/// through — an address named that way counts as named by a grant — and
/// `Err` says why not. Asked before the name is resolved or anything is
/// sent.
#[derive(Clone)]
pub struct NetGate(Arc<GateDecision>);

/// What a [`NetGate`] runs: `Ok` lets the origin through, `Err` says why not.
type GateDecision = dyn Fn(&Origin) -> Result<(), String> + Send + Sync;

impl NetGate {
    /// A gate deciding with `decide`.
    pub fn new(decide: impl Fn(&Origin) -> Result<(), String> + Send + Sync + 'static) -> Self {
        Self(Arc::new(decide))
    }

    /// Whether a request to `origin` may go.
    pub fn decide(&self, origin: &Origin) -> Result<(), String> {
        (self.0)(origin)
    }
}

impl std::fmt::Debug for NetGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NetGate")
    }
}

/// The `wasi:http` hooks of one call: its network grants, its secrets and
/// where its decisions are recorded. Empty grants cost nothing to build.
#[derive(Default)]
pub struct NetHooks {
    policy: NetPolicy,
    /// Asked about an origin the grants do not name, if any.
    gate: Option<NetGate>,
    secrets: Vec<ResolvedSecret>,
    /// Where decisions are recorded; filled in from the call on its first
    /// `wasi:http` use, so calls that never use it pay nothing.
    pub(crate) audit: Option<AuditScope>,
    /// The requests refused during the call, with why, for the call's
    /// error: a guest language whose HTTP client drops the error code
    /// (JavaScript's `fetch`) cannot tell its user why by itself.
    refusals: Refusals,
}

/// The requests a call's grants refused: `GET https://host/path: why`.
#[derive(Debug, Clone, Default)]
struct Refusals(Arc<Mutex<Vec<Refusal>>>);

/// One refused request.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// `scheme://host[:port]/path`, without credentials or query.
    pub url: String,
    /// `GET https://host/path: why`.
    pub text: String,
}

/// What to add to a call's error about the requests its grants refused:
/// those whose host `error` does not already name (a guest SDK that got
/// the error code names the URL itself), as one bracketed note.
pub fn refusal_note(error: &str, refusals: &[Refusal]) -> Option<String> {
    let unsaid: Vec<&str> = refusals
        .iter()
        .filter(|refusal| {
            let authority = refusal
                .url
                .split_once("://")
                .map_or(refusal.url.as_str(), |(_, rest)| rest)
                .split('/')
                .next()
                .unwrap_or_default();
            authority.is_empty() || !error.contains(authority)
        })
        .map(|refusal| refusal.text.as_str())
        .collect();
    if unsaid.is_empty() {
        return None;
    }
    Some(format!(
        "[the sandbox refused {}: {}]",
        if unsaid.len() == 1 {
            "a network request"
        } else {
            "network requests"
        },
        unsaid.join("; ")
    ))
}

impl Refusals {
    fn push(&self, method: &str, url: &str, reason: &str) {
        if let Ok(mut list) = self.0.lock() {
            list.push(Refusal {
                url: url.to_string(),
                text: format!("{method} {url}: {reason}"),
            });
        }
    }
}

impl NetHooks {
    /// Hooks for a call granted `net` and `secrets`.
    pub fn new(net: &[NetGrant], secrets: &[ResolvedSecret]) -> Self {
        Self {
            policy: NetPolicy::new(net.to_vec()),
            gate: None,
            secrets: if net.is_empty() {
                Vec::new()
            } else {
                secrets.to_vec()
            },
            audit: None,
            refusals: Refusals::default(),
        }
    }

    /// The same hooks, asking `gate` about origins the grants do not name.
    pub fn with_gate(mut self, gate: Option<NetGate>) -> Self {
        self.gate = gate;
        self
    }

    /// The requests refused so far in this call, in order.
    pub fn refusals(&self) -> Vec<Refusal> {
        self.refusals
            .0
            .lock()
            .map(|list| list.clone())
            .unwrap_or_default()
    }

    fn record(&self, event: AuditEvent) {
        if let Some(scope) = &self.audit {
            scope.record(event);
        }
    }
}

impl WasiHttpHooks for NetHooks {
    /// Every scheme reaches [`NetHooks::send_request`], so that a request
    /// with a scheme no grant can name is refused there and recorded.
    fn is_supported_scheme(&mut self, _scheme: &http::uri::Scheme) -> bool {
        true
    }

    fn send_request(
        &mut self,
        request: Request<WasiBody>,
        options: Option<RequestOptions>,
        _response_errors: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        let method = request.method().to_string();
        let uri = request.uri();
        let scheme = uri.scheme_str().unwrap_or_default().to_string();
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or_default();
        let url = audit_url(&scheme, authority, uri.path());
        let refuse = |hooks: &Self, reason: String, error: Error| {
            hooks.refusals.push(&method, &url, &reason);
            hooks.record(AuditEvent::HttpRefused {
                method: method.clone(),
                url: url.clone(),
                reason,
            });
            Box::new(async move { Err(error) }) as Box<dyn Future<Output = Sent> + Send>
        };
        let origin = match Origin::parse(&scheme, authority) {
            Ok(origin) => origin,
            Err(reason) => return refuse(self, reason, Error::HttpRequestDenied),
        };
        if let Err(reason) = self.policy.check(&origin) {
            let decided = match &self.gate {
                Some(gate) => gate.decide(&origin),
                None => Err(reason),
            };
            match decided {
                // Granted for the rest of the call, exactly as asked.
                Ok(()) => self.policy.grant(NetGrant::exactly(&origin)),
                Err(reason) => return refuse(self, reason, Error::HttpRequestDenied),
            }
        }
        if let Some(length) = declared_length(request.headers())
            && length > REQUEST_BODY_LIMIT
        {
            return refuse(
                self,
                format!(
                    "the request body ({length} bytes) is over the {REQUEST_BODY_LIMIT}-byte limit"
                ),
                Error::HttpRequestBodySize(Some(REQUEST_BODY_LIMIT)),
            );
        }
        let host = origin.host.to_string();
        let secrets: Vec<ResolvedSecret> = self
            .secrets
            .iter()
            .filter(|s| s.grant.hosts.iter().any(|p| host_matches(p, &host)))
            .cloned()
            .collect();
        let send = Outgoing {
            policy: self.policy.clone(),
            origin,
            secrets,
            audit: self.audit.clone(),
            refusals: self.refusals.clone(),
            method,
            url,
            options: options.unwrap_or_default(),
        };
        Box::new(send.run(request))
    }
}

/// One request on its way, after its origin passed the grants.
struct Outgoing {
    policy: NetPolicy,
    origin: Origin,
    secrets: Vec<ResolvedSecret>,
    audit: Option<AuditScope>,
    refusals: Refusals,
    method: String,
    url: String,
    options: RequestOptions,
}

impl Outgoing {
    fn record(&self, event: AuditEvent) {
        if let Some(scope) = &self.audit {
            scope.record(event);
        }
    }

    fn refuse(&self, reason: String) {
        self.refusals.push(&self.method, &self.url, &reason);
        self.record(AuditEvent::HttpRefused {
            method: self.method.clone(),
            url: self.url.clone(),
            reason,
        });
    }

    async fn run(self, request: Request<WasiBody>) -> Sent {
        let outcome = self.exchange(request).await;
        match &outcome {
            Ok((response, _)) => self.record(AuditEvent::HttpSent {
                method: self.method.clone(),
                url: self.url.clone(),
                status: Some(response.status().as_u16()),
            }),
            Err(Refused::Policy) => {}
            Err(Refused::Failed(_)) => self.record(AuditEvent::HttpSent {
                method: self.method.clone(),
                url: self.url.clone(),
                status: None,
            }),
        }
        outcome.map_err(|refused| match refused {
            Refused::Policy => Error::DestinationIpProhibited,
            Refused::Failed(error) => error,
        })
    }

    async fn exchange(
        &self,
        mut request: Request<WasiBody>,
    ) -> Result<
        (
            Response<WasiBody>,
            Box<dyn Future<Output = Result<(), Error>> + Send>,
        ),
        Refused,
    > {
        let connect_timeout = self.options.connect_timeout.unwrap_or(CONNECT_TIMEOUT);
        let addresses = self.vetted_addresses(connect_timeout).await?;
        let stream = connect(&addresses, connect_timeout).await?;
        let stream: Box<dyn Stream> = match self.origin.scheme {
            Scheme::Http => Box::new(stream),
            Scheme::Https => Box::new(self.tls(stream, connect_timeout).await?),
        };
        // Secrets are added only once the request is about to go out on a
        // connection to a vetted address.
        self.add_secrets(request.headers_mut())?;
        let handshake =
            hyper::client::conn::http1::handshake::<_, CappedRequestBody>(TokioIo::new(stream));
        let (mut sender, conn) = tokio::time::timeout(connect_timeout, handshake)
            .await
            .map_err(|_| Refused::Failed(Error::ConnectionTimeout))?
            .map_err(|e| Refused::Failed(Error::from(e)))?;

        // The request goes to the origin itself, so its target is the path.
        let target = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        *request.uri_mut() = target
            .parse()
            .map_err(|_| Refused::Failed(Error::HttpRequestUriInvalid))?;
        let request = request.map(|body| CappedRequestBody { body, sent: 0 });

        let first_byte = self
            .options
            .first_byte_timeout
            .unwrap_or(FIRST_BYTE_TIMEOUT);
        let mut conn = Box::pin(conn);
        let mut conn_ended = false;
        let send = sender.send_request(request);
        let deadline = tokio::time::sleep(first_byte);
        tokio::pin!(send, deadline);
        let response = loop {
            tokio::select! {
                response = &mut send => break response.map_err(|e| Refused::Failed(Error::from(e)))?,
                ended = &mut conn, if !conn_ended => {
                    conn_ended = true;
                    ended.map_err(|e| Refused::Failed(Error::from(e)))?;
                }
                () = &mut deadline => return Err(Refused::Failed(Error::ConnectionReadTimeout)),
            }
        };
        let pause = self
            .options
            .between_bytes_timeout
            .unwrap_or(BETWEEN_BYTES_TIMEOUT)
            .max(Duration::from_millis(1));
        let response = response.map(|incoming| {
            CappedResponseBody {
                incoming,
                received: 0,
                pause,
                timer: Box::pin(tokio::time::sleep(pause)),
            }
            .boxed_unsync()
        });
        let io: Box<dyn Future<Output = Result<(), Error>> + Send> = Box::new(async move {
            if conn_ended {
                return Ok(());
            }
            conn.await.map_err(Error::from)
        });
        Ok((response, io))
    }

    /// Resolves the host (unless it is an address) and checks every
    /// address it resolves to.
    async fn vetted_addresses(&self, timeout: Duration) -> Result<Vec<SocketAddr>, Refused> {
        let port = self.origin.port;
        let addresses: Vec<SocketAddr> = match &self.origin.host {
            RequestHost::Ip(ip) => vec![SocketAddr::new(*ip, port)],
            RequestHost::Name(name) => {
                let lookup = tokio::net::lookup_host((name.as_str(), port));
                match tokio::time::timeout(timeout, lookup).await {
                    Err(_) => return Err(Refused::Failed(Error::DnsTimeout)),
                    Ok(Err(e)) => {
                        return Err(Refused::Failed(Error::DnsError {
                            rcode: Some(e.to_string()),
                            info_code: None,
                        }));
                    }
                    Ok(Ok(found)) => found.collect(),
                }
            }
        };
        if addresses.is_empty() {
            return Err(Refused::Failed(Error::DestinationNotFound));
        }
        for address in &addresses {
            if let Err(reason) = self.policy.check_address(&self.origin, address.ip()) {
                self.refuse(reason);
                return Err(Refused::Policy);
            }
        }
        Ok(addresses
            .into_iter()
            .map(|a| SocketAddr::new(super::canonical_ip(a.ip()), a.port()))
            .collect())
    }

    /// Sets each granted secret's header, replacing whatever the plugin set.
    fn add_secrets(&self, headers: &mut http::HeaderMap) -> Result<(), Refused> {
        for secret in &self.secrets {
            let name = HeaderName::from_bytes(secret.grant.header.as_bytes());
            let value = HeaderValue::from_str(&secret.header_value());
            let (Ok(name), Ok(mut value)) = (name, value) else {
                self.refuse(format!(
                    "the secret {} cannot be sent as header `{}`: the header name or value is not valid",
                    secret.grant.name, secret.grant.header
                ));
                return Err(Refused::Policy);
            };
            value.set_sensitive(true);
            headers.remove(&name);
            headers.insert(name, value);
            self.record(AuditEvent::SecretInjected {
                name: secret.grant.name.clone(),
                host: self.origin.host.to_string(),
            });
        }
        Ok(())
    }

    async fn tls(
        &self,
        stream: TcpStream,
        timeout: Duration,
    ) -> Result<tokio_rustls::client::TlsStream<TcpStream>, Refused> {
        let config = tls_config().map_err(Refused::Failed)?;
        let server_name = match &self.origin.host {
            RequestHost::Name(name) => rustls::pki_types::ServerName::try_from(name.clone())
                .map_err(|_| {
                    Refused::Failed(Error::DnsError {
                        rcode: Some(format!("`{name}` is not a valid TLS server name")),
                        info_code: None,
                    })
                })?,
            RequestHost::Ip(ip) => rustls::pki_types::ServerName::IpAddress((*ip).into()),
        };
        let connect = tokio_rustls::TlsConnector::from(config).connect(server_name, stream);
        tokio::time::timeout(timeout, connect)
            .await
            .map_err(|_| Refused::Failed(Error::ConnectionTimeout))?
            .map_err(|e| Refused::Failed(Error::Tls(e)))
    }
}

/// Why a request did not get a response.
enum Refused {
    /// The sandbox refused it (already recorded).
    Policy,
    /// Sending failed.
    Failed(Error),
}

/// A connection, plain or TLS.
trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// Connects to the first of `addresses` that answers.
async fn connect(addresses: &[SocketAddr], timeout: Duration) -> Result<TcpStream, Refused> {
    let mut last = Error::ConnectionRefused;
    for address in addresses {
        match tokio::time::timeout(timeout, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = Error::Connect(e),
            Err(_) => last = Error::ConnectionTimeout,
        }
    }
    Err(Refused::Failed(last))
}

/// The TLS client settings: the webpki roots, HTTP/1.1 only. Built once.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, Error> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    });
    config
        .clone()
        .map_err(|e| Error::InternalError(Some(format!("TLS is not available: {e}"))))
}

/// The request's `Content-Length`, when it declares one.
fn declared_length(headers: &http::HeaderMap) -> Option<u64> {
    headers
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// The URL as recorded: scheme, authority and path, never the query
/// (which may carry keys) nor anything after it.
fn audit_url(scheme: &str, authority: &str, path: &str) -> String {
    let authority = authority.rsplit('@').next().unwrap_or_default();
    format!("{scheme}://{authority}{path}")
}

/// A request body that fails once it passes [`REQUEST_BODY_LIMIT`].
struct CappedRequestBody {
    body: WasiBody,
    sent: u64,
}

impl Body for CappedRequestBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let frame = std::task::ready!(Pin::new(&mut self.body).poll_frame(cx));
        if let Some(Ok(frame)) = &frame
            && let Some(data) = frame.data_ref()
        {
            self.sent = self.sent.saturating_add(data.len() as u64);
            if self.sent > REQUEST_BODY_LIMIT {
                return Poll::Ready(Some(Err(Error::HttpRequestBodySize(Some(
                    REQUEST_BODY_LIMIT,
                )))));
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A response body that fails once it passes [`RESPONSE_BODY_LIMIT`] or
/// pauses longer than the between-bytes timeout.
struct CappedResponseBody {
    incoming: hyper::body::Incoming,
    received: u64,
    pause: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl Body for CappedResponseBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Error::from(e)))),
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.received = self.received.saturating_add(data.len() as u64);
                    if self.received > RESPONSE_BODY_LIMIT {
                        return Poll::Ready(Some(Err(Error::HttpResponseBodySize(Some(
                            RESPONSE_BODY_LIMIT,
                        )))));
                    }
                }
                let next = tokio::time::Instant::now() + self.pause;
                self.timer.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => match self.timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Error::ConnectionReadTimeout))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}

/// The `wasi:sockets` address check: every address a socket would connect,
/// listen or send to is refused, and the attempt recorded in `audit`.
///
/// The one use let through is binding to the unspecified address on port 0,
/// which a connect or send checks first before naming its real target: a
/// socket bound that way can still neither connect, listen, send nor
/// receive, and the refusal records the address the plugin was after.
pub fn socket_refusal(
    audit: AuditScope,
) -> impl Fn(SocketAddr, SocketAddrUse) -> Pin<Box<dyn Future<Output = bool> + Send + Sync>>
+ Send
+ Sync
+ 'static {
    move |address, purpose| {
        let implicit_bind = matches!(purpose, SocketAddrUse::TcpBind | SocketAddrUse::UdpBind)
            && address.ip().is_unspecified()
            && address.port() == 0;
        if !implicit_bind {
            audit.record(AuditEvent::SocketRefused {
                address: address.to_string(),
            });
        }
        Box::pin(async move { implicit_bind })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::audit::AuditLog;

    fn scope(dir: &tempfile::TempDir) -> AuditScope {
        AuditScope::new(
            AuditLog::open(&dir.path().join("audit.jsonl")).unwrap(),
            "p",
            "c",
            None,
        )
    }

    fn records(dir: &tempfile::TempDir) -> Vec<serde_json::Value> {
        std::fs::read_to_string(dir.path().join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn request(url: &str) -> Request<WasiBody> {
        let body = http_body_util::Empty::<Bytes>::new()
            .map_err(|never| match never {})
            .boxed_unsync();
        Request::get(url).body(body).unwrap()
    }

    #[tokio::test]
    async fn refused_requests_fail_before_any_io_and_are_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let grants = [NetGrant::parse("https://api.example.com").unwrap()];
        let mut hooks = NetHooks::new(&grants, &[]);
        hooks.audit = Some(scope(&dir));
        for url in [
            "https://evil.example/steal?key=1",
            "http://api.example.com/",
            "https://api.example.com:8443/",
            "https://0x7f000001/",
        ] {
            let sent =
                Pin::from(hooks.send_request(request(url), None, Box::new(async { Ok(()) })));
            assert!(matches!(sent.await, Err(Error::HttpRequestDenied)), "{url}");
        }
        let records = records(&dir);
        assert_eq!(records.len(), 4);
        assert_eq!(records[0]["kind"], "http_refused");
        assert_eq!(records[0]["url"], "https://evil.example/steal");
        assert!(
            records[3]["reason"]
                .as_str()
                .unwrap()
                .contains("https://127.0.0.1 is not granted")
        );
    }

    #[tokio::test]
    async fn sockets_may_only_check_the_implicit_bind() {
        let dir = tempfile::tempdir().unwrap();
        let check = socket_refusal(scope(&dir));
        let wildcard: SocketAddr = "0.0.0.0:0".parse().unwrap();
        let target: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        assert!(check(wildcard, SocketAddrUse::TcpBind).await);
        assert!(check(wildcard, SocketAddrUse::UdpBind).await);
        assert!(!check("0.0.0.0:8080".parse().unwrap(), SocketAddrUse::TcpBind).await);
        assert!(!check(wildcard, SocketAddrUse::TcpListen).await);
        assert!(!check(target, SocketAddrUse::TcpConnect).await);
        assert!(!check(target, SocketAddrUse::UdpSend).await);
        let addresses: Vec<String> = records(&dir)
            .iter()
            .map(|r| r["address"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            addresses,
            [
                "0.0.0.0:8080",
                "0.0.0.0:0",
                "127.0.0.1:5000",
                "127.0.0.1:5000"
            ]
        );
    }

    #[test]
    fn refusal_notes_name_what_the_error_does_not() {
        let refusals = Refusals::default();
        refusals.push(
            "GET",
            "https://api.example.com/v1",
            "https://api.example.com is not granted to this plugin",
        );
        refusals.push(
            "POST",
            "http://10.0.0.1/x",
            "the address 10.0.0.1 is private",
        );
        let list = refusals.0.lock().unwrap().clone();
        let note = refusal_note(
            "TypeError: NetworkError when attempting to fetch resource.",
            &list,
        )
        .unwrap();
        assert_eq!(
            note,
            "[the sandbox refused network requests: GET https://api.example.com/v1: https://api.example.com is not granted to this plugin; POST http://10.0.0.1/x: the address 10.0.0.1 is private]"
        );
        // An SDK that already named the URL is not repeated.
        let said =
            "request to https://api.example.com/v1 refused: its host is not granted to this plugin";
        let note = refusal_note(said, &list).unwrap();
        assert!(
            note.starts_with("[the sandbox refused a network request: POST"),
            "{note}"
        );
        assert_eq!(refusal_note(said, &list[..1]), None);
        assert_eq!(refusal_note("anything", &[]), None);
    }

    #[test]
    fn audit_urls_drop_queries_and_credentials() {
        assert_eq!(
            audit_url("https", "user:pw@api.example.com", "/v1/items"),
            "https://api.example.com/v1/items"
        );
        assert_eq!(
            audit_url("http", "127.0.0.1:8080", "/"),
            "http://127.0.0.1:8080/"
        );
    }
}
