//! The control requests of Claude Code's SDK that ask about (or act on)
//! the session's state rather than its prompts: `mcp_status`,
//! `mcp_reconnect`, `mcp_toggle` and `set_max_thinking_tokens`, answered at once on the thread that
//! reads stdin (a reconnect answers once the server is up or has failed),
//! and `get_context_usage`, answered between prompts, where the
//! conversation can be read. Each answers in the shape Claude Code's SDK
//! types (`McpServerStatus`, `SDKControlGetContextUsageResponse`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::setup::Session;
use crate::agent::context_use::{self, ContextPart};
use crate::mcp::client::McpClients;
use crate::mcp::client::config::Transport;
use crate::mcp::client::supervisor::Status;

/// The requests answered between prompts, by [`between_prompts`].
pub const BETWEEN_PROMPTS: [&str; 2] = ["get_context_usage", "rewind_files"];

/// How a request was taken.
pub enum Handled {
    /// Answered now: the response's body, or the error.
    Now(Result<Value, String>),
    /// Its answer is printed later, from another task.
    Later,
    /// Not one of these requests.
    NotMine,
}

/// What answers the MCP requests.
pub struct DriverRequests {
    /// The session's MCP servers.
    pub mcp: Arc<McpClients>,
    /// The runtime a reconnect waits on.
    pub runtime: tokio::runtime::Handle,
}

impl DriverRequests {
    /// Takes the request `subtype` (`request` its whole object, `id` its
    /// request id).
    pub fn answer(&self, subtype: &str, request: &Value, id: &Value) -> Handled {
        let server = || {
            let name = request
                .get("serverName")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{subtype} needs a `serverName`"))?;
            self.mcp.find(name).cloned().ok_or_else(|| {
                let names: Vec<String> = self.mcp.states().into_iter().map(|s| s.name).collect();
                format!(
                    "no MCP server is called `{name}` in this session; it has: {}",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )
            })
        };
        match subtype {
            "mcp_status" => Handled::Now(Ok(mcp_status(&self.mcp))),
            // capstan asks for no thinking: turning it off is what it does.
            "set_max_thinking_tokens" => Handled::Now(
                match request.get("max_thinking_tokens").and_then(Value::as_u64) {
                    None | Some(0) => Ok(json!({})),
                    Some(_) => Err(super::sdk_flags::NO_THINKING.to_string()),
                },
            ),
            "mcp_toggle" => {
                let toggled = server().and_then(|server| {
                    let enabled = request
                        .get("enabled")
                        .and_then(Value::as_bool)
                        .ok_or("mcp_toggle needs `enabled`, true or false")?;
                    server.set_enabled(enabled)?;
                    Ok((server, enabled))
                });
                let (server, enabled) = match toggled {
                    Ok(toggled) => toggled,
                    Err(error) => return Handled::Now(Err(error)),
                };
                // Answered once the server is off, or once it is on and
                // has started (or failed to).
                self.answer_later(id, async move {
                    if enabled {
                        wait_until(&server, |status| {
                            !matches!(status, Status::Disabled | Status::Starting(_))
                        })
                        .await;
                    } else {
                        wait_until(&server, |status| *status == Status::Disabled).await;
                    }
                    Ok(())
                });
                Handled::Later
            }
            "mcp_reconnect" => {
                let server = match server() {
                    Ok(server) => server,
                    Err(error) => return Handled::Now(Err(error)),
                };
                let view = server.view();
                // A server starting now counts: its start is the reconnect.
                let starts = match view.status {
                    Status::Starting(_) => view.starts.saturating_sub(1),
                    _ => view.starts,
                };
                if let Err(error) = server.reconnect() {
                    return Handled::Now(Err(error));
                }
                self.answer_later(id, async move { wait_for_restart(&server, starts).await });
                Handled::Later
            }
            _ => Handled::NotMine,
        }
    }
}

