//! `capstan mcp add|approve|remove|list`: the MCP servers a session uses.

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;

use super::Exit;
use super::escape;
use crate::home::Home;
use crate::mcp::client::config::{ServerEntry, ServerSpec, check_name};
use crate::mcp::client::consent::{AddedServer, ConsentStore};
use crate::mcp::client::supervisor::{Launcher, Status};
use crate::mcp::client::{McpClients, servers_for};

/// `capstan mcp add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The server's name: its tools are `mcp__NAME__TOOL`.
    name: String,
    /// A remote server's URL (Streamable HTTP, or HTTP+SSE with
    /// --transport sse); for a local server, give its command after `--`.
    url: Option<String>,
    /// A local server's command and arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
    /// A header holding a secret, as 'HEADER=FORMAT' where FORMAT names the
    /// secret as $NAME ('Authorization=Bearer $GITHUB_TOKEN'). The value
    /// comes from the environment variable NAME, else [secrets] of the user
    /// config; capstan adds the header itself (repeatable).
    #[arg(long = "header-secret", value_name = "HEADER=FORMAT")]
    header_secrets: Vec<String>,
    /// `http` (Streamable HTTP, the default) or `sse` (the older
    /// HTTP+SSE transport) for a remote server.
    #[arg(long, value_name = "KIND")]
    transport: Option<String>,
    /// A variable for a local server, as NAME=VALUE; VALUE may name
    /// $VARIABLES of your environment (repeatable).
    #[arg(long = "env", short = 'e', value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// A folder a local server may read besides the workspace (repeatable).
    #[arg(long = "read", value_name = "DIR")]
    read: Vec<PathBuf>,
    /// A folder a local server may read and write (repeatable).
    #[arg(long = "write", value_name = "DIR")]
    write: Vec<PathBuf>,
    /// Let a local server write the workspace (read-only otherwise).
    #[arg(long)]
    write_workspace: bool,
    /// An origin a local server may reach through capstan's proxy
    /// (https://host[:port]; repeatable). No network otherwise.
    #[arg(long = "allow-net", value_name = "ORIGIN")]
    net: Vec<String>,
    /// How long one call may take (e.g. 30s, 5m) [default: 2m].
    #[arg(long, value_name = "DURATION")]
    timeout: Option<String>,
    /// Allow what it reaches without asking.
    #[arg(long, short = 'y')]
    yes: bool,
}

/// `capstan mcp approve`.
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The server, as named in .mcp.json or a config file.
    name: String,
    /// Allow what it reaches without asking.
    #[arg(long, short = 'y')]
    yes: bool,
    /// The workspace whose servers to look at [default: the current folder].
    #[arg(long, short = 'w', value_name = "DIR")]
    workspace: Option<PathBuf>,
}

/// `capstan mcp remove`.
#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// The server.
    name: String,
}

/// `capstan mcp list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Do not start the servers to list their tools.
    #[arg(long)]
    no_connect: bool,
    /// The workspace whose servers to list [default: the current folder].
    #[arg(long, short = 'w', value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

type Failed = (Exit, String);

fn home() -> Result<Home, Failed> {
    Home::from_env().map_err(|e| (Exit::Error, e.to_string()))
}

fn workspace(dir: Option<&PathBuf>) -> Result<PathBuf, Failed> {
    let dir = match dir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()
            .map_err(|e| (Exit::Error, format!("cannot tell the current folder ({e})")))?,
    };
    dir.canonicalize().map_err(|e| {
        (
            Exit::Usage,
            format!("cannot use {} as the workspace: {e}", dir.display()),
        )
    })
}

/// Shows what `spec` reaches and asks; `yes` answers for the user.
fn consent(spec: &ServerSpec, yes: bool) -> Result<(), Failed> {
    eprintln!("MCP server {} ({}):", spec.name, escape::line(&spec.source));
    for line in spec.reach() {
        eprintln!("  - {}", escape::line(&line));
    }
    if yes {
        eprintln!("Allowed (--yes).");
        return Ok(());
    }
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Err((
            Exit::Refused,
            format!(
                "{} was not allowed: there is no terminal to ask; pass --yes to allow what it reaches",
                spec.name
            ),
        ));
    }
    eprint!("Allow it? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        Ok(())
    } else {
        Err((Exit::Refused, format!("{} was not allowed", spec.name)))
    }
}

