//! A mock model server for tests that drive the real `capstan` binary: it
//! listens on 127.0.0.1, answers each request (one per connection) with the
//! next scripted [`Reply`], and records every request it received.
//!
//! [`Answer`] builds correct streamed bodies in both wire formats the
//! providers speak: Anthropic Messages events and OpenAI Chat Completions
//! chunks.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How the mock server answers one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A complete response: status, headers and body.
    Full {
        /// The HTTP status.
        status: u16,
        /// Extra headers (content-type included).
        headers: Vec<(String, String)>,
        /// The body.
        body: String,
    },
    /// A 200 event stream that declares `body`'s full length but sends only
    /// its first `at` bytes, then closes the connection.
    Cut {
        /// The whole body the stream would have had.
        body: String,
        /// How many bytes of it are sent.
        at: usize,
    },
    /// A 200 event stream that sends `body` and then stays open and silent
    /// until the server is dropped.
    Stall {
        /// What is sent before going silent.
        body: String,
    },
    /// Reads the request, then sends nothing at all — not even a status
    /// line — and keeps the connection open until the server is dropped.
    Silent,
    /// Waits until the file `path` exists (two minutes at most), then
    /// answers with `then`: the test decides when the model answers.
    WaitFor {
        /// The file whose creation releases the answer.
        path: std::path::PathBuf,
        /// The answer.
        then: Box<Reply>,
    },
}

impl Reply {
    /// A 200 `text/event-stream` response with `body`.
    pub fn sse(body: impl Into<String>) -> Self {
        Self::Full {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: body.into(),
        }
    }

    /// A response with `status` and a JSON body.
    pub fn status(status: u16, json_body: impl Into<String>) -> Self {
        Self::Full {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: json_body.into(),
        }
    }

    /// An event stream cut after `at` bytes of `body`.
    pub fn cut(body: impl Into<String>, at: usize) -> Self {
        Self::Cut {
            body: body.into(),
            at,
        }
    }

    /// An event stream that sends `body`, then nothing more.
    pub fn stall(body: impl Into<String>) -> Self {
        Self::Stall { body: body.into() }
    }

    /// A server that takes the request and never starts its response.
    pub fn silent() -> Self {
        Self::Silent
    }

    /// `then`, sent once the file `path` exists.
    pub fn wait_for(path: &std::path::Path, then: Reply) -> Self {
        Self::WaitFor {
            path: path.to_path_buf(),
            then: Box::new(then),
        }
    }

    /// Adds a header (to a [`Reply::Full`]; other replies ignore it).
    pub fn header(mut self, name: &str, value: &str) -> Self {
        if let Self::Full { headers, .. } = &mut self {
            headers.push((name.to_string(), value.to_string()));
        }
        self
    }
}

/// A request as the mock server received it.
#[derive(Debug, Clone)]
pub struct Received {
    /// The HTTP method.
    pub method: String,
    /// The request target, e.g. `/v1/messages`.
    pub path: String,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Value::Null` if empty or not JSON).
    pub body: Value,
    /// When it arrived.
    pub at: Instant,
}

impl Received {
    /// The value of header `name` (lower case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The request's `messages` array.
    pub fn messages(&self) -> &[Value] {
        self.body["messages"]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
    }

    /// The system prompt, its blocks joined by newlines.
    pub fn system_text(&self) -> String {
        match &self.body["system"] {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    }

    /// The text of the first user message.
    pub fn first_user_text(&self) -> String {
        self.messages()[0]["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("")
    }

    /// The result of tool call `id` in this request, and whether it is an
    /// error, if the request carries it.
    pub fn find_tool_result(&self, id: &str) -> Option<(String, bool)> {
        for message in self.messages() {
            for block in message["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" && block["tool_use_id"] == id {
                    let content = match &block["content"] {
                        Value::String(s) => s.clone(),
                        Value::Array(parts) => parts
                            .iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect::<Vec<_>>()
                            .join(""),
                        other => other.to_string(),
                    };
                    return Some((content, block["is_error"].as_bool().unwrap_or(false)));
                }
            }
        }
        None
    }

    /// The result of tool call `id` in this request, and whether it is an
    /// error.
    pub fn tool_result(&self, id: &str) -> (String, bool) {
        self.find_tool_result(id)
            .unwrap_or_else(|| panic!("no tool result {id} in {:#?}", self.messages()))
    }
}

struct Shared {
    replies: Mutex<Vec<Reply>>,
    received: Mutex<Vec<Received>>,
    stopped: AtomicBool,
    aside: Option<Aside>,
}

/// Answers the requests that are not part of the script (see
/// [`MockModel::start_with_aside`]), `None` for those that are.
pub type Aside = fn(&Received) -> Option<Reply>;

/// A mock model server on 127.0.0.1 with a fixed script of replies.
pub struct MockModel {
    address: std::net::SocketAddr,
    shared: Arc<Shared>,
}

impl MockModel {
    /// The text of the result the model got for call `id`, from the
    /// latest request that carries it.
    pub fn result_of(&self, id: &str) -> String {
        for request in self.received().iter().rev() {
            for message in request.messages() {
                let Some(blocks) = message["content"].as_array() else {
                    continue;
                };
                for block in blocks {
                    if block["type"] == "tool_result" && block["tool_use_id"] == id {
                        return match &block["content"] {
                            Value::String(text) => text.clone(),
                            Value::Array(parts) => parts
                                .iter()
                                .filter_map(|p| p["text"].as_str())
                                .collect::<Vec<_>>()
                                .join("\n"),
                            other => other.to_string(),
                        };
                    }
                }
            }
        }
        panic!("the model never got a result for {id}");
    }

    /// The result of tool call `id` in the first request that carries it,
    /// and whether it is an error.
    pub fn tool_result(&self, id: &str) -> (String, bool) {
        self.received()
            .iter()
            .find_map(|request| request.find_tool_result(id))
            .unwrap_or_else(|| panic!("no tool result {id}"))
    }

    /// Starts a server that gives `replies` in order, one per request.
    pub fn start(replies: Vec<Reply>) -> Self {
        Self::start_inner(replies, None)
    }

    /// The same, but a request `aside` answers (a CLI's side request,
    /// such as a title or a token count) takes no scripted reply.
    pub fn start_with_aside(replies: Vec<Reply>, aside: Aside) -> Self {
        Self::start_inner(replies, Some(aside))
    }

    fn start_inner(replies: Vec<Reply>, aside: Option<Aside>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the mock model server");
        let address = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            replies: Mutex::new(replies.into_iter().rev().collect()),
            received: Mutex::new(Vec::new()),
            stopped: AtomicBool::new(false),
            aside,
        });
        let server = shared.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if server.stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let server = server.clone();
                std::thread::spawn(move || serve(stream, &server));
            }
        });
        Self { address, shared }
    }

    /// The server's base URL, `http://127.0.0.1:PORT` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Every request received so far, in order of arrival.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    /// How many scripted replies were not used.
    pub fn replies_left(&self) -> usize {
        self.shared.replies.lock().unwrap().len()
    }
}

