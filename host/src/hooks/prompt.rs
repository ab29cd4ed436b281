//! Claude Code prompt hooks (`"type": "prompt"`): the session's model is
//! asked, in one small request without tools, whether the action may go
//! ahead.
//!
//! The hook's `prompt` is sent with `$ARGUMENTS` replaced by the event's
//! JSON (or, without `$ARGUMENTS`, the JSON after it), and the model must
//! answer with the object Claude Code documents: `{"ok": true}` to let the
//! action go ahead, `{"ok": false, "reason": "..."}` to block it (a deny on
//! PreToolUse and UserPromptSubmit, "keep going" on Stop and SubagentStop,
//! a note for the model on PostToolUse). An answer that is not such an
//! object, a model error and running out of time are failures: on a
//! blocking event the action is denied (hooks fail closed).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::command::{Action, CommandSpec, block};
use super::{Decision, Hook, HookEvent, HookFailure, HookOutput, Subscription};
use crate::model::{Block, Message, Provider, Request, Role};

/// The model a prompt hook asks: the session's provider and model.
#[derive(Clone)]
pub struct HookModel {
    /// The provider.
    pub provider: Arc<dyn Provider>,
    /// The session's model, asked unless the hook names another.
    pub model: String,
}

/// What the model is told about its job.
const SYSTEM: &str = "You evaluate a hook of a coding agent. You are given an instruction and the event's data as JSON. Decide whether the condition the instruction describes holds. Answer with only a JSON object, nothing else: {\"ok\": true} when the action may go ahead, or {\"ok\": false, \"reason\": \"why, in one sentence\"} when it must not.";

/// The most tokens the model's answer may take.
const MAX_TOKENS: u32 = 1024;

/// A prompt hook, ready to ask.
pub struct PromptHook {
    name: String,
    subscriptions: Vec<Subscription>,
    prompt: String,
    model_name: Option<String>,
    timeout: Duration,
    /// The session's model, or why there is none to ask.
    model: Result<HookModel, String>,
}

impl PromptHook {
    /// The prompt hook `spec` named `name`, asking `model`. A spec that is
    /// not a prompt hook gives a hook that fails at each event.
    pub fn new(name: String, spec: &CommandSpec, model: Result<HookModel, String>) -> Self {
        let (prompt, model_name, model) = match &spec.action {
            Action::Prompt { prompt, model: own } => (prompt.clone(), own.clone(), model),
            _ => (
                String::new(),
                None,
                Err("it is not a prompt hook".to_string()),
            ),
        };
        Self {
            name,
            subscriptions: vec![Subscription {
                event: spec.event,
                matcher: spec.matcher.clone(),
            }],
            prompt,
            model_name,
            timeout: spec.timeout,
            model,
        }
    }
}

/// The text sent: `prompt` with `$ARGUMENTS` replaced by `payload`'s JSON,
/// or followed by it when the prompt does not say where it goes.
pub fn prompt_text(prompt: &str, payload: &Value) -> String {
    let json = payload.to_string();
    if prompt.contains("$ARGUMENTS") {
        prompt.replace("$ARGUMENTS", &json)
    } else {
        format!("{prompt}\n\n{json}")
    }
}

/// The hook's answer to `event` from the model's text: `{"ok": true}` or
/// `{"ok": false, "reason": ...}`, possibly inside a code fence.
pub fn interpret(event: HookEvent, text: &str) -> Result<HookOutput, HookFailure> {
    let trimmed = text.trim();
    let object = match (trimmed.find('{'), trimmed.rfind('}')) {
        (Some(start), Some(end)) if start < end => {
            serde_json::from_str::<Value>(&trimmed[start..=end]).ok()
        }
        _ => None,
    };
    let shown: String = trimmed.chars().take(200).collect();
    let Some(object) = object.filter(Value::is_object) else {
        return Err(HookFailure::Failed(format!(
            "the model's answer is not the JSON object a prompt hook needs ({{\"ok\": true}} or {{\"ok\": false, \"reason\": \"...\"}}): {}",
            crate::escape::line(&shown)
        )));
    };
    let decision = match object.get("ok").and_then(Value::as_bool) {
        Some(true) => Decision::Proceed,
        Some(false) => {
            let reason = object
                .get("reason")
                .and_then(Value::as_str)
                .filter(|r| !r.trim().is_empty())
                .map_or_else(
                    || "the prompt hook's model said no, without a reason".to_string(),
                    str::to_string,
                );
            block(event, reason)
        }
        None => {
            return Err(HookFailure::Failed(format!(
                "the model's answer has no boolean `ok`: {}",
                crate::escape::line(&shown)
            )));
        }
    };
    Ok(HookOutput {
        decision,
        system_message: None,
    })
}

impl Hook for PromptHook {
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
            let model = self
                .model
                .as_ref()
                .map_err(|why| HookFailure::Failed(format!("there is no model to ask: {why}")))?;
            let request = Request {
                model: self
                    .model_name
                    .clone()
                    .unwrap_or_else(|| model.model.clone()),
                system: SYSTEM.to_string(),
                messages: vec![Message {
                    role: Role::User,
                    content: vec![Block::Text {
                        text: prompt_text(&self.prompt, payload),
                    }],
                }],
                tools: Vec::new(),
                max_tokens: MAX_TOKENS,
                summary: false,
            };
            let asked =
                tokio::time::timeout(self.timeout, model.provider.stream(&request, &mut |_| {}))
                    .await
                    .map_err(|_| {
                        HookFailure::TimedOut(
                            u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
                        )
                    })?
                    .map_err(|e| {
                        HookFailure::Failed(format!("the model could not be asked: {e}"))
                    })?;
            let text: String = asked
                .content
                .iter()
                .filter_map(|block| match block {
                    Block::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            interpret(event, &text)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_are_replaced_or_appended() {
        let payload = json!({"tool_name": "fs.write"});
        assert_eq!(
            prompt_text("Is $ARGUMENTS safe?", &payload),
            r#"Is {"tool_name":"fs.write"} safe?"#
        );
        assert_eq!(
            prompt_text("Is it safe?", &payload),
            "Is it safe?\n\n{\"tool_name\":\"fs.write\"}"
        );
    }

    #[test]
    fn answers_follow_the_ok_reason_schema() {
        let pre = HookEvent::PreToolUse;
        assert_eq!(
            interpret(pre, r#"{"ok": true}"#).unwrap().decision,
            Decision::Proceed
        );
        assert_eq!(
            interpret(
                pre,
                "```json\n{\"ok\": false, \"reason\": \"secrets\"}\n```"
            )
            .unwrap()
            .decision,
            Decision::Deny("secrets".into())
        );
        assert_eq!(
            interpret(HookEvent::Stop, r#"{"ok": false, "reason": "tests fail"}"#)
                .unwrap()
                .decision,
            Decision::KeepGoing("tests fail".into())
        );
        assert!(interpret(pre, "Sure, go ahead!").is_err());
        assert!(interpret(pre, r#"{"decision": "yes"}"#).is_err());
        assert!(interpret(pre, "[1, 2]").is_err());
    }
}
