//! The model providers against a local mock server that speaks the real
//! wire formats (Anthropic Messages and OpenAI Chat Completions, streamed as
//! Server-Sent Events): answers, tool calls, retries, broken streams, error
//! statuses, and what the server received.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use capstan::model::anthropic::{AnthropicConfig, AnthropicProvider};
use capstan::model::openai::{OpenAiConfig, OpenAiProvider};
use capstan::model::retry::RetryPolicy;
use capstan::model::{
    Block, Message, ModelError, Provider, Request, Response, Role, StopReason, StreamEvent, ToolDef,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One reply the mock server gives, in order, one per connection.
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
    /// Keep the connection open and silent after the body.
    stall: bool,
}

fn sse(body: &str) -> Reply {
    Reply {
        status: 200,
        headers: vec![("content-type", "text/event-stream".into())],
        body: body.to_string(),
        stall: false,
    }
}

fn status(status: u16, body: &str) -> Reply {
    Reply {
        status,
        headers: vec![("content-type", "application/json".into())],
        body: body.to_string(),
        stall: false,
    }
}

/// A request as the mock server received it.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Serves `replies` on 127.0.0.1, one per connection; returns the base URL
/// and the requests received.
async fn mock_server(replies: Vec<Reply>) -> (String, Arc<Mutex<Vec<Received>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = received.clone();
    tokio::spawn(async move {
        for reply in replies {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buffer = Vec::new();
            let mut chunk = [0u8; 4096];
            let head_end = loop {
                let read = socket.read(&mut chunk).await.unwrap();
                assert!(read > 0, "client closed before sending a request");
                buffer.extend_from_slice(&chunk[..read]);
                if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
                    break end + 4;
                }
            };
            let head = String::from_utf8(buffer[..head_end].to_vec()).unwrap();
            let mut lines = head.lines();
            let path = lines.next().unwrap().split(' ').nth(1).unwrap().to_string();
            let headers: Vec<(String, String)> = lines
                .filter_map(|line| line.split_once(':'))
                .map(|(key, value)| (key.trim().to_lowercase(), value.trim().to_string()))
                .collect();
            let length: usize = headers
                .iter()
                .find(|(key, _)| key == "content-length")
                .map_or(0, |(_, value)| value.parse().unwrap());
            while buffer.len() < head_end + length {
                let read = socket.read(&mut chunk).await.unwrap();
                assert!(read > 0, "client closed mid-body");
                buffer.extend_from_slice(&chunk[..read]);
            }
            let body = serde_json::from_slice(&buffer[head_end..head_end + length]).unwrap();
            log.lock().unwrap().push(Received {
                path,
                headers,
                body,
            });
            let mut response = format!("HTTP/1.1 {} Mock\r\nconnection: close\r\n", reply.status);
            for (name, value) in &reply.headers {
                response.push_str(&format!("{name}: {value}\r\n"));
            }
            response.push_str("\r\n");
            response.push_str(&reply.body);
            let _ = socket.write_all(response.as_bytes()).await;
            let _ = socket.flush().await;
            if reply.stall {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
        }
    });
    (format!("http://{address}"), received)
}

/// A retry policy that records the waits instead of waiting.
fn recording_policy() -> (RetryPolicy, Arc<Mutex<Vec<Duration>>>) {
    let waits = Arc::new(Mutex::new(Vec::new()));
    let record = waits.clone();
    let policy = RetryPolicy {
        max_retries: 3,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(4),
        idle_timeout: Duration::from_secs(20),
        sleep: Arc::new(move |duration| {
            record.lock().unwrap().push(duration);
            Box::pin(async {})
        }),
        ..RetryPolicy::default()
    };
    (policy, waits)
}

fn anthropic(base_url: &str, policy: RetryPolicy) -> AnthropicProvider {
    let mut config = AnthropicConfig::new("test-key");
    config.base_url = base_url.to_string();
    config.retry = policy;
    AnthropicProvider::new(config).unwrap()
}

fn openai(base_url: &str, key: Option<&str>, policy: RetryPolicy) -> OpenAiProvider {
    let mut config = OpenAiConfig::new(format!("{base_url}/v1"));
    config.api_key = key.map(str::to_string);
    config.retry = policy;
    OpenAiProvider::new(config).unwrap()
}

