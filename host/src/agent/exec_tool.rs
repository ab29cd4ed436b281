//! The host's `exec.run` tool: the model runs a command of the project
//! (`bash -c COMMAND`) in the native sandbox of [`crate::exec`].
//!
//! What the command may do is what the call asks for — `write: true` for a
//! writable workspace, `net: [origins]` for origins beyond the session's —
//! and the permission question names exactly that ([`ToolHandler::wants`]);
//! the sandbox, not the command text, enforces it. A command that hits the
//! sandbox gets a result saying which capability it lacked, so the model
//! can ask for it. Output is returned capped, head and tail.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::LocalBoxFuture;
use serde_json::{Value, json};

use super::tool::{CallWants, ToolCall, ToolHandler, ToolOutcome};
use crate::exec::{
    Cancel, CommandLine, Ending, ExecGrants, ExecOutcome, ExecRequest, MAX_TIMEOUT,
    MissingCapability,
};
use crate::grants::fs::OwnFolders;
use crate::grants::net::NetGrant;
use crate::home::Home;
use crate::policy::Settings;
use crate::policy::audit::{AuditLog, AuditScope};
use crate::sandbox::{CallError, ToolSpec};

/// The tool's full name, as rules (`Bash` too) and hooks name it.
pub const TOOL_NAME: &str = crate::policy::claude_code::EXEC_TOOL;

/// The `exec.run` tool of a session.
pub struct ExecRunTool {
    /// What every command gets, or why commands cannot run in this session
    /// (the `[exec]` settings or the workspace refused), said at each call.
    grants: Result<Arc<ExecGrants>, String>,
    spec: ToolSpec,
}

/// One call's input, checked.
struct RunInput {
    command: String,
    cwd: Option<PathBuf>,
    write: bool,
    net: Vec<NetGrant>,
    timeout: Option<Duration>,
}

impl ExecRunTool {
    /// The tool running commands under `grants`, or telling the model, on
    /// every call, why it cannot (`grants` is the error then).
    pub fn new(grants: Result<ExecGrants, String>) -> Self {
        Self {
            grants: grants.map(Arc::new),
            spec: spec(),
        }
    }
}

impl ExecRunTool {
    /// The tool of a session in `workspace`: commands get what the `[exec]`
    /// settings grant and are recorded in `home`'s audit log. Settings that
    /// cannot be used make every call fail saying why, rather than the
    /// session. With the sandbox off, [`ExecRunTool::warning`] says so.
    pub fn for_session(settings: &Settings, workspace: &Path, home: &Home) -> Self {
        let user_home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let grants = (|| {
            if let Some(key) = &settings.model.api_key_env
                && settings.exec.env.contains(key)
            {
                return Err(format!(
                    "[exec] env: `{key}` holds the model's API key (model.api_key_env), which commands never see; remove it from [exec] env"
                ));
            }
            let mut grants = ExecGrants::resolve(
                &settings.exec,
                workspace,
                user_home.as_deref(),
                &OwnFolders::of(home),
            )
            .map_err(|e| e.to_string())?;
            let log = AuditLog::open(&home.audit_log())
                .map_err(|e| format!("the audit log cannot be opened: {e}"))?;
            grants.audit = Some(AuditScope::new(log, "exec", "exec", None));
            Ok(grants)
        })();
        Self::new(grants)
    }

    /// What the user must know at the session's start: the sandbox is off,
    /// or commands cannot run at all.
    pub fn warning(&self) -> Option<String> {
        match &self.grants {
            Ok(grants) if !grants.sandboxed => Some(
                "WARNING: [exec] sandbox = \"off\": the model's commands (exec.run) run UNSANDBOXED, with your full access to files, network and processes".to_string(),
            ),
            Ok(_) => None,
            Err(why) => Some(format!("warning: exec.run cannot run commands in this session: {why}")),
        }
    }
}

