//! Claude Code's tool names and the capstan tools they stand for, so that
//! permission rules and hook matchers written for Claude Code work here.
//!
//! | Claude Code | the tool | a permission rule covers | its parentheses hold |
//! |---|---|---|---|
//! | `Read` | `fs.read` | `fs.read`, `fs.glob`, `fs.grep`, `fs.ls`, `lsp` | a path |
//! | `Write` | `fs.write` | `fs.write` | a path |
//! | `Edit` | `fs.edit` | `fs.edit`, `fs.write` | a path |
//! | `MultiEdit` | `fs.edit` | `fs.edit` | a path |
//! | `Glob`, `Grep`, `LS` | `fs.glob`, `fs.grep`, `fs.ls` | the same | a path |
//! | `Bash` | `exec.run` | `exec.run` | a command |
//! | `WebFetch` | `web.fetch` | `web.fetch` | `domain:HOST` |
//! | `WebSearch` | `web.search` | `web.search` | nothing, or `domain:HOST` |
//! | `LSP` | `lsp` | `lsp` | a path (its `filePath`) |
//!
//! As in Claude Code, a `Read` rule applies to every tool that reads files
//! and an `Edit` rule to every tool that changes them. A `Bash` rule
//! matches `exec.run`'s `command`. MCP tools keep their Claude Code names (`mcp__server__tool`), and
//! `mcp__server` stands for every tool of that server.

/// What the parentheses of a Claude Code rule hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecifierKind {
    /// A path pattern, gitignore-style.
    Path,
    /// A command, or a prefix of one (`npm run test:*`).
    Command,
    /// `domain:HOST`.
    Domain,
}

/// One of Claude Code's built-in tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaudeTool {
    /// Its name in Claude Code (`Edit`).
    pub name: &'static str,
    /// The capstan tool it is (`fs.edit`).
    pub tool: &'static str,
    /// The capstan tools a permission rule naming it covers.
    pub rule_covers: &'static [&'static str],
    /// What a rule's parentheses hold.
    pub specifier: SpecifierKind,
}

/// The capstan tool that runs commands, which `Bash` rules are for.
pub const EXEC_TOOL: &str = "exec.run";

/// Claude Code's tools that capstan has.
const TOOLS: &[ClaudeTool] = &[
    ClaudeTool {
        name: "Read",
        tool: "fs.read",
        rule_covers: &["fs.read", "fs.glob", "fs.grep", "fs.ls", "lsp"],
        specifier: SpecifierKind::Path,
    },
    ClaudeTool {
        name: "Write",
        tool: "fs.write",
        rule_covers: &["fs.write"],
        specifier: SpecifierKind::Path,
    },
    ClaudeTool {
        name: "Edit",
        tool: "fs.edit",
        rule_covers: &["fs.edit", "fs.write"],
        specifier: SpecifierKind::Path,
    },
    ClaudeTool {
        name: "MultiEdit",
        tool: "fs.edit",
        rule_covers: &["fs.edit"],
        specifier: SpecifierKind::Path,
    },
    ClaudeTool {
        name: "Glob",
        tool: "fs.glob",
        rule_covers: &["fs.glob"],
        specifier: SpecifierKind::Path,
    },
    ClaudeTool {
        name: "Grep",
        tool: "fs.grep",
        rule_covers: &["fs.grep"],
        specifier: SpecifierKind::Path,
    },
    ClaudeTool {
        name: "LS",
        tool: "fs.ls",
        rule_covers: &["fs.ls"],
        specifier: SpecifierKind::Path,
    },
    ClaudeTool {
        name: "Bash",
        tool: EXEC_TOOL,
        rule_covers: &[EXEC_TOOL],
        specifier: SpecifierKind::Command,
    },
    ClaudeTool {
        name: "WebFetch",
        tool: "web.fetch",
        rule_covers: &["web.fetch"],
        specifier: SpecifierKind::Domain,
    },
    ClaudeTool {
        name: "WebSearch",
        tool: "web.search",
        rule_covers: &["web.search"],
        specifier: SpecifierKind::Domain,
    },
    ClaudeTool {
        name: "LSP",
        tool: "lsp",
        rule_covers: &["lsp"],
        specifier: SpecifierKind::Path,
    },
];

/// The Claude Code tool called `name` (exactly, as Claude Code spells it).
pub fn lookup(name: &str) -> Option<&'static ClaudeTool> {
    TOOLS.iter().find(|tool| tool.name == name)
}

/// Claude Code's names for the capstan tool `tool` (`fs.edit`: `Edit`,
/// `MultiEdit`), for hook matchers.
pub fn names_of(tool: &str) -> impl Iterator<Item = &'static str> {
    TOOLS
        .iter()
        .filter(move |claude| claude.tool == tool)
        .map(|claude| claude.name)
}

/// The capstan tool pattern an MCP tool name stands for: `mcp__server__tool`
/// itself, `mcp__server` every tool of the server (`mcp__server__*`).
/// `None` if `name` is not an MCP name.
pub fn mcp_pattern(name: &str) -> Option<String> {
    let rest = name.strip_prefix("mcp__")?;
    if rest.is_empty() {
        return None;
    }
    Some(if rest.contains("__") {
        name.to_string()
    } else {
        format!("{name}__*")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_both_ways() {
        assert_eq!(lookup("Edit").unwrap().rule_covers, ["fs.edit", "fs.write"]);
        assert_eq!(lookup("Bash").unwrap().tool, "exec.run");
        assert_eq!(lookup("LSP").unwrap().tool, "lsp");
        assert_eq!(lookup("WebSearch").unwrap().tool, "web.search");
        assert!(lookup("Read").unwrap().rule_covers.contains(&"lsp"));
        assert!(lookup("edit").is_none());
        assert!(lookup("fs.edit").is_none());
        assert_eq!(
            names_of("fs.edit").collect::<Vec<_>>(),
            ["Edit", "MultiEdit"]
        );
        assert_eq!(names_of("fs.read").collect::<Vec<_>>(), ["Read"]);
        assert_eq!(names_of("my.tool").count(), 0);
    }

    #[test]
    fn mcp_names_are_tools_or_whole_servers() {
        assert_eq!(
            mcp_pattern("mcp__github__list_issues").as_deref(),
            Some("mcp__github__list_issues")
        );
        assert_eq!(
            mcp_pattern("mcp__github").as_deref(),
            Some("mcp__github__*")
        );
        assert_eq!(
            mcp_pattern("mcp__github__*").as_deref(),
            Some("mcp__github__*")
        );
        assert_eq!(mcp_pattern("mcp__"), None);
        assert_eq!(mcp_pattern("fs.read"), None);
    }
}
