//! Calling a hook component: its subscriptions, read once at load, and one
//! event handled in a fresh instance, converted to the host's types
//! ([`crate::hooks`]).

use std::time::Duration;

use super::bindings;
use super::bindings::hook_world::HookPlugin;
use super::bindings::hook_world::exports::capstan::plugin::hook as wit;
use super::{CallError, CallOptions, Limits, LoadedComponent, Sandbox, instantiate_with, run_with};
use crate::hooks::{Decision, HookEvent, HookOutput, Subscription};

impl Sandbox {
    /// Asks a hook component which events it wants. Runs with no grants
    /// and a 10 s limit.
    pub async fn hook_subscriptions(
        &self,
        component: &LoadedComponent,
    ) -> Result<Vec<Subscription>, CallError> {
        let options = CallOptions {
            limits: Limits {
                timeout: Duration::from_secs(10),
                ..Limits::default()
            },
            ..CallOptions::default()
        };
        let _in_use = component.resident.in_use();
        let linked = component.linked()?;
        let pre = component.hook_pre(&linked)?;
        let settled = self
            .in_fresh_instance(
                &component.name,
                Some(&component.resident.hook_warm),
                &options,
                instantiate_with(move |store| {
                    Box::pin(async move { pre.instantiate_async(store).await })
                }),
                run_with(|plugin: HookPlugin, store, _| {
                    Box::pin(
                        async move { plugin.capstan_plugin_hook().call_subscriptions(store).await },
                    )
                }),
            )
            .await;
        self.make_hook_ahead(component, &linked);
        Ok(settled?
            .into_iter()
            .map(|s| Subscription {
                event: event_from_wit(s.event),
                matcher: s.matcher,
            })
            .collect())
    }

    /// Delivers `event` with its JSON `payload` to a hook component, in a
    /// fresh instance with the given grants and limits. The hook's own
    /// error comes back as [`CallError::Failed`]; a decision whose content
    /// is not what the decision needs (a `modify` that is not a JSON
    /// object) as [`CallError::InvalidInput`].
    pub async fn call_hook(
        &self,
        component: &LoadedComponent,
        event: HookEvent,
        payload: &str,
        options: &CallOptions,
    ) -> Result<HookOutput, CallError> {
        let _in_use = component.resident.in_use();
        let linked = component.linked()?;
        let pre = component.hook_pre(&linked)?;
        let input = wit::EventInput {
            event: event_to_wit(event),
            payload: payload.to_string(),
        };
        let settled = self
            .in_fresh_instance(
                &component.name,
                Some(&component.resident.hook_warm),
                options,
                instantiate_with(move |store| {
                    Box::pin(async move { pre.instantiate_async(store).await })
                }),
                run_with(move |plugin: HookPlugin, store, context| {
                    Box::pin(async move {
                        plugin
                            .capstan_plugin_hook()
                            .call_handle(store, &input, &context)
                            .await
                    })
                }),
            )
            .await;
        self.make_hook_ahead(component, &linked);
        let output = settled?.map_err(CallError::Failed)?;
        let size = output.system_message.as_ref().map_or(0, String::len)
            + match &output.decision {
                wit::Decision::Ask(t)
                | wit::Decision::Deny(t)
                | wit::Decision::Modify(t)
                | wit::Decision::AddContext(t)
                | wit::Decision::KeepGoing(t) => t.len(),
                wit::Decision::Proceed | wit::Decision::Allow => 0,
            };
        if size > options.limits.output {
            return Err(CallError::OutputTooLarge {
                plugin: component.name.to_string(),
                size: size as u64,
                limit: options.limits.output as u64,
            });
        }
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
}

impl LoadedComponent {
    fn hook_pre(
        &self,
        linked: &super::rest::Linked,
    ) -> Result<bindings::hook_world::HookPluginPre<super::CallState>, CallError> {
        linked.hook.clone().ok_or_else(|| CallError::Setup {
            plugin: self.name.to_string(),
            reason: "it does not export capstan:plugin/hook@0.1.0".into(),
        })
    }
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
