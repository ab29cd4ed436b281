//! Claude Code command hooks — a shell command run on an event — run in the
//! OS sandbox of [`crate::exec`] instead of with the user's rights.
//!
//! A hook is written as in Claude Code (`hooks/hooks.json` of a plugin, the
//! `hooks` of its `plugin.json`, or of a `.claude/settings.json`):
//!
//! ```json
//! {"hooks": {"PreToolUse": [{"matcher": "Write|Edit",
//!   "hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/check.sh", "timeout": 30}]}]}}
//! ```
//!
//! Its command runs by `bash -c` with the event's payload (Claude Code's
//! field names) on its standard input, `CLAUDE_PROJECT_DIR` and, for a
//! plugin's hook, `CLAUDE_PLUGIN_ROOT` set, and reaches only this: the
//! workspace and its plugin's folder, read-only, the system folders and
//! tool homes commands may read, no network, and an environment scrubbed
//! to `PATH`, `HOME`, `LANG`, `TERM` and `TMPDIR` (no API keys, no secrets
//! but those the user granted the plugin at install with `--hook-secret`,
//! whose values are redacted from what the command prints).
//! Every run is in the audit log.
//!
//! Its answer follows Claude Code's rules:
//!
//! - exit code 0: standard output that is a JSON object is read for
//!   `continue`/`stopReason`, `decision`/`reason`,
//!   `hookSpecificOutput.permissionDecision` (with
//!   `permissionDecisionReason`), `hookSpecificOutput.additionalContext` and
//!   `systemMessage`; other output is context for the model on
//!   UserPromptSubmit and SessionStart, and ignored elsewhere;
//! - exit code 2: a block, with standard error as the reason the model
//!   reads (a deny on PreToolUse and UserPromptSubmit, a note on
//!   PostToolUse, "keep going" on Stop and SubagentStop);
//! - another exit code: an error that does not block, shown to the user;
//! - a command that cannot start, is killed by a signal or runs out of
//!   time has failed: on a blocking event the action is denied (hooks fail
//!   closed), as for hook components.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::{Decision, Hook, HookEvent, HookFailure, HookOutput, Subscription};
use crate::audit::AuditScope;
use crate::exec::{Cancel, CommandLine, Ending, ExecGrants, ExecRequest, MAX_TIMEOUT, SecretEnv};

/// How long a command or http hook runs when it does not say.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a prompt hook waits for the model when it does not say, as in
/// Claude Code.
pub const DEFAULT_PROMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an agent hook's sub-agent runs when it does not say, as in
/// Claude Code.
pub const DEFAULT_AGENT_TIMEOUT: Duration = Duration::from_secs(60);

/// What a hook does when its event comes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `"type": "command"`: runs a shell command in the OS sandbox.
    Command(String),
    /// `"type": "prompt"`: asks the session's model whether to go ahead
    /// ([`super::prompt`]).
    Prompt {
        /// The prompt, where `$ARGUMENTS` stands for the event's JSON.
        prompt: String,
        /// The model asked, when not the session's.
        model: Option<String>,
    },
    /// `"type": "agent"`: a read-only sub-agent of the session decides
    /// ([`super::agent`]).
    Agent {
        /// The prompt, where `$ARGUMENTS` stands for the event's JSON.
        prompt: String,
        /// The model asked, when not the session's.
        model: Option<String>,
    },
    /// `"type": "http"`: posts the event's JSON to a URL ([`super::http`]).
    Http {
        /// The URL.
        url: String,
        /// Headers as written; `$VAR` and `${VAR}` name a secret when
        /// `VAR` is in `secrets`.
        headers: Vec<(String, String)>,
        /// The secrets the headers may use (Claude Code's
        /// `allowedEnvVars`).
        secrets: Vec<String>,
    },
}

/// One hook as written: the event, the matcher, what it does and its
/// timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    /// The event.
    pub event: HookEvent,
    /// The matcher, for events that take one.
    pub matcher: Option<String>,
    /// What it does.
    pub action: Action,
    /// How long it may run.
    pub timeout: Duration,
}