/// A conversation with a tool call answered, so mapping can be checked.
fn request() -> Request {
    Request {
        model: "test-model".into(),
        system: "You are terse.".into(),
        messages: vec![
            Message {
                role: Role::User,
                content: vec![Block::Text {
                    text: "list files".into(),
                }],
            },
            Message {
                role: Role::Assistant,
                content: vec![
                    Block::Text {
                        text: "Looking.".into(),
                    },
                    Block::ToolUse {
                        id: "call_1".into(),
                        name: "ls".into(),
                        input: json!({"path": "."}),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![Block::ToolResult {
                    tool_use_id: "call_1".into(),
                    content: "a.txt\nb.txt".into(),
                    is_error: false,
                    images: Vec::new(),
                }],
            },
        ],
        tools: vec![
            ToolDef {
                name: "ls".into(),
                description: "List a folder".into(),
                input_schema: json!({"type": "object"}),
            },
            ToolDef {
                name: "read".into(),
                description: "Read a file".into(),
                input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            },
        ],
        max_tokens: 1024,
        summary: false,
    }
}

async fn run(provider: &dyn Provider) -> (Result<Response, ModelError>, Vec<StreamEvent>) {
    let request = request();
    let mut events = Vec::new();
    let result = provider
        .stream(&request, &mut |event| events.push(event))
        .await;
    (result, events)
}

fn anthropic_event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn anthropic_text_stream(text_parts: &[&str]) -> String {
    let mut body = anthropic_event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "usage": {
            "input_tokens": 12, "output_tokens": 1,
            "cache_read_input_tokens": 300, "cache_creation_input_tokens": 40}}}),
    );
    body += &anthropic_event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    body += &anthropic_event("ping", json!({"type": "ping"}));
    for part in text_parts {
        body += &anthropic_event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": part}}),
        );
    }
    body += &anthropic_event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    body += &anthropic_event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}}),
    );
    body += &anthropic_event("message_stop", json!({"type": "message_stop"}));
    body
}

fn text_deltas(events: &[StreamEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::TextDelta(text) => Some(text.clone()),
            _ => None,
        })
        .collect()
}

fn retry_count(events: &[StreamEvent]) -> usize {
    events
        .iter()
        .filter(|event| matches!(event, StreamEvent::Retrying { .. }))
        .count()
}

#[tokio::test]
async fn anthropic_text_answer_and_the_request_it_sent() {
    let (url, received) = mock_server(vec![sse(&anthropic_text_stream(&["Hel", "lo."]))]).await;
    let (policy, _) = recording_policy();
    let (result, events) = run(&anthropic(&url, policy)).await;
    let response = result.unwrap();
    assert_eq!(text_deltas(&events), vec!["Hel", "lo."]);
    assert_eq!(
        response.content,
        vec![Block::Text {
            text: "Hello.".into()
        }]
    );
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.usage.input_tokens, 12);
    assert_eq!(response.usage.output_tokens, 7);
    assert_eq!(response.usage.cache_read_tokens, 300);
    assert_eq!(response.usage.cache_write_tokens, 40);

    let received = received.lock().unwrap();
    assert_eq!(received.len(), 1);
    let sent = &received[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some("test-key"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    let body = &sent.body;
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["max_tokens"], 1024);
    assert_eq!(body["stream"], true);
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(body["system"][0]["text"], "You are terse.");
    assert_eq!(body["system"][0]["cache_control"], ephemeral);
    assert_eq!(body["tools"][0].get("cache_control"), None);
    assert_eq!(body["tools"][1]["cache_control"], ephemeral);
    assert_eq!(
        body["tools"][1]["input_schema"]["properties"]["path"]["type"],
        "string"
    );
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1]["content"][1]["type"], "tool_use");
    assert_eq!(messages[1]["content"][1]["input"], json!({"path": "."}));
    assert_eq!(messages[1]["content"][1].get("cache_control"), None);
    let result_block = &messages[2]["content"][0];
    assert_eq!(result_block["type"], "tool_result");
    assert_eq!(result_block["tool_use_id"], "call_1");
    assert_eq!(result_block["content"], "a.txt\nb.txt");
    assert_eq!(result_block["is_error"], false);
    assert_eq!(result_block["cache_control"], ephemeral);
}

