//! A skill's text as the model gets it: arguments substituted, and a note
//! when it holds inline shell commands, which capstan never runs.
//!
//! Substitutions, as in Claude Code:
//!
//! - `$ARGUMENTS`: everything after the skill's name, as typed (quotes
//!   included);
//! - `$ARGUMENTS[N]` and its shorthand `$N`: the N-th argument, counting
//!   from 0 (`$0` is the first), after splitting like a shell would split
//!   words (double or single quotes keep spaces together and are dropped);
//! - `$NAME`, for a name the front matter's `arguments:` declares: the
//!   argument at that name's position;
//! - `${CLAUDE_SKILL_DIR}` and `${CAPSTAN_SKILL_DIR}`: the skill's folder;
//!   `${CLAUDE_PLUGIN_ROOT}`: the plugin's folder for a plugin's skill;
//!   `${CLAUDE_SESSION_ID}`: the session's id.
//!
//! A positional placeholder with no argument for it is left as written,
//! and so is everything that is not a placeholder: `$ARGUMENTS`, `$N` and
//! `$NAME` count only when no letter, digit or `_` follows, so a price
//! such as `$2.5M` changes only when a third argument is given, as in
//! Claude Code. A named argument with no argument for it becomes empty, as
//! it does in Claude Code. A backslash before a placeholder keeps it as
//! written (`\$0` is `$0`, the backslash dropped), with or without
//! arguments: that is how an author writes an awk field or a price that
//! must never change. Nothing is ever run. When arguments were given and
//! no placeholder took one, they are added at the end as `ARGUMENTS: ...`,
//! so they are never lost.

/// What is substituted into a skill's text.
#[derive(Debug, Clone, Default)]
pub struct Substitutions<'a> {
    /// The arguments, as typed.
    pub arguments: &'a str,
    /// Names for the positional arguments (the front matter's
    /// `arguments:`).
    pub names: &'a [String],
    /// The skill's folder, if it has one.
    pub skill_dir: Option<&'a str>,
    /// The plugin's folder, for a plugin's skill.
    pub plugin_root: Option<&'a str>,
    /// The session's id.
    pub session_id: Option<&'a str>,
}

// The SDK's splitting rule, the same file: a skill component's words are
// the words `$0`, `$1`, ... stand for here.
#[path = "../../../sdk/rust/src/arguments.rs"]
mod arguments;

pub use arguments::split as split_arguments;

/// Whether `c` continues a word, so that `$1` or `$name` before it is not
/// a placeholder.
fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The length of the run of ASCII digits at the start of `text`.
fn digits(text: &str) -> usize {
    text.bytes().take_while(u8::is_ascii_digit).count()
}

/// What the placeholder at the start of `tail` (which starts with `$`)
/// stands for: the replacement, if there is one, how many bytes it spans,
/// and whether it is an argument placeholder.
fn placeholder(
    tail: &str,
    words: &[String],
    subs: &Substitutions<'_>,
) -> (Option<String>, usize, bool) {
    let word_at = |index: &str| {
        index
            .parse::<usize>()
            .ok()
            .and_then(|i| words.get(i))
            .cloned()
    };
    if let Some(after) = tail.strip_prefix("$ARGUMENTS[") {
        let n = digits(after);
        if n > 0 && after.as_bytes().get(n) == Some(&b']') {
            let len = "$ARGUMENTS[".len() + n + 1;
            return (word_at(&after[..n]), len, true);
        }
    }
    if let Some(after) = tail.strip_prefix("$ARGUMENTS")
        && !after.bytes().next().is_some_and(is_word)
    {
        return (
            Some(subs.arguments.trim().to_string()),
            "$ARGUMENTS".len(),
            true,
        );
    }
    let after = &tail[1..];
    let n = digits(after);
    if n > 0 {
        if after.as_bytes().get(n).copied().is_some_and(is_word) {
            return (None, 1 + n, false);
        }
        return (word_at(&after[..n]), 1 + n, true);
    }
    // A declared name, the longest that fits (names may hold `-`, as in
    // `$old-name`), not followed by more of a word.
    let named = subs
        .names
        .iter()
        .enumerate()
        .filter(|(_, name)| {
            !name.is_empty()
                && after.starts_with(name.as_str())
                && !after
                    .as_bytes()
                    .get(name.len())
                    .copied()
                    .is_some_and(is_word)
        })
        .max_by_key(|(_, name)| name.len());
    if let Some((position, name)) = named {
        let value = words.get(position).cloned().unwrap_or_default();
        return (Some(value), 1 + name.len(), true);
    }
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
        Some((token, Some(value))) => (Some((*value).to_string()), token.len(), false),
        _ => (None, 1, false),
    }
}

