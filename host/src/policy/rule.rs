//! Permission rules: which tool calls a rule covers.
//!
//! Syntax, as in settings files and `--allow`/`--deny`:
//!
//! - `fs.write` — one tool; `fs.*` — every tool of plugin `fs`; `*` — every tool.
//! - `fs.edit(src/**)` — the tool, when the input's `path` matches the glob.
//!   Relative patterns match paths relative to the workspace (a path outside
//!   the workspace never matches them); a pattern starting with `/` matches
//!   the absolute path. `*` does not cross `/`; `**` does.
//! - `web.fetch(domain:example.com)` — the tool, when the host of the input's
//!   `url` is `example.com`; `domain:*.example.com` matches its subdomains
//!   (not `example.com` itself).
//!
//! Claude Code's rules work too ([`super::claude_code`] maps the names):
//!
//! - `Read`, `Write`, `Edit`, `MultiEdit`, `Glob`, `Grep`, `LS`, alone or with
//!   a path pattern as Claude Code writes it: `Edit(src/**)`, `Read(.env)`.
//!   A pattern without `/` matches at any depth (`.env` is `**/.env`), as in
//!   a `.gitignore`; `//abs/path` is an absolute path; `/path` is relative
//!   to the workspace (Claude Code reads it relative to the settings file,
//!   which is the project's root for project settings); `~` is not expanded.
//! - `WebFetch(domain:example.com)`.
//! - `Bash(npm run test:*)` (the command, or with `:*` every command it
//!   begins, word by word; `*` elsewhere matches any text) — for `exec.run`:
//!   such rules match the call's `command` (or its `argv` joined by
//!   spaces). A command rule reads the text, so it is a convenience, not a
//!   security boundary (`git  push`, `sh -c 'git push'` and aliases slip
//!   past it); what a command can reach is decided by its sandbox.
//! - `mcp__server__tool`, and `mcp__server` (or `mcp__server__*`) for every
//!   tool of the server.
//!
//! Rules on the command tools (`exec.run`, `exec.start`) name a capability
//! the call asks for — `exec.run(write)`, `exec.run(net:https://*.npmjs.org)`
//! — or the command, as `Bash` does: `exec.run(git push:*)`. As an allow
//! rule a capability rule lets a call run only if it asks for nothing else.

use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

use globset::{GlobBuilder, GlobMatcher};

use crate::grants::net::NetGrant;

use super::claude_code::{self, SpecifierKind};

/// What a matching rule does to a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleKind {
    /// The call runs without asking.
    Allow,
    /// The user is asked first.
    Ask,
    /// The call is refused.
    Deny,
}

impl fmt::Display for RuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuleKind::Allow => "allow",
            RuleKind::Ask => "ask",
            RuleKind::Deny => "deny",
        })
    }
}

/// A rule that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad permission rule `{rule}`: {problem}")]
pub struct RuleError {
    /// The rule as written.
    pub rule: String,
    /// What is wrong with it.
    pub problem: String,
}

/// Which tool calls a rule covers: a tool pattern (or a Claude Code tool
/// name) and, optionally, a path glob, a domain pattern or a command.
/// Parse one with [`str::parse`].
#[derive(Debug, Clone)]
pub struct Rule {
    /// The tool as written: `fs.write`, `fs.*`, `*`, `Edit`, `mcp__github`.
    written: String,
    /// The capstan tool patterns it covers.
    tools: Vec<String>,
    specifier: Option<Specifier>,
}

/// The part of a rule in parentheses.
#[derive(Debug, Clone)]
enum Specifier {
    /// A glob over the input's `path`.
    Path {
        /// As written.
        pattern: String,
        /// Compiled from the pattern with a leading `./` removed.
        matcher: GlobMatcher,
        /// The pattern starts with `/` and matches absolute paths.
        absolute: bool,
    },
    /// A host pattern over the input's `url`, lowercase.
    Domain(String),
    /// A command pattern over the input's `command` (or `argv`).
    Command(String),
    /// `exec.run(write)`: the call asks to write the workspace.
    Write,
    /// `exec.run(net:ORIGIN)`: the call asks for origins this covers.
    Net(NetGrant),
}

