//! Whether a call may run: the tool must exist and take an object, an
//! active skill's `allowed-tools` must include it, then PreToolUse hooks,
//! the permission policy, PermissionRequest hooks and, when the answer is
//! still "ask", the user (through the front end's asynchronous
//! [`Frontend::ask`]) decide. The decision is recorded in the transcript
//! and shown to the front end.
//!
//! Hooks can narrow what the policy decides, and spare the user a question
//! the mode would ask, but never override a deny rule, plan mode, or an ask
//! rule the user wrote.

use std::path::Path;

use serde_json::{Value, json};

use super::dispatch::Call;
use super::tool::{AgentTool, CallNeeds};
use super::{Agent, AgentError, AgentEvent, Frontend, Interrupt, REFUSAL_PREFIX};
use crate::audit::{AuditEvent, AuditScope};
use crate::hooks::{self, HookEvent, Verdict};
use crate::policy::{
    Decision, DecisionSource, Layer, Mode, Outcome, Rule, RuleKind, ToolFacts, web_hosts,
};
use crate::session::record::Event;

impl Agent {
    /// Narrows a command's input to what this agent may reach, before the
    /// policy decides on it: a read-only agent's `exec.*` call asking for
    /// `write: true`, or an offline agent's asking for origins, runs
    /// without them (the sandbox would hold it to that anyway), so the
    /// policy judges what will run rather than refuse a question nobody can
    /// answer. Returns a note for the model when something was taken away.
    fn narrow_to_reach(&self, tool: &AgentTool, input: &mut Value) -> Option<String> {
        let reach = self.profile.reach;
        if !tool.name.starts_with("exec.") {
            return None;
        }
        let object = input.as_object_mut()?;
        let mut taken = Vec::new();
        if !reach.write && object.get("write") == Some(&Value::Bool(true)) {
            object.insert("write".into(), Value::Bool(false));
            taken.push("write the workspace (this agent's workspace is read-only)");
        }
        if !reach.net
            && object
                .get("net")
                .and_then(Value::as_array)
                .is_some_and(|net| !net.is_empty())
        {
            object.remove("net");
            taken.push("reach the network (this agent has no network)");
        }
        (!taken.is_empty()).then(|| {
            format!(
                "The command ran without the right to {}.",
                taken.join(" or ")
            )
        })
    }
}

/// A tool call that needs the user's say-so.
#[derive(Debug)]
pub struct PermissionRequest<'a> {
    /// The tool.
    pub tool: &'a AgentTool,
    /// Its input.
    pub input: &'a Value,
    /// What the call needs: whether it may change the workspace, and
    /// what its plugin was granted beyond it.
    pub needs: &'a CallNeeds,
    /// Why the policy asks.
    pub reason: &'a str,
    /// The permission mode.
    pub mode: Mode,
    /// The workspace, against which the call's relative paths resolve.
    pub workspace: &'a Path,
}

/// What the user answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionAnswer {
    /// Run this call.
    AllowOnce,
    /// Run this tool without asking for the rest of the session.
    AllowSession,
    /// Run this tool without asking, in this project, from now on.
    AllowAlways,
    /// Don't run it; the reason, if given, goes to the model.
    Deny {
        /// What the user said.
        reason: Option<String>,
    },
    /// Don't run it, and stop the turn.
    Interrupt,
}

/// A call the checks let run: the tool, the input it runs with (a hook may
/// have changed it), and notes from hooks for the model.
pub(super) struct Authorized {
    pub(super) tool: AgentTool,
    pub(super) input: Value,
    pub(super) notes: Vec<String>,
}

