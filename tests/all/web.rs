//! The built-in `web` plugin end to end, against local servers only:
//! `web.fetch` turns a page into Markdown; the host decides per host — by
//! `web.fetch(domain:…)` rules under `-p`, by asking the user in a session
//! (once / this session / always / deny, each remembered as answered); a
//! redirect to a host not allowed is stopped and reported; a name that
//! resolves to a private address is refused; `web.search` reaches the
//! configured API with a key the host adds, which neither the plugin, the
//! model nor the transcript ever see.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use support::mock_model::{Answer, MockModel, Reply};
use support::terminal::Terminal;
use support::{Env, MODEL_VARS, assert_exit, audit_records};

const API_KEY: &str = "test-key";

/// One request a test server received: `GET /path` and its headers.
#[derive(Debug, Clone)]
struct Seen {
    line: String,
    headers: Vec<(String, String)>,
}

/// A tiny HTTP/1.1 server on `ip` answering each path with `route`, and
/// recording every request.
struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

type Route = fn(&str, u16) -> (u16, Vec<(&'static str, String)>, Vec<u8>);

impl Server {
    fn start(ip: &str, route: Route) -> Self {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let log = log.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut line = String::new();
                    if reader.read_line(&mut line).is_err() {
                        return;
                    }
                    let mut headers = Vec::new();
                    let mut length = 0usize;
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                            break;
                        }
                        if let Some((name, value)) = header.trim().split_once(':') {
                            let name = name.trim().to_ascii_lowercase();
                            if name == "content-length" {
                                length = value.trim().parse().unwrap_or(0);
                            }
                            headers.push((name, value.trim().to_string()));
                        }
                    }
                    let mut body = vec![0; length];
                    let _ = std::io::Read::read_exact(&mut reader, &mut body);
                    let line = line.trim().to_string();
                    let path = line.split(' ').nth(1).unwrap_or("/").to_string();
                    log.lock().unwrap().push(Seen { line, headers });
                    let (status, headers, body) = route(&path, addr.port());
                    let mut head = format!(
                        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n",
                        body.len()
                    );
                    for (name, value) in headers {
                        head.push_str(&format!("{name}: {value}\r\n"));
                    }
                    head.push_str("\r\n");
                    let _ = stream.write_all(head.as_bytes());
                    let _ = stream.write_all(&body);
                });
            }
        });
        Self { addr, seen }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn paths(&self) -> Vec<String> {
        self.seen()
            .iter()
            .map(|s| s.line.split(' ').nth(1).unwrap_or_default().to_string())
            .collect()
    }
}

const PAGE: &str = "<html><head><title>Tokio docs</title><script>alert('x')</script></head>\
<body><nav><a href=\"/\">Home</a></nav><h1>Tokio</h1><p>An <b>async</b> runtime. See \
<a href=\"/guide\">the guide</a>.</p><ul><li>fast</li><li>reliable</li></ul>\
<pre><code class=\"language-rust\">#[tokio::main]\nasync fn main() {}</code></pre></body></html>";

/// The pages of the test site; `/away` redirects to 127.0.0.2 on the
/// port given in the query, `/in` to `/page` on this server.
fn site(path: &str, port: u16) -> (u16, Vec<(&'static str, String)>, Vec<u8>) {
    let html = || vec![("content-type", "text/html; charset=utf-8".to_string())];
    match path.split('?').next().unwrap_or_default() {
        "/page" | "/other" => (200, html(), PAGE.as_bytes().to_vec()),
        "/in" => (
            302,
            vec![("location", format!("http://127.0.0.1:{port}/page"))],
            Vec::new(),
        ),
        "/away" => {
            let target = path.split("to=").nth(1).unwrap_or_default();
            (
                302,
                vec![("location", format!("http://127.0.0.2:{target}/secret"))],
                Vec::new(),
            )
        }
        "/image" => (
            200,
            vec![("content-type", "image/png".to_string())],
            b"\x89PNG\r\n\x1a\n\0\0".to_vec(),
        ),
        _ => (404, html(), b"<p>no such page</p>".to_vec()),
    }
}

/// `capstan -p` against the mock model, with `args`.
fn print(env: &Env, mock: &MockModel, args: &[&str]) -> std::process::Output {
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "read the page");
    cmd.args(args).timeout(std::time::Duration::from_secs(90));
    cmd.output().unwrap()
}

