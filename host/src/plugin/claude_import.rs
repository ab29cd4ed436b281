//! Claude Code plugin folders: `.claude-plugin/plugin.json`, `skills/`,
//! `commands/`, `agents/`, `hooks/hooks.json`, `.mcp.json`, `bin/`.
//!
//! `capstan plugin install ./folder` imports what capstan can run safely —
//! the skills (`skills/NAME/` with their supporting files) and the
//! markdown commands (`commands/NAME.md`, which become skills the user can
//! run as `/NAME`) — into a capstan package with a generated `plugin.toml`
//! and no components, which is then hashed, locked and consented to like
//! any plugin. Its MCP servers (`.mcp.json`, the manifest's `mcpServers`)
//! are imported into the package's own `mcp-servers.json`, which capstan's MCP
//! client runs inside its sandbox (a local server in the OS sandbox, a
//! remote one under its origin's network grant); what each reaches is
//! shown at consent. Everything else that would run native code with the
//! user's rights is refused and listed with the reason and the capstan
//! alternative: command hooks, `bin/` executables; sub-agent definitions
//! are listed as not supported.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::front_matter;
use crate::model::valid_tool_name;
use crate::plugin::manifest::{MANIFEST_FILE, MAX_DESCRIPTION, check_semver};
use crate::untrusted_folder::UntrustedFolder;

/// The Claude Code manifest, relative to the plugin's root.
pub const CLAUDE_MANIFEST: &str = ".claude-plugin/plugin.json";

/// The file of an imported package that holds its MCP servers, in Claude
/// Code's `.mcp.json` format (a dot file would be left out of the package).
pub const MCP_SERVERS: &str = "mcp-servers.json";

/// The file of an imported package that records what was refused.
pub const IMPORT_NOTES: &str = "IMPORTED-FROM-CLAUDE-CODE.md";

/// The largest file copied from a Claude Code plugin.
const MAX_FILE: u64 = 8 << 20;

/// Whether `root` is a Claude Code plugin rather than a capstan one: it has
/// no `plugin.toml`, and has `.claude-plugin/plugin.json` (or, without one,
/// a `skills/` or `commands/` folder, as Claude Code allows).
pub fn is_claude_plugin(root: &Path) -> bool {
    !root.join(MANIFEST_FILE).exists()
        && (root.join(CLAUDE_MANIFEST).is_file()
            || root.join("skills").is_dir()
            || root.join("commands").is_dir())
}

/// A Claude Code plugin turned into a capstan package.
#[derive(Debug)]
pub struct Imported {
    /// The package's folder (inside `staging`), deleted when dropped.
    pub dir: tempfile::TempDir,
    /// The skills imported, by name.
    pub skills: Vec<String>,
    /// What was refused or skipped, one line each, with the reason and
    /// the capstan alternative.
    pub refused: Vec<String>,
    /// The MCP servers imported, one line each saying what it reaches.
    pub mcp_servers: Vec<String>,
}

impl Imported {
    /// The package's root.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }
}

