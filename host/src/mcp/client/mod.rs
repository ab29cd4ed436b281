//! The MCP client: other people's MCP servers inside capstan's grants.
//!
//! - [`config`]: where servers are defined (config.toml, Claude Code's
//!   `.mcp.json` and user `mcp.json`, `capstan mcp add`) and what each
//!   one reaches;
//! - [`consent`]: what the user allowed, recorded like the plugin lockfile;
//! - [`connection`]: JSON-RPC over a link; [`stdio_link`] (a local server
//!   in the OS sandbox of `exec.run`) and [`http_link`] (a remote server
//!   through the host's network checks, header secrets added by the host);
//! - [`supervisor`]: each server's life in a session — background start,
//!   tool lists, restart with backoff;
//! - [`bridge`]: the servers' tools as the agent's `mcp__SERVER__TOOL`.

pub mod bridge;
pub mod config;
pub mod connection;
pub mod consent;
pub mod http_link;
pub mod stdio_link;
pub mod supervisor;

use std::path::Path;
use std::sync::Arc;

use config::ServerSpec;
use consent::ConsentStore;
use supervisor::{Launcher, ServerHandle, Status};

use crate::home::Home;

/// The servers of a session, started in the background.
pub struct McpClients {
    servers: Vec<Arc<ServerHandle>>,
    /// What the user should hear at the start: servers not allowed yet,
    /// definitions that cannot be used.
    pub notices: Vec<String>,
}

/// The servers defined for a workspace: each spec with whether it was
/// consented to, the definitions that cannot be used, and the consent
/// store (or why it cannot be read).
pub struct Defined {
    /// Specs, each with whether it is allowed.
    pub specs: Vec<(ServerSpec, bool)>,
    /// Definitions that cannot be used, and why.
    pub problems: Vec<String>,
    /// The consent store.
    pub store: Result<ConsentStore, String>,
}

/// How the servers of an installed Claude Code plugin are sourced.
const PLUGIN_SOURCE: &str = "plugin ";

/// The MCP servers of installed plugins (imported from Claude Code
/// plugins into the package's `mcp-servers.json`, whose hash the lockfile keeps
/// and whose reach the user consented to at install), each named
/// `PLUGIN-SERVER`.
fn plugin_servers(home: &Home) -> Vec<(String, String, config::ServerEntry)> {
    let plugins_dir = home.plugins_dir();
    let Ok(lock) = crate::plugin::lock::Lockfile::load(&plugins_dir.join("capstan.lock")) else {
        return Vec::new();
    };
    let mut servers = Vec::new();
    for (plugin, entry) in &lock.plugins {
        let file = crate::plugin::claude_import::MCP_SERVERS;
        if !entry.files.contains_key(file) {
            continue;
        }
        let path = entry.dir(&plugins_dir).join(file);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(found) = config::parse_claude_json(&text, true) else {
            continue;
        };
        for (name, server) in found {
            servers.push((
                format!("{plugin}-{name}"),
                format!("{PLUGIN_SOURCE}{plugin}"),
                server,
            ));
        }
    }
    servers
}

/// Every server defined for `workspace`; see [`Defined`].
pub fn servers_for(home: &Home, workspace: &Path) -> Defined {
    let user_home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let store = ConsentStore::load(&consent::store_path(home)).map_err(|e| e.to_string());
    let mut added = store
        .as_ref()
        .map(ConsentStore::definitions)
        .unwrap_or_default();
    added.extend(plugin_servers(home));
    let mut problems = Vec::new();
    let mut specs = Vec::new();
    for defined in
        config::defined_servers(home.config_dir(), workspace, &added, user_home.as_deref())
    {
        match defined {
            Ok(spec) => {
                // A plugin's servers were consented to with the plugin.
                let allowed = spec.source.starts_with(PLUGIN_SOURCE)
                    || store.as_ref().is_ok_and(|s| s.allows(&spec));
                specs.push((spec, allowed));
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
    Defined {
        specs,
        problems,
        store,
    }
}

impl McpClients {
    /// Starts every allowed server of `workspace` in the background
    /// (tasks on the current runtime) with what `launcher` gives.
    pub fn start(home: &Home, launcher: Launcher) -> Self {
        let Defined {
            specs,
            problems,
            store,
        } = servers_for(home, &launcher.workspace);
        let mut notices: Vec<String> = problems
            .into_iter()
            .map(|p| format!("warning: {p}"))
            .collect();
        if let Err(e) = &store {
            notices.push(format!("warning: MCP servers are off: {e}"));
        }
        let mut servers = Vec::new();
        for (spec, allowed) in specs {
            if !allowed {
                notices.push(format!(
                    "MCP server {} ({}) is not allowed yet; run `capstan mcp approve {}` to see what it reaches and allow it",
                    spec.name, spec.source, spec.name
                ));
                let handle = ServerHandle::new(
                    spec.clone(),
                    Status::Refused(format!(
                        "not allowed yet; run `capstan mcp approve {}`",
                        spec.name
                    )),
                );
                servers.push(handle);
                continue;
            }
            let handle = ServerHandle::new(spec, Status::Starting(1));
            tokio::spawn(handle.clone().supervise(launcher.clone()));
            servers.push(handle);
        }
        Self { servers, notices }
    }

    /// No servers.
    pub fn none() -> Self {
        Self {
            servers: Vec::new(),
            notices: Vec::new(),
        }
    }

    /// The servers.
    pub fn servers(&self) -> &[Arc<ServerHandle>] {
        &self.servers
    }

    /// The agent's view of their tools.
    pub fn tool_source(&self, audit: Option<crate::audit::AuditLog>) -> bridge::McpToolSource {
        bridge::McpToolSource::new(self.servers.clone(), audit)
    }

    /// Each server's name and state in Claude Code's words (`connected`,
    /// `pending`, `failed`), for the headless `init` message.
    pub fn states(&self) -> Vec<(String, &'static str)> {
        self.servers
            .iter()
            .map(|server| {
                let state = match server.view().status {
                    Status::Ready => "connected",
                    Status::Starting(_) => "pending",
                    Status::Restarting { .. } | Status::Refused(_) => "failed",
                };
                (server.spec.name.clone(), state)
            })
            .collect()
    }

    /// One line per server: name, state, tool count (`/mcp`).
    pub fn summary(&self) -> Vec<String> {
        self.servers
            .iter()
            .map(|server| {
                let view = server.view();
                let tools = if view.status == Status::Ready {
                    format!(", {} tools", view.tools.len())
                } else {
                    String::new()
                };
                let kind = if server.spec.is_local() {
                    "local"
                } else {
                    "remote"
                };
                let mut line = format!("{} ({kind}): {}{tools}", server.spec.name, view.status);
                if let Some(note) = view.notes.last() {
                    line.push_str(&format!(" — last note: {note}"));
                }
                line
            })
            .collect()
    }
}
