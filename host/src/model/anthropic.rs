//! The Anthropic Messages API, streamed.
//!
//! Requests mark three prompt-cache breakpoints (`cache_control:
//! ephemeral`): the system prompt, the last tool, and the last block of the
//! last message, so each turn reads the conversation so far from the cache.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::retry::{Attempt, RetryPolicy, stream_with_retries};
use super::sse::SseEvent;
use super::transport::{ErrorContext, ReadEvents, stream_answer};
use super::{
    Block, EventSink, Image, Message, ModelError, ModelFuture, Provider, Request, Response, Role,
    StopReason, StreamEvent, ToolDef, Usage,
};

/// The provider's name in messages.
const NAME: &str = "anthropic";

/// Where and how to reach the Anthropic API. `Debug` leaves the key out.
#[derive(Clone)]
pub struct AnthropicConfig {
    /// The API's base URL, without `/v1/messages`.
    pub base_url: String,
    /// The API key.
    pub api_key: String,
    /// The variable the key came from, named in error messages.
    pub key_var: String,
    /// How failures are retried.
    pub retry: RetryPolicy,
}

impl std::fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &"<redacted>")
            .field("key_var", &self.key_var)
            .field("retry", &self.retry)
            .finish()
    }
}

impl AnthropicConfig {
    /// The public API with the given key, read from `ANTHROPIC_API_KEY`.
    pub fn new(api_key: impl Into<String>) -> Self {
        Self {
            base_url: "https://api.anthropic.com".to_string(),
            api_key: api_key.into(),
            key_var: "ANTHROPIC_API_KEY".to_string(),
            retry: RetryPolicy::default(),
        }
    }
}

/// Talks to the Anthropic Messages API.
#[derive(Debug)]
pub struct AnthropicProvider {
    config: AnthropicConfig,
    client: reqwest::Client,
    url: String,
}

impl AnthropicProvider {
    /// A provider for `config`; fails only if no HTTP client can be built.
    pub fn new(config: AnthropicConfig) -> Result<Self, ModelError> {
        let url = format!("{}/v1/messages", config.base_url.trim_end_matches('/'));
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .build()
            .map_err(|error| ModelError::Connection {
                provider: NAME.to_string(),
                url: url.clone(),
                message: format!("cannot set up an HTTP client: {error}"),
            })?;
        Ok(Self {
            config,
            client,
            url,
        })
    }

    fn error_context(&self, request: &Request) -> ErrorContext {
        ErrorContext {
            provider: NAME.to_string(),
            url: self.url.clone(),
            key_var: self.config.key_var.clone(),
            model: request.model.clone(),
        }
    }

    async fn attempt_once(
        &self,
        request: &Request,
        events: EventSink<'_>,
    ) -> Result<Response, ModelError> {
        let context = self.error_context(request);
        let http_request = self
            .client
            .post(&self.url)
            .header("x-api-key", &self.config.api_key)
            .header("anthropic-version", "2023-06-01")
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(request_body(request).to_string());
        let reader = &mut StreamReader::new(context.clone());
        stream_answer(http_request, context, &self.config.retry, reader, events).await
    }
}

/// Reads the events of a Messages stream, as they arrive, into the answer:
/// what the server sent, text and tool calls alike, is checked here.
pub struct StreamReader {
    context: ErrorContext,
    answer: AnswerInProgress,
}

impl StreamReader {
    /// A reader at the start of a stream; `context` names the request in
    /// errors.
    pub fn new(context: ErrorContext) -> Self {
        Self {
            context,
            answer: AnswerInProgress::default(),
        }
    }
}

impl ReadEvents for StreamReader {
    /// The answer is whole the whole answer at `message_stop`.
    fn read(
        &mut self,
        event: &SseEvent,
        events: EventSink<'_>,
    ) -> Result<Option<Response>, ModelError> {
        let data: WireEvent = serde_json::from_str(&event.data).map_err(|error| {
            self.context
                .stream_error(format!("invalid JSON in `{}` event: {error}", event.event))
        })?;
        self.answer.take(data, &self.context, events)
    }
}

