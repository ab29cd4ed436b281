//! The HTTP side shared by the providers: sending a request, turning a
//! failed status into a [`ModelError`] that says what to do, and reading a
//! Server-Sent Events body with an idle watchdog.

use std::collections::VecDeque;
use std::error::Error as _;
use std::time::{Duration, SystemTime};

use super::retry::{RetryPolicy, parse_retry_after};
use super::sse::{SseEvent, SseParser};
use super::{EventSink, ModelError, Response};

/// What an error message needs to know about the request.
#[derive(Debug, Clone)]
pub struct ErrorContext {
    /// The provider's name.
    pub provider: String,
    /// The endpoint.
    pub url: String,
    /// The variable the key comes from.
    pub key_var: String,
    /// The model asked for.
    pub model: String,
}

impl ErrorContext {
    /// A [`ModelError::Stream`] for this provider.
    pub fn stream_error(&self, message: impl Into<String>) -> ModelError {
        ModelError::Stream {
            provider: self.provider.clone(),
            message: message.into(),
        }
    }

    /// Turns a failed HTTP status and its body into an error.
    pub fn error_for_status(
        &self,
        status: u16,
        retry_after: Option<Duration>,
        body: &str,
    ) -> ModelError {
        let (kind, message) = read_error_body(body);
        let message = message.unwrap_or_else(|| {
            let reason = reqwest::StatusCode::from_u16(status)
                .ok()
                .and_then(|status| status.canonical_reason());
            reason.unwrap_or("no details given").to_string()
        });
        self.classify(status, kind.as_deref(), message, retry_after)
    }

    /// Turns an error the provider reported by kind (an `error` event in a
    /// stream, e.g. `overloaded_error`) into an error.
    pub fn error_for_kind(&self, kind: &str, message: String) -> ModelError {
        let status = match kind {
            "invalid_request_error" => 400,
            "authentication_error" => 401,
            "permission_error" => 403,
            "not_found_error" => 404,
            "request_too_large" => 413,
            "rate_limit_error" => 429,
            "timeout_error" => 504,
            "overloaded_error" => 529,
            _ => 500,
        };
        self.classify(status, Some(kind), message, None)
    }

    fn classify(
        &self,
        status: u16,
        kind: Option<&str>,
        message: String,
        retry_after: Option<Duration>,
    ) -> ModelError {
        let provider = self.provider.clone();
        if status == 529 || kind == Some("overloaded_error") {
            return ModelError::Overloaded {
                provider,
                retry_after,
                message,
            };
        }
        match status {
            401 | 403 => ModelError::Auth {
                provider,
                status,
                message,
                key_var: self.key_var.clone(),
            },
            404 => ModelError::ModelNotFound {
                provider,
                model: self.model.clone(),
                message,
            },
            429 => ModelError::RateLimited {
                provider,
                retry_after,
                message,
            },
            408 | 409 | 500..=599 => ModelError::Server {
                provider,
                status,
                retry_after,
                message,
            },
            _ if mentions_context_too_long(kind, &message) => {
                ModelError::ContextTooLong { message }
            }
            _ => ModelError::BadRequest {
                provider,
                status,
                message,
            },
        }
    }

    /// The server did not start its response within `waited`.
    pub fn no_response(&self, waited: Duration) -> ModelError {
        ModelError::NoResponse {
            provider: self.provider.clone(),
            url: self.url.clone(),
            waited,
        }
    }

    /// A connection-level failure.
    pub fn connection_error(&self, error: &reqwest::Error) -> ModelError {
        ModelError::Connection {
            provider: self.provider.clone(),
            url: self.url.clone(),
            message: describe(error),
        }
    }
}

/// Whether a rejection says the prompt does not fit the context window, in
/// the words the common providers use.
fn mentions_context_too_long(kind: Option<&str>, message: &str) -> bool {
    let message = message.to_lowercase();
    kind == Some("context_length_exceeded")
        || (message.contains("too long")
            && (message.contains("prompt") || message.contains("context")))
        || message.contains("context length")
        || message.contains("context_length")
        || message.contains("context window")
        || message.contains("maximum context")
}