/// What the model is told about the tool.
fn spec() -> ToolSpec {
    ToolSpec {
        name: "run".to_string(),
        description:
            "Run a shell command (bash -c) of the project: builds, tests, linters, git log. \
It runs in a sandbox: the workspace is read-only and there is no network unless the call asks \
for them with `write: true` (the command changes files in the workspace) and `net` (origins it \
must reach, e.g. [\"https://index.crates.io\"]); ask only for what the command needs, since \
asking may need the user's permission. Files outside the workspace and its tool folders do not \
exist for the command; `.git` stays read-only. The result holds the exit code and the combined \
output (long output keeps its head and tail). If the command fails because it lacked a \
capability, the result says which one; call again asking for it."
                .to_string(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command, run by bash -c."},
                "description": {"type": "string", "description": "What it does, in a few words, for the user."},
                "cwd": {"type": "string", "description": "The folder to run it in, inside the workspace (relative to it); the workspace by default."},
                "timeout": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT.as_secs(), "description": "Seconds it may run (default 120, at most 600)."},
                "write": {"type": "boolean", "description": "The command changes files in the workspace."},
                "net": {"type": "array", "items": {"type": "string"}, "description": "Origins it must reach, such as https://index.crates.io or https://*.npmjs.org."}
            },
            "required": ["command"],
            "additionalProperties": false
        }),
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    }
}

/// Reads one call's input.
fn parse_input(input: &Value) -> Result<RunInput, String> {
    let command = input
        .get("command")
        .and_then(Value::as_str)
        .filter(|c| !c.trim().is_empty())
        .ok_or("`command` must be a non-empty string")?
        .to_string();
    let write = match input.get("write") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(write)) => *write,
        Some(_) => return Err("`write` must be true or false".to_string()),
    };
    let mut net = Vec::new();
    match input.get("net") {
        None | Some(Value::Null) => {}
        Some(Value::Array(origins)) => {
            for origin in origins {
                let text = origin
                    .as_str()
                    .ok_or("`net` must be a list of origins such as \"https://example.com\"")?;
                net.push(NetGrant::parse(text).map_err(|e| format!("`net`: `{text}`: {e}"))?);
            }
        }
        Some(_) => {
            return Err(
                "`net` must be a list of origins such as [\"https://example.com\"]".to_string(),
            );
        }
    }
    let timeout = match input.get("timeout") {
        None | Some(Value::Null) => None,
        Some(value) => {
            let seconds = value
                .as_u64()
                .filter(|s| (1..=MAX_TIMEOUT.as_secs()).contains(s))
                .ok_or_else(|| {
                    format!(
                        "`timeout` must be a whole number of seconds from 1 to {}",
                        MAX_TIMEOUT.as_secs()
                    )
                })?;
            Some(Duration::from_secs(seconds))
        }
    };
    let cwd = match input.get("cwd") {
        None | Some(Value::Null) => None,
        Some(Value::String(cwd)) if cwd.is_empty() => None,
        Some(Value::String(cwd)) => Some(PathBuf::from(cwd)),
        Some(_) => return Err("`cwd` must be a folder inside the workspace".to_string()),
    };
    Ok(RunInput {
        command,
        cwd,
        write,
        net,
        timeout,
    })
}

/// The capabilities a call asks for, in the words of the permission
/// question: "write the workspace", "reach https://example.com".
fn wanted(input: &RunInput) -> Vec<String> {
    let mut wants = Vec::new();
    if input.write {
        wants.push("write the workspace".to_string());
    }
    wants.extend(input.net.iter().map(|origin| format!("reach {origin}")));
    wants
}

impl ToolHandler for ExecRunTool {
    fn name(&self) -> &str {
        TOOL_NAME
    }

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn wants(&self, input: &Value) -> Option<CallWants> {
        // An input that does not parse asks for nothing: the call fails
        // before anything runs.
        let input = parse_input(input).ok()?;
        Some(CallWants {
            write: input.write,
            net: !input.net.is_empty(),
            capabilities: wanted(&input),
        })
    }

