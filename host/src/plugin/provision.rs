//! What a plugin's calls get: the one place that decides a call's grants,
//! limits and audit log, and refuses a plugin that fails its integrity
//! check. Tools (the agent's and `capstan tool call`), hooks and skill
//! components all take their [`CallOptions`] from here.
//!
//! - An **installed** plugin is verified first ([`InstalledPlugin::verify`]:
//!   every stored file re-hashed against the lockfile, and the manifest
//!   asking for nothing beyond what the user agreed to); then it gets what
//!   the user granted it, its manifest's limits over the caller's, and its
//!   audit log, which must open: a call whose capability decisions cannot
//!   be recorded does not run.
//! - A **built-in** plugin or a `--plugin` file sees the workspace and
//!   nothing else, under the caller's limits, and has no audit log of its
//!   own: its capability decisions go to the log the caller passes to
//!   [`Provision::options`] (a session's, and `capstan mcp serve`'s, is the
//!   home's).
//!
//! Either way a call that may not change anything sees every folder
//! read-only: the caller asks for [`Provision::options`] with `writable`
//! false for tools that say they change nothing, for hooks (a hook
//! decides; it does not write) and for skills.

use std::path::Path;

use super::catalog::{Catalog, CatalogError, InstalledPlugin};
use crate::audit::{AuditError, AuditLog};
use crate::grants::{FsGrant, GrantError, Grants, OwnFolders, PrepareError};
use crate::sandbox::{CallOptions, EventSink, Limits};

/// The built-in plugin whose calls also read installed plugins' files
/// ([`super::readable`]): `fs`, so the model's `fs.read` opens the files a
/// skill's text names.
pub const READS_PLUGIN_FILES: &str = "fs";

/// Why a plugin's calls cannot be given what they need.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// An installed plugin's files differ from what was installed, or its
    /// manifest asks for more than the user agreed to.
    #[error(transparent)]
    Refused(#[from] CatalogError),
    /// The workspace cannot be granted.
    #[error(transparent)]
    Workspace(#[from] GrantError),
    /// An installed plugin's grants cannot be made.
    #[error("plugin {plugin} cannot be given what it was granted: {source}{fix}")]
    Grant {
        /// The plugin.
        plugin: String,
        /// Why.
        source: Box<PrepareError>,
        /// What to do, when there is something particular: `; ...`.
        fix: String,
    },
    /// An installed plugin's audit log cannot be opened.
    #[error(transparent)]
    Audit(#[from] AuditError),
}

/// Whether calls may ever change the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// Never: only read-only grants are made (hooks, skills, a
    /// `capstan tool call` without `--allow-write`).
    Never,
    /// For calls that do not say they change nothing (the agent's tools,
    /// `capstan tool call --allow-write`).
    WhenAllowed,
}

/// What the calls of one plugin get; see the [module documentation](self).
#[derive(Clone)]
pub struct Provision {
    /// For calls that may not change anything.
    read: Grants,
    /// For calls that may; the read grants under [`Writes::Never`].
    write: Grants,
    /// Memory, time and output limits.
    limits: Limits,
    /// The plugin's own audit log (installed plugins only).
    audit: Option<AuditLog>,
    /// What the user granted, in plain words (installed plugins only).
    granted: Vec<String>,
    /// Whether it was granted any network access.
    networked: bool,
    /// Whether each call's requests to hosts it was not granted are put to
    /// the permission policy, host by host (the built-in `web` plugin).
    gates_hosts: bool,
    /// Tools of the component that are not offered, each with why (the
    /// built-in `web` plugin's search, until it is configured).
    hidden: Vec<(String, String)>,
}

impl std::fmt::Debug for Provision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provision")
            .field("limits", &self.limits)
            .field("audited", &self.audit.is_some())
            .finish_non_exhaustive()
    }
}

impl Provision {
    /// What the calls of `catalog`'s plugin `plugin` get in `workspace`,
    /// with `base` limits where an installed plugin's manifest sets none.
    pub fn for_plugin(
        catalog: &Catalog,
        plugin: &str,
        workspace: &Path,
        own: &OwnFolders,
        base: Limits,
        writes: Writes,
    ) -> Result<Self, ProvisionError> {
        match catalog.installed(plugin) {
            Some(installed) => Self::for_installed(installed, workspace, own, base, writes),
            None if plugin == super::web::WEB_PLUGIN && catalog.is_builtin(plugin) => {
                Self::web(catalog.user_config(), catalog.audit_log(), base)
            }
            None if plugin == READS_PLUGIN_FILES && catalog.is_builtin(plugin) => {
                Ok(Self::workspace_only(workspace, own, base, writes)?
                    .reading(catalog.readable_plugin_folders(), own))
            }
            None => Self::workspace_only(workspace, own, base, writes),
        }
    }

    /// The same, also reading `folders` (installed plugins' store folders,
    /// read-only whatever the call may write). A folder that cannot be
    /// granted is left out: the model then cannot read it, and nothing
    /// else changes.
    fn reading(mut self, folders: &[std::path::PathBuf], own: &OwnFolders) -> Self {
        for folder in folders {
            if let Ok(grant) = FsGrant::installed_files(folder, own) {
                self.read.fs.push(grant.clone());
                self.write.fs.push(grant);
            }
        }
        self
    }