#[tokio::test]
async fn anthropic_multi_block_tool_use_with_json_fragments() {
    let mut body = anthropic_event(
        "message_start",
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}}),
    );
    body += &anthropic_event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    body += &anthropic_event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Reading both."}}),
    );
    body += &anthropic_event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    for (index, id, fragments) in [
        (1, "toolu_a", vec!["{\"pa", "th\": \"a.", "txt\"}"]),
        (2, "toolu_b", vec!["", "{\"path\":", " \"b.txt\"}"]),
    ] {
        body += &anthropic_event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
                   "content_block": {"type": "tool_use", "id": id, "name": "read", "input": {}}}),
        );
        for fragment in fragments {
            body += &anthropic_event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                       "delta": {"type": "input_json_delta", "partial_json": fragment}}),
            );
        }
        body += &anthropic_event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    body += &anthropic_event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}}),
    );
    body += &anthropic_event("message_stop", json!({"type": "message_stop"}));
    let (url, _) = mock_server(vec![sse(&body)]).await;
    let (policy, _) = recording_policy();
    let (result, events) = run(&anthropic(&url, policy)).await;
    let response = result.unwrap();
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(
        response.content,
        vec![
            Block::Text {
                text: "Reading both.".into()
            },
            Block::ToolUse {
                id: "toolu_a".into(),
                name: "read".into(),
                input: json!({"path": "a.txt"})
            },
            Block::ToolUse {
                id: "toolu_b".into(),
                name: "read".into(),
                input: json!({"path": "b.txt"})
            },
        ]
    );
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta("Reading both.".into()),
            StreamEvent::ToolUseStarted {
                id: "toolu_a".into(),
                name: "read".into()
            },
            StreamEvent::ToolUseFinished {
                id: "toolu_a".into(),
                name: "read".into(),
                input: json!({"path": "a.txt"})
            },
            StreamEvent::ToolUseStarted {
                id: "toolu_b".into(),
                name: "read".into()
            },
            StreamEvent::ToolUseFinished {
                id: "toolu_b".into(),
                name: "read".into(),
                input: json!({"path": "b.txt"})
            },
        ]
    );
}

#[tokio::test]
async fn anthropic_529_then_success_is_retried() {
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let (url, received) = mock_server(vec![
        status(529, overloaded),
        sse(&anthropic_text_stream(&["ok"])),
    ])
    .await;
    let (policy, waits) = recording_policy();
    let (result, events) = run(&anthropic(&url, policy)).await;
    assert_eq!(
        result.unwrap().content,
        vec![Block::Text { text: "ok".into() }]
    );
    assert_eq!(received.lock().unwrap().len(), 2);
    assert_eq!(waits.lock().unwrap().len(), 1);
    match &events[0] {
        StreamEvent::Retrying {
            attempt, reason, ..
        } => {
            assert_eq!(*attempt, 2);
            assert!(reason.contains("overloaded"), "{reason}");
        }
        other => panic!("expected a retry first, got {other:?}"),
    }
}

#[tokio::test]
async fn anthropic_429_waits_as_long_as_retry_after_says() {
    let mut limited = status(
        429,
        r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
    );
    limited.headers.push(("retry-after", "3".into()));
    let (url, _) = mock_server(vec![limited, sse(&anthropic_text_stream(&["ok"]))]).await;
    let (policy, waits) = recording_policy();
    let (result, events) = run(&anthropic(&url, policy)).await;
    assert!(result.is_ok());
    assert_eq!(*waits.lock().unwrap(), vec![Duration::from_secs(3)]);
    assert!(matches!(
        events[0],
        StreamEvent::Retrying { after, .. } if after == Duration::from_secs(3)
    ));
}

