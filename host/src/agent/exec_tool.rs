//! The host's `exec.*` tools: the model runs a command of the project
//! (`bash -c COMMAND`) in the native sandbox of [`crate::exec`], to its end
//! (`exec.run`) or in the background (`exec.start`, then `exec.output` and
//! `exec.kill`; every job is killed when the session ends).
//!
//! What the command may do is what the call asks for — `write: true` for a
//! writable workspace, `net: [origins]` for origins beyond the session's —
//! and the permission question names exactly that ([`ToolHandler::wants`]);
//! the sandbox, not the command text, enforces it. A command that hits the
//! sandbox gets a result saying which capability it lacked, so the model
//! can ask for it. `exec.run`'s output goes to the call's event sink as it
//! arrives (the terminal shows its last lines while it runs) and to the
//! model when it is done, capped, head and tail.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::LocalBoxFuture;
use serde_json::{Value, json};

use super::tool::{CallWants, Reach, ToolCall, ToolHandler, ToolOutcome};
use crate::audit::{AuditLog, AuditScope};
use crate::config::Settings;
use crate::exec::output::TextStream;
use crate::exec::{
    Cancel, CommandLine, Ending, ExecGrants, ExecOutcome, ExecRequest, JobId, JobOutput, JobTable,
    MAX_TIMEOUT, MissingCapability,
};
use crate::grants::fs::OwnFolders;
use crate::grants::net::NetGrant;
use crate::home::Home;
use crate::sandbox::{CallError, PluginEvent, ToolSpec};

/// The tool's full name, as rules (`Bash` too) and hooks name it.
pub const TOOL_NAME: &str = crate::policy::claude_code::EXEC_TOOL;

/// What the exec tools of a session share: what every command gets, and
/// the session's background jobs (killed when the session ends).
struct Commands {
    /// What every command gets, or why commands cannot run in this session
    /// (the `[exec]` settings or the workspace refused), said at each call.
    grants: Result<ExecGrants, String>,
    jobs: JobTable,
}

impl Commands {
    /// The grants for one call: the session's, audited under the call.
    fn grants_for(&self, call: &ToolCall<'_>) -> Result<ExecGrants, CallError> {
        let mut grants = self.grants.clone().map_err(|why| {
            CallError::Failed(format!("commands cannot run in this session: {why}"))
        })?;
        if let Some(audit) = &mut grants.audit {
            *audit = AuditScope::new(audit.log.clone(), "exec", call.call_id, call.session_id);
        }
        if !call.reach.net {
            grants.net.clear();
        }
        Ok(grants)
    }
}

/// Narrows a call's input to what its agent may reach: a read-only agent's
/// commands get the workspace read-only and an agent without network
/// tools none of the origins asked for, whatever the call says. Returns
/// what was taken away, in plain words, for the result.
fn narrow(input: &mut RunInput, reach: Reach) -> Vec<&'static str> {
    let mut taken = Vec::new();
    if input.write && !reach.write {
        input.write = false;
        taken.push("write the workspace (this agent's workspace is read-only)");
    }
    if !input.net.is_empty() && !reach.net {
        input.net.clear();
        taken.push("reach the network (this agent has no network)");
    }
    taken
}

/// The `exec.*` tools of a session, and what the user must know about
/// them at its start.
pub struct ExecTools {
    /// `exec.run`, `exec.start`, `exec.output`, `exec.kill`.
    pub handlers: Vec<Arc<dyn ToolHandler>>,
    /// The sandbox is off, or commands cannot run at all.
    pub warning: Option<String>,
}

/// The `exec.run` tool.
struct ExecRunTool {
    commands: Arc<Commands>,
    spec: ToolSpec,
}

/// The `exec.start` tool: a command in the background.
struct ExecStartTool {
    commands: Arc<Commands>,
    spec: ToolSpec,
}

/// The `exec.output` tool: what a background job printed since last asked.
struct ExecOutputTool {
    commands: Arc<Commands>,
    spec: ToolSpec,
}

