//! The MCP client: other people's MCP servers inside capstan's grants.
//!
//! - [`config`]: where servers are defined (config.toml, Claude Code's
//!   `.mcp.json` and user `mcp.json`, `capstan mcp add`) and what each
//!   one reaches;
//! - [`consent`]: what the user allowed, recorded like the plugin lockfile;
//! - [`connection`]: JSON-RPC over a link; [`stdio_link`] (a local server
//!   in the OS sandbox of `exec.run`) and [`http_link`] (a remote server
//!   through the host's network checks, header secrets added by the host)
//!   and [`driver_link`] (a server in the program driving the session);
//! - [`supervisor`]: each server's life in a session — background start,
//!   tool lists, restart with backoff;
//! - [`bridge`]: the servers' tools as the agent's `mcp__SERVER__TOOL`.

pub mod bridge;
pub mod command_line;
pub mod config;
pub mod connection;
pub mod consent;
pub mod driver_link;
pub mod http_link;
pub mod stdio_link;
pub mod supervisor;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use command_line::CommandLineServers;
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
    /// How long the first model request waits for servers still starting.
    startup_wait: Duration,
    /// Whether that wait happened already.
    waited: AtomicBool,
}

/// A server that was still starting when the first model request could
/// wait no longer: what the user hears, and what the model is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LateServer {
    /// The note for the user.
    pub notice: String,
    /// The note for the model, given with the prompt.
    pub for_model: String,
}

