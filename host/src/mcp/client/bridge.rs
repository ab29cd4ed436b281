//! MCP tools as the agent's tools: each tool of a ready server is a
//! [`ToolHandler`] named `mcp__SERVER__TOOL` (Claude Code's naming, so its
//! permission rules and hook matchers apply unchanged), offered through a
//! [`ToolSource`] whose list follows the servers as they come and go.
//!
//! A tool's `readOnlyHint` makes it read-only for the scheduler (read-only
//! calls run in parallel) and the policy (it runs without asking in
//! `default` mode); any other tool may change things and asks. Results'
//! text is passed on and images go to the model as images (up to
//! [`Image::MAX_DATA_LEN`] each and [`MAX_IMAGES`] a result; beyond that, and
//! for an image type the model APIs do not take, a note says what was left
//! out); audio, embedded resources and resource links are described in a
//! line each, since neither model API takes audio in a tool result. A
//! result the server marks `isError` is an error for the model, with its
//! images kept as a successful result's are. Every
//! call is audited (`mcp_tool_called`), and a call that times out stops
//! the server, which is restarted.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures_util::future::LocalBoxFuture;
use serde_json::{Value, json};

use super::connection::{Connection, RequestError};
use super::supervisor::{RemoteTool, ServerHandle, Status};
use crate::agent::tool::{AgentTool, CallNeeds, ToolCall, ToolHandler, ToolOutcome, ToolSource};
use crate::audit::{AuditEvent, AuditLog, AuditScope};
use crate::model::Image;
use crate::sandbox::{CallError, ToolSpec};

/// The tools of every server of a session.
pub struct McpToolSource {
    servers: Vec<Arc<ServerHandle>>,
    audit: Option<AuditLog>,
    /// The tools as last built, with the generations they were built at.
    built: Mutex<(Vec<u64>, Vec<AgentTool>)>,
}

impl McpToolSource {
    /// The tools of `servers`, calls recorded in `audit`.
    pub fn new(servers: Vec<Arc<ServerHandle>>, audit: Option<AuditLog>) -> Self {
        Self {
            servers,
            audit,
            built: Mutex::new((Vec::new(), Vec::new())),
        }
    }

    fn build(&self) -> Vec<AgentTool> {
        let mut tools = Vec::new();
        for server in &self.servers {
            let view = server.view();
            if view.status != Status::Ready {
                continue;
            }
            for tool in view.tools {
                let handler = McpTool::new(server.clone(), tool, self.audit.clone());
                if handler.name.len() <= 64 {
                    tools.push(AgentTool::new(Arc::new(handler)));
                }
            }
        }
        tools
    }
}

impl ToolSource for McpToolSource {
    fn tools(&self) -> Vec<AgentTool> {
        let generations: Vec<u64> = self
            .servers
            .iter()
            .map(|s| {
                let ready = u64::from(s.view().status == Status::Ready);
                s.generation() * 2 + ready
            })
            .collect();
        let Ok(mut built) = self.built.lock() else {
            return self.build();
        };
        if built.0 != generations {
            *built = (generations, self.build());
        }
        built.1.clone()
    }

    fn session_ended(&self) -> LocalBoxFuture<'_, ()> {
        Box::pin(super::stop_servers(&self.servers))
    }

    fn wait_for<'a>(&'a self, model_name: &'a str) -> LocalBoxFuture<'a, bool> {
        Box::pin(async move {
            let Some(rest) = model_name.strip_prefix("mcp__") else {
                return false;
            };
            let Some(server) = self
                .servers
                .iter()
                .find(|s| rest.starts_with(&format!("{}__", s.spec.name)))
            else {
                return false;
            };
            let deadline = Instant::now() + super::supervisor::START_TIMEOUT;
            let mut waited = false;
            // A server starting, or one that was up and is about to
            // restart, brings its tools soon: wait for it rather than fail
            // the call. One that keeps failing to start is not waited for.
            let coming = || {
                let view = server.view();
                match view.status {
                    Status::Starting(_) => true,
                    Status::Restarting { .. } => view.was_ready,
                    Status::Ready | Status::Refused(_) | Status::Disabled => false,
                }
            };
            while coming() && Instant::now() < deadline {
                waited = true;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            waited
        })
    }
}