#[tokio::test]
async fn anthropic_overloaded_error_event_before_any_text_is_retried() {
    let mut first = anthropic_event(
        "message_start",
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
    );
    first += &anthropic_event(
        "error",
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    );
    let (url, received) =
        mock_server(vec![sse(&first), sse(&anthropic_text_stream(&["ok"]))]).await;
    let (policy, _) = recording_policy();
    let (result, events) = run(&anthropic(&url, policy)).await;
    assert!(result.is_ok());
    assert_eq!(retry_count(&events), 1);
    assert_eq!(received.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn anthropic_stream_cut_after_text_is_an_error_without_retry() {
    let whole = anthropic_text_stream(&["Half an ", "answer"]);
    let cut = &whole[..whole.find("event: content_block_stop").unwrap()];
    let (url, received) = mock_server(vec![sse(cut), sse(&whole)]).await;
    let (policy, _) = recording_policy();
    let (result, events) = run(&anthropic(&url, policy)).await;
    let error = result.unwrap_err();
    assert!(matches!(error, ModelError::Stream { .. }), "{error:?}");
    assert!(error.to_string().contains("closed before"), "{error}");
    assert_eq!(text_deltas(&events), vec!["Half an ", "answer"]);
    assert_eq!(retry_count(&events), 0);
    assert_eq!(received.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn anthropic_stream_cut_before_any_text_is_retried() {
    let whole = anthropic_text_stream(&["fine"]);
    let cut = &whole[..whole.find("event: content_block_delta").unwrap()];
    let (url, received) = mock_server(vec![sse(cut), sse(&whole)]).await;
    let (policy, _) = recording_policy();
    let (result, events) = run(&anthropic(&url, policy)).await;
    assert_eq!(
        result.unwrap().content,
        vec![Block::Text {
            text: "fine".into()
        }]
    );
    assert_eq!(retry_count(&events), 1);
    assert_eq!(received.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn anthropic_invalid_tool_input_json_is_a_stream_error() {
    let mut body = anthropic_event(
        "message_start",
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
    );
    body += &anthropic_event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "tool_use", "id": "toolu_x", "name": "read", "input": {}}}),
    );
    body += &anthropic_event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "input_json_delta", "partial_json": "{\"path\": "}}),
    );
    body += &anthropic_event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    let (url, _) = mock_server(vec![sse(&body)]).await;
    let (policy, _) = recording_policy();
    let (result, _) = run(&anthropic(&url, policy)).await;
    let error = result.unwrap_err();
    assert!(matches!(error, ModelError::Stream { .. }), "{error:?}");
    assert!(error.to_string().contains("not valid JSON"), "{error}");
    assert!(error.to_string().contains("toolu_x"), "{error}");
}

