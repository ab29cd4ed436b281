//! A hostile plugin tries to get out through the network: ungranted hosts,
//! numeric disguises of loopback, cloud metadata, names that resolve to
//! loopback, redirects, other ports and schemes, raw sockets, the host's
//! environment and secret values. Every attempt must be refused in the way
//! the plugin sees AND recorded in the audit log; the local servers the
//! tests start record what (if anything) reached them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use capstan::audit::AuditLog;
use capstan::grants::net::{REQUEST_BODY_LIMIT, RESPONSE_BODY_LIMIT};
use capstan::grants::{EnvGrant, Grants, NetGrant, ResolvedSecret, SecretGrant};
use capstan::sandbox::{CallOptions, LoadedComponent, Sandbox};
use serde_json::{Value, json};
use support::{fixture, shared_home};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a test server answers.
#[derive(Clone)]
enum Reply {
    /// 200 with this body.
    Ok(&'static str),
    /// A 302 to this location.
    Redirect(String),
    /// 200 with a body of this many bytes.
    Huge(usize),
    /// Nothing, ever.
    Silent,
}

/// A minimal HTTP/1.1 server on a loopback address that records every
/// request it receives and every connection it accepts.
struct Server {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Server {
    async fn start(ip: &str, reply: Reply) -> Self {
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (count, log) = (accepted.clone(), requests.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let (log, reply) = (log.clone(), reply.clone());
                tokio::spawn(async move {
                    let request = read_request(&mut stream).await;
                    log.lock().unwrap().push(request);
                    let _ = write_reply(&mut stream, &reply).await;
                });
            }
        });
        Self {
            addr,
            accepted,
            requests,
        }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// Reads one request: its head (recorded) and its body (read through so
/// the reply comes only after the whole request, as a real server's would).
async fn read_request(stream: &mut tokio::net::TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    // A TLS handshake (0x16) is recorded as is: no HTTP head will follow.
    let head_end = loop {
        if buf.first() == Some(&0x16) {
            return String::from_utf8_lossy(&buf).into_owned();
        }
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&buf).into_owned(),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let lower = head.to_ascii_lowercase();
    let length = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let chunked = lower.contains("transfer-encoding: chunked");
    let mut body = buf[head_end..].to_vec();
    loop {
        let complete = match length {
            Some(length) => body.len() >= length,
            None => !chunked || body.ends_with(b"0\r\n\r\n"),
        };
        if complete {
            break;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    head
}

async fn write_reply(stream: &mut tokio::net::TcpStream, reply: &Reply) -> std::io::Result<()> {
    match reply {
        Reply::Ok(body) => {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(body.as_bytes()).await?;
        }
        Reply::Redirect(location) => {
            let head = format!(
                "HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).await?;
        }
        Reply::Silent => {
            tokio::time::sleep(std::time::Duration::from_secs(60)).await;
        }
        Reply::Huge(size) => {
            let head =
                format!("HTTP/1.1 200 OK\r\ncontent-length: {size}\r\nconnection: close\r\n\r\n");
            stream.write_all(head.as_bytes()).await?;
            let chunk = vec![b'z'; 1 << 16];
            let mut left = *size;
            while left > 0 {
                let n = left.min(chunk.len());
                stream.write_all(&chunk[..n]).await?;
                left -= n;
            }
        }
    }
    stream.shutdown().await
}

/// The sandbox with the hostile plugin loaded and an audit log of its own.
struct Host {
    sandbox: Sandbox,
    plugin: LoadedComponent,
    dir: tempfile::TempDir,
}

impl Host {
    fn new() -> Self {
        let sandbox = Sandbox::new(&shared_home()).unwrap();
        let path = fixture("hostile");
        let wasm = std::fs::read(&path).unwrap();
        let plugin = sandbox
            .load("hostile", &wasm, None, &path.display().to_string())
            .unwrap();
        Self {
            sandbox,
            plugin,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn audit_path(&self) -> PathBuf {
        self.dir.path().join("audit.jsonl")
    }

    /// Calls a tool with `grants` and returns its JSON output.
    async fn call(&self, tool: &str, input: Value, grants: Grants) -> Value {
        let options = CallOptions {
            grants,
            audit: Some(AuditLog::open(&self.audit_path()).unwrap()),
            ..CallOptions::default()
        };
        let out = self
            .sandbox
            .call_tool(&self.plugin, tool, &input.to_string(), &options)
            .await
            .unwrap_or_else(|e| panic!("{tool} failed: {e}"));
        serde_json::from_str(&out.to_text()).unwrap()
    }

    async fn get(&self, url: &str, grants: Grants) -> Value {
        self.call("http-get", json!({ "url": url }), grants).await
    }

    /// The audit records, every one of them from this plugin.
    fn audit(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.audit_path()).unwrap_or_default();
        let records: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        for record in &records {
            assert_eq!(record["plugin"], "hostile", "{record}");
            assert!(record["call_id"].as_str().is_some(), "{record}");
        }
        records
    }

    fn audit_of(&self, kind: &str) -> Vec<Value> {
        self.audit()
            .into_iter()
            .filter(|r| r["kind"] == kind)
            .collect()
    }
}

fn net(grants: &[&str]) -> Grants {
    let mut all = Grants::none();
    all.net = grants.iter().map(|g| NetGrant::parse(g).unwrap()).collect();
    all
}

fn error_of(out: &Value) -> &str {
    out["error"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error, got {out}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_to_an_ungranted_host_is_refused() {
    let host = Host::new();
    let server = Server::start("127.0.0.1", Reply::Ok("hi")).await;
    let granted = format!("http://127.0.0.1:{}", server.port());

    let out = host
        .get("http://example.com/x?key=abc", net(&[&granted]))
        .await;
    assert_eq!(error_of(&out), "HttpRequestDenied");
    let out = host.get(&server.url("/"), Grants::none()).await;
    assert_eq!(error_of(&out), "HttpRequestDenied");

    let refused = host.audit_of("http_refused");
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert_eq!(refused[0]["method"], "GET");
    assert_eq!(refused[0]["url"], "http://example.com/x");
    let reason = refused[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("not granted") && reason.contains(&granted),
        "{reason}"
    );
    assert!(
        refused[1]["reason"]
            .as_str()
            .unwrap()
            .contains("no network grant")
    );
    assert!(host.audit_of("http_sent").is_empty());
    assert_eq!(server.accepted(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn numeric_disguises_of_loopback_do_not_match_a_name_grant() {
    let host = Host::new();
    let server = Server::start("127.0.0.1", Reply::Ok("hi")).await;
    let port = server.port();
    let grants = || net(&[&format!("http://allowed.example:{port}")]);
    let forms = [
        "2130706433",
        "0x7f000001",
        "0177.0.0.1",
        "127.1",
        "0x7f.0.1",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
    ];
    for form in forms {
        let out = host.get(&format!("http://{form}:{port}/"), grants()).await;
        assert_eq!(error_of(&out), "HttpRequestDenied", "{form}");
    }
    let refused = host.audit_of("http_refused");
    assert_eq!(refused.len(), forms.len(), "{refused:?}");
    for record in &refused {
        let reason = record["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!("http://127.0.0.1:{port} is not granted")),
            "the disguise is seen through: {reason}"
        );
    }
    // A numeric host that is no valid address is refused, not looked up.
    let out = host
        .get(&format!("http://1.2.3.999:{port}/"), grants())
        .await;
    assert_eq!(error_of(&out), "HttpRequestDenied");
    let last = host.audit_of("http_refused").pop().unwrap();
    assert!(
        last["reason"].as_str().unwrap().contains("not a valid one"),
        "{last}"
    );
    assert_eq!(server.accepted(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cloud_metadata_address_is_refused() {
    let host = Host::new();
    let grants = || net(&["http://metadata.example"]);
    for url in [
        "http://169.254.169.254/latest/meta-data/?token=s3",
        "http://2852039166/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/latest/meta-data/",
    ] {
        let out = host.get(url, grants()).await;
        assert_eq!(error_of(&out), "HttpRequestDenied", "{url}");
    }
    let refused = host.audit_of("http_refused");
    assert_eq!(refused.len(), 3);
    assert_eq!(
        refused[0]["url"], "http://169.254.169.254/latest/meta-data/",
        "no query in the audit URL"
    );
    for record in refused {
        assert!(
            record["reason"]
                .as_str()
                .unwrap()
                .contains("http://169.254.169.254 is not granted"),
            "{record}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_resolving_to_loopback_is_refused_unless_the_address_is_granted() {
    let host = Host::new();
    let server = Server::start("127.0.0.1", Reply::Ok("hello from loopback")).await;
    let port = server.port();

    // Under a grant for another name, it is simply not granted.
    let out = host
        .get(
            &format!("http://localhost:{port}/"),
            net(&[&format!("http://allowed.example:{port}")]),
        )
        .await;
    assert_eq!(error_of(&out), "HttpRequestDenied");
    // Under a grant for that very name, its loopback address is refused.
    let out = host
        .get(
            &format!("http://localhost:{port}/"),
            net(&[&format!("http://localhost:{port}")]),
        )
        .await;
    assert_eq!(error_of(&out), "DestinationIpProhibited");
    let refused = host.audit_of("http_refused");
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        refused[0]["reason"]
            .as_str()
            .unwrap()
            .contains("not granted"),
        "{refused:?}"
    );
    assert_eq!(refused[1]["url"], format!("http://localhost:{port}/"));
    let reason = refused[1]["reason"].as_str().unwrap();
    assert!(reason.contains("loopback"), "{reason}");
    assert_eq!(server.accepted(), 0);

    // Granting the address itself lets the request through.
    let out = host
        .get(
            &server.url("/ok"),
            net(&[&format!("http://127.0.0.1:{port}")]),
        )
        .await;
    assert_eq!(out["status"], 200, "{out}");
    assert_eq!(out["body"], "hello from loopback");
    assert_eq!(server.accepted(), 1);
    assert!(server.requests()[0].starts_with("GET /ok HTTP/1.1\r\n"));
    let sent = host.audit_of("http_sent");
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["url"], server.url("/ok"));
    assert_eq!(sent[0]["status"], 200);
    assert_eq!(sent[0]["method"], "GET");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_goes_back_to_the_plugin_and_is_never_followed() {
    let host = Host::new();
    let elsewhere = Server::start("127.0.0.1", Reply::Ok("you should not be here")).await;
    let granted = Server::start("127.0.0.1", Reply::Redirect(elsewhere.url("/steal"))).await;

    let out = host
        .get(
            &granted.url("/start"),
            net(&[&format!("http://127.0.0.1:{}", granted.port())]),
        )
        .await;
    assert_eq!(out["status"], 302, "{out}");
    let location = out["headers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h[0] == "location")
        .unwrap();
    assert_eq!(location[1], elsewhere.url("/steal"));
    assert_eq!(granted.accepted(), 1);
    assert_eq!(elsewhere.accepted(), 0, "the redirect was followed");

    let sent = host.audit_of("http_sent");
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["status"], 302);
    assert_eq!(sent[0]["url"], granted.url("/start"));

    // Following it itself, the plugin meets the grants again.
    let out = host
        .get(
            &elsewhere.url("/steal"),
            net(&[&format!("http://127.0.0.1:{}", granted.port())]),
        )
        .await;
    assert_eq!(error_of(&out), "HttpRequestDenied");
    assert_eq!(host.audit_of("http_refused").len(), 1);
    assert_eq!(elsewhere.accepted(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn another_port_or_scheme_than_granted_is_refused() {
    let host = Host::new();
    let granted = Server::start("127.0.0.1", Reply::Ok("hi")).await;
    let other = Server::start("127.0.0.1", Reply::Ok("hi")).await;
    let grants = || net(&[&format!("http://127.0.0.1:{}", granted.port())]);

    let out = host.get(&other.url("/"), grants()).await;
    assert_eq!(error_of(&out), "HttpRequestDenied");
    let out = host
        .get(&format!("https://127.0.0.1:{}/", granted.port()), grants())
        .await;
    assert_eq!(error_of(&out), "HttpRequestDenied");
    let out = host.get("http://127.0.0.1/", grants()).await;
    assert_eq!(error_of(&out), "HttpRequestDenied");

    let refused = host.audit_of("http_refused");
    let urls: Vec<&str> = refused.iter().map(|r| r["url"].as_str().unwrap()).collect();
    assert_eq!(
        urls,
        [
            other.url("/"),
            format!("https://127.0.0.1:{}/", granted.port()),
            "http://127.0.0.1/".to_string()
        ]
    );
    assert_eq!(granted.accepted() + other.accepted(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn raw_tcp_and_udp_sockets_are_refused() {
    let host = Host::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tcp = listener.local_addr().unwrap();
    let udp_socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let udp = udp_socket.local_addr().unwrap();
    // Even with the address granted for HTTP, sockets stay off.
    let grants = || net(&[&format!("http://127.0.0.1:{}", tcp.port())]);

    let out = host
        .call("net-connect", json!({ "addr": tcp.to_string() }), grants())
        .await;
    assert!(!error_of(&out).is_empty(), "{out}");
    assert_eq!(out["kind"], "PermissionDenied", "{out}");
    let out = host
        .call(
            "net-connect",
            json!({ "addr": udp.to_string(), "udp": true }),
            grants(),
        )
        .await;
    assert!(!error_of(&out).is_empty(), "{out}");
    assert_eq!(out["kind"], "PermissionDenied", "{out}");
    // Names cannot even be looked up: the lookup is refused (and recorded).
    let out = host
        .call(
            "net-connect",
            json!({ "addr": format!("localhost:{}", tcp.port()) }),
            grants(),
        )
        .await;
    assert_eq!(out["kind"], "PermissionDenied", "{out}");
    let lookups = host.audit_of("name_lookup_refused");
    assert_eq!(lookups.len(), 1, "{lookups:?}");
    assert_eq!(lookups[0]["name"], "localhost");

    let accept =
        tokio::time::timeout(std::time::Duration::from_millis(300), listener.accept()).await;
    assert!(accept.is_err(), "the listener accepted a connection");
    let mut buf = [0u8; 64];
    assert!(
        udp_socket.try_recv_from(&mut buf).is_err(),
        "a datagram arrived"
    );

    let refused = host.audit_of("socket_refused");
    let addresses: Vec<&str> = refused
        .iter()
        .map(|r| r["address"].as_str().unwrap())
        .collect();
    assert!(
        addresses.contains(&tcp.to_string().as_str()),
        "{addresses:?}"
    );
    assert!(
        addresses.contains(&udp.to_string().as_str()),
        "{addresses:?}"
    );
}

/// The name under which the parent test runs [`env_dump_child`].
const CHILD_FLAG: &str = "CAPSTAN_NET_ESCAPES_ENV_CHILD";

#[test]
fn the_plugin_sees_only_granted_environment_variables() {
    // The host's own keys are set in a child process running the check
    // below, so no test thread of this process sees a changed environment.
    // The child's name as the test binary knows it: this module's path
    // without the crate's name.
    let module = module_path!().split_once("::").unwrap().1;
    let child = format!("{module}::env_dump_child");
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &child, "--ignored", "--nocapture"])
        .env(CHILD_FLAG, "1")
        .env("ANTHROPIC_API_KEY", "sk-ant-host-key-must-not-leak")
        .env("OPENAI_API_KEY", "sk-openai-host-key-must-not-leak")
        .env("HOSTILE_GRANTED_VAR", "granted-value")
        .env("HOSTILE_OTHER_VAR", "other-value")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("1 passed"),
        "the check did not run: {stdout}"
    );
}

/// Run by [`the_plugin_sees_only_granted_environment_variables`] with the
/// host keys in its environment.
#[test]
#[ignore = "runs as a child of the_plugin_sees_only_granted_environment_variables"]
fn env_dump_child() {
    assert_eq!(std::env::var(CHILD_FLAG).as_deref(), Ok("1"));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let host = Host::new();
        let mut grants = Grants::none();
        grants.env = vec![EnvGrant::new("HOSTILE_GRANTED_VAR")];
        let out = host.call("env-dump", json!({}), grants).await;
        let text = out.to_string();
        for leak in [
            "sk-ant-host-key-must-not-leak",
            "sk-openai-host-key-must-not-leak",
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "HOSTILE_OTHER_VAR",
            "other-value",
        ] {
            assert!(!text.contains(leak), "{leak} reached the plugin: {text}");
        }
        for list in ["vars", "wasi_vars"] {
            let pairs = out[list].as_array().unwrap();
            assert_eq!(pairs.len(), 1, "{list}: {text}");
            assert_eq!(pairs[0][0], "HOSTILE_GRANTED_VAR", "{list}: {text}");
            assert_eq!(pairs[0][1], "granted-value", "{list}: {text}");
        }
        let read = host.audit_of("env_read");
        assert_eq!(read.len(), 1, "{read:?}");
        assert_eq!(read[0]["names"], json!(["HOSTILE_GRANTED_VAR"]));
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_goes_only_to_its_hosts_and_never_to_the_plugin() {
    const VALUE: &str = "s3cr3t-VALUE-4f9a";
    let host = Host::new();
    let owner = Server::start("127.0.0.1", Reply::Ok("owner")).await;
    let other = Server::start("127.0.0.2", Reply::Ok("other")).await;
    let grants = || {
        let mut grants = net(&[
            &format!("http://127.0.0.1:{}", owner.port()),
            &format!("http://127.0.0.2:{}", other.port()),
        ]);
        grants.secrets = vec![ResolvedSecret::new(
            SecretGrant {
                name: "HOSTILE_TOKEN".into(),
                header: "X-Api-Key".into(),
                format: "Key {}".into(),
                hosts: vec!["127.0.0.1".into()],
            },
            VALUE.into(),
        )];
        grants
    };

    // The plugin's own value for the header is replaced.
    let out = host
        .call(
            "http-get",
            json!({ "url": owner.url("/a"), "headers": [["X-Api-Key", "plugin-chosen"]] }),
            grants(),
        )
        .await;
    assert_eq!(out["status"], 200, "{out}");
    let received = owner.requests().join("\n").to_ascii_lowercase();
    assert!(
        received.contains(&format!("x-api-key: key {}", VALUE.to_ascii_lowercase())),
        "{received}"
    );
    assert!(!received.contains("plugin-chosen"), "{received}");

    let out = host.get(&other.url("/b"), grants()).await;
    assert_eq!(out["status"], 200, "{out}");
    let received = other.requests().join("\n");
    assert!(
        !received.to_ascii_lowercase().contains("x-api-key"),
        "{received}"
    );
    assert!(!received.contains(VALUE), "{received}");

    // Every route the plugin can think of, including what the owner sends
    // back, shows nothing of the value.
    let out = host
        .call(
            "secret-hunt",
            json!({ "url": owner.url("/hunt") }),
            grants(),
        )
        .await;
    let found = out["found"].as_str().unwrap();
    assert!(found.contains("\"status\":200"), "{found}");
    assert!(!found.contains(VALUE), "the plugin found the secret");
    assert!(!found.contains("HOSTILE_TOKEN"), "{found}");

    let injected = host.audit_of("secret_injected");
    assert_eq!(injected.len(), 2, "{injected:?}");
    for record in &injected {
        assert_eq!(record["name"], "HOSTILE_TOKEN");
        assert_eq!(record["host"], "127.0.0.1");
    }
    assert_eq!(host.audit_of("http_sent").len(), 3);
    let log = std::fs::read_to_string(host.audit_path()).unwrap();
    assert!(!log.contains(VALUE), "the audit log holds the secret");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_huge_response_body_is_cut_off_at_the_cap() {
    let host = Host::new();
    let size = usize::try_from(RESPONSE_BODY_LIMIT).unwrap() + (4 << 20);
    let server = Server::start("127.0.0.1", Reply::Huge(size)).await;
    let out = host
        .get(
            &server.url("/big"),
            net(&[&format!("http://127.0.0.1:{}", server.port())]),
        )
        .await;
    assert_eq!(out["status"], 200, "{out}");
    let received = out["body_len"].as_u64().unwrap();
    assert!(received <= RESPONSE_BODY_LIMIT, "{received}");
    // The stream ends with an error naming the cap.
    let error = out["body_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("body size exceeds limit")
            && error.contains(&RESPONSE_BODY_LIMIT.to_string()),
        "{out}"
    );
    let sent = host.audit_of("http_sent");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["status"], 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_scheme_is_refused_and_recorded() {
    let host = Host::new();
    let out = host
        .get("ftp://127.0.0.1:2121/file", net(&["http://127.0.0.1:2121"]))
        .await;
    assert_eq!(error_of(&out), "HttpRequestDenied");
    let refused = host.audit_of("http_refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["url"], "ftp://127.0.0.1:2121/file");
    assert!(
        refused[0]["reason"].as_str().unwrap().contains("scheme"),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn https_is_spoken_as_tls_even_to_a_granted_address() {
    let host = Host::new();
    let server = Server::start("127.0.0.1", Reply::Ok("plain")).await;
    let out = host
        .get(
            &format!("https://127.0.0.1:{}/tls", server.port()),
            net(&[&format!("https://127.0.0.1:{}", server.port())]),
        )
        .await;
    // The plain server cannot complete a handshake; what it got was TLS.
    assert!(out["error"].is_string(), "{out}");
    let received = server.requests();
    assert_eq!(received.len(), 1);
    assert!(received[0].starts_with('\u{16}'), "{received:?}");
    assert!(!received[0].contains("GET /tls"), "sent in the clear");
    let sent = host.audit_of("http_sent");
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0]["status"].is_null(), "{sent:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn request_bodies_over_the_cap_are_refused() {
    let host = Host::new();
    let server = Server::start("127.0.0.1", Reply::Ok("ok")).await;
    let grants = || net(&[&format!("http://127.0.0.1:{}", server.port())]);
    let declared = REQUEST_BODY_LIMIT + 1;
    let out = host
        .call(
            "http-get",
            json!({
                "url": server.url("/upload"),
                "method": "POST",
                "headers": [["content-length", declared.to_string()]],
            }),
            grants(),
        )
        .await;
    assert_eq!(
        error_of(&out),
        format!("HttpRequestBodySize(Some({REQUEST_BODY_LIMIT}))")
    );
    let refused = host.audit_of("http_refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["method"], "POST");
    assert!(
        refused[0]["reason"]
            .as_str()
            .unwrap()
            .contains("over the 16777216-byte limit"),
        "{refused:?}"
    );
    assert_eq!(server.accepted(), 0);

    // Streamed without a declared length, the body is cut off at the cap.
    let size = usize::try_from(REQUEST_BODY_LIMIT).unwrap() + (1 << 20);
    let out = host
        .call(
            "http-get",
            json!({ "url": server.url("/stream"), "method": "POST", "body_bytes": size }),
            grants(),
        )
        .await;
    assert!(
        out["error"].is_string() || out["body_error"].is_string(),
        "{out}"
    );
    assert!(out["status"].is_null(), "the server answered: {out}");
    let sent = host.audit_of("http_sent");
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0]["status"].is_null(), "{sent:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_plugins_first_byte_timeout_is_honoured() {
    let host = Host::new();
    let server = Server::start("127.0.0.1", Reply::Silent).await;
    let started = std::time::Instant::now();
    let out = host
        .call(
            "http-get",
            json!({ "url": server.url("/slow"), "first_byte_timeout_ms": 200 }),
            net(&[&format!("http://127.0.0.1:{}", server.port())]),
        )
        .await;
    assert_eq!(error_of(&out), "ConnectionReadTimeout");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(server.accepted(), 1);
    let sent = host.audit_of("http_sent");
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0]["status"].is_null());
}
