//! Print mode's JSON output in Claude Code's headless shapes (`claude -p
//! --output-format json|stream-json`): the `system`/`init` message, the
//! `assistant` and `user` messages of the conversation, and the `result`
//! message, with the fields Claude Code's SDK documents; capstan's own
//! events (`text_delta`, `permission`, `tool_started`, `tool_result`,
//! `retry`, `notice`, `compact`, `input_error`, and the calls' `tool_output`,
//! `tool_log`, `tool_progress`) come between them, each with its own
//! `type`, so a consumer that skips unknown types reads a Claude Code
//! stream. Every event carries the `session_id`; tools are named as the
//! model calls them (`fs__read`) everywhere.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use futures_util::future::LocalBoxFuture;

use super::driver_questions::DriverQuestions;
use super::partial_messages::PartialMessages;
use super::render::StreamJsonFrontend;
use crate::agent::{AgentEvent, Frontend};
use crate::model::{Block, Usage};
use crate::policy::Outcome;

/// The front end of `--output-format json` (quiet) and `stream-json`
/// (one event per line): it also keeps what the result reports — time
/// spent waiting for the model, and the calls that were denied.
pub struct Headless {
    session_id: String,
    model: String,
    stream: bool,
    model_names: HashMap<String, String>,
    last_usage: Usage,
    answers: u64,
    inputs: HashMap<String, Value>,
    denials: Vec<Value>,
    request_started: Option<Instant>,
    api_time: Duration,
    driver: Option<DriverQuestions>,
    partial: Option<PartialMessages>,
    capstan_events: bool,
    results: HashMap<String, Value>,
    first_request: Option<Instant>,
    first_content: Option<Instant>,
    begun: Vec<String>,
}

impl Headless {
    /// A front end for session `session_id` with `model`; `stream` emits
    /// every event, otherwise only the result is printed (by the caller).
    /// `tools` pairs each tool's full name with the name the model calls
    /// it by.
    pub fn new(
        session_id: &str,
        model: &str,
        stream: bool,
        tools: impl IntoIterator<Item = (String, String)>,
    ) -> Self {
        Self {
            session_id: session_id.to_string(),
            model: model.to_string(),
            stream,
            model_names: tools.into_iter().collect(),
            last_usage: Usage::default(),
            answers: 0,
            inputs: HashMap::new(),
            denials: Vec::new(),
            request_started: None,
            api_time: Duration::ZERO,
            driver: None,
            partial: None,
            capstan_events: false,
            results: HashMap::new(),
            first_request: None,
            first_content: None,
            begun: Vec::new(),
        }
    }

    /// Also emits capstan's own events (`text_delta`, `permission`,
    /// `tool_started`, `tool_result`, `retry`, `notice`, `compact`), which
    /// Claude Code's SDKs do not know (`--capstan-events`). Without it a
    /// notice goes to stderr.
    pub fn include_capstan_events(&mut self) {
        self.capstan_events = true;
    }

    /// Whether capstan's own events are emitted.
    pub fn capstan_events(&self) -> bool {
        self.capstan_events
    }

    /// Also emits the answer as it streams, in `stream_event` messages
    /// (`--include-partial-messages`).
    pub fn include_partial_messages(&mut self) {
        self.partial = Some(PartialMessages::default());
    }

    /// Emits `events` of the Messages API's stream as `stream_event`
    /// messages.
    fn emit_partial(&self, id: &str, events: Vec<Value>) {
        for event in events {
            self.emit(json!({
                "type": "stream_event",
                "event": event,
                "parent_tool_use_id": null,
                "uuid": new_uuid(),
                "api_message_id": id,
            }));
        }
    }

    /// The `assistant` message of one block of answer `id`, as Claude
    /// Code sends one per content block.
    fn assistant_message(&self, id: &str, block: &Block) -> Value {
        json!({
            "type": "assistant",
            "uuid": new_uuid(),
            "parent_tool_use_id": null,
            "timestamp": now(),
            "message": {
                "id": id,
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [block],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": usage_json(&self.last_usage),
                "context_management": null,
            },
        })
    }

