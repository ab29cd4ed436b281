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
