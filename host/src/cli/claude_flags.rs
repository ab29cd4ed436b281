//! Flags taken as Claude Code takes them: rule lists (`--allowedTools
//! "Read Edit(src/**)"`) and the system prompt's replacement.

use std::str::FromStr;

use super::setup::SessionArgs;
use crate::policy::Rule;

/// A comma- or space-separated list of permission rules, as Claude Code's
/// `--allowedTools` and `--disallowedTools` take them. Separators inside a
/// rule's parentheses belong to the rule (`Bash(git log:*)`).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleList(pub Vec<Rule>);

impl FromStr for RuleList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut rules = Vec::new();
        for item in split_list(s)? {
            let rule = item
                .parse::<Rule>()
                .map_err(|e| format!("`{item}` in the list `{s}`: {e}"))?;
            rules.push(rule);
        }
        if rules.is_empty() {
            return Err("the list names no tool; give rules like \"Read Edit(src/**)\"".into());
        }
        Ok(Self(rules))
    }
}

/// Splits `text` at commas and whitespace outside parentheses.
fn split_list(text: &str) -> Result<Vec<String>, String> {
    let mut items = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => {
                depth += 1;
                current.push(c);
            }
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("`{text}` closes a parenthesis it never opened"))?;
                current.push(c);
            }
            c if depth == 0 && (c == ',' || c.is_whitespace()) => {
                if !current.is_empty() {
                    items.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if depth > 0 {
        return Err(format!("`{text}` leaves a parenthesis open"));
    }
    if !current.is_empty() {
        items.push(current);
    }
    Ok(items)
}

/// The system prompt `--system-prompt` or `--system-prompt-file` puts in
/// place of capstan's own, if either was given.
pub fn system_prompt_override(args: &SessionArgs) -> Result<Option<String>, String> {
    if let Some(text) = &args.system_prompt {
        return Ok(Some(text.clone()));
    }
    let Some(path) = &args.system_prompt_file else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "cannot read the system prompt file {}: {e}; check the path given to --system-prompt-file",
            path.display()
        )
    })?;
    if text.trim().is_empty() {
        return Err(format!(
            "the system prompt file {} is empty; write the prompt in it or drop --system-prompt-file",
            path.display()
        ));
    }
    Ok(Some(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_split_at_commas_and_spaces_outside_parentheses() {
        let list: RuleList = "Read, Edit(src/**)  Bash(git log:*)".parse().unwrap();
        let written: Vec<String> = list.0.iter().map(ToString::to_string).collect();
        assert_eq!(written, ["Read", "Edit(src/**)", "Bash(git log:*)"]);
    }

    #[test]
    fn unbalanced_or_empty_lists_are_refused() {
        assert!("Bash(git log".parse::<RuleList>().is_err());
        assert!("Read)".parse::<RuleList>().is_err());
        assert!(" , ".parse::<RuleList>().is_err());
    }
}