    /// Emits a complete answer: one `assistant` message per block, each
    /// (with `--include-partial-messages`) before its block's
    /// `content_block_stop`, then the end of the answer's stream.
    fn emit_answer(&mut self, message: &crate::model::Message) {
        self.answers += 1;
        let id = self.message_id(self.answers);
        for block in &message.content {
            let events = match (&mut self.partial, block) {
                (Some(partial), Block::Text { text }) => partial.text_block(text),
                (Some(partial), Block::ToolUse { id, name, input }) => {
                    partial.tool_block(id, name, input)
                }
                _ => Vec::new(),
            };
            let mut events = events;
            let stop = events.pop();
            self.emit_partial(&id, events);
            self.emit(self.assistant_message(&id, block));
            self.emit_partial(&id, stop.into_iter().collect());
        }
        if let Some(partial) = &mut self.partial {
            let events = partial.finish(message, &self.last_usage);
            self.emit_partial(&id, events);
        }
    }

    /// The user messages carrying tool results, one per result as Claude
    /// Code sends them, each with its `tool_use_result`.
    fn emit_tool_results(&mut self, message: &crate::model::Message) {
        for block in &message.content {
            let mut value = json!({
                "type": "user",
                "uuid": new_uuid(),
                "parent_tool_use_id": null,
                "timestamp": now(),
                "message": { "role": "user", "content": results_json(std::slice::from_ref(block)) },
            });
            if let Block::ToolResult { tool_use_id, .. } = block
                && let Some(result) = self.results.remove(tool_use_id)
            {
                value["tool_use_result"] = result;
            }
            self.emit(value);
        }
    }

    /// The id of the `answer`th answer's message.
    fn message_id(&self, answer: u64) -> String {
        format!("msg_{}_{answer}", self.session_id.replace('-', ""))
    }

    /// Names `model` in the assistant messages from now on.
    pub fn set_model(&mut self, model: &str) {
        self.model = model.to_string();
    }

    /// Permission questions go to the program driving the session through
    /// `questions` (`--permission-prompt-tool stdio`).
    pub fn ask_driver_through(&mut self, questions: DriverQuestions) {
        self.driver = Some(questions);
    }

    /// Prints `value` as one line with the session's id.
    pub fn emit(&self, mut value: Value) {
        if let Some(object) = value.as_object_mut() {
            object.insert("session_id".into(), json!(self.session_id));
        }
        StreamJsonFrontend::emit(&value);
    }

    /// The calls denied since the last call, as `permission_denials`.
    pub fn take_denials(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.denials)
    }

    /// The time spent waiting for the model since the last call.
    pub fn take_api_time(&mut self) -> Duration {
        std::mem::take(&mut self.api_time)
    }

    /// When the first request and first content came since the last
    /// call, from `started`.
    pub fn take_timings(&mut self, started: Instant) -> Timings {
        let since = |at: Option<Instant>| at.map(|at| at.saturating_duration_since(started));
        Timings {
            to_request: since(self.first_request.take()),
            to_content: since(self.first_content.take()),
        }
    }

    /// With `--include-partial-messages`, the ids of the answers whose
    /// streams began since the last call (Claude Code's
    /// `begun_message_ids`).
    pub fn take_begun(&mut self) -> Option<Vec<String>> {
        let begun = std::mem::take(&mut self.begun);
        (self.stream && self.partial.is_some()).then_some(begun)
    }

    fn model_name<'a>(&'a self, tool: &'a str) -> &'a str {
        self.model_names.get(tool).map_or(tool, String::as_str)
    }
}