/// `capstan mcp add`.
pub fn add(args: AddArgs) -> Result<(), Failed> {
    check_name(&args.name).map_err(|e| (Exit::Usage, e))?;
    let mut entry = ServerEntry::default();
    match (&args.url, args.command.is_empty()) {
        (Some(url), true) => {
            entry.url = Some(url.clone());
            entry.kind = Some(args.transport.clone().unwrap_or_else(|| "http".into()));
            for header in &args.header_secrets {
                let Some((name, format)) = header.split_once('=') else {
                    return Err((
                        Exit::Usage,
                        format!(
                            "--header-secret {header}: write HEADER=FORMAT, such as 'Authorization=Bearer $TOKEN'"
                        ),
                    ));
                };
                if !format.contains('$') {
                    return Err((
                        Exit::Usage,
                        format!(
                            "--header-secret {header}: name the secret in the value as $NAME (e.g. 'Bearer $TOKEN'); capstan keeps no literal tokens"
                        ),
                    ));
                }
                entry
                    .headers
                    .insert(name.trim().to_string(), format.to_string());
            }
            if !args.env.is_empty()
                || !args.read.is_empty()
                || !args.write.is_empty()
                || !args.net.is_empty()
                || args.write_workspace
            {
                return Err((
                    Exit::Usage,
                    "--env, --read, --write, --write-workspace and --allow-net are for local servers (given with -- COMMAND)".into(),
                ));
            }
        }
        (None, false) => {
            entry.command = args.command.first().cloned();
            entry.args = args.command[1..].to_vec();
            if !args.header_secrets.is_empty() || args.transport.is_some() {
                return Err((
                    Exit::Usage,
                    "--header-secret and --transport are for remote servers (given as a URL)"
                        .into(),
                ));
            }
            let mut env = BTreeMap::new();
            for pair in &args.env {
                let Some((name, value)) = pair.split_once('=') else {
                    return Err((Exit::Usage, format!("--env {pair}: write NAME=VALUE")));
                };
                env.insert(name.to_string(), value.to_string());
            }
            entry.env = env;
            let absolute = |dirs: &[PathBuf], flag: &str| -> Result<Vec<String>, Failed> {
                dirs.iter()
                    .map(|d| {
                        d.canonicalize()
                            .map(|p| p.display().to_string())
                            .map_err(|e| (Exit::Usage, format!("{flag} {}: {e}", d.display())))
                    })
                    .collect()
            };
            entry.read = absolute(&args.read, "--read")?;
            entry.write = absolute(&args.write, "--write")?;
            entry.net = args.net.clone();
            if args.write_workspace {
                entry.workspace = Some("write".into());
            }
        }
        (Some(_), false) => {
            return Err((
                Exit::Usage,
                "give either a URL (a remote server) or -- COMMAND (a local server), not both"
                    .into(),
            ));
        }
        (None, true) => {
            return Err((
                Exit::Usage,
                "give the server's URL, or its command after --: capstan mcp add NAME https://host/mcp, or capstan mcp add NAME -- npx -y PACKAGE".into(),
            ));
        }
    }
    entry.timeout = args.timeout.clone();
    let source = "capstan mcp add".to_string();
    let user_home = std::env::var_os("HOME").map(PathBuf::from);
    let spec = entry
        .to_spec(&args.name, &source, user_home.as_deref())
        .map_err(|e| (Exit::Usage, e.to_string()))?;
    consent(&spec, args.yes)?;
    let home = home()?;
    ConsentStore::modify(&home, |store| {
        store.added.insert(
            args.name.clone(),
            AddedServer {
                added_by: source.clone(),
                definition: entry.clone(),
            },
        );
        store.approve(&spec);
        Ok(((), true))
    })
    .map_err(|e| (Exit::Error, e.to_string()))?;
    crate::audit::AuditLog::record_change(
        &home.audit_log(),
        &format!("mcp__{}", args.name),
        "mcp add",
        &spec.reach().join("; "),
        &source,
    );
    eprintln!(
        "Added MCP server {}; its tools are mcp__{}__* in new sessions.",
        args.name, args.name
    );
    Ok(())
}

/// `capstan mcp approve`.
pub fn approve(args: ApproveArgs) -> Result<(), Failed> {
    let home = home()?;
    let workspace = workspace(args.workspace.as_ref())?;
    let defined = servers_for(&home, &workspace);
    let (specs, problems) = (defined.specs, defined.problems);
    let Some((spec, allowed)) = specs.into_iter().find(|(s, _)| s.name == args.name) else {
        let mut message = format!("no MCP server called {} is defined here", args.name);
        if !problems.is_empty() {
            message.push_str(&format!(" ({})", problems.join("; ")));
        }
        return Err((Exit::Usage, message));
    };
    if allowed {
        eprintln!("MCP server {} is already allowed as defined.", spec.name);
        return Ok(());
    }
    consent(&spec, args.yes)?;
    ConsentStore::modify(&home, |store| {
        store.approve(&spec);
        Ok(((), true))
    })
    .map_err(|e| (Exit::Error, e.to_string()))?;
    crate::audit::AuditLog::record_change(
        &home.audit_log(),
        &format!("mcp__{}", spec.name),
        "mcp approve",
        &spec.reach().join("; "),
        &spec.source,
    );
    eprintln!("Allowed MCP server {}.", spec.name);
    Ok(())
}

