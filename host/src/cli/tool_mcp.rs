//! MCP servers' tools in `capstan tool list` and `capstan tool call`:
//! listed as `mcp__SERVER__TOOL` with their server, annotations and the
//! server's state, and called under the checks a session applies — the
//! server must be allowed (`capstan mcp approve`), the permission rules
//! of the settings apply, and a tool not marked read-only runs only with
//! `--allow-write` (the command line's answer to the question a session
//! would ask).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Exit;
use super::escape;
use super::exit::Failure;
use crate::agent::Interrupt;
use crate::agent::tool::{AgentTool, ToolCall, ToolSource};
use crate::home::Home;
use crate::mcp::client::bridge::McpToolSource;
use crate::mcp::client::supervisor::{ServerHandle, Status};
use crate::mcp::client::{McpClients, servers_for};
use crate::policy::{Outcome, ToolFacts};

/// The prefix of every MCP tool's name.
pub const PREFIX: &str = "mcp__";

/// One MCP tool, or a server whose tools cannot be listed, for `tool list`.
pub struct Row {
    /// `mcp__SERVER__TOOL`, or `mcp__SERVER__*` for a server without tools.
    pub name: String,
    /// The server.
    pub server: String,
    /// The server's state.
    pub state: String,
    /// The tool, when the server listed it.
    pub tool: Option<AgentTool>,
    /// Its annotations as the server gave them.
    pub annotations: Value,
}