#[tokio::test]
async fn anthropic_malformed_event_data_is_a_stream_error() {
    let body = "event: message_start\ndata: {not json\n\n";
    let replies = (0..4).map(|_| sse(body)).collect();
    let (url, received) = mock_server(replies).await;
    let (policy, _) = recording_policy();
    let (result, _) = run(&anthropic(&url, policy)).await;
    let error = result.unwrap_err();
    assert!(matches!(error, ModelError::Stream { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("invalid JSON in `message_start`"),
        "{error}"
    );
    assert_eq!(received.lock().unwrap().len(), 4);
}

#[tokio::test]
async fn anthropic_401_is_not_retried_and_names_the_key_variable() {
    let (url, received) = mock_server(vec![status(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    )])
    .await;
    let (policy, waits) = recording_policy();
    let (result, events) = run(&anthropic(&url, policy)).await;
    let error = result.unwrap_err();
    assert!(
        matches!(error, ModelError::Auth { status: 401, .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(text.contains("ANTHROPIC_API_KEY"), "{text}");
    assert!(text.contains("invalid x-api-key"), "{text}");
    assert!(events.is_empty());
    assert!(waits.lock().unwrap().is_empty());
    assert_eq!(received.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn anthropic_404_names_the_model() {
    let (url, received) = mock_server(vec![status(
        404,
        r#"{"type":"error","error":{"type":"not_found_error","message":"model: test-model"}}"#,
    )])
    .await;
    let (policy, _) = recording_policy();
    let (result, _) = run(&anthropic(&url, policy)).await;
    let error = result.unwrap_err();
    assert!(
        matches!(error, ModelError::ModelNotFound { ref model, .. } if model == "test-model"),
        "{error:?}"
    );
    assert!(error.to_string().contains("--model"));
    assert_eq!(received.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn anthropic_prompt_too_long_is_context_too_long() {
    let (url, received) = mock_server(vec![status(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 201000 tokens > 200000 maximum"}}"#,
    )])
    .await;
    let (policy, _) = recording_policy();
    let (result, _) = run(&anthropic(&url, policy)).await;
    let error = result.unwrap_err();
    assert!(
        matches!(error, ModelError::ContextTooLong { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("201000 tokens"), "{error}");
    assert_eq!(received.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn silent_stream_trips_the_idle_watchdog() {
    let mut stalled = sse(&anthropic_event(
        "message_start",
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
    ));
    stalled.stall = true;
    let (url, _) = mock_server(vec![stalled]).await;
    let (mut policy, _) = recording_policy();
    policy.max_retries = 0;
    policy.idle_timeout = Duration::from_millis(200);
    let (result, _) = run(&anthropic(&url, policy)).await;
    let error = result.unwrap_err();
    assert!(matches!(error, ModelError::Stream { .. }), "{error:?}");
    assert!(error.to_string().contains("no data for 0.2 s"), "{error}");
}

#[tokio::test]
async fn a_server_that_never_starts_its_response_fails_at_the_bound_after_retries() {
    // The kernel takes the connection and the request into its queues; no
    // one ever reads them or answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    for provider in [
        Box::new(anthropic(&url, silent_server_policy())) as Box<dyn Provider>,
        Box::new(openai(&url, Some("k"), silent_server_policy())),
    ] {
        let (result, events) = run(provider.as_ref()).await;
        let error = result.unwrap_err();
        assert!(
            matches!(error, ModelError::NoResponse { waited, .. } if waited == Duration::from_millis(200)),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains("sent no response within 0.2 s") && text.contains("response_timeout"),
            "{text}"
        );
        assert_eq!(retry_count(&events), 1, "{events:?}");
    }
    drop(listener);
}

/// One retry, and 200 ms for a response to start.
fn silent_server_policy() -> RetryPolicy {
    let (mut policy, _) = recording_policy();
    policy.max_retries = 1;
    policy.response_timeout = Duration::from_millis(200);
    policy
}

#[tokio::test]
async fn unreachable_server_is_a_connection_error_after_retries() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let (policy, waits) = recording_policy();
    let (result, events) = run(&anthropic(&url, policy)).await;
    let error = result.unwrap_err();
    assert!(matches!(error, ModelError::Connection { .. }), "{error:?}");
    assert_eq!(retry_count(&events), 3);
    assert_eq!(waits.lock().unwrap().len(), 3);
}

fn openai_chunk(delta: Value, finish_reason: Option<&str>) -> String {
    let chunk = json!({"id": "c1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]});
    format!("data: {chunk}\n\n")
}

#[tokio::test]
async fn openai_text_and_tool_call_fragments() {
    let mut body = openai_chunk(json!({"role": "assistant", "content": ""}), None);
    body += &openai_chunk(json!({"content": "Let me "}), None);
    body += &openai_chunk(json!({"content": "look."}), None);
    body += &openai_chunk(
        json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                               "function": {"name": "read", "arguments": ""}}]}),
        None,
    );
    body += &openai_chunk(
        json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"path\""}}]}),
        None,
    );
    body += &openai_chunk(
        json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                               "function": {"name": "ls", "arguments": "{}"}}]}),
        None,
    );
    body += &openai_chunk(
        json!({"tool_calls": [{"index": 0, "function": {"arguments": ": \"x.rs\"}"}}]}),
        None,
    );
    body += &openai_chunk(json!({}), Some("tool_calls"));
    body += &format!(
        "data: {}\n\n",
        json!({"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 20,
                                        "prompt_tokens_details": {"cached_tokens": 64}}})
    );
    body += "data: [DONE]\n\n";
    let (url, received) = mock_server(vec![sse(&body)]).await;
    let (policy, _) = recording_policy();
    let (result, events) = run(&openai(&url, Some("sk-local"), policy)).await;
    let response = result.unwrap();
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(
        response.content,
        vec![
            Block::Text {
                text: "Let me look.".into()
            },
            Block::ToolUse {
                id: "call_a".into(),
                name: "read".into(),
                input: json!({"path": "x.rs"})
            },
            Block::ToolUse {
                id: "call_b".into(),
                name: "ls".into(),
                input: json!({})
            },
        ]
    );
    assert_eq!(response.usage.input_tokens, 36);
    assert_eq!(response.usage.cache_read_tokens, 64);
    assert_eq!(response.usage.output_tokens, 20);
    assert_eq!(text_deltas(&events), vec!["Let me ", "look."]);
    let started: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::ToolUseStarted { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started, vec!["call_a", "call_b"]);

    let received = received.lock().unwrap();
    let sent = &received[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-local"));
    let body = &sent.body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["tools"][1]["type"], "function");
    assert_eq!(body["tools"][1]["function"]["name"], "read");
    assert_eq!(body["tools"][1]["function"]["parameters"]["type"], "object");
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": "You are terse."})
    );
    assert_eq!(
        messages[1],
        json!({"role": "user", "content": "list files"})
    );
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(messages[2]["content"], "Looking.");
    let call = &messages[2]["tool_calls"][0];
    assert_eq!(call["id"], "call_1");
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "ls");
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"path": "."}));
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "a.txt\nb.txt"})
    );
    assert_eq!(messages.len(), 4);
}

