//! Claude Code plugin folders: `.claude-plugin/plugin.json`, `skills/`,
//! `commands/`, `agents/`, `hooks/hooks.json`, `.mcp.json`, `bin/`,
//! `scripts/` and whatever else the plugin ships.
//!
//! `capstan plugin install ./folder` installs the whole folder (hidden
//! files, build and dependency folders, virtual environments and what a
//! `.gitignore` ignores left out, as for any package) into a capstan
//! package with a generated `plugin.toml` and no components, which is then
//! hashed, locked and consented to like any plugin. Its skills
//! (`skills/NAME/SKILL.md`, or the folders `skills` in `plugin.json` or a
//! marketplace entry lists; skills one folder deeper are found too) and
//! its markdown commands (`commands/NAME.md`, `commands/SUB/NAME.md`
//! named `plugin:SUB:NAME` as in Claude Code, or those `commands` lists)
//! become capstan skills; a skill or command found elsewhere is placed at
//! `skills/NAME/` or `commands/NAME.md` in the package. Every other file is
//! kept so that `${CLAUDE_PLUGIN_ROOT}/...` in a skill's text names a file
//! the model can read (read-only); none is ever run by the import. The
//! consent text groups those files by folder and kind ("scripts/: 37 shell
//! scripts") rather than listing each.
//!
//! Output styles (`output-styles/NAME.md`, or the paths `outputStyles`
//! lists) can be chosen for a session
//! ([`crate::plugin::claude_output_styles`]). Sub-agents (`agents/NAME.md`)
//! are offered to the `task` tool, and
//! command hooks (`hooks/hooks.json`, or `hooks` in `plugin.json`) run in
//! the OS sandbox ([`crate::hooks::command`]): the consent text says what
//! each may reach. Its MCP servers (`.mcp.json`, the manifest's
//! `mcpServers`) are imported into the package's own `mcp-servers.json`,
//! which capstan's MCP client runs inside its sandbox (a local server in
//! the OS sandbox, a remote one under its origin's network grant); what
//! each reaches is shown at consent. Its LSP servers (`.lsp.json`,
//! `lspServers`) are imported into the package's `lsp-servers.json`
//! ([`crate::plugin::claude_lsp`]) and run in the OS sandbox by the `lsp`
//! tool. What capstan does not run from such a folder is listed with the
//! reason: MCP servers that run a program of the plugin's own.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::front_matter;
use crate::model::valid_tool_name;
use crate::plugin::claude_marketplace::{Entry, Marketplace};
use crate::plugin::manifest::{MANIFEST_FILE, MAX_DESCRIPTION, check_semver};
use crate::plugin::package;
use crate::untrusted_folder::UntrustedFolder;

/// The Claude Code manifest, relative to the plugin's root.
pub const CLAUDE_MANIFEST: &str = ".claude-plugin/plugin.json";

/// The file of an imported package that holds its MCP servers, in Claude
/// Code's `.mcp.json` format (a dot file would be left out of the package).
pub const MCP_SERVERS: &str = "mcp-servers.json";

/// How a Claude Code plugin names its own folder in its MCP servers'
/// commands, arguments and variables (also written `$CLAUDE_PLUGIN_ROOT`).
pub const PLUGIN_ROOT_VAR: &str = "CLAUDE_PLUGIN_ROOT";

/// The file of an imported package that records what was refused.
pub const IMPORT_NOTES: &str = "IMPORTED-FROM-CLAUDE-CODE.md";

/// The largest file copied from a Claude Code plugin.
const MAX_FILE: u64 = 8 << 20;

/// Whether `root` is a Claude Code plugin rather than a capstan one: it has
/// no `plugin.toml`, and has `.claude-plugin/plugin.json` or, without one,
/// a part in its default place, as Claude Code allows (the manifest is
/// optional there): `skills/`, `commands/`, `agents/`,
/// `hooks/hooks.json`, `.mcp.json` or `.lsp.json`.
pub fn is_claude_plugin(root: &Path) -> bool {
    !root.join(MANIFEST_FILE).exists()
        && (root.join(CLAUDE_MANIFEST).is_file()
            || root.join("skills").is_dir()
            || root.join("commands").is_dir()
            || root.join("agents").is_dir()
            || root
                .join(crate::plugin::command_hooks::HOOKS_FILE)
                .is_file()
            || root.join(".mcp.json").is_file()
            || root.join(".lsp.json").is_file())
}

