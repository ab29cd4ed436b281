//! Sub-agents: the `task` tool hands a self-contained piece of research to
//! a fresh agent with its own conversation, and the answer it ends with
//! comes back as the tool's result.
//!
//! A sub-agent runs the same loop under its own [`AgentProfile`]: the
//! session's parts (model, tools, policy, hooks), its own system prompt,
//! and a subset of the session's grants: only the tools that change
//! nothing (each still in its own sandbox, with the workspace read-only),
//! never `task` itself (no nesting) nor `skill` (skills narrow the main
//! conversation's tools). The session's permission policy applies
//! unchanged, and nobody is asked on its behalf: a call that would need the
//! user's answer is refused. Its requests count towards the session's
//! tokens and cost. Being read-only, several `task` calls of one answer run
//! in parallel, like other read-only calls.
//!
//! With `subagent_type` the call starts a custom sub-agent instead
//! ([`super::custom_agents`]): its own system prompt, model and exactly the
//! tools it lists, held to them by the sandbox of each call.

use std::time::{Duration, Instant};

use futures_util::future::LocalBoxFuture;
use serde_json::{Value, json};

use super::custom_agents::{self, CustomAgents};
use super::profile::{AgentProfile, ToolAllowance};
use super::session_parts::SessionParts;
use super::tool::{Reach, ToolCall, ToolHandler, ToolOutcome};
use super::{Agent, AgentEvent, Frontend, Interrupt, TurnEnd};
use crate::hooks::HookEvent;
use crate::sandbox::{CallError, ToolSpec};

/// The tool's name, for the model and in messages.
pub const TOOL_NAME: &str = "task";

/// What the sub-agent is told about its job, after the session's system
/// prompt.
const SUBAGENT_PROMPT: &str = "\n\n# You are a sub-agent\n\
    Another agent gave you the task below and will read only your final answer, not your \
    tool calls. Work on your own: you cannot ask the user anything. You may only use tools \
    that read. End with a complete, self-contained answer: what you found, with exact file \
    paths and line numbers where they matter, and what you could not find.";

/// The most characters of the sub-agent's answer kept in the result.
const ANSWER_CAP: usize = 32 << 10;

/// The `subagent_type` of the default sub-agent, as Claude Code calls it.
pub const GENERAL: &str = "general-purpose";

/// The `task` tool as the model sees it, offering the custom `agents`.
pub fn tool_spec(agents: &CustomAgents) -> ToolSpec {
    let mut description = "Hands a self-contained task to a sub-agent with a fresh conversation \
        and read-only tools (search, read, list), and returns its final answer. Use it for \
        open-ended searches and investigations whose intermediate steps would crowd this \
        conversation, or to run several independent investigations in parallel (several \
        task calls in one answer). The sub-agent knows nothing of this conversation: say \
        exactly what to find or answer and what to report. It cannot change files."
        .to_string();
    let mut properties = json!({
        "description": {"type": "string", "description": "A short (3-5 word) label for the task, shown to the user."},
        "prompt": {"type": "string", "description": "The whole task for the sub-agent, with everything it needs to know."}
    });
    if !agents.agents.is_empty() {
        description.push_str(&format!(
            "\n\nWith `subagent_type` it starts one of these agents instead, with its own \
             instructions and exactly the tools they list, which may include changing files \
             (`{GENERAL}` is the default above):"
        ));
        for agent in &agents.agents {
            description.push_str(&format!(
                "\n- {}: {}",
                agents.call_name(agent),
                agent.file.description
            ));
        }
        let mut names = vec![GENERAL.to_string()];
        names.extend(agents.call_names());
        properties["subagent_type"] = json!({
            "type": "string",
            "enum": names,
            "description": "Which agent runs the task; the default is general-purpose."
        });
    }
    ToolSpec {
        name: TOOL_NAME.to_string(),
        description,
        input_schema: json!({
            "type": "object",
            "properties": properties,
            "required": ["description", "prompt"],
            "additionalProperties": false
        }),
        read_only: true,
        destructive: false,
        idempotent: false,
        open_world: false,
    }
}

/// A `task` call's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInput {
    /// The short label.
    pub description: String,
    /// The task.
    pub prompt: String,
    /// The custom agent to run it, if not the default one.
    pub agent: Option<String>,
}