/// A model that calls `tool` with `input` once, then answers.
fn one_call(tool: &str, input: Value) -> MockModel {
    MockModel::start(vec![
        Reply::sse(Answer::text("").call("toolu_1", tool, input).anthropic()),
        Reply::sse(Answer::text("Done.").anthropic()),
    ])
}

/// The result the model got for the one call, and whether it was an error.
fn result_of_call(mock: &MockModel) -> (String, bool) {
    let received = mock.received();
    received
        .iter()
        .find_map(|r| r.find_tool_result("toolu_1"))
        .unwrap_or_else(|| panic!("no tool result in {received:#?}"))
}

#[test]
fn print_mode_follows_domain_rules_and_converts_the_page() {
    let server = Server::start("127.0.0.1", site);
    let url = format!("http://127.0.0.1:{}/page", server.port());

    // No rule: refused without a request, naming the rule to add.
    let env = Env::new();
    let mock = one_call("web__fetch", json!({ "url": url }));
    assert_exit(&print(&env, &mock, &[]), 0);
    let (text, is_error) = result_of_call(&mock);
    assert!(is_error, "{text}");
    assert!(text.contains("web.fetch(domain:127.0.0.1)"), "{text}");
    assert!(server.seen().is_empty(), "{:?}", server.seen());

    // Claude Code's rule for the host: the page, as Markdown.
    let mock = one_call("web__fetch", json!({ "url": url, "prompt": "reliable?" }));
    let out = print(&env, &mock, &["--allow", "WebFetch(domain:127.0.0.1)"]);
    assert_exit(&out, 0);
    let (text, is_error) = result_of_call(&mock);
    assert!(!is_error, "{text}");
    assert!(text.contains("Title: Tokio docs"), "{text}");
    assert!(text.contains("Prompt: reliable?"), "{text}");
    assert!(text.contains("# Tokio"), "{text}");
    assert!(text.contains("An **async** runtime."), "{text}");
    assert!(
        text.contains(&format!(
            "[the guide](http://127.0.0.1:{}/guide)",
            server.port()
        )),
        "{text}"
    );
    assert!(text.contains("- fast\n- reliable"), "{text}");
    assert!(text.contains("```rust\n#[tokio::main]"), "{text}");
    assert!(!text.contains("alert") && !text.contains("Home"), "{text}");
    assert_eq!(server.paths(), ["/page"]);

    // A deny rule wins over an allow rule; a binary body is refused.
    let mock = one_call("web__fetch", json!({ "url": url }));
    let out = print(
        &env,
        &mock,
        &[
            "--allow",
            "web.fetch",
            "--deny",
            "web.fetch(domain:127.0.0.1)",
        ],
    );
    assert_exit(&out, 0);
    assert!(result_of_call(&mock).1);
    let image = format!("http://127.0.0.1:{}/image", server.port());
    let mock = one_call("web__fetch", json!({ "url": image }));
    print(&env, &mock, &["--allow", "web.fetch(domain:127.0.0.1)"]);
    let (text, is_error) = result_of_call(&mock);
    assert!(is_error && text.contains("image/png"), "{text}");
    assert_eq!(server.paths(), ["/page", "/image"]);

    // Every request is in the session's audit log.
    let records = audit_records(&env);
    let sent: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "http_sent")
        .collect();
    assert!(!sent.is_empty(), "{records:#?}");
}

