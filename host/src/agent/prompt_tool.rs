//! Permission questions answered by a tool instead of the user, for runs
//! that cannot ask (`capstan -p --permission-prompt-tool NAME`), as Claude
//! Code's `--permission-prompt-tool` does: the tool — any tool of the
//! session, a component's, a host tool or an MCP server's — is called with
//! `{tool_name, input, tool_use_id}` and answers with a JSON text,
//! `{"behavior":"allow","updatedInput":{...}}` (the input the call runs
//! with; omitted, the call runs as asked) or
//! `{"behavior":"deny","message":"..."}`. Anything else denies the call,
//! saying why.
//!
//! `--permission-prompt-tool stdio` asks the program driving the session
//! instead, as Claude Code's SDK is asked: a `can_use_tool` control
//! request on stdout, answered on stdin with the same answers.

use serde_json::{Value, json};

use super::tool::{AgentTool, ToolCall};
use super::{Agent, Frontend, Interrupt};
use crate::policy::{Decision, DecisionSource, Outcome};

/// The prompt tool name that asks the driver over stdin and stdout.
pub const DRIVER: &str = "stdio";

impl Agent {
    /// Asks tool `prompt_tool` whether the call `call_id` of `tool` with
    /// `input` may run (the policy asked because of `reason`); on an allow
    /// with an updated input, `input` becomes that input. [`DRIVER`] asks
    /// the driver through `frontend`.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn ask_prompt_tool(
        &self,
        prompt_tool: &str,
        tool: &AgentTool,
        input: &mut Value,
        call_id: &str,
        reason: &str,
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
    ) -> Decision {
        let source = DecisionSource::PromptTool(prompt_tool.to_string());
        let deny = |why: String| Decision {
            outcome: Outcome::Deny,
            source: source.clone(),
            reason: why,
        };
        if prompt_tool == DRIVER {
            let request = json!({
                "subtype": "can_use_tool",
                "tool_name": tool.model_name,
                "input": input,
                "tool_use_id": call_id,
                "permission_suggestions": [],
                "decision_reason": reason,
            });
            let who = "the driver (--permission-prompt-tool stdio)";
            let answer = tokio::select! {
                answer = frontend.ask_driver(request) => answer,
                () = interrupt.raised() => Err("the turn was interrupted".to_string()),
            };
            return match answer {
                Ok(answer) => self.decide(who, source, tool, input, read_value(answer)),
                Err(why) => deny(format!(
                    "{reason} — {who} gave no answer ({why}), so the call was denied"
                )),
            };
        }
        let Some(asked) = self.parts.toolbox.find(prompt_tool).cloned() else {
            return deny(format!(
                "{reason} — the permission prompt tool {prompt_tool} does not exist in this session, so the call was denied"
            ));
        };
        let question = json!({
            "tool_name": tool.model_name,
            "input": input,
            "tool_use_id": call_id,
        });
        let prompt_call_id = format!("{call_id}.permission");
        let events = self.parts.toolbox.events_for(&prompt_call_id);
        let outcome = asked
            .call(ToolCall {
                input: &question,
                call_id: &prompt_call_id,
                session_id: self.session_id(),
                interrupt,
                events: events.as_ref(),
                audit: self.parts.toolbox.audit(),
                session: Some(&self.parts),
                reach: self.profile.reach,
            })
            .await;
        let answer = match outcome.result {
            Ok(text) => text,
            Err(error) => {
                return deny(format!(
                    "the permission prompt tool {prompt_tool} failed ({error}), so the call was denied"
                ));
            }
        };
        let who = format!("the permission prompt tool {prompt_tool}");
        self.decide(&who, source, tool, input, read_answer(&answer))
    }

    /// The decision `who` gave for a call of `tool` with `input`: on an
    /// allow with an updated input that its schema takes, `input` becomes
    /// that input.
    fn decide(
        &self,
        who: &str,
        source: DecisionSource,
        tool: &AgentTool,
        input: &mut Value,
        answer: Result<Answer, String>,
    ) -> Decision {
        let deny = |why: String| Decision {
            outcome: Outcome::Deny,
            source: source.clone(),
            reason: why,
        };
        match answer {
            Ok(Answer::Allow(updated)) => {
                if let Some(updated) = updated {
                    if let Err(why) =
                        crate::hooks::schema::validate(&updated, &tool.spec.input_schema)
                    {
                        return deny(format!(
                            "{who} changed the input of {} to one its schema refuses ({why}), so the call was not run",
                            tool.model_name
                        ));
                    }
                    *input = updated;
                }
                Decision {
                    outcome: Outcome::Allow,
                    source,
                    reason: format!("{who} allowed this call"),
                }
            }
            Ok(Answer::Deny(message)) => deny(match message {
                Some(message) => format!("{who} denied this call: {message}"),
                None => format!("{who} denied this call"),
            }),
            Err(why) => deny(format!(
                "{who} gave an answer capstan cannot read ({why}), so the call was denied; it must answer {{\"behavior\":\"allow\"}} or {{\"behavior\":\"deny\",\"message\":\"...\"}}"
            )),
        }
    }
}

