//! The language servers of Claude Code plugins: found at install in
//! `.lsp.json` and in `lspServers` (of `plugin.json` or a marketplace
//! entry: an object of servers, a file of them, or a list of either),
//! written into the package's own [`LSP_SERVERS`] (a dot file would be left
//! out of the package), which the lockfile hashes like every file; read
//! back for a session only while that hash holds.
//!
//! Claude Code expects a server's program on `PATH` (the plugin configures
//! it, the user installs it); so does capstan, and the consent text says
//! when it is missing. The servers run in the OS sandbox ([`crate::lsp`]).

use std::path::Path;

use serde_json::{Map, Value};

use crate::home::Home;
use crate::lsp::LspServerSpec;
use crate::plugin::claude_import::CLAUDE_MANIFEST;
use crate::plugin::lock::Lockfile;

/// The file of an imported package that holds its LSP servers, as
/// `{"lspServers": {NAME: definition}}`.
pub const LSP_SERVERS: &str = "lsp-servers.json";

/// The largest file of server definitions read.
const MAX_FILE: usize = 1 << 20;

/// The servers of `root`'s `.lsp.json` and of `manifest`'s `lspServers`,
/// written to [`LSP_SERVERS`] in `out` (when given); one line per server
/// saying what it runs and reaches (and whether its program is missing).
/// Definitions that cannot be used are added to `refused`.
pub fn import(
    root: &Path,
    manifest: &Value,
    out: Option<&Path>,
    refused: &mut Vec<String>,
) -> Result<Vec<String>, String> {
    let mut found: Vec<(String, Value)> = Vec::new();
    if root.join(".lsp.json").is_file() {
        read_file(root, ".lsp.json", &mut found, refused);
    }
    match manifest.get("lspServers") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for item in items {
                listed(root, item, &mut found, refused);
            }
        }
        Some(item) => listed(root, item, &mut found, refused),
    }
    let mut lines = Vec::new();
    let mut kept = Map::new();
    for (label, servers) in found {
        let (specs, problems) = LspServerSpec::parse_all(&servers);
        refused.extend(
            problems
                .into_iter()
                .map(|p| format!("{label}: {p}; not installed")),
        );
        for spec in specs {
            if kept.contains_key(&spec.name) {
                refused.push(format!(
                    "{label}: LSP server {} is defined twice; the first definition is kept",
                    spec.name
                ));
                continue;
            }
            let mut line = spec.describe();
            if let Some(missing) = spec.missing_program() {
                line.push_str(&format!(" — {missing}"));
            }
            lines.push(line);
            if let Some(value) = servers.get(&spec.name) {
                kept.insert(spec.name.clone(), value.clone());
            }
        }
    }
    if let Some(out) = out
        && !kept.is_empty()
    {
        let text = serde_json::to_string_pretty(&serde_json::json!({ "lspServers": kept }))
            .map_err(|e| format!("cannot write the LSP servers: {e}"))?;
        std::fs::write(out.join(LSP_SERVERS), text)
            .map_err(|e| format!("cannot write {}: {e}", out.join(LSP_SERVERS).display()))?;
    }
    Ok(lines)
}

/// One item of `lspServers`: an object of servers, or the path of a file
/// of them.
fn listed(root: &Path, item: &Value, found: &mut Vec<(String, Value)>, refused: &mut Vec<String>) {
    match item {
        Value::Object(_) => found.push((format!("{CLAUDE_MANIFEST} `lspServers`"), item.clone())),
        Value::String(path) => {
            let rel = path
                .strip_prefix("${CLAUDE_PLUGIN_ROOT}")
                .unwrap_or(path)
                .trim_start_matches("./")
                .trim_start_matches('/');
            if rel.split('/').any(|part| part == "..") {
                refused.push(format!(
                    "{CLAUDE_MANIFEST} `lspServers` ({path}): leads out of the plugin; not installed"
                ));
                return;
            }
            if rel == ".lsp.json" {
                return;
            }
            read_file(root, rel, found, refused);
        }
        _ => refused.push(format!(
            "{CLAUDE_MANIFEST} `lspServers`: neither servers nor a path; ignored"
        )),
    }
}