impl Agent {
    /// Decides whether a call may run: the tool must exist and its input be
    /// an object, and the policy (or the user) must allow it. Returns the
    /// tool, or the error result to send back.
    pub(super) async fn authorize(
        &mut self,
        call: &Call,
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
    ) -> Result<Result<Authorized, String>, AgentError> {
        let found = match self.find_tool(&call.name) {
            Some(tool) => Some(tool),
            None => self
                .parts
                .toolbox
                .lookup_when_ready(&call.name)
                .await
                .filter(|tool| self.offers(tool)),
        };
        let Some(tool) = found else {
            let all = self.parts.toolbox.all_tools();
            let known: Vec<&str> = all
                .iter()
                .filter(|tool| self.offers(tool))
                .map(|t| t.model_name.as_str())
                .collect();
            return Ok(Err(format!(
                "There is no tool called `{}`. Available tools: {}.",
                call.name,
                known.join(", ")
            )));
        };
        if !call.input.is_object() {
            return Ok(Err(format!(
                "The input of {} must be a JSON object matching its schema.",
                tool.model_name
            )));
        }
        if let Some(refusal) =
            self.parts
                .toolbox
                .skill_refusal(&tool, &call.input, &self.parts.workspace)
        {
            self.audit_denial(&call.id, &tool.name, "skill allowed-tools", &refusal);
            return Ok(Err(refusal));
        }
        let mut input = call.input.clone();
        let mut notes = Vec::new();
        let mut verdict = Verdict::Proceed;
        let mut hook_decision = None;
        if self.parts.hooks.wants(HookEvent::PreToolUse) {
            let fields = json!({
                "tool_name": tool.name,
                "tool_input": call.input,
                "tool_use_id": call.id,
            });
            let combined = self
                .fire(HookEvent::PreToolUse, fields, Some(&call.id), frontend)
                .await?;
            notes.extend(
                combined
                    .context
                    .iter()
                    .map(|(hook, text)| format!("Note from hook {hook}: {text}")),
            );
            if let Some((hook, reason)) = combined.denied() {
                hook_decision = Some(hook_deny(
                    hook,
                    format!("hook {hook} blocked this call: {reason}"),
                ));
            } else if let Some((hook, modified)) = &combined.modified {
                match hooks::schema::validate(modified, &tool.spec.input_schema) {
                    Ok(()) => {
                        input = modified.clone();
                        let text = format!("hook {hook} changed the input of {}", tool.name);
                        frontend.event(AgentEvent::Notice(&text));
                    }
                    Err(why) => {
                        hook_decision = Some(hook_deny(
                            hook,
                            format!(
                                "hook {hook} changed the input of {} to one its schema refuses ({why}), so the call was not run.",
                                tool.name
                            ),
                        ));
                    }
                }
            }
            verdict = combined.verdict;
        }
        if let Some(note) = self.narrow_to_reach(&tool, &mut input) {
            notes.push(note);
        }
        let mut decision = match hook_decision {
            Some(decision) => decision,
            None => {
                let wants = tool.wants(&input);
                let facts = match &wants {
                    Some(wants) => ToolFacts {
                        tool: &tool.name,
                        read_only: !wants.write,
                        destructive: wants.write,
                        open_world: wants.net,
                        input: &input,
                        workspace: &self.parts.workspace,
                        capabilities: Some(wants.capabilities.as_slice()),
                    },
                    None => ToolFacts {
                        tool: &tool.name,
                        read_only: tool.spec.read_only,
                        destructive: tool.spec.destructive,
                        open_world: tool.spec.open_world,
                        input: &input,
                        workspace: &self.parts.workspace,
                        capabilities: None,
                    },
                };
                let decision = self.parts.policy.decide(&facts);
                let asks_for_origins = wants.as_ref().is_some_and(|wants| wants.net);
                self.skill_pre_approval(decision, &tool, &input, asks_for_origins)
            }
        };
        // A hook's allow spares the user a question the mode would ask, but
        // never overrides a deny rule or plan mode (those are denials), nor
        // an ask rule the user wrote; a hook's ask makes an allowed call ask.
        let asked_by_rule = decision.outcome == Outcome::Ask
            && matches!(decision.source, DecisionSource::Rule { .. });
        match verdict {
            Verdict::Allow { hook } if decision.outcome == Outcome::Ask && !asked_by_rule => {
                decision = Decision {
                    outcome: Outcome::Allow,
                    reason: format!("hook {hook} allowed this call"),
                    source: DecisionSource::Hook(hook),
                };
            }
            Verdict::Ask { hook, reason } if decision.outcome == Outcome::Allow => {
                decision = Decision {
                    outcome: Outcome::Ask,
                    reason: format!("hook {hook} asks first: {reason}"),
                    source: DecisionSource::Hook(hook),
                };
            }
            _ => {}
        }
        if decision.outcome == Outcome::Ask && self.parts.hooks.wants(HookEvent::PermissionRequest)
        {
            let fields = json!({
                "tool_name": tool.name,
                "tool_input": input,
                "tool_use_id": call.id,
                "reason": decision.reason,
            });
            let combined = self
                .fire(
                    HookEvent::PermissionRequest,
                    fields,
                    Some(&call.id),
                    frontend,
                )
                .await?;
            match combined.verdict {
                Verdict::Deny { hook, reason } => {
                    decision = hook_deny(
                        &hook,
                        format!("hook {hook} refused the permission request: {reason}"),
                    );
                }
                // The same holds here: a question an ask rule puts is the
                // user's to answer, whatever a hook says.
                Verdict::Allow { hook } if asked_by_rule => {
                    let text = format!(
                        "hook {hook} allowed {}, but an ask rule you wrote asks first, and only you can answer it",
                        tool.name
                    );
                    frontend.event(AgentEvent::Notice(&text));
                }
                Verdict::Allow { hook } => {
                    decision = Decision {
                        outcome: Outcome::Allow,
                        reason: format!("hook {hook} granted the permission request"),
                        source: DecisionSource::Hook(hook),
                    };
                }
                _ => {}
            }
        }
        if decision.outcome == Outcome::Ask {
            decision = if frontend.can_prompt() {
                let fields = json!({
                    "message": format!("capstan needs your permission to use {}", tool.name),
                    "notification_type": "permission_prompt",
                    "title": "Permission needed",
                });
                self.fire(HookEvent::Notification, fields, Some(&call.id), frontend)
                    .await?;
                let needs = tool.needs();
                let request = PermissionRequest {
                    tool: &tool,
                    input: &input,
                    needs: &needs,
                    reason: &decision.reason,
                    mode: self.parts.policy.mode(),
                    workspace: &self.parts.workspace,
                };
                let answer = frontend.ask(&request).await;
                self.apply_answer(&tool, &input, answer, frontend, interrupt)
            } else if let Some(prompt_tool) = self.parts.config.permission_prompt_tool.clone() {
                self.ask_prompt_tool(
                    &prompt_tool,
                    &tool,
                    &mut input,
                    &call.id,
                    &decision.reason,
                    frontend,
                    interrupt,
                )
                .await
            } else {
                // A per-host tool's refusal names the rule for its host.
                match web_hosts::host_scope(&tool.name, &input) {
                    Some(scope) => web_hosts::without_prompt(decision, &scope),
                    None => decision.without_prompt(&tool.name),
                }
            };
        }
        let (source, rule) = describe_source(&decision.source);
        self.record(Event::Permission {
            tool_use_id: call.id.clone(),
            tool: tool.name.clone(),
            outcome: match decision.outcome {
                Outcome::Allow => "allow",
                Outcome::Ask => "ask",
                Outcome::Deny => "deny",
            }
            .to_string(),
            source: source.clone(),
            rule,
            reason: decision.reason.clone(),
        })?;
        if decision.outcome != Outcome::Allow {
            self.audit_denial(&call.id, &tool.name, &source, &decision.reason);
        }
        // At debug: the transcript records every decision already, and a
        // line per call at the default level costs the loop.
        tracing::debug!(
            tool = tool.name.as_str(),
            call = call.id.as_str(),
            outcome = ?decision.outcome,
            source = ?decision.source,
            "permission decided"
        );
        frontend.event(AgentEvent::Permission {
            id: &call.id,
            tool: &tool.name,
            decision: &decision,
        });
        Ok(match decision.outcome {
            Outcome::Allow => Ok(Authorized { tool, input, notes }),
            Outcome::Ask | Outcome::Deny => Err(format!(
                "{REFUSAL_PREFIX} {} Do not retry the same call; adapt, or ask the user.",
                decision.reason
            )),
        })
    }

