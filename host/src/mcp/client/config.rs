//! Which MCP servers a session may use, and what each one reaches.
//!
//! Servers are defined in four places, read in this order (a later
//! definition of the same name replaces an earlier one):
//!
//! 1. `[mcp.servers.NAME]` in the user config (`config.toml`);
//! 2. the user's `mcp.json` beside it, in Claude Code's format;
//! 3. servers added with `capstan mcp add` and those of installed Claude
//!    Code plugins, kept in the consent store ([`super::consent`]);
//! 4. the project's `.mcp.json` (Claude Code's project format) and
//!    `[mcp.servers.NAME]` in the project's `.capstan/config.toml`.
//!
//! Servers given with `--mcp-config` come last
//! ([`super::command_line`]).
//!
//! Claude Code's format is `{"mcpServers": {"NAME": {"command": ...,
//! "args": [...], "env": {...}}}}` for a local server and `{"type": "http"
//! | "sse", "url": ..., "headers": {...}}` for a remote one. capstan adds
//! the keys a sandbox needs: `read` and `write` (folders beside the
//! workspace), `workspace` (`"read"` or `"write"`), `net` (origins the
//! local server may reach through the proxy) and `timeout` (of one call).
//!
//! A header's value may name secrets as `$NAME` or `${NAME}`: the host
//! looks them up (environment first, then `[secrets]` of the user config)
//! and adds the header itself; the model never sees it. An `env` value may
//! name variables of the user's environment the same way; the server gets
//! them, and consent shows their names.
//!
//! Nothing defined in a file runs until the user consents
//! ([`super::consent`]): what they consent to is the [`ServerSpec`]'s
//! fingerprint, so a changed definition asks again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::grants::net::NetGrant;
use crate::grants::secrets::{SecretGrant, check_header};

/// How long one call may take unless the server's `timeout` says.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// One server as written in a settings file (TOML or JSON), in Claude
/// Code's keys plus capstan's sandbox keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerEntry {
    /// `stdio`, `http` or `sse`; guessed from `command`/`url` when absent.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A local server's program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables it gets (values may name `$VARIABLES`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// A remote server's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Headers sent to a remote server (values may name `$SECRETS`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Folders a local server may read beside the workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// Folders a local server may read and write.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
    /// `read` (the default) or `write`: what a local server may do to the
    /// workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// Origins a local server may reach through the proxy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub net: Vec<String>,
    /// How long one call may take (`30s`, `5m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Claude Code's per-server switch; `false` leaves it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
}

/// How capstan talks to a server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Transport {
    /// A local process in the OS sandbox, JSON-RPC over its stdio.
    Stdio {
        /// Program and arguments.
        argv: Vec<String>,
        /// Variables: name and value as written (`$VAR` expanded at start).
        env: Vec<(String, String)>,
    },
    /// A remote server over Streamable HTTP (or the older HTTP+SSE).
    Http {
        /// The endpoint.
        url: String,
        /// The older HTTP+SSE transport (`type: "sse"`).
        legacy_sse: bool,
        /// Headers with fixed values.
        headers: Vec<(String, String)>,
        /// Headers whose values hold secrets, added by the host.
        secrets: Vec<SecretGrant>,
    },
    /// A server in the program driving the session (an Agent SDK's
    /// in-process server), reached through the control protocol.
    Driver {
        /// The way to the driver.
        channel: super::driver_link::DriverChannel,
    },
}

/// A server ready to be consented to and started: its transport and the
/// sandbox it gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerSpec {
    /// Its name (the `SERVER` of `mcp__SERVER__TOOL`).
    pub name: String,
    /// Where it was defined, for messages and `mcp list`.
    pub source: String,
    /// How it is reached.
    pub transport: Transport,
    /// Folders a local server may read.
    pub read: Vec<PathBuf>,
    /// Folders it may write.
    pub write: Vec<PathBuf>,
    /// Whether it may write the workspace.
    pub write_workspace: bool,
    /// Origins a local server may reach; a remote server's own origin.
    pub net: Vec<NetGrant>,
    /// How long one call may take.
    #[serde(skip)]
    pub timeout: Duration,
    /// For a plugin's server: the plugin's store folder and the sha256 of
    /// each of its files as locked, checked before each start.
    #[serde(skip)]
    pub locked_files: Option<LockedFiles>,
}