impl CommandSpec {
    /// What the hook may reach and do, in plain words, for the consent
    /// text and the session's notices.
    pub fn describe(&self) -> String {
        let subscription = Subscription {
            event: self.event,
            matcher: self.matcher.clone(),
        };
        let seconds = self.timeout.as_secs();
        match &self.action {
            Action::Command(command) => format!(
                "{}; runs `{}` in the OS sandbox: reads the workspace and the plugin's folder (read-only), no network, no secrets or environment variables beyond PATH, HOME, LANG, TERM, TMPDIR; stdin is the event as JSON; at most {seconds} s",
                subscription.describe(),
                crate::escape::line(command),
            ),
            Action::Prompt { prompt, model } => format!(
                "{}; a prompt hook: sends the event as JSON with the prompt `{}` to the session's model provider ({}), whose answer decides; runs nothing, no other network; at most {seconds} s",
                subscription.describe(),
                crate::escape::line(&excerpt(prompt, 120)),
                match model {
                    Some(model) => format!("model {}", crate::escape::line(model)),
                    None => "the session's model".to_string(),
                },
            ),
            Action::Agent { prompt, model } => format!(
                "{}; an agent hook: a sub-agent on the session's model provider ({}) gets the event as JSON with the prompt `{}`, may read and search the workspace (read-only, up to {} model requests), runs no commands, no network; its answer decides; at most {seconds} s",
                subscription.describe(),
                match model {
                    Some(model) => format!("model {}", crate::escape::line(model)),
                    None => "the session's model".to_string(),
                },
                crate::escape::line(&excerpt(prompt, 120)),
                super::agent::AGENT_HOOK_MAX_TURNS,
            ),
            Action::Http {
                url,
                headers,
                secrets,
            } => {
                let origin = super::http::origin_of(url)
                    .map_or_else(|e| format!("(unusable: {e})"), |o| o.to_string());
                let mut line = format!(
                    "{}; an http hook: posts the event as JSON to {} (network: {origin} only), whose answer decides; runs nothing",
                    subscription.describe(),
                    crate::escape::line(url),
                );
                for (name, value) in headers {
                    let used: Vec<&String> = secrets
                        .iter()
                        .filter(|s| super::http::mentions(value, s))
                        .collect();
                    if used.is_empty() {
                        line.push_str(&format!("; sends the header {}", crate::escape::line(name)));
                    } else {
                        for secret in used {
                            line.push_str(&format!(
                                "; sends your secret {secret} as {}",
                                crate::escape::line(name)
                            ));
                        }
                    }
                }
                line.push_str(&format!("; at most {seconds} s"));
                line
            }
        }
    }

    /// The kind of hook, as Claude Code names it: `command`, `prompt`,
    /// `http`.
    pub fn kind(&self) -> &'static str {
        match self.action {
            Action::Command(_) => "command",
            Action::Prompt { .. } => "prompt",
            Action::Agent { .. } => "agent",
            Action::Http { .. } => "http",
        }
    }
}