impl Attempt for AnthropicProvider {
    fn attempt<'a>(&'a self, request: &'a Request, events: EventSink<'a>) -> ModelFuture<'a> {
        Box::pin(self.attempt_once(request, events))
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        NAME
    }

    fn base_url(&self) -> Option<&str> {
        Some(&self.config.base_url)
    }

    fn list_models(&self) -> super::listing::ModelListFuture<'_> {
        Box::pin(async move {
            let url = format!(
                "{}/v1/models?limit=100",
                self.config.base_url.trim_end_matches('/')
            );
            let request = self
                .client
                .get(&url)
                .header("x-api-key", &self.config.api_key)
                .header("anthropic-version", "2023-06-01");
            super::listing::fetch_ids(request, &url).await
        })
    }

    fn stream<'a>(&'a self, request: &'a Request, events: EventSink<'a>) -> ModelFuture<'a> {
        Box::pin(stream_with_retries(
            &self.config.retry,
            self,
            request,
            events,
        ))
    }
}

/// The prompt-cache marker.
fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// The JSON body of a Messages request.
fn request_body(request: &Request) -> Value {
    let mut messages: Vec<Value> = request.messages.iter().map(message_json).collect();
    if let Some(last_block) = messages
        .last_mut()
        .and_then(|message| message["content"].as_array_mut())
        .and_then(|content| content.last_mut())
    {
        last_block["cache_control"] = ephemeral();
    }
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "stream": true,
        "messages": messages,
    });
    if !request.system.is_empty() {
        body["system"] = json!([{
            "type": "text",
            "text": request.system,
            "cache_control": ephemeral(),
        }]);
    }
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request.tools.iter().map(tool_json).collect();
        if let Some(last) = tools.last_mut() {
            last["cache_control"] = ephemeral();
        }
        body["tools"] = Value::Array(tools);
    }
    body
}

fn message_json(message: &Message) -> Value {
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let content: Vec<Value> = message
        .content
        .iter()
        .map(|block| match block {
            Block::Text { text } => json!({"type": "text", "text": text}),
            Block::ToolUse { id, name, input } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
                images,
            } => json!({
                "type": "tool_result",
                "tool_use_id": tool_use_id,
                "content": tool_result_content(content, images),
                "is_error": is_error,
            }),
        })
        .collect();
    json!({"role": role, "content": content})
}

/// A tool result's `content` as the Messages API takes it: the text alone,
/// or, when the result carries images, a list of the text block and one
/// base64 `image` block per image. Claude Code's headless output shows
/// results in the same shape.
pub fn tool_result_content(text: &str, images: &[Image]) -> Value {
    if images.is_empty() {
        return json!(text);
    }
    let mut blocks = Vec::with_capacity(images.len() + 1);
    if !text.is_empty() {
        blocks.push(json!({"type": "text", "text": text}));
    }
    blocks.extend(images.iter().map(|image| {
        json!({
            "type": "image",
            "source": {"type": "base64", "media_type": image.media_type, "data": image.data},
        })
    }));
    Value::Array(blocks)
}

fn tool_json(tool: &ToolDef) -> Value {
    json!({
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
    })
}

/// One event's data as the API sends it.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: WireMessage,
    },
    ContentBlockStart {
        index: u64,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: WireDelta,
    },
    ContentBlockStop {
        index: u64,
    },
    MessageDelta {
        delta: WireMessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: WireError,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Deserialize)]
struct WireMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Deserialize)]
struct WireMessageDelta {
    stop_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireError {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    message: String,
}

/// A content block still arriving.
enum BlockInProgress {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input_json: String,
    },
    /// A kind capstan does not use (e.g. thinking); dropped.
    Ignored,
}

/// The answer as built up from the events so far.
#[derive(Default)]
struct AnswerInProgress {
    open: BTreeMap<u64, BlockInProgress>,
    content: Vec<Block>,
    stop_reason: Option<String>,
    usage: Usage,
}