/// `capstan mcp remove`.
pub fn remove(args: RemoveArgs) -> Result<(), Failed> {
    let home = home()?;
    let removed = ConsentStore::modify(&home, |store| {
        let added = store.added.remove(&args.name).is_some();
        let approved = store.approved.remove(&args.name).is_some();
        Ok(((added, approved), added || approved))
    })
    .map_err(|e| (Exit::Error, e.to_string()))?;
    match removed {
        (false, false) => Err((
            Exit::Usage,
            format!(
                "no MCP server called {} was added or allowed; `capstan mcp list` shows them",
                args.name
            ),
        )),
        (added, _) => {
            crate::audit::AuditLog::record_change(
                &home.audit_log(),
                &format!("mcp__{}", args.name),
                "mcp remove",
                "removed",
                "capstan mcp remove",
            );
            if added {
                eprintln!("Removed MCP server {}.", args.name);
            } else {
                eprintln!(
                    "MCP server {} is no longer allowed; it is still defined in a settings file, where you can remove it.",
                    args.name
                );
            }
            Ok(())
        }
    }
}

/// What servers of `workspace` are started with outside a session: the
/// `[exec]` sandbox's base for local ones, the user's secrets for remote
/// ones, the audit log.
pub(super) fn launcher(home: &Home, workspace: &std::path::Path) -> Launcher {
    let settings = crate::config::load(home, workspace).unwrap_or_default();
    let user_home = std::env::var_os("HOME").map(PathBuf::from);
    let exec = crate::exec::ExecGrants::resolve(
        &settings.exec,
        workspace,
        user_home.as_deref(),
        &crate::grants::OwnFolders::of(home),
    )
    .map_err(|e| e.to_string());
    Launcher {
        exec,
        secrets: crate::grants::SecretValues::load(&home.config_file()).unwrap_or_default(),
        audit: crate::audit::AuditLog::open(&home.audit_log()).ok(),
        workspace: workspace.to_path_buf(),
    }
}

/// `capstan mcp list`: every server, what it reaches, whether it is
/// allowed, and (started for the occasion) its state and tools.
pub async fn list(args: ListArgs) -> Result<(), Failed> {
    let home = home()?;
    let workspace = workspace(args.workspace.as_ref())?;
    let defined = servers_for(&home, &workspace);
    let (specs, problems) = (defined.specs, defined.problems);
    for problem in &problems {
        eprintln!("warning: {}", escape::line(problem));
    }
    let clients = if args.no_connect {
        McpClients::none()
    } else {
        let clients = McpClients::start(&home, launcher(&home, &workspace));
        let deadline = Instant::now() + crate::mcp::client::supervisor::START_TIMEOUT;
        while Instant::now() < deadline
            && clients
                .servers()
                .iter()
                .any(|s| matches!(s.view().status, Status::Starting(_)))
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        clients
    };
    let mut rows = Vec::new();
    for (spec, allowed) in &specs {
        let server = clients.servers().iter().find(|s| s.spec.name == spec.name);
        let view = server.map(|s| s.view());
        let state = match (&view, allowed) {
            (_, false) => format!("not allowed; run `capstan mcp approve {}`", spec.name),
            (Some(view), true) => view.status.to_string(),
            (None, true) => "allowed (not started)".to_string(),
        };
        let tools: Vec<(String, bool)> = view
            .map(|v| {
                v.tools
                    .iter()
                    .map(|t| {
                        let read_only = t
                            .annotations
                            .get("readOnlyHint")
                            .and_then(serde_json::Value::as_bool)
                            .unwrap_or(false);
                        (t.name.clone(), read_only)
                    })
                    .collect()
            })
            .unwrap_or_default();
        rows.push((spec, *allowed, state, tools));
    }
    if args.json {
        let servers: Vec<serde_json::Value> = rows
            .iter()
            .map(|(spec, allowed, state, tools)| {
                serde_json::json!({
                    "name": spec.name,
                    "source": spec.source,
                    "kind": if spec.is_local() { "local" } else { "remote" },
                    "allowed": allowed,
                    "state": state,
                    "reach": spec.reach(),
                    "tools": tools.iter().map(|(name, read_only)| serde_json::json!({
                        "name": format!("mcp__{}__{}", spec.name, name),
                        "read_only": read_only,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        println!("{}", serde_json::json!({ "servers": servers }));
        return Ok(());
    }
    if rows.is_empty() {
        println!(
            "No MCP servers. Add one with `capstan mcp add NAME URL` or `capstan mcp add NAME -- COMMAND ARGS...`, or define them in .mcp.json."
        );
        return Ok(());
    }
    for (spec, _, state, tools) in rows {
        println!(
            "{} ({}) — {}",
            spec.name,
            escape::line(&spec.source),
            escape::line(&state)
        );
        for line in spec.reach() {
            println!("  grant: {}", escape::line(&line));
        }
        for (tool, read_only) in tools {
            let mode = if read_only { "read-only" } else { "asks" };
            println!(
                "  tool:  mcp__{}__{} ({mode})",
                spec.name,
                escape::line(&tool)
            );
        }
    }
    Ok(())
}