impl Frontend for Headless {
    fn ask_driver<'a>(&'a mut self, request: Value) -> LocalBoxFuture<'a, Result<Value, String>> {
        match self.driver.clone() {
            Some(questions) => Box::pin(async move { questions.ask(request).await }),
            None => Box::pin(std::future::ready(Err(
                "--permission-prompt-tool stdio needs --input-format stream-json, where the driver answers".to_string(),
            ))),
        }
    }

    fn event(&mut self, event: AgentEvent<'_>) {
        let value = match event {
            AgentEvent::Thinking => {
                let now = Instant::now();
                self.request_started = Some(now);
                self.first_request.get_or_insert(now);
                if self.stream && self.partial.is_some() {
                    // Claude Code's stream says a request is under way.
                    self.emit(json!({
                        "type": "system",
                        "subtype": "status",
                        "status": "requesting",
                        "uuid": new_uuid(),
                    }));
                    let id = self.message_id(self.answers + 1);
                    if let Some(partial) = &mut self.partial {
                        let events = partial.start(&id, &self.model);
                        self.emit_partial(&id, events);
                    }
                    self.begun.push(id);
                }
                return;
            }
            AgentEvent::PreparingTool { .. } => return,
            // Claude Code's status message while the conversation is
            // summarised; `null` again once it is done.
            AgentEvent::Compacting { .. } => {
                if self.stream {
                    self.emit(json!({
                        "type": "system",
                        "subtype": "status",
                        "status": "compacting",
                        "uuid": new_uuid(),
                    }));
                }
                return;
            }
            AgentEvent::Usage(usage) => {
                if let Some(started) = self.request_started.take() {
                    self.api_time += started.elapsed();
                }
                self.last_usage = usage;
                return;
            }
            AgentEvent::Text(text) => {
                self.first_content.get_or_insert_with(Instant::now);
                if self.stream
                    && let Some(partial) = &mut self.partial
                {
                    let events = partial.text(text);
                    let id = self.message_id(self.answers + 1);
                    self.emit_partial(&id, events);
                }
                json!({ "type": "text_delta", "text": text })
            }
            AgentEvent::Retrying {
                attempt,
                after,
                reason,
            } => json!({
                "type": "retry",
                "attempt": attempt,
                "after_ms": u64::try_from(after.as_millis()).unwrap_or(u64::MAX),
                "reason": reason,
            }),
            AgentEvent::Answer(message) => {
                self.first_content.get_or_insert_with(Instant::now);
                for block in &message.content {
                    if let Block::ToolUse { id, input, .. } = block {
                        self.inputs.insert(id.clone(), input.clone());
                    }
                }
                if self.stream {
                    self.emit_answer(message);
                } else {
                    self.answers += 1;
                }
                return;
            }
            AgentEvent::Permission { id, tool, decision } => {
                let tool = self.model_name(tool).to_string();
                if decision.outcome != Outcome::Allow {
                    self.denials.push(json!({
                        "tool_name": tool,
                        "tool_use_id": id,
                        "tool_input": self.inputs.get(id).cloned().unwrap_or(json!({})),
                    }));
                }
                json!({
                    "type": "permission",
                    "tool_use_id": id,
                    "tool": tool,
                    "outcome": if decision.outcome == Outcome::Allow { "allow" } else { "deny" },
                    "reason": decision.reason,
                })
            }
            AgentEvent::ToolStarted { id, tool, input } => json!({
                "type": "tool_started",
                "tool_use_id": id,
                "tool": self.model_name(tool),
                "input": input,
            }),
            AgentEvent::ToolFinished {
                id,
                tool,
                is_error,
                output,
                duration,
                ..
            } => {
                let duration_ms = duration.as_secs_f64() * 1e3;
                self.results.insert(
                    id.to_string(),
                    json!({
                        "tool": self.model_name(tool),
                        "is_error": is_error,
                        "content": output,
                        "duration_ms": duration_ms,
                    }),
                );
                json!({
                    "type": "tool_result",
                    "tool_use_id": id,
                    "tool": self.model_name(tool),
                    "is_error": is_error,
                    "content": output,
                    "duration_ms": duration_ms,
                })
            }
            AgentEvent::ToolResults(message) => {
                if self.stream {
                    self.emit_tool_results(message);
                }
                self.results.clear();
                return;
            }
            AgentEvent::Notice(text) => {
                if !self.capstan_events {
                    eprintln!("capstan: {}", super::escape::message(text));
                }
                json!({ "type": "notice", "text": text })
            }
            AgentEvent::Compacted(report) => {
                if self.stream {
                    self.emit(json!({
                        "type": "system",
                        "subtype": "status",
                        "status": null,
                        "uuid": new_uuid(),
                    }));
                    self.emit(json!({
                        "type": "system",
                        "subtype": "compact_boundary",
                        "compact_metadata": {
                            "trigger": report.trigger.name(),
                            "pre_tokens": report.tokens_before.unwrap_or(0),
                        },
                        "uuid": new_uuid(),
                    }));
                }
                json!({
                "type": "compact",
                "trigger": report.trigger.name(),
                "messages_before": report.messages_before,
                "tokens_before": report.tokens_before,
                "summary": report.summary,
                })
            }
        };
        // What is left is capstan's own, emitted only when asked.
        if self.stream && self.capstan_events {
            self.emit(value);
        }
    }
}