/// The `exec.kill` tool: stops a background job.
struct ExecKillTool {
    commands: Arc<Commands>,
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

impl RunInput {
    /// The request for the sandbox.
    fn request(&self, call_id: &str) -> ExecRequest {
        ExecRequest {
            cwd: self.cwd.clone(),
            write: self.write,
            net: self.net.clone(),
            timeout: self.timeout,
            call_id: call_id.to_string(),
            ..ExecRequest::new(CommandLine::Shell(self.command.clone()))
        }
    }
}

/// The store folders of installed Claude Code plugins, which commands may
/// read: their skills' scripts run as `bash ${CLAUDE_SKILL_DIR}/...`. They
/// hold only the plugin's own files, as installed; the rest of capstan's
/// folders stays out of reach.
fn claude_plugin_folders(home: &Home) -> Vec<PathBuf> {
    let store = crate::plugin::store::PluginStore::new(home.plugins_dir());
    let Ok(lock) = crate::plugin::lock::Lockfile::load(&store.lock_path()) else {
        return Vec::new();
    };
    lock.plugins
        .values()
        .filter(|entry| {
            entry
                .files
                .contains_key(crate::plugin::claude_import::IMPORT_NOTES)
        })
        .map(|entry| entry.dir(store.root()))
        .filter(|dir| dir.is_dir())
        .collect()
}

/// The exec tools of a session in `workspace`: commands get what the
/// `[exec]` settings grant and are recorded in `home`'s audit log.
/// Settings that cannot be used make every call fail saying why, rather
/// than the session.
pub fn for_session(settings: &Settings, workspace: &Path, home: &Home) -> ExecTools {
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
        grants.read.extend(claude_plugin_folders(home));
        Ok(grants)
    })();
    let warning = match &grants {
        Ok(grants) if !grants.sandboxed => Some(
            "WARNING: [exec] sandbox = \"off\": the model's commands (exec.*) run UNSANDBOXED, with your full access to files, network and processes".to_string(),
        ),
        Ok(grants) => crate::exec::credentials::grants_warning(grants),
        Err(why) => Some(format!(
            "warning: the exec tools cannot run commands in this session: {why}"
        )),
    };
    let commands = Arc::new(Commands {
        grants,
        jobs: JobTable::new(),
    });
    let handlers: Vec<Arc<dyn ToolHandler>> = vec![
        Arc::new(ExecRunTool {
            commands: commands.clone(),
            spec: run_spec(),
        }),
        Arc::new(ExecStartTool {
            commands: commands.clone(),
            spec: start_spec(),
        }),
        Arc::new(ExecOutputTool {
            commands: commands.clone(),
            spec: job_spec(
                "output",
                "What a background job (exec.start) printed since last asked, and its exit code once it has ended.",
                true,
            ),
        }),
        Arc::new(ExecKillTool {
            commands,
            spec: job_spec(
                "kill",
                "Stop a background job (exec.start) with every process it started; returns its last output.",
                false,
            ),
        }),
    ];
    ExecTools { handlers, warning }
}

/// What the model is told about `exec.run`.
fn run_spec() -> ToolSpec {
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

/// What the model is told about `exec.start`: `exec.run`'s input, run in
/// the background.
fn start_spec() -> ToolSpec {
    let run = run_spec();
    ToolSpec {
        name: "start".to_string(),
        description:
            "Start a command (bash -c) in the background, for servers and watchers: returns \
a job id at once; read its output with exec.output and stop it with exec.kill. It runs in the same \
sandbox as exec.run, asks for `write` and `net` the same way, and runs until killed (or its \
`timeout`, if given); every job is killed when the session ends."
                .to_string(),
        ..run
    }
}

/// What the model is told about `exec.output` or `exec.kill`.
fn job_spec(name: &str, description: &str, read_only: bool) -> ToolSpec {
    ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "job": {"type": "string", "description": "The job id exec.start returned, such as job-1."}
            },
            "required": ["job"],
            "additionalProperties": false
        }),
        // Both touch only the session's own jobs, never the workspace.
        read_only: true,
        destructive: !read_only,
        idempotent: read_only,
        open_world: false,
    }
}

/// The job an `exec.output` or `exec.kill` call names.
fn parse_job(input: &Value) -> Result<JobId, CallError> {
    let text = input.get("job").and_then(Value::as_str).unwrap_or_default();
    text.trim()
        .strip_prefix("job-")
        .unwrap_or(text.trim())
        .parse::<u64>()
        .map(JobId)
        .map_err(|_| {
            CallError::InvalidInput(format!(
                "`job` must be a job id exec.start returned, such as \"job-1\" (got `{text}`)"
            ))
        })
}