impl DriverRequests {
    /// Prints the answer to request `id` once `outcome` is known.
    fn answer_later(
        &self,
        id: &Value,
        outcome: impl std::future::Future<Output = Result<(), String>> + Send + 'static,
    ) {
        let id = id.clone();
        self.runtime.spawn(async move {
            let response = match outcome.await {
                Ok(()) => json!({"subtype": "success", "request_id": id, "response": {}}),
                Err(error) => json!({"subtype": "error", "request_id": id, "error": error}),
            };
            super::render::StreamJsonFrontend::emit(
                &json!({"type": "control_response", "response": response}),
            );
        });
    }
}

/// Waits (at most the time a start may take) until `server`'s status
/// passes `done`.
async fn wait_until(
    server: &crate::mcp::client::supervisor::ServerHandle,
    done: impl Fn(&Status) -> bool,
) {
    let deadline = Instant::now() + crate::mcp::client::supervisor::START_TIMEOUT;
    while !done(&server.view().status) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `server` was started again after `starts` starts and is
/// up, or failed (its reason), at most the time a start may take.
async fn wait_for_restart(
    server: &crate::mcp::client::supervisor::ServerHandle,
    starts: u32,
) -> Result<(), String> {
    let deadline = Instant::now() + crate::mcp::client::supervisor::START_TIMEOUT;
    loop {
        let view = server.view();
        if view.starts > starts {
            match view.status {
                Status::Ready => return Ok(()),
                Status::Restarting { reason, .. } | Status::Refused(reason) => return Err(reason),
                Status::Disabled => return Err("the server was turned off".into()),
                Status::Starting(_) => {}
            }
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "MCP server {} did not start within {} s",
                server.spec.name,
                crate::mcp::client::supervisor::START_TIMEOUT.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The body of the answer to `mcp_status`: every server with its state,
/// why it failed, its definition and, when connected, its tools.
pub fn mcp_status(mcp: &McpClients) -> Value {
    let servers: Vec<Value> = mcp
        .states()
        .into_iter()
        .map(|state| {
            let config = match &state.spec.transport {
                Transport::Stdio { argv, env } => json!({
                    "type": "stdio",
                    "command": argv.first().cloned().unwrap_or_default(),
                    "args": argv.iter().skip(1).collect::<Vec<_>>(),
                    "env": env.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
                }),
                Transport::Http {
                    url, legacy_sse, ..
                } => json!({
                    "type": if *legacy_sse { "sse" } else { "http" },
                    "url": url,
                }),
                // An in-process server of the SDK driving capstan.
                Transport::Driver { .. } => json!({"type": "sdk", "name": state.name}),
            };
            let mut entry = json!({
                "name": state.name,
                "status": state.state,
                "config": config,
                "scope": scope_of(&state.spec.source),
                "source": scope_of(&state.spec.source),
                "tools": state.tools.iter().map(|tool| {
                    let hint = |name: &str| tool.annotations.get(name).and_then(Value::as_bool);
                    let mut annotations = serde_json::Map::new();
                    for (ours, theirs) in [("readOnly", "readOnlyHint"), ("destructive", "destructiveHint"), ("openWorld", "openWorldHint")] {
                        if let Some(value) = hint(theirs) {
                            annotations.insert(ours.into(), json!(value));
                        }
                    }
                    json!({"name": tool.name, "description": tool.description, "annotations": annotations})
                }).collect::<Vec<_>>(),
            });
            if let Some(error) = state.error {
                entry["error"] = json!(error);
            }
            entry
        })
        .collect();
    json!({ "mcpServers": servers })
}

/// Claude Code's word for where a server was defined: `dynamic` for the
/// command line (what the SDK passes), `plugin`, `project` or `user`.
fn scope_of(source: &str) -> &'static str {
    if source.starts_with("--mcp-config") {
        "dynamic"
    } else if source.starts_with("plugin ") {
        "plugin"
    } else if source.contains(".mcp.json") || source.contains(".capstan") {
        "project"
    } else {
        "user"
    }
}

/// Answers a request of [`BETWEEN_PROMPTS`]: the response's body, or the
/// error. `user_messages` pairs the uuid of each user message echoed to the
/// driver with the number of its prompt's checkpoint.
pub fn between_prompts(
    session: &mut Session,
    request: &Value,
    user_messages: &[(String, u32)],
) -> Result<Value, String> {
    match request.get("subtype").and_then(Value::as_str) {
        Some("get_context_usage") => Ok(context_usage(session)),
        Some("rewind_files") => rewind_files(session, request, user_messages),
        other => Err(format!(
            "`{}` is not answered between prompts",
            other.unwrap_or("?")
        )),
    }
}

/// `rewind_files`: the workspace's files put back as they were just before
/// the user message `user_message_id` (its prompt's checkpoint), or with
/// `dry_run` the files that would change; the conversation goes on.
fn rewind_files(
    session: &mut Session,
    request: &Value,
    user_messages: &[(String, u32)],
) -> Result<Value, String> {
    let id = request
        .get("user_message_id")
        .and_then(Value::as_str)
        .ok_or("rewind_files needs a `user_message_id`")?;
    let Some(number) = user_messages
        .iter()
        .find(|(uuid, _)| uuid == id)
        .map(|(_, number)| *number)
    else {
        return Ok(json!({
            "canRewind": false,
            "error": format!("no checkpoint for user message {id}: capstan keeps one for each user message it echoed (--replay-user-messages; the SDK's UserMessage.uuid)"),
        }));
    };
    if request.get("dry_run").and_then(Value::as_bool) == Some(true) {
        let store = session
            .agent
            .checkpoints()
            .ok_or("this session is not saved, so it has no checkpoints")?;
        let checkpoints = store.checkpoints().map_err(|e| e.to_string())?;
        let files: std::collections::BTreeSet<String> = checkpoints
            .iter()
            .filter(|checkpoint| checkpoint.number >= number)
            .flat_map(|checkpoint| checkpoint.changes.iter().map(|c| c.path.clone()))
            .collect();
        return Ok(json!({"canRewind": true, "filesChanged": files}));
    }
    let report = session
        .agent
        .rewind(
            number,
            crate::session::checkpoint::RewindScope::Files,
            false,
        )
        .map_err(|e| e.to_string())?;
    let changed: Vec<&String> = report.restored.iter().chain(&report.removed).collect();
    let problems: Vec<String> = report
        .conflicts
        .iter()
        .chain(&report.failed)
        .map(|problem| format!("{}: {}", problem.path, problem.reason))
        .collect();
    if changed.is_empty() && !problems.is_empty() {
        return Ok(json!({"canRewind": false, "error": problems.join("; ")}));
    }
    let mut body = json!({"canRewind": true, "filesChanged": changed});
    if !problems.is_empty() {
        body["error"] = json!(format!("left as they are: {}", problems.join("; ")));
    }
    Ok(body)
}

/// The side of the square grid Claude Code draws the window in.
const GRID: u64 = 10;

/// The body of the answer to `get_context_usage`: what fills the context
/// window (the estimate `/context` shows), under Claude Code's category
/// ids, with the grid of squares its SDK draws.
pub fn context_usage(session: &Session) -> Value {
    let agent = &session.agent;
    let config = agent.config();
    let window = if config.context_window > 0 {
        config.context_window
    } else {
        crate::agent::compact::context_window_for(&config.model)
    };
    let offered = agent.offered_tools();
    let used = context_use::breakdown(
        &config.system,
        &session.skills_prompt,
        &offered,
        agent.messages(),
        agent.pending_user_context(),
        window,
    );
    let tool_tokens = |tool: &crate::model::ToolDef| {
        context_use::estimate_tokens(
            tool.name.len() + tool.description.len() + tool.input_schema.to_string().len(),
        )
    };
    let mcp_tools: Vec<(&crate::model::ToolDef, &str, u64)> = offered
        .iter()
        .filter_map(|tool| {
            let rest = tool.name.strip_prefix("mcp__")?;
            let server = rest.split("__").next()?;
            Some((tool, server, tool_tokens(tool)))
        })
        .collect();
    let mcp_total: u64 = mcp_tools.iter().map(|(_, _, tokens)| tokens).sum();
    let part = |wanted: &[ContextPart]| -> u64 {
        used.parts
            .iter()
            .filter(|(part, _)| wanted.contains(part))
            .map(|(_, tokens)| tokens)
            .sum()
    };
    let mut categories = vec![
        (
            "system_prompt",
            "System prompt",
            part(&[ContextPart::SystemPrompt]),
            "promptBorder",
        ),
        (
            "system_tools",
            "System tools",
            part(&[ContextPart::ToolDefinitions]).saturating_sub(mcp_total),
            "inactive",
        ),
        (
            "mcp_tools",
            "MCP tools",
            mcp_total,
            "cyan_FOR_SUBAGENTS_ONLY",
        ),
        (
            "memory_files",
            "Memory files",
            part(&[ContextPart::ProjectInstructions]),
            "claude",
        ),
        ("skills", "Skills", part(&[ContextPart::Skills]), "warning"),
        (
            "messages",
            "Messages",
            part(&[
                ContextPart::Messages,
                ContextPart::ToolResults,
                ContextPart::Pending,
            ]),
            "purple_FOR_SUBAGENTS_ONLY",
        ),
    ];
    categories.retain(|(_, _, tokens, _)| *tokens > 0);
    let total: u64 = categories.iter().map(|(_, _, tokens, _)| tokens).sum();
    let free = window.saturating_sub(total);
    let percentage = if window == 0 {
        0
    } else {
        (total * 100).div_ceil(window).min(100)
    };
    let mut listed: Vec<Value> = categories
        .iter()
        .map(|(id, name, tokens, color)| {
            json!({"id": id, "name": name, "tokens": tokens, "color": color, "kind": "used"})
        })
        .collect();
    listed.push(json!({"id": "free_space", "name": "Free space", "tokens": free, "color": "promptBorder", "kind": "free"}));
    let grid = grid_rows(&categories, free, window);
    let memory_files: Vec<Value> = session
        .instruction_files
        .iter()
        .map(|path| {
            let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
            json!({
                "path": path,
                "type": if path.starts_with(&session.workspace) { "Project" } else { "User" },
                "tokens": context_use::estimate_tokens(usize::try_from(bytes).unwrap_or(usize::MAX)),
            })
        })
        .collect();
    json!({
        "categories": listed,
        "totalTokens": total,
        "maxTokens": window,
        "rawMaxTokens": window,
        "percentage": percentage,
        "gridRows": grid,
        "model": config.model,
        "memoryFiles": memory_files,
        "mcpTools": mcp_tools.iter().map(|(tool, server, tokens)| json!({
            "name": tool.name, "serverName": server, "tokens": tokens, "isLoaded": true,
        })).collect::<Vec<_>>(),
        "agents": session.agent_names.iter().map(|name| json!({"agentType": name, "source": "projectSettings", "tokens": 0})).collect::<Vec<_>>(),
        "isAutoCompactEnabled": config.context_window > 0,
        "apiUsage": agent.context_tokens().map(|tokens| json!({"input_tokens": tokens})),
    })
}

/// The window as `GRID` rows of `GRID` squares, each the colour of the
/// category that fills it (free space last), as Claude Code draws it.
fn grid_rows(categories: &[(&str, &str, u64, &str)], free: u64, window: u64) -> Vec<Vec<Value>> {
    let squares = GRID * GRID;
    let per_square = (window / squares).max(1);
    let mut cells = Vec::new();
    for (_, name, tokens, color) in categories {
        let mut left = *tokens;
        while left > 0 && (cells.len() as u64) < squares {
            let here = left.min(per_square);
            cells.push(json!({
                "color": color,
                "isFilled": true,
                "categoryName": name,
                "tokens": tokens,
                "percentage": (tokens * 100).checked_div(window).unwrap_or(0),
                "squareFullness": here as f64 / per_square as f64,
            }));
            left -= here;
        }
    }
    while (cells.len() as u64) < squares {
        cells.push(json!({
            "color": "promptBorder",
            "isFilled": true,
            "categoryName": "Free space",
            "tokens": free,
            "percentage": (free * 100).checked_div(window).unwrap_or(0),
            "squareFullness": 1.0,
        }));
    }
    cells
        .chunks(usize::try_from(GRID).unwrap_or(10))
        .map(<[Value]>::to_vec)
        .collect()
}