/// Tool results as Claude Code's headless output shows them: a result
/// that carries images has a list of `text` and base64 `image` blocks as
/// its `content`, as the Messages API takes it.
fn results_json(content: &[Block]) -> Value {
    Value::Array(
        content
            .iter()
            .map(|block| match block {
                Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                    images,
                } if !images.is_empty() => json!({
                    "type": "tool_result",
                    "tool_use_id": tool_use_id,
                    "content": crate::model::anthropic::tool_result_content(content, images),
                    "is_error": is_error,
                }),
                other => json!(other),
            })
            .collect(),
    )
}

/// Token counts in the Messages API's shape, as Claude Code reports them
/// (its SDK's `NonNullableUsage`): the four counts, and the fields typed
/// consumers expect beside them — no server tools run (capstan's web
/// tools are its own), the standard tier, and every cache write at the
/// default five-minute lifetime capstan asks for.
pub fn usage_json(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_creation": {
            "ephemeral_1h_input_tokens": 0,
            "ephemeral_5m_input_tokens": usage.cache_write_tokens,
        },
        "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": "standard",
        "output_tokens_details": {"thinking_tokens": 0},
        "speed": "standard",
    })
}

/// The result's `modelUsage`: the prompt's tokens and cost under the
/// model's name, in the camel-case fields of Claude Code's SDK
/// (`ModelUsage`); empty when no model was reached.
fn model_usage_json(summary: &Summary<'_>) -> Value {
    // As Claude Code: no entry for a model that used no tokens.
    if summary.model.is_empty() || summary.usage == Usage::default() {
        return json!({});
    }
    let usage = &summary.usage;
    json!({
        summary.model: {
            "inputTokens": usage.input_tokens,
            "outputTokens": usage.output_tokens,
            "cacheReadInputTokens": usage.cache_read_tokens,
            "cacheCreationInputTokens": usage.cache_write_tokens,
            "webSearchRequests": 0,
            "costUSD": summary.cost_usd.unwrap_or(0.0),
            "contextWindow": summary.context_window,
            "maxOutputTokens": summary.max_output_tokens,
            "thinkingTokens": 0,
            "cacheCreationEphemeral5mInputTokens": usage.cache_write_tokens,
            "cacheCreationEphemeral1hInputTokens": 0,
            "canonicalModel": summary.model,
            "provider": summary.provider,
            "costBasis": "list",
        }
    })
}

/// The tokens used between two readings of a session's running total.
pub fn usage_since(before: &Usage, now: &Usage) -> Usage {
    Usage {
        input_tokens: now.input_tokens.saturating_sub(before.input_tokens),
        output_tokens: now.output_tokens.saturating_sub(before.output_tokens),
        cache_read_tokens: now
            .cache_read_tokens
            .saturating_sub(before.cache_read_tokens),
        cache_write_tokens: now
            .cache_write_tokens
            .saturating_sub(before.cache_write_tokens),
    }
}