/// The first `chars` characters of `text`, with `…` when cut.
fn excerpt(text: &str, chars: usize) -> String {
    let mut cut: String = text.chars().take(chars).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// Reads the hooks of a Claude Code `hooks` object (`{"hooks":
/// {EVENT: [{matcher, hooks: [{type, command, timeout}]}]}}`, or the inner
/// object): command, prompt, agent and http hooks. Returns the hooks, and a
/// line for each entry that cannot be used (an unknown event or kind, an
/// agent hook on an event it cannot decide, no command, a URL that cannot
/// be used).
pub fn parse_hooks(value: &Value) -> (Vec<CommandSpec>, Vec<String>) {
    let mut specs = Vec::new();
    let mut problems = Vec::new();
    let events = value.get("hooks").unwrap_or(value);
    let Some(events) = events.as_object() else {
        problems.push("`hooks` must be an object of events".to_string());
        return (specs, problems);
    };
    for (name, groups) in events {
        let Some(event) = HookEvent::from_name(name) else {
            problems.push(format!("{name}: not an event capstan knows; skipped"));
            continue;
        };
        for group in groups.as_array().into_iter().flatten() {
            let matcher = group
                .get("matcher")
                .and_then(Value::as_str)
                .map(str::to_string)
                .filter(|m| !m.trim().is_empty());
            for hook in group
                .get("hooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let kind = hook
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("command");
                let text = |field: &str| {
                    hook.get(field)
                        .and_then(Value::as_str)
                        .filter(|c| !c.trim().is_empty())
                        .map(str::to_string)
                };
                let (action, default_timeout) = match kind {
                    "command" => {
                        let Some(command) = text("command") else {
                            problems
                                .push(format!("{name}: a command hook without `command`; skipped"));
                            continue;
                        };
                        (Action::Command(command), DEFAULT_HOOK_TIMEOUT)
                    }
                    "prompt" => {
                        let Some(prompt) = text("prompt") else {
                            problems
                                .push(format!("{name}: a prompt hook without `prompt`; skipped"));
                            continue;
                        };
                        (
                            Action::Prompt {
                                prompt,
                                model: text("model"),
                            },
                            DEFAULT_PROMPT_TIMEOUT,
                        )
                    }
                    "agent" => {
                        let Some(prompt) = text("prompt") else {
                            problems
                                .push(format!("{name}: an agent hook without `prompt`; skipped"));
                            continue;
                        };
                        if !super::agent::AGENT_HOOK_EVENTS.contains(&event) {
                            problems.push(format!(
                                "{name}: an agent hook cannot run on {name} (agent hooks run on {}); skipped",
                                super::agent::AGENT_HOOK_EVENTS
                                    .map(HookEvent::name)
                                    .join(", ")
                            ));
                            continue;
                        }
                        (
                            Action::Agent {
                                prompt,
                                model: text("model"),
                            },
                            DEFAULT_AGENT_TIMEOUT,
                        )
                    }
                    "http" => {
                        let Some(url) = text("url") else {
                            problems.push(format!("{name}: an http hook without `url`; skipped"));
                            continue;
                        };
                        if let Err(why) = super::http::origin_of(&url) {
                            problems.push(format!(
                                "{name}: an http hook whose url `{}` cannot be used: {why}; skipped",
                                crate::escape::line(&url)
                            ));
                            continue;
                        }
                        let headers = hook
                            .get("headers")
                            .and_then(Value::as_object)
                            .map(|h| {
                                h.iter()
                                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                                    .collect()
                            })
                            .unwrap_or_default();
                        let mut secrets: Vec<String> = Vec::new();
                        for listed in hook
                            .get("allowedEnvVars")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_str)
                        {
                            match crate::grants::env::reserved_reason(listed, &[]) {
                                Some(why) => problems.push(format!(
                                    "{name}: an http hook's allowedEnvVars names {}, which is never sent ({why})",
                                    crate::escape::line(listed)
                                )),
                                None => secrets.push(listed.to_string()),
                            }
                        }
                        (
                            Action::Http {
                                url,
                                headers,
                                secrets,
                            },
                            DEFAULT_HOOK_TIMEOUT,
                        )
                    }
                    _ => {
                        problems.push(format!(
                            "{name}: a `{kind}` hook is not supported (command, prompt, agent and http hooks are); skipped"
                        ));
                        continue;
                    }
                };
                let timeout = hook
                    .get("timeout")
                    .and_then(Value::as_f64)
                    .filter(|t| *t > 0.0)
                    .map_or(default_timeout, Duration::from_secs_f64)
                    .min(MAX_TIMEOUT);
                specs.push(CommandSpec {
                    event,
                    matcher: matcher.clone(),
                    action,
                    timeout,
                });
            }
        }
    }
    (specs, problems)
}