/// The error kind and message from an error body in either wire format:
/// Anthropic's `{"type":"error","error":{"type","message"}}` or OpenAI's
/// `{"error":{"message","type","code"}}`; a body that is not JSON is its
/// own message.
fn read_error_body(body: &str) -> (Option<String>, Option<String>) {
    let trimmed = body.trim();
    let Ok(json) = serde_json::from_str::<serde_json::Value>(trimmed) else {
        let message = (!trimmed.is_empty()).then(|| trimmed.chars().take(500).collect());
        return (None, message);
    };
    let error = json.get("error").unwrap_or(&json);
    if let Some(text) = error.as_str() {
        return (None, Some(text.to_string()));
    }
    let text_field = |name: &str| {
        error
            .get(name)
            .and_then(|value| value.as_str())
            .map(str::to_string)
    };
    let kind = text_field("code")
        .filter(|code| code == "context_length_exceeded")
        .or_else(|| text_field("type"));
    let message = text_field("message").or_else(|| Some(trimmed.chars().take(500).collect()));
    (kind, message)
}

/// An error and its causes on one line.
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// How long [`send`] waits.
#[derive(Debug, Clone, Copy)]
pub struct Waits {
    /// For the response's status and headers, once the request is sent.
    pub response: Duration,
    /// For more of an error response's body.
    pub idle: Duration,
}

/// Sends a request; a failed status becomes an error, with the body read
/// for the provider's explanation. A server that takes the request but
/// does not start its response within `waits.response` is
/// [`ModelError::NoResponse`].
pub async fn send(
    request: reqwest::RequestBuilder,
    context: &ErrorContext,
    waits: Waits,
) -> Result<reqwest::Response, ModelError> {
    let response = match tokio::time::timeout(waits.response, request.send()).await {
        Ok(sent) => sent.map_err(|error| context.connection_error(&error))?,
        Err(_elapsed) => return Err(context.no_response(waits.response)),
    };
    let status = response.status();
    tracing::debug!(status = status.as_u16(), "model response started");
    if status.is_success() {
        return Ok(response);
    }
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| parse_retry_after(value, SystemTime::now()));
    let body = match tokio::time::timeout(waits.idle, response.text()).await {
        Ok(Ok(body)) => body,
        _ => String::new(),
    };
    Err(context.error_for_status(status.as_u16(), retry_after, &body))
}

/// Sends a streaming request with `retry`'s waits and reads its events
/// into the answer with `reader`: one provider's whole exchange.
pub async fn stream_answer(
    request: reqwest::RequestBuilder,
    context: ErrorContext,
    retry: &RetryPolicy,
    reader: &mut impl ReadEvents,
    events: EventSink<'_>,
) -> Result<Response, ModelError> {
    let idle = retry.idle_timeout;
    let waits = Waits {
        response: retry.response_timeout,
        idle,
    };
    let response = send(request, &context, waits).await?;
    EventStream::new(response, idle, context)
        .answer(reader, events)
        .await
}

/// How a provider reads its stream: event by event, checking what the
/// server sent, until one event completes the answer.
pub trait ReadEvents {
    /// Takes the next event; returns the whole answer once it is complete.
    fn read(
        &mut self,
        event: &SseEvent,
        events: EventSink<'_>,
    ) -> Result<Option<Response>, ModelError>;

    /// The first whole answer, or error, that `stream` holds, if any.
    fn read_all(
        &mut self,
        stream: &[SseEvent],
        events: EventSink<'_>,
    ) -> Option<Result<Response, ModelError>> {
        stream
            .iter()
            .find_map(|event| self.read(event, &mut *events).transpose())
    }
}

/// The events of a streamed response body, read with an idle watchdog.
pub struct EventStream {
    response: reqwest::Response,
    parser: SseParser,
    ready: VecDeque<SseEvent>,
    idle_timeout: Duration,
    context: ErrorContext,
}

impl EventStream {
    /// Reads events from `response`, failing if no bytes arrive for
    /// `idle_timeout`.
    pub fn new(response: reqwest::Response, idle_timeout: Duration, context: ErrorContext) -> Self {
        Self {
            response,
            parser: SseParser::new(),
            ready: VecDeque::new(),
            idle_timeout,
            context,
        }
    }

