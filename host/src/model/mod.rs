//! Talking to language models: the conversation as capstan keeps it, the
//! provider trait every model speaks through, and the providers.
//!
//! The types here are provider-neutral; each provider translates them to
//! and from its wire format (Anthropic Messages, OpenAI-compatible Chat
//! Completions) and reports a stream of [`StreamEvent`]s as the answer
//! arrives.

pub mod anthropic;
pub mod conversation;
pub mod listing;
pub mod openai;
pub mod probe;
pub mod retry;
pub mod scripted;
pub mod sse;
pub mod transport;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Who said something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user, and tool results sent back on the user's side.
    User,
    /// The model.
    Assistant,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// The model asks for a tool call.
    ToolUse {
        /// The call's id, unique in the conversation.
        id: String,
        /// The tool's name as the model knows it.
        name: String,
        /// The input, a JSON object.
        input: serde_json::Value,
    },
    /// The result of a tool call, sent back to the model.
    ToolResult {
        /// The id of the call this answers.
        tool_use_id: String,
        /// The result (or error) as text.
        content: String,
        /// Whether the call failed.
        is_error: bool,
        /// Images the result carries (an MCP tool's screenshot, a chart),
        /// sent to the model after the text; absent from older transcripts.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Image>,
    },
}

/// An image a tool result carries, as the model APIs take it inline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// Its media type (`image/png`, `image/jpeg`, `image/gif`,
    /// `image/webp`).
    pub media_type: String,
    /// Its bytes, base64-encoded (standard alphabet, padded).
    pub data: String,
}

impl Image {
    /// The media types both providers accept in a request.
    pub const MEDIA_TYPES: [&'static str; 4] =
        ["image/png", "image/jpeg", "image/gif", "image/webp"];

    /// The most base64 characters one image may have in a request or a
    /// transcript (the Messages API takes 5 MB per image); a larger one
    /// is replaced by a note.
    pub const MAX_DATA_LEN: usize = 5 * 1024 * 1024;

    /// The `data:` URL of the image (OpenAI-compatible `image_url`).
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.media_type, self.data)
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said.
    pub content: Vec<Block>,
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// The name the model calls it by (letters, digits, `_` and `-`).
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON Schema of its input.
    pub input_schema: serde_json::Value,
}

/// One request to a model.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The model's id, as the provider knows it.
    pub model: String,
    /// The system prompt.
    pub system: String,
    /// The conversation so far; it ends with a user message.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolDef>,
    /// The most tokens the answer may have.
    pub max_tokens: u32,
    /// Whether this request asks for a summary of the conversation so far
    /// (compaction) rather than for the next turn. Real models see only
    /// the instruction in the last message; a scripted model answers it
    /// with a summary and goes on with its script after.
    pub summary: bool,
}

/// The words a refused tool call's result starts with: the agent writes
/// them, and a scripted model recognises a refusal by them.
pub const REFUSAL_PREFIX: &str = "Permission denied:";

/// Whether `name` is a valid tool (or plugin) name: a lowercase letter,
/// then lowercase letters, digits, `-` and `_`. The model sees a plugin's
/// tool as `plugin.tool`.
pub fn valid_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It finished its turn.
    EndTurn,
    /// It wants tool calls run.
    ToolUse,
    /// It ran into `max_tokens`.
    MaxTokens,
    /// It produced a stop sequence.
    StopSequence,
    /// Anything else the provider said.
    Other(String),
}

/// Tokens counted for one answer (or a session, summed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens billed at the normal rate.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Adds another count to this one.
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }
}

/// Something the model produced, reported as it arrives.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// More text.
    TextDelta(String),
    /// A tool call began.
    ToolUseStarted {
        /// Its id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// A tool call is complete, with its whole input.
    ToolUseFinished {
        /// Its id.
        id: String,
        /// The tool's name.
        name: String,
        /// The parsed input.
        input: serde_json::Value,
    },
    /// The request is being retried after a failure.
    Retrying {
        /// Which attempt comes next (2 for the first retry).
        attempt: u32,
        /// How long capstan waits first.
        after: Duration,
        /// What went wrong.
        reason: String,
    },
}