/// A command hook, ready to run.
pub struct CommandHook {
    name: String,
    subscriptions: Vec<Subscription>,
    spec: CommandSpec,
    /// What its command gets: read-only, no network, no extra variables;
    /// or why commands cannot run in this session (the hook then fails at
    /// each event).
    grants: Result<ExecGrants, String>,
    /// The plugin's folder, for `CLAUDE_PLUGIN_ROOT`.
    plugin_root: Option<PathBuf>,
    /// The session, for the audit records.
    session_id: Option<String>,
}

impl CommandHook {
    /// The hook `spec` named `name` (`PLUGIN/hooks.json#N`), whose command
    /// runs under `session` (the session's command grants, or why there
    /// are none) narrowed to
    /// what a hook gets: the workspace read-only, `plugin_root` readable,
    /// no network, no variables beyond the scrubbed few, no writable
    /// folders; recorded under `audit_name` in the audit log.
    pub fn new(
        name: String,
        spec: CommandSpec,
        session: &Result<ExecGrants, String>,
        plugin_root: Option<&Path>,
        audit_name: &str,
        session_id: Option<&str>,
    ) -> Self {
        let grants = session.clone().map(|mut grants| {
            grants.write.clear();
            grants.net.clear();
            grants.env.clear();
            grants.secrets = SecretEnv::default();
            grants.timeout = spec.timeout;
            if let Some(root) = plugin_root {
                grants.read.push(root.to_path_buf());
            }
            if let Some(audit) = &mut grants.audit {
                *audit = AuditScope::new(audit.log.clone(), audit_name, "", session_id);
            }
            grants
        });
        Self {
            name,
            subscriptions: vec![Subscription {
                event: spec.event,
                matcher: spec.matcher.clone(),
            }],
            spec,
            grants,
            plugin_root: plugin_root.map(Path::to_path_buf),
            session_id: session_id.map(str::to_string),
        }
    }

    /// The same hook, its command given `secrets` as environment variables
    /// (granted at install); what it prints is redacted of their values.
    pub fn with_secrets(mut self, secrets: SecretEnv) -> Self {
        if let Ok(grants) = &mut self.grants {
            grants.secrets = secrets;
        }
        self
    }

    /// The command line: the variables Claude Code sets, then the command.
    fn command_line(&self, workspace: &Path) -> String {
        let mut line = format!(
            "export CLAUDE_PROJECT_DIR={}",
            shell_quote(&workspace.display().to_string())
        );
        if let Some(root) = &self.plugin_root {
            line.push_str(&format!(
                " CLAUDE_PLUGIN_ROOT={}",
                shell_quote(&root.display().to_string())
            ));
        }
        line.push('\n');
        if let Action::Command(command) = &self.spec.action {
            line.push_str(command);
        }
        line
    }
}

/// `text` in single quotes for bash.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