    /// Turns the user's answer into a decision, remembering it as asked.
    /// A tool whose permission is per host (`web.fetch`) is remembered
    /// for the host its call asked for, a "no" included (for the session).
    fn apply_answer(
        &mut self,
        tool: &AgentTool,
        input: &Value,
        answer: PermissionAnswer,
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
    ) -> Decision {
        let allow = |source: DecisionSource, reason: String| Decision {
            outcome: Outcome::Allow,
            source,
            reason,
        };
        let scope = web_hosts::host_scope(&tool.name, input);
        let scoped_rule = scope.as_ref().and_then(web_hosts::HostScope::rule);
        // What an answer covers: the tool, or the tool on this host.
        let (remembered, covered) = match (&scope, &scoped_rule) {
            (Some(scope), Some(rule)) => {
                (rule.clone(), format!("{} on {}", tool.name, scope.origin))
            }
            _ => (Rule::tool(&tool.name), tool.name.clone()),
        };
        // A host no rule can name (an IPv6 address) is allowed for this
        // call only: remembering the whole tool would allow every host.
        let answer = match answer {
            PermissionAnswer::AllowSession | PermissionAnswer::AllowAlways
                if scope.is_some() && scoped_rule.is_none() =>
            {
                PermissionAnswer::AllowOnce
            }
            answer => answer,
        };
        match answer {
            PermissionAnswer::AllowOnce => allow(
                DecisionSource::User,
                "the user allowed this call".to_string(),
            ),
            PermissionAnswer::AllowSession => {
                self.parts.policy.allow_for_session(remembered);
                allow(
                    DecisionSource::Session,
                    format!("the user allowed {covered} for this session"),
                )
            }
            PermissionAnswer::AllowAlways => {
                let rule = remembered;
                let saved = self.home.as_ref().map(|home| {
                    crate::config::save_local_allow(home, &self.parts.workspace, &rule)
                });
                // The rule applies from now on as the file it was saved in
                // says, so `/permissions` removes it from there.
                match saved {
                    Some(Ok(_)) => self.parts.policy.add_rule(
                        RuleKind::Allow,
                        rule.clone(),
                        Layer::ProjectLocal,
                    ),
                    _ => self.parts.policy.allow_for_session(rule.clone()),
                }
                let reason = match saved {
                    Some(Ok(path)) => {
                        let text = format!(
                            "{covered} is always allowed in this project: the rule `{rule}` was saved to {}; /permissions lists saved rules and removes them",
                            path.display()
                        );
                        frontend.event(AgentEvent::Notice(&text));
                        format!(
                            "the user always allows {covered} in this project (saved to {})",
                            path.display()
                        )
                    }
                    Some(Err(error)) => {
                        let text = format!(
                            "{covered} allowed for this session only: the answer could not be saved: {error}"
                        );
                        frontend.event(AgentEvent::Notice(&text));
                        text
                    }
                    None => format!("the user allowed {covered} for this session"),
                };
                allow(DecisionSource::User, reason)
            }
            PermissionAnswer::Deny { reason } => {
                // A host refused stays refused for the session: the user
                // is not asked about it again.
                if let Some(rule) = scoped_rule {
                    self.parts
                        .policy
                        .add_rule(RuleKind::Deny, rule, Layer::Session);
                }
                Self::denial(reason)
            }
            PermissionAnswer::Interrupt => {
                interrupt.raise();
                Decision {
                    outcome: Outcome::Deny,
                    source: DecisionSource::User,
                    reason: "the user interrupted instead of answering.".to_string(),
                }
            }
        }
    }

