//! One shape for every tool the model can call, whatever runs it: a
//! plugin's component ([`super::component_tool`]), the host's `skill`
//! ([`super::skill_tool`]) and `task` ([`super::subagent`]) tools, and
//! later native commands and MCP servers.
//!
//! A [`ToolHandler`] says what the tool is (its spec: name, description,
//! input schema and hints), what a call needs (the capabilities the
//! permission question names), which plugin's audit scope its records go
//! to, and runs one call given a [`ToolCall`]: the input, the call's ids,
//! the interrupt that cancels it, where its progress events go and the
//! session's audit log. The [`super::Toolbox`] registers handlers; the loop,
//! the scheduler, the policy and the hooks see only this shape.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::LocalBoxFuture;
use serde_json::Value;

use super::interrupt::Interrupt;
use super::session_parts::SessionParts;
use crate::audit::{AuditEvent, AuditLog, AuditScope};
use crate::model::{Image, Usage};
use crate::sandbox::{CallError, EventSink, ToolSpec};

/// Receives what the calls of a session report as they run — plugins' log
/// lines and progress, a command's output — with the call's id and the
/// reporting plugin's (or host tool's) name, from any thread.
pub type SessionEvents = Arc<dyn Fn(&str, &str, crate::sandbox::PluginEvent) + Send + Sync>;

/// What one call of a tool is given besides its handler.
pub struct ToolCall<'a> {
    /// The input, a JSON object the policy and the hooks let through.
    pub input: &'a Value,
    /// The model's id for the call.
    pub call_id: &'a str,
    /// The agent session making the call, if any.
    pub session_id: Option<&'a str>,
    /// Raised when the user interrupts: a handler that waits on something
    /// other than its own future (a sub-agent, a process) stops then.
    /// Dropping the call's future cancels it too.
    pub interrupt: &'a Interrupt,
    /// Where the call's log lines and progress reports go, as they happen.
    pub events: Option<&'a EventSink>,
    /// The session's audit log, for handlers with no log of their own.
    pub audit: Option<&'a AuditLog>,
    /// The session the call is made in, for handlers that run agent work
    /// themselves (`task`); `None` outside an agent session.
    pub session: Option<&'a SessionParts>,
    /// What the agent making the call may reach at most; handlers hold
    /// their sandbox to it whatever the call asks for.
    pub reach: Reach,
}

/// What an agent's calls may reach at most: a sub-agent whose tools
/// change nothing gets a read-only workspace, and one without network
/// tools gets no network, in the sandbox of every call it makes
/// (components and commands alike), not just fewer tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reach {
    /// Calls may get the workspace writable (when they may write at all).
    pub write: bool,
    /// Calls may get the network (the origins they were granted).
    pub net: bool,
}

impl Reach {
    /// Whatever the call is otherwise granted.
    pub const FULL: Reach = Reach {
        write: true,
        net: true,
    };
}

/// How a call ended: its result for the model, and the model tokens it
/// used (a sub-agent's requests; zero for other tools).
#[derive(Debug)]
pub struct ToolOutcome {
    /// The result text, or the error the model sees.
    pub result: Result<String, CallError>,
    /// Tokens spent on the call's own model requests.
    pub usage: Usage,
    /// Images the result carries (an MCP tool's), sent to the model with
    /// the text; empty for most tools.
    pub images: Vec<Image>,
}

impl From<Result<String, CallError>> for ToolOutcome {
    fn from(result: Result<String, CallError>) -> Self {
        Self {
            result,
            usage: Usage::default(),
            images: Vec::new(),
        }
    }
}

/// What a call of a tool needs beyond its input: what the permission
/// question names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallNeeds {
    /// It may change the workspace (it does not say it changes nothing).
    pub writes_workspace: bool,
    /// What its plugin was granted beyond the workspace, in plain words
    /// (folders, hosts, variables, secrets); empty for tools that get the
    /// workspace only.
    pub granted: Vec<String>,
}