/// Imports the Claude Code plugin at `root` into a new folder under
/// `staging`.
pub fn import(root: &Path, staging: &Path) -> Result<Imported, String> {
    let manifest = read_manifest(root)?;
    let folder_name = root
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let name = manifest
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or(folder_name);
    if !valid_tool_name(&name) {
        return Err(format!(
            "the Claude Code plugin's name `{name}` cannot be a capstan plugin name (lowercase letters, digits, `-` and `_`, starting with a letter); set `name` in {CLAUDE_MANIFEST}"
        ));
    }
    let mut refused = Vec::new();
    let version = match manifest.get("version").and_then(Value::as_str) {
        Some(v) if check_semver(v).is_ok() => v.to_string(),
        Some(v) => {
            refused.push(format!(
                "{CLAUDE_MANIFEST}: version `{v}` is not semver; installed as 0.0.0"
            ));
            "0.0.0".to_string()
        }
        None => "0.0.0".to_string(),
    };
    let description = manifest
        .get("description")
        .and_then(Value::as_str)
        .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| format!("Claude Code plugin {name}"));
    let description = front_matter::clip(description, MAX_DESCRIPTION);
    let author = match manifest.get("author") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Object(o)) => o.get("name").and_then(Value::as_str).map(|n| {
            match o.get("email").and_then(Value::as_str) {
                Some(email) => format!("{n} <{email}>"),
                None => n.to_string(),
            }
        }),
        _ => None,
    };

    std::fs::create_dir_all(staging)
        .map_err(|e| format!("cannot create {}: {e}", staging.display()))?;
    let dir = tempfile::Builder::new()
        .prefix("claude-import-")
        .tempdir_in(staging)
        .map_err(|e| format!("cannot create a folder in {}: {e}", staging.display()))?;
    let out = dir.path();
    let mut skills = Vec::new();

    // Skills: each folder with a SKILL.md, copied whole.
    for folder in sorted_entries(&root.join("skills")) {
        let rel_name = file_name(&folder);
        if !folder.is_dir() || folder.is_symlink() {
            continue;
        }
        let skill_md = folder.join("SKILL.md");
        let text = match read_text(root, &skill_md) {
            Ok(Some(text)) => text,
            Ok(None) | Err(_) => {
                refused.push(format!(
                    "skills/{rel_name}/: no readable SKILL.md; not a skill, skipped"
                ));
                continue;
            }
        };
        match front_matter::parse(&text, &rel_name) {
            Ok(parsed) => {
                copy_tree(
                    &folder,
                    &out.join("skills").join(&rel_name),
                    &format!("skills/{rel_name}"),
                    &mut refused,
                )?;
                skills.push(parsed.meta.name);
            }
            Err(e) => refused.push(format!(
                "skills/{rel_name}/SKILL.md:{}: {}; skipped",
                e.line, e.message
            )),
        }
    }

    // Commands: markdown prompts the user runs as /name; they become skills.
    for file in sorted_entries(&root.join("commands")) {
        let rel = format!("commands/{}", file_name(&file));
        if file.is_dir() {
            refused.push(format!(
                "{rel}/: commands in sub-folders are not imported (only commands/NAME.md)"
            ));
            continue;
        }
        if file.extension().and_then(|e| e.to_str()) != Some("md") || file.is_symlink() {
            continue;
        }
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = read_text(root, &file).ok().flatten().unwrap_or_default();
        match front_matter::parse(&text, &stem) {
            Ok(parsed) => {
                copy_file(&file, &out.join(&rel), &rel, &mut refused)?;
                skills.push(parsed.meta.name);
            }
            Err(e) => refused.push(format!("{rel}:{}: {}; skipped", e.line, e.message)),
        }
    }

    refused.extend(refuse_hooks(root, &manifest));
    let mcp_servers = import_mcp(root, &manifest, out, &mut refused)?;
    refused.extend(refuse_folder(
        root,
        "bin",
        "executables",
        "not installed — capstan never runs native programs; port them as tool components (see docs/plugins.md)",
    ));
    refused.extend(refuse_folder(
        root,
        "agents",
        "sub-agent definitions",
        "not installed — capstan does not support sub-agents defined by plugins yet",
    ));
    let known = [
        ".claude-plugin",
        "skills",
        "commands",
        "agents",
        "hooks",
        ".mcp.json",
        "bin",
    ];
    for entry in sorted_entries(root) {
        let name = file_name(&entry);
        let lower = name.to_ascii_lowercase();
        if known.contains(&name.as_str())
            || lower.starts_with("readme")
            || lower.starts_with("license")
            || lower.starts_with("changelog")
            || name == ".git"
        {
            continue;
        }
        let shown = if entry.is_dir() {
            format!("{name}/")
        } else {
            name
        };
        refused.push(format!(
            "{shown}: not imported — only skills/ and commands/ are; programs it holds cannot run in capstan"
        ));
    }
    for key in ["lspServers", "outputStyles"] {
        if manifest.get(key).is_some() {
            refused.push(format!(
                "{CLAUDE_MANIFEST}: `{key}` is not supported by capstan; not installed"
            ));
        }
    }

    if skills.is_empty() {
        let mut message = format!(
            "{} is a Claude Code plugin with nothing capstan can install: it has no skills/ or commands/",
            root.display()
        );
        for line in &refused {
            message.push_str("\n  ");
            message.push_str(line);
        }
        return Err(message);
    }
    if root.join(CLAUDE_MANIFEST).is_file() {
        copy_file(
            &root.join(CLAUDE_MANIFEST),
            &out.join(CLAUDE_MANIFEST),
            CLAUDE_MANIFEST,
            &mut refused,
        )?;
    }
    let mut toml = String::from("# Generated by capstan from a Claude Code plugin; see ");
    toml.push_str(IMPORT_NOTES);
    toml.push('\n');
    toml.push_str(&format!("name = {}\n", toml_string(&name)));
    toml.push_str(&format!("version = {}\n", toml_string(&version)));
    toml.push_str(&format!("description = {}\n", toml_string(&description)));
    if let Some(author) = author {
        toml.push_str(&format!("authors = [{}]\n", toml_string(&author)));
    }
    toml.push_str("components = []\n");
    if !mcp_servers.is_empty() {
        toml.push_str(&format!(
            "\n[package]\ninclude = [{}]\n",
            toml_string(MCP_SERVERS)
        ));
    }
    write(&out.join(MANIFEST_FILE), &toml)?;
    let mut notes = format!(
        "# Imported from a Claude Code plugin\n\nSource: {}\n\nSkills imported: {}\n",
        root.display(),
        skills.join(", ")
    );
    if !refused.is_empty() {
        notes.push_str("\nNot installed:\n\n");
        for line in &refused {
            notes.push_str(&format!("- {line}\n"));
        }
    }
    if !mcp_servers.is_empty() {
        notes.push_str("\nMCP servers, run by capstan's MCP client inside its sandbox:\n\n");
        for line in &mcp_servers {
            notes.push_str(&format!("- {line}\n"));
        }
    }
    write(&out.join(IMPORT_NOTES), &notes)?;
    Ok(Imported {
        dir,
        skills,
        refused,
        mcp_servers,
    })
}