    /// Records in the session's audit log that call `call_id` of `tool`
    /// was refused before it ran, `by` whom, and why.
    fn audit_denial(&self, call_id: &str, tool: &str, by: &str, reason: &str) {
        if let Some(log) = self.parts.toolbox.audit() {
            AuditScope::new(log.clone(), audit_plugin(tool), call_id, self.session_id()).record(
                AuditEvent::CallDenied {
                    tool: tool.to_string(),
                    by: by.to_string(),
                    reason: reason.to_string(),
                },
            );
        }
    }

    /// The decision for the user's "no", with what they said.
    fn denial(reason: Option<String>) -> Decision {
        Decision {
            outcome: Outcome::Deny,
            source: DecisionSource::User,
            reason: match reason {
                Some(why) if !why.trim().is_empty() => {
                    format!("the user denied this call, saying: {}.", why.trim())
                }
                _ => "the user denied this call.".to_string(),
            },
        }
    }
}

impl Agent {
    /// An active skill's `allowed-tools` turn a question the permission
    /// mode would ask into an allow. Never a deny (deny rules, plan mode),
    /// never a question an ask rule puts, nothing in plan mode, and never
    /// for a command that asks for the network.
    fn skill_pre_approval(
        &self,
        decision: Decision,
        tool: &AgentTool,
        input: &Value,
        asks_for_origins: bool,
    ) -> Decision {
        let mode_asks = decision.outcome == Outcome::Ask
            && matches!(decision.source, DecisionSource::Mode(mode) if mode != Mode::Plan);
        if !mode_asks || asks_for_origins {
            return decision;
        }
        match self
            .parts
            .toolbox
            .skill_pre_approval(tool, input, &self.parts.workspace)
        {
            Some((skill, rule)) => Decision {
                outcome: Outcome::Allow,
                reason: format!(
                    "`{}` is pre-approved by the active skill `{skill}` (allowed-tools `{rule}`)",
                    tool.name
                ),
                source: DecisionSource::Skill { skill, rule },
            },
            None => decision,
        }
    }
}