/// A plugin's store folder and its files' sha256 as the lockfile has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedFiles {
    /// The plugin's folder.
    pub dir: PathBuf,
    /// Each file (relative to `dir`) and its sha256.
    pub files: BTreeMap<String, String>,
}

impl LockedFiles {
    /// Checks that every file still has its locked content; says which
    /// one does not, and what to do.
    pub fn verify(&self) -> Result<(), String> {
        for (rel, sha256) in &self.files {
            let path = self.dir.join(rel);
            let changed = match std::fs::read(&path) {
                Ok(bytes) => crate::sandbox::engine::sha256_hex(&bytes) != *sha256,
                Err(_) => true,
            };
            if changed {
                return Err(format!(
                    "the plugin's file {rel} no longer matches its lock (changed or missing since install), so its server is not started; install the plugin again to restore it"
                ));
            }
        }
        Ok(())
    }
}

/// A server definition that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MCP server `{name}` ({source_file}): {message}")]
pub struct SpecError {
    /// The server.
    pub name: String,
    /// Where it was defined.
    pub source_file: String,
    /// What is wrong and what to do.
    pub message: String,
}

/// Checks a server name: letters, digits, `-` and `_`, no `__` (the
/// separator of `mcp__SERVER__TOOL`).
pub fn check_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 48
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !name.contains("__");
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a valid server name: use up to 48 letters, digits, `-` and `_` (not `__`)"
        ))
    }
}