    /// Feeds each event to `reader` until it completes the answer; a body
    /// that ends first is an error.
    pub async fn answer(
        mut self,
        reader: &mut impl ReadEvents,
        events: EventSink<'_>,
    ) -> Result<Response, ModelError> {
        while let Some(event) = self.next().await? {
            if let Some(response) = reader.read(&event, &mut *events)? {
                return Ok(response);
            }
        }
        Err(self
            .context
            .stream_error("the connection closed before the answer was complete"))
    }

    /// The next event, or `None` once the server closed the body.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, ModelError> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(Some(event));
            }
            let chunk = match tokio::time::timeout(self.idle_timeout, self.response.chunk()).await {
                Err(_) => {
                    return Err(self.context.stream_error(format!(
                        "no data for {} s",
                        self.idle_timeout.as_secs_f64()
                    )));
                }
                Ok(Err(error)) => {
                    return Err(self
                        .context
                        .stream_error(format!("the connection broke: {}", describe(&error))));
                }
                Ok(Ok(None)) => return Ok(None),
                Ok(Ok(Some(chunk))) => chunk,
            };
            let events = self
                .parser
                .feed(&chunk)
                .map_err(|error| self.context.stream_error(error.to_string()))?;
            self.ready.extend(events);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> ErrorContext {
        ErrorContext {
            provider: "anthropic".into(),
            url: "http://127.0.0.1:1/v1/messages".into(),
            key_var: "ANTHROPIC_API_KEY".into(),
            model: "claude-x".into(),
        }
    }

    #[test]
    fn auth_error_names_the_key_variable() {
        let error = context().error_for_status(
            401,
            None,
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
        );
        assert!(matches!(error, ModelError::Auth { status: 401, .. }));
        let text = error.to_string();
        assert!(text.contains("ANTHROPIC_API_KEY"), "{text}");
        assert!(text.contains("invalid x-api-key"), "{text}");
    }

    #[test]
    fn statuses_map_to_kinds() {
        let context = context();
        assert!(matches!(
            context.error_for_status(404, None, r#"{"error":{"message":"no such model"}}"#),
            ModelError::ModelNotFound { ref model, .. } if model == "claude-x"
        ));
        assert!(matches!(
            context.error_for_status(429, Some(Duration::from_secs(3)), ""),
            ModelError::RateLimited {
                retry_after: Some(_),
                ..
            }
        ));
        assert!(matches!(
            context.error_for_status(529, None, ""),
            ModelError::Overloaded { .. }
        ));
        assert!(matches!(
            context.error_for_status(503, None, "<html>down</html>"),
            ModelError::Server { status: 503, ref message, .. } if message == "<html>down</html>"
        ));
        assert!(matches!(
            context.error_for_status(408, None, ""),
            ModelError::Server { .. }
        ));
        assert!(matches!(
            context.error_for_status(
                400,
                None,
                r#"{"error":{"message":"max_tokens: must be positive"}}"#
            ),
            ModelError::BadRequest { status: 400, .. }
        ));
    }

    #[test]
    fn context_too_long_in_both_wire_formats() {
        let context = context();
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        assert!(matches!(
            context.error_for_status(400, None, anthropic),
            ModelError::ContextTooLong { ref message } if message.contains("210000")
        ));
        let openai = r#"{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        assert!(matches!(
            context.error_for_status(400, None, openai),
            ModelError::ContextTooLong { .. }
        ));
    }

    #[test]
    fn stream_error_kinds() {
        let context = context();
        assert!(matches!(
            context.error_for_kind("overloaded_error", "Overloaded".into()),
            ModelError::Overloaded { .. }
        ));
        assert!(matches!(
            context.error_for_kind("api_error", "oops".into()),
            ModelError::Server { status: 500, .. }
        ));
        assert!(matches!(
            context.error_for_kind("invalid_request_error", "bad".into()),
            ModelError::BadRequest { status: 400, .. }
        ));
    }
}