    /// What the calls of installed plugin `installed` get, once it passed
    /// its integrity check.
    pub fn for_installed(
        installed: &InstalledPlugin,
        workspace: &Path,
        own: &OwnFolders,
        base: Limits,
        writes: Writes,
    ) -> Result<Self, ProvisionError> {
        installed.verify()?;
        let grant = |writable| {
            installed
                .grants(workspace, writable, own)
                .map_err(|source| ProvisionError::Grant {
                    plugin: installed.name.clone(),
                    fix: match &source {
                        PrepareError::Fs(GrantError::Moved { .. } | GrantError::NotConsented { .. }) => {
                            format!(
                                "; put the link back, or review and agree to the folder it is now with `capstan plugin update {}` (it asks again)",
                                installed.entry.source
                            )
                        }
                        _ => String::new(),
                    },
                    source: Box::new(source),
                })
        };
        let read = grant(false)?;
        let write = match writes {
            Writes::Never => read.clone(),
            Writes::WhenAllowed => grant(true)?,
        };
        Ok(Self {
            read,
            write,
            limits: installed.limits(base),
            audit: Some(installed.audit()?),
            granted: installed.entry.granted.describe(),
            networked: installed.reaches_network(),
            gates_hosts: false,
            hidden: Vec::new(),
        })
    }

    /// What the built-in `web` plugin's calls get (see [`super::web`]): no
    /// folder; the hosts the policy allows, asked for at each request; and
    /// the search API configured in the user config `config_file`, if any.
    /// Its requests are recorded in the audit log `audit_log` when given,
    /// else in the caller's; when that log cannot be opened its tools are
    /// not offered, as no request of theirs could be recorded.
    pub fn web(
        config_file: Option<&Path>,
        audit_log: Option<&Path>,
        base: Limits,
    ) -> Result<Self, ProvisionError> {
        let (grants, search) = super::web::grants(config_file);
        let (audit, unrecorded) = match audit_log.map(AuditLog::open) {
            None => (None, false),
            Some(Ok(log)) => (Some(log), false),
            Some(Err(_)) => (None, true),
        };
        let mut hidden = Vec::new();
        let unrecorded_why = "not offered: its requests could not be recorded, as the audit log cannot be opened; check that capstan's data folder is writable";
        if unrecorded {
            hidden.push((
                super::web::FETCH_TOOL.to_string(),
                unrecorded_why.to_string(),
            ));
            hidden.push((
                super::web::SEARCH_TOOL.to_string(),
                unrecorded_why.to_string(),
            ));
        } else if !search {
            hidden.push((
                super::web::SEARCH_TOOL.to_string(),
                super::web::not_configured(config_file),
            ));
        }
        Ok(Self {
            read: grants.clone(),
            write: grants,
            limits: base,
            audit,
            granted: vec!["web pages of the hosts you allow, asked host by host".to_string()],
            networked: true,
            gates_hosts: true,
            hidden,
        })
    }

    /// Whether each call's requests to hosts it was not granted are put to
    /// the permission policy, host by host.
    pub fn gates_hosts(&self) -> bool {
        self.gates_hosts
    }

    /// Whether tool `tool` (its name within the plugin) is offered.
    pub fn offers(&self, tool: &str) -> bool {
        self.withheld(tool).is_none()
    }

    /// The tools not offered (names within the plugin), each with why.
    pub fn withheld_tools(&self) -> impl Iterator<Item = (&str, &str)> {
        self.hidden
            .iter()
            .map(|(tool, why)| (tool.as_str(), why.as_str()))
    }

    /// Why tool `tool` (its name within the plugin) is not offered, as a
    /// sentence for the user; `None` when it is.
    pub fn withheld(&self, tool: &str) -> Option<&str> {
        self.hidden
            .iter()
            .find(|(hidden, _)| hidden == tool)
            .map(|(_, why)| why.as_str())
    }

    /// What a built-in plugin's or a component file's calls get: the
    /// workspace only.
    pub fn workspace_only(
        workspace: &Path,
        own: &OwnFolders,
        base: Limits,
        writes: Writes,
    ) -> Result<Self, ProvisionError> {
        let read = Grants::workspace(workspace, false, own)?;
        let write = match writes {
            Writes::Never => read.clone(),
            Writes::WhenAllowed => Grants::workspace(workspace, true, own)?,
        };
        Ok(Self {
            read,
            write,
            limits: base,
            audit: None,
            granted: Vec::new(),
            networked: false,
            gates_hosts: false,
            hidden: Vec::new(),
        })
    }

    /// The limits its calls run under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The same, with other limits (`capstan tool call --timeout`).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Whether its calls are recorded in the plugin's own audit log.
    pub fn is_audited(&self) -> bool {
        self.audit.is_some()
    }

    /// What the user granted the plugin beyond the workspace, in plain
    /// words; empty for built-in plugins and component files.
    pub fn granted(&self) -> &[String] {
        &self.granted
    }

    /// Whether its calls may reach the network, so the permission policy
    /// treats its tools as open-world.
    pub fn reaches_network(&self) -> bool {
        self.networked
    }

    /// The options of one call: the write grants when `writable`, the read
    /// grants otherwise; capability decisions go to the plugin's audit log,
    /// else to `session_audit` if given.
    pub fn options(
        &self,
        writable: bool,
        session_id: Option<&str>,
        events: Option<EventSink>,
        session_audit: Option<&AuditLog>,
    ) -> CallOptions {
        CallOptions {
            grants: if writable {
                self.write.clone()
            } else {
                self.read.clone()
            },
            limits: self.limits,
            session_id: session_id.map(str::to_string),
            events,
            audit: self.audit.clone().or_else(|| session_audit.cloned()),
            call_id: None,
        }
    }
}