/// What one call asks for when a tool's capabilities depend on its input
/// (`exec.run`'s `write` and `net`): the policy decides on these instead
/// of the tool's hints, and the permission question names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallWants {
    /// The call may write the workspace.
    pub write: bool,
    /// The call may reach the network.
    pub net: bool,
    /// What it asks for, in plain words ("write the workspace", "reach
    /// https://example.com"); empty when it asks for nothing beyond reading.
    pub capabilities: Vec<String>,
}

/// A source of one tool; see the [module documentation](self).
pub trait ToolHandler: Send + Sync {
    /// The tool's full name (`PLUGIN.TOOL`, or a host tool's bare name).
    fn name(&self) -> &str;

    /// What the tool is: its name within its source, description, input
    /// schema and hints (read-only, destructive, idempotent, open-world).
    fn spec(&self) -> &ToolSpec;

    /// The plugin whose audit scope the call's records go to and whose
    /// availability decides whether the tool is offered; `None` for the
    /// host's own tools.
    fn plugin(&self) -> Option<&str> {
        None
    }

    /// What a call needs, for the permission question.
    fn needs(&self) -> CallNeeds {
        CallNeeds {
            writes_workspace: !self.spec().read_only,
            granted: Vec::new(),
        }
    }

    /// What a call with `input` asks for, when that depends on the input;
    /// `None` for tools whose hints say it all.
    fn wants(&self, _input: &Value) -> Option<CallWants> {
        None
    }

    /// Whether the handler records each of its calls in the audit log
    /// itself (an MCP server's tools: [`AuditEvent::McpToolCalled`]), so
    /// [`AgentTool::call`] does not record them again.
    fn records_own_calls(&self) -> bool {
        false
    }

    /// Runs one call.
    fn call<'a>(&'a self, call: ToolCall<'a>) -> LocalBoxFuture<'a, ToolOutcome>;
}

/// A source of tools that come and go while the session runs (the tools
/// of MCP servers, offered once each server is ready): the toolbox asks it
/// for its current tools whenever it lists or looks one up.
pub trait ToolSource: Send + Sync {
    /// The tools it offers now.
    fn tools(&self) -> Vec<AgentTool>;

    /// Waits until the tool the model calls `model_name` may be offered,
    /// when it is not yet but is coming (its server is starting); whether
    /// it waited.
    fn wait_for<'a>(&'a self, _model_name: &'a str) -> LocalBoxFuture<'a, bool> {
        Box::pin(async { false })
    }
    /// The session ended: whatever the source runs (servers) is stopped,
    /// and its end recorded before this returns.
    fn session_ended(&self) -> LocalBoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// Told of the file a call named in its `path` (or `file_path`) input once
/// the call succeeded: read by a tool that changes nothing, changed by
/// one that may write. What it answers is added to the call's result (a
/// language server's new diagnostics after an edit).
pub trait FileWatch: Send + Sync {
    /// `path` (as the call gave it, relative to the workspace or absolute)
    /// was read, or `changed`.
    fn touched<'a>(&'a self, path: &'a str, changed: bool) -> LocalBoxFuture<'a, Option<String>>;

    /// The session ended: whatever it runs is stopped.
    fn session_ended(&self) {}
}

/// A tool as the session knows it: its handler, and the names the model and
/// the user call it by.
#[derive(Clone)]
pub struct AgentTool {
    /// The name the model calls it by: `fs__read` for `fs.read`, because
    /// model APIs allow only letters, digits, `_` and `-` in tool names.
    pub model_name: String,
    /// The tool's full name, `PLUGIN.TOOL`.
    pub name: String,
    /// What its source said about it.
    pub spec: ToolSpec,
    handler: Arc<dyn ToolHandler>,
}

impl std::fmt::Debug for AgentTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentTool")
            .field("name", &self.name)
            .field("model_name", &self.model_name)
            .finish_non_exhaustive()
    }
}

impl AgentTool {
    /// The tool `handler` runs, named for the model.
    pub fn new(handler: Arc<dyn ToolHandler>) -> Self {
        let name = handler.name().to_string();
        Self {
            model_name: model_name(&name),
            spec: handler.spec().clone(),
            name,
            handler,
        }
    }

