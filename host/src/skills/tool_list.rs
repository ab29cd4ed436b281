//! A skill's `allowed-tools` and `disallowed-tools` entries as written for
//! Claude Code, before they become permission rules.
//!
//! The names the permission rules know ([`crate::policy::claude_code`]:
//! `Read`, `Edit`, `Bash(...)`, `WebFetch`, `mcp__server__tool`, ...) pass
//! through. Claude Code's other tools are mapped onto capstan's or
//! reported, never silently kept as a rule that matches nothing:
//!
//! - `Task` and `Agent` are capstan's `task` tool. With an agent's name in
//!   parentheses, a pre-approval is left out (the rule cannot say which
//!   agent) and a refusal refuses every sub-agent, the safe reading.
//! - `Skill` and `SlashCommand` are the `skill` tool; `BashOutput` is
//!   `exec.output`; `KillShell` and `KillBash` are `exec.kill`.
//! - `NotebookEdit`, `TodoWrite`, `TodoRead` and `ExitPlanMode` have no
//!   capstan tool: they are left out with the reason.
//! - Any other name written as Claude Code writes its tools (a capital
//!   first letter, no `.`) names no tool capstan has: left out, named.

/// What one entry of a skill's tool list becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// The rule to parse, and a note for the model when it was changed.
    Rule(String, Option<String>),
    /// Left out, with the reason.
    Ignored(String),
}

/// Claude Code's tools with no capstan counterpart, and why.
const WITHOUT_COUNTERPART: [(&str, &str); 4] = [
    (
        "NotebookEdit",
        "capstan has no notebook tool (a notebook is edited as a file, with `Edit`)",
    ),
    (
        "TodoWrite",
        "capstan has no to-do list tool; nothing needs approving",
    ),
    (
        "TodoRead",
        "capstan has no to-do list tool; nothing needs approving",
    ),
    (
        "ExitPlanMode",
        "capstan has no such tool: plan mode is left by the user",
    ),
];

/// Claude Code's tools that are capstan tools under another name.
const RENAMED: [(&str, &str); 7] = [
    ("Task", "task"),
    ("Agent", "task"),
    ("Skill", "skill"),
    ("SlashCommand", "skill"),
    ("BashOutput", "exec.output"),
    ("KillShell", "exec.kill"),
    ("KillBash", "exec.kill"),
];

/// What `entry` becomes in an `allowed-tools` list (`refusing` false) or a
/// `disallowed-tools` list (`refusing` true).
pub fn entry(entry: &str, refusing: bool) -> Entry {
    let entry = entry.trim();
    let (tool, inner) = match entry.split_once('(') {
        Some((tool, rest)) => (tool.trim(), Some(rest.strip_suffix(')').unwrap_or(rest))),
        None => (entry, None),
    };
    if let Some((_, why)) = WITHOUT_COUNTERPART.iter().find(|(name, _)| *name == tool) {
        return Entry::Ignored(format!("`{entry}`: {why}"));
    }
    if let Some((_, capstan)) = RENAMED.iter().find(|(name, _)| *name == tool) {
        return match inner {
            None => Entry::Rule((*capstan).to_string(), None),
            Some(_) if refusing => Entry::Rule(
                (*capstan).to_string(),
                Some(format!(
                    "`{entry}` refuses every call of `{capstan}`: capstan's rules cannot name what is in the parentheses"
                )),
            ),
            Some(_) => Entry::Ignored(format!(
                "`{entry}`: capstan's rules for `{capstan}` cannot name what is in the parentheses, so nothing is pre-approved"
            )),
        };
    }
    if crate::policy::claude_code::lookup(tool).is_none()
        && tool.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && !tool.contains('.')
    {
        return Entry::Ignored(format!(
            "`{entry}`: no tool of that name in Claude Code or capstan"
        ));
    }
    Entry::Rule(entry.to_string(), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_names_map_or_are_reported() {
        let rule = |e: &str, refusing: bool| match entry(e, refusing) {
            Entry::Rule(rule, _) => Some(rule),
            Entry::Ignored(_) => None,
        };
        for same in [
            "Read",
            "Bash(git add:*)",
            "Edit(src/**)",
            "mcp__gh__x",
            "fs.read",
            "*",
        ] {
            assert_eq!(rule(same, false).as_deref(), Some(same), "{same}");
        }
        assert_eq!(rule("Task", false).as_deref(), Some("task"));
        assert_eq!(rule("Agent", true).as_deref(), Some("task"));
        assert_eq!(rule("Agent(reviewer)", false), None);
        assert_eq!(rule("Agent(reviewer)", true).as_deref(), Some("task"));
        assert_eq!(rule("SlashCommand", false).as_deref(), Some("skill"));
        assert_eq!(rule("BashOutput", false).as_deref(), Some("exec.output"));
        assert_eq!(rule("KillShell", false).as_deref(), Some("exec.kill"));
        for ignored in ["NotebookEdit", "TodoWrite", "Frobnicate", "Frob(x)"] {
            let Entry::Ignored(why) = entry(ignored, false) else {
                panic!("{ignored} was kept");
            };
            assert!(why.starts_with(&format!("`{ignored}`")), "{why}");
        }
    }
}
