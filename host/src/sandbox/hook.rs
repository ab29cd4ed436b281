//! Calling a hook component: its subscriptions, read once at load, and one
//! event handled in a fresh instance. What goes in and out are the WIT
//! contract's types ([`wit`]); [`crate::hooks`] turns them into its own.

use super::bindings;
use super::bindings::hook_world::HookPlugin;
use super::{CallError, CallOptions, LoadedComponent, Sandbox, instantiate_with, run_with};

/// The `capstan:plugin/hook` interface's types: events, subscriptions,
/// decisions.
pub use super::bindings::hook_world::exports::capstan::plugin::hook as wit;

impl Sandbox {
    /// Asks a hook component which events it wants. Runs with no grants
    /// and a 10 s limit.
    pub async fn hook_subscriptions(
        &self,
        component: &LoadedComponent,
    ) -> Result<Vec<wit::Subscription>, CallError> {
        let options = CallOptions::listing();
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
        // As for tools (see `describe`): an instance is made ahead only
        // once the hook has been delivered an event.
        settled
    }

    /// Delivers `event` with its JSON `payload` to a hook component, in a
    /// fresh instance with the given grants and limits. The hook's own
    /// error comes back as [`CallError::Failed`]; an answer larger than the
    /// output limit as [`CallError::OutputTooLarge`].
    pub async fn call_hook(
        &self,
        component: &LoadedComponent,
        event: wit::Event,
        payload: &str,
        options: &CallOptions,
    ) -> Result<wit::HookOutput, CallError> {
        let _in_use = component.resident.in_use();
        let linked = component.linked()?;
        let pre = component.hook_pre(&linked)?;
        let input = wit::EventInput {
            event,
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
        Ok(output)
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
