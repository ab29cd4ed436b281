//! A hook component, run in the sandbox: its subscriptions read once, each
//! event handled in a fresh instance with a short deadline and a memory cap.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::{Hook, HookEvent, HookFailure, HookOutput, Subscription};
use crate::plugin::{Catalog, CatalogError, Provision, ProvisionError, Writes};
use crate::sandbox::{CallError, CallOptions, EventSink, Limits, LoadedComponent, Sandbox};

/// The limits a hook runs under unless its plugin's manifest sets others:
/// 5 s, 64 MiB, and 64 KiB of answer.
pub const HOOK_LIMITS: Limits = Limits {
    memory: 64 << 20,
    timeout: Duration::from_secs(5),
    output: 64 << 10,
};

/// A hook component, loaded and ready for events.
pub struct HookComponent {
    name: String,
    sandbox: Arc<Sandbox>,
    component: LoadedComponent,
    subscriptions: Vec<Subscription>,
    options: CallOptions,
}

impl HookComponent {
    /// Reads the component's subscriptions (once, with no grants); every
    /// event it handles later runs with `options`.
    pub async fn load(
        sandbox: Arc<Sandbox>,
        component: LoadedComponent,
        options: CallOptions,
    ) -> Result<Self, CallError> {
        let subscriptions = sandbox.hook_subscriptions(&component).await?;
        Ok(Self {
            name: component.name().to_string(),
            sandbox,
            component,
            subscriptions,
            options,
        })
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
            let payload = payload.to_string();
            self.sandbox
                .call_hook(&self.component, event, &payload, &self.options)
                .await
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

/// A hook could not be loaded for a session.
#[derive(Debug, thiserror::Error)]
pub enum HookLoadError {
    /// The plugin could not be found, verified or compiled.
    #[error(transparent)]
    Plugin(#[from] CatalogError),
    /// Its calls cannot be given what they need (its grants, its audit
    /// log).
    #[error(transparent)]
    Provision(#[from] ProvisionError),
    /// It could not say which events it wants.
    #[error("hook plugin {plugin} could not list its subscriptions: {source}")]
    Subscriptions {
        /// The plugin.
        plugin: String,
        /// What went wrong.
        source: CallError,
    },
}

/// Loads every hook component of `catalog`'s plugins, each run under what
/// [`Provision`] decides: installed plugins' hooks get what the user
/// granted the plugin, read-only (a hook decides; it does not write), their
/// manifest's limits or [`HOOK_LIMITS`], and record capability decisions in
/// the plugin's audit log. Hook components given with `--plugin` see the
/// workspace, read-only, and nothing else.
/// An installed plugin whose hooks cannot be used is left out and marked
/// unavailable in `catalog`.
pub async fn load_hooks(
    sandbox: &Arc<Sandbox>,
    catalog: &Catalog,
    workspace: &Path,
    session_id: Option<&str>,
    events: Option<EventSink>,
) -> Result<Vec<Arc<dyn Hook>>, HookLoadError> {
    let mut hooks: Vec<Arc<dyn Hook>> = Vec::new();
    for plugin in catalog.names() {
        if catalog
            .check_available(plugin, workspace, sandbox.own_folders())
            .is_err()
        {
            continue;
        }
        let loaded = catalog
            .load_hooks(sandbox, plugin)
            .map_err(HookLoadError::from);
        let Some(components) = catalog.unless_unavailable(plugin, loaded)? else {
            continue;
        };
        if components.is_empty() {
            continue;
        }
        let provision = Provision::for_plugin(
            catalog,
            plugin,
            workspace,
            sandbox.own_folders(),
            HOOK_LIMITS,
            Writes::Never,
        );
        let Some(provision) = catalog.unless_unavailable(plugin, provision)? else {
            continue;
        };
        let options = provision.options(false, session_id, events.clone(), None);
        let mut loaded = Vec::new();
        for component in components {
            let hook = HookComponent::load(sandbox.clone(), component, options.clone())
                .await
                .map_err(|source| HookLoadError::Subscriptions {
                    plugin: plugin.to_string(),
                    source,
                });
            match catalog.unless_unavailable(plugin, hook)? {
                Some(hook) => loaded.push(Arc::new(hook) as Arc<dyn Hook>),
                // One hook component that cannot say what it wants makes
                // the whole plugin unavailable.
                None => {
                    loaded.clear();
                    break;
                }
            }
        }
        hooks.extend(loaded);
    }
    Ok(hooks)
}