impl Hook for CommandHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn subscriptions(&self) -> &[Subscription] {
        &self.subscriptions
    }

    fn handle<'a>(
        &'a self,
        event: HookEvent,
        payload: &'a Value,
    ) -> BoxFuture<'a, Result<HookOutput, HookFailure>> {
        Box::pin(async move {
            let call_id = payload
                .get("tool_use_id")
                .and_then(Value::as_str)
                .unwrap_or("");
            let mut grants = self.grants.clone().map_err(|why| {
                HookFailure::Failed(format!("commands cannot run in this session: {why}"))
            })?;
            if let Some(audit) = &mut grants.audit {
                *audit = AuditScope::new(
                    audit.log.clone(),
                    &audit.plugin,
                    call_id,
                    self.session_id.as_deref(),
                );
            }
            let request = ExecRequest {
                stdin: Some(payload.to_string().into_bytes()),
                separate_errors: true,
                timeout: Some(self.spec.timeout),
                call_id: call_id.to_string(),
                ..ExecRequest::new(CommandLine::Shell(self.command_line(&grants.workspace)))
            };
            let secrets = grants.secrets.clone();
            let cancel = Cancel::new();
            let guard = CancelOnDrop(cancel.clone());
            let ran = tokio::task::spawn_blocking(move || {
                crate::exec::run(&request, &grants, &cancel, &mut |_| {})
            })
            .await;
            drop(guard);
            let outcome = ran
                .map_err(|e| HookFailure::Crashed(format!("its runner failed: {e}")))?
                .map_err(|e| HookFailure::Failed(format!("its command could not run: {e}")))?;
            if let Some(failure) = &outcome.audit_failure {
                return Err(HookFailure::Failed(format!(
                    "its run could not be recorded in the audit log ({failure})"
                )));
            }
            let code = match outcome.ending {
                Ending::Exited(code) => code,
                Ending::TimedOut => {
                    return Err(HookFailure::TimedOut(
                        u64::try_from(self.spec.timeout.as_millis()).unwrap_or(u64::MAX),
                    ));
                }
                Ending::Cancelled => return Err(HookFailure::Failed("it was cancelled".into())),
            };
            interpret(
                event,
                code,
                &secrets.redact(&outcome.output.text()),
                &secrets.redact(&outcome.errors.text()),
            )
        })
    }
}

/// Kills the command when the hook's future is dropped (the turn was
/// interrupted).
struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// A command hook's answer to `event` from its exit code and output, by
/// Claude Code's rules (see the [module documentation](self)).
pub fn interpret(
    event: HookEvent,
    code: i32,
    stdout: &str,
    stderr: &str,
) -> Result<HookOutput, HookFailure> {
    let stderr = stderr.trim();
    match code {
        0 => Ok(from_stdout(event, stdout.trim())),
        2 => {
            let reason = if stderr.is_empty() {
                "the hook blocked it (exit code 2) without saying why".to_string()
            } else {
                stderr.to_string()
            };
            Ok(HookOutput {
                decision: block(event, reason),
                system_message: None,
            })
        }
        // 126: not executable, 127: not found, 128+n: killed by signal n.
        126.. => Err(HookFailure::Crashed(format!(
            "its command ended with exit code {code}{}",
            if stderr.is_empty() {
                String::new()
            } else {
                format!(": {stderr}")
            }
        ))),
        _ => Ok(HookOutput {
            decision: Decision::Proceed,
            system_message: Some(if stderr.is_empty() {
                format!("the hook's command failed with exit code {code}")
            } else {
                format!("the hook's command failed with exit code {code}: {stderr}")
            }),
        }),
    }
}

/// What a block (exit code 2, `decision: "block"`) means on `event`.
pub(super) fn block(event: HookEvent, reason: String) -> Decision {
    match event {
        HookEvent::Stop | HookEvent::SubagentStop => Decision::KeepGoing(reason),
        HookEvent::PostToolUse | HookEvent::PostToolUseFailure => Decision::AddContext(reason),
        HookEvent::PreToolUse | HookEvent::UserPromptSubmit | HookEvent::PermissionRequest => {
            Decision::Deny(reason)
        }
        _ => Decision::Proceed,
    }
}