/// Reads a `task` call's input, or says what is wrong with it.
pub fn parse_input(input: &Value) -> Result<TaskInput, String> {
    let field = |name: &str| -> Result<String, String> {
        match input.get(name) {
            Some(Value::String(text)) if !text.trim().is_empty() => Ok(text.trim().to_string()),
            Some(Value::String(_)) => Err(format!("`{name}` must not be empty")),
            Some(_) => Err(format!("`{name}` must be a string")),
            None => Err(format!("`{name}` is missing")),
        }
    };
    if let Some(object) = input.as_object()
        && let Some(unknown) = object
            .keys()
            .find(|key| !matches!(key.as_str(), "description" | "prompt" | "subagent_type"))
    {
        return Err(format!(
            "unknown field `{unknown}`; the task tool takes `description`, `prompt` and `subagent_type`"
        ));
    }
    let agent = match input.get("subagent_type") {
        None | Some(Value::Null) => None,
        Some(_) => Some(field("subagent_type")?).filter(|name| name != GENERAL),
    };
    Ok(TaskInput {
        description: field("description")?,
        prompt: field("prompt")?,
        agent,
    })
}

/// The system prompt of a sub-agent of a session whose prompt is `system`.
pub fn system_prompt(system: &str) -> String {
    format!("{system}{SUBAGENT_PROMPT}")
}

/// The profile of the `task` tool's sub-agent, in a session whose system
/// prompt is `system`: its own prompt after the session's, and only the
/// tools that change nothing, neither `task` nor `skill`.
pub fn profile(system: &str) -> AgentProfile {
    AgentProfile {
        name: TOOL_NAME.to_string(),
        system: Some(system_prompt(system)),
        model: None,
        tools: ToolAllowance::ReadOnly {
            except: vec![
                TOOL_NAME.to_string(),
                crate::skills::session::TOOL_NAME.to_string(),
            ],
        },
        reach: Reach {
            write: false,
            net: true,
        },
    }
}

/// The `task` tool: runs its call in a fresh sub-agent of the session.
pub struct TaskTool {
    spec: ToolSpec,
    agents: CustomAgents,
}

impl Default for TaskTool {
    fn default() -> Self {
        Self::new(CustomAgents::default())
    }
}

impl TaskTool {
    /// The tool, offering the custom `agents` beside the default one.
    pub fn new(agents: CustomAgents) -> Self {
        Self {
            spec: tool_spec(&agents),
            agents,
        }
    }
}

impl ToolHandler for TaskTool {
    fn name(&self) -> &str {
        TOOL_NAME
    }

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(&'a self, call: ToolCall<'a>) -> LocalBoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let Some(parts) = call.session else {
                return ToolOutcome::from(Err(CallError::Failed(
                    "the task tool runs only inside an agent session".to_string(),
                )));
            };
            run(
                parts.clone(),
                &self.agents,
                call.input,
                call.call_id,
                call.session_id,
                call.interrupt,
            )
            .await
        })
    }
}

/// Runs the `task` call `input` in a fresh sub-agent built from the
/// session's `parts`. Boxed, because a sub-agent runs the same loop that
/// called it.
fn run<'a>(
    parts: SessionParts,
    agents: &'a CustomAgents,
    input: &'a Value,
    call_id: &'a str,
    session_id: Option<&'a str>,
    interrupt: &'a Interrupt,
) -> LocalBoxFuture<'a, ToolOutcome> {
    Box::pin(async move {
        let started = Instant::now();
        let task = match parse_input(input) {
            Ok(task) => task,
            Err(problem) => return ToolOutcome::from(Err(CallError::InvalidInput(problem))),
        };
        let (profile, notes) = match &task.agent {
            None => (profile(&parts.config.system), Vec::new()),
            Some(name) => {
                let Some(custom) = agents.find(name) else {
                    let sharing: Vec<String> = agents
                        .agents
                        .iter()
                        .filter(|a| a.file.name == *name)
                        .map(|a| a.qualified_name())
                        .collect();
                    if sharing.len() > 1 {
                        return ToolOutcome::from(Err(CallError::InvalidInput(format!(
                            "`{name}` is the name of more than one agent: {}; use one of these names",
                            sharing.join(", ")
                        ))));
                    }
                    let mut known = vec![GENERAL.to_string()];
                    known.extend(agents.call_names());
                    return ToolOutcome::from(Err(CallError::InvalidInput(format!(
                        "there is no agent `{name}`; the agents are: {}",
                        known.join(", ")
                    ))));
                };
                custom_agents::profile(
                    custom,
                    parts.toolbox.tools(),
                    parts.provider.name(),
                    &parts.config.model,
                    &parts.workspace,
                )
            }
        };
        let mut agent = Agent::subagent(parts, profile, session_id, call_id);
        let mut log = SubagentLog::default();
        let start = json!({
            "agent_type": agent.profile().name,
            "description": task.description,
            "prompt": task.prompt,
        });
        let outcome = match agent
            .fire(HookEvent::SubagentStart, start, None, &mut log)
            .await
        {
            Ok(_) => agent.turn(&task.prompt, &mut log, interrupt).await,
            Err(error) => Err(error),
        };
        let elapsed = started.elapsed();
        let report = match outcome {
            Ok(report) => report,
            Err(error) => {
                return ToolOutcome {
                    result: Err(CallError::Failed(format!("the sub-agent failed: {error}"))),
                    usage: agent.cost().usage,
                    images: Vec::new(),
                };
            }
        };
        let mut result = match report.end {
            TurnEnd::Finished(_) => Ok(log.result(&report.text, report.requests, elapsed)),
            TurnEnd::PromptBlocked { hook, reason } => Err(CallError::Denied(format!(
                "hook {hook} blocked the sub-agent's task: {reason}"
            ))),
            TurnEnd::Interrupted => Err(CallError::Failed("the sub-agent was interrupted".into())),
            TurnEnd::MaxBudget => Err(CallError::Failed(
                "the sub-agent stopped: the session's budget (--max-budget-usd) was spent".into(),
            )),
            TurnEnd::MaxTurns(n) => Ok(log.result(
                &format!(
                    "{}\n\n(The sub-agent stopped after {n} model requests without finishing.)",
                    report.text
                ),
                report.requests,
                elapsed,
            )),
        };
        if let Ok(text) = &mut result {
            for note in notes {
                text.push_str(&format!("\n[note: {note}]"));
            }
        }
        ToolOutcome {
            result,
            usage: report.usage,
            images: Vec::new(),
        }
    })
}

