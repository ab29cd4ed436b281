//! OpenAI-compatible Chat Completions, streamed: OpenAI itself, OpenRouter,
//! and local servers (llama.cpp, vLLM, Ollama) at a URL such as
//! `http://127.0.0.1:8080/v1`.
//!
//! Tool results become `tool` messages answering the assistant's
//! `tool_calls`; a failed result's text starts with `Error: `, as the format
//! has no error flag.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::retry::{Attempt, RetryPolicy, stream_with_retries};
use super::sse::SseEvent;
use super::transport::{ErrorContext, ReadEvents, stream_answer};
use super::{
    Block, EventSink, Message, ModelError, ModelFuture, Provider, Request, Response, Role,
    StopReason, StreamEvent, ToolDef, Usage,
};

/// The provider's name in messages.
const NAME: &str = "openai-compatible";

/// Where and how to reach an OpenAI-compatible server. `Debug` leaves the
/// key out.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The API's base URL, ending before `/chat/completions` (e.g.
    /// `http://127.0.0.1:8080/v1`).
    pub base_url: String,
    /// The bearer token; local servers usually need none.
    pub api_key: Option<String>,
    /// The variable the key came from, named in error messages.
    pub key_var: String,
    /// How failures are retried.
    pub retry: RetryPolicy,
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("key_var", &self.key_var)
            .field("retry", &self.retry)
            .finish()
    }
}

impl OpenAiConfig {
    /// A server at `base_url`, with no key and default retries.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            key_var: "OPENAI_API_KEY".to_string(),
            retry: RetryPolicy::default(),
        }
    }
}

/// Talks to an OpenAI-compatible Chat Completions endpoint.
#[derive(Debug)]
pub struct OpenAiProvider {
    config: OpenAiConfig,
    client: reqwest::Client,
    url: String,
}

impl OpenAiProvider {
    /// A provider for `config`; fails only if no HTTP client can be built.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
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

    async fn attempt_once(
        &self,
        request: &Request,
        events: EventSink<'_>,
    ) -> Result<Response, ModelError> {
        let context = ErrorContext {
            provider: NAME.to_string(),
            url: self.url.clone(),
            key_var: self.config.key_var.clone(),
            model: request.model.clone(),
        };
        let mut http_request = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(request_body(request).to_string());
        if let Some(key) = &self.config.api_key {
            http_request = http_request.bearer_auth(key);
        }
        let reader = &mut StreamReader::new(context.clone());
        stream_answer(http_request, context, &self.config.retry, reader, events).await
    }
}

/// Reads the chunks of a Chat Completions stream, as they arrive, into the
/// answer: what the server sent, text and tool calls alike, is checked here.
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
    /// The answer is whole the whole answer at `[DONE]`.
    fn read(
        &mut self,
        event: &SseEvent,
        events: EventSink<'_>,
    ) -> Result<Option<Response>, ModelError> {
        let context = &self.context;
        if event.data.trim() == "[DONE]" {
            return self
                .answer
                .finish(context, events)
                .unwrap_or_else(|| Err(context.stream_error("the stream ended without any answer")))
                .map(Some);
        }
        let chunk: Value = serde_json::from_str(&event.data).map_err(|error| {
            context.stream_error(format!("invalid JSON in a stream chunk: {error}"))
        })?;
        if chunk.get("error").is_some() {
            let status = chunk["error"]["code"]
                .as_u64()
                .and_then(|code| u16::try_from(code).ok())
                .unwrap_or(500);
            return Err(context.error_for_status(status, None, &event.data));
        }
        let chunk: WireChunk = serde_json::from_value(chunk)
            .map_err(|error| context.stream_error(format!("unexpected stream chunk: {error}")))?;
        self.answer.take(chunk, events);
        Ok(None)
    }
}