    fn call<'a>(&'a self, call: ToolCall<'a>) -> LocalBoxFuture<'a, ToolOutcome> {
        Box::pin(async move { self.run(call).await.into() })
    }
}

impl ExecRunTool {
    /// Runs one call to its end, or until the user interrupts it.
    async fn run(&self, call: ToolCall<'_>) -> Result<String, CallError> {
        let grants = self.grants.as_ref().map_err(|why| {
            CallError::Failed(format!("commands cannot run in this session: {why}"))
        })?;
        let input = parse_input(call.input)
            .map_err(|why| CallError::InvalidInput(format!("exec.run: {why}")))?;
        let mut grants = ExecGrants::clone(grants);
        if let Some(audit) = &mut grants.audit {
            *audit = AuditScope::new(audit.log.clone(), "exec", call.call_id, call.session_id);
        }
        let request = ExecRequest {
            cwd: input.cwd.clone(),
            write: input.write,
            net: input.net.clone(),
            timeout: input.timeout,
            call_id: call.call_id.to_string(),
            ..ExecRequest::new(CommandLine::Shell(input.command.clone()))
        };
        let cancel = Cancel::new();
        let _guard = CancelOnDrop(cancel.clone());
        let runner = {
            let cancel = cancel.clone();
            tokio::task::spawn_blocking(move || {
                crate::exec::run(&request, &grants, &cancel, &mut |_| {})
            })
        };
        tokio::pin!(runner);
        let joined = tokio::select! {
            joined = &mut runner => joined,
            () = call.interrupt.raised() => {
                cancel.cancel();
                runner.await
            }
        };
        let outcome = joined
            .map_err(|e| CallError::Failed(format!("the command's runner failed: {e}")))?
            .map_err(|e| CallError::Failed(e.to_string()))?;
        if let Some(failure) = &outcome.audit_failure {
            return Err(CallError::Failed(format!(
                "the command ran but its audit record could not be written ({failure}); its output is withheld"
            )));
        }
        Ok(result_text(&outcome, &input))
    }
}

/// The result the model reads: how the command ended, its output, and what
/// it lacked if it hit the sandbox.
fn result_text(outcome: &ExecOutcome, input: &RunInput) -> String {
    let mut text = match outcome.ending {
        Ending::Exited(code) => format!("exit code {code}\n"),
        Ending::TimedOut => format!(
            "the command ran out of time ({}) and was killed with every process it started (exit code 124)\n",
            input.timeout.map_or_else(
                || "its default time".to_string(),
                |t| format!("{}s", t.as_secs())
            )
        ),
        Ending::Cancelled => {
            "the command was interrupted by the user and killed (exit code 130)\n".to_string()
        }
    };
    text.push_str(&outcome.output.text());
    if !text.ends_with('\n') {
        text.push('\n');
    }
    for refusal in &outcome.refusals {
        text.push_str(&format!(
            "[sandbox] refused {}: {}\n",
            refusal.target, refusal.reason
        ));
    }
    if !outcome.needs.is_empty() {
        let needs: Vec<String> = outcome.needs.iter().map(ask_for).collect();
        text.push_str(&format!(
            "[sandbox] the command was stopped by the sandbox; it needs: {}\n",
            needs.join("; ")
        ));
    }
    text
}

/// How the model asks for a capability a command lacked.
fn ask_for(missing: &MissingCapability) -> String {
    match missing {
        MissingCapability::WriteWorkspace => {
            "write the workspace (call again with \"write\": true)".to_string()
        }
        MissingCapability::WriteProtected => {
            "write a protected path such as .git, which commands never may (ask the user to do it)"
                .to_string()
        }
        MissingCapability::Network(Some(origin)) => {
            format!("reach {origin} (call again with \"net\": [\"{origin}\"])")
        }
        MissingCapability::Network(None) => {
            "the network (call again with \"net\" listing the origins it needs, e.g. [\"https://example.com\"])"
                .to_string()
        }
    }
}

/// Cancels a command when dropped: a call whose future is dropped (the
/// turn abandoned) does not leave its command running.
struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}