/// The text of the package file `path` (inside `root`), read beneath the
/// package's root ([`UntrustedFolder`]: no symbolic link leading out, no
/// FIFO or device, at most [`MAX_FILE`] bytes); `None` when there is none.
fn read_text(root: &Path, path: &Path) -> Result<Option<String>, String> {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let Some(folder) = UntrustedFolder::open(root).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let cap = usize::try_from(MAX_FILE).unwrap_or(usize::MAX);
    match folder.read(rel, cap).map_err(|e| e.to_string())? {
        Some(read) if read.more => Err(format!(
            "{} is larger than {} MiB",
            path.display(),
            MAX_FILE >> 20
        )),
        Some(read) => Ok(Some(read.text())),
        None => Ok(None),
    }
}

fn read_manifest(root: &Path) -> Result<Value, String> {
    let path = root.join(CLAUDE_MANIFEST);
    let text = match read_text(root, &path)? {
        Some(text) => text,
        None => return Ok(Value::Null),
    };
    let value: Value = serde_json::from_str(&text).map_err(|e| {
        format!(
            "invalid {}: line {}, column {}: {e}; fix the JSON",
            path.display(),
            e.line(),
            e.column()
        )
    })?;
    if !value.is_object() {
        return Err(format!(
            "invalid {}: it must be a JSON object",
            path.display()
        ));
    }
    Ok(value)
}

