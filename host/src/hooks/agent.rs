//! Claude Code agent hooks (`"type": "agent"`): a sub-agent of the session
//! looks into the workspace with read-only tools and decides whether the
//! action may go ahead.
//!
//! As in Claude Code, the sub-agent is given the hook's `prompt` with
//! `$ARGUMENTS` replaced by the event's JSON (or, without `$ARGUMENTS`, the
//! JSON after it), may search and read files for up to
//! [`AGENT_HOOK_MAX_TURNS`] model requests, and must end with the object a
//! prompt hook answers: `{"ok": true}`, or `{"ok": false, "reason": "..."}`,
//! read as [`super::prompt::interpret`] reads it. capstan holds it to more
//! than Claude Code does: its tools are read, search and list only, its
//! workspace is read-only and it has no network, all enforced by the
//! sandbox of each call; no hook runs inside it, so a hook cannot start
//! itself again.
//!
//! The sub-agent runs the session's own loop, which is not `Send`, so an
//! agent hook is not run through [`Hook::handle`]: the session serves it at
//! each dispatch point through a [`HookAgentRunner`]
//! ([`super::HookSet::dispatch_with`]). A model error, running out of time
//! or of turns, and an answer that is not `{ok, reason}` are failures: on a
//! blocking event the action is denied (hooks fail closed).

use std::time::Duration;

use futures_util::future::{BoxFuture, LocalBoxFuture};
use serde_json::Value;

use super::command::{Action, CommandSpec};
use super::{Hook, HookEvent, HookFailure, HookOutput, Subscription};

/// How many model requests an agent hook's sub-agent may make, as in
/// Claude Code.
pub const AGENT_HOOK_MAX_TURNS: u32 = 50;

/// The Claude Code tools an agent hook's sub-agent gets, as in Claude Code
/// (capstan's `fs.read`, `fs.grep`, `fs.glob`).
pub const AGENT_HOOK_TOOLS: [&str; 3] = ["Read", "Grep", "Glob"];

/// The events an agent (or prompt) hook may subscribe to, as in Claude
/// Code: those whose action a yes-or-no answer can decide.
pub const AGENT_HOOK_EVENTS: [HookEvent; 7] = [
    HookEvent::PreToolUse,
    HookEvent::PostToolUse,
    HookEvent::PostToolUseFailure,
    HookEvent::PermissionRequest,
    HookEvent::UserPromptSubmit,
    HookEvent::Stop,
    HookEvent::SubagentStop,
];

/// What the sub-agent is told about its job, before the hook's prompt.
pub const SYSTEM: &str = "You verify a condition for a hook of a coding agent. You are given an instruction and the data of the event that started the hook, as JSON. Use your tools to read and search the files of the working folder as much as the instruction needs; you cannot change anything, run commands or reach the network. Then decide whether the condition the instruction describes holds, and end with a final answer that is only a JSON object, nothing else: {\"ok\": true} when the action may go ahead, or {\"ok\": false, \"reason\": \"why, in one sentence\"} when it must not.";

/// What an agent hook asks the session to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookAgentTask<'a> {
    /// The hook's name, for the sub-agent's name and messages.
    pub hook: &'a str,
    /// The first message: the hook's prompt with the event's JSON.
    pub prompt: String,
    /// The model asked for, when not the session's (Claude Code's aliases
    /// such as `haiku` are allowed).
    pub model: Option<&'a str>,
    /// The most model requests it may make.
    pub max_turns: u32,
}

/// Why an agent hook's sub-agent gave no final answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookAgentError {
    /// A model request failed.
    #[error("its model could not be asked: {0}")]
    Model(String),
    /// It made its most model requests without ending.
    #[error("it made {0} model requests without a final answer")]
    OutOfTurns(u32),
    /// It was stopped (the user's Ctrl-C) or could not run.
    #[error("{0}")]
    Stopped(String),
}

/// Runs an agent hook's sub-agent: the session that dispatches the event
/// ([`crate::agent`]) serves it with its own model, tools and sandbox.
pub trait HookAgentRunner {
    /// Runs `task` in a fresh read-only sub-agent and returns the text of
    /// its final answer.
    fn run<'a>(
        &'a self,
        task: HookAgentTask<'a>,
    ) -> LocalBoxFuture<'a, Result<String, HookAgentError>>;
}