/// One server's state, as the driver of a headless session sees it.
#[derive(Debug, Clone)]
pub struct ServerState {
    /// Its name.
    pub name: String,
    /// `connected`, `pending`, `failed` or `disabled`.
    pub state: &'static str,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// Its tools, when connected.
    pub tools: Vec<supervisor::RemoteTool>,
    /// Its definition.
    pub spec: ServerSpec,
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
/// `PLUGIN-SERVER`, with the locked files of each plugin by source.
///
/// A server that runs the plugin's own program names the plugin's folder
/// `${CLAUDE_PLUGIN_ROOT}`: it is replaced by the plugin's store folder in
/// the command, arguments and variables, and that folder (only) is added
/// to what the server may read and run.
#[allow(clippy::type_complexity)]
fn plugin_servers(
    home: &Home,
) -> (
    Vec<(String, String, config::ServerEntry)>,
    std::collections::HashMap<String, config::LockedFiles>,
) {
    let plugins_dir = home.plugins_dir();
    let mut locked = std::collections::HashMap::new();
    let Ok(lock) = crate::plugin::lock::Lockfile::load(&plugins_dir.join("capstan.lock")) else {
        return (Vec::new(), locked);
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
        let dir = entry.dir(&plugins_dir);
        let source = format!("{PLUGIN_SOURCE}{plugin}");
        for (name, server) in found {
            servers.push((
                format!("{plugin}-{name}"),
                source.clone(),
                with_plugin_root(server, &dir),
            ));
        }
        locked.insert(
            source,
            config::LockedFiles {
                dir,
                files: entry.files.clone(),
            },
        );
    }
    (servers, locked)
}

/// `server` with `${CLAUDE_PLUGIN_ROOT}` (or `$CLAUDE_PLUGIN_ROOT`) in its
/// command, arguments and variables replaced by `dir`, and `dir` readable
/// when it is named.
fn with_plugin_root(mut server: config::ServerEntry, dir: &Path) -> config::ServerEntry {
    let var = crate::plugin::claude_import::PLUGIN_ROOT_VAR;
    let root = dir.display().to_string();
    let mut named = false;
    let mut replace = |text: &mut String| {
        if text.contains(var) {
            named = true;
            *text = text
                .replace(&format!("${{{var}}}"), &root)
                .replace(&format!("${var}"), &root);
        }
    };
    if let Some(command) = &mut server.command {
        replace(command);
    }
    server.args.iter_mut().for_each(&mut replace);
    server.env.values_mut().for_each(&mut replace);
    if named {
        server.read.push(root);
    }
    server
}

/// Every server defined for `workspace`; see [`Defined`].
pub fn servers_for(home: &Home, workspace: &Path) -> Defined {
    servers_with(home, workspace, &CommandLineServers::default())
}

/// The servers of `workspace` and those given on the command line, which
/// are allowed as typed and replace a server of the same name (with
/// `strict`, they are the only ones).
pub fn servers_with(home: &Home, workspace: &Path, command_line: &CommandLineServers) -> Defined {
    let user_home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let store = ConsentStore::load(&consent::store_path(home)).map_err(|e| e.to_string());
    let mut added = store
        .as_ref()
        .map(ConsentStore::definitions)
        .unwrap_or_default();
    let (from_plugins, locked) = plugin_servers(home);
    added.extend(from_plugins);
    let mut problems = Vec::new();
    let mut specs: Vec<(ServerSpec, bool)> = Vec::new();
    let defined = if command_line.strict {
        Vec::new()
    } else {
        config::defined_servers(home.config_dir(), workspace, &added, user_home.as_deref())
    };
    for defined in defined {
        match defined {
            Ok(mut spec) => {
                spec.locked_files = locked.get(&spec.source).cloned();
                // A plugin's servers were consented to with the plugin.
                let allowed = spec.source.starts_with(PLUGIN_SOURCE)
                    || store.as_ref().is_ok_and(|s| s.allows(&spec));
                specs.push((spec, allowed));
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
    for (name, source, entry) in &command_line.servers {
        match entry.to_spec(name, source, user_home.as_deref()) {
            Ok(spec) => {
                specs.retain(|(other, _)| other.name != spec.name);
                specs.push((spec, true));
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

/// How long the end of a session waits for its servers' ends to be
/// recorded.
pub const STOP_WAIT: Duration = Duration::from_secs(5);

/// Stops `servers` for good and waits (at most [`STOP_WAIT`]) until their
/// supervisors have recorded their ends.
pub async fn stop_servers(servers: &[Arc<ServerHandle>]) {
    for server in servers {
        server.stop();
    }
    let deadline = Instant::now() + STOP_WAIT;
    while servers.iter().any(|server| server.is_supervised()) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

impl McpClients {
    /// Starts every allowed server of `workspace` in the background
    /// (tasks on the current runtime) with what `launcher` gives.
    pub fn start(home: &Home, launcher: Launcher) -> Self {
        Self::start_with(home, launcher, &CommandLineServers::default())
    }

    /// [`Self::start`], with the servers given on the command line.
    pub fn start_with(home: &Home, launcher: Launcher, command_line: &CommandLineServers) -> Self {
        let Defined {
            specs,
            problems,
            store,
        } = servers_with(home, &launcher.workspace, command_line);
        let mut notices: Vec<String> = problems
            .into_iter()
            .map(|p| format!("warning: {p}"))
            .collect();
        if let Err(e) = &store {
            notices.push(format!("warning: MCP servers are off: {e}"));
        }
        let (startup_wait, warning) = config::startup_wait(home.config_dir(), &launcher.workspace);
        notices.extend(warning.map(|w| format!("warning: {w}")));
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
        Self {
            servers,
            notices,
            startup_wait,
            waited: AtomicBool::new(false),
        }
    }

    /// No servers.
    pub fn none() -> Self {
        Self {
            servers: Vec::new(),
            notices: Vec::new(),
            startup_wait: Duration::ZERO,
            waited: AtomicBool::new(true),
        }
    }

    /// Waits, once per session (before its first model request), until
    /// no server is still starting, for at most the startup wait
    /// (`startup_wait` in `[mcp]`), so their tools are in that request;
    /// servers still starting then join later, and are returned with a
    /// note each. A server that failed is not waited for. Later calls
    /// return at once.
    pub async fn wait_for_starting(&self) -> Vec<LateServer> {
        if self.waited.swap(true, Ordering::SeqCst) {
            return Vec::new();
        }
        let deadline = Instant::now() + self.startup_wait;
        let starting = || {
            self.servers
                .iter()
                .filter(|server| matches!(server.view().status, Status::Starting(_)))
                .collect::<Vec<_>>()
        };
        while !starting().is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let wait = crate::quantity::TimeSpan(self.startup_wait);
        starting()
            .into_iter()
            .map(|server| {
                let name = &server.spec.name;
                LateServer {
                    notice: format!(
                        "MCP server {name} is still starting after {wait}; its tools join the session when it is ready (wait longer with `startup_wait` in [mcp] of config.toml)"
                    ),
                    for_model: format!(
                        "MCP server {name} was still starting when this request was sent; its tools (mcp__{name}__…) are offered as soon as it is ready."
                    ),
                }
            })
            .collect()
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
    /// `pending`, `failed`, `disabled`), with why a failed one failed, for
    /// the headless `init` message and `mcp_status`.
    pub fn states(&self) -> Vec<ServerState> {
        self.servers
            .iter()
            .map(|server| {
                let view = server.view();
                let (state, error) = match &view.status {
                    Status::Ready => ("connected", None),
                    // Starting again after failing to start: still failed.
                    Status::Starting(attempt) if *attempt > 1 && !view.was_ready => {
                        ("failed", view.last_failure.clone())
                    }
                    Status::Starting(_) => ("pending", None),
                    Status::Restarting { reason, .. } | Status::Refused(reason) => {
                        ("failed", Some(reason.clone()))
                    }
                    Status::Disabled => ("disabled", None),
                };
                ServerState {
                    name: server.spec.name.clone(),
                    state,
                    error,
                    tools: if view.status == Status::Ready {
                        view.tools
                    } else {
                        Vec::new()
                    },
                    spec: server.spec.clone(),
                }
            })
            .collect()
    }

    /// The server called `name`.
    pub fn find(&self, name: &str) -> Option<&Arc<ServerHandle>> {
        self.servers.iter().find(|server| server.spec.name == name)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugins_own_program_is_found_in_its_folder_which_it_may_read() {
        let server = config::ServerEntry {
            command: Some("${CLAUDE_PLUGIN_ROOT}/bin/server".into()),
            args: vec!["--root=$CLAUDE_PLUGIN_ROOT/data".into(), "-v".into()],
            env: [(
                "CONFIG".to_string(),
                "${CLAUDE_PLUGIN_ROOT}/c.json".to_string(),
            )]
            .into(),
            ..Default::default()
        };
        let dir = Path::new("/store/p/1.0.0");
        let server = with_plugin_root(server, dir);
        assert_eq!(server.command.as_deref(), Some("/store/p/1.0.0/bin/server"));
        assert_eq!(server.args, ["--root=/store/p/1.0.0/data", "-v"]);
        assert_eq!(server.env["CONFIG"], "/store/p/1.0.0/c.json");
        assert_eq!(server.read, ["/store/p/1.0.0"]);

        // A server that does not name the folder gets no access to it.
        let npx = config::ServerEntry {
            command: Some("npx".into()),
            args: vec!["server".into()],
            ..Default::default()
        };
        assert!(with_plugin_root(npx, dir).read.is_empty());
    }

    #[test]
    fn a_changed_or_missing_file_fails_the_lock_check_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("server.py"), "print('hi')\n").unwrap();
        let sha = crate::sandbox::engine::sha256_hex(b"print('hi')\n");
        let mut locked = config::LockedFiles {
            dir: dir.path().to_path_buf(),
            files: [("server.py".to_string(), sha)].into(),
        };
        assert_eq!(locked.verify(), Ok(()));
        std::fs::write(dir.path().join("server.py"), "print('planted')\n").unwrap();
        let why = locked.verify().unwrap_err();
        assert!(
            why.contains("server.py no longer matches its lock"),
            "{why}"
        );
        locked.files.insert("gone.py".into(), "00".into());
        std::fs::remove_file(dir.path().join("server.py")).unwrap();
        assert!(locked.verify().is_err());
    }
}