impl Rule {
    /// A rule covering every call of one tool (`fs.write`), or of every
    /// tool matched by a pattern (`fs.*`, `*`).
    pub fn tool(name: &str) -> Rule {
        Rule {
            written: name.to_string(),
            tools: vec![name.to_string()],
            specifier: None,
        }
    }

    /// The tool as written: `fs.write`, `fs.*`, `*`, or a Claude Code name.
    pub fn tool_pattern(&self) -> &str {
        &self.written
    }

    /// The capstan tool patterns the rule covers (`Edit`: `fs.edit`,
    /// `fs.write`).
    pub fn covered_tools(&self) -> &[String] {
        &self.tools
    }

    /// Whether the rule can cover some call of the tool called `tool`.
    pub fn names_tool(&self, tool: &str) -> bool {
        self.tools.iter().any(|pattern| tool_matches(pattern, tool))
    }

    /// Whether the rule covers a call of `tool` with `input`, in `workspace`.
    /// A capability rule (`exec.run(write)`, `exec.run(net:ORIGIN)`) covers
    /// a call that asks for that capability; see [`Rule::allows`] for allow
    /// rules.
    pub fn matches(&self, tool: &str, input: &serde_json::Value, workspace: &Path) -> bool {
        if !self.names_tool(tool) {
            return false;
        }
        match &self.specifier {
            Some(Specifier::Write) => input.get("write") == Some(&serde_json::Value::Bool(true)),
            Some(Specifier::Net(grant)) => requested_origins(input)
                .iter()
                .any(|origin| grant.covers(origin)),
            None => true,
            Some(Specifier::Path {
                matcher, absolute, ..
            }) => {
                // `lsp` names its file `filePath`, as Claude Code's LSP does.
                let Some(path) = ["path", "filePath"]
                    .iter()
                    .find_map(|key| input.get(*key).and_then(|p| p.as_str()))
                else {
                    return false;
                };
                let workspace = normalize(workspace);
                let full = normalize(&workspace.join(path));
                if *absolute {
                    matcher.is_match(slash_path(&full))
                } else {
                    match full.strip_prefix(&workspace) {
                        Ok(relative) if !escapes(relative) => {
                            matcher.is_match(slash_path(relative))
                        }
                        Ok(_) | Err(_) => false,
                    }
                }
            }
            Some(Specifier::Domain(pattern)) => {
                let Some(host) = input.get("url").and_then(|u| u.as_str()).and_then(url_host)
                else {
                    return false;
                };
                domain_matches(pattern, &host)
            }
            Some(Specifier::Command(pattern)) => {
                command_text(input).is_some_and(|command| command_matches(pattern, &command))
            }
        }
    }
}

impl Rule {
    /// Whether the rule, as an allow rule, lets a call of `tool` with
    /// `input` run: as [`Rule::matches`], except that a capability rule
    /// allows only a call that asks for nothing beyond it (`exec.run(write)`
    /// does not let a call reach the network too).
    pub fn allows(&self, tool: &str, input: &serde_json::Value, workspace: &Path) -> bool {
        if !self.matches(tool, input, workspace) {
            return false;
        }
        let writes = input.get("write") == Some(&serde_json::Value::Bool(true));
        let origins = requested_origins(input);
        match &self.specifier {
            Some(Specifier::Write) => !has_net(input),
            Some(Specifier::Net(grant)) => {
                !writes
                    && !origins.is_empty()
                    && origins.iter().all(|o| grant.covers(o))
                    && origins.len() == net_len(input)
            }
            _ => true,
        }
    }
}