/// How a prompt ended, for its `result` message.
pub struct Ending {
    /// `success`, `error_max_turns` or `error_during_execution` (a
    /// model's failure is `success` with `is_error`, as in Claude Code).
    pub subtype: &'static str,
    /// Whether the prompt failed.
    pub is_error: bool,
    /// Why the model stopped (`end_turn`, `max_tokens`, ...), when it did.
    pub stop_reason: Option<String>,
    /// The answer's text (what the model said last), or the API error.
    pub result: String,
    /// What went wrong, when something did.
    pub error: Option<String>,
    /// capstan's exit kind (`ok`, `max_turns`, `model_error`, ...).
    pub kind: &'static str,
    /// Claude Code's `terminal_reason` (`completed`, `api_error`, ...).
    pub terminal_reason: Option<&'static str>,
    /// The model's API error, when that ended the prompt.
    pub api_error: Option<ApiError>,
}

/// A model API's failure as Claude Code reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status, when there was one (not for a broken connection).
    pub status: Option<u16>,
    /// The API's error type (`invalid_request_error`, `api_error`, ...).
    pub kind: Option<&'static str>,
    /// The SDK's `SDKAssistantMessageError` (`invalid_request`,
    /// `server_error`, ...).
    pub error: &'static str,
}

impl ApiError {
    /// How `error` is reported.
    pub fn of(error: &crate::model::ModelError) -> Self {
        use crate::model::ModelError as E;
        let (status, kind, error) = match error {
            E::Auth { status: 403, .. } => {
                (Some(403), Some("permission_error"), "authentication_failed")
            }
            E::Auth { status, .. } => (
                Some(*status),
                Some("authentication_error"),
                "authentication_failed",
            ),
            E::ModelNotFound { .. } => (Some(404), Some("not_found_error"), "model_not_found"),
            E::ContextTooLong { .. } => {
                (Some(400), Some("invalid_request_error"), "invalid_request")
            }
            E::BadRequest { status, .. } => (
                Some(*status),
                Some("invalid_request_error"),
                "invalid_request",
            ),
            E::RateLimited { .. } => (Some(429), Some("rate_limit_error"), "rate_limit"),
            E::Overloaded { .. } => (Some(529), Some("overloaded_error"), "overloaded"),
            E::Server { status, .. } => (Some(*status), Some("api_error"), "server_error"),
            _ => (None, None, "unknown"),
        };
        Self {
            status,
            kind,
            error,
        }
    }

    /// The text Claude Code shows for it: `API Error: ...` (capstan's
    /// message names the status).
    pub fn text(message: &str) -> String {
        format!("API Error: {message}")
    }
}

/// The `assistant` message Claude Code sends when the model's API failed:
/// the error's text from the `<synthetic>` model, marked as an API error.
pub fn api_error_message(api: &ApiError, text: &str) -> Value {
    let usage = usage_json(&Usage::default());
    json!({
        "type": "assistant",
        "uuid": new_uuid(),
        "parent_tool_use_id": null,
        "timestamp": now(),
        "message": {
            "id": new_uuid(),
            "type": "message",
            "role": "assistant",
            "model": "<synthetic>",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "stop_sequence",
            "stop_sequence": "",
            "usage": usage,
            "context_management": null,
        },
        "error": api.error,
        "is_api_error_message": true,
        "api_error_status": api.status,
        "api_error_type": api.kind,
    })
}

/// When a prompt's first request left and its first content came, from
/// the prompt's start.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timings {
    /// To the first request.
    pub to_request: Option<Duration>,
    /// To the first streamed content of an answer.
    pub to_content: Option<Duration>,
}