#[tokio::test]
async fn openai_without_key_sends_no_authorization() {
    let mut body = openai_chunk(json!({"content": "hi"}), Some("stop"));
    body += "data: [DONE]\n\n";
    let (url, received) = mock_server(vec![sse(&body)]).await;
    let (policy, _) = recording_policy();
    let (result, _) = run(&openai(&url, None, policy)).await;
    let response = result.unwrap();
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(received.lock().unwrap()[0].header("authorization"), None);
}

#[tokio::test]
async fn openai_stream_cut_before_done_is_an_error() {
    let body = openai_chunk(json!({"content": "partial"}), None);
    let (url, received) = mock_server(vec![sse(&body)]).await;
    let (policy, _) = recording_policy();
    let (result, events) = run(&openai(&url, None, policy)).await;
    let error = result.unwrap_err();
    assert!(matches!(error, ModelError::Stream { .. }), "{error:?}");
    assert_eq!(retry_count(&events), 0);
    assert_eq!(received.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn openai_invalid_tool_arguments_is_a_stream_error() {
    let mut body = openai_chunk(
        json!({"tool_calls": [{"index": 0, "id": "call_q", "function": {"name": "read", "arguments": "{\"path"}}]}),
        Some("tool_calls"),
    );
    body += "data: [DONE]\n\n";
    let (url, _) = mock_server(vec![sse(&body)]).await;
    let (policy, _) = recording_policy();
    let (result, _) = run(&openai(&url, None, policy)).await;
    let error = result.unwrap_err();
    assert!(error.to_string().contains("call_q"), "{error}");
    assert!(error.to_string().contains("not valid JSON"), "{error}");
}

#[tokio::test]
async fn openai_context_length_and_auth_errors() {
    let (url, _) = mock_server(vec![status(
        400,
        r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
    )])
    .await;
    let (policy, _) = recording_policy();
    let (result, _) = run(&openai(&url, None, policy)).await;
    assert!(matches!(result, Err(ModelError::ContextTooLong { .. })));

    let (url, received) = mock_server(vec![status(
        401,
        r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#,
    )])
    .await;
    let (policy, _) = recording_policy();
    let (result, _) = run(&openai(&url, Some("bad"), policy)).await;
    let error = result.unwrap_err();
    assert!(error.to_string().contains("OPENAI_API_KEY"), "{error}");
    assert_eq!(received.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn openai_503_then_success_is_retried() {
    let mut body = openai_chunk(json!({"content": "back"}), Some("stop"));
    body += "data: [DONE]\n\n";
    let (url, received) = mock_server(vec![status(503, "upstream down"), sse(&body)]).await;
    let (policy, _) = recording_policy();
    let (result, events) = run(&openai(&url, None, policy)).await;
    assert_eq!(
        result.unwrap().content,
        vec![Block::Text {
            text: "back".into()
        }]
    );
    assert_eq!(retry_count(&events), 1);
    assert_eq!(received.lock().unwrap().len(), 2);
}

/// `/model` asks the provider's server which models it offers: an
/// OpenAI-compatible server's `/v1/models` (with the key) and Anthropic's
/// `/v1/models`; a failure says what went wrong.
#[tokio::test]
async fn providers_list_the_models_their_server_offers() {
    use crate::support::mock_model::{MockModel, Reply as MockReply};
    let list = json!({ "object": "list", "data": [{ "id": "small" }, { "id": "big" }] });
    let server = MockModel::start(vec![
        MockReply::status(200, list.to_string()),
        MockReply::status(200, list.to_string()),
        MockReply::status(401, r#"{"error": "no"}"#),
    ]);
    let openai = openai(&server.url(), Some("sk-list"), RetryPolicy::default());
    assert_eq!(openai.list_models().await.unwrap(), ["big", "small"]);
    let anthropic = anthropic(&server.url(), RetryPolicy::default());
    assert_eq!(anthropic.list_models().await.unwrap(), ["big", "small"]);
    let failed = openai.list_models().await.unwrap_err();
    assert!(failed.contains("401"), "{failed}");
    let received = server.received();
    assert_eq!(received[0].path, "/v1/models");
    assert_eq!(received[0].header("authorization"), Some("Bearer sk-list"));
    assert!(received[1].path.starts_with("/v1/models"));
    assert_eq!(received[1].header("x-api-key"), Some("test-key"));
}