impl AnswerInProgress {
    /// Applies one event; returns the whole answer at `message_stop`.
    fn take(
        &mut self,
        event: WireEvent,
        context: &ErrorContext,
        events: EventSink<'_>,
    ) -> Result<Option<Response>, ModelError> {
        match event {
            WireEvent::MessageStart { message } => {
                self.update_usage(message.usage.unwrap_or_default());
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let block = match content_block {
                    WireBlock::Text { text } => {
                        if !text.is_empty() {
                            events(StreamEvent::TextDelta(text.clone()));
                        }
                        BlockInProgress::Text(text)
                    }
                    WireBlock::ToolUse { id, name } => {
                        events(StreamEvent::ToolUseStarted {
                            id: id.clone(),
                            name: name.clone(),
                        });
                        BlockInProgress::ToolUse {
                            id,
                            name,
                            input_json: String::new(),
                        }
                    }
                    WireBlock::Unknown => BlockInProgress::Ignored,
                };
                self.open.insert(index, block);
            }
            WireEvent::ContentBlockDelta { index, delta } => {
                let block = self.open.get_mut(&index).ok_or_else(|| {
                    context.stream_error(format!("a delta arrived for unknown block {index}"))
                })?;
                match (block, delta) {
                    (BlockInProgress::Text(text), WireDelta::TextDelta { text: more }) => {
                        text.push_str(&more);
                        events(StreamEvent::TextDelta(more));
                    }
                    (
                        BlockInProgress::ToolUse { input_json, .. },
                        WireDelta::InputJsonDelta { partial_json },
                    ) => input_json.push_str(&partial_json),
                    _ => {}
                }
            }
            WireEvent::ContentBlockStop { index } => {
                let block = self.open.remove(&index).ok_or_else(|| {
                    context.stream_error(format!("a stop arrived for unknown block {index}"))
                })?;
                self.finish_block(block, context, events)?;
            }
            WireEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                self.update_usage(usage.unwrap_or_default());
            }
            WireEvent::MessageStop => {
                return Ok(Some(Response {
                    content: std::mem::take(&mut self.content),
                    stop_reason: stop_reason(self.stop_reason.as_deref()),
                    usage: self.usage,
                }));
            }
            WireEvent::Error { error } => {
                return Err(context.error_for_kind(&error.kind, error.message));
            }
            WireEvent::Ping | WireEvent::Unknown => {}
        }
        Ok(None)
    }

    fn finish_block(
        &mut self,
        block: BlockInProgress,
        context: &ErrorContext,
        events: EventSink<'_>,
    ) -> Result<(), ModelError> {
        match block {
            BlockInProgress::Text(text) => {
                if !text.is_empty() {
                    self.content.push(Block::Text { text });
                }
            }
            BlockInProgress::ToolUse {
                id,
                name,
                input_json,
            } => {
                let input = if input_json.trim().is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(&input_json).map_err(|error| {
                        context.stream_error(format!(
                            "the input of tool call `{name}` ({id}) is not valid JSON: {error}"
                        ))
                    })?
                };
                events(StreamEvent::ToolUseFinished {
                    id: id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                });
                self.content.push(Block::ToolUse { id, name, input });
            }
            BlockInProgress::Ignored => {}
        }
        Ok(())
    }

    /// Takes the counts present in `usage`; the API repeats and updates
    /// them, so later values replace earlier ones.
    fn update_usage(&mut self, usage: WireUsage) {
        if let Some(tokens) = usage.input_tokens {
            self.usage.input_tokens = tokens;
        }
        if let Some(tokens) = usage.output_tokens {
            self.usage.output_tokens = tokens;
        }
        if let Some(tokens) = usage.cache_read_input_tokens {
            self.usage.cache_read_tokens = tokens;
        }
        if let Some(tokens) = usage.cache_creation_input_tokens {
            self.usage.cache_write_tokens = tokens;
        }
    }
}

fn stop_reason(reason: Option<&str>) -> StopReason {
    match reason {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some(other) => StopReason::Other(other.to_string()),
        None => StopReason::Other("none given".to_string()),
    }
}
