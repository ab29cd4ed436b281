//! Which hooks an event reaches: the event, and a matcher on the event's
//! subject — the tool for tool events, the `source` of SessionStart, the
//! `reason` of SessionEnd, the `trigger` of Pre/PostCompact, the
//! `notification_type` of Notification and the `agent_type` of sub-agent
//! events, as in Claude Code.
//!
//! A matcher is empty or `*` (everything), a name or a `|`-separated list
//! of names (`fs.write|fs.edit`), or else a regular expression that must
//! match the whole name (`fs\..*`). A tool is known by three names, and a
//! matcher may use any of them: the name users see (`fs.write`), the name
//! the model sees (`fs__write`) and, for the tools Claude Code has too,
//! Claude Code's (`Write`, `Edit`, `MultiEdit`, `Read`, `Glob`, `Grep`, `LS`,
//! `WebFetch`; see [`crate::policy::claude_code`]), so a matcher written for
//! Claude Code (`Write|Edit`) works unchanged.

use regex::Regex;

use super::HookEvent;

/// A compiled matcher.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// Matches everything.
    Any,
    /// Matches any of these names exactly.
    Names(Vec<String>),
    /// Matches names the expression matches as a whole.
    Pattern(Regex),
}

/// The longest matcher accepted, so a hostile hook cannot make the host
/// compile an enormous expression.
const MAX_MATCHER: usize = 1024;

impl Matcher {
    /// Compiles a subscription's matcher; `None`, empty and `*` match
    /// everything. An invalid expression is an error saying why.
    pub fn parse(matcher: Option<&str>) -> Result<Self, String> {
        let text = matcher.map(str::trim).unwrap_or_default();
        if text.is_empty() || text == "*" {
            return Ok(Self::Any);
        }
        if text.len() > MAX_MATCHER {
            return Err(format!(
                "the matcher is {} characters long; at most {MAX_MATCHER} are allowed",
                text.len()
            ));
        }
        let plain = text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '|' | ' '));
        if plain {
            let names = text
                .split('|')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>();
            return Ok(if names.is_empty() {
                Self::Any
            } else {
                Self::Names(names)
            });
        }
        regex::RegexBuilder::new(&format!("^(?:{text})$"))
            .size_limit(1 << 20)
            .build()
            .map(Self::Pattern)
            .map_err(|e| format!("`{text}` is not a valid regular expression: {e}"))
    }

    /// Whether any of `names` (the subject's names) matches.
    pub fn matches<S: AsRef<str>>(&self, names: &[S]) -> bool {
        match self {
            Self::Any => true,
            Self::Names(list) => names
                .iter()
                .any(|name| list.iter().any(|l| l == name.as_ref())),
            Self::Pattern(re) => names.iter().any(|name| re.is_match(name.as_ref())),
        }
    }
}

/// Every name a tool answers to in matchers: `fs.write`, `fs__write`, and
/// Claude Code's names for it ([`crate::policy::claude_code`]).
pub fn tool_names(name: &str) -> Vec<String> {
    let mut names = vec![name.to_string(), name.replacen('.', "__", 1)];
    names.extend(crate::policy::claude_code::names_of(name).map(str::to_string));
    names
}

/// The names an event's matcher is tried against, read from its payload;
/// `None` when the event has no subject (every subscription to it matches).
pub fn subject(event: HookEvent, payload: &serde_json::Value) -> Option<Vec<String>> {
    let field = |key: &str| payload.get(key).and_then(|v| v.as_str());
    let one = |key: &str| field(key).map(|v| vec![v.to_string()]);
    match event {
        e if e.concerns_tool() => Some(field("tool_name").map(tool_names).unwrap_or_default()),
        HookEvent::SessionStart => one("source"),
        HookEvent::SessionEnd => one("reason"),
        HookEvent::PreCompact | HookEvent::PostCompact => one("trigger"),
        HookEvent::Notification => one("notification_type"),
        HookEvent::SubagentStart | HookEvent::SubagentStop => one("agent_type"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn m(text: &str) -> Matcher {
        Matcher::parse(Some(text)).unwrap()
    }

    #[test]
    fn empty_and_star_match_everything() {
        for text in [None, Some(""), Some("*"), Some("  ")] {
            assert!(Matcher::parse(text).unwrap().matches(&["anything"]));
        }
    }

    #[test]
    fn names_and_lists_match_exactly() {
        let names = tool_names("fs.write");
        assert!(m("fs.write").matches(&names));
        assert!(m("fs.read|fs.write").matches(&names));
        assert!(m("fs__write").matches(&names));
        assert!(m("Write|Edit").matches(&names));
        // A dot in a plain name is a dot, not "any character".
        assert!(!m("fs.write").matches(&tool_names("fsxwrite")));
        assert!(!m("fs.writ").matches(&names));
        assert!(!m("fs.write").matches(&tool_names("fs.write2")));
        assert!(!m("Write").matches(&tool_names("my.write")));
        assert!(m("Edit").matches(&tool_names("fs.edit")));
        assert!(m("MultiEdit").matches(&tool_names("fs.edit")));
    }

    #[test]
    fn claude_codes_bash_matches_the_command_tool() {
        let names = tool_names("exec.run");
        assert!(m("Bash").matches(&names));
        assert!(m("Bash|Write").matches(&names));
        assert!(m("exec__run").matches(&names));
        assert!(!m("Bash").matches(&tool_names("exec.kill")));
    }

    #[test]
    fn expressions_match_the_whole_name() {
        let names = tool_names("fs.write");
        assert!(m(r"fs\..*").matches(&names));
        assert!(m("fs\\.(write|edit)").matches(&names));
        assert!(m("Notebook.*|Wri.*").matches(&names));
        assert!(!m(r"s\.w.*").matches(&names), "anchored at the start");
        assert!(!m(r"fs\.wr").matches(&names), "anchored at the end");
        assert!(!m(r"web\..*").matches(&names));
    }

    #[test]
    fn bad_expressions_are_errors_that_say_why() {
        let err = Matcher::parse(Some("fs\\.(write")).unwrap_err();
        assert!(err.contains("not a valid regular expression"), "{err}");
        let err = Matcher::parse(Some(&"a".repeat(2000))).unwrap_err();
        assert!(err.contains("at most"), "{err}");
    }

    #[test]
    fn subjects_come_from_the_payload() {
        let tool = json!({"tool_name": "fs.edit"});
        let names = subject(HookEvent::PreToolUse, &tool).unwrap();
        assert!(names.contains(&"Edit".to_string()) && names.contains(&"fs__edit".to_string()));
        let start = json!({"source": "resume"});
        assert_eq!(
            subject(HookEvent::SessionStart, &start),
            Some(vec!["resume".to_string()])
        );
        assert_eq!(subject(HookEvent::Stop, &json!({})), None);
        assert_eq!(subject(HookEvent::PreToolUse, &json!({})), Some(vec![]));
    }
}
