//! How a skill is named when it is asked for: `/name`, `/plugin:name`,
//! `{"name": "folder:name"}` in the `skill` tool, `capstan skill show NAME`.
//!
//! - A name is compared by its invocation name
//!   ([`crate::front_matter::invocation_name`]), so `/clean_gone` finds the
//!   command `clean_gone.md` (`clean-gone`) and `Agent Development` the
//!   skill whose `name:` says so.
//! - `NAMESPACE:name` picks the skill of one plugin (or of one sub-folder of
//!   `.claude/commands/`), as Claude Code's `/plugin:command` does. The
//!   namespace is everything before the last `:`; `_` and `-` are the same
//!   in it, and case does not count.
//! - An unknown name gets the closest few names as suggestions, never the
//!   whole list.

use crate::front_matter::invocation_name;

/// A name as asked for, split and normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// The namespace, normalised ([`namespace_key`]), if one was given.
    pub namespace: Option<String>,
    /// The invocation name.
    pub name: String,
}

/// Splits and normalises `text` (`/plugin:name`, `name`, `Agent
/// Development`). `None` when it cannot name a skill at all.
pub fn wanted(text: &str) -> Option<Wanted> {
    let text = text.trim();
    let text = text.strip_prefix('/').unwrap_or(text);
    let (namespace, name) = match text.rsplit_once(':') {
        Some((namespace, name)) => (Some(namespace), name),
        None => (None, text),
    };
    let namespace = match namespace {
        Some(ns) if ns.trim().is_empty() => return None,
        Some(ns) => Some(namespace_key(ns)),
        None => None,
    };
    Some(Wanted {
        namespace,
        name: invocation_name(name)?,
    })
}

/// A namespace as compared: lowercase, `_` as `-`.
pub fn namespace_key(namespace: &str) -> String {
    namespace.trim().to_ascii_lowercase().replace('_', "-")
}

/// Whether `token` (what follows `/` up to the first space) looks like the
/// name of a skill or command: letters, digits, `-`, `_` and `:` between
/// parts, so that a path such as `/etc/passwd` is not taken for one.
pub fn looks_like_invocation(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= 200
        && token.split(':').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}

/// The most names an unknown name is answered with.
pub const MAX_SUGGESTIONS: usize = 5;

/// The names among `candidates` closest to `typed` (best first, at most
/// [`MAX_SUGGESTIONS`]): those it begins, those that begin it, and those
/// within a few edits of it (a third of its length, at least two).
pub fn closest<'a>(typed: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let typed = typed.trim().trim_start_matches('/').to_ascii_lowercase();
    if typed.is_empty() {
        return Vec::new();
    }
    let typed_bare = typed.rsplit(':').next().unwrap_or(&typed).to_string();
    let allowed = (typed.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, String)> = Vec::new();
    for candidate in candidates {
        let lower = candidate.to_ascii_lowercase();
        let bare = lower.rsplit(':').next().unwrap_or(&lower);
        let score = if lower.starts_with(&typed) || bare.starts_with(&typed_bare) {
            0
        } else if typed.len() >= 3 && (typed.starts_with(&lower) || typed_bare.starts_with(bare)) {
            1
        } else {
            let distance =
                strsim::levenshtein(&typed, &lower).min(strsim::levenshtein(&typed_bare, bare));
            if distance > allowed {
                continue;
            }
            1 + distance
        };
        if !scored.iter().any(|(_, name)| name == candidate) {
            scored.push((score, candidate.to_string()));
        }
    }
    scored.sort();
    scored
        .into_iter()
        .take(MAX_SUGGESTIONS)
        .map(|(_, name)| name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_normalised() {
        assert_eq!(
            wanted("/clean_gone"),
            Some(Wanted {
                namespace: None,
                name: "clean-gone".into()
            })
        );
        assert_eq!(
            wanted("My_Plugin:Agent Development"),
            Some(Wanted {
                namespace: Some("my-plugin".into()),
                name: "agent-development".into()
            })
        );
        assert_eq!(
            wanted("a:b:deploy").map(|w| w.namespace),
            Some(Some("a:b".into()))
        );
        assert_eq!(wanted(":x"), None);
        assert_eq!(wanted("***"), None);
    }

    #[test]
    fn invocations_look_like_names() {
        for good in ["deploy", "clean_gone", "plugin:cmd", "a:b:c", "X-1"] {
            assert!(looks_like_invocation(good), "{good}");
        }
        for bad in ["", "etc/passwd", "a::b", ":a", "a:", "a.b", "über"] {
            assert!(!looks_like_invocation(bad), "{bad}");
        }
    }

    #[test]
    fn the_closest_few_are_suggested() {
        let names: Vec<String> = (0..300).map(|i| format!("skill-{i}")).collect();
        let mut all: Vec<&str> = names.iter().map(String::as_str).collect();
        all.extend(["review-pr", "deploy", "git:commit", "other:commit-push"]);
        assert_eq!(closest("reveiw-pr", all.iter().copied()), ["review-pr"]);
        assert_eq!(closest("dep", all.iter().copied()), ["deploy"]);
        assert_eq!(
            closest("commit", all.iter().copied()),
            ["git:commit", "other:commit-push"]
        );
        assert!(closest("skill-1", all.iter().copied()).len() <= MAX_SUGGESTIONS);
        assert!(closest("zzzzzzzz", all.iter().copied()).is_empty());
    }
}
