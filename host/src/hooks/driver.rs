//! Hooks of the program driving a print-mode session (the Agent SDKs'
//! `hooks` option): the driver lists them in its `initialize` control
//! request, each event with matchers and callback ids, and capstan calls
//! each one back with a `hook_callback` control request,
//! `{"subtype":"hook_callback","callback_id":ID,"input":PAYLOAD,"tool_use_id":...}`,
//! as Claude Code does. The payload is the one command hooks get; the
//! answer is read as a command hook's JSON output (`permissionDecision`,
//! `updatedInput`, `additionalContext`, `continue`, `decision`,
//! `systemMessage`...).
//!
//! A callback that answers with an error, or not within its timeout (60 s
//! unless the matcher says otherwise, as in Claude Code), fails; on a
//! blocking event that denies the action (hooks fail closed), unless the
//! matcher asked `onFailure: "continue"`.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::command::from_stdout;
use super::{Decision, Hook, HookEvent, HookFailure, HookOutput, Subscription};

/// Sends one control request (its `request` object) to the driver and
/// waits for the body of its answer, or why there is none.
pub type DriverCall = Arc<dyn Fn(Value) -> BoxFuture<'static, Result<Value, String>> + Send + Sync>;

/// How long a callback may take when its matcher names no timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// One callback of the driver, on one event with one matcher.
pub struct DriverHook {
    name: String,
    callback_id: String,
    subscriptions: Vec<Subscription>,
    timeout: Duration,
    fail_open: bool,
    call: DriverCall,
}

impl DriverHook {
    /// Callback `callback_id` on `event` (for tools matching `matcher`),
    /// answering within `timeout`; with `fail_open`, a failure lets the
    /// action go on (`onFailure: "continue"`).
    pub fn new(
        callback_id: &str,
        event: HookEvent,
        matcher: Option<String>,
        timeout: Duration,
        fail_open: bool,
        call: DriverCall,
    ) -> Self {
        Self {
            name: format!("sdk/{callback_id}"),
            callback_id: callback_id.to_string(),
            subscriptions: vec![Subscription { event, matcher }],
            timeout,
            fail_open,
            call,
        }
    }

    async fn call_back(
        &self,
        event: HookEvent,
        payload: &Value,
    ) -> Result<HookOutput, HookFailure> {
        let request = json!({
            "subtype": "hook_callback",
            "callback_id": self.callback_id,
            "input": payload,
            "tool_use_id": payload.get("tool_use_id").cloned().unwrap_or(Value::Null),
        });
        let answer = match tokio::time::timeout(self.timeout, (self.call)(request)).await {
            Err(_) => Err(HookFailure::TimedOut(
                u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
            )),
            Ok(Err(error)) => Err(HookFailure::Failed(error)),
            Ok(Ok(body)) => read_answer(event, &body),
        };
        match answer {
            Err(failure) if self.fail_open => Ok(HookOutput {
                decision: Decision::Proceed,
                system_message: Some(format!(
                    "the driver's hook {} failed ({failure}); its matcher says onFailure: continue, so the action went on",
                    self.callback_id
                )),
            }),
            other => other,
        }
    }
}

/// The driver's answer to a callback, read as a command hook's output.
fn read_answer(event: HookEvent, body: &Value) -> Result<HookOutput, HookFailure> {
    let Value::Object(fields) = body else {
        return Err(HookFailure::Failed(format!(
            "the driver answered the hook callback with {body}, not a JSON object"
        )));
    };
    // An async hook runs on in the driver; the action does not wait.
    if fields.get("async") == Some(&Value::Bool(true)) {
        return Ok(HookOutput {
            decision: Decision::Proceed,
            system_message: None,
        });
    }
    Ok(from_stdout(event, &body.to_string()))
}

impl Hook for DriverHook {
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
        Box::pin(self.call_back(event, payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answering(answer: Result<Value, String>) -> DriverCall {
        Arc::new(move |request: Value| {
            let answer = answer.clone();
            Box::pin(async move {
                assert_eq!(request["subtype"], "hook_callback");
                assert_eq!(request["callback_id"], "hook_0");
                assert_eq!(request["tool_use_id"], "toolu_1");
                answer
            })
        })
    }

    fn hook(answer: Result<Value, String>, fail_open: bool) -> DriverHook {
        DriverHook::new(
            "hook_0",
            HookEvent::PreToolUse,
            Some("Read".into()),
            Duration::from_secs(5),
            fail_open,
            answering(answer),
        )
    }

    #[tokio::test]
    async fn answers_are_read_as_command_hook_output() {
        let payload = json!({"tool_name": "fs.read", "tool_use_id": "toolu_1"});
        let deny = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no"}});
        let out = hook(Ok(deny), false)
            .handle(HookEvent::PreToolUse, &payload)
            .await
            .unwrap();
        assert_eq!(out.decision, Decision::Deny("no".into()));
        let modify = json!({"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"path": "b"}}});
        let out = hook(Ok(modify), false)
            .handle(HookEvent::PreToolUse, &payload)
            .await
            .unwrap();
        assert_eq!(out.decision, Decision::Modify(json!({"path": "b"})));
        let out = hook(Ok(json!({"async": true})), false)
            .handle(HookEvent::PreToolUse, &payload)
            .await
            .unwrap();
        assert_eq!(out.decision, Decision::Proceed);
    }

    #[tokio::test]
    async fn errors_fail_unless_the_matcher_says_continue() {
        let payload = json!({"tool_name": "fs.read", "tool_use_id": "toolu_1"});
        let failed = hook(Err("boom".into()), false)
            .handle(HookEvent::PreToolUse, &payload)
            .await;
        assert!(matches!(failed, Err(HookFailure::Failed(ref e)) if e.contains("boom")));
        let odd = hook(Ok(json!("yes")), false)
            .handle(HookEvent::PreToolUse, &payload)
            .await;
        assert!(odd.is_err());
        let open = hook(Err("boom".into()), true)
            .handle(HookEvent::PreToolUse, &payload)
            .await
            .unwrap();
        assert_eq!(open.decision, Decision::Proceed);
    }

    #[tokio::test]
    async fn a_silent_driver_times_out() {
        let never: DriverCall = Arc::new(|_| Box::pin(std::future::pending()));
        let hook = DriverHook::new(
            "hook_0",
            HookEvent::PreToolUse,
            None,
            Duration::from_millis(20),
            false,
            never,
        );
        let out = hook.handle(HookEvent::PreToolUse, &json!({})).await;
        assert_eq!(out, Err(HookFailure::TimedOut(20)));
    }
}