impl Attempt for OpenAiProvider {
    fn attempt<'a>(&'a self, request: &'a Request, events: EventSink<'a>) -> ModelFuture<'a> {
        Box::pin(self.attempt_once(request, events))
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        NAME
    }

    fn base_url(&self) -> Option<&str> {
        Some(&self.config.base_url)
    }

    fn list_models(&self) -> super::listing::ModelListFuture<'_> {
        Box::pin(async move {
            let url = format!("{}/models", self.config.base_url.trim_end_matches('/'));
            let mut request = self.client.get(&url);
            if let Some(key) = &self.config.api_key {
                request = request.bearer_auth(key);
            }
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

/// The JSON body of a Chat Completions request.
fn request_body(request: &Request) -> Value {
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for message in &request.messages {
        push_message_json(message, &mut messages);
    }
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": messages,
    });
    if !request.tools.is_empty() {
        body["tools"] = Value::Array(request.tools.iter().map(tool_json).collect());
    }
    body
}

/// Appends the wire messages for one message: a user message's tool
/// results come first, as `tool` messages, then its text.
fn push_message_json(message: &Message, messages: &mut Vec<Value>) {
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    // Tool messages take text only: the results' images follow them in a
    // user message of `image_url` parts, as other agents send them.
    let mut images = Vec::new();
    for block in &message.content {
        match block {
            Block::Text { text: more } => {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(more);
            }
            Block::ToolUse { id, name, input } => tool_calls.push(json!({
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": input.to_string()},
            })),
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
                images: result_images,
            } => {
                let mut content = if *is_error {
                    format!("Error: {content}")
                } else {
                    content.clone()
                };
                if !result_images.is_empty() {
                    let count = result_images.len();
                    let noun = if count == 1 { "image" } else { "images" };
                    content.push_str(&format!(
                        "\n[{count} {noun} of this result follow in the next user message]"
                    ));
                    images.push(json!({
                        "type": "text",
                        "text": format!("The {noun} returned by tool call {tool_use_id}:"),
                    }));
                    images.extend(result_images.iter().map(|image| {
                        json!({"type": "image_url", "image_url": {"url": image.data_url()}})
                    }));
                }
                messages.push(json!({
                    "role": "tool",
                    "tool_call_id": tool_use_id,
                    "content": content,
                }));
            }
        }
    }
    if !images.is_empty() {
        messages.push(json!({"role": "user", "content": images}));
    }
    match message.role {
        Role::User => {
            if !text.is_empty() {
                messages.push(json!({"role": "user", "content": text}));
            }
        }
        Role::Assistant => {
            let mut wire = json!({
                "role": "assistant",
                "content": if text.is_empty() { Value::Null } else { Value::String(text) },
            });
            if !tool_calls.is_empty() {
                wire["tool_calls"] = Value::Array(tool_calls);
            }
            messages.push(wire);
        }
    }
}

fn tool_json(tool: &ToolDef) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        },
    })
}

#[derive(Debug, Deserialize)]
struct WireChunk {
    #[serde(default)]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct WireChoice {
    #[serde(default)]
    delta: Option<WireDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Debug, Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: u64,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Debug, Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<WirePromptDetails>,
}

#[derive(Debug, Deserialize)]
struct WirePromptDetails {
    #[serde(default)]
    cached_tokens: u64,
}

/// A tool call still arriving.
#[derive(Default)]
struct ToolCallInProgress {
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

/// The answer as built up from the chunks so far.
#[derive(Default)]
struct AnswerInProgress {
    text: String,
    tool_calls: BTreeMap<u64, ToolCallInProgress>,
    finish_reason: Option<String>,
    usage: Usage,
    received_anything: bool,
}

impl AnswerInProgress {
    fn take(&mut self, chunk: WireChunk, events: EventSink<'_>) {
        self.received_anything = true;
        if let Some(usage) = chunk.usage {
            let cached = usage
                .prompt_tokens_details
                .map_or(0, |details| details.cached_tokens);
            self.usage = Usage {
                input_tokens: usage.prompt_tokens.saturating_sub(cached),
                output_tokens: usage.completion_tokens,
                cache_read_tokens: cached,
                cache_write_tokens: 0,
            };
        }
        let Some(choice) = chunk.choices.into_iter().next() else {
            return;
        };
        if choice.finish_reason.is_some() {
            self.finish_reason = choice.finish_reason;
        }
        let Some(delta) = choice.delta else {
            return;
        };
        if let Some(text) = delta.content.filter(|text| !text.is_empty()) {
            self.text.push_str(&text);
            events(StreamEvent::TextDelta(text));
        }
        for fragment in delta.tool_calls {
            let call = self.tool_calls.entry(fragment.index).or_default();
            if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
                call.id = id;
            }
            if let Some(function) = fragment.function {
                if let Some(name) = function.name.filter(|name| !name.is_empty()) {
                    call.name = name;
                }
                if let Some(arguments) = function.arguments {
                    call.arguments.push_str(&arguments);
                }
            }
            if !call.announced && !call.name.is_empty() {
                if call.id.is_empty() {
                    call.id = format!("call_{}", fragment.index);
                }
                call.announced = true;
                events(StreamEvent::ToolUseStarted {
                    id: call.id.clone(),
                    name: call.name.clone(),
                });
            }
        }
    }

