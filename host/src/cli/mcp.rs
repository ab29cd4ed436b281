//! `capstan mcp serve`: capstan's tools for any MCP client.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand};

use super::Exit;
use super::escape;
use crate::home::Home;
use crate::mcp::server::{ServeOptions, Server};
use crate::sandbox::Sandbox;

/// The variable a bearer token may be given in (rather than on the
/// command line, where other users of the machine can read it).
pub const TOKEN_VAR: &str = "CAPSTAN_MCP_TOKEN";

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Serve the tools of every built-in and installed plugin over MCP.
    ///
    /// Each call runs in a fresh WebAssembly sandbox under what its plugin
    /// was granted, as in an agent session. The workspace is --workspace,
    /// else the client's first root (when the client has roots), else the
    /// current folder; it is read-only unless --allow-write is given.
    /// Serves stdio by default; --http serves Streamable HTTP at /mcp.
    #[command(after_help = "Examples:
  capstan mcp serve                                  stdio, for a client that starts it
  capstan mcp serve --http 127.0.0.1:7331            http://127.0.0.1:7331/mcp
  CAPSTAN_MCP_TOKEN=... capstan mcp serve --http 0.0.0.0:7331
  claude mcp add capstan -- capstan mcp serve        add it to Claude Code

See docs/mcp.md for Codex, Cursor and Zed.")]
    Serve(ServeArgs),

    /// Add an MCP server for capstan's sessions, after showing what it reaches.
    ///
    /// A remote server is its URL: its origin is the only one it reaches,
    /// checked like a plugin's network grant, and tokens are secrets capstan
    /// adds as headers. A local server is the command after `--`: it runs in
    /// the OS sandbox of exec.run, the workspace read-only, no network, a
    /// scrubbed environment, unless the flags grant more.
    #[command(after_help = "Examples:
  capstan mcp add github https://api.githubcopilot.com/mcp --header-secret 'Authorization=Bearer $GITHUB_TOKEN'
  capstan mcp add files -- npx -y @modelcontextprotocol/server-filesystem .
  capstan mcp add docs --read ~/docs --allow-net https://api.example.com -- docs-server --stdio")]
    Add(super::mcp_servers::AddArgs),

    /// Allow a server defined in .mcp.json or a config file, after showing
    /// what it reaches (asked again whenever its definition changes).
    Approve(super::mcp_servers::ApproveArgs),

    /// Remove a server added with `mcp add` (or take back its consent).
    Remove(super::mcp_servers::RemoveArgs),

    /// List the MCP servers: where each is defined, its grants, whether it
    /// is allowed, its state and its tools (starting them to ask).
    List(super::mcp_servers::ListArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve Streamable HTTP on this address (HOST:PORT) instead of stdio.
    /// A loopback address unless a bearer token is set.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,

    /// The bearer token HTTP clients must send [default: $CAPSTAN_MCP_TOKEN].
    /// Required for a non-loopback address.
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,

    /// The folder the tools may see, whatever the client's roots say
    /// [default: the client's first root, else the current folder].
    #[arg(long, short = 'w', value_name = "DIR")]
    workspace: Option<PathBuf>,

    /// Let tools that change files write the workspace (read-only otherwise).
    #[arg(long)]
    allow_write: bool,

    /// Also serve this component file's tools, as PATH or NAME=PATH (repeatable).
    #[arg(long = "plugin", value_name = "[NAME=]PATH")]
    plugins: Vec<String>,
}

/// Runs an `mcp` subcommand.
pub async fn run(command: McpCommand, verbose: bool) -> Exit {
    let done = |outcome: Result<(), (Exit, String)>| match outcome {
        Ok(()) => Exit::Success,
        Err((exit, message)) => {
            eprintln!("error: {}", escape::message(&message));
            exit
        }
    };
    match command {
        McpCommand::Add(args) => done(super::mcp_servers::add(args)),
        McpCommand::Approve(args) => done(super::mcp_servers::approve(args)),
        McpCommand::Remove(args) => done(super::mcp_servers::remove(args)),
        McpCommand::List(args) => done(super::mcp_servers::list(args).await),
        McpCommand::Serve(args) => match serve(args, verbose).await {
            Ok(()) => Exit::Success,
            Err((exit, message)) => {
                eprintln!("error: {}", escape::message(&message));
                exit
            }
        },
    }
}

async fn serve(args: ServeArgs, verbose: bool) -> Result<(), (Exit, String)> {
    let current_dir = std::env::current_dir().map_err(|e| {
        (
            Exit::Error,
            format!("cannot tell the current folder ({e}); pass --workspace DIR"),
        )
    })?;
    if let Some(dir) = &args.workspace
        && !dir.is_dir()
    {
        return Err((
            Exit::Usage,
            format!("--workspace {}: not a folder", dir.display()),
        ));
    }
    let token = args
        .token
        .clone()
        .or_else(|| std::env::var(TOKEN_VAR).ok())
        .filter(|t| !t.is_empty());
    let listener = match &args.http {
        Some(addr) => Some(bind(addr, token.is_some()).await?),
        None => None,
    };
    let home = Home::from_env().map_err(|e| (Exit::Error, e.to_string()))?;
    let sandbox = Arc::new(Sandbox::new(&home).map_err(|e| (Exit::Error, e.to_string()))?);
    let options = ServeOptions {
        workspace: args.workspace.clone(),
        current_dir,
        allow_write: args.allow_write,
        plugin_files: args.plugins.clone(),
        verbose,
    };
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async move {
            let server = Server::start(home, sandbox, options)
                .await
                .map_err(|e| (Exit::Error, e))?;
            server.watch_lockfile();
            match listener {
                None => crate::mcp::serve_stdio(server)
                    .await
                    .map_err(|e| (Exit::Error, e)),
                Some((listener, loopback)) => {
                    if let Ok(addr) = listener.local_addr() {
                        eprintln!("capstan mcp: serving http://{addr}/mcp");
                    }
                    let access = crate::mcp::http::Access { token, loopback };
                    crate::mcp::http::serve(server, listener, access).await;
                    Ok(())
                }
            }
        })
        .await
}

/// Binds `addr`; a non-loopback address only when a token is set.
async fn bind(
    addr: &str,
    has_token: bool,
) -> Result<(tokio::net::TcpListener, bool), (Exit, String)> {
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| {
            (
                Exit::Usage,
                format!("--http {addr}: not an address to listen on, such as 127.0.0.1:7331 ({e})"),
            )
        })?
        .collect();
    let Some(first) = addrs.first().copied() else {
        return Err((Exit::Usage, format!("--http {addr}: names no address")));
    };
    let loopback = addrs.iter().all(|a| a.ip().is_loopback());
    if !loopback && !has_token {
        return Err((
            Exit::Usage,
            format!(
                "refusing to serve on {addr} without a bearer token: anyone who can reach that address could call your tools. Set {TOKEN_VAR} (or pass --token), or listen on 127.0.0.1"
            ),
        ));
    }
    let listener = tokio::net::TcpListener::bind(first)
        .await
        .map_err(|e| (Exit::Error, format!("cannot listen on {addr}: {e}")))?;
    Ok((listener, loopback))
}