/// A Claude Code plugin turned into a capstan package.
#[derive(Debug)]
pub struct Imported {
    /// The package's folder (inside `staging`), deleted when dropped.
    pub dir: tempfile::TempDir,
    /// The skills imported (commands included), by name.
    pub skills: Vec<String>,
    /// The skills and commands found, imported or not.
    pub items_found: usize,
    /// Skills and commands that were skipped, one line each with why.
    pub warnings: Vec<String>,
    /// The parts not installed (hooks, MCP and LSP servers, sub-agents,
    /// links), one line each, with the reason and the capstan
    /// alternative.
    pub refused: Vec<String>,
    /// The plugin's other files, grouped by folder and kind: kept for the
    /// model to read, never run.
    pub files: Vec<String>,
    /// The sub-agents imported: one line each, with the tools they get.
    pub agents: Vec<String>,
    /// The output styles imported: one line each, with what they change.
    pub output_styles: Vec<String>,
    /// The hooks imported: their kind (`command`, `prompt`, `http`) and
    /// one line each saying what they may reach.
    pub hooks: Vec<(&'static str, String)>,
    /// The MCP servers imported, one line each saying what it reaches.
    pub mcp_servers: Vec<String>,
    /// The LSP servers imported, one line each saying what it runs and
    /// reaches.
    pub lsp_servers: Vec<String>,
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
    import_defined(root, &manifest, staging)
}

/// Imports plugin `entry` of `market` into a new folder under `staging`:
/// its folder, with the entry's fields over its `plugin.json`.
pub fn import_from_marketplace(
    market: &Marketplace,
    entry: &Entry,
    staging: &Path,
) -> Result<Imported, String> {
    let root = market.folder_of(entry)?;
    import_entry_at(entry, &root, staging)
}

/// Imports plugin `entry` of a marketplace whose files were fetched into
/// `root` (a remote source), with the entry's fields over its
/// `plugin.json`.
pub fn import_entry_at(entry: &Entry, root: &Path, staging: &Path) -> Result<Imported, String> {
    let own = if entry.strict && root.join(CLAUDE_MANIFEST).is_file() {
        read_manifest(root)?
    } else {
        Value::Null
    };
    import_defined(root, &entry.merged_over(&own), staging)
}

/// A skill or command found in the plugin.
struct Found {
    /// Where it is in the plugin: a skill's folder or a command's file.
    from: String,
    /// Where it goes in the package.
    to: String,
    /// Its name, from its front matter.
    name: String,
}

/// Imports the plugin whose files are in `root` and whose definition
/// (`plugin.json`, or a marketplace entry over it) is `manifest`.
fn import_defined(root: &Path, manifest: &Value, staging: &Path) -> Result<Imported, String> {
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

    let (files, passed_by) = package::whole_folder(root).map_err(|e| e.to_string())?;
    let mut warnings = Vec::new();
    let mut excluded: BTreeSet<String> = BTreeSet::new();
    let skills = find_skills(root, manifest, &mut warnings, &mut excluded);
    let commands = find_commands(root, manifest, &files, &mut warnings, &mut excluded);
    let items_found = skills.len() + commands.len() + warnings.len();
    let mut placed: Vec<Found> = Vec::new();
    for found in skills.into_iter().chain(commands) {
        if let Some(other) = placed.iter().find(|p| p.to == found.to) {
            warnings.push(format!(
                "{}: would be {} in the package, which {} already is; skipped",
                found.from, found.to, other.from
            ));
            excluded.insert(found.from);
            continue;
        }
        placed.push(found);
    }
    let agents = import_agents(root, &mut warnings);
    let output_styles = crate::plugin::claude_output_styles::find(root, manifest, &mut warnings);
    let (hooks, inline_hooks) = import_hooks(root, manifest, &mut refused);
    let has_mcp_servers = !import_mcp(root, manifest, None, &mut Vec::new())?.is_empty();
    let mut lsp_problems = Vec::new();
    let has_lsp_servers =
        !crate::plugin::claude_lsp::import(root, manifest, None, &mut lsp_problems)?.is_empty();
    if placed.is_empty()
        && agents.is_empty()
        && output_styles.is_empty()
        && hooks.is_empty()
        && !has_mcp_servers
        && !has_lsp_servers
    {
        let mut message = format!(
            "{} is a Claude Code plugin with nothing capstan can install: it has no skills (skills/NAME/SKILL.md), commands (commands/NAME.md), sub-agents (agents/NAME.md), output styles (output-styles/NAME.md), command hooks, MCP or LSP servers it can run",
            root.display()
        );
        for line in warnings.iter().chain(&refused).chain(&lsp_problems) {
            message.push_str("\n  ");
            message.push_str(line);
        }
        return Err(message);
    }

    std::fs::create_dir_all(staging)
        .map_err(|e| format!("cannot create {}: {e}", staging.display()))?;
    let dir = tempfile::Builder::new()
        .prefix("claude-import-")
        .tempdir_in(staging)
        .map_err(|e| format!("cannot create a folder in {}: {e}", staging.display()))?;
    let out = dir.path();
    // Every file in place, but the skills and commands skipped or placed
    // elsewhere; then those placed elsewhere.
    let moved: Vec<&Found> = placed.iter().filter(|f| f.from != f.to).collect();
    let left_out = |rel: &str| {
        rel == MANIFEST_FILE
            || rel == IMPORT_NOTES
            || excluded
                .iter()
                .chain(moved.iter().map(|f| &f.from))
                .any(|x| under(rel, x))
    };
    let mut kept: Vec<String> = Vec::new();
    for rel in files.iter().filter(|rel| !left_out(rel)) {
        copy_file(&root.join(rel), &out.join(rel), rel, &mut refused)?;
        kept.push(rel.clone());
    }
    for found in &moved {
        for rel in files.iter().filter(|rel| under(rel, &found.from)) {
            let inside = rel[found.from.len()..].trim_start_matches('/');
            let to = if inside.is_empty() {
                found.to.clone()
            } else {
                format!("{}/{inside}", found.to)
            };
            copy_file(&root.join(rel), &out.join(&to), rel, &mut refused)?;
            kept.push(to);
        }
    }
    for rel in passed_by {
        refused.push(format!(
            "{rel}: a symbolic link or special file; not copied"
        ));
    }
    crate::plugin::claude_output_styles::place(root, out, &output_styles)?;
    // The manifest is not packaged (a hidden folder): its hooks are kept in
    // a file of their own.
    if let Some(hooks) = inline_hooks {
        let path = out.join(crate::plugin::command_hooks::MANIFEST_HOOKS_FILE);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        write(&path, &hooks.to_string())?;
    }
    let mcp_servers = import_mcp(root, manifest, Some(out), &mut refused)?;
    let own_servers = mcp_servers.iter().any(|l| l.contains(PLUGIN_ROOT_VAR));
    let runners = match (!hooks.is_empty(), own_servers) {
        (false, false) => "",
        (true, false) => "command hooks",
        (false, true) => "MCP servers",
        (true, true) => "command hooks and MCP servers",
    };
    let grouped = group_files(&kept, runners);
    let lsp_servers = crate::plugin::claude_lsp::import(root, manifest, Some(out), &mut refused)?;

    let names: Vec<String> = placed.iter().map(|f| f.name.clone()).collect();
    let mut toml = String::from("# Generated by capstan from a Claude Code plugin; see ");
    toml.push_str(IMPORT_NOTES);
    toml.push('\n');
    toml.push_str(&format!("name = {}\n", toml_string(&name)));
    toml.push_str(&format!("version = {}\n", toml_string(&version)));
    toml.push_str(&format!("description = {}\n", toml_string(&description)));
    if let Some(author) = author {
        toml.push_str(&format!("authors = [{}]\n", toml_string(&author)));
    }
    toml.push_str("components = []\n\n");
    toml.push_str("# The whole Claude Code plugin folder, for the model to read.\n");
    toml.push_str("[package]\ninclude = [\"**\"]\n");
    write(&out.join(MANIFEST_FILE), &toml)?;
    let mut notes = format!(
        "# Imported from a Claude Code plugin\n\nSource: {}\n\nSkills imported: {}\n",
        root.display(),
        names.join(", ")
    );
    if !grouped.is_empty() {
        notes.push_str("\nFiles kept for the model to read (read-only), never run:\n\n");
        for line in &grouped {
            notes.push_str(&format!("- {line}\n"));
        }
    }
    if !warnings.is_empty() || !refused.is_empty() {
        notes.push_str("\nNot installed:\n\n");
        for line in warnings.iter().chain(&refused) {
            notes.push_str(&format!("- {line}\n"));
        }
    }
    if !mcp_servers.is_empty() {
        notes.push_str("\nMCP servers, run by capstan's MCP client inside its sandbox:\n\n");
        for line in &mcp_servers {
            notes.push_str(&format!("- {line}\n"));
        }
    }
    if !lsp_servers.is_empty() {
        notes.push_str("\nLSP servers, run by capstan's `lsp` tool inside its sandbox:\n\n");
        for line in &lsp_servers {
            notes.push_str(&format!("- {line}\n"));
        }
    }
    write(&out.join(IMPORT_NOTES), &notes)?;
    Ok(Imported {
        dir,
        skills: names,
        items_found,
        warnings,
        refused,
        files: grouped,
        agents,
        output_styles: output_styles.into_iter().map(|s| s.line).collect(),
        hooks,
        mcp_servers,
        lsp_servers,
    })
}

/// Whether a skill's or command's text looks like it holds inline shell
/// commands (`` !`cmd` `` or a ```` ```! ```` block), which run when it
/// loads.
pub fn has_inline_commands(text: &str) -> bool {
    text.contains("!`") || text.contains("```!")
}

/// What in an imported package (its folder, staged or installed) runs or
/// acts on the user's behalf: one line per sub-agent, command hook and MCP
/// server, as the consent text words them, and one per skill file with
/// inline commands. An update that brings a line the installed version did
/// not have asks again.
pub fn runnable_parts(package: &Path) -> BTreeSet<String> {
    let mut parts = BTreeSet::new();
    let mut ignored = Vec::new();
    parts.extend(import_agents(package, &mut ignored));
    let manifest_hooks = read_text(
        package,
        &package.join(crate::plugin::command_hooks::MANIFEST_HOOKS_FILE),
    )
    .ok()
    .flatten()
    .and_then(|text| serde_json::from_str::<Value>(&text).ok());
    let manifest = match manifest_hooks {
        Some(hooks) => serde_json::json!({ "hooks": hooks }),
        None => serde_json::json!({}),
    };
    parts.extend(
        import_hooks(package, &manifest, &mut ignored)
            .0
            .into_iter()
            .map(|(kind, line)| format!("{kind} hook {line}")),
    );
    let servers = read_text(package, &package.join(MCP_SERVERS))
        .ok()
        .flatten()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .unwrap_or_else(|| serde_json::json!({}));
    if let Ok(lines) = import_mcp(package, &servers, None, &mut ignored) {
        parts.extend(lines.into_iter().map(|line| format!("MCP server {line}")));
    }
    let lsp_manifest = read_text(
        package,
        &package.join(crate::plugin::claude_lsp::LSP_SERVERS),
    )
    .ok()
    .flatten()
    .and_then(|text| serde_json::from_str::<Value>(&text).ok())
    .unwrap_or_else(|| serde_json::json!({}));
    if let Ok(lines) = crate::plugin::claude_lsp::import(package, &lsp_manifest, None, &mut ignored)
    {
        // The program's presence on PATH is not part of what runs.
        parts.extend(lines.into_iter().map(|line| {
            let line = line.split(" — ").next().unwrap_or_default().to_string();
            format!("LSP server {line}")
        }));
    }
    let files = package::whole_folder(package)
        .map(|(files, _)| files)
        .unwrap_or_default();
    for rel in files.iter().filter(|rel| {
        (rel.starts_with("skills/") || rel.starts_with("commands/")) && rel.ends_with(".md")
    }) {
        let inline = read_text(package, &package.join(rel))
            .ok()
            .flatten()
            .is_some_and(|text| has_inline_commands(&text));
        if inline {
            parts.insert(format!("inline commands in {rel}"));
        }
    }
    parts
}

/// Whether the package path `rel` is `prefix` or lies beneath it.
fn under(rel: &str, prefix: &str) -> bool {
    rel == prefix
        || rel
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The paths a manifest field (`skills`, `commands`) lists: a string or a
/// list of strings, each relative to the plugin's root (`./x`); a path
/// leading out of the plugin is reported and left out.
pub(super) fn listed_paths(
    manifest: &Value,
    key: &str,
    warnings: &mut Vec<String>,
) -> Option<Vec<String>> {
    let listed: Vec<&str> = match manifest.get(key)? {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
        _ => {
            warnings.push(format!(
                "`{key}` is neither a path nor a list of paths; ignored"
            ));
            return None;
        }
    };
    let mut paths = Vec::new();
    for path in listed {
        let path = path
            .strip_prefix("${CLAUDE_PLUGIN_ROOT}")
            .unwrap_or(path)
            .trim_start_matches('/');
        let clean: Vec<&str> = path
            .split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .collect();
        if clean.contains(&"..") {
            warnings.push(format!(
                "`{key}` path `{path}` leads out of the plugin's folder; ignored"
            ));
            continue;
        }
        paths.push(clean.join("/"));
    }
    Some(paths)
}

/// The skill folders (relative) under `dir` (relative): itself if it holds
/// a `SKILL.md`, else each sub-folder that does, else each folder one
/// level deeper that does.
fn skill_folders_in(root: &Path, dir: &str) -> Vec<String> {
    let has_skill = |rel: &str| {
        let path = root.join(rel);
        !path.is_symlink() && path.is_dir() && root.join(rel).join("SKILL.md").is_file()
    };
    if has_skill(dir) {
        return vec![dir.to_string()];
    }
    let join = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_string()
        } else {
            format!("{a}/{b}")
        }
    };
    let mut found = Vec::new();
    for child in sorted_entries(&root.join(dir)) {
        if child.is_symlink() || !child.is_dir() {
            continue;
        }
        let rel = join(dir, &file_name(&child));
        if has_skill(&rel) {
            found.push(rel);
            continue;
        }
        for grandchild in sorted_entries(&child) {
            let nested = join(&rel, &file_name(&grandchild));
            if has_skill(&nested) {
                found.push(nested);
            }
        }
    }
    found
}