#[test]
fn a_redirect_to_a_host_not_allowed_is_reported_not_followed() {
    let away = Server::start("127.0.0.2", site);
    let server = Server::start("127.0.0.1", site);
    let env = Env::new();
    let url = format!("http://127.0.0.1:{}/away?to={}", server.port(), away.port());
    let mock = one_call("web__fetch", json!({ "url": url }));
    let out = print(&env, &mock, &["--allow", "web.fetch(domain:127.0.0.1)"]);
    assert_exit(&out, 0);
    let (text, is_error) = result_of_call(&mock);
    assert!(is_error, "{text}");
    let target = format!("http://127.0.0.2:{}/secret", away.port());
    assert!(text.contains(&format!("redirected to {target}")), "{text}");
    assert!(text.contains("not followed"), "{text}");
    assert!(
        away.seen().is_empty(),
        "the redirect was followed: {:?}",
        away.seen()
    );

    // Within the host allowed, a redirect is followed.
    let url = format!("http://127.0.0.1:{}/in", server.port());
    let mock = one_call("web__fetch", json!({ "url": url }));
    print(&env, &mock, &["--allow", "web.fetch(domain:127.0.0.1)"]);
    let (text, is_error) = result_of_call(&mock);
    assert!(!is_error && text.contains("# Tokio"), "{text}");
    assert!(text.contains("redirected (302)"), "{text}");
}

#[test]
fn a_name_that_resolves_to_a_private_address_is_refused() {
    let server = Server::start("127.0.0.1", site);
    let env = Env::new();
    // `localhost` is allowed by the rule, but it resolves to loopback,
    // which only a URL naming the address itself may reach.
    let url = format!("http://localhost:{}/page", server.port());
    let mock = one_call("web__fetch", json!({ "url": url }));
    let out = print(&env, &mock, &["--allow", "web.fetch(domain:localhost)"]);
    assert_exit(&out, 0);
    let (text, is_error) = result_of_call(&mock);
    assert!(is_error, "{text}");
    assert!(text.contains("loopback"), "{text}");
    assert!(server.seen().is_empty(), "{:?}", server.seen());
}

/// A fake Brave Search API: results for any query, the key header seen.
fn brave(path: &str, _port: u16) -> (u16, Vec<(&'static str, String)>, Vec<u8>) {
    if !path.starts_with("/res/v1/web/search?") {
        return (404, Vec::new(), Vec::new());
    }
    let body = json!({ "web": { "results": [
        { "title": "Tokio - <strong>async</strong> Rust", "url": "https://tokio.rs/", "description": "A runtime." },
        { "title": "Spam", "url": "https://spam.example/tokio", "description": "Buy now." },
    ]}});
    (
        200,
        vec![("content-type", "application/json".to_string())],
        body.to_string().into_bytes(),
    )
}

#[test]
fn web_search_uses_the_configured_api_with_a_key_only_the_host_sees() {
    const SECRET: &str = "brave-secret-7c1f9e";
    let api = Server::start("127.0.0.1", brave);
    let env = Env::new();

    // Off until configured: the model is not offered the tool.
    let mock = MockModel::start(vec![Reply::sse(Answer::text("Nothing to do.").anthropic())]);
    assert_exit(&print(&env, &mock, &[]), 0);
    let tools = mock.received()[0].body["tools"].to_string();
    assert!(
        tools.contains("web__fetch") && !tools.contains("web__search"),
        "{tools}"
    );

    std::fs::write(
        env.home.path().join("config.toml"),
        format!(
            "[web.search]\nprovider = \"brave\"\nendpoint = \"http://127.0.0.1:{}/res/v1/web/search\"\nkey_secret = \"WEB_TEST_BRAVE_KEY\"\n",
            api.port()
        ),
    )
    .unwrap();
    let mock = one_call(
        "web__search",
        json!({ "query": "tokio runtime", "blocked_domains": ["spam.example"] }),
    );
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "search");
    cmd.env("WEB_TEST_BRAVE_KEY", SECRET)
        .args(["--allow", "web.search"])
        .timeout(std::time::Duration::from_secs(90));
    let out = cmd.output().unwrap();
    assert_exit(&out, 0);
    let (text, is_error) = result_of_call(&mock);
    assert!(!is_error, "{text}");
    assert!(
        text.contains("1. [Tokio - async Rust](https://tokio.rs/)\n   A runtime."),
        "{text}"
    );
    assert!(!text.contains("spam.example"), "{text}");
    let seen = api.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].line.contains("q=tokio+runtime"), "{seen:?}");
    assert!(
        seen[0]
            .headers
            .contains(&("x-subscription-token".to_string(), SECRET.to_string())),
        "{seen:?}"
    );
    // The key is nowhere the model or the transcript could see it.
    for request in mock.received() {
        assert!(!request.body.to_string().contains(SECRET));
    }
    let sessions = env.home.path().join("sessions");
    for file in walk(&sessions) {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(!text.contains(SECRET), "{}", file.display());
    }
    assert!(!support::stdout(&out).contains(SECRET));
    assert!(!support::stderr(&out).contains(SECRET));
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// An interactive session with the scripted model playing `turns`.
fn session(env: &Env, turns: Value) -> Terminal {
    let script = env.home.path().join("script.json");
    let script_json = json!({ "chunk_delay_ms": 0, "turns": turns });
    std::fs::write(&script, script_json.to_string()).unwrap();
    // Compiles the built-in components into the shared cache first, so the
    // session's start does not race the terminal's wait after a rebuild.
    assert_exit(&env.capstan().args(["tool", "list"]).output().unwrap(), 0);
    let mut cmd = env.capstan_std();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("NO_COLOR", "1")
        .arg("--model")
        .arg(format!("scripted:{}", script.display()));
    let mut terminal = Terminal::spawn(cmd);
    terminal.expect("Ctrl-D exits");
    terminal.expect("> ");
    terminal
}