/// Command hooks in `hooks/hooks.json` and in the manifest's `hooks`.
fn refuse_hooks(root: &Path, manifest: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    let mut sources: Vec<(String, Value)> = Vec::new();
    let file = root.join("hooks/hooks.json");
    if file.is_file() {
        match read_text(root, &file)
            .ok()
            .flatten()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        {
            Some(v) => sources.push(("hooks/hooks.json".to_string(), v)),
            None => lines.push(
                "hooks/hooks.json: unreadable or not JSON; no hooks installed — capstan runs hooks as sandboxed components; see docs/hooks.md".to_string(),
            ),
        }
    }
    match manifest.get("hooks") {
        Some(Value::Object(_)) => {
            sources.push((format!("{CLAUDE_MANIFEST} `hooks`"), manifest["hooks"].clone()));
        }
        Some(Value::String(path)) => lines.push(format!(
            "{CLAUDE_MANIFEST} `hooks` ({path}): not installed — capstan runs hooks as sandboxed components; see docs/hooks.md"
        )),
        _ => {}
    }
    for (label, value) in sources {
        let events = value.get("hooks").unwrap_or(&value);
        let mut commands = Vec::new();
        if let Some(events) = events.as_object() {
            for (event, groups) in events {
                for group in groups.as_array().into_iter().flatten() {
                    let matcher = group.get("matcher").and_then(Value::as_str).unwrap_or("");
                    for hook in group
                        .get("hooks")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let what = hook
                            .get("command")
                            .or_else(|| hook.get("prompt"))
                            .and_then(Value::as_str)
                            .unwrap_or("?");
                        let kind = hook
                            .get("type")
                            .and_then(Value::as_str)
                            .unwrap_or("command");
                        let on = if matcher.is_empty() {
                            event.clone()
                        } else {
                            format!("{event} {matcher}")
                        };
                        let shown = if kind == "command" {
                            format!("{on}: {what}")
                        } else {
                            format!("{on}: {kind} {what}")
                        };
                        commands.push((kind.to_string(), shown));
                    }
                }
            }
        }
        if commands.is_empty() {
            continue;
        }
        let mut kinds: Vec<(String, usize)> = Vec::new();
        for (kind, _) in &commands {
            match kinds.iter_mut().find(|(k, _)| k == kind) {
                Some((_, n)) => *n += 1,
                None => kinds.push((kind.clone(), 1)),
            }
        }
        let counts: Vec<String> = kinds
            .iter()
            .map(|(kind, n)| format!("{n} {kind} hook{}", if *n == 1 { "" } else { "s" }))
            .collect();
        let shown: Vec<&str> = commands.iter().map(|(_, s)| s.as_str()).collect();
        lines.push(format!(
            "{label}: {} ({}) not installed — capstan runs hooks as sandboxed components with typed decisions, never shell commands; see docs/hooks.md",
            counts.join(" and "),
            shown.join("; ")
        ));
    }
    lines
}