    /// The whole answer once `[DONE]` arrived; `None` if nothing did.
    fn finish(
        &mut self,
        context: &ErrorContext,
        events: EventSink<'_>,
    ) -> Option<Result<Response, ModelError>> {
        if !self.received_anything {
            return None;
        }
        let mut content = Vec::new();
        if !self.text.is_empty() {
            content.push(Block::Text {
                text: std::mem::take(&mut self.text),
            });
        }
        for (index, call) in std::mem::take(&mut self.tool_calls) {
            if call.name.is_empty() {
                return Some(Err(context.stream_error(format!(
                    "tool call {index} arrived without a function name"
                ))));
            }
            let input = if call.arguments.trim().is_empty() {
                json!({})
            } else {
                match serde_json::from_str(&call.arguments) {
                    Ok(input) => input,
                    Err(error) => {
                        return Some(Err(context.stream_error(format!(
                            "the arguments of tool call `{}` ({}) are not valid JSON: {error}",
                            call.name, call.id
                        ))));
                    }
                }
            };
            events(StreamEvent::ToolUseFinished {
                id: call.id.clone(),
                name: call.name.clone(),
                input: input.clone(),
            });
            content.push(Block::ToolUse {
                id: call.id,
                name: call.name,
                input,
            });
        }
        let has_tool_calls = content
            .iter()
            .any(|block| matches!(block, Block::ToolUse { .. }));
        // Some local servers say `stop` even when they called tools.
        let stop_reason = match self.finish_reason.as_deref() {
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            _ if has_tool_calls => StopReason::ToolUse,
            Some("stop") | None => StopReason::EndTurn,
            Some("length") => StopReason::MaxTokens,
            Some(other) => StopReason::Other(other.to_string()),
        };
        Some(Ok(Response {
            content,
            stop_reason,
            usage: self.usage,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Image;

    fn result(id: &str, images: Vec<Image>) -> Block {
        Block::ToolResult {
            tool_use_id: id.into(),
            content: format!("result {id}"),
            is_error: false,
            images,
        }
    }

    #[test]
    fn images_of_results_follow_every_tool_message_in_one_user_message() {
        let dot = Image {
            media_type: "image/png".into(),
            data: "AAAA".into(),
        };
        let message = Message {
            role: Role::User,
            content: vec![
                result("a", vec![dot.clone()]),
                result("b", Vec::new()),
                result("c", vec![dot.clone(), dot]),
            ],
        };
        let mut wire = Vec::new();
        push_message_json(&message, &mut wire);
        let roles: Vec<&str> = wire.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["tool", "tool", "tool", "user"]);
        assert_eq!(wire[1]["content"], "result b");
        assert!(
            wire[2]["content"]
                .as_str()
                .unwrap()
                .ends_with("[2 images of this result follow in the next user message]")
        );
        let parts = wire[3]["content"].as_array().unwrap();
        let kinds: Vec<&str> = parts.iter().map(|p| p["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            ["text", "image_url", "text", "image_url", "image_url"]
        );
        assert_eq!(parts[1]["image_url"]["url"], "data:image/png;base64,AAAA");
        assert!(parts[2]["text"].as_str().unwrap().contains("call c"));
    }
}