/// The plugin's skills: the folders `skills` lists (plus the default
/// `skills/` folder unless the list names folders inside it), each with
/// its front matter checked. Skill folders left out go to `excluded`.
fn find_skills(
    root: &Path,
    manifest: &Value,
    warnings: &mut Vec<String>,
    excluded: &mut BTreeSet<String>,
) -> Vec<Found> {
    let default = skill_folders_in(root, "skills");
    let mut folders: Vec<String> = Vec::new();
    match listed_paths(manifest, "skills", warnings) {
        Some(listed) => {
            let inside_default = listed.iter().any(|p| under(p, "skills"));
            for path in &listed {
                let found = skill_folders_in(root, path);
                if found.is_empty() {
                    warnings.push(format!("skills path `{path}`: no SKILL.md there; skipped"));
                }
                folders.extend(found);
            }
            if !inside_default {
                folders.extend(default.iter().cloned());
            }
            // The skills of the default folder the list leaves out are
            // another plugin's (a marketplace whose plugins share a folder).
            for other in &default {
                if !folders.contains(other) {
                    excluded.insert(other.clone());
                }
            }
        }
        None => folders = default,
    }
    let mut seen = BTreeSet::new();
    let mut skills = Vec::new();
    for folder in folders {
        if !seen.insert(folder.clone()) {
            continue;
        }
        if folder.is_empty() {
            warnings.push(
                "SKILL.md at the plugin's root: a skill needs a folder of its own (skills/NAME/SKILL.md); skipped"
                    .to_string(),
            );
            continue;
        }
        let leaf = folder.rsplit('/').next().unwrap_or(&folder).to_string();
        let text = match read_text(root, &root.join(&folder).join("SKILL.md")) {
            Ok(Some(text)) => text,
            Ok(None) | Err(_) => {
                warnings.push(format!(
                    "{folder}/: no readable SKILL.md; not a skill, skipped"
                ));
                excluded.insert(folder);
                continue;
            }
        };
        match front_matter::parse(&text, &leaf) {
            Ok(parsed) => skills.push(Found {
                to: format!("skills/{leaf}"),
                from: folder,
                name: parsed.meta.name,
            }),
            Err(e) => {
                warnings.push(format!(
                    "{folder}/SKILL.md:{}: {}; skipped",
                    e.line, e.message
                ));
                excluded.insert(folder);
            }
        }
    }
    skills
}

