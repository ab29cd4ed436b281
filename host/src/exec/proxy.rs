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

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::ProxyRefusal;
use crate::audit::{AuditEvent, AuditScope};
use crate::grants::net::{NetGrant, NetPolicy, Origin, RequestHost, canonical_ip};

/// The largest request head the proxy reads.
const MAX_HEAD: usize = 16 * 1024;

/// How long the proxy waits for a request head, or for a connection out.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A running proxy; stopping it ends every tunnel.
pub struct Proxy {
    stop: Arc<AtomicBool>,
    listener: Arc<TcpListener>,
    accepting: Option<JoinHandle<()>>,
    refusals: Arc<Mutex<Vec<ProxyRefusal>>>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

/// What every connection of one proxy shares.
struct Shared {
    policy: NetPolicy,
    audit: Option<AuditScope>,
    refusals: Arc<Mutex<Vec<ProxyRefusal>>>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    /// Serves `listener` (inside the command's namespace) under `grants`.
    pub fn start(
        listener: TcpListener,
        grants: Vec<NetGrant>,
        audit: Option<AuditScope>,
    ) -> io::Result<Self> {
        let listener = Arc::new(listener);
        let stop = Arc::new(AtomicBool::new(false));
        let refusals = Arc::new(Mutex::new(Vec::new()));
        let open = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new(Shared {
            policy: NetPolicy::new(grants),
            audit,
            refusals: refusals.clone(),
            open: open.clone(),
        });
        let stopping = stop.clone();
        let accepted = listener.clone();
        let accepting = std::thread::Builder::new()
            .name("capstan-exec-proxy".into())
            .spawn(move || accept_loop(&accepted, &stopping, &shared))?;
        Ok(Self {
            stop,
            listener,
            accepting: Some(accepting),
            refusals,
            open,
        })
    }

    /// Stops accepting, closes every connection, and returns the refusals.
    pub fn stop(mut self) -> Vec<ProxyRefusal> {
        self.halt();
        self.refusals.lock().map(|r| r.clone()).unwrap_or_default()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        super::spawn::shut_down(&self.listener);
        if let Some(accepting) = self.accepting.take() {
            let _ = accepting.join();
        }
        if let Ok(open) = self.open.lock() {
            for stream in open.iter() {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Accepts connections until the proxy is stopped (which shuts the
/// listener down, so `accept` fails).
fn accept_loop(listener: &TcpListener, stop: &AtomicBool, shared: &Arc<Shared>) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let shared = shared.clone();
                let _ = std::thread::Builder::new()
                    .name("capstan-exec-proxy-conn".into())
                    .spawn(move || serve(stream, &shared));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
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

fn read_head(stream: &mut TcpStream) -> io::Result<Head> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            break end;
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::other("request head too large"));
        }
        let n = stream.read(&mut chunk)?;
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

fn serve(mut client: TcpStream, shared: &Shared) {
    let _ = client.set_read_timeout(Some(IO_TIMEOUT));
    let Ok(head) = read_head(&mut client) else {
        return;
    };
    let (origin, path) = match parse_target(&head) {
        Ok(found) => found,
        Err(reason) => {
            refuse(&mut client, shared, &head.method, &head.target, reason);
            return;
        }
    };
    let shown = origin.to_string();
    if let Err(reason) = shared.policy.check(&origin) {
        let reason = reason.replace(
            "the plugin has no network grant",
            "the command was granted no network",
        );
        refuse(&mut client, shared, &head.method, &shown, reason);
        return;
    }
    let addresses = match resolve(&origin) {
        Ok(addresses) => addresses,
        Err(reason) => {
            let _ = respond(&mut client, 502, &reason);
            return;
        }
    };
    for address in &addresses {
        if let Err(reason) = shared.policy.check_address(&origin, address.ip()) {
            refuse(&mut client, shared, &head.method, &shown, reason);
            return;
        }
    }
    let Some(mut upstream) = addresses
        .iter()
        .find_map(|a| TcpStream::connect_timeout(a, IO_TIMEOUT).ok())
    else {
        let _ = respond(&mut client, 502, &format!("cannot connect to {shown}"));
        return;
    };
    record(
        shared,
        AuditEvent::HttpSent {
            method: head.method.clone(),
            url: match &path {
                Some(path) => format!("{shown}{}", path.split('?').next().unwrap_or_default()),
                None => shown.clone(),
            },
            status: None,
        },
    );
    let sent = match &path {
        None => client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .and_then(|()| upstream.write_all(&head.rest)),
        Some(path) => upstream
            .write_all(forwarded_head(&head, path).as_bytes())
            .and_then(|()| upstream.write_all(&head.rest)),
    };
    if sent.is_err() {
        return;
    }
    relay(client, upstream, &shared.open);
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
fn resolve(origin: &Origin) -> Result<Vec<SocketAddr>, String> {
    let found: Vec<SocketAddr> = match &origin.host {
        RequestHost::Ip(ip) => vec![SocketAddr::new(*ip, origin.port)],
        RequestHost::Name(name) => (name.as_str(), origin.port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {name}: {e}"))?
            .map(|a| SocketAddr::new(canonical_ip(a.ip()), a.port()))
            .collect(),
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

fn refuse(client: &mut TcpStream, shared: &Shared, method: &str, target: &str, reason: String) {
    record(
        shared,
        AuditEvent::HttpRefused {
            method: method.to_string(),
            url: target.to_string(),
            reason: reason.clone(),
        },
    );
    if let Ok(mut refusals) = shared.refusals.lock() {
        refusals.push(ProxyRefusal {
            target: target.to_string(),
            reason: reason.clone(),
        });
    }
    let _ = respond(
        client,
        403,
        &format!("capstan refused {target}: {reason}; grant it with --allow-net or [exec] net"),
    );
}

fn record(shared: &Shared, event: AuditEvent) {
    if let Some(audit) = &shared.audit {
        audit.record(event);
    }
}

fn respond(client: &mut TcpStream, status: u16, text: &str) -> io::Result<()> {
    let reason = if status == 403 {
        "Forbidden"
    } else {
        "Bad Gateway"
    };
    let body = format!("{text}\n");
    write!(
        client,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Copies both ways until either side closes.
fn relay(client: TcpStream, upstream: TcpStream, open: &Mutex<Vec<TcpStream>>) {
    let _ = client.set_read_timeout(None);
    let (Ok(client_reader), Ok(upstream_reader)) = (client.try_clone(), upstream.try_clone())
    else {
        return;
    };
    if let (Ok(mut open), Ok(a), Ok(b)) = (open.lock(), client.try_clone(), upstream.try_clone()) {
        open.push(a);
        open.push(b);
    }
    let up = std::thread::spawn(move || copy(client_reader, upstream));
    copy(upstream_reader, client);
    let _ = up.join();
}

fn copy(mut from: TcpStream, mut to: TcpStream) {
    let _ = io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
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
}