/// The answer an exit code of 0 gives, read from standard output.
pub(super) fn from_stdout(event: HookEvent, stdout: &str) -> HookOutput {
    let plain = |stdout: &str| {
        let decision = if !stdout.is_empty()
            && matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart)
        {
            Decision::AddContext(stdout.to_string())
        } else {
            Decision::Proceed
        };
        HookOutput {
            decision,
            system_message: None,
        }
    };
    let Ok(Value::Object(json)) = serde_json::from_str::<Value>(stdout) else {
        return plain(stdout);
    };
    let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_string);
    let system_message = text(json.get("systemMessage"));
    let specific = json.get("hookSpecificOutput");
    let reason = text(json.get("reason"));
    let decision = if json.get("continue") == Some(&Value::Bool(false)) {
        let why = text(json.get("stopReason"))
            .unwrap_or_else(|| "the hook asked to stop (`continue: false`)".to_string());
        match event {
            HookEvent::Stop | HookEvent::SubagentStop => Decision::Proceed,
            _ => Decision::Deny(why),
        }
    } else if let Some(decision) = (event == HookEvent::PermissionRequest)
        .then(|| permission_request_decision(specific))
        .flatten()
    {
        decision
    } else if let Some(permission) = specific
        .and_then(|s| s.get("permissionDecision"))
        .and_then(Value::as_str)
    {
        let why = text(specific.and_then(|s| s.get("permissionDecisionReason")))
            .or(reason)
            .unwrap_or_else(|| format!("the hook answered `{permission}`"));
        match permission {
            "allow" => Decision::Allow,
            "deny" => Decision::Deny(why),
            "ask" => Decision::Ask(why),
            _ => Decision::Proceed,
        }
    } else {
        match json.get("decision").and_then(Value::as_str) {
            Some("block") => block(
                event,
                reason.unwrap_or_else(|| "the hook blocked it".to_string()),
            ),
            Some("approve") => Decision::Allow,
            _ => match text(specific.and_then(|s| s.get("additionalContext"))) {
                Some(context) if !context.is_empty() => Decision::AddContext(context),
                _ => Decision::Proceed,
            },
        }
    };
    // The input a PreToolUse hook wants the call to run with (Claude
    // Code's `updatedInput`): the host re-validates it against the tool's
    // schema, and the policy still decides on it.
    let decision = match (&decision, specific.and_then(|s| s.get("updatedInput"))) {
        (Decision::Allow | Decision::Proceed, Some(updated))
            if event == HookEvent::PreToolUse && updated.is_object() =>
        {
            Decision::Modify(updated.clone())
        }
        _ => decision,
    };
    HookOutput {
        decision,
        system_message,
    }
}