/// The MCP servers of `.mcp.json` and of the manifest's `mcpServers`,
/// written to the package's [`MCP_SERVERS`] for capstan's MCP client; one line
/// per server saying what it reaches. Servers that cannot be imported are
/// added to `refused`.
fn import_mcp(
    root: &Path,
    manifest: &Value,
    out: &Path,
    refused: &mut Vec<String>,
) -> Result<Vec<String>, String> {
    let mut servers = serde_json::Map::new();
    let file = root.join(".mcp.json");
    if file.is_file() {
        match read_text(root, &file)
            .ok()
            .flatten()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        {
            Some(v) => {
                let found = v.get("mcpServers").unwrap_or(&v);
                if let Some(found) = found.as_object() {
                    servers.extend(found.clone());
                }
            }
            None => refused
                .push(".mcp.json: unreadable or not JSON; no MCP servers installed".to_string()),
        }
    }
    match manifest.get("mcpServers") {
        Some(Value::Object(found)) => servers.extend(found.clone()),
        Some(Value::String(path)) => refused.push(format!(
            "{CLAUDE_MANIFEST} `mcpServers` ({path}): a file of servers is not read; put them in .mcp.json"
        )),
        _ => {}
    }
    let mut lines = Vec::new();
    let mut kept = serde_json::Map::new();
    for (name, server) in servers {
        let text = server.to_string();
        if text.contains("CLAUDE_PLUGIN_ROOT") {
            refused.push(format!(
                "MCP server {name}: it runs a program of the plugin's own (${{CLAUDE_PLUGIN_ROOT}}), and capstan never installs a plugin's programs; not installed"
            ));
            continue;
        }
        let reach = match (
            server.get("command").and_then(Value::as_str),
            server.get("url").and_then(Value::as_str),
        ) {
            (Some(command), None) => {
                let args: Vec<&str> = server
                    .get("args")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut line = format!(
                    "{name}: runs `{command}{}{}` in the OS sandbox: the workspace read-only, no network, no secrets",
                    if args.is_empty() { "" } else { " " },
                    args.join(" ")
                );
                if let Some(env) = server.get("env").and_then(Value::as_object) {
                    let names: Vec<&str> = env.keys().map(String::as_str).collect();
                    if !names.is_empty() {
                        line.push_str(&format!("; variables {}", names.join(", ")));
                    }
                }
                line
            }
            (None, Some(url)) => {
                let mut line = format!("{name}: connects to {url} (that origin only)");
                if let Some(headers) = server.get("headers").and_then(Value::as_object) {
                    for (header, value) in headers {
                        if let Some(secret) = value.as_str().and_then(|v| v.split('$').nth(1)) {
                            let secret: String = secret
                                .trim_start_matches('{')
                                .chars()
                                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                                .collect();
                            line.push_str(&format!("; sends your secret {secret} as {header}"));
                        } else {
                            line.push_str(&format!("; sends the header {header}"));
                        }
                    }
                }
                line
            }
            _ => {
                refused.push(format!(
                    "MCP server {name}: it has neither `command` nor `url` (or both); not installed"
                ));
                continue;
            }
        };
        lines.push(reach);
        kept.insert(name, server);
    }
    if !kept.is_empty() {
        let text = serde_json::to_string_pretty(&serde_json::json!({ "mcpServers": kept }))
            .map_err(|e| format!("cannot write the MCP servers: {e}"))?;
        write(&out.join(MCP_SERVERS), &text)?;
    }
    Ok(lines)
}