/// The origins an `exec.*` call's `net` asks for (those that parse).
fn requested_origins(input: &serde_json::Value) -> Vec<NetGrant> {
    input
        .get("net")
        .and_then(serde_json::Value::as_array)
        .map(|origins| {
            origins
                .iter()
                .filter_map(serde_json::Value::as_str)
                .filter_map(|text| NetGrant::parse(text).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// How many entries the call's `net` has.
fn net_len(input: &serde_json::Value) -> usize {
    input
        .get("net")
        .and_then(serde_json::Value::as_array)
        .map_or(0, Vec::len)
}

/// Whether the call's `net` asks for anything.
fn has_net(input: &serde_json::Value) -> bool {
    net_len(input) > 0
}

impl PartialEq for Rule {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for Rule {}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.written)?;
        match &self.specifier {
            None => Ok(()),
            Some(Specifier::Path { pattern, .. }) => write!(f, "({pattern})"),
            Some(Specifier::Domain(domain)) => write!(f, "(domain:{domain})"),
            Some(Specifier::Command(command)) => write!(f, "({command})"),
            Some(Specifier::Write) => write!(f, "(write)"),
            Some(Specifier::Net(grant)) => write!(f, "(net:{grant})"),
        }
    }
}

impl FromStr for Rule {
    type Err = RuleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        let bad = |problem: &str| RuleError {
            rule: s.to_string(),
            problem: problem.to_string(),
        };
        if text.is_empty() {
            return Err(bad(
                "it is empty; write a tool name such as `fs.write`, `fs.*` or `*`",
            ));
        }
        let (tool, inner) = match text.find('(') {
            None => {
                if text.contains(')') {
                    return Err(bad("it has `)` without a matching `(`"));
                }
                (text, None)
            }
            Some(open) => {
                let Some(inner) = text[open + 1..].strip_suffix(')') else {
                    return Err(bad(
                        "it has `(` without a matching `)` at the end of the rule",
                    ));
                };
                (text[..open].trim_end(), Some(inner))
            }
        };
        if let Some(claude) = claude_code::lookup(tool) {
            let specifier = match inner {
                None => None,
                Some(inner) => Some(
                    parse_claude_specifier(claude.name, claude.specifier, inner)
                        .map_err(|problem| bad(&problem))?,
                ),
            };
            return Ok(Rule {
                written: tool.to_string(),
                tools: claude.rule_covers.iter().map(|t| t.to_string()).collect(),
                specifier,
            });
        }
        // `mcp__server__*`, as Claude Code also writes `mcp__server`.
        let mcp_server = tool.strip_suffix("__*").filter(|server| {
            server
                .strip_prefix("mcp__")
                .is_some_and(|name| !name.is_empty() && !name.contains("__"))
        });
        check_tool_pattern(mcp_server.unwrap_or(tool)).map_err(|problem| bad(&problem))?;
        let specifier = match inner {
            None => None,
            Some(inner) if COMMAND_TOOLS.contains(&tool) => {
                Some(parse_command_specifier(inner).map_err(|problem| bad(&problem))?)
            }
            Some(inner) => Some(parse_specifier(inner).map_err(|problem| bad(&problem))?),
        };
        let covered = claude_code::mcp_pattern(mcp_server.unwrap_or(tool))
            .unwrap_or_else(|| tool.to_string());
        Ok(Rule {
            written: tool.to_string(),
            tools: vec![covered],
            specifier,
        })
    }
}

impl<'de> serde::Deserialize<'de> for Rule {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Checks `fs.write`, `fs.*`, `*`: dot-separated names of letters, digits,
/// `_` and `-`, with `*` allowed only as the last part.
fn check_tool_pattern(tool: &str) -> Result<(), String> {
    if tool.is_empty() {
        return Err("the tool name before `(` is missing".to_string());
    }
    let parts: Vec<&str> = tool.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        if *part == "*" {
            if i + 1 != parts.len() {
                return Err(format!(
                    "`*` may only stand for the last part of the tool name, as in `fs.*`, not in `{tool}`"
                ));
            }
            continue;
        }
        if part.is_empty() {
            return Err(format!(
                "the tool name `{tool}` has an empty part; write it as `plugin.tool`"
            ));
        }
        if let Some(c) = part
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
        {
            return Err(format!(
                "the tool name `{tool}` contains `{c}`; tool names use letters, digits, `_`, `-` and `.`, and `*` as a whole last part"
            ));
        }
    }
    Ok(())
}

/// The tools whose calls run a command: their rules name a capability or
/// the command.
const COMMAND_TOOLS: [&str; 2] = [claude_code::EXEC_TOOL, "exec.start"];

/// The parentheses of a rule on a command tool: `write`, `net:ORIGIN`, or
/// the command (a prefix with `:*`).
fn parse_command_specifier(inner: &str) -> Result<Specifier, String> {
    let inner = inner.trim();
    if inner.is_empty() {
        return Err("the parentheses are empty; leave them out to cover every call".to_string());
    }
    if inner == "write" {
        return Ok(Specifier::Write);
    }
    if let Some(origin) = inner.strip_prefix("net:") {
        return NetGrant::parse(origin.trim())
            .map(Specifier::Net)
            .map_err(|e| {
                format!("`net:{origin}`: {e}; write an origin such as `net:https://*.npmjs.org`")
            });
    }
    Ok(Specifier::Command(inner.to_string()))
}

fn parse_specifier(inner: &str) -> Result<Specifier, String> {
    if inner.trim().is_empty() {
        return Err(
            "the parentheses are empty; write a path glob such as `src/**` or `domain:example.com`"
                .to_string(),
        );
    }
    if let Some(domain) = inner.strip_prefix("domain:") {
        return parse_domain(domain);
    }
    let absolute = inner.starts_with('/');
    let mut glob = inner;
    while let Some(rest) = glob.strip_prefix("./") {
        glob = rest;
    }
    path_specifier(inner, glob, absolute)
}

/// The parentheses of a rule for Claude Code's tool `name`, which hold what
/// `kind` says, written as Claude Code writes them.
fn parse_claude_specifier(
    name: &str,
    kind: SpecifierKind,
    inner: &str,
) -> Result<Specifier, String> {
    let inner = inner.trim();
    if inner.is_empty() {
        return Err("the parentheses are empty; leave them out to cover every call".to_string());
    }
    match kind {
        SpecifierKind::Domain => match inner.strip_prefix("domain:") {
            Some(domain) => parse_domain(domain),
            None => Err(format!(
                "{name} rules name a host as `domain:example.com`, not `{inner}`"
            )),
        },
        SpecifierKind::Command => Ok(Specifier::Command(inner.to_string())),
        SpecifierKind::Path => {
            if inner.starts_with('~') {
                return Err(format!(
                    "capstan does not expand `~` in rules; write the absolute path after `//`, as in `{name}(//home/you/...)`"
                ));
            }
            if let Some(absolute) = inner.strip_prefix("//") {
                return path_specifier(inner, &format!("/{absolute}"), true);
            }
            let mut relative = inner.trim_start_matches('/');
            while let Some(rest) = relative.strip_prefix("./") {
                relative = rest;
            }
            if relative.is_empty() {
                return Err(format!(
                    "the path pattern `{inner}` names no file; write one such as `src/**`"
                ));
            }
            // As in a .gitignore, a name without `/` matches at any depth.
            let glob = if relative.contains('/') {
                relative.to_string()
            } else {
                format!("**/{relative}")
            };
            path_specifier(inner, &glob, false)
        }
    }
}

/// A path specifier written as `pattern`, matching with `glob`.
fn path_specifier(pattern: &str, glob: &str, absolute: bool) -> Result<Specifier, String> {
    let matcher = GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map_err(|e| format!("the path glob `{pattern}` is invalid: {}", e.kind()))?
        .compile_matcher();
    Ok(Specifier::Path {
        pattern: pattern.to_string(),
        matcher,
        absolute,
    })
}

/// The host pattern after `domain:`.
fn parse_domain(domain: &str) -> Result<Specifier, String> {
    let domain = domain.trim().to_ascii_lowercase();
    let body = if domain == "*" {
        ""
    } else {
        domain.strip_prefix("*.").unwrap_or(&domain)
    };
    if domain != "*" && body.is_empty() {
        return Err("the domain after `domain:` is missing".to_string());
    }
    if let Some(c) = body
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '.'))
    {
        return Err(format!(
            "the domain `{domain}` contains `{c}`; write a host such as `example.com` or `*.example.com`"
        ));
    }
    Ok(Specifier::Domain(domain))
}

