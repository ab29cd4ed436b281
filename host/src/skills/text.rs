//! A skill's text as the model gets it: arguments substituted, and a note
//! when it holds inline shell commands, which capstan never runs.
//!
//! Substitutions, as in Claude Code:
//!
//! - `$ARGUMENTS`: everything after the skill's name, as typed;
//! - `$ARGUMENTS[N]`: the N-th argument, counting from 0;
//! - `$1` .. `$9`: the first to ninth argument (so `$1` is `$ARGUMENTS[0]`);
//! - `${CLAUDE_SKILL_DIR}` and `${CAPSTAN_SKILL_DIR}`: the skill's folder;
//!   `${CLAUDE_PLUGIN_ROOT}`: the plugin's folder for a plugin's skill;
//!   `${CLAUDE_SESSION_ID}`: the session's id.
//!
//! Arguments are split like a shell would split words (double or single
//! quotes keep spaces together), but nothing is ever run. When the text
//! uses no `$ARGUMENTS` or `$N` and arguments were given, they are added at
//! the end as `ARGUMENTS: ...`.

/// What is substituted into a skill's text.
#[derive(Debug, Clone, Default)]
pub struct Substitutions<'a> {
    /// The arguments, as typed.
    pub arguments: &'a str,
    /// The skill's folder, if it has one.
    pub skill_dir: Option<&'a str>,
    /// The plugin's folder, for a plugin's skill.
    pub plugin_root: Option<&'a str>,
    /// The session's id.
    pub session_id: Option<&'a str>,
}

// The SDK's splitting rule, the same file: a skill component's words are
// the words `$1` .. `$9` stand for here.
#[path = "../../../sdk/rust/src/arguments.rs"]
mod arguments;

pub use arguments::split as split_arguments;

/// `body` with the substitutions made.
pub fn substitute(body: &str, subs: &Substitutions<'_>) -> String {
    let words = split_arguments(subs.arguments);
    let arguments = subs.arguments.trim();
    let mut out = String::with_capacity(body.len() + arguments.len());
    let mut used_arguments = false;
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let (replacement, consumed) = if let Some(after) = tail.strip_prefix("$ARGUMENTS[") {
            match after.find(']').and_then(|end| {
                after[..end]
                    .parse::<usize>()
                    .ok()
                    .map(|n| (n, end + "$ARGUMENTS[]".len()))
            }) {
                Some((index, len)) => {
                    used_arguments = true;
                    (Some(words.get(index).cloned().unwrap_or_default()), len)
                }
                None => (None, 1),
            }
        } else if tail.starts_with("$ARGUMENTS") {
            used_arguments = true;
            (Some(arguments.to_string()), "$ARGUMENTS".len())
        } else if let Some(digit) = tail
            .as_bytes()
            .get(1)
            .filter(|b| (b'1'..=b'9').contains(b))
            .filter(|_| !tail.as_bytes().get(2).is_some_and(u8::is_ascii_digit))
        {
            used_arguments = true;
            let index = usize::from(digit - b'1');
            (Some(words.get(index).cloned().unwrap_or_default()), 2)
        } else {
            let named = [
                ("${CLAUDE_SKILL_DIR}", subs.skill_dir),
                ("${CAPSTAN_SKILL_DIR}", subs.skill_dir),
                ("${CLAUDE_PLUGIN_ROOT}", subs.plugin_root),
                ("${CLAUDE_SESSION_ID}", subs.session_id),
            ];
            match named
                .iter()
                .find(|(token, value)| value.is_some() && tail.starts_with(token))
            {
                Some((token, Some(value))) => ((*value).to_string().into(), token.len()),
                _ => (None, 1),
            }
        };
        match replacement {
            Some(text) => out.push_str(&text),
            None => out.push_str(&tail[..consumed]),
        }
        rest = &tail[consumed..];
    }
    out.push_str(rest);
    if !used_arguments && !arguments.is_empty() {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("\nARGUMENTS: ");
        out.push_str(arguments);
        out.push('\n');
    }
    out
}

/// The inline shell commands in a skill's text: `` !`cmd` `` and fenced
/// blocks opened with ```` ```! ````.
pub fn inline_shell(body: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut in_block: Option<String> = None;
    for line in body.lines() {
        let trimmed = line.trim_start();
        if let Some(block) = &mut in_block {
            if trimmed.starts_with("```") {
                found.push(block.trim().to_string());
                in_block = None;
            } else {
                block.push_str(line);
                block.push('\n');
            }
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("```!") {
            in_block = Some(format!("{}\n", rest.trim()).trim_start().to_string());
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("!`") {
            let after = &rest[at + 2..];
            match after.find('`') {
                Some(end) if end > 0 => {
                    found.push(after[..end].to_string());
                    rest = &after[end + 1..];
                }
                _ => break,
            }
        }
    }
    if let Some(block) = in_block {
        found.push(block.trim().to_string());
    }
    found
}

/// The note put before a skill's text when it holds inline shell commands.
pub fn inline_shell_note(commands: &[String], read_tool: &str) -> String {
    let mut note = String::from(
        "Note: this skill contains inline shell commands (written as !`command` or in a ```! block) \
         that Claude Code would run while loading it. capstan never runs them: they were NOT \
         executed, and their output is not included below. Do not assume their results. To get \
         the same information, use your tools instead (for example ",
    );
    note.push_str(read_tool);
    note.push_str(
        " to read a file, or a tool a plugin provides), or ask the user to run the command and \
         share its output. The commands were:\n",
    );
    for command in commands.iter().take(10) {
        let shown: String = command.chars().take(200).collect();
        note.push_str("- `");
        note.push_str(&shown.replace('\n', " ; "));
        note.push_str("`\n");
    }
    if commands.len() > 10 {
        note.push_str(&format!("- ... and {} more\n", commands.len() - 10));
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_args(body: &str, arguments: &str) -> String {
        substitute(
            body,
            &Substitutions {
                arguments,
                ..Substitutions::default()
            },
        )
    }

    #[test]
    fn arguments_are_substituted() {
        assert_eq!(
            with_args("Review PR $ARGUMENTS now.", "123 fast"),
            "Review PR 123 fast now."
        );
        assert_eq!(
            with_args("first=$1 second=$2 third=$3.", "a \"b c\" "),
            "first=a second=b c third=."
        );
        assert_eq!(
            with_args("$ARGUMENTS[0]/$ARGUMENTS[1] $ARGUMENTS[x]", "x y"),
            "x/y $ARGUMENTS[x]"
        );
        assert_eq!(
            with_args("costs $10 and $", "a"),
            "costs $10 and $\n\nARGUMENTS: a\n"
        );
        assert_eq!(with_args("no placeholders", ""), "no placeholders");
        assert_eq!(
            substitute(
                "see ${CLAUDE_SKILL_DIR}/ref.md and ${CLAUDE_PLUGIN_ROOT}",
                &Substitutions {
                    skill_dir: Some("/s"),
                    ..Substitutions::default()
                }
            ),
            "see /s/ref.md and ${CLAUDE_PLUGIN_ROOT}"
        );
    }

    #[test]
    fn inline_shell_is_found() {
        let body = "Status: !`git status`\nand !`touch marker` here\n```!\nls -la\necho hi\n```\n```sh\nnot this\n```\nnot `this` either ! `nor this`\n";
        assert_eq!(
            inline_shell(body),
            ["git status", "touch marker", "ls -la\necho hi"]
        );
        let note = inline_shell_note(&inline_shell(body), "fs__read");
        assert!(note.contains("NOT executed") && note.contains("`touch marker`"));
    }
}
