//! A hook component, run in the sandbox: its subscriptions read once, each
//! event handled in a fresh instance with a short deadline and a memory cap.
//! What crosses the WIT contract ([`wit`]) is turned into the host's types
//! here.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::{Decision, Hook, HookEvent, HookFailure, HookOutput, Subscription};
use crate::sandbox::hook::wit;
use crate::sandbox::{CallError, CallOptions, Limits, LoadedComponent, PluginEvent, Sandbox};

/// The limits a hook runs under unless its plugin's manifest sets others:
/// 5 s, 64 MiB, and 64 KiB of answer.
pub const HOOK_LIMITS: Limits = Limits {
    memory: 64 << 20,
    timeout: Duration::from_secs(5),
    output: 64 << 10,
};

/// Where a session's hooks report their log lines and progress: the call
/// they are about (a tool call's id, else `hook:EVENT`), the plugin, and
/// the report, shown as a tool's are.
pub type HookEvents = Arc<dyn Fn(&str, &str, PluginEvent) + Send + Sync>;

/// A hook component, loaded and ready for events.
pub struct HookComponent {
    name: String,
    sandbox: Arc<Sandbox>,
    component: LoadedComponent,
    subscriptions: Vec<Subscription>,
    options: CallOptions,
    events: Option<HookEvents>,
}

impl HookComponent {
    /// Reads the component's subscriptions (once, with no grants); every
    /// event it handles later runs with `options`.
    pub async fn load(
        sandbox: Arc<Sandbox>,
        component: LoadedComponent,
        options: CallOptions,
    ) -> Result<Self, CallError> {
        let subscriptions = subscriptions(&sandbox, &component).await?;
        Ok(Self {
            name: component.name().to_string(),
            sandbox,
            component,
            subscriptions,
            options,
            events: None,
        })
    }

    /// Sends what it reports while handling an event (log lines, progress)
    /// to `events`.
    pub fn with_events(mut self, events: Option<HookEvents>) -> Self {
        self.events = events;
        self
    }

    /// The options of one event's call: its reports go to the session and
    /// its records to the audit log, tagged with the tool call the event is
    /// about.
    fn options_for(&self, event: HookEvent, payload: &serde_json::Value) -> CallOptions {
        let mut options = self.options.clone();
        // What the hook's call touches is recorded under the tool call the
        // event is about, when it is about one.
        options.call_id = payload
            .get("tool_use_id")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string);
        if let Some(events) = &self.events {
            let events = events.clone();
            let call = match payload
                .get("tool_use_id")
                .and_then(serde_json::Value::as_str)
            {
                Some(id) => id.to_string(),
                None => format!("hook:{}", event.name()),
            };
            options.events = Some(Arc::new(move |plugin: &str, report: PluginEvent| {
                events(&call, plugin, report);
            }));
        }
        options
    }

    /// The limits its events run under.
    pub fn limits(&self) -> Limits {
        self.options.limits
    }
}

impl Hook for HookComponent {
    fn name(&self) -> &str {
        &self.name
    }

    fn subscriptions(&self) -> &[Subscription] {
        &self.subscriptions
    }

    fn handle<'a>(
        &'a self,
        event: HookEvent,
        payload: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<HookOutput, HookFailure>> {
        Box::pin(async move {
            let options = self.options_for(event, payload);
            let payload = payload.to_string();
            self.sandbox
                .call_hook(&self.component, event_to_wit(event), &payload, &options)
                .await
                .and_then(output_from_wit)
                .map_err(failure_of)
        })
    }
}

/// How a failed call reads as a hook failure.
fn failure_of(error: CallError) -> HookFailure {
    match error {
        CallError::Timeout { limit, .. } => {
            HookFailure::TimedOut(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX))
        }
        CallError::Crashed { reason, .. } => HookFailure::Crashed(reason),
        error @ (CallError::MemoryLimit { .. } | CallError::OutputTooLarge { .. }) => {
            HookFailure::Crashed(error.to_string())
        }
        CallError::Failed(message) => HookFailure::Failed(message),
        CallError::InvalidInput(message) => {
            HookFailure::Failed(format!("it answered wrongly: {message}"))
        }
        other => HookFailure::Failed(other.to_string()),
    }
}