impl ServerEntry {
    /// The spec this entry defines, named `name`, defined in `source`;
    /// `~` in folders means `home`.
    pub fn to_spec(
        &self,
        name: &str,
        source: &str,
        home: Option<&Path>,
    ) -> Result<ServerSpec, SpecError> {
        let error = |message: String| SpecError {
            name: name.to_string(),
            source_file: source.to_string(),
            message,
        };
        check_name(name).map_err(error)?;
        let kind = match (&self.kind, &self.command, &self.url) {
            (Some(kind), _, _) => kind.as_str(),
            (None, Some(_), None) => "stdio",
            (None, None, Some(_)) => "http",
            (None, Some(_), Some(_)) => {
                return Err(error(
                    "it has both `command` and `url`; a server is either local or remote".into(),
                ));
            }
            (None, None, None) => {
                return Err(error(
                    "it has neither `command` (a local server) nor `url` (a remote one)".into(),
                ));
            }
        };
        let timeout = match &self.timeout {
            None => DEFAULT_CALL_TIMEOUT,
            Some(text) => {
                crate::quantity::parse_duration(text).map_err(|e| error(format!("timeout: {e}")))?
            }
        };
        let mut net = Vec::new();
        for origin in &self.net {
            net.push(NetGrant::parse(origin).map_err(|e| error(format!("net: {e}")))?);
        }
        let folders = |list: &[String], key: &str| -> Result<Vec<PathBuf>, SpecError> {
            list.iter()
                .map(|entry| {
                    let path = match (entry.strip_prefix("~/"), home) {
                        (Some(rest), Some(home)) => home.join(rest),
                        _ => PathBuf::from(entry),
                    };
                    if path.is_relative() {
                        return Err(error(format!(
                            "{key}: `{entry}` must be an absolute folder (or start with ~/)"
                        )));
                    }
                    Ok(path)
                })
                .collect()
        };
        let read = folders(&self.read, "read")?;
        let write = folders(&self.write, "write")?;
        let write_workspace = match self.workspace.as_deref() {
            None | Some("read") => false,
            Some("write") => true,
            Some(other) => {
                return Err(error(format!(
                    "workspace = \"{other}\" is not valid: use \"read\" or \"write\""
                )));
            }
        };
        let transport = match kind {
            "stdio" => {
                let Some(command) = &self.command else {
                    return Err(error("a stdio server needs `command`".into()));
                };
                if command.trim().is_empty() {
                    return Err(error("`command` is empty".into()));
                }
                if !self.headers.is_empty() || self.url.is_some() {
                    return Err(error("a stdio server takes no `url` or `headers`".into()));
                }
                let mut argv = vec![command.clone()];
                argv.extend(self.args.iter().cloned());
                Transport::Stdio {
                    argv,
                    env: self
                        .env
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                }
            }
            "http" | "sse" | "streamable-http" | "streamableHttp" => {
                let Some(url) = &self.url else {
                    return Err(error(format!("a `{kind}` server needs `url`")));
                };
                if self.command.is_some() || !self.env.is_empty() {
                    return Err(error(
                        "a remote server takes no `command`, `args` or `env`".into(),
                    ));
                }
                if !self.read.is_empty() || !self.write.is_empty() || !self.net.is_empty() {
                    return Err(error(
                        "`read`, `write` and `net` are for local servers; a remote server reaches its own origin only".into(),
                    ));
                }
                let origin = origin_of(url).map_err(error)?;
                net = vec![origin.clone()];
                let host = origin.host().to_string();
                let mut fixed = Vec::new();
                let mut secrets = Vec::new();
                for (header, value) in &self.headers {
                    check_header(header).map_err(|e| error(format!("header {header}: {e}")))?;
                    match secret_in(value).map_err(|e| error(format!("header {header}: {e}")))? {
                        Some((secret, format)) => secrets.push(SecretGrant {
                            name: secret,
                            header: header.clone(),
                            format,
                            hosts: vec![host.clone()],
                        }),
                        None => fixed.push((header.clone(), value.clone())),
                    }
                }
                Transport::Http {
                    url: url.clone(),
                    legacy_sse: kind == "sse",
                    headers: fixed,
                    secrets,
                }
            }
            other => {
                return Err(error(format!(
                    "type \"{other}\" is not known: use \"stdio\", \"http\" or \"sse\""
                )));
            }
        };
        Ok(ServerSpec {
            name: name.to_string(),
            source: source.to_string(),
            transport,
            read,
            write,
            write_workspace,
            net,
            timeout,
            locked_files: None,
        })
    }
}

/// The network grant for `url`'s origin: `scheme://host[:port]`.
pub fn origin_of(url: &str) -> Result<NetGrant, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("`{url}` is not a URL (http:// or https://)"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    NetGrant::parse(&format!("{scheme}://{authority}"))
        .map_err(|e| format!("the origin of `{url}`: {e}"))
}

/// The one secret a header value names (`Bearer $TOKEN`, `${TOKEN}`) and
/// the value's format with `{}` in its place; `None` for a fixed value.
pub fn secret_in(value: &str) -> Result<Option<(String, String)>, String> {
    let Some(at) = value.find('$') else {
        return Ok(None);
    };
    let rest = &value[at + 1..];
    let (name, after) = if let Some(braced) = rest.strip_prefix('{') {
        let end = braced
            .find('}')
            .ok_or_else(|| format!("`{value}`: `${{` without its `}}`"))?;
        (&braced[..end], &braced[end + 1..])
    } else {
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        (&rest[..end], &rest[end..])
    };
    crate::grants::secrets::check_name(name).map_err(|e| format!("`{value}`: {e}"))?;
    if after.contains('$') {
        return Err(format!(
            "`{value}` names more than one secret; use one per header"
        ));
    }
    Ok(Some((
        name.to_string(),
        format!("{}{{}}{after}", &value[..at]),
    )))
}