/// A job's output for the model: how it stands, and what it printed.
fn job_text(id: JobId, output: &JobOutput, killed: bool) -> String {
    let mut text = match (&output.outcome, killed) {
        (Some(outcome), false) => format!("{id} ended: exit code {}\n", outcome.exit_code()),
        (_, true) => format!("{id} was killed with every process it started\n"),
        (None, false) => format!("{id} is still running\n"),
    };
    let printed = output.new_output.text();
    if printed.is_empty() {
        text.push_str("(no new output)\n");
    } else {
        text.push_str(&printed);
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    if let Some(outcome) = &output.outcome
        && !outcome.needs.is_empty()
    {
        let needs: Vec<String> = outcome.needs.iter().map(ask_for).collect();
        text.push_str(&format!(
            "[sandbox] the command was stopped by the sandbox; it needs: {}\n",
            needs.join("; ")
        ));
    }
    text
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

/// What an `exec.run` or `exec.start` call asks for. An input that does
/// not parse asks for nothing: the call fails before anything runs.
fn call_wants(input: &Value) -> Option<CallWants> {
    let input = parse_input(input).ok()?;
    Some(CallWants {
        write: input.write,
        net: !input.net.is_empty(),
        capabilities: wanted(&input),
    })
}

impl ToolHandler for ExecRunTool {
    fn name(&self) -> &str {
        TOOL_NAME
    }

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn wants(&self, input: &Value) -> Option<CallWants> {
        call_wants(input)
    }

    fn call<'a>(&'a self, call: ToolCall<'a>) -> LocalBoxFuture<'a, ToolOutcome> {
        Box::pin(async move { self.run(call).await.into() })
    }
}

impl ExecRunTool {
    /// Runs one call to its end, or until the user interrupts it.
    async fn run(&self, call: ToolCall<'_>) -> Result<String, CallError> {
        let mut input = parse_input(call.input)
            .map_err(|why| CallError::InvalidInput(format!("exec.run: {why}")))?;
        let taken = narrow(&mut input, call.reach);
        let grants = self.commands.grants_for(&call)?;
        let request = input.request(call.call_id);
        let cancel = Cancel::new();
        let _guard = CancelOnDrop(cancel.clone());
        let events = call.events.cloned();
        let runner = {
            let cancel = cancel.clone();
            tokio::task::spawn_blocking(move || {
                // The output goes to the terminal (or the stream of events)
                // as it comes; the model gets it, capped, when it is done.
                let mut text = TextStream::default();
                let mut show = |chunk: &[u8]| {
                    let piece = if chunk.is_empty() {
                        text.finish()
                    } else {
                        text.push(chunk)
                    };
                    if let Some(events) = &events
                        && !piece.is_empty()
                    {
                        events(TOOL_NAME, PluginEvent::CommandOutput { text: piece });
                    }
                };
                let outcome = crate::exec::run(&request, &grants, &cancel, &mut show);
                show(&[]);
                outcome
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
        let mut text = result_text(&outcome, &input);
        if !taken.is_empty() {
            text = format!(
                "note: the command ran without the right to {}\n{text}",
                taken.join(" or ")
            );
        }
        Ok(text)
    }
}

impl ToolHandler for ExecStartTool {
    fn name(&self) -> &str {
        "exec.start"
    }

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn wants(&self, input: &Value) -> Option<CallWants> {
        call_wants(input)
    }

    fn call<'a>(&'a self, call: ToolCall<'a>) -> LocalBoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let started = (|| {
                let mut input = parse_input(call.input)
                    .map_err(|why| CallError::InvalidInput(format!("exec.start: {why}")))?;
                narrow(&mut input, call.reach);
                let grants = self.commands.grants_for(&call)?;
                let id = self
                    .commands
                    .jobs
                    .start(input.request(call.call_id), grants)
                    .map_err(|e| CallError::Failed(e.to_string()))?;
                Ok(format!(
                    "started {id}; read its output with exec.output {{\"job\": \"{id}\"}}, stop it with exec.kill"
                ))
            })();
            started.into()
        })
    }
}

impl ToolHandler for ExecOutputTool {
    fn name(&self) -> &str {
        "exec.output"
    }

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(&'a self, call: ToolCall<'a>) -> LocalBoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let result = parse_job(call.input).and_then(|id| {
                let output = self
                    .commands
                    .jobs
                    .output(id)
                    .map_err(|e| CallError::InvalidInput(e.to_string()))?;
                Ok(job_text(id, &output, false))
            });
            result.into()
        })
    }
}

impl ToolHandler for ExecKillTool {
    fn name(&self) -> &str {
        "exec.kill"
    }

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(&'a self, call: ToolCall<'a>) -> LocalBoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let id = match parse_job(call.input) {
                Ok(id) => id,
                Err(error) => return Err(error).into(),
            };
            let commands = self.commands.clone();
            // Killing waits for the job's processes to be gone.
            let killed = tokio::task::spawn_blocking(move || commands.jobs.kill(id)).await;
            match killed {
                Ok(Ok(output)) => Ok(job_text(id, &output, true)),
                Ok(Err(unknown)) => Err(CallError::InvalidInput(unknown.to_string())),
                Err(e) => Err(CallError::Failed(format!("killing {id} failed: {e}"))),
            }
            .into()
        })
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
    for put_aside in &outcome.quarantined {
        text.push_str(&format!("[sandbox] {}\n", put_aside.describe()));
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
        // The same words as `capstan exec` says them: the model reads the
        // input field, a user reading along the flag.
        MissingCapability::Network(_) | MissingCapability::OutsideRepository(_) => {
            missing.to_string()
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
