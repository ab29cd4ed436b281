//! MCP servers given on the command line with `--mcp-config`, as Claude
//! Code takes them: each value a file or the JSON itself, in the
//! `{"mcpServers": {...}}` shape of `.mcp.json` (the same keys, read by
//! the same parser, [`super::config::parse_claude_json`]).
//!
//! They are for this run only and count as approved: the user typed them,
//! so nothing asks (as `capstan mcp add --yes` does not). A name given
//! there replaces a server of the same name defined elsewhere; with
//! `--strict-mcp-config` they are the only servers of the run.

use std::path::Path;

use super::config::{ServerEntry, parse_claude_json};

/// The servers of `--mcp-config` and whether `--strict-mcp-config` was
/// given.
#[derive(Debug, Clone, Default)]
pub struct CommandLineServers {
    /// Each server: its name, where it was given, its definition.
    pub servers: Vec<(String, String, ServerEntry)>,
    /// Use only these servers.
    pub strict: bool,
}

impl CommandLineServers {
    /// Reads each `--mcp-config` value (a file, relative to `cwd`, or
    /// JSON text starting with `{`), checking every server as it would be
    /// started, so a mistake stops the run before it starts.
    pub fn read(values: &[String], strict: bool, cwd: &Path) -> Result<Self, String> {
        let user_home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(std::path::PathBuf::from);
        let mut servers: Vec<(String, String, ServerEntry)> = Vec::new();
        for value in values {
            let (text, source) = if value.trim_start().starts_with('{') {
                (value.clone(), "--mcp-config (JSON)".to_string())
            } else {
                let path = cwd.join(value);
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    format!(
                        "cannot read the --mcp-config file {}: {e}; pass a file of {{\"mcpServers\": {{...}}}} or that JSON itself",
                        path.display()
                    )
                })?;
                (text, format!("--mcp-config {}", path.display()))
            };
            let entries = parse_claude_json(&text, false).map_err(|e| format!("{source}: {e}"))?;
            if entries.is_empty()
                && serde_json::from_str::<serde_json::Value>(&text)
                    .is_ok_and(|v| v.get("mcpServers").is_none())
            {
                return Err(format!(
                    "{source}: it has no `mcpServers` object; write {{\"mcpServers\": {{\"NAME\": {{\"command\": ...}}}}}}"
                ));
            }
            for (name, entry) in entries {
                let entry = with_own_files(entry, cwd);
                entry
                    .to_spec(&name, &source, user_home.as_deref())
                    .map_err(|e| e.to_string())?;
                servers.retain(|(other, _, _)| *other != name);
                servers.push((name, source.clone(), entry));
            }
        }
        Ok(Self { servers, strict })
    }
}

/// `entry` with its own files readable: the folder of its program when
/// the command is a path to a file (where the program really is, links
/// followed; and, when it is a virtualenv's, the virtualenv and the
/// Python installation its `pyvenv.cfg` names, whose libraries the
/// interpreter needs), and the folder of every argument that names an
/// existing file (its script). The rest of the sandbox is left as it is:
/// the folders beside those stay out of reach.
pub fn with_own_files(mut entry: ServerEntry, cwd: &Path) -> ServerEntry {
    if entry.url.is_some() {
        return entry;
    }
    let mut folders: Vec<std::path::PathBuf> = Vec::new();
    let existing_file = |text: &str| -> Option<std::path::PathBuf> {
        if text.is_empty() || text.starts_with('-') {
            return None;
        }
        let path = cwd.join(text);
        path.is_file().then(|| path.canonicalize().ok()).flatten()
    };
    if let Some(command) = &entry.command
        && command.contains('/')
        && let Some(program) = cwd.join(command).is_file().then(|| cwd.join(command))
        && let Some(bin) = program.parent()
    {
        let bin = bin.canonicalize().unwrap_or_else(|_| bin.to_path_buf());
        if let Some(venv) = bin
            .parent()
            .filter(|root| root.join("pyvenv.cfg").is_file())
        {
            folders.push(venv.to_path_buf());
            if let Some(base) = virtualenv_base(venv) {
                folders.push(base);
            }
        }
        if let Some(real) = program
            .canonicalize()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
        {
            folders.push(real);
        }
        folders.push(bin);
    }
    for arg in &entry.args {
        if let Some(folder) =
            existing_file(arg).and_then(|file| file.parent().map(Path::to_path_buf))
        {
            folders.push(folder);
        }
    }
    folders.dedup();
    for folder in folders {
        let folder = folder.display().to_string();
        if !entry.read.contains(&folder) && !entry.write.contains(&folder) {
            entry.read.push(folder);
        }
    }
    entry
}