/// The command a call runs: its `command` text, or its `argv` joined by
/// spaces.
fn command_text(input: &serde_json::Value) -> Option<String> {
    if let Some(command) = input.get("command").and_then(|c| c.as_str()) {
        return Some(command.trim().to_string());
    }
    let argv = input.get("argv")?.as_array()?;
    let words: Option<Vec<&str>> = argv.iter().map(|word| word.as_str()).collect();
    Some(words?.join(" "))
}

/// Whether `command` matches a `Bash(...)` pattern: `prefix:*` matches the
/// prefix alone or followed by more words; otherwise `*` matches any text
/// and the rest must be equal.
fn command_matches(pattern: &str, command: &str) -> bool {
    if let Some(prefix) = pattern.strip_suffix(":*") {
        let prefix = prefix.trim_end();
        return command == prefix
            || command
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with(char::is_whitespace));
    }
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or_default();
    let Some(mut rest) = command.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    let Some((last, middle)) = pieces.split_last() else {
        return rest.is_empty();
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

fn tool_matches(pattern: &str, tool: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    match pattern.strip_suffix('*') {
        Some(prefix) => tool.starts_with(prefix),
        None => pattern == tool,
    }
}

fn domain_matches(pattern: &str, host: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    match pattern.strip_prefix("*.") {
        Some(parent) => host
            .strip_suffix(parent)
            .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
        None => pattern == host,
    }
}

/// The host of `scheme://[user@]host[:port]/…`, lowercase, without a trailing dot.
pub(crate) fn url_host(url: &str) -> Option<String> {
    let rest = url.trim();
    let rest = rest.split_once("://").map_or(rest, |(_, after)| after);
    let authority = rest.split(['/', '\\', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        host_port.split(':').next().unwrap_or_default()
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty()).then_some(host)
}

/// Removes `.` and resolves `..` without touching the file system.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                // `/..` is `/`.
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(".."),
            },
            other => out.push(other),
        }
    }
    out
}

