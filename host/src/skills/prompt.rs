//! The skills section of the system prompt: each skill the model may load,
//! by name, description and when to use it, within a budget.
//!
//! The budget is about 1% of the model's context window (known from its
//! family, or `[model] context_window`), counted in characters at an
//! estimated 4 characters per token: 8,000 characters for a 200,000-token
//! window. When the skills do not fit, the user's own skills
//! (`~/.config/capstan/skills`, `~/.claude/skills`) are left out first, then
//! the project's, then plugins' — each from the last discovered — and the
//! section says how many were left out. Left-out skills can still be run
//! by the user as `/name`, and the `skill` tool still loads them by name.

use std::fmt::Write as _;

use super::{Skill, SkillSet};
use crate::front_matter::clip;

/// A typical context window, in tokens (Claude's).
pub const DEFAULT_CONTEXT_TOKENS: usize = 200_000;

/// The estimate of characters per token.
pub const CHARS_PER_TOKEN: usize = 4;

/// The longest description shown for one skill, in characters.
pub const MAX_ENTRY_DESCRIPTION: usize = 250;

/// The budget for a context window of `context_tokens`: 1% of it, in
/// characters.
pub fn budget_chars(context_tokens: usize) -> usize {
    context_tokens * CHARS_PER_TOKEN / 100
}

/// The section, and what it left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// The text to add to the system prompt; empty when there is no skill
    /// the model may load.
    pub text: String,
    /// The skills listed.
    pub listed: Vec<String>,
    /// The skills left out for the budget.
    pub left_out: Vec<String>,
}

/// One skill's line; `call_name` is the name it is loaded by.
fn entry(skill: &Skill, call_name: &str) -> String {
    let mut line = format!("- {call_name}");
    if let Some(display) = &skill.meta.display_name {
        let _ = write!(line, " ({})", clip(display.clone(), MAX_ENTRY_DESCRIPTION));
    }
    let _ = write!(
        line,
        ": {}",
        clip(skill.meta.description.clone(), MAX_ENTRY_DESCRIPTION)
    );
    if let Some(when) = &skill.meta.when_to_use {
        let when = when.split_whitespace().collect::<Vec<_>>().join(" ");
        let _ = write!(line, " When to use: {}", clip(when, MAX_ENTRY_DESCRIPTION));
    }
    if let Some(hint) = &skill.meta.argument_hint {
        let _ = write!(line, " (arguments: {hint})");
    }
    line.push('\n');
    line
}

/// The order in which skills are dropped: the user's own first, then the
/// project's, then plugins'.
fn drop_rank(skill: &Skill) -> u8 {
    use super::Source;
    match skill.source {
        Source::ClaudeUserCommands | Source::ClaudeUser => 0,
        Source::User => 1,
        Source::ClaudeProjectCommands | Source::ClaudeProject => 2,
        Source::Project => 3,
        Source::Plugin(_) => 4,
    }
}

/// The listing of the skills of `set` the model may load, within `budget`
/// characters. A skill whose bare name is shared is listed by its
/// qualified name (`plugin:name`).
pub fn listing(set: &SkillSet, budget: usize, tool_name: &str) -> Listing {
    let candidates: Vec<(&Skill, String, String)> = set
        .skills()
        .iter()
        .filter(|s| s.meta.model_invocable)
        .map(|s| {
            let call_name = set.call_name(s);
            (s, entry(s, &call_name), call_name)
        })
        .collect();
    if candidates.is_empty() {
        return Listing::default();
    }
    let mut keep = vec![true; candidates.len()];
    let mut total: usize = candidates.iter().map(|(_, e, _)| e.chars().count()).sum();
    if total > budget {
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        // Lowest rank first; within a rank, the last discovered first.
        order.sort_by_key(|&i| (drop_rank(candidates[i].0), std::cmp::Reverse(i)));
        for i in order {
            if total <= budget {
                break;
            }
            keep[i] = false;
            total -= candidates[i].1.chars().count();
        }
    }
    let mut listing = Listing::default();
    let mut text = format!(
        "\n# Skills\n\
         Skills are instructions for particular tasks, loaded when needed. When the user's \
         request matches a skill below, call the `{tool_name}` tool with its `name` (and \
         `arguments`, if it takes any) before doing the task, then follow what it says. Do not \
         load a skill that does not fit the task.\n\n"
    );
    for ((_, line, call_name), kept) in candidates.iter().zip(&keep) {
        if *kept {
            text.push_str(line);
            listing.listed.push(call_name.clone());
        } else {
            listing.left_out.push(call_name.clone());
        }
    }
    if !listing.left_out.is_empty() {
        let _ = writeln!(
            text,
            "\n({} more skills are not listed, to keep this prompt short; the user can name them.)",
            listing.left_out.len()
        );
    }
    listing.text = text;
    listing
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::{Discovery, Origin, SkillMeta, Source};
    use std::path::PathBuf;

    fn skill(name: &str, source: Source, description: &str) -> Skill {
        Skill {
            meta: SkillMeta {
                name: name.to_string(),
                description: description.to_string(),
                user_invocable: true,
                model_invocable: true,
                ..SkillMeta::default()
            },
            source,
            origin: Origin::File {
                root: PathBuf::from("/x"),
                dir: PathBuf::from("/x"),
                file: PathBuf::from("/x/SKILL.md"),
                body: String::new(),
                locked: None,
            },
            folder: None,
        }
    }

    fn set_of(skills: Vec<Skill>) -> SkillSet {
        let mut found = Discovery::default();
        for skill in skills {
            found.push(skill);
        }
        found.finish()
    }

    #[test]
    fn the_budget_is_one_percent_of_the_window() {
        assert_eq!(budget_chars(DEFAULT_CONTEXT_TOKENS), 8000);
    }

    #[test]
    fn user_skills_are_left_out_first() {
        let long = "d".repeat(90);
        let skills = set_of(vec![
            skill("plug", Source::Plugin("p".into()), &long),
            skill("proj", Source::Project, &long),
            skill("mine-a", Source::User, &long),
            skill("mine-b", Source::User, &long),
        ]);
        let all = listing(&skills, 10_000, "skill");
        assert_eq!(all.listed.len(), 4);
        assert!(all.left_out.is_empty());
        assert!(all.text.contains("- plug: ddd"));

        let two = listing(&skills, 250, "skill");
        assert_eq!(two.listed, ["plug", "proj"]);
        assert_eq!(two.left_out, ["mine-a", "mine-b"]);
        assert!(two.text.contains("2 more skills are not listed"));

        let one = listing(&skills, 120, "skill");
        assert_eq!(one.listed, ["plug"]);
    }

    #[test]
    fn model_invocation_can_be_disabled() {
        let mut hidden = skill("hidden", Source::Project, "d");
        hidden.meta.model_invocable = false;
        let shown = listing(&set_of(vec![hidden]), 1000, "skill");
        assert!(shown.text.is_empty() && shown.listed.is_empty());
    }

    #[test]
    fn shared_names_are_listed_qualified_and_display_names_kept() {
        let mut display = skill("agent-development", Source::Plugin("dev".into()), "d");
        display.meta.display_name = Some("Agent Development".into());
        let set = set_of(vec![
            skill("review", Source::Plugin("one".into()), "d"),
            skill("review", Source::Plugin("two".into()), "d"),
            display,
        ]);
        let shown = listing(&set, 10_000, "skill");
        assert_eq!(
            shown.listed,
            ["agent-development", "one:review", "two:review"]
        );
        assert!(
            shown
                .text
                .contains("- agent-development (Agent Development): d"),
            "{}",
            shown.text
        );
    }
}