/// A permission prompt tool's answer.
#[derive(Debug, PartialEq)]
enum Answer {
    /// Run the call, with this input if given.
    Allow(Option<Value>),
    /// Don't, for this reason if given.
    Deny(Option<String>),
}

/// Reads the tool's answer: a JSON object, or MCP-style content whose
/// first text block is that object.
fn read_answer(text: &str) -> Result<Answer, String> {
    let value: Value = serde_json::from_str(text.trim()).map_err(|e| format!("not JSON: {e}"))?;
    let value = match value.pointer("/content/0/text").and_then(Value::as_str) {
        Some(inner) => serde_json::from_str(inner.trim())
            .map_err(|e| format!("its text content is not JSON: {e}"))?,
        None => value,
    };
    read_value(value)
}

/// Reads an answer given as a JSON object.
fn read_value(value: Value) -> Result<Answer, String> {
    match value.get("behavior").and_then(Value::as_str) {
        Some("allow") => match value.get("updatedInput") {
            None | Some(Value::Null) => Ok(Answer::Allow(None)),
            Some(updated) if updated.is_object() => Ok(Answer::Allow(Some(updated.clone()))),
            Some(_) => Err("updatedInput is not a JSON object".into()),
        },
        Some("deny") => Ok(Answer::Deny(
            value
                .get("message")
                .and_then(Value::as_str)
                .filter(|m| !m.trim().is_empty())
                .map(str::to_string),
        )),
        Some(other) => Err(format!("behavior `{other}` is neither allow nor deny")),
        None => Err("no behavior field".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_as_claude_code_writes_them() {
        assert_eq!(
            read_answer(r#"{"behavior":"allow","updatedInput":{"path":"a"}}"#),
            Ok(Answer::Allow(Some(json!({"path": "a"}))))
        );
        assert_eq!(
            read_answer(r#"{"behavior":"allow"}"#),
            Ok(Answer::Allow(None))
        );
        assert_eq!(
            read_answer(r#"{"behavior":"deny","message":"no"}"#),
            Ok(Answer::Deny(Some("no".into())))
        );
        let wrapped = json!({"content": [{"type": "text", "text": "{\"behavior\":\"deny\"}"}]});
        assert_eq!(read_answer(&wrapped.to_string()), Ok(Answer::Deny(None)));
    }

    #[test]
    fn unreadable_answers_are_errors() {
        assert!(read_answer("yes").is_err());
        assert!(read_answer(r#"{"behavior":"maybe"}"#).is_err());
        assert!(read_answer(r#"{"behavior":"allow","updatedInput":3}"#).is_err());
        assert!(read_answer("{}").is_err());
    }
}