/// The plugin's commands: the markdown files `commands` lists (files, or
/// folders of them), plus `commands/*.md` unless the list names paths
/// inside it. Commands left out go to `excluded`.
fn find_commands(
    root: &Path,
    manifest: &Value,
    files: &[String],
    warnings: &mut Vec<String>,
    excluded: &mut BTreeSet<String>,
) -> Vec<Found> {
    let markdown_in = |dir: &str| -> Vec<String> {
        files
            .iter()
            .filter(|rel| {
                rel.ends_with(".md")
                    && rel
                        .strip_prefix(dir)
                        .and_then(|rest| rest.strip_prefix('/'))
                        .is_some_and(|name| !name.contains('/'))
            })
            .cloned()
            .collect()
    };
    let mut paths = Vec::new();
    let listed = listed_paths(manifest, "commands", warnings);
    let use_default = listed
        .as_ref()
        .is_none_or(|l| !l.iter().any(|p| under(p, "commands")));
    for path in listed.unwrap_or_default() {
        if files.contains(&path) && path.ends_with(".md") {
            paths.push(path);
        } else {
            let found = markdown_in(&path);
            if found.is_empty() {
                warnings.push(format!(
                    "commands path `{path}`: no command file there; skipped"
                ));
            }
            paths.extend(found);
        }
    }
    if use_default {
        // `commands/NAME.md`, and in sub-folders `commands/SUB/NAME.md`,
        // which Claude Code names `plugin:SUB:NAME` (kept where they are).
        for rel in files.iter().filter(|rel| rel.starts_with("commands/")) {
            match package::skill_file_in_plugin(rel) {
                Some(_) => paths.push(rel.clone()),
                None if rel.ends_with(".md") => warnings.push(format!(
                    "{rel}: more than {} folders deep in commands/; skipped",
                    package::MAX_COMMAND_SUBFOLDERS
                )),
                None => {}
            }
        }
    }
    let mut seen = BTreeSet::new();
    let mut commands = Vec::new();
    for rel in paths {
        if !seen.insert(rel.clone()) {
            continue;
        }
        let file = rel.rsplit('/').next().unwrap_or(&rel).to_string();
        let stem = file.strip_suffix(".md").unwrap_or(&file).to_string();
        let text = read_text(root, &root.join(&rel)).ok().flatten();
        let parsed = match text {
            Some(text) => {
                front_matter::parse(&text, &stem).map_err(|e| format!("{}: {}", e.line, e.message))
            }
            None => Err("0: not readable".to_string()),
        };
        // A listed command is placed at `commands/NAME.md`; one of the
        // default folder stays where it is, sub-folders included.
        let to = if rel.starts_with("commands/") {
            rel.clone()
        } else {
            format!("commands/{file}")
        };
        match parsed {
            Ok(parsed) => commands.push(Found {
                to,
                from: rel,
                name: parsed.meta.name,
            }),
            Err(e) => {
                warnings.push(format!("{rel}:{e}; skipped"));
                excluded.insert(rel);
            }
        }
    }
    commands
}