/// `body` with the substitutions made.
pub fn substitute(body: &str, subs: &Substitutions<'_>) -> String {
    let words = split_arguments(subs.arguments);
    let arguments = subs.arguments.trim();
    let mut out = String::with_capacity(body.len() + arguments.len());
    let mut took_arguments = false;
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        let tail = &rest[at..];
        let (replacement, consumed, is_argument) = placeholder(tail, &words, subs);
        if is_argument && rest[..at].ends_with('\\') {
            // An escaped placeholder: kept as written, without the
            // backslash.
            out.push_str(&rest[..at - 1]);
            out.push_str(&tail[..consumed]);
            rest = &tail[consumed..];
            continue;
        }
        out.push_str(&rest[..at]);
        match replacement {
            Some(text) => {
                // A named argument with none for it is empty, and took
                // nothing.
                took_arguments |= is_argument && !text.is_empty();
                out.push_str(&text);
            }
            None => out.push_str(&tail[..consumed]),
        }
        rest = &tail[consumed..];
    }
    out.push_str(rest);
    if !took_arguments && !arguments.is_empty() {
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
    super::inline_shell::replace(body, &mut |command| {
        found.push(command.to_string());
        String::new()
    });
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

    fn named(body: &str, arguments: &str, names: &[&str]) -> String {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        substitute(
            body,
            &Substitutions {
                arguments,
                names: &names,
                ..Substitutions::default()
            },
        )
    }

    /// Claude Code's argument rules, case by case: the body, the
    /// arguments as typed, the names the front matter declares, and the
    /// text Claude Code makes of them. `just compat` prints how many
    /// capstan makes identically.
    const CLAUDE_CODE_CASES: &[(&str, &str, &[&str], &str)] = &[
        // `$ARGUMENTS` is the text as typed, quotes kept.
        (
            "All: $ARGUMENTS.",
            "\"Acme Robotics\" logistics",
            &[],
            "All: \"Acme Robotics\" logistics.",
        ),
        ("[$ARGUMENTS]", "", &[], "[]"),
        // `$N` and `$ARGUMENTS[N]` count from 0, after shell-style splitting.
        ("$0 and $1", "a b", &[], "a and b"),
        ("$ARGUMENTS[0]/$ARGUMENTS[1]", "\"a b\" c", &[], "a b/c"),
        ("$0|$1", "'one two' three", &[], "one two|three"),
        ("$10", "a b c d e f g h i j k", &[], "k"),
        // A positional with no argument for it stays as written.
        (
            "First: $0. Third: $ARGUMENTS[2].",
            "",
            &[],
            "First: $0. Third: $ARGUMENTS[2].",
        ),
        ("$0 then $2", "a", &[], "a then $2"),
        // Text that is not a placeholder never changes.
        ("Year 2: $2.5M ARR", "", &[], "Year 2: $2.5M ARR"),
        ("up from $1k, $0", "x y", &[], "up from $1k, x"),
        ("$0 at $HOME", "x", &[], "x at $HOME"),
        ("$2.5M", "a b c", &[], "c.5M"),
        // Named arguments take their position; a missing one is empty.
        (
            "$company in $market",
            "Acme logistics",
            &["company", "market"],
            "Acme in logistics",
        ),
        ("[$company]", "", &["company"], "[]"),
        // A backslash keeps a placeholder as written.
        ("\\$0 is $0", "a", &[], "$0 is a"),
        // No placeholder: the arguments are added at the end.
        (
            "Summarise.",
            "src/ --short",
            &[],
            "Summarise.\n\nARGUMENTS: src/ --short\n",
        ),
    ];

    #[test]
    fn arguments_follow_claude_codes_rules_case_by_case() {
        let mut differ = Vec::new();
        for (body, arguments, names, expected) in CLAUDE_CODE_CASES {
            let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            let got = substitute(
                body,
                &Substitutions {
                    arguments,
                    names: &names,
                    ..Substitutions::default()
                },
            );
            if got != *expected {
                differ.push(format!(
                    "{body:?} with {arguments:?}: {got:?}, not {expected:?}"
                ));
            }
        }
        println!(
            "arguments identical to Claude Code's rules: {} of {} cases",
            CLAUDE_CODE_CASES.len() - differ.len(),
            CLAUDE_CODE_CASES.len()
        );
        assert!(differ.is_empty(), "{differ:#?}");
    }

    #[test]
    fn arguments_is_the_raw_text() {
        assert_eq!(
            with_args("Review PR $ARGUMENTS now.", "123 \"fast please\""),
            "Review PR 123 \"fast please\" now."
        );
        assert_eq!(with_args("[$ARGUMENTS]", ""), "[]");
        assert_eq!(with_args("no placeholders", ""), "no placeholders");
    }

    #[test]
    fn positions_count_from_zero() {
        assert_eq!(
            with_args("first=$0 second=$1 third=$2.", "a \"b c\" 'd'"),
            "first=a second=b c third=d."
        );
        assert_eq!(with_args("$ARGUMENTS[0]/$ARGUMENTS[1]", "x y"), "x/y");
        let ten = "a b c d e f g h i j k";
        assert_eq!(with_args("$10 and $ARGUMENTS[10]", ten), "k and k");
    }

    #[test]
    fn a_missing_positional_is_left_as_written() {
        assert_eq!(
            with_args("first=$0 second=$1 third=$ARGUMENTS[2]", "only"),
            "first=only second=$1 third=$ARGUMENTS[2]"
        );
        assert_eq!(with_args("$0 $1", ""), "$0 $1");
    }

    #[test]
    fn text_that_is_not_a_placeholder_never_changes() {
        let pitch = "Year 2: $2.5M ARR, costs $10, $1k budget, $ alone, $HOME, $ARGUMENTSX";
        assert_eq!(with_args(pitch, ""), pitch);
        assert_eq!(
            with_args("costs $1k and $", "a"),
            "costs $1k and $\n\nARGUMENTS: a\n"
        );
        // As in Claude Code, `$2` before `.` is a placeholder when there
        // is a third argument.
        assert_eq!(with_args("Year 2: $2.5M", "a b c"), "Year 2: c.5M");
    }

    #[test]
    fn unused_arguments_are_appended() {
        assert_eq!(
            with_args("Deploy it.", "staging --dry-run"),
            "Deploy it.\n\nARGUMENTS: staging --dry-run\n"
        );
        // A placeholder that took nothing does not count as using them.
        assert_eq!(
            with_args("Second: $1.", "one"),
            "Second: $1.\n\nARGUMENTS: one\n"
        );
        assert_eq!(with_args("First: $0.", "one two"), "First: one.");
    }

    #[test]
    fn named_arguments_stand_for_their_position() {
        let names = ["component", "from", "to"];
        assert_eq!(
            named(
                "Move $component from $from to $to ($0).",
                "SearchBar React",
                &names
            ),
            "Move SearchBar from React to  (SearchBar)."
        );
        // Only whole words, and only declared names.
        assert_eq!(
            named("$components $component_x $other $component", "Bar", &names),
            "$components $component_x $other Bar"
        );
        // A named argument with nothing for it is empty, as in Claude
        // Code (a positional one stays as written).
        assert_eq!(named("[$component] [$0]", "", &names), "[] [$0]");
        assert_eq!(
            named("to=[$to]", "a b", &names),
            "to=[]\n\nARGUMENTS: a b\n"
        );
    }

    #[test]
    fn named_arguments_may_hold_dashes_and_the_longest_name_wins() {
        let names = ["old", "old-name", "new-name"];
        assert_eq!(
            named("$old-name -> $new-name ($old)", "Foo Bar Baz", &names),
            "Bar -> Baz (Foo)"
        );
        assert_eq!(named("$old-names", "Foo Bar", &names), "Foo-names");
    }

    #[test]
    fn a_backslash_keeps_a_placeholder_as_written() {
        let names = ["issue"];
        let body = r"awk '{print \$0}' costs \$1.50, \$ARGUMENTS[0] \$ARGUMENTS \$issue, but $0";
        assert_eq!(
            named(body, "x y", &names),
            r"awk '{print $0}' costs $1.50, $ARGUMENTS[0] $ARGUMENTS $issue, but x"
        );
        // Without arguments too; a backslash before anything else stays.
        assert_eq!(
            named(r"\$0 \$1k \$HOME C:\dir", "", &names),
            r"$0 \$1k \$HOME C:\dir"
        );
    }

    #[test]
    fn folders_and_session_are_substituted() {
        assert_eq!(
            substitute(
                "see ${CLAUDE_SKILL_DIR}/ref.md and ${CLAUDE_PLUGIN_ROOT} in ${CLAUDE_SESSION_ID}",
                &Substitutions {
                    skill_dir: Some("/s"),
                    session_id: Some("abc"),
                    ..Substitutions::default()
                }
            ),
            "see /s/ref.md and ${CLAUDE_PLUGIN_ROOT} in abc"
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