/// The servers of file `rel` of `root` (`{NAME: ...}`, or wrapped in
/// `lspServers`).
fn read_file(root: &Path, rel: &str, found: &mut Vec<(String, Value)>, refused: &mut Vec<String>) {
    let read =
        crate::untrusted_folder::UntrustedFolder::open(root).and_then(|folder| match folder {
            Some(folder) => folder.read(Path::new(rel), MAX_FILE),
            None => Ok(None),
        });
    let value = match read {
        Ok(Some(read)) if !read.more => serde_json::from_str::<Value>(&read.text()).ok(),
        _ => None,
    };
    match value {
        Some(value) => {
            let servers = value.get("lspServers").cloned().unwrap_or(value);
            found.push((rel.to_string(), servers));
        }
        None => refused.push(format!(
            "{rel}: unreadable, too large or not JSON; no LSP servers installed from it"
        )),
    }
}

/// The LSP servers of installed plugins, each named `PLUGIN-SERVER` and
/// placed in its plugin's folder, and a notice per plugin whose servers
/// were left out (a file changed since install).
pub fn installed(home: &Home) -> (Vec<LspServerSpec>, Vec<String>) {
    let plugins_dir = home.plugins_dir();
    let mut specs = Vec::new();
    let mut notices = Vec::new();
    let Ok(lock) = Lockfile::load(&plugins_dir.join("capstan.lock")) else {
        return (specs, notices);
    };
    for (plugin, entry) in &lock.plugins {
        let Some(expected) = entry.files.get(LSP_SERVERS) else {
            continue;
        };
        let root = entry.dir(&plugins_dir);
        let value = match std::fs::read(root.join(LSP_SERVERS)) {
            Ok(bytes) if crate::sandbox::engine::sha256_hex(&bytes) == *expected => {
                serde_json::from_slice::<Value>(&bytes).ok()
            }
            Ok(_) => {
                notices.push(format!(
                    "warning: the language servers of plugin {plugin} were left out: {LSP_SERVERS} has changed since it was installed; reinstall it with `capstan plugin install {}`",
                    entry.source
                ));
                continue;
            }
            Err(e) => {
                notices.push(format!(
                    "warning: the language servers of plugin {plugin} were left out: cannot read {LSP_SERVERS}: {e}"
                ));
                continue;
            }
        };
        let Some(servers) = value.as_ref().and_then(|v| v.get("lspServers")) else {
            continue;
        };
        let (found, _) = LspServerSpec::parse_all(servers);
        for mut spec in found {
            spec.name = format!("{plugin}-{}", spec.name);
            specs.push(spec.installed_in(&root));
        }
    }
    (specs, notices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn servers_come_from_the_dot_file_the_manifest_and_listed_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(
            root.join(".lsp.json"),
            r#"{"go": {"command": "gopls", "args": ["serve"], "extensionToLanguage": {".go": "go"}}}"#,
        )
        .unwrap();
        std::fs::create_dir(root.join("lsp")).unwrap();
        std::fs::write(
            root.join("lsp/more.json"),
            r#"{"lspServers": {"ts": {"command": "tsserver", "extensionToLanguage": {".ts": "typescript"}}}}"#,
        )
        .unwrap();
        let manifest = json!({"lspServers": [
            {"py": {"command": "pyright-langserver", "extensionToLanguage": {".py": "python"}},
             "bad": {"command": "x"}},
            "./lsp/more.json",
            "../../etc/passwd"
        ]});
        let out = tempfile::tempdir().unwrap();
        let mut refused = Vec::new();
        let lines = import(root, &manifest, Some(out.path()), &mut refused).unwrap();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].starts_with("go: runs `gopls serve` for .go files in the OS sandbox"));
        assert_eq!(refused.len(), 2, "{refused:?}");
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join(LSP_SERVERS)).unwrap())
                .unwrap();
        let names: Vec<&String> = written["lspServers"].as_object().unwrap().keys().collect();
        assert_eq!(names, ["go", "py", "ts"]);
    }
}