/// A complete answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// What the model said, in order.
    pub content: Vec<Block>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Tokens used.
    pub usage: Usage,
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The key was missing, wrong or lacks permission (401, 403).
    #[error("{provider} refused the API key ({status}): {message}; check the key in {key_var}")]
    Auth {
        /// The provider's name.
        provider: String,
        /// The HTTP status.
        status: u16,
        /// What the provider said.
        message: String,
        /// Where the key comes from.
        key_var: String,
    },
    /// The model does not exist (404).
    #[error("{provider} does not know model `{model}`: {message}; pick another with --model")]
    ModelNotFound {
        /// The provider's name.
        provider: String,
        /// The model asked for.
        model: String,
        /// What the provider said.
        message: String,
    },
    /// The conversation is longer than the model's context window.
    #[error(
        "the conversation is too long for the model's context: {message}; start a new session or /clear"
    )]
    ContextTooLong {
        /// What the provider said.
        message: String,
    },
    /// The request was rejected for another reason (400 and other 4xx).
    #[error("{provider} rejected the request ({status}): {message}")]
    BadRequest {
        /// The provider's name.
        provider: String,
        /// The HTTP status.
        status: u16,
        /// What the provider said.
        message: String,
    },
    /// Too many requests (429).
    #[error("rate limited by {provider}: {message}")]
    RateLimited {
        /// The provider's name.
        provider: String,
        /// How long the provider asked to wait, if it said.
        retry_after: Option<Duration>,
        /// What the provider said.
        message: String,
    },
    /// The provider is overloaded (529, `overloaded_error`).
    #[error("{provider} is overloaded: {message}")]
    Overloaded {
        /// The provider's name.
        provider: String,
        /// How long the provider asked to wait, if it said.
        retry_after: Option<Duration>,
        /// What the provider said.
        message: String,
    },
    /// A server-side failure (5xx, 408, 409).
    #[error("{provider} failed ({status}): {message}")]
    Server {
        /// The provider's name.
        provider: String,
        /// The HTTP status.
        status: u16,
        /// How long the provider asked to wait, if it said.
        retry_after: Option<Duration>,
        /// What the provider said.
        message: String,
    },
    /// The connection failed or broke.
    #[error("cannot reach {provider} at {url}: {message}")]
    Connection {
        /// The provider's name.
        provider: String,
        /// The endpoint.
        url: String,
        /// What failed.
        message: String,
    },
    /// The server did not start a response in time.
    #[error(
        "{provider} at {url} sent no response within {} s of the request; the server may be overloaded or stuck: check it, or give it longer with `response_timeout` in the [model] table of your config",
        waited.as_secs_f64()
    )]
    NoResponse {
        /// The provider's name.
        provider: String,
        /// The endpoint.
        url: String,
        /// How long capstan waited.
        waited: Duration,
    },
    /// The stream ended early, went silent, or could not be understood.
    #[error("the answer from {provider} broke off: {message}")]
    Stream {
        /// The provider's name.
        provider: String,
        /// What was wrong.
        message: String,
    },
}

impl ModelError {
    /// Whether trying the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. }
                | Self::Overloaded { .. }
                | Self::Server { .. }
                | Self::Connection { .. }
                | Self::NoResponse { .. }
                | Self::Stream { .. }
        )
    }

    /// How long the provider asked to wait before retrying, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. }
            | Self::Overloaded { retry_after, .. }
            | Self::Server { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// A future a provider returns.
pub type ModelFuture<'a> = Pin<Box<dyn Future<Output = Result<Response, ModelError>> + Send + 'a>>;

/// Receives stream events as they arrive.
pub type EventSink<'a> = &'a mut (dyn FnMut(StreamEvent) + Send);

/// A language model behind some API.
pub trait Provider: Send + Sync {
    /// The provider's name, for messages ("anthropic", "openai-compatible",
    /// "scripted").
    fn name(&self) -> &str;

    /// Sends a request and streams the answer: text and tool calls are
    /// reported to `events` as they arrive, and the whole answer is returned
    /// at the end. Transient failures are retried inside, reported as
    /// [`StreamEvent::Retrying`].
    fn stream<'a>(&'a self, request: &'a Request, events: EventSink<'a>) -> ModelFuture<'a>;

    /// The API's base URL, for `/status`; `None` for a model that is not
    /// behind one.
    fn base_url(&self) -> Option<&str> {
        None
    }

    /// The models the provider offers, as its server lists them (see
    /// [`listing`]); empty when it has no list.
    fn list_models(&self) -> listing::ModelListFuture<'_> {
        Box::pin(std::future::ready(Ok(Vec::new())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_checked() {
        assert!(valid_tool_name("read"));
        assert!(valid_tool_name("read-file_2"));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name("Read"));
        assert!(!valid_tool_name("2read"));
        assert!(!valid_tool_name("fs.read"));
    }
}