fn fetch_turn(url: &str, done: &str) -> [Value; 2] {
    [
        json!({ "text": "Fetching.", "tool_calls": [ { "tool": "web.fetch", "input": { "url": url } } ] }),
        json!({ "text": done }),
    ]
}

#[test]
fn the_question_is_asked_once_per_host_and_remembered_as_answered() {
    let _responsive = support::load::needs_a_responsive_machine();
    let a = Server::start("127.0.0.1", site);
    let b = Server::start("127.0.0.2", site);
    let c = Server::start("127.0.0.3", site);
    let url = |server: &Server, page: &str| {
        format!("http://{}:{}/{page}", server.addr.ip(), server.port())
    };
    let env = Env::new();
    let turns: Vec<Value> = [
        fetch_turn(&url(&a, "page"), "Done one."),
        fetch_turn(&url(&a, "page"), "Done two."),
        fetch_turn(&url(&a, "other"), "Done three."),
        fetch_turn(&url(&b, "page"), "Done four."),
        fetch_turn(&url(&b, "other"), "Done five."),
        fetch_turn(&url(&c, "page"), "Done six."),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut terminal = session(&env, Value::Array(turns));
    let origin_a = format!("http://127.0.0.1:{}", a.port());
    let origin_b = format!("http://127.0.0.2:{}", b.port());
    let origin_c = format!("http://127.0.0.3:{}", c.port());

    // Once: allowed this time only.
    terminal.type_slowly("one\r");
    terminal.expect(&format!("web.fetch wants {origin_a}"));
    terminal.expect("allow? [y/s/a/n]");
    terminal.send("y");
    terminal.expect("Done one.");
    terminal.expect("> ");
    // Asked again; this session.
    terminal.type_slowly("two\r");
    terminal.expect(&format!("web.fetch wants {origin_a}"));
    terminal.expect("allow? [y/s/a/n]");
    terminal.send("s");
    terminal.expect("Done two.");
    terminal.expect("> ");
    // Not asked again for that host.
    terminal.type_slowly("three\r");
    let passed = terminal.expect("Done three.");
    assert!(!passed.contains("wants"), "asked again:\n{passed}");
    terminal.expect("> ");
    assert_eq!(a.paths(), ["/page", "/page", "/other"]);

    // Deny: refused, and not asked again in this session.
    terminal.type_slowly("four\r");
    terminal.expect(&format!("web.fetch wants {origin_b}"));
    terminal.expect("allow? [y/s/a/n]");
    terminal.send("n");
    terminal.expect("why not?");
    terminal.send("\r");
    terminal.expect("Done four.");
    terminal.expect("> ");
    terminal.type_slowly("five\r");
    let passed = terminal.expect("Done five.");
    assert!(!passed.contains("wants"), "asked again:\n{passed}");
    terminal.expect("> ");
    assert!(b.seen().is_empty(), "{:?}", b.seen());

    // Always: saved as a rule for the host.
    terminal.type_slowly("six\r");
    terminal.expect(&format!("web.fetch wants {origin_c}"));
    terminal.expect("allow? [y/s/a/n]");
    terminal.send("a");
    terminal.expect("Done six.");
    terminal.expect("> ");
    assert_eq!(c.paths(), ["/page"]);
    terminal.type_slowly("/exit\r");
    terminal.wait();
    let saved: Vec<String> = walk(&env.home.path().join("projects"))
        .iter()
        .filter(|p| p.ends_with("config.toml"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(
        saved
            .iter()
            .any(|t| t.contains("web.fetch(domain:127.0.0.3)")),
        "{saved:?}"
    );
    assert!(
        !saved
            .iter()
            .any(|t| t.contains("127.0.0.1") || t.contains("127.0.0.2"))
    );
}

/// `web.search` in `capstan tool list` (text and `--json`), in `capstan
/// tool call` and in the stream-json `init` message: shown as not
/// configured, and never offered, until `[web.search]` is set.
#[test]
fn web_search_is_listed_as_not_configured_until_it_is() {
    let env = Env::new();
    let list = |json: bool| {
        let mut cmd = env.capstan();
        cmd.args(["tool", "list", "--no-mcp"]);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert_exit(&out, 0);
        support::stdout(&out)
    };
    let row = |listing: &str| {
        listing
            .lines()
            .find(|l| l.starts_with("web.search "))
            .unwrap_or_else(|| panic!("no web.search row in {listing}"))
            .to_string()
    };
    let listed_json = |listing: &str, name: &str| {
        let tools: Value = serde_json::from_str(listing).unwrap();
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap()
    };
    let init_tools = || {
        let mock = MockModel::start(vec![Reply::sse(Answer::text("Hi.").anthropic())]);
        let out = print(&env, &mock, &["--output-format", "stream-json"]);
        assert_exit(&out, 0);
        let init: Value = support::stdout(&out)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["type"] == "system" && v["subtype"] == "init")
            .unwrap();
        let offered = mock.received()[0].body["tools"].to_string();
        (init["tools"].to_string(), offered)
    };

    let config = env.home.path().join("config.toml");
    let shown = row(&list(false));
    assert!(
        shown.contains("not configured — add [web.search]")
            && shown.contains(&config.display().to_string()),
        "{shown}"
    );
    let listing = list(true);
    let listed = listed_json(&listing, "web.search");
    assert_eq!(listed["offered"], false, "{listed}");
    assert!(
        listed["not_offered"]
            .as_str()
            .unwrap()
            .starts_with("not configured — add [web.search]"),
        "{listed}"
    );
    let fetch = listed_json(&listing, "web.fetch");
    assert_eq!(fetch["offered"], true, "{fetch}");
    let out = env
        .capstan()
        .args(["tool", "call", "web.search", r#"{"query": "x"}"#])
        .output()
        .unwrap();
    assert_exit(&out, 2);
    assert!(
        support::stderr(&out).contains("web.search: not configured — add [web.search]"),
        "{}",
        support::stderr(&out)
    );
    let (init, offered) = init_tools();
    assert!(
        init.contains("web__fetch") && !init.contains("web__search"),
        "{init}"
    );
    assert!(!offered.contains("web__search"), "{offered}");

    std::fs::write(
        &config,
        "[web.search]\nprovider = \"brave\"\nendpoint = \"http://127.0.0.1:9/res/v1/web/search\"\nkey_secret = \"WEB_TEST_BRAVE_KEY\"\n",
    )
    .unwrap();
    let shown = row(&list(false));
    assert!(!shown.contains("not configured"), "{shown}");
    let listed = listed_json(&list(true), "web.search");
    assert_eq!(listed["offered"], true, "{listed}");
    assert!(listed.get("not_offered").is_none(), "{listed}");
    let (init, offered) = init_tools();
    assert!(init.contains("web__search"), "{init}");
    assert!(offered.contains("web__search"), "{offered}");
}