/// The Python installation a virtualenv's interpreter belongs to: the
/// folder above the `bin` its `pyvenv.cfg` names as `home`.
fn virtualenv_base(venv: &Path) -> Option<std::path::PathBuf> {
    let text = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    let home = text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "home").then(|| std::path::PathBuf::from(value.trim()))
    })?;
    let home = home.canonicalize().ok()?;
    let base = if home.file_name().is_some_and(|n| n == "bin") {
        home.parent()?.to_path_buf()
    } else {
        home
    };
    // Never a top folder, nor the user's home or one above it: only an
    // installation.
    let user_home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let encloses_home = user_home.is_some_and(|h| h.starts_with(&base));
    (base.components().count() > 2 && !encloses_home).then_some(base)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn inline_json_and_files_are_read_and_a_later_name_wins() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("servers.json"),
            r#"{"mcpServers": {"a": {"command": "a-server"}, "b": {"type": "sse", "url": "https://example.com/sse"}}}"#,
        )
        .unwrap();
        let read = CommandLineServers::read(
            &[
                "servers.json".into(),
                r#"{"mcpServers": {"a": {"command": "other", "args": ["x"]}}}"#.into(),
            ],
            true,
            dir.path(),
        )
        .unwrap();
        assert!(read.strict);
        let names: Vec<&str> = read.servers.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(read.servers[1].2.command.as_deref(), Some("other"));
        assert_eq!(read.servers[1].1, "--mcp-config (JSON)");
    }

    #[test]
    fn a_servers_program_and_script_folders_become_readable() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("venv/bin")).unwrap();
        std::fs::write(root.join("venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        std::fs::write(root.join("venv/bin/python"), "").unwrap();
        std::fs::create_dir_all(root.join("tools/srv")).unwrap();
        std::fs::write(root.join("tools/srv/server.py"), "").unwrap();
        let entry = ServerEntry {
            command: Some(root.join("venv/bin/python").display().to_string()),
            args: vec!["tools/srv/server.py".into(), "--port".into(), "7".into()],
            ..Default::default()
        };
        let entry = with_own_files(entry, &root);
        let shown = |p: &str| root.join(p).display().to_string();
        assert_eq!(
            entry.read,
            [shown("venv"), shown("venv/bin"), shown("tools/srv")]
        );
        // A program found on PATH and arguments that are not files add nothing.
        let plain = ServerEntry {
            command: Some("python3".into()),
            args: vec!["-m".into(), "server".into(), "missing.py".into()],
            ..Default::default()
        };
        assert!(with_own_files(plain, &root).read.is_empty());
    }

    #[test]
    fn bad_values_say_what_to_fix() {
        let dir = tempfile::tempdir().unwrap();
        let err =
            CommandLineServers::read(&["missing.json".into()], false, dir.path()).unwrap_err();
        assert!(err.contains("cannot read the --mcp-config file"), "{err}");
        let err = CommandLineServers::read(&["{nope".into()], false, dir.path()).unwrap_err();
        assert!(err.contains("not valid JSON"), "{err}");
        let err = CommandLineServers::read(&[r#"{"servers": {}}"#.into()], false, dir.path())
            .unwrap_err();
        assert!(err.contains("no `mcpServers`"), "{err}");
        let err =
            CommandLineServers::read(&[r#"{"mcpServers": {"x": {}}}"#.into()], false, dir.path())
                .unwrap_err();
        assert!(err.contains("neither `command`"), "{err}");
    }
}