    /// The plugin it belongs to, if any.
    pub fn plugin(&self) -> Option<&str> {
        self.handler.plugin()
    }

    /// What a call needs.
    pub fn needs(&self) -> CallNeeds {
        self.handler.needs()
    }

    /// What a call with `input` asks for, if it depends on the input.
    pub fn wants(&self, input: &Value) -> Option<CallWants> {
        self.handler.wants(input)
    }

    /// Runs one call, and records it in `call.audit` (if given) when it
    /// ends, however it ends: its outcome and how long it took, under the
    /// call's id. A call whose future is dropped before it ends (the user
    /// interrupted) is recorded as `interrupted`. Per call this is one
    /// scope (a few small strings) and one appended record.
    pub fn call<'a>(&'a self, call: ToolCall<'a>) -> LocalBoxFuture<'a, ToolOutcome> {
        let Some(log) = call.audit.filter(|_| !self.handler.records_own_calls()) else {
            return self.handler.call(call);
        };
        let record = CallRecord::start(
            log,
            self.audit_plugin(),
            &self.name,
            call.call_id,
            call.session_id,
        );
        let running = self.handler.call(call);
        Box::pin(async move {
            let outcome = running.await;
            record.finish(&outcome.result);
            outcome
        })
    }

    /// The plugin its calls are recorded under: its plugin, else the
    /// prefix of a host tool's `PREFIX.TOOL` name (`exec`), else `host`.
    pub fn audit_plugin(&self) -> &str {
        self.handler
            .plugin()
            .or_else(|| self.name.split_once('.').map(|(prefix, _)| prefix))
            .unwrap_or("host")
    }
}

/// The audit record of one tool call: started when the call starts,
/// written when it ends ([`CallRecord::finish`]), or as `interrupted` if it
/// is dropped before.
pub struct CallRecord {
    scope: AuditScope,
    tool: String,
    started: Instant,
    done: bool,
}

impl CallRecord {
    /// The record of call `call_id` of `tool` (of `plugin`), in `log`.
    pub fn start(
        log: &AuditLog,
        plugin: &str,
        tool: &str,
        call_id: &str,
        session_id: Option<&str>,
    ) -> Self {
        Self {
            scope: AuditScope::new(log.clone(), plugin, call_id, session_id),
            tool: tool.to_string(),
            started: Instant::now(),
            done: false,
        }
    }

    /// Writes the record: the call ended with `result`.
    pub fn finish<T>(mut self, result: &Result<T, CallError>) {
        let (outcome, detail) = match result {
            Ok(_) => ("ok", None),
            Err(error) => (
                outcome_name(error),
                Some(crate::audit::detail(&error.to_string())),
            ),
        };
        self.write(outcome, detail);
    }

    fn write(&mut self, outcome: &str, detail: Option<String>) {
        self.done = true;
        self.scope.record(AuditEvent::ToolCalled {
            tool: std::mem::take(&mut self.tool),
            outcome: outcome.to_string(),
            detail,
            duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        });
    }
}

impl Drop for CallRecord {
    fn drop(&mut self) {
        if !self.done {
            self.write("interrupted", None);
        }
    }
}

/// How a call that failed with `error` ended, in the audit log's words.
pub fn outcome_name(error: &CallError) -> &'static str {
    match error {
        CallError::InvalidInput(_) => "invalid input",
        CallError::Denied(_) => "denied",
        CallError::UnknownTool { .. } => "unknown tool",
        CallError::Timeout { .. } => "timed out",
        CallError::MemoryLimit { .. }
        | CallError::HostResources { .. }
        | CallError::HeadersTooLarge { .. }
        | CallError::OutputTooLarge { .. } => "stopped at a limit",
        CallError::Crashed { .. } => "crashed",
        _ => "failed",
    }
}

/// The name the model uses for tool `PLUGIN.TOOL`.
pub fn model_name(name: &str) -> String {
    name.replacen('.', "__", 1)
}