/// Waits until none of `servers` is starting, for at most
/// `START_TIMEOUT`.
async fn settle(servers: &[Arc<ServerHandle>]) {
    let deadline = Instant::now() + crate::mcp::client::supervisor::START_TIMEOUT;
    while Instant::now() < deadline
        && servers
            .iter()
            .any(|s| matches!(s.view().status, Status::Starting(_)))
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every MCP tool of the servers defined for `workspace` (the allowed
/// ones started for the occasion), and a row for each server that offers
/// none, saying why.
pub async fn rows(home: &Home, workspace: &Path) -> Vec<Row> {
    let clients = McpClients::start(home, super::mcp_servers::launcher(home, workspace));
    for notice in &clients.notices {
        eprintln!("{}", escape::line(notice));
    }
    settle(clients.servers()).await;
    let source = McpToolSource::new(clients.servers().to_vec(), None);
    let tools = source.tools();
    let mut rows = Vec::new();
    for server in clients.servers() {
        let view = server.view();
        let name = &server.spec.name;
        let state = view.status.to_string();
        let prefix = format!("{PREFIX}{name}__");
        let mut any = false;
        for tool in tools.iter().filter(|t| t.name.starts_with(&prefix)) {
            any = true;
            let annotations = view
                .tools
                .iter()
                .find(|t| t.name == tool.spec.name)
                .map(|t| t.annotations.clone())
                .unwrap_or(Value::Null);
            rows.push(Row {
                name: tool.name.clone(),
                server: name.clone(),
                state: state.clone(),
                tool: Some(tool.clone()),
                annotations,
            });
        }
        if !any {
            rows.push(Row {
                name: format!("{prefix}*"),
                server: name.clone(),
                state,
                tool: None,
                annotations: Value::Null,
            });
        }
    }
    rows
}

/// A row as `tool list --json` prints it.
pub fn row_json(row: &Row) -> Value {
    let mut value = match &row.tool {
        Some(tool) => json!(tool.spec),
        None => json!({}),
    };
    value["name"] = json!(row.name);
    value["source"] = json!("mcp");
    value["server"] = json!(row.server);
    value["state"] = json!(row.state);
    value["annotations"] = row.annotations.clone();
    value
}

/// A row as `tool list` prints it: name, mode, then the description (or
/// the server's state when it offers no tools).
pub fn row_text(row: &Row) -> (String, &'static str, String) {
    match &row.tool {
        Some(tool) => {
            let mode = if tool.spec.read_only {
                "read-only"
            } else {
                "writes"
            };
            let description = tool.spec.description.lines().next().unwrap_or_default();
            let mut hints = Vec::new();
            if !tool.spec.read_only && tool.spec.destructive {
                hints.push("destructive");
            }
            if tool.spec.idempotent {
                hints.push("idempotent");
            }
            if tool.spec.open_world {
                hints.push("open world");
            }
            let hints = if hints.is_empty() {
                String::new()
            } else {
                format!(" [{}]", hints.join(", "))
            };
            (
                row.name.clone(),
                mode,
                format!("MCP server {}{hints}: {description}", row.server),
            )
        }
        None => (
            row.name.clone(),
            "",
            format!("MCP server {}: {}", row.server, row.state),
        ),
    }
}

/// `capstan tool call mcp__SERVER__TOOL INPUT`: starts that server alone
/// (if it is allowed), checks the call as a session would, and calls it.
pub async fn call(
    name: &str,
    input: &str,
    workspace: &Path,
    allow_write: bool,
    json_output: bool,
) -> Result<Exit, Failure> {
    let home = Home::from_env().map_err(|e| Failure::new(Exit::Error, e))?;
    let input: Value = serde_json::from_str(input).map_err(|e| {
        Failure::new(
            Exit::InvalidInput,
            format!("invalid input: the input is not valid JSON: {e}"),
        )
    })?;
    let defined = servers_for(&home, workspace);
    let rest = name.strip_prefix(PREFIX).unwrap_or_default();
    let Some((spec, allowed)) = defined
        .specs
        .into_iter()
        .filter(|(spec, _)| rest.starts_with(&format!("{}__", spec.name)))
        .max_by_key(|(spec, _)| spec.name.len())
    else {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "{name}: no MCP server of that name is defined for {}; `capstan mcp list` shows the servers",
                workspace.display()
            ),
        ));
    };
    if !allowed {
        return Err(Failure::new(
            Exit::Denied,
            format!(
                "{name}: MCP server {} ({}) is not allowed yet; run `capstan mcp approve {}` to see what it reaches and allow it",
                spec.name, spec.source, spec.name
            ),
        ));
    }
    let launcher = super::mcp_servers::launcher(&home, workspace);
    let audit = launcher.audit.clone();
    let server = ServerHandle::new(spec, Status::Starting(1));
    let supervised = tokio::spawn(server.clone().supervise(launcher));
    settle(std::slice::from_ref(&server)).await;
    let source = McpToolSource::new(vec![server.clone()], audit.clone());
    let tools = source.tools();
    let Some(tool) = tools.iter().find(|t| t.name == name) else {
        supervised.abort();
        let view = server.view();
        if view.status != Status::Ready {
            return Err(Failure::new(
                Exit::ToolFailed,
                format!(
                    "{name}: MCP server {} did not start: {}",
                    server.spec.name, view.status
                ),
            ));
        }
        let known: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "{name}: MCP server {} has no such tool; it has {}",
                server.spec.name,
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
        ));
    };
    // The checks of a session: deny rules, then what the mode asks.
    let settings = crate::config::load(&home, workspace).unwrap_or_default();
    let decision = settings.policy(None).decide(&ToolFacts {
        tool: &tool.name,
        read_only: tool.spec.read_only,
        destructive: tool.spec.destructive,
        open_world: tool.spec.open_world,
        input: &input,
        workspace,
        capabilities: None,
    });
    let refusal = match decision.outcome {
        Outcome::Deny => Some(decision.reason),
        Outcome::Ask if !allow_write => Some(format!(
            "{} — pass --allow-write to let this call run (the tool is not marked read-only, so a session would ask first)",
            decision.reason
        )),
        Outcome::Ask | Outcome::Allow => None,
    };
    let call_id = crate::sandbox::new_call_id();
    if let Some(reason) = refusal {
        supervised.abort();
        if let Some(log) = &audit {
            let by = if decision.outcome == Outcome::Deny {
                "rule"
            } else {
                "command line (no --allow-write)"
            };
            crate::audit::AuditScope::new(
                log.clone(),
                &format!("mcp__{}", server.spec.name),
                &call_id,
                None,
            )
            .record(crate::audit::AuditEvent::CallDenied {
                tool: tool.name.clone(),
                by: by.to_string(),
                reason: reason.clone(),
            });
        }
        return Err(Failure::new(Exit::Denied, format!("{name}: {reason}")));
    }
    let interrupt = Interrupt::new();
    super::watch_ctrl_c(interrupt.clone());
    let outcome = tool
        .call(ToolCall {
            input: &input,
            call_id: &call_id,
            session_id: None,
            interrupt: &interrupt,
            events: None,
            audit: audit.as_ref(),
            session: None,
            reach: crate::agent::tool::Reach::FULL,
        })
        .await;
    // The server is stopped and its end recorded before capstan exits.
    crate::mcp::client::stop_servers(std::slice::from_ref(&server)).await;
    supervised.abort();
    match outcome.result {
        Ok(text) => {
            if json_output {
                let images: Vec<Value> = outcome
                    .images
                    .iter()
                    .map(|i| json!({"media_type": i.media_type, "data": i.data}))
                    .collect();
                println!(
                    "{}",
                    json!({ "ok": true, "tool": name, "content": text, "images": images })
                );
            } else {
                let text = escape::text(&text);
                if text.ends_with('\n') {
                    print!("{text}");
                } else {
                    println!("{text}");
                }
            }
            Ok(Exit::Success)
        }
        Err(error) => Err(Failure::new(
            Exit::for_call_error(&error),
            error.to_string(),
        )),
    }
}