impl Drop for MockModel {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.address);
    }
}

/// Reads one request from `stream`, records it, and answers it.
fn serve(mut stream: TcpStream, shared: &Shared) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let Some(received) = read_request(&mut stream) else {
        return;
    };
    if let Some(reply) = shared.aside.and_then(|aside| aside(&received)) {
        shared.received.lock().unwrap().push(received);
        answer(stream, reply, shared);
        return;
    }
    let number = {
        let mut log = shared.received.lock().unwrap();
        log.push(received);
        log.len()
    };
    let reply = shared.replies.lock().unwrap().pop().unwrap_or_else(|| {
        Reply::status(
            500,
            json!({"type": "error", "error": {"type": "api_error", "message": format!(
                "MOCK MODEL: no scripted reply left for request #{number}; the test scripted too few replies or capstan sent too many requests"
            )}})
            .to_string(),
        )
    });
    answer(stream, reply, shared);
}

/// Sends `reply` on `stream`.
fn answer(mut stream: TcpStream, reply: Reply, shared: &Shared) {
    match reply {
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} Mock\r\nconnection: close\r\ncontent-length: {}\r\n",
                body.len()
            );
            for (name, value) in &headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
            let _ = stream.flush();
        }
        Reply::Cut { body, at } => {
            let head = format!(
                "HTTP/1.1 200 Mock\r\nconnection: close\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body.as_bytes()[..at.min(body.len())]);
            let _ = stream.flush();
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
        Reply::Stall { body } => {
            let head =
                "HTTP/1.1 200 Mock\r\nconnection: close\r\ncontent-type: text/event-stream\r\n\r\n";
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
            let _ = stream.flush();
            hold_open(shared);
        }
        Reply::Silent => hold_open(shared),
        Reply::WaitFor { path, then } => {
            let until = Instant::now() + Duration::from_secs(120);
            while !path.exists() && !shared.stopped.load(Ordering::SeqCst) && Instant::now() < until
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            answer(stream, *then, shared);
        }
    }
}

/// Keeps the connection (owned by the caller) open until the server is
/// dropped, or two minutes at most.
fn hold_open(shared: &Shared) {
    let until = Instant::now() + Duration::from_secs(120);
    while !shared.stopped.load(Ordering::SeqCst) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Parses an HTTP/1.1 request with a `content-length` body.
fn read_request(stream: &mut TcpStream) -> Option<Received> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let read = stream.read(&mut chunk).ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let at = Instant::now();
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.lines();
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_string();
    let path = request_line.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(key, value)| (key.trim().to_lowercase(), value.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(key, _)| key == "content-length")
        .map_or(0, |(_, value)| value.parse().unwrap_or(0));
    while buffer.len() < head_end + length {
        let read = stream.read(&mut chunk).ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let body = serde_json::from_slice(&buffer[head_end..head_end + length]).unwrap_or(Value::Null);
    Some(Received {
        method,
        path,
        headers,
        body,
        at,
    })
}

/// Tokens an answer reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tokens {
    /// Input tokens at the normal rate.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache.
    pub cache_creation: u64,
}

impl Default for Tokens {
    fn default() -> Self {
        Self {
            input: 10,
            output: 5,
            cache_read: 0,
            cache_creation: 0,
        }
    }
}