/// One tool of one server.
pub struct McpTool {
    name: String,
    spec: ToolSpec,
    server: Arc<ServerHandle>,
    audit: Option<AuditLog>,
}

/// A tool name as the model APIs accept it: letters, digits, `_`, `-`.
fn clean(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl McpTool {
    /// Tool `tool` of `server`.
    pub fn new(server: Arc<ServerHandle>, tool: RemoteTool, audit: Option<AuditLog>) -> Self {
        let hint = |key: &str| tool.annotations.get(key).and_then(Value::as_bool);
        let read_only = hint("readOnlyHint").unwrap_or(false);
        let mut input_schema = tool.input_schema.clone();
        if input_schema.get("type").is_none() {
            input_schema["type"] = json!("object");
        }
        let spec = ToolSpec {
            name: tool.name.clone(),
            description: tool.description.clone(),
            input_schema,
            read_only,
            destructive: !read_only && hint("destructiveHint").unwrap_or(true),
            idempotent: hint("idempotentHint").unwrap_or(false),
            open_world: !read_only && hint("openWorldHint").unwrap_or(true),
        };
        Self {
            name: format!("mcp__{}__{}", server.spec.name, clean(&tool.name)),
            spec,
            server,
            audit,
        }
    }

    fn record(&self, call: &ToolCall<'_>, outcome: &str, started: Instant, text: &str) {
        let Some(log) = call.audit.or(self.audit.as_ref()) else {
            return;
        };
        let scope = AuditScope::new(
            log.clone(),
            &format!("mcp__{}", self.server.spec.name),
            call.call_id,
            call.session_id,
        );
        scope.record(AuditEvent::McpToolCalled {
            tool: self.spec.name.clone(),
            outcome: outcome.to_string(),
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            refused: seen_refused(text),
        });
    }

    /// The server's connection, waiting for it when the server was up and
    /// is being restarted (after a crash or a timed-out call).
    async fn live_connection(&self, call: &ToolCall<'_>) -> Option<Arc<Connection>> {
        let deadline = Instant::now() + super::supervisor::START_TIMEOUT;
        loop {
            if let Some(connection) = self.server.connection()
                && connection.closed().is_none()
            {
                return Some(connection);
            }
            let view = self.server.view();
            let coming = match view.status {
                Status::Starting(_) | Status::Ready => true,
                Status::Restarting { .. } => view.was_ready,
                Status::Refused(_) | Status::Disabled => false,
            };
            if !coming || Instant::now() >= deadline || call.interrupt.is_raised() {
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Calls the tool: its answer (text, or the text of a result the server
    /// marked `isError`) and images, or why there is no answer and how the
    /// audit record names that.
    async fn run(
        &self,
        call: &ToolCall<'_>,
    ) -> Result<(Result<String, String>, Vec<Image>), (CallError, &'static str)> {
        let server = &self.server.spec.name;
        let Some(connection) = self.live_connection(call).await else {
            let status = self.server.view().status;
            return Err((
                CallError::Failed(format!("MCP server {server} is not running: {status}")),
                "failed",
            ));
        };
        let answer = connection
            .request(
                "tools/call",
                json!({ "name": self.spec.name, "arguments": call.input }),
                self.server.spec.timeout,
                call.interrupt.raised(),
            )
            .await;
        let result = match answer {
            Ok(result) => result,
            Err(RequestError::Timeout(limit)) => {
                let reason = format!(
                    "the call ran past its time limit ({}); the server was stopped and is restarted",
                    crate::quantity::TimeSpan(limit)
                );
                connection.stop(&reason);
                return Err((
                    CallError::Failed(format!("MCP server {server}: {reason}")),
                    "timed out",
                ));
            }
            Err(RequestError::Cancelled) => {
                return Err((CallError::Failed("interrupted".into()), "cancelled"));
            }
            Err(RequestError::Closed(reason)) => {
                return Err((
                    CallError::Failed(format!(
                        "MCP server {server} went down during the call ({reason}); it is restarted"
                    )),
                    "failed",
                ));
            }
            Err(RequestError::Rpc(message)) => {
                return Err((
                    CallError::Failed(format!("MCP server {server}: {message}")),
                    "failed",
                ));
            }
        };
        // A call that changed the server's tools (it sent
        // `tools/list_changed`) returns once the list is refreshed, so the
        // next model request offers the new tools.
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        while connection.tools_stale() && connection.closed().is_none() && Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let (text, images) = result_content(&result);
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Ok((Err(text), images));
        }
        Ok((Ok(text), images))
    }
}

/// The most images one result gives the model; the rest are noted.
pub const MAX_IMAGES: usize = 8;

/// A `tools/call` result for the model: its text (text items as they are,
/// other content described, `structuredContent` when there is no content)
/// and its images (each image's place in the text is marked).
pub fn result_content(result: &Value) -> (String, Vec<Image>) {
    let mut parts = Vec::new();
    let mut images = Vec::new();
    for item in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
        let field = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or_default();
        let size = |key: &str| field(key).len() / 4 * 3;
        match kind {
            "text" => parts.push(field("text").to_string()),
            "image" => match image_of(field("mimeType"), field("data"), images.len()) {
                Ok(image) => {
                    images.push(image);
                    parts.push(format!(
                        "[image {}: {}, about {} bytes, attached]",
                        images.len(),
                        field("mimeType"),
                        size("data")
                    ));
                }
                Err(why) => parts.push(format!(
                    "[image: {}, about {} bytes, not shown: {why}]",
                    field("mimeType"),
                    size("data")
                )),
            },
            "audio" => parts.push(format!(
                "[audio: {}, about {} bytes, not shown: the model API takes no audio in tool results]",
                field("mimeType"),
                size("data")
            )),
            "resource_link" => {
                let mut line = format!("[resource link: {}", field("uri"));
                if !field("name").is_empty() {
                    line.push_str(&format!(" ({})", field("name")));
                }
                if !field("description").is_empty() {
                    line.push_str(&format!(": {}", field("description")));
                }
                line.push(']');
                parts.push(line);
            }
            "resource" => {
                let resource = item.get("resource").cloned().unwrap_or(Value::Null);
                let uri = resource
                    .get("uri")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                match resource.get("text").and_then(Value::as_str) {
                    Some(text) => parts.push(format!("[resource {uri}]\n{text}")),
                    None => parts.push(format!(
                        "[resource {uri}: {}, binary]",
                        resource
                            .get("mimeType")
                            .and_then(Value::as_str)
                            .unwrap_or("unknown type")
                    )),
                }
            }
            other => parts.push(format!("[content of type {other}]")),
        }
    }
    if parts.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        return (structured.to_string(), images);
    }
    (parts.join("\n"), images)
}

/// An MCP image item as an image for the model, or why it is left out;
/// `so_far` images of the result were kept already.
fn image_of(mime_type: &str, data: &str, so_far: usize) -> Result<Image, String> {
    use base64::Engine as _;
    let media_type = mime_type.to_ascii_lowercase();
    if !Image::MEDIA_TYPES.contains(&media_type.as_str()) {
        return Err(format!(
            "the model APIs take only {} images",
            Image::MEDIA_TYPES.join(", ")
        ));
    }
    if data.len() > Image::MAX_DATA_LEN {
        return Err(format!(
            "larger than the {} MiB an image may have",
            Image::MAX_DATA_LEN / (1024 * 1024)
        ));
    }
    if so_far >= MAX_IMAGES {
        return Err(format!(
            "a result gives the model at most {MAX_IMAGES} images"
        ));
    }
    if base64::engine::general_purpose::STANDARD
        .decode(data)
        .is_err()
    {
        return Err("its data is not valid base64".into());
    }
    Ok(Image {
        media_type,
        data: data.to_string(),
    })
}

/// What a local server's answer says its sandbox refused it: the kernel
/// refuses inside the server, so its own words are all capstan sees. A
/// write into a read-only folder fails with "Read-only file system"
/// (`EROFS`), which nothing else in the sandbox produces; a file outside
/// its grants with "Permission denied" (Landlock's `EACCES`).
fn seen_refused(text: &str) -> Vec<String> {
    let mut refused = Vec::new();
    if text.contains("Read-only file system") {
        refused.push("a write into a folder it may only read (Read-only file system)".to_string());
    }
    if text.contains("Permission denied") || text.contains("permission denied") {
        refused.push("a file outside its grants (Permission denied)".to_string());
    }
    refused
}

impl ToolHandler for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn needs(&self) -> CallNeeds {
        CallNeeds {
            writes_workspace: !self.spec.read_only,
            granted: self.server.spec.reach(),
        }
    }

    fn records_own_calls(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, call: ToolCall<'a>) -> LocalBoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let started = Instant::now();
            let outcome = self.run(&call).await;
            match outcome {
                Ok((answer, images)) => {
                    let how = if answer.is_ok() { "ok" } else { "tool error" };
                    let text = match &answer {
                        Ok(text) | Err(text) => text.as_str(),
                    };
                    self.record(&call, how, started, text);
                    ToolOutcome {
                        images,
                        ..answer.map_err(CallError::Failed).into()
                    }
                }
                Err((error, how)) => {
                    self.record(&call, how, started, "");
                    Err(error).into()
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_map_text_images_and_links() {
        let result = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"},
            {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt"},
            {"type": "resource", "resource": {"uri": "file:///b", "text": "B"}},
        ]});
        let (text, images) = result_content(&result);
        assert_eq!(
            text,
            "hello\n[image 1: image/png, about 3 bytes, attached]\n[resource link: file:///a.txt (a.txt)]\n[resource file:///b]\nB"
        );
        assert_eq!(
            images,
            vec![Image {
                media_type: "image/png".into(),
                data: "AAAA".into()
            }]
        );
        assert_eq!(
            result_content(&json!({"content": [], "structuredContent": {"a": 1}})).0,
            r#"{"a":1}"#
        );
        assert_eq!(clean("read.file/x"), "read_file_x");
    }

    #[test]
    fn images_that_cannot_be_sent_and_audio_become_notes() {
        let big = "A".repeat(Image::MAX_DATA_LEN + 4);
        let mut content = vec![
            json!({"type": "image", "mimeType": "image/png", "data": big}),
            json!({"type": "image", "mimeType": "image/tiff", "data": "AAAA"}),
            json!({"type": "image", "mimeType": "image/png", "data": "not base64!"}),
            json!({"type": "audio", "mimeType": "audio/wav", "data": "AAAA"}),
        ];
        for _ in 0..=MAX_IMAGES {
            content.push(json!({"type": "image", "mimeType": "IMAGE/JPEG", "data": "AAAA"}));
        }
        let (text, images) = result_content(&json!({ "content": content }));
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].contains("not shown: larger than the 5 MiB"),
            "{text}"
        );
        assert!(
            lines[1].contains("not shown: the model APIs take only image/png"),
            "{text}"
        );
        assert!(lines[2].contains("not valid base64"), "{text}");
        assert!(
            lines[3].starts_with("[audio: audio/wav") && lines[3].contains("no audio"),
            "{text}"
        );
        assert_eq!(images.len(), MAX_IMAGES);
        assert!(images.iter().all(|i| i.media_type == "image/jpeg"));
        assert!(
            lines[lines.len() - 1].contains("at most 8 images"),
            "{text}"
        );
    }
}
