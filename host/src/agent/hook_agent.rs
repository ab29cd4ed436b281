//! The sub-agents of Claude Code agent hooks ([`crate::hooks::agent`]),
//! run by the session whose event started them.
//!
//! Such a sub-agent runs the session's loop with the session's model
//! provider, policy and sandbox, as the `task` tool's does, but narrower:
//! it is offered only `fs.read`, `fs.grep` and `fs.glob` (Claude Code's
//! Read, Grep and Glob), every call's sandbox has the workspace read-only
//! and no network, nobody is asked on its behalf, and no hook runs inside
//! it (a PreToolUse agent hook on reads would otherwise start itself
//! again). Its final answer goes back to the hook, which reads the
//! decision from it; its tokens count towards the session's.

use std::cell::Cell;
use std::sync::Arc;

use futures_util::future::LocalBoxFuture;

use super::custom_agents;
use super::profile::{AgentProfile, ToolAllowance};
use super::session_parts::SessionParts;
use super::subagent::SubagentLog;
use super::tool::Reach;
use super::{Agent, AgentError, Interrupt, TurnEnd};
use crate::hooks::agent::{
    AGENT_HOOK_TOOLS, HookAgentError, HookAgentRunner, HookAgentTask, SYSTEM,
};
use crate::model::Usage;

/// The `agent_type` of an agent hook's sub-agent.
pub const AGENT_TYPE: &str = "hook-agent";

/// Runs agent hooks' sub-agents for a session, adding up the tokens they
/// use so the session can count them.
pub(super) struct HookAgents<'a> {
    /// The session's parts, copied into each sub-agent.
    parts: &'a SessionParts,
    /// The session, named in the sub-agent's records.
    session_id: Option<&'a str>,
    /// The tokens the sub-agents used.
    used: Cell<Usage>,
}

impl<'a> HookAgents<'a> {
    /// Runs sub-agents from `parts` for session `session_id`.
    pub(super) fn new(parts: &'a SessionParts, session_id: Option<&'a str>) -> Self {
        Self {
            parts,
            session_id,
            used: Cell::default(),
        }
    }

    /// The tokens the sub-agents run so far used.
    pub(super) fn used(&self) -> Usage {
        self.used.get()
    }
}

/// The profile of an agent hook's sub-agent in a session with `parts`:
/// the hook's instructions as its system prompt, Read, Grep and Glob only,
/// nothing written, no network; and a note when the model the hook asks
/// for cannot be served.
pub fn profile(task: &HookAgentTask<'_>, parts: &SessionParts) -> (AgentProfile, Option<String>) {
    let listed = AGENT_HOOK_TOOLS.map(str::to_string);
    let (tools, _) = custom_agents::tool_names(&listed);
    let (model, note) =
        custom_agents::pick_model(task.model, parts.provider.name(), &parts.config.model);
    let system = format!(
        "{SYSTEM}\n\nThe working folder is {}.",
        parts.workspace.display()
    );
    let profile = AgentProfile {
        name: AGENT_TYPE.to_string(),
        system: Some(system),
        model,
        tools: ToolAllowance::Named(tools),
        reach: Reach {
            write: false,
            net: false,
        },
    };
    (profile, note)
}

impl HookAgentRunner for HookAgents<'_> {
    fn run<'a>(
        &'a self,
        task: HookAgentTask<'a>,
    ) -> LocalBoxFuture<'a, Result<String, HookAgentError>> {
        Box::pin(async move {
            let mut parts = self.parts.clone();
            parts.hooks = Arc::default();
            parts.config.max_turns = task.max_turns;
            parts.config.permission_prompt_tool = None;
            let (profile, note) = profile(&task, &parts);
            if let Some(note) = note {
                tracing::info!(hook = task.hook, "{note}");
            }
            let call_id = format!("hook:{}", task.hook);
            let mut agent = Agent::subagent(parts, profile, self.session_id, &call_id);
            let mut log = SubagentLog::default();
            let outcome = agent.turn(&task.prompt, &mut log, &Interrupt::new()).await;
            let mut used = self.used.get();
            used.add(agent.cost().usage);
            self.used.set(used);
            let report = outcome.map_err(|error| match error {
                AgentError::Model(e) => HookAgentError::Model(e.to_string()),
                other => HookAgentError::Stopped(other.to_string()),
            })?;
            match report.end {
                TurnEnd::Finished(_) => Ok(report.text),
                TurnEnd::MaxTurns(n) => Err(HookAgentError::OutOfTurns(n)),
                TurnEnd::MaxBudget => Err(HookAgentError::Stopped(
                    "it passed the budget (--max-budget-usd)".to_string(),
                )),
                TurnEnd::Interrupted => {
                    Err(HookAgentError::Stopped("it was interrupted".to_string()))
                }
                TurnEnd::PromptBlocked { hook, reason } => Err(HookAgentError::Stopped(format!(
                    "hook {hook} blocked its task: {reason}"
                ))),
            }
        })
    }
}
