//! The hook components of a session's plugins, each run under what
//! [`Provision`] decides. Hooks themselves (events, matching, combining
//! decisions) are [`crate::hooks`]'s; which plugins have them, and what
//! their calls get, is the plugins'.

use std::path::Path;
use std::sync::Arc;

use crate::audit::AuditLog;
use crate::hooks::{HOOK_LIMITS, Hook, HookComponent, HookEvents};
use crate::plugin::{Catalog, CatalogError, Provision, ProvisionError, Writes};
use crate::sandbox::{CallError, Sandbox};

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
/// the plugin's audit log (else in `session_audit`, as a tool's calls do).
/// Hook components given with `--plugin` see the workspace, read-only, and
/// nothing else. What a hook reports while it runs (log lines, progress)
/// goes to `events`.
/// An installed plugin whose hooks cannot be used is left out and marked
/// unavailable in `catalog`; one whose hook component subscribes to other
/// events than its lock entry records is refused. Whether the session may
/// start without them is the caller's to decide ([`missing_guards`]).
pub async fn load_hooks(
    sandbox: &Arc<Sandbox>,
    catalog: &Catalog,
    workspace: &Path,
    session_id: Option<&str>,
    events: Option<HookEvents>,
    session_audit: Option<&AuditLog>,
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
        let options = provision.options(false, session_id, None, session_audit);
        // An installed plugin's components, as its lock entry lists them.
        let locked: Vec<String> = catalog
            .installed(plugin)
            .map(|p| p.entry.hook_components().map(|c| c.path.clone()).collect())
            .unwrap_or_default();
        let mut loaded = Vec::new();
        for (index, component) in components.into_iter().enumerate() {
            let hook = HookComponent::load(sandbox.clone(), component, options.clone())
                .await
                .map(|hook| hook.with_events(events.clone()))
                .map_err(|source| HookLoadError::Subscriptions {
                    plugin: plugin.to_string(),
                    source,
                })
                .and_then(|hook| {
                    // What it subscribes to must be what the user agreed to.
                    match (catalog.installed(plugin), locked.get(index)) {
                        (Some(installed), Some(path)) => installed
                            .check_subscriptions(path, crate::hooks::Hook::subscriptions(&hook))
                            .map(|()| hook)
                            .map_err(HookLoadError::from),
                        _ => Ok(hook),
                    }
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

/// The installed plugins whose hooks guard something (see
/// [`crate::hooks::guards`]) but cannot run in this session, each with
/// why: a session must not start without them unless the user says so,
/// since it would run what they exist to stop.
pub fn missing_guards(catalog: &Catalog) -> Vec<crate::plugin::Unavailable> {
    catalog
        .names()
        .filter(|name| {
            catalog
                .installed(name)
                .is_some_and(|plugin| plugin.has_guard_hooks())
        })
        .filter_map(|name| catalog.unavailable().get(name))
        .collect()
}