/// What a sub-agent did, gathered from its events for the result.
#[derive(Debug, Default)]
pub struct SubagentLog {
    calls: Vec<(String, bool)>,
}

impl Frontend for SubagentLog {
    fn event(&mut self, event: AgentEvent<'_>) {
        if let AgentEvent::ToolFinished { tool, is_error, .. } = event {
            self.calls.push((tool.to_string(), is_error));
        }
    }
}

impl SubagentLog {
    /// The tool's result: the sub-agent's answer (capped), then a line on
    /// the calls it made.
    pub fn result(&self, answer: &str, requests: u32, elapsed: Duration) -> String {
        let mut text = if answer.trim().is_empty() {
            "(The sub-agent ended without an answer.)".to_string()
        } else {
            super::scheduler::cap_result(answer.trim().to_string(), ANSWER_CAP)
        };
        let failed = self.calls.iter().filter(|(_, error)| *error).count();
        text.push_str(&format!(
            "\n\n[sub-agent: {} tool calls ({failed} failed), {requests} model requests, {:.1} s]",
            self.calls.len(),
            elapsed.as_secs_f64()
        ));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_needs_a_description_and_a_prompt_and_nothing_else() {
        let ok = parse_input(&json!({"description": "find x", "prompt": " where is x? "})).unwrap();
        assert_eq!(ok.prompt, "where is x?");
        assert_eq!(
            parse_input(&json!({"description": "a"})).unwrap_err(),
            "`prompt` is missing"
        );
        assert_eq!(
            parse_input(&json!({"description": "a", "prompt": 3})).unwrap_err(),
            "`prompt` must be a string"
        );
        assert_eq!(
            parse_input(&json!({"description": "a", "prompt": "  "})).unwrap_err(),
            "`prompt` must not be empty"
        );
        assert!(
            parse_input(&json!({"description": "a", "prompt": "b", "tools": []}))
                .unwrap_err()
                .contains("unknown field `tools`")
        );
        assert_eq!(
            parse_input(&json!({"description": "a", "prompt": "b", "subagent_type": "reviewer"}))
                .unwrap()
                .agent
                .as_deref(),
            Some("reviewer")
        );
        assert!(
            parse_input(&json!({"description": "a", "prompt": "b", "subagent_type": GENERAL}))
                .unwrap()
                .agent
                .is_none()
        );
    }

    #[test]
    fn the_result_carries_the_answer_and_what_was_done() {
        let mut log = SubagentLog::default();
        log.calls.push(("fs.read".into(), false));
        log.calls.push(("fs.grep".into(), true));
        let text = log.result("Found it in a.rs:3.", 2, Duration::from_millis(1500));
        assert!(text.starts_with("Found it in a.rs:3."), "{text}");
        assert!(
            text.ends_with("[sub-agent: 2 tool calls (1 failed), 2 model requests, 1.5 s]"),
            "{text}"
        );
        assert!(
            SubagentLog::default()
                .result("", 1, Duration::ZERO)
                .starts_with("(The sub-agent ended without an answer.)")
        );
    }
}
