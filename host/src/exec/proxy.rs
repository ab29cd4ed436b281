//! The only way out of a command's network namespace: an HTTP proxy run by
//! the host, listening inside the namespace on 127.0.0.1:3128
//! (`HTTP_PROXY`/`HTTPS_PROXY`), that lets through only what
//! [`grants::net`](crate::grants::net) allows.
//!
//! `CONNECT host:port` opens a tunnel (for HTTPS; the proxy never sees
//! inside it); a request with an absolute `http://` URL is forwarded. Either
//! way the origin must match a grant, the host resolves the name itself, and
//! every address must pass [`NetPolicy::check_address`] (no loopback,
//! private, link-local or metadata address unless a grant names it). A
//! refusal is answered `403` with the reason, recorded in the audit log and
//! kept for the command's outcome.
//!
//! The proxy runs outside the sandbox, where a command's process limit does
//! not reach, so it bounds itself: every proxy of the process is served
//! asynchronously by one small runtime ([`RUNTIME_WORKERS`] thread, at most
//! [`RUNTIME_RESOLVERS`] more for name lookups) however many connections
//! are open; a command may hold at most [`MAX_PER_COMMAND`] connections and
//! the whole session [`MAX_PER_SESSION`] (one past the cap is answered
//! `503` and closed); and a request head must arrive whole within
//! [`HEAD_DEADLINE`] (one trickled a byte at a time is answered `408` and
//! closed at that deadline).

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::ProxyRefusal;
use crate::audit::{AuditEvent, AuditScope};
use crate::grants::net::{NetGrant, NetPolicy, Origin, RequestHost, canonical_ip};

/// The largest request head the proxy reads.
const MAX_HEAD: usize = 16 * 1024;

/// How long the proxy waits for a name lookup, or for a connection out.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a connection has to send its whole request head.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(30);

/// The variable that shortens (or lengthens) [`HEAD_DEADLINE`], in
/// milliseconds: for tests, and for a user who wants it different.
pub const HEAD_DEADLINE_VAR: &str = "CAPSTAN_EXEC_PROXY_HEAD_TIMEOUT_MS";

/// The most connections one command may have open through the proxy.
pub const MAX_PER_COMMAND: usize = 128;

/// The most connections all the commands of a capstan process (a session)
/// may have open through their proxies together.
pub const MAX_PER_SESSION: usize = 512;

/// The runtime's worker threads: every proxy of the process shares them.
pub const RUNTIME_WORKERS: usize = 1;

/// The most threads the runtime starts for name lookups (the system's
/// resolver blocks).
pub const RUNTIME_RESOLVERS: usize = 2;

/// What the connections to a proxy are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyLimits {
    /// Connections one command may have open.
    pub per_command: usize,
    /// Connections all commands of the process may have open together.
    pub per_session: usize,
    /// How long a connection has to send its request head.
    pub head_deadline: Duration,
}

impl ProxyLimits {
    /// The limits in force: the constants above, with the head deadline
    /// taken from [`HEAD_DEADLINE_VAR`] when that is set to a number.
    pub fn current() -> Self {
        let head_deadline = std::env::var(HEAD_DEADLINE_VAR)
            .ok()
            .and_then(|ms| ms.trim().parse::<u64>().ok())
            .filter(|&ms| ms > 0)
            .map_or(HEAD_DEADLINE, Duration::from_millis);
        Self {
            per_command: MAX_PER_COMMAND,
            per_session: MAX_PER_SESSION,
            head_deadline,
        }
    }
}

/// The connections open through every proxy of this process.
static SESSION_OPEN: AtomicUsize = AtomicUsize::new(0);

/// The runtime serving every proxy of the process, made on first use.
static RUNTIME: Mutex<Option<&'static tokio::runtime::Runtime>> = Mutex::new(None);

/// The proxies' runtime: [`RUNTIME_WORKERS`] worker thread and at most
/// [`RUNTIME_RESOLVERS`] blocking threads, made once per process.
fn runtime() -> io::Result<&'static tokio::runtime::Runtime> {
    let mut slot = RUNTIME
        .lock()
        .map_err(|_| io::Error::other("the proxy's runtime lock is poisoned"))?;
    if let Some(runtime) = *slot {
        return Ok(runtime);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(RUNTIME_WORKERS)
        .max_blocking_threads(RUNTIME_RESOLVERS)
        .thread_name("capstan-exec-proxy")
        .enable_io()
        .enable_time()
        .build()?;
    let runtime: &'static tokio::runtime::Runtime = Box::leak(Box::new(runtime));
    *slot = Some(runtime);
    Ok(runtime)
}