/// An agent hook, ready to be run by a session.
pub struct AgentHook {
    name: String,
    subscriptions: Vec<Subscription>,
    prompt: String,
    model: Option<String>,
    timeout: Duration,
}

impl AgentHook {
    /// The agent hook `spec` named `name`. A spec that is not an agent hook
    /// gives a hook whose prompt is empty (the parser never makes one).
    pub fn new(name: String, spec: &CommandSpec) -> Self {
        let (prompt, model) = match &spec.action {
            Action::Agent { prompt, model } => (prompt.clone(), model.clone()),
            _ => (String::new(), None),
        };
        Self {
            name,
            subscriptions: vec![Subscription {
                event: spec.event,
                matcher: spec.matcher.clone(),
            }],
            prompt,
            model,
            timeout: spec.timeout,
        }
    }

    /// Runs the hook on `event` with `payload` through `runner`, within its
    /// timeout, and reads the sub-agent's final answer.
    pub async fn run(
        &self,
        runner: &dyn HookAgentRunner,
        event: HookEvent,
        payload: &Value,
    ) -> Result<HookOutput, HookFailure> {
        let task = HookAgentTask {
            hook: &self.name,
            prompt: super::prompt::prompt_text(&self.prompt, payload),
            model: self.model.as_deref(),
            max_turns: AGENT_HOOK_MAX_TURNS,
        };
        let answer = tokio::time::timeout(self.timeout, runner.run(task))
            .await
            .map_err(|_| {
                HookFailure::TimedOut(u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX))
            })?
            .map_err(|e| HookFailure::Failed(format!("the agent hook's sub-agent failed: {e}")))?;
        super::prompt::interpret(event, &answer)
    }
}

impl Hook for AgentHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn subscriptions(&self) -> &[Subscription] {
        &self.subscriptions
    }

    fn agent(&self) -> Option<&AgentHook> {
        Some(self)
    }

    /// Without a session to run its sub-agent, an agent hook cannot answer.
    fn handle<'a>(
        &'a self,
        _event: HookEvent,
        _payload: &'a Value,
    ) -> BoxFuture<'a, Result<HookOutput, HookFailure>> {
        Box::pin(std::future::ready(Err(HookFailure::Failed(
            "an agent hook runs only inside an agent session".to_string(),
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::Decision;
    use serde_json::json;

    /// Answers every task with a fixed text, recording the task.
    struct Scripted {
        answer: Result<String, HookAgentError>,
        seen: std::cell::RefCell<Vec<String>>,
    }

    impl HookAgentRunner for Scripted {
        fn run<'a>(
            &'a self,
            task: HookAgentTask<'a>,
        ) -> LocalBoxFuture<'a, Result<String, HookAgentError>> {
            self.seen.borrow_mut().push(task.prompt);
            assert_eq!(task.max_turns, AGENT_HOOK_MAX_TURNS);
            Box::pin(std::future::ready(self.answer.clone()))
        }
    }

    fn hook() -> AgentHook {
        AgentHook::new(
            "settings.json#1".into(),
            &CommandSpec {
                event: HookEvent::PreToolUse,
                matcher: None,
                action: Action::Agent {
                    prompt: "Check $ARGUMENTS".into(),
                    model: None,
                },
                timeout: Duration::from_secs(5),
            },
        )
    }

    #[tokio::test]
    async fn the_final_answer_decides_and_failures_are_failures() {
        let payload = json!({"tool_name": "fs.write"});
        let deny = Scripted {
            answer: Ok(r#"I read it. {"ok": false, "reason": "frozen"}"#.into()),
            seen: Default::default(),
        };
        let out = hook()
            .run(&deny, HookEvent::PreToolUse, &payload)
            .await
            .unwrap();
        assert_eq!(out.decision, Decision::Deny("frozen".into()));
        assert_eq!(deny.seen.borrow()[0], r#"Check {"tool_name":"fs.write"}"#);
        let failed = Scripted {
            answer: Err(HookAgentError::OutOfTurns(50)),
            seen: Default::default(),
        };
        let err = hook()
            .run(&failed, HookEvent::PreToolUse, &payload)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("50 model requests"), "{err}");
        let malformed = Scripted {
            answer: Ok("looks fine".into()),
            seen: Default::default(),
        };
        assert!(
            hook()
                .run(&malformed, HookEvent::PreToolUse, &payload)
                .await
                .is_err()
        );
        assert!(
            hook()
                .handle(HookEvent::PreToolUse, &payload)
                .await
                .is_err()
        );
    }
}