/// A PermissionRequest hook's answer in Claude Code's shape,
/// `hookSpecificOutput.decision.behavior` (`allow` or `deny`, with a
/// `message`).
fn permission_request_decision(specific: Option<&Value>) -> Option<Decision> {
    let decision = specific?.get("decision")?;
    match decision.get("behavior").and_then(Value::as_str)? {
        "allow" => Some(Decision::Allow),
        "deny" => Some(Decision::Deny(
            decision
                .get("message")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .unwrap_or("the hook denied the permission request")
                .to_string(),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hooks_json_is_read_as_claude_code_writes_it() {
        let (mut specs, problems) = parse_hooks(&json!({"hooks": {
            "PreToolUse": [{"matcher": "Write|Edit", "hooks": [
                {"type": "command", "command": "./check.sh", "timeout": 5},
                {"type": "agent", "prompt": "is it ok?"},
                {"type": "prompt", "prompt": "Is $ARGUMENTS safe?", "timeout": 9},
                {"type": "http", "url": "http://127.0.0.1:9/hook",
                 "headers": {"Authorization": "Bearer $TOKEN", "X-Key": "$ANTHROPIC_API_KEY"},
                 "allowedEnvVars": ["TOKEN", "ANTHROPIC_API_KEY"]},
                {"type": "http", "url": "ftp://example.com/"}
            ]}],
            "Stop": [{"hooks": [{"type": "command", "command": "notify"}]}],
            "SessionStart": [{"hooks": [{"type": "agent", "prompt": "look around"}, {"type": "frob"}]}],
            "Bogus": []
        }}));
        assert_eq!(specs.len(), 5);
        let agent = specs.remove(1);
        assert_eq!(agent.kind(), "agent");
        assert_eq!(agent.timeout, DEFAULT_AGENT_TIMEOUT);
        let reach = agent.describe();
        assert!(
            reach.contains("an agent hook")
                && reach.contains("the session's model provider")
                && reach.contains("read-only")
                && reach.contains("no network"),
            "{reach}"
        );
        assert_eq!(specs[1].kind(), "prompt");
        assert_eq!(specs[1].timeout, Duration::from_secs(9));
        assert!(
            specs[1].describe().contains("the session's model provider"),
            "{}",
            specs[1].describe()
        );
        assert_eq!(specs[2].kind(), "http");
        let http = specs[2].describe();
        assert!(
            http.contains("network: http://127.0.0.1:9 only")
                && http.contains("your secret TOKEN as Authorization"),
            "{http}"
        );
        let specs = [specs[0].clone(), specs[3].clone()];
        assert_eq!(specs[0].event, HookEvent::PreToolUse);
        assert_eq!(specs[0].matcher.as_deref(), Some("Write|Edit"));
        assert_eq!(specs[0].timeout, Duration::from_secs(5));
        assert_eq!(specs[1].timeout, DEFAULT_HOOK_TIMEOUT);
        let all = problems.join("\n");
        assert!(
            all.contains("an agent hook cannot run on SessionStart")
                && all.contains("a `frob` hook is not supported")
                && all.contains("ftp://example.com/")
                && all.contains("ANTHROPIC_API_KEY, which is never sent")
                && all.contains("Bogus"),
            "{all}"
        );
        assert!(specs[0].describe().contains("no network"));
    }

    #[test]
    fn exit_codes_and_json_answers_follow_claude_code() {
        let pre = HookEvent::PreToolUse;
        assert_eq!(
            interpret(pre, 2, "", "no writes to secrets\n")
                .unwrap()
                .decision,
            Decision::Deny("no writes to secrets".into())
        );
        assert_eq!(
            interpret(HookEvent::Stop, 2, "", "tests fail")
                .unwrap()
                .decision,
            Decision::KeepGoing("tests fail".into())
        );
        assert_eq!(
            interpret(HookEvent::PostToolUse, 2, "", "lint: x")
                .unwrap()
                .decision,
            Decision::AddContext("lint: x".into())
        );
        let deny = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"not there"},"systemMessage":"denied"}"#;
        let out = interpret(pre, 0, deny, "").unwrap();
        assert_eq!(out.decision, Decision::Deny("not there".into()));
        assert_eq!(out.system_message.as_deref(), Some("denied"));
        let allow = r#"{"hookSpecificOutput":{"permissionDecision":"allow"}}"#;
        assert_eq!(
            interpret(pre, 0, allow, "").unwrap().decision,
            Decision::Allow
        );
        assert_eq!(
            interpret(pre, 0, r#"{"decision":"block","reason":"r"}"#, "")
                .unwrap()
                .decision,
            Decision::Deny("r".into())
        );
        assert_eq!(
            interpret(pre, 0, r#"{"continue":false,"stopReason":"halt"}"#, "")
                .unwrap()
                .decision,
            Decision::Deny("halt".into())
        );
        assert_eq!(
            interpret(HookEvent::UserPromptSubmit, 0, "today is Friday", "")
                .unwrap()
                .decision,
            Decision::AddContext("today is Friday".into())
        );
        assert_eq!(
            interpret(pre, 0, "hello", "").unwrap().decision,
            Decision::Proceed
        );
        let soft = interpret(pre, 1, "", "oops").unwrap();
        assert_eq!(soft.decision, Decision::Proceed);
        assert!(soft.system_message.unwrap().contains("oops"));
        let modify =
            r#"{"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":{"path":"b"}}}"#;
        assert_eq!(
            interpret(pre, 0, modify, "").unwrap().decision,
            Decision::Modify(serde_json::json!({"path": "b"}))
        );
        let refuse = r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"not now"}}}"#;
        assert_eq!(
            interpret(HookEvent::PermissionRequest, 0, refuse, "")
                .unwrap()
                .decision,
            Decision::Deny("not now".into())
        );
        assert!(interpret(pre, 127, "", "sh: x: not found").is_err());
        assert!(interpret(pre, 137, "", "").is_err());
    }
}