/// A running proxy; stopping it ends every tunnel.
pub struct Proxy {
    /// Raised to stop accepting and end every connection.
    stop: watch::Sender<bool>,
    /// Disconnects when the accepting task has ended.
    accepting: Option<std::sync::mpsc::Receiver<()>>,
    shared: Arc<Shared>,
}

/// What every connection of one proxy shares.
struct Shared {
    policy: NetPolicy,
    audit: Option<AuditScope>,
    limits: ProxyLimits,
    refusals: Mutex<Vec<ProxyRefusal>>,
    /// Connections of this command open now.
    open: AtomicUsize,
    /// Connections refused for a cap, and cut at the head deadline.
    over_cap: AtomicUsize,
    too_slow: AtomicUsize,
}

impl Proxy {
    /// Serves `listener` (inside the command's namespace) under `grants`.
    pub fn start(
        listener: std::net::TcpListener,
        grants: Vec<NetGrant>,
        audit: Option<AuditScope>,
    ) -> io::Result<Self> {
        Self::start_with(listener, grants, audit, ProxyLimits::current())
    }

    /// [`Proxy::start`] with `limits`.
    pub fn start_with(
        listener: std::net::TcpListener,
        grants: Vec<NetGrant>,
        audit: Option<AuditScope>,
        limits: ProxyLimits,
    ) -> io::Result<Self> {
        let runtime = runtime()?;
        listener.set_nonblocking(true)?;
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(listener)?
        };
        let shared = Arc::new(Shared {
            policy: NetPolicy::new(grants),
            audit,
            limits,
            refusals: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            over_cap: AtomicUsize::new(0),
            too_slow: AtomicUsize::new(0),
        });
        let (stop, stopped) = watch::channel(false);
        let (ended, accepting) = std::sync::mpsc::channel();
        runtime.spawn(accept_loop(listener, stopped, shared.clone(), ended));
        Ok(Self {
            stop,
            accepting: Some(accepting),
            shared,
        })
    }

    /// Stops accepting, closes every connection, and returns the refusals.
    pub fn stop(mut self) -> Vec<ProxyRefusal> {
        self.halt();
        self.shared.summarise();
        self.shared
            .refusals
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    fn halt(&mut self) {
        self.stop.send_replace(true);
        if let Some(accepting) = self.accepting.take() {
            // The accepting task ends at once when told; the bound only
            // guards against a runtime that has stopped running.
            let _ = accepting.recv_timeout(Duration::from_secs(2));
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Accepts connections until the proxy is stopped, each served by a task
/// of its own that ends with the proxy. `_ended` is dropped on return.
async fn accept_loop(
    listener: TcpListener,
    mut stopped: watch::Receiver<bool>,
    shared: Arc<Shared>,
    _ended: std::sync::mpsc::Sender<()>,
) {
    loop {
        let accepted = tokio::select! {
            _ = stopped.wait_for(|stop| *stop) => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => match Slot::take(&shared) {
                Ok(slot) => {
                    let mut stopped = stopped.clone();
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        let _slot = slot;
                        tokio::select! {
                            _ = stopped.wait_for(|stop| *stop) => {}
                            () = serve(stream, &shared) => {}
                        }
                    });
                }
                Err(cap) => refuse_over_cap(stream, &shared, cap),
            },
            // Out of descriptors, or a connection gone before it was
            // accepted: pause rather than spin, then go on.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Which cap a connection went past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cap {
    Command,
    Session,
}

/// One open connection, counted against both caps until dropped.
struct Slot {
    shared: Arc<Shared>,
}

impl Slot {
    fn take(shared: &Arc<Shared>) -> Result<Self, Cap> {
        take_slot(&shared.open, &SESSION_OPEN, &shared.limits)?;
        Ok(Self {
            shared: shared.clone(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shared.open.fetch_sub(1, Ordering::SeqCst);
        SESSION_OPEN.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Counts one more connection in `command` and `session`, unless that
/// would pass either cap of `limits`.
fn take_slot(
    command: &AtomicUsize,
    session: &AtomicUsize,
    limits: &ProxyLimits,
) -> Result<(), Cap> {
    if command.fetch_add(1, Ordering::SeqCst) >= limits.per_command {
        command.fetch_sub(1, Ordering::SeqCst);
        return Err(Cap::Command);
    }
    if session.fetch_add(1, Ordering::SeqCst) >= limits.per_session {
        session.fetch_sub(1, Ordering::SeqCst);
        command.fetch_sub(1, Ordering::SeqCst);
        return Err(Cap::Session);
    }
    Ok(())
}

/// What a connection refused for `cap` is told, and the log says.
fn cap_reason(cap: Cap, limits: &ProxyLimits) -> String {
    let which = match cap {
        Cap::Command => format!(
            "this command already has {} connections open through the proxy",
            limits.per_command
        ),
        Cap::Session => format!(
            "the session's commands already have {} connections open through their proxies",
            limits.per_session
        ),
    };
    format!(
        "{which} (at most {} per command, {} per session); {CAP_MARK}",
        limits.per_command, limits.per_session
    )
}

/// What a refusal of a connection (not of an origin) names as its target.
const CONNECTION_TARGET: &str = "a connection to the proxy";

/// Words that end every refusal for a cap, and begin every one for the
/// head deadline: how [`Shared::summarise`] tells them apart.
const CAP_MARK: &str = "close some and try again";
const SLOW_MARK: &str = "no whole request head";

/// Answers a connection past a cap `503` and closes it, without reading
/// its request; the first such refusal is recorded, the rest counted.
fn refuse_over_cap(stream: TcpStream, shared: &Shared, cap: Cap) {
    let reason = cap_reason(cap, &shared.limits);
    if shared.over_cap.fetch_add(1, Ordering::SeqCst) == 0 {
        shared.note_refusal("CONNECT", reason.clone());
    }
    let answer = response(
        503,
        &format!("capstan refused {CONNECTION_TARGET}: {reason}"),
    );
    // Whatever the client already sent is read first, so that closing does
    // not reset the connection before it reads the answer.
    let mut discard = [0u8; 4096];
    while matches!(stream.try_read(&mut discard), Ok(n) if n > 0) {}
    let _ = stream.try_write(answer.as_bytes());
}

impl Shared {
    /// Records a refusal in the audit log and keeps it for the outcome.
    fn refuse(&self, method: &str, target: &str, reason: String) {
        self.record(AuditEvent::HttpRefused {
            method: method.to_string(),
            url: target.to_string(),
            reason: reason.clone(),
        });
        if let Ok(mut refusals) = self.refusals.lock() {
            refusals.push(ProxyRefusal {
                target: target.to_string(),
                reason,
            });
        }
    }

    /// A refusal of a connection for a limit, not for its origin.
    fn note_refusal(&self, method: &str, reason: String) {
        self.refuse(method, CONNECTION_TARGET, reason);
    }

    /// Once the proxy has stopped: says how many connections each limit
    /// refused in all, in the log and in the kept refusal, when more than
    /// the one recorded.
    fn summarise(&self) {
        let counts = [
            (
                self.over_cap.load(Ordering::SeqCst),
                "past the cap",
                CAP_MARK,
            ),
            (
                self.too_slow.load(Ordering::SeqCst),
                "at the head deadline",
                SLOW_MARK,
            ),
        ];
        for (count, when, mark) in counts {
            if count < 2 {
                continue;
            }
            let total = format!("{count} connections were refused {when} in all");
            self.record(AuditEvent::HttpRefused {
                method: "CONNECT".to_string(),
                url: CONNECTION_TARGET.to_string(),
                reason: total.clone(),
            });
            if let Ok(mut refusals) = self.refusals.lock()
                && let Some(first) = refusals
                    .iter_mut()
                    .find(|r| r.target == CONNECTION_TARGET && r.reason.contains(mark))
            {
                first.reason = format!("{}; {total}", first.reason);
            }
        }
    }

    fn record(&self, event: AuditEvent) {
        if let Some(audit) = &self.audit {
            audit.record(event);
        }
    }
}

/// A parsed request head.
struct Head {
    method: String,
    target: String,
    version: String,
    headers: Vec<String>,
    /// Bytes read past the head.
    rest: Vec<u8>,
}

/// Why no request head came.
enum NoHead {
    /// The connection closed, failed, or sent something else.
    Failed,
    /// It was not whole by the head deadline.
    TooSlow,
}

/// Reads a request head whole within `deadline` (one deadline for the
/// whole head, not one per read).
async fn read_head_within(stream: &mut TcpStream, deadline: Duration) -> Result<Head, NoHead> {
    match tokio::time::timeout(deadline, read_head(stream)).await {
        Ok(Ok(head)) => Ok(head),
        Ok(Err(_)) => Err(NoHead::Failed),
        Err(_) => Err(NoHead::TooSlow),
    }
}

async fn read_head(stream: &mut TcpStream) -> io::Result<Head> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            break end;
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::other("request head too large"));
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::other("connection closed before a request"));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let text = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(io::Error::other("malformed request line"));
    };
    Ok(Head {
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers: lines.map(str::to_string).collect(),
        rest: buf[end + 4..].to_vec(),
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

async fn serve(mut client: TcpStream, shared: &Shared) {
    let head = match read_head_within(&mut client, shared.limits.head_deadline).await {
        Ok(head) => head,
        Err(NoHead::Failed) => return,
        Err(NoHead::TooSlow) => {
            let reason = format!(
                "{SLOW_MARK} within {} ms",
                shared.limits.head_deadline.as_millis()
            );
            if shared.too_slow.fetch_add(1, Ordering::SeqCst) == 0 {
                shared.note_refusal("CONNECT", reason.clone());
            }
            let text = format!("capstan closed {CONNECTION_TARGET}: {reason}");
            let _ = respond(&mut client, 408, &text).await;
            return;
        }
    };
    let (origin, path) = match parse_target(&head) {
        Ok(found) => found,
        Err(reason) => {
            refuse(&mut client, shared, &head.method, &head.target, reason).await;
            return;
        }
    };
    let shown = origin.to_string();
    if let Err(reason) = shared.policy.check(&origin) {
        let reason = reason.replace(
            "the plugin has no network grant",
            "the command was granted no network",
        );
        refuse(&mut client, shared, &head.method, &shown, reason).await;
        return;
    }
    let addresses = match resolve(&origin).await {
        Ok(addresses) => addresses,
        Err(reason) => {
            let _ = respond(&mut client, 502, &reason).await;
            return;
        }
    };
    for address in &addresses {
        if let Err(reason) = shared.policy.check_address(&origin, address.ip()) {
            refuse(&mut client, shared, &head.method, &shown, reason).await;
            return;
        }
    }
    let Some(mut upstream) = connect(&addresses).await else {
        let _ = respond(&mut client, 502, &format!("cannot connect to {shown}")).await;
        return;
    };
    shared.record(AuditEvent::HttpSent {
        method: head.method.clone(),
        url: match &path {
            Some(path) => format!("{shown}{}", path.split('?').next().unwrap_or_default()),
            None => shown.clone(),
        },
        status: None,
    });
    let sent = match &path {
        None => match client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
        {
            Ok(()) => upstream.write_all(&head.rest).await,
            Err(e) => Err(e),
        },
        Some(path) => match upstream
            .write_all(forwarded_head(&head, path).as_bytes())
            .await
        {
            Ok(()) => upstream.write_all(&head.rest).await,
            Err(e) => Err(e),
        },
    };
    if sent.is_err() {
        return;
    }
    // Both ways until both sides close: each end's close is passed on as
    // a half-close of the other.
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// The first of `addresses` that answers within [`IO_TIMEOUT`].
async fn connect(addresses: &[SocketAddr]) -> Option<TcpStream> {
    for address in addresses {
        if let Ok(Ok(stream)) = tokio::time::timeout(IO_TIMEOUT, TcpStream::connect(address)).await
        {
            return Some(stream);
        }
    }
    None
}

/// The origin of a request, and its path for a forwarded (non-CONNECT)
/// request.
fn parse_target(head: &Head) -> Result<(Origin, Option<String>), String> {
    if head.method.eq_ignore_ascii_case("CONNECT") {
        let scheme = if head.target.ends_with(":80") {
            "http"
        } else {
            "https"
        };
        let origin = Origin::parse(scheme, &head.target)?;
        return Ok((origin, None));
    }
    let Some(rest) = head.target.strip_prefix("http://") else {
        return Err(format!(
            "`{} {}` is not a proxy request: use CONNECT for https, or an absolute http:// URL",
            head.method, head.target
        ));
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    Ok((Origin::parse("http", authority)?, Some(path.to_string())))
}

/// The addresses of `origin`, resolved by the host.
async fn resolve(origin: &Origin) -> Result<Vec<SocketAddr>, String> {
    let found: Vec<SocketAddr> = match &origin.host {
        RequestHost::Ip(ip) => vec![SocketAddr::new(*ip, origin.port)],
        RequestHost::Name(name) => {
            let lookup = tokio::net::lookup_host((name.as_str(), origin.port));
            tokio::time::timeout(IO_TIMEOUT, lookup)
                .await
                .map_err(|_| format!("cannot resolve {name}: no answer in time"))?
                .map_err(|e| format!("cannot resolve {name}: {e}"))?
                .map(|a| SocketAddr::new(canonical_ip(a.ip()), a.port()))
                .collect()
        }
    };
    if found.is_empty() {
        return Err(format!("{} has no address", origin.host));
    }
    Ok(found)
}

/// The request head sent upstream: origin-form target, no proxy headers,
/// one request per connection.
fn forwarded_head(head: &Head, path: &str) -> String {
    let mut out = format!("{} {} {}\r\n", head.method, path, head.version);
    for header in &head.headers {
        let name = header.split(':').next().unwrap_or_default().trim();
        if name.eq_ignore_ascii_case("proxy-connection")
            || name.eq_ignore_ascii_case("proxy-authorization")
            || name.eq_ignore_ascii_case("connection")
        {
            continue;
        }
        out.push_str(header);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out
}

async fn refuse(
    client: &mut TcpStream,
    shared: &Shared,
    method: &str,
    target: &str,
    reason: String,
) {
    shared.refuse(method, target, reason.clone());
    let _ = respond(
        client,
        403,
        &format!("capstan refused {target}: {reason}; grant it with --allow-net or [exec] net"),
    )
    .await;
}

/// A whole response of `status` with `text` as its body, closing.
fn response(status: u16, text: &str) -> String {
    let reason = match status {
        403 => "Forbidden",
        408 => "Request Timeout",
        503 => "Service Unavailable",
        _ => "Bad Gateway",
    };
    let body = format!("{text}\n");
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

async fn respond(client: &mut TcpStream, status: u16, text: &str) -> io::Result<()> {
    client.write_all(response(status, text).as_bytes()).await?;
    client.shutdown().await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn head(method: &str, target: &str) -> Head {
        Head {
            method: method.into(),
            target: target.into(),
            version: "HTTP/1.1".into(),
            headers: vec![
                "Host: example.com".into(),
                "Proxy-Connection: keep-alive".into(),
            ],
            rest: Vec::new(),
        }
    }

    #[test]
    fn targets_parse_to_origins() {
        let (origin, path) = parse_target(&head("CONNECT", "example.com:443")).unwrap();
        assert_eq!(origin.to_string(), "https://example.com");
        assert!(path.is_none());
        let (origin, path) = parse_target(&head("GET", "http://example.com:8080/a?b")).unwrap();
        assert_eq!(origin.to_string(), "http://example.com:8080");
        assert_eq!(path.as_deref(), Some("/a?b"));
        assert!(parse_target(&head("GET", "/index.html")).is_err());
        assert!(parse_target(&head("CONNECT", "user@example.com:443")).is_err());
    }

    #[test]
    fn forwarded_heads_drop_proxy_headers() {
        let text = forwarded_head(&head("GET", "http://example.com/x"), "/x");
        assert!(text.starts_with("GET /x HTTP/1.1\r\n"));
        assert!(text.contains("Host: example.com\r\n"));
        assert!(!text.to_ascii_lowercase().contains("proxy-connection"));
        assert!(text.ends_with("Connection: close\r\n\r\n"));
    }

    #[test]
    fn slots_stop_at_either_cap_and_come_back() {
        let limits = ProxyLimits {
            per_command: 2,
            per_session: 3,
            head_deadline: HEAD_DEADLINE,
        };
        let (first, second, session) = (
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        );
        assert_eq!(take_slot(&first, &session, &limits), Ok(()));
        assert_eq!(take_slot(&first, &session, &limits), Ok(()));
        assert_eq!(take_slot(&first, &session, &limits), Err(Cap::Command));
        assert_eq!(take_slot(&second, &session, &limits), Ok(()));
        // The session is full though this command has room.
        assert_eq!(take_slot(&second, &session, &limits), Err(Cap::Session));
        assert_eq!(
            (
                first.load(Ordering::SeqCst),
                second.load(Ordering::SeqCst),
                session.load(Ordering::SeqCst)
            ),
            (2, 1, 3)
        );
        // A closed connection frees its place.
        first.fetch_sub(1, Ordering::SeqCst);
        session.fetch_sub(1, Ordering::SeqCst);
        assert_eq!(take_slot(&second, &session, &limits), Ok(()));
        assert!(cap_reason(Cap::Session, &limits).contains("at most 2 per command, 3 per session"));
    }
}