/// One model answer: optional text, then tool calls, as either wire format.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    text: String,
    calls: Vec<(String, String, Value)>,
    tokens: Tokens,
}

impl Answer {
    /// An answer of only `text`.
    pub fn text(text: &str) -> Self {
        Self {
            text: text.to_string(),
            ..Self::default()
        }
    }

    /// Adds a tool call `id` of tool `name` (as the model names it, e.g.
    /// `fs__read`) with `input`.
    pub fn call(mut self, id: &str, name: &str, input: Value) -> Self {
        self.calls.push((id.to_string(), name.to_string(), input));
        self
    }

    /// Sets the tokens reported.
    pub fn tokens(mut self, tokens: Tokens) -> Self {
        self.tokens = tokens;
        self
    }

    /// The answer as an Anthropic Messages event stream: text in several
    /// `text_delta`s, each tool call's input in several `input_json_delta`s.
    pub fn anthropic(&self) -> String {
        let mut body = anthropic_event(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": "msg_mock", "type": "message", "role": "assistant", "content": [],
                "model": "mock", "stop_reason": null,
                "usage": {
                    "input_tokens": self.tokens.input, "output_tokens": 1,
                    "cache_read_input_tokens": self.tokens.cache_read,
                    "cache_creation_input_tokens": self.tokens.cache_creation}}}),
        );
        let mut index = 0;
        if !self.text.is_empty() {
            body += &anthropic_event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                       "content_block": {"type": "text", "text": ""}}),
            );
            body += &anthropic_event("ping", json!({"type": "ping"}));
            for piece in split(&self.text, 3) {
                body += &anthropic_event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index,
                           "delta": {"type": "text_delta", "text": piece}}),
                );
            }
            body += &anthropic_event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            );
            index += 1;
        }
        for (id, name, input) in &self.calls {
            body += &anthropic_event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                       "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            );
            for piece in split(&input.to_string(), 3) {
                body += &anthropic_event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index,
                           "delta": {"type": "input_json_delta", "partial_json": piece}}),
                );
            }
            body += &anthropic_event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            );
            index += 1;
        }
        let stop_reason = if self.calls.is_empty() {
            "end_turn"
        } else {
            "tool_use"
        };
        body += &anthropic_event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                   "usage": {"output_tokens": self.tokens.output}}),
        );
        body += &anthropic_event("message_stop", json!({"type": "message_stop"}));
        body
    }

    /// The answer as an OpenAI Chat Completions chunk stream: text in
    /// several `content` deltas, each call's arguments in several
    /// fragments, a usage chunk and `[DONE]`.
    pub fn openai(&self) -> String {
        let mut body = openai_chunk(json!({"role": "assistant", "content": ""}), None);
        for piece in split(&self.text, 3) {
            body += &openai_chunk(json!({"content": piece}), None);
        }
        for (index, (id, name, input)) in self.calls.iter().enumerate() {
            let pieces = split(&input.to_string(), 3);
            body += &openai_chunk(
                json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                       "function": {"name": name, "arguments": ""}}]}),
                None,
            );
            for piece in pieces {
                body += &openai_chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    None,
                );
            }
        }
        let finish = if self.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        body += &openai_chunk(json!({}), Some(finish));
        body += &format!(
            "data: {}\n\n",
            json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "choices": [],
                   "usage": {
                       "prompt_tokens": self.tokens.input + self.tokens.cache_read,
                       "completion_tokens": self.tokens.output,
                       "prompt_tokens_details": {"cached_tokens": self.tokens.cache_read}}})
        );
        body += "data: [DONE]\n\n";
        body
    }
}

/// One Anthropic server-sent event.
pub fn anthropic_event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// One OpenAI chunk event.
pub fn openai_chunk(delta: Value, finish_reason: Option<&str>) -> String {
    let chunk = json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk",
        "created": 0, "model": "mock",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]});
    format!("data: {chunk}\n\n")
}

/// An Anthropic error body (as sent with an error status).
pub fn anthropic_error(kind: &str, message: &str) -> String {
    json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
}

/// `text` in up to `parts` non-empty pieces, split on character
/// boundaries (one piece if it is shorter than `parts` characters).
fn split(text: &str, parts: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(parts).max(1);
    chars
        .chunks(size)
        .map(|chunk| chunk.iter().collect())
        .collect()
}

/// Replies that each make one tool call `(id, tool, input)` in turn (with
/// the text "Working."), then one that says `closing`.
pub fn tool_call_replies(calls: &[(&str, &str, Value)], closing: &str) -> Vec<Reply> {
    let mut replies: Vec<Reply> = calls
        .iter()
        .map(|(id, tool, input)| {
            Reply::sse(
                Answer::text("Working.")
                    .call(id, tool, input.clone())
                    .anthropic(),
            )
        })
        .collect();
    replies.push(Reply::sse(Answer::text(closing).anthropic()));
    replies
}

/// A mock model that makes each call in turn, then says "Done.".
pub fn script(calls: &[(&str, &str, Value)]) -> MockModel {
    MockModel::start(tool_call_replies(calls, "Done."))
}