/// Whether a normalized relative path climbs out of its base.
fn escapes(path: &Path) -> bool {
    path.components().any(|c| matches!(c, Component::ParentDir))
}

/// The path with `/` between its parts, as globs expect.
fn slash_path(path: &Path) -> String {
    let parts: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            Component::RootDir => Some(String::new()),
            Component::Normal(part) => Some(part.to_string_lossy().into_owned()),
            Component::Prefix(prefix) => Some(prefix.as_os_str().to_string_lossy().into_owned()),
            Component::CurDir | Component::ParentDir => None,
        })
        .collect();
    if parts == [String::new()] {
        "/".to_string()
    } else {
        parts.join("/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(text: &str) -> Rule {
        text.parse().unwrap()
    }

    fn ws() -> &'static Path {
        Path::new("/work/proj")
    }

    fn path_input(path: &str) -> serde_json::Value {
        json!({ "path": path })
    }

    #[test]
    fn tool_patterns() {
        let none = json!({});
        assert!(rule("fs.write").matches("fs.write", &none, ws()));
        assert!(!rule("fs.write").matches("fs.writer", &none, ws()));
        assert!(!rule("fs.write").matches("fs.read", &none, ws()));
        assert!(rule("fs.*").matches("fs.read", &none, ws()));
        assert!(!rule("fs.*").matches("fsx.read", &none, ws()));
        assert!(!rule("fs.*").matches("web.fetch", &none, ws()));
        assert!(rule("*").matches("web.fetch", &none, ws()));
        assert!(Rule::tool("fs.write").matches("fs.write", &none, ws()));
        assert_eq!(Rule::tool("fs.write"), rule("fs.write"));
    }

    #[test]
    fn path_globs_relative_to_the_workspace() {
        let r = rule("fs.edit(src/**)");
        assert!(r.matches("fs.edit", &path_input("src/a.rs"), ws()));
        assert!(r.matches("fs.edit", &path_input("./src/a.rs"), ws()));
        assert!(r.matches("fs.edit", &path_input("src/deep/er/a.rs"), ws()));
        assert!(r.matches("fs.edit", &path_input("docs/../src/a.rs"), ws()));
        assert!(r.matches("fs.edit", &path_input("/work/proj/src/a.rs"), ws()));
        assert!(r.matches("fs.edit", &path_input("/work/./proj/src/a.rs"), ws()));
        assert!(!r.matches("fs.edit", &path_input("lib/a.rs"), ws()));
        assert!(!r.matches("fs.edit", &path_input("/elsewhere/src/a.rs"), ws()));
        assert!(!r.matches("fs.edit", &path_input("../proj2/src/a.rs"), ws()));
        assert!(!r.matches("fs.write", &path_input("src/a.rs"), ws()));
        // No `path` field: a path rule does not match.
        assert!(!r.matches("fs.edit", &json!({ "file": "src/a.rs" }), ws()));
        assert!(!r.matches("fs.edit", &json!({ "path": 3 }), ws()));
    }

    #[test]
    fn relative_patterns_never_match_outside_the_workspace() {
        let r = rule("fs.read(**)");
        assert!(r.matches("fs.read", &path_input("x"), ws()));
        assert!(!r.matches("fs.read", &path_input("../x"), ws()));
        assert!(!r.matches("fs.read", &path_input("src/../../x"), ws()));
        assert!(!r.matches("fs.read", &path_input("/etc/passwd"), ws()));
    }

    #[test]
    fn single_star_does_not_cross_folders() {
        let r = rule("fs.write(*.md)");
        assert!(r.matches("fs.write", &path_input("README.md"), ws()));
        assert!(!r.matches("fs.write", &path_input("docs/a.md"), ws()));
        let env = rule("fs.write(.env)");
        assert!(env.matches("fs.write", &path_input("./.env"), ws()));
        assert!(!env.matches("fs.write", &path_input("sub/.env"), ws()));
        let dot = rule("fs.write(./src/*.rs)");
        assert!(dot.matches("fs.write", &path_input("src/main.rs"), ws()));
        assert_eq!(dot.to_string(), "fs.write(./src/*.rs)");
    }

    #[test]
    fn absolute_patterns_match_absolute_paths() {
        let r = rule("fs.read(/etc/**)");
        assert!(r.matches("fs.read", &path_input("/etc/passwd"), ws()));
        assert!(r.matches("fs.read", &path_input("../../../etc/hosts"), ws()));
        assert!(!r.matches("fs.read", &path_input("etc/passwd"), ws()));
        let inside = rule("fs.read(/work/proj/src/*)");
        assert!(inside.matches("fs.read", &path_input("src/a.rs"), ws()));
    }

    #[test]
    fn domain_rules() {
        let url = |u: &str| json!({ "url": u });
        let exact = rule("web.fetch(domain:example.com)");
        assert!(exact.matches("web.fetch", &url("https://example.com/a?b"), ws()));
        assert!(exact.matches("web.fetch", &url("HTTP://Example.COM:8080"), ws()));
        assert!(exact.matches("web.fetch", &url("https://user:pw@example.com/"), ws()));
        assert!(!exact.matches("web.fetch", &url("https://www.example.com/"), ws()));
        assert!(!exact.matches("web.fetch", &url("https://example.com.evil.io/"), ws()));
        assert!(!exact.matches("web.fetch", &url("https://example.com@evil.io/"), ws()));
        assert!(!exact.matches("web.fetch", &url("https://evil.io\\@example.com/"), ws()));
        assert!(!exact.matches("web.fetch", &url("https://evil.io/example.com"), ws()));
        assert!(!exact.matches("web.fetch", &json!({}), ws()));
        let sub = rule("web.*(domain:*.Example.com)");
        assert_eq!(sub.to_string(), "web.*(domain:*.example.com)");
        assert!(sub.matches("web.get", &url("https://api.example.com/"), ws()));
        assert!(sub.matches("web.get", &url("https://a.b.example.com/"), ws()));
        assert!(!sub.matches("web.get", &url("https://example.com/"), ws()));
        assert!(!sub.matches("web.get", &url("https://badexample.com/"), ws()));
        assert_eq!(url_host("http://[::1]:80/x").as_deref(), Some("::1"));
    }

    #[test]
    fn relative_workspace_and_root_climbing() {
        let r = rule("fs.read(**)");
        assert!(r.matches("fs.read", &path_input("a/b"), Path::new(".")));
        assert!(!r.matches("fs.read", &path_input("../x"), Path::new(".")));
        assert!(!r.matches("fs.read", &path_input("../x"), Path::new("proj")));
        assert_eq!(normalize(Path::new("/../etc/./x/..")), Path::new("/etc"));
        assert_eq!(normalize(Path::new("a/../../b")), Path::new("../b"));
    }

    #[test]
    fn round_trips() {
        for text in [
            "fs.write",
            "fs.*",
            "*",
            "fs.edit(src/**)",
            "fs.read(/etc/**)",
            "web.fetch(domain:example.com)",
            "web.*(domain:*.example.com)",
            "my-plugin.do_thing(a/{b,c}/*.rs)",
        ] {
            let parsed = rule(text);
            assert_eq!(parsed.to_string(), text);
            assert_eq!(rule(&parsed.to_string()), parsed);
        }
        assert_eq!(rule("  fs.write  ").to_string(), "fs.write");
    }

    #[test]
    fn claude_code_file_rules_cover_capstan_tools() {
        let edit = rule("Edit(docs/**)");
        assert_eq!(edit.to_string(), "Edit(docs/**)");
        assert_eq!(edit.covered_tools(), ["fs.edit", "fs.write"]);
        assert!(edit.matches("fs.edit", &path_input("docs/a.md"), ws()));
        assert!(edit.matches("fs.write", &path_input("docs/new/b.md"), ws()));
        assert!(!edit.matches("fs.edit", &path_input("src/a.rs"), ws()));
        assert!(!edit.matches("fs.read", &path_input("docs/a.md"), ws()));

        let write = rule("Write(docs/**)");
        assert!(write.matches("fs.write", &path_input("docs/a.md"), ws()));
        assert!(!write.matches("fs.edit", &path_input("docs/a.md"), ws()));
        assert!(rule("MultiEdit").matches("fs.edit", &json!({}), ws()));
        assert!(!rule("MultiEdit").matches("fs.write", &json!({}), ws()));

        // Read covers every tool that reads files, as in Claude Code.
        let read = rule("Read");
        for tool in ["fs.read", "fs.glob", "fs.grep", "fs.ls"] {
            assert!(read.matches(tool, &json!({}), ws()), "{tool}");
        }
        assert!(!read.matches("fs.write", &json!({}), ws()));
        for (name, tool) in [("Glob", "fs.glob"), ("Grep", "fs.grep"), ("LS", "fs.ls")] {
            assert_eq!(rule(name).covered_tools(), [tool]);
        }
        assert_eq!(rule("Read").to_string(), "Read");
    }

    #[test]
    fn claude_code_paths_read_like_gitignore() {
        // A name without `/` matches at any depth.
        let env = rule("Read(.env)");
        assert!(env.matches("fs.read", &path_input(".env"), ws()));
        assert!(env.matches("fs.grep", &path_input("config/.env"), ws()));
        assert!(!env.matches("fs.read", &path_input(".env.example"), ws()));
        let keys = rule("Read(*.pem)");
        assert!(keys.matches("fs.read", &path_input("certs/deep/server.pem"), ws()));
        // `/path` is from the project's root, `//path` from the file system's.
        let rooted = rule("Edit(/src/**)");
        assert!(rooted.matches("fs.edit", &path_input("src/a.rs"), ws()));
        assert!(!rooted.matches("fs.edit", &path_input("/src/a.rs"), ws()));
        let absolute = rule("Read(//etc/**)");
        assert!(absolute.matches("fs.read", &path_input("/etc/passwd"), ws()));
        assert!(!absolute.matches("fs.read", &path_input("etc/passwd"), ws()));
        assert_eq!(absolute.to_string(), "Read(//etc/**)");
        let nested = rule("Edit(./docs/*.md)");
        assert!(nested.matches("fs.edit", &path_input("docs/a.md"), ws()));
        assert!(!nested.matches("fs.edit", &path_input("docs/x/a.md"), ws()));
    }

    #[test]
    fn claude_code_web_and_mcp_rules() {
        let url = |u: &str| json!({ "url": u });
        let fetch = rule("WebFetch(domain:*.rust-lang.org)");
        assert_eq!(fetch.covered_tools(), ["web.fetch"]);
        assert!(fetch.matches("web.fetch", &url("https://doc.rust-lang.org/std"), ws()));
        assert!(!fetch.matches("web.fetch", &url("https://evil.io"), ws()));
        let tool = rule("mcp__github__list_issues");
        assert!(tool.matches("mcp__github__list_issues", &json!({}), ws()));
        assert!(!tool.matches("mcp__github__create_issue", &json!({}), ws()));
        let server = rule("mcp__github");
        assert_eq!(server.covered_tools(), ["mcp__github__*"]);
        let wildcard = rule("mcp__github__*");
        assert_eq!(wildcard.covered_tools(), ["mcp__github__*"]);
        assert!(wildcard.matches("mcp__github__create_issue", &json!({}), ws()));
        assert!(!wildcard.matches("mcp__gitlab__create_issue", &json!({}), ws()));
        assert!("mcp__a__b__*".parse::<Rule>().is_err());
        assert!(server.matches("mcp__github__create_issue", &json!({}), ws()));
        assert!(!server.matches("mcp__gitlab__create_issue", &json!({}), ws()));
        assert_eq!(server.to_string(), "mcp__github");
    }

    #[test]
    fn bash_rules_are_kept_for_exec_run() {
        let command = |c: &str| json!({ "command": c });
        let tests = rule("Bash(npm run test:*)");
        assert_eq!(tests.covered_tools(), ["exec.run"]);
        assert_eq!(tests.to_string(), "Bash(npm run test:*)");
        assert!(tests.matches("exec.run", &command("npm run test"), ws()));
        assert!(tests.matches("exec.run", &command("npm run test -- --watch"), ws()));
        assert!(!tests.matches("exec.run", &command("npm run tests"), ws()));
        assert!(!tests.matches("exec.run", &command("npm run build"), ws()));
        assert!(tests.matches(
            "exec.run",
            &json!({"argv": ["npm", "run", "test", "x"]}),
            ws()
        ));
        assert!(!tests.matches("exec.run", &json!({"argv": ["npm", 3]}), ws()));
        assert!(!tests.matches("exec.run", &json!({}), ws()));
        let exact = rule("Bash(git status)");
        assert!(exact.matches("exec.run", &command("git status"), ws()));
        assert!(!exact.matches("exec.run", &command("git status --short"), ws()));
        let star = rule("Bash(git * main)");
        assert!(star.matches("exec.run", &command("git push origin main"), ws()));
        assert!(!star.matches("exec.run", &command("git push origin dev"), ws()));
        assert!(rule("Bash").matches("exec.run", &command("anything"), ws()));
        assert!(!rule("Bash").matches("fs.write", &json!({}), ws()));
    }

    #[test]
    fn bad_claude_code_rules_say_what_is_wrong() {
        for (text, needle) in [
            ("Read(~/.ssh/**)", "does not expand `~`"),
            ("WebFetch(example.com)", "`domain:example.com`"),
            ("Edit()", "parentheses are empty"),
            ("Edit(/)", "names no file"),
            ("Write(src/[a)", "glob"),
        ] {
            let message = text.parse::<Rule>().unwrap_err().to_string();
            assert!(message.contains(&format!("`{text}`")), "{message}");
            assert!(message.contains(needle), "{text}: {message}");
        }
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        for (text, needle) in [
            ("", "empty"),
            ("   ", "empty"),
            ("fs.edit(src/**", "without a matching `)`"),
            ("fs.edit)", "without a matching `(`"),
            ("fs.edit(src)x", "without a matching `)`"),
            ("fs.edit()", "parentheses are empty"),
            ("fs.edit(src/[a)", "glob"),
            ("fs wri/te", "contains ` `"),
            ("fs.*.x", "`*` may only"),
            ("fs..write", "empty part"),
            ("(src/**)", "tool name"),
            ("web.fetch(domain:)", "domain"),
            ("web.fetch(domain:exa mple.com)", "contains ` `"),
        ] {
            let err = text.parse::<Rule>().unwrap_err();
            let message = err.to_string();
            assert!(message.contains(&format!("`{text}`")), "{message}");
            assert!(message.contains(needle), "{text}: {message}");
        }
    }
}