/// `text` with `$NAME` and `${NAME}` replaced by `lookup(NAME)` (empty
/// when unset), and the names it used.
pub fn expand_vars(text: &str, lookup: impl Fn(&str) -> Option<String>) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, next) = if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(end) => (&braced[..end], &braced[end + 1..]),
                None => ("", after),
            }
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        if name.is_empty() {
            out.push('$');
            rest = after;
            continue;
        }
        // `${NAME:-default}` as Claude Code writes it.
        let (name, default) = match name.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (name, None),
        };
        out.push_str(
            &lookup(name)
                .or(default.map(str::to_string))
                .unwrap_or_default(),
        );
        names.push(name.to_string());
        rest = next;
    }
    out.push_str(rest);
    (out, names)
}

impl ServerSpec {
    /// The SHA-256 of what the user consents to: the transport, the
    /// sandbox and where it was defined.
    pub fn fingerprint(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        let digest = Sha256::digest(text.as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Whether it is a local server.
    pub fn is_local(&self) -> bool {
        matches!(self.transport, Transport::Stdio { .. })
    }

    /// What it will reach, in plain words, one line each: what consent
    /// shows and `mcp list` repeats. No header value appears.
    pub fn reach(&self) -> Vec<String> {
        let mut lines = Vec::new();
        match &self.transport {
            Transport::Stdio { argv, env } => {
                lines.push(format!(
                    "runs `{}` in the OS sandbox",
                    crate::exec::CommandLine::Argv(argv.clone()).describe()
                ));
                lines.push(if self.write_workspace {
                    "reads and writes the workspace".to_string()
                } else {
                    "reads the workspace (read-only)".to_string()
                });
                for folder in &self.read {
                    lines.push(format!("reads {}", folder.display()));
                }
                for folder in &self.write {
                    lines.push(format!("reads and writes {}", folder.display()));
                }
                if self.net.is_empty() {
                    lines.push("no network".to_string());
                }
                for origin in &self.net {
                    lines.push(format!("reaches {origin} (through capstan's proxy)"));
                }
                for (name, value) in env {
                    let (_, used) = expand_vars(value, |_| None);
                    if used.is_empty() {
                        lines.push(format!("gets the variable {name}"));
                    } else {
                        lines.push(format!(
                            "gets the variable {name} from your {}",
                            used.iter()
                                .map(|u| format!("${u}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                    }
                }
            }
            Transport::Http {
                url,
                legacy_sse,
                headers,
                secrets,
            } => {
                let kind = if *legacy_sse {
                    "HTTP+SSE"
                } else {
                    "Streamable HTTP"
                };
                lines.push(format!("connects to {url} ({kind})"));
                for origin in &self.net {
                    lines.push(format!("reaches {origin} only"));
                }
                for (header, _) in headers {
                    lines.push(format!("sends the header {header} (a fixed value)"));
                }
                for secret in secrets {
                    lines.push(format!(
                        "sends your secret {} as the header {} to {}",
                        secret.name,
                        secret.header,
                        secret.hosts.join(", ")
                    ));
                }
            }
            Transport::Driver { .. } => lines.push(
                "runs in the program driving capstan, reached through its control requests"
                    .to_string(),
            ),
        }
        lines
    }
}

/// `mcpServers` of a Claude Code JSON file (`.mcp.json`, the user's
/// `mcp.json`, a plugin's `.mcp.json`); a plugin may also write the
/// servers at the top level.
pub fn parse_claude_json(
    text: &str,
    allow_top_level: bool,
) -> Result<Vec<(String, ServerEntry)>, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("it is not valid JSON: {e}"))?;
    let servers = match value.get("mcpServers") {
        Some(servers) => servers.clone(),
        None if allow_top_level => value,
        None => return Ok(Vec::new()),
    };
    let serde_json::Value::Object(map) = servers else {
        return Err("`mcpServers` must be an object of servers by name".into());
    };
    let mut entries = Vec::new();
    for (name, entry) in map {
        let entry: ServerEntry =
            serde_json::from_value(entry).map_err(|e| format!("server `{name}`: {e}"))?;
        entries.push((name, entry));
    }
    Ok(entries)
}

/// The most bytes of a project's server definitions read.
const MAX_PROJECT_FILE: usize = 256 * 1024;

/// A project file's text, read beneath the workspace: a repository is
/// someone else's, so a link leading out, a FIFO, a device or a file over
/// [`MAX_PROJECT_FILE`] is refused rather than read. `None` when absent.
fn read_in_workspace(workspace: &Path, path: &Path) -> Result<Option<String>, String> {
    let rel = path.strip_prefix(workspace).unwrap_or(path);
    let read = crate::untrusted_folder::UntrustedFolder::open(workspace)
        .and_then(|folder| folder.map_or(Ok(None), |f| f.read(rel, MAX_PROJECT_FILE)))
        .map_err(|e| format!("skipped: {e}"))?;
    let Some(read) = read else {
        return Ok(None);
    };
    if read.more {
        return Err(format!(
            "skipped: it is larger than {} KiB",
            MAX_PROJECT_FILE / 1024
        ));
    }
    String::from_utf8(read.bytes)
        .map(Some)
        .map_err(|_| "skipped: it is not UTF-8 text".to_string())
}

/// `[mcp.servers]` of a TOML settings file.
pub fn parse_toml_servers(text: &str) -> Result<Vec<(String, ServerEntry)>, String> {
    #[derive(Deserialize)]
    struct File {
        #[serde(default)]
        mcp: Option<Section>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Section {
        #[serde(default)]
        servers: BTreeMap<String, ServerEntry>,
        /// Read by [`startup_wait`].
        #[serde(default, rename = "startup_wait")]
        _startup_wait: Option<crate::quantity::TimeSpan>,
    }
    let file: File = toml::from_str(text).map_err(|e| e.message().trim().to_string())?;
    Ok(file
        .mcp
        .map(|section| section.servers.into_iter().collect())
        .unwrap_or_default())
}

/// How long a session's first model request waits for servers still
/// starting, unless `startup_wait` in `[mcp]` says otherwise.
pub const DEFAULT_STARTUP_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// `startup_wait` in `[mcp]` of the user's `config.toml`, then of the
/// project's `.capstan/config.toml` (the later one wins; a wait asks for
/// nothing, so the project may set it), or [`DEFAULT_STARTUP_WAIT`]; with
/// a warning for a value that cannot be read.
pub fn startup_wait(config_dir: &Path, workspace: &Path) -> (std::time::Duration, Option<String>) {
    #[derive(Deserialize)]
    struct File {
        #[serde(default)]
        mcp: Option<Section>,
    }
    #[derive(Deserialize)]
    struct Section {
        startup_wait: Option<crate::quantity::TimeSpan>,
    }
    let mut wait = DEFAULT_STARTUP_WAIT;
    let mut warning = None;
    let user = config_dir.join("config.toml");
    let project = workspace.join(".capstan").join("config.toml");
    // The project's file is read as every project file is (no FIFO, no
    // link leading out); what is wrong with it the settings report.
    let texts = [
        (
            user.clone(),
            std::fs::metadata(&user)
                .is_ok_and(|m| m.is_file())
                .then(|| std::fs::read_to_string(&user).ok())
                .flatten(),
        ),
        (
            project.clone(),
            read_in_workspace(workspace, &project).ok().flatten(),
        ),
    ];
    for (path, text) in texts {
        let Some(text) = text else {
            continue;
        };
        match toml::from_str::<File>(&text) {
            Ok(file) => {
                if let Some(span) = file.mcp.and_then(|section| section.startup_wait) {
                    wait = span.0;
                }
            }
            Err(e) => {
                warning = Some(format!(
                    "{}: `startup_wait` in [mcp] cannot be read ({}); waiting {} for MCP servers",
                    path.display(),
                    e.message().trim(),
                    crate::quantity::TimeSpan(wait)
                ));
            }
        }
    }
    (wait, warning)
}

/// The servers defined for `workspace`, in the order of the module
/// documentation, each with its spec or why it cannot be used. `added` are
/// the consent store's own definitions.
pub fn defined_servers(
    config_dir: &Path,
    workspace: &Path,
    added: &[(String, String, ServerEntry)],
    home: Option<&Path>,
) -> Vec<Result<ServerSpec, SpecError>> {
    let mut found: Vec<(String, String, ServerEntry)> = Vec::new();
    let mut problems = Vec::new();
    for (path, json) in [
        (config_dir.join("config.toml"), false),
        (config_dir.join("mcp.json"), true),
    ] {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        match parse_definitions(&path, &text, json) {
            Ok(entries) => found.extend(entries),
            Err(problem) => problems.push(problem),
        }
    }
    let mut all = found;
    all.extend(added.iter().cloned());
    let mut project = Vec::new();
    for (path, json) in [
        (workspace.join(".mcp.json"), true),
        (workspace.join(".capstan").join("config.toml"), false),
    ] {
        let parsed = match read_in_workspace(workspace, &path) {
            Ok(Some(text)) => parse_definitions(&path, &text, json),
            Ok(None) => continue,
            Err(message) => Err(SpecError {
                name: "*".into(),
                source_file: path.display().to_string(),
                message,
            }),
        };
        match parsed {
            Ok(entries) => project.extend(entries),
            Err(problem) => problems.push(problem),
        }
    }
    all.extend(project);
    let mut by_name: BTreeMap<String, (String, ServerEntry)> = BTreeMap::new();
    for (name, source, entry) in all {
        by_name.insert(name, (source, entry));
    }
    let mut specs: Vec<Result<ServerSpec, SpecError>> = problems.into_iter().map(Err).collect();
    for (name, (source, entry)) in by_name {
        if entry.disabled == Some(true) {
            continue;
        }
        specs.push(entry.to_spec(&name, &source, home));
    }
    specs
}

/// The servers file `path` defines in `text` (Claude Code's JSON when
/// `json`, else capstan's TOML), each with its name and the file, or what
/// is wrong with the file.
fn parse_definitions(
    path: &Path,
    text: &str,
    json: bool,
) -> Result<Vec<(String, String, ServerEntry)>, SpecError> {
    let parsed = if json {
        parse_claude_json(text, false)
    } else {
        parse_toml_servers(text)
    };
    let source = path.display().to_string();
    match parsed {
        Ok(entries) => Ok(entries
            .into_iter()
            .map(|(name, entry)| (name, source.clone(), entry))
            .collect()),
        Err(message) => Err(SpecError {
            name: "*".into(),
            source_file: source,
            message,
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_startup_wait_is_read_from_the_user_then_the_project() {
        let config = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        let (wait, warning) = startup_wait(config.path(), workspace.path());
        assert_eq!((wait, warning), (DEFAULT_STARTUP_WAIT, None));
        std::fs::write(
            config.path().join("config.toml"),
            "[mcp]\nstartup_wait = \"30s\"\n[mcp.servers.x]\ncommand = \"x\"\n",
        )
        .unwrap();
        assert_eq!(
            startup_wait(config.path(), workspace.path()).0,
            Duration::from_secs(30)
        );
        // The servers' parser takes the key too.
        let text = std::fs::read_to_string(config.path().join("config.toml")).unwrap();
        assert_eq!(parse_toml_servers(&text).unwrap().len(), 1);
        std::fs::create_dir(workspace.path().join(".capstan")).unwrap();
        std::fs::write(
            workspace.path().join(".capstan/config.toml"),
            "[mcp]\nstartup_wait = \"2s\"\n",
        )
        .unwrap();
        assert_eq!(
            startup_wait(config.path(), workspace.path()).0,
            Duration::from_secs(2)
        );
        std::fs::write(
            workspace.path().join(".capstan/config.toml"),
            "[mcp]\nstartup_wait = \"soon\"\n",
        )
        .unwrap();
        let (wait, warning) = startup_wait(config.path(), workspace.path());
        assert_eq!(wait, Duration::from_secs(30));
        assert!(warning.unwrap().contains("startup_wait"));
    }

    #[test]
    fn claude_code_json_reads_local_and_remote_servers() {
        let text = r#"{"mcpServers": {
            "files": {"command": "npx", "args": ["-y", "server-filesystem", "."], "env": {"A": "1"}},
            "gh": {"type": "http", "url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer ${GH_TOKEN}"}}
        }}"#;
        let entries = parse_claude_json(text, false).unwrap();
        let files = entries[0].1.to_spec("files", ".mcp.json", None).unwrap();
        assert!(files.is_local());
        assert!(files.net.is_empty());
        let gh = entries[1].1.to_spec("gh", ".mcp.json", None).unwrap();
        let Transport::Http {
            secrets, headers, ..
        } = &gh.transport
        else {
            panic!("remote");
        };
        assert!(headers.is_empty());
        assert_eq!(secrets[0].name, "GH_TOKEN");
        assert_eq!(secrets[0].format, "Bearer {}");
        assert_eq!(secrets[0].hosts, ["api.example.com"]);
        assert_eq!(gh.net[0].to_string(), "https://api.example.com");
        let reach = gh.reach().join("\n");
        assert!(reach.contains("sends your secret GH_TOKEN as the header Authorization"));
    }

    #[test]
    fn bad_definitions_say_what_to_fix() {
        let both = ServerEntry {
            command: Some("x".into()),
            url: Some("https://a".into()),
            ..ServerEntry::default()
        };
        assert!(
            both.to_spec("a", "f", None)
                .unwrap_err()
                .message
                .contains("both")
        );
        let remote_with_read = ServerEntry {
            url: Some("https://a".into()),
            read: vec!["/x".into()],
            ..ServerEntry::default()
        };
        assert!(remote_with_read.to_spec("a", "f", None).is_err());
        assert!(check_name("a__b").is_err());
        assert!(check_name("files-1").is_ok());
        let toml = "[mcp.servers.x]\ncommand = \"srv\"\nread = [\"relative\"]\n";
        let entries = parse_toml_servers(toml).unwrap();
        assert!(
            entries[0]
                .1
                .to_spec("x", "c", None)
                .unwrap_err()
                .message
                .contains("absolute")
        );
    }

    #[test]
    fn secrets_and_variables_are_found_in_values() {
        assert_eq!(
            secret_in("Bearer $TOKEN").unwrap(),
            Some(("TOKEN".into(), "Bearer {}".into()))
        );
        assert_eq!(
            secret_in("${K}x").unwrap(),
            Some(("K".into(), "{}x".into()))
        );
        assert_eq!(secret_in("plain").unwrap(), None);
        assert!(secret_in("$A $B").is_err());
        let (text, names) = expand_vars("a=${A} b=$B c=${C:-z}", |n| {
            (n == "A").then(|| "1".to_string())
        });
        assert_eq!(text, "a=1 b= c=z");
        assert_eq!(names, ["A", "B", "C"]);
    }

    #[test]
    fn a_changed_definition_has_another_fingerprint() {
        let entry = ServerEntry {
            command: Some("srv".into()),
            ..ServerEntry::default()
        };
        let one = entry.to_spec("s", "f", None).unwrap();
        let mut other = entry.clone();
        other.net = vec!["https://example.com".into()];
        let two = other.to_spec("s", "f", None).unwrap();
        assert_ne!(one.fingerprint(), two.fingerprint());
        assert_eq!(
            one.fingerprint(),
            entry.to_spec("s", "f", None).unwrap().fingerprint()
        );
    }
}