/// What one prompt's `result` message reports.
pub struct Summary<'a> {
    /// How it ended.
    pub ending: Ending,
    /// The session's id.
    pub session_id: &'a str,
    /// The model.
    pub model: &'a str,
    /// The provider's name (`anthropic`, `openai-compatible`).
    pub provider: &'a str,
    /// From the start of the prompt (the first one: of the process).
    pub duration: Duration,
    /// Spent waiting for the model.
    pub api_duration: Duration,
    /// When the first request and the first content came.
    pub timings: Timings,
    /// Model requests this prompt made.
    pub num_turns: u32,
    /// Tool calls the model asked for.
    pub tool_calls: u32,
    /// Tokens this prompt used.
    pub usage: Usage,
    /// Its cost, if the model's prices are known.
    pub cost_usd: Option<f64>,
    /// The calls denied, as `{tool_name, tool_use_id, tool_input}`.
    pub denials: Vec<Value>,
    /// The model's context window in tokens (0 when no model was reached).
    pub context_window: u64,
    /// The most tokens one answer may have.
    pub max_output_tokens: u64,
    /// How many results this process printed before this one.
    pub index: u64,
    /// The ids of the answers streamed, with partial messages.
    pub begun: Option<Vec<String>>,
}

/// The `result` message: Claude Code's fields (an error result's
/// `errors` lists what went wrong, as its SDK's `SDKResultMessage` has
/// it), then capstan's own (`error`, `error_kind`, `model`,
/// `num_tool_calls`). The keys of Claude Code's that capstan leaves out,
/// and why, are in docs/headless.md.
pub fn result_message(summary: Summary<'_>) -> Value {
    let ending = &summary.ending;
    let model_usage = model_usage_json(&summary);
    let mut value = json!({
        "type": "result",
        "subtype": ending.subtype,
        "is_error": ending.is_error,
        "duration_ms": millis(summary.duration),
        "duration_api_ms": millis(summary.api_duration),
        "num_turns": summary.num_turns,
        "result": ending.result,
        "stop_reason": ending.stop_reason,
        "session_id": summary.session_id,
        "total_cost_usd": summary.cost_usd.unwrap_or(0.0),
        "usage": usage_json(&summary.usage),
        "modelUsage": model_usage,
        "model_usage_since_last_result": model_usage,
        "permission_denials": summary.denials,
        "api_error_status": ending.api_error.as_ref().and_then(|api| api.status),
        "fast_mode_state": "off",
        "result_index": summary.index,
        "uuid": new_uuid(),
        "error": ending.error,
        "error_kind": ending.kind,
        "model": summary.model,
        "num_tool_calls": summary.tool_calls,
    });
    let Some(object) = value.as_object_mut() else {
        return value;
    };
    if let Some(reason) = ending.terminal_reason {
        object.insert("terminal_reason".into(), json!(reason));
    }
    if let Some(api) = &ending.api_error {
        object.insert("api_error_type".into(), json!(api.kind));
    }
    if let Some(begun) = summary.begun {
        object.insert("begun_message_ids".into(), json!(begun));
    }
    if ending.subtype == "success" && !ending.is_error {
        let ms = |d: Option<Duration>| d.map(millis);
        if let Some(to_request) = ms(summary.timings.to_request) {
            object.insert("time_to_request_ms".into(), json!(to_request));
        }
        if let Some(to_content) = ms(summary.timings.to_content) {
            object.insert("ttft_ms".into(), json!(to_content));
            object.insert("ttft_stream_ms".into(), json!(to_content));
            object.insert("first_content_frame_ms".into(), json!(to_content));
        }
    }
    if ending.subtype != "success" {
        let errors: Vec<&String> = ending.error.iter().collect();
        object.insert("errors".into(), json!(errors));
    }
    value
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Now, as Claude Code's messages' `timestamp` gives it (RFC 3339, UTC,
/// milliseconds).
fn now() -> String {
    let mut text = crate::timestamp::rfc3339_micros(std::time::SystemTime::now());
    // `.000042Z` to `.000Z`: three digits, as JavaScript's toISOString.
    let dot = text.rfind('.').unwrap_or(text.len());
    text.replace_range(dot + 4..text.len() - 1, "");
    text
}

/// A random version-4 UUID, as Claude Code gives each message.
pub fn new_uuid() -> String {
    let bits = (fastrand::u128(..) & !(0xf000 << 64) | (0x4000 << 64)) & !(0xc << 60) | (0x8 << 60);
    let hex = format!("{bits:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_have_the_version_4_shape() {
        let id = new_uuid();
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'), "{id}");
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"), "{id}");
    }
}