/// What kind of program a file is, by where it is and how it is named, for
/// the consent text; `None` for files that are not programs.
fn program_kind(rel: &str) -> Option<&'static str> {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match extension.as_deref() {
        Some("sh" | "bash" | "zsh" | "fish") => Some("shell script"),
        Some("py") => Some("Python script"),
        Some("js" | "mjs" | "cjs") => Some("JavaScript file"),
        Some("ts" | "mts" | "cts") => Some("TypeScript file"),
        Some("rb") => Some("Ruby script"),
        Some("pl") => Some("Perl script"),
        Some("ps1") => Some("PowerShell script"),
        Some("go") => Some("Go file"),
        Some("rs") => Some("Rust file"),
        Some("exe" | "dll" | "so" | "dylib") => Some("native binary"),
        Some("wasm") => Some("WebAssembly module"),
        None if rel.starts_with("bin/") => Some("executable"),
        _ if rel.starts_with("bin/") => Some("executable"),
        _ => None,
    }
}

/// The kept files, grouped by folder and kind: each folder holding
/// programs as one line (`scripts/: 37 shell scripts, 2 Python scripts`),
/// then one line counting every file.
fn group_files(kept: &[String], runners: &str) -> Vec<String> {
    let mut folders: BTreeMap<String, BTreeMap<&'static str, usize>> = BTreeMap::new();
    for rel in kept {
        if let Some(kind) = program_kind(rel) {
            let folder = match rel.rsplit_once('/') {
                Some((folder, _)) => format!("{folder}/"),
                None => "./".to_string(),
            };
            *folders.entry(folder).or_default().entry(kind).or_default() += 1;
        }
    }
    let mut lines: Vec<String> = folders
        .iter()
        .map(|(folder, kinds)| {
            let mut kinds: Vec<(&&str, &usize)> = kinds.iter().collect();
            kinds.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let counts: Vec<String> = kinds
                .iter()
                .map(|(kind, n)| format!("{n} {kind}{}", if **n == 1 { "" } else { "s" }))
                .collect();
            format!("{folder}: {}", counts.join(", "))
        })
        .collect();
    if !kept.is_empty() {
        let programs: usize = folders.values().flat_map(|k| k.values()).sum();
        lines.push(format!(
            "{} file{} in all ({} of them programs): the model may read them, {}",
            kept.len(),
            if kept.len() == 1 { "" } else { "s" },
            programs,
            if runners.is_empty() {
                "nothing runs them".to_string()
            } else {
                format!("only the {runners} above run any, in the OS sandbox")
            }
        ));
    }
    lines
}