/// Asks a hook component which events it wants (with no grants and a short
/// deadline).
pub async fn subscriptions(
    sandbox: &Sandbox,
    component: &LoadedComponent,
) -> Result<Vec<Subscription>, CallError> {
    Ok(sandbox
        .hook_subscriptions(component)
        .await?
        .into_iter()
        .map(|s| Subscription {
            event: event_from_wit(s.event),
            matcher: s.matcher,
        })
        .collect())
}

/// A hook's answer as the host's type. A decision whose content is not what
/// the decision needs (a `modify` that is not a JSON object) is
/// [`CallError::InvalidInput`].
fn output_from_wit(output: wit::HookOutput) -> Result<HookOutput, CallError> {
    let decision = match output.decision {
        wit::Decision::Proceed => Decision::Proceed,
        wit::Decision::Allow => Decision::Allow,
        wit::Decision::Ask(reason) => Decision::Ask(reason),
        wit::Decision::Deny(reason) => Decision::Deny(reason),
        wit::Decision::AddContext(text) => Decision::AddContext(text),
        wit::Decision::KeepGoing(text) => Decision::KeepGoing(text),
        wit::Decision::Modify(json) => match serde_json::from_str::<serde_json::Value>(&json) {
            Ok(value) if value.is_object() => Decision::Modify(value),
            Ok(_) => {
                return Err(CallError::InvalidInput(
                    "its `modify` decision is not a JSON object".into(),
                ));
            }
            Err(e) => {
                return Err(CallError::InvalidInput(format!(
                    "its `modify` decision is not valid JSON: {e}"
                )));
            }
        },
    };
    Ok(HookOutput {
        decision,
        system_message: output.system_message.filter(|m| !m.trim().is_empty()),
    })
}

fn event_to_wit(event: HookEvent) -> wit::Event {
    match event {
        HookEvent::SessionStart => wit::Event::SessionStart,
        HookEvent::SessionEnd => wit::Event::SessionEnd,
        HookEvent::UserPromptSubmit => wit::Event::UserPromptSubmit,
        HookEvent::PreToolUse => wit::Event::PreToolUse,
        HookEvent::PostToolUse => wit::Event::PostToolUse,
        HookEvent::PostToolUseFailure => wit::Event::PostToolUseFailure,
        HookEvent::PermissionRequest => wit::Event::PermissionRequest,
        HookEvent::Stop => wit::Event::Stop,
        HookEvent::SubagentStart => wit::Event::SubagentStart,
        HookEvent::SubagentStop => wit::Event::SubagentStop,
        HookEvent::PreCompact => wit::Event::PreCompact,
        HookEvent::PostCompact => wit::Event::PostCompact,
        HookEvent::Notification => wit::Event::Notification,
    }
}

fn event_from_wit(event: wit::Event) -> HookEvent {
    match event {
        wit::Event::SessionStart => HookEvent::SessionStart,
        wit::Event::SessionEnd => HookEvent::SessionEnd,
        wit::Event::UserPromptSubmit => HookEvent::UserPromptSubmit,
        wit::Event::PreToolUse => HookEvent::PreToolUse,
        wit::Event::PostToolUse => HookEvent::PostToolUse,
        wit::Event::PostToolUseFailure => HookEvent::PostToolUseFailure,
        wit::Event::PermissionRequest => HookEvent::PermissionRequest,
        wit::Event::Stop => HookEvent::Stop,
        wit::Event::SubagentStart => HookEvent::SubagentStart,
        wit::Event::SubagentStop => HookEvent::SubagentStop,
        wit::Event::PreCompact => HookEvent::PreCompact,
        wit::Event::PostCompact => HookEvent::PostCompact,
        wit::Event::Notification => HookEvent::Notification,
    }
}