/// The decision's source and rule, as recorded in the transcript.
fn describe_source(source: &DecisionSource) -> (String, Option<String>) {
    match source {
        DecisionSource::Mode(mode) => (format!("mode {mode}"), None),
        DecisionSource::Rule { rule, layer } => (format!("rule ({layer})"), Some(rule.clone())),
        DecisionSource::Session => ("session".to_string(), None),
        DecisionSource::User => ("user".to_string(), None),
        DecisionSource::NonInteractive => ("non-interactive".to_string(), None),
        DecisionSource::Hook(hook) => (format!("hook {hook}"), None),
        DecisionSource::Skill { skill, rule } => (format!("skill {skill}"), Some(rule.clone())),
        DecisionSource::PromptTool(tool) => (format!("permission prompt tool {tool}"), None),
    }
}

/// The plugin a refused call of `tool` is recorded under: the `PLUGIN` of
/// `PLUGIN.TOOL`, the server of `mcp__SERVER__TOOL`, else `host`.
fn audit_plugin(tool: &str) -> &str {
    if let Some((plugin, _)) = tool.split_once('.') {
        return plugin;
    }
    match tool.strip_prefix("mcp__").and_then(|rest| rest.find("__")) {
        Some(end) => &tool[..5 + end],
        None => "host",
    }
}

/// A denial by a hook.
fn hook_deny(hook: &str, reason: String) -> Decision {
    Decision {
        outcome: Outcome::Deny,
        source: DecisionSource::Hook(hook.to_string()),
        reason,
    }
}