/// The text of the package file `path` (inside `root`), read beneath the
/// package's root ([`UntrustedFolder`]: no symbolic link leading out, no
/// FIFO or device, at most [`MAX_FILE`] bytes); `None` when there is none.
pub(super) fn read_text(root: &Path, path: &Path) -> Result<Option<String>, String> {
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

/// The sub-agents of `agents/*.md` (the folder is packaged with the rest):
/// one line each for the consent text; one that does not parse is
/// skipped with a warning.
fn import_agents(root: &Path, warnings: &mut Vec<String>) -> Vec<String> {
    let mut lines = Vec::new();
    for file in sorted_entries(&root.join("agents")) {
        let name = file_name(&file);
        let rel = format!("agents/{name}");
        let Some(stem) = name.strip_suffix(".md") else {
            continue;
        };
        if file.is_dir() || file.is_symlink() {
            continue;
        }
        let text = read_text(root, &file).ok().flatten().unwrap_or_default();
        match front_matter::parse_agent(&text, stem) {
            Ok(agent) => lines.push(describe_agent(&rel, &agent)),
            Err(e) => warnings.push(format!(
                "{rel}:{}: {}; not offered as a sub-agent",
                e.line, e.message
            )),
        }
    }
    lines
}

/// A sub-agent in plain words for the consent text: its tools, and what
/// its calls' sandboxes may reach.
fn describe_agent(rel: &str, agent: &front_matter::AgentFile) -> String {
    let base = |tool: &str| tool.split('(').next().unwrap_or(tool).trim().to_string();
    let taken: Vec<String> = agent.disallowed_tools.iter().map(|t| base(t)).collect();
    let without = if taken.is_empty() {
        String::new()
    } else {
        format!(" (without {})", agent.disallowed_tools.join(", "))
    };
    let Some(tools) = &agent.tools else {
        return format!(
            "{rel}: sub-agent `{}`: lists no tools, so it gets the session's{without} (never more than yours)",
            agent.name
        );
    };
    let kept: Vec<String> = tools
        .iter()
        .filter(|t| !taken.contains(&base(t)))
        .cloned()
        .collect();
    let writes = kept.iter().any(|t| {
        matches!(
            base(t).as_str(),
            "Write" | "Edit" | "MultiEdit" | "NotebookEdit"
        )
    });
    let net = kept
        .iter()
        .any(|t| matches!(base(t).as_str(), "WebFetch" | "WebSearch"));
    format!(
        "{rel}: sub-agent `{}`: tools {}; {}; {}",
        agent.name,
        if kept.is_empty() {
            "none".to_string()
        } else {
            kept.join(", ")
        },
        if writes {
            "may write the workspace when your permission mode lets it"
        } else {
            "the workspace is read-only for it, commands included"
        },
        if net {
            "may reach the network it is granted"
        } else {
            "no network"
        }
    )
}

/// Command hooks in `hooks/hooks.json` and in the manifest's `hooks`, each
/// described for the consent text (the folders the commands run from are
/// packaged with the rest); and the manifest's hooks, which are kept in a
/// file of their own.
fn import_hooks(
    root: &Path,
    manifest: &Value,
    refused: &mut Vec<String>,
) -> (Vec<(&'static str, String)>, Option<Value>) {
    let mut sources: Vec<(String, Value)> = Vec::new();
    let file = root.join(crate::plugin::command_hooks::HOOKS_FILE);
    if file.is_file() {
        match read_text(root, &file)
            .ok()
            .flatten()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        {
            Some(v) => sources.push(("hooks/hooks.json".to_string(), v)),
            None => refused
                .push("hooks/hooks.json: unreadable or not JSON; no hooks installed".to_string()),
        }
    }
    let mut inline = None;
    match manifest.get("hooks") {
        Some(hooks @ Value::Object(_)) => {
            sources.push((format!("{CLAUDE_MANIFEST} `hooks`"), hooks.clone()));
            inline = Some(hooks.clone());
        }
        Some(Value::String(path)) => refused.push(format!(
            "{CLAUDE_MANIFEST} `hooks` ({path}): hooks in another file are not installed; move them to hooks/hooks.json"
        )),
        _ => {}
    }
    let mut lines = Vec::new();
    for (label, value) in &sources {
        let (specs, problems) = crate::hooks::command::parse_hooks(value);
        refused.extend(problems.into_iter().map(|p| format!("{label}: {p}")));
        lines.extend(
            specs
                .iter()
                .map(|spec| (spec.kind(), format!("{label}: {}", spec.describe()))),
        );
    }
    (lines, inline)
}

/// The MCP servers of `.mcp.json` and of the manifest's `mcpServers`,
/// written to the package's [`MCP_SERVERS`] in `out` (when given) for
/// capstan's MCP client; one line per server saying what it reaches.
/// Servers that cannot be imported are added to `refused`.
fn import_mcp(
    root: &Path,
    manifest: &Value,
    out: Option<&Path>,
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
        let own = text.contains(PLUGIN_ROOT_VAR);
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
                    "{name}: runs `{command}{}{}` in the OS sandbox: the workspace{} read-only, no network, no secrets",
                    if args.is_empty() { "" } else { " " },
                    args.join(" "),
                    if own {
                        " and the plugin's folder (its files checked against the lock before each start)"
                    } else {
                        ""
                    }
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
    if let Some(out) = out
        && !kept.is_empty()
    {
        let text = serde_json::to_string_pretty(&serde_json::json!({ "mcpServers": kept }))
            .map_err(|e| format!("cannot write the MCP servers: {e}"))?;
        write(&out.join(MCP_SERVERS), &text)?;
    }
    Ok(lines)
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
    std::fs::write(to, bytes).map_err(|e| format!("cannot write {}: {e}", to.display()))?;
    crate::plugin::store::keep_executable(from, to)
        .map_err(|e| format!("cannot set the mode of {}: {e}", to.display()))
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

    fn writer(root: &Path) -> impl Fn(&str, &str) + '_ {
        move |rel: &str, text: &str| {
            let p = root.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
    }

    #[test]
    fn imports_the_whole_folder_and_lists_what_does_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cc");
        let w = writer(&root);
        w(
            CLAUDE_MANIFEST,
            r#"{"name":"cc-kit","version":"1.2.0","description":"Kit \"x\"","author":{"name":"Ada","email":"a@x.org"}}"#,
        );
        w(
            "skills/review/SKILL.md",
            "---\nname: review\ndescription: Reviews.\n---\nBody\n",
        );
        w("skills/review/reference.md", "ref");
        w("skills/review/scripts/a.py", "print(1)");
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
        for n in 0..37 {
            w(&format!("scripts/s{n}.sh"), "#!/bin/sh\n");
        }
        w("scripts/x.py", "");
        w("scripts/node_modules/dep/index.js", "");
        w("scripts/__pycache__/x.pyc", "");
        w(
            "agents/helper.md",
            "---\nname: helper\ndescription: Helps.\ntools: Read, Grep\n---\nYou help.\n",
        );
        w("agents/nameless.md", "no front matter, no description\n");
        w(
            "agents/looker.md",
            "---\nname: looker\ndescription: Looks.\ntools: Read, Edit, Bash\ndisallowedTools: Edit\n---\nYou look.\n",
        );
        #[cfg(unix)]
        std::os::unix::fs::symlink("/etc/passwd", root.join("skills/review/passwd")).unwrap();
        let staging = dir.path().join("staging");
        let imported = import(&root, &staging).unwrap();
        assert_eq!(imported.skills, ["review", "deploy"]);
        assert_eq!(imported.items_found, 2);
        assert_eq!(imported.warnings.len(), 1, "{:?}", imported.warnings);
        assert!(
            imported.warnings[0].starts_with("agents/nameless.md:"),
            "{:?}",
            imported.warnings
        );
        assert_eq!(imported.agents.len(), 2);
        assert!(
            imported.agents[0].contains("sub-agent `helper`: tools Read, Grep; the workspace is read-only for it, commands included; no network"),
            "{:?}",
            imported.agents
        );
        assert!(
            imported.agents[1].contains(
                "sub-agent `looker`: tools Read, Bash; the workspace is read-only for it"
            ),
            "{:?}",
            imported.agents
        );
        assert_eq!(imported.hooks.len(), 2);
        assert!(
            imported.hooks[0].0 == "command"
                && imported.hooks[0]
                    .1
                    .starts_with("hooks/hooks.json: PreToolUse for Write, Edit:")
                && imported.hooks[0]
                    .1
                    .contains("runs `./scripts/check.sh` in the OS sandbox")
                && imported.hooks[0].1.contains("no network"),
            "{:?}",
            imported.hooks
        );
        let out = imported.root();
        assert!(out.join("skills/review/reference.md").is_file());
        assert!(out.join("commands/deploy.md").is_file());
        assert!(out.join("bin/tool").is_file() && out.join("hooks/hooks.json").is_file());
        assert!(out.join("scripts/s36.sh").is_file());
        assert!(!out.join("scripts/node_modules").exists());
        assert!(!out.join("scripts/__pycache__").exists());
        assert!(!out.join("skills/review/passwd").exists());
        let manifest = crate::plugin::manifest::Manifest::load(out).unwrap();
        assert_eq!(manifest.name, "cc-kit");
        assert_eq!(manifest.version, "1.2.0");
        assert!(manifest.components.is_empty());
        let selected = package::select(out, &manifest).unwrap();
        assert!(
            selected.contains(&"scripts/s0.sh".to_string()),
            "{selected:?}"
        );
        assert!(selected.contains(&IMPORT_NOTES.to_string()));
        let files = imported.files.join("\n");
        assert!(
            files.contains("scripts/: 37 shell scripts, 1 Python script"),
            "{files}"
        );
        assert!(files.contains("bin/: 1 executable"), "{files}");
        assert!(
            files.contains("skills/review/scripts/: 1 Python script"),
            "{files}"
        );
        assert!(!files.contains("s12.sh"), "{files}");
        let all = imported.refused.join("\n");
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
        assert!(
            all.contains("skills/review/passwd: a symbolic link"),
            "{all}"
        );
        assert!(!all.contains("hooks.json"), "{all}");
        assert!(!all.contains("agents/"), "{all}");
    }

    #[test]
    fn a_folder_without_a_manifest_is_a_plugin_by_its_parts() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("scouts");
        fs::create_dir_all(&root).unwrap();
        assert!(!is_claude_plugin(&root));
        for part in ["agents/scout.md", "hooks/hooks.json", ".mcp.json"] {
            let only = dir.path().join(part.replace(['/', '.'], "-"));
            fs::create_dir_all(only.join(part).parent().unwrap()).unwrap();
            fs::write(only.join(part), "{}").unwrap();
            assert!(is_claude_plugin(&only), "{part}");
            fs::write(only.join(MANIFEST_FILE), "").unwrap();
            assert!(!is_claude_plugin(&only), "{part} with a plugin.toml");
        }
        fs::create_dir_all(root.join("agents")).unwrap();
        fs::write(
            root.join("agents/scout.md"),
            "---\nname: scout\ndescription: Scouts.\ntools: Read\n---\nScout.\n",
        )
        .unwrap();
        let imported = import(&root, &dir.path().join("s")).unwrap();
        assert_eq!(imported.agents.len(), 1, "{:?}", imported.warnings);
    }

    #[test]
    fn a_plugin_of_mcp_servers_only_is_imported() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("tracker");
        fs::create_dir_all(root.join(".claude-plugin")).unwrap();
        fs::write(root.join(CLAUDE_MANIFEST), r#"{"name":"tracker"}"#).unwrap();
        fs::write(
            root.join(".mcp.json"),
            r#"{"mcpServers":{"issues":{"type":"http","url":"https://mcp.example.com/issues"}}}"#,
        )
        .unwrap();
        let imported = import(&root, &dir.path().join("s")).unwrap();
        assert!(imported.skills.is_empty());
        assert_eq!(
            imported.mcp_servers,
            ["issues: connects to https://mcp.example.com/issues (that origin only)"]
        );
        assert!(imported.root().join(MCP_SERVERS).is_file());
    }

    #[test]
    fn a_plugin_with_nothing_importable_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("only-hooks");
        fs::create_dir_all(root.join(".claude-plugin")).unwrap();
        fs::write(
            root.join(CLAUDE_MANIFEST),
            r#"{"name":"only-hooks","lspServers":{"gopls":{"command":"gopls"}}}"#,
        )
        .unwrap();
        fs::create_dir_all(root.join("bin")).unwrap();
        fs::write(root.join("bin/x"), "").unwrap();
        let err = import(&root, &dir.path().join("s")).unwrap_err();
        assert!(
            err.contains("nothing capstan can install")
                && err.contains("LSP server gopls: it has no `extensionToLanguage`"),
            "{err}"
        );
    }

    #[test]
    fn listed_nested_and_misnamed_items_are_placed_or_reported() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("kit");
        let w = writer(&root);
        w(
            CLAUDE_MANIFEST,
            r#"{"name":"kit","version":"soon","skills":["./extra/lint"],"commands":["./prompts/hello.md"],"lspServers":{"ra":{"command":"rust-analyzer"}}}"#,
        );
        w(
            "skills/group/deep/SKILL.md",
            "---\nname: deep\ndescription: D.\n---\nx",
        );
        w("skills/group/deep/ref.md", "r");
        w("skills/broken/SKILL.md", "---\nname: [\n---\n");
        w(
            "extra/lint/SKILL.md",
            "---\nname: lint\ndescription: L.\n---\nx",
        );
        w("prompts/hello.md", "Say hello");
        w("commands/sub/x.md", "x");
        w("commands/a/b/c/d/e/y.md", "y");
        let imported = import(&root, &dir.path().join("s")).unwrap();
        let out = imported.root();
        let mut names = imported.skills.clone();
        names.sort();
        assert_eq!(
            names,
            ["deep", "hello", "lint", "x"],
            "{:?}",
            imported.warnings
        );
        // A command in a sub-folder stays there: `kit:sub:x`.
        assert!(out.join("commands/sub/x.md").is_file());
        assert!(out.join("skills/lint/SKILL.md").is_file());
        assert!(!out.join("extra/lint").exists());
        assert!(out.join("skills/deep/ref.md").is_file());
        assert!(!out.join("skills/group/deep").exists());
        assert!(out.join("commands/hello.md").is_file());
        assert!(!out.join("skills/broken").exists());
        let warnings = imported.warnings.join("\n");
        assert!(warnings.contains("skills/broken/SKILL.md:"), "{warnings}");
        assert!(
            warnings.contains("commands/a/b/c/d/e/y.md: more than 4 folders deep"),
            "{warnings}"
        );
        assert_eq!(imported.items_found, 6);
        let refused = imported.refused.join("\n");
        assert!(
            refused.contains("version `soon` is not semver"),
            "{refused}"
        );
        assert!(
            refused.contains("`lspServers`: LSP server ra: it has no `extensionToLanguage`"),
            "{refused}"
        );
    }

    #[test]
    fn a_marketplace_entry_defines_the_plugin() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("market");
        let w = writer(&root);
        w(
            crate::plugin::claude_marketplace::MARKETPLACE_FILE,
            r#"{"name":"m","plugins":[{"name":"docs","source":"./","strict":false,"description":"Docs","skills":["./skills/pdf","./skills/xlsx"]}]}"#,
        );
        for skill in ["pdf", "xlsx", "art"] {
            w(
                &format!("skills/{skill}/SKILL.md"),
                &format!("---\nname: {skill}\ndescription: {skill}.\n---\nx"),
            );
        }
        let market = Marketplace::load(&root).unwrap();
        let imported =
            import_from_marketplace(&market, &market.plugins[0], &dir.path().join("s")).unwrap();
        assert_eq!(imported.skills, ["pdf", "xlsx"]);
        assert!(!imported.root().join("skills/art").exists());
        let manifest = crate::plugin::manifest::Manifest::load(imported.root()).unwrap();
        assert_eq!(manifest.name, "docs");
        assert_eq!(manifest.description, "Docs");
    }
}