/// A folder whose contents are refused as a whole, listed by file.
fn refuse_folder(root: &Path, folder: &str, what: &str, why: &str) -> Vec<String> {
    let entries = sorted_entries(&root.join(folder));
    if entries.is_empty() {
        return Vec::new();
    }
    let names: Vec<String> = entries.iter().map(|p| file_name(p)).collect();
    vec![format!("{folder}/: {what} {} {why}", names.join(", "))]
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    entries
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Copies a skill folder; symbolic links are skipped and listed.
fn copy_tree(from: &Path, to: &Path, rel: &str, refused: &mut Vec<String>) -> Result<(), String> {
    for entry in sorted_entries(from) {
        let name = file_name(&entry);
        let rel = format!("{rel}/{name}");
        let meta = std::fs::symlink_metadata(&entry)
            .map_err(|e| format!("cannot read {}: {e}", entry.display()))?;
        if meta.file_type().is_symlink() {
            refused.push(format!("{rel}: a symbolic link; not copied"));
        } else if meta.is_dir() {
            copy_tree(&entry, &to.join(&name), &rel, refused)?;
        } else if meta.is_file() {
            copy_file(&entry, &to.join(&name), &rel, refused)?;
            if rel.split('/').nth(2) == Some("scripts") {
                refused.push(format!(
                    "{rel}: kept as a file the model can read, but never run — capstan has no shell; port it as a tool component"
                ));
            }
        }
    }
    Ok(())
}

fn copy_file(from: &Path, to: &Path, rel: &str, refused: &mut Vec<String>) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(from)
        .map_err(|e| format!("cannot read {}: {e}", from.display()))?;
    if meta.file_type().is_symlink() {
        refused.push(format!("{rel}: a symbolic link; not copied"));
        return Ok(());
    }
    if !meta.is_file() {
        refused.push(format!("{rel}: not a regular file; not copied"));
        return Ok(());
    }
    if meta.len() > MAX_FILE {
        refused.push(format!(
            "{rel}: larger than {} MiB; not copied",
            MAX_FILE >> 20
        ));
        return Ok(());
    }
    let bytes = std::fs::read(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    std::fs::write(to, bytes).map_err(|e| format!("cannot write {}: {e}", to.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn imports_skills_and_commands_and_lists_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cc");
        let w = |rel: &str, text: &str| {
            let p = root.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        };
        w(
            CLAUDE_MANIFEST,
            r#"{"name":"cc-kit","version":"1.2.0","description":"Kit \"x\"","author":{"name":"Ada","email":"a@x.org"}}"#,
        );
        w(
            "skills/review/SKILL.md",
            "---\nname: review\ndescription: Reviews.\n---\nBody\n",
        );
        w("skills/review/reference.md", "ref");
        w(
            "commands/deploy.md",
            "---\ndescription: Deploys\n---\nDeploy $1\n",
        );
        w(
            "hooks/hooks.json",
            r#"{"hooks":{"PreToolUse":[{"matcher":"Write|Edit","hooks":[{"type":"command","command":"./scripts/check.sh"}]}],"Stop":[{"hooks":[{"type":"command","command":"notify"}]}]}}"#,
        );
        w(
            ".mcp.json",
            r#"{"mcpServers":{"github":{"command":"npx","args":["x"]}}}"#,
        );
        w("bin/tool", "#!/bin/sh\n");
        w("agents/helper.md", "---\nname: helper\n---\n");
        #[cfg(unix)]
        std::os::unix::fs::symlink("/etc/passwd", root.join("skills/review/passwd")).unwrap();
        let staging = dir.path().join("staging");
        let imported = import(&root, &staging).unwrap();
        assert_eq!(imported.skills, ["review", "deploy"]);
        let out = imported.root();
        assert!(out.join("skills/review/reference.md").is_file());
        assert!(out.join("commands/deploy.md").is_file());
        assert!(!out.join("bin").exists() && !out.join("hooks").exists());
        assert!(!out.join("skills/review/passwd").exists());
        let manifest = crate::plugin::manifest::Manifest::load(out).unwrap();
        assert_eq!(manifest.name, "cc-kit");
        assert_eq!(manifest.version, "1.2.0");
        assert!(manifest.components.is_empty());
        let all = imported.refused.join("\n");
        assert!(all.contains("hooks/hooks.json: 2 command hooks (PreToolUse Write|Edit: ./scripts/check.sh; Stop: notify)"), "{all}");
        assert!(!all.contains("github"), "{all}");
        assert_eq!(
            imported.mcp_servers,
            [
                "github: runs `npx x` in the OS sandbox: the workspace read-only, no network, no secrets"
            ]
        );
        let servers: Value =
            serde_json::from_str(&fs::read_to_string(out.join(MCP_SERVERS)).unwrap()).unwrap();
        assert_eq!(servers["mcpServers"]["github"]["command"], "npx");
        assert!(all.contains("bin/: executables tool"), "{all}");
        assert!(
            all.contains("agents/: sub-agent definitions helper.md"),
            "{all}"
        );
    }

    #[test]
    fn a_plugin_with_nothing_importable_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("only-hooks");
        fs::create_dir_all(root.join(".claude-plugin")).unwrap();
        fs::write(root.join(CLAUDE_MANIFEST), r#"{"name":"only-hooks"}"#).unwrap();
        fs::create_dir_all(root.join("bin")).unwrap();
        fs::write(root.join("bin/x"), "").unwrap();
        let err = import(&root, &dir.path().join("s")).unwrap_err();
        assert!(
            err.contains("nothing capstan can install") && err.contains("bin/"),
            "{err}"
        );
    }
}
