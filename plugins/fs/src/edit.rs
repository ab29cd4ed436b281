//! `fs.edit`: replace an exact piece of text in a file.

use capstan_sdk::prelude::*;

use crate::atomic;
use crate::text_file::{self, Refusals};
use crate::workspace_path;

/// Input of `fs.edit`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EditInput {
    /// The file to change, relative to the workspace (or absolute inside it).
    path: String,
    /// The exact text to replace, as it is in the file: same indentation,
    /// same line breaks, without the line numbers fs.read adds. It must occur
    /// exactly once unless `replace_all` is set; include surrounding lines to
    /// make it unique.
    old: String,
    /// The text to put in its place.
    new: String,
    /// Replace every occurrence of `old` instead of requiring exactly one.
    /// Default: false.
    #[serde(default)]
    replace_all: bool,
}

const DESCRIPTION: &str = "Replaces an exact piece of text in a file: `old` must occur exactly \
once (or set `replace_all` to replace every occurrence) and is replaced by `new`. Matching is \
exact, whitespace included, so copy `old` from a recent fs.read without its line-number prefix. \
Writes the file atomically. To create a file or replace it whole, use fs.write.";

/// The `fs.edit` tool.
pub fn tool() -> Tool {
    Tool::new("edit", DESCRIPTION, edit)
}

fn edit(input: EditInput, ctx: &Context) -> Result<String, ToolError> {
    if input.old.is_empty() {
        return Err(ToolError::invalid_input(
            "field `old` is empty; give the exact text to replace (to write a whole file, use fs.write)",
        ));
    }
    if input.old == input.new {
        return Err(ToolError::invalid_input(
            "fields `old` and `new` are the same, so nothing would change",
        ));
    }
    let target = workspace_path::resolve(ctx, "path", &input.path)?;
    let shown = &target.shown;
    // Held from the read to the rename: another session's edit of the file
    // in between fails instead of being overwritten.
    let _lock = atomic::lock_file(&target.path, shown)?;
    let text = text_file::load_text(
        &target,
        &Refusals {
            binary: "fs.edit changes text files only",
            folder: "fs.edit changes a file",
            missing: Some("to create a file, use fs.write"),
        },
    )?;
    let (edited, replaced) = match replace(&text, &input.old, &input.new, input.replace_all) {
        Ok(done) => done,
        Err(Miss::NotFound) => {
            let hint = near_miss_hint(&text, &input.old).unwrap_or(
                "Read the file again with fs.read (it may have changed) and copy the text exactly.",
            );
            return Err(ToolError::failed(format!(
                "`old` was not found in {shown}. {hint}"
            )));
        }
        Err(Miss::Ambiguous(count)) => {
            return Err(ToolError::failed(format!(
                "`old` was found {count} times in {shown}; include more surrounding text to \
                 make it unique, or set replace_all to replace every occurrence"
            )));
        }
    };
    atomic::replace_file(
        ctx,
        &target.path,
        edited.as_bytes(),
        shown,
        Some(text.as_bytes()),
    )?;
    let occurrences = if replaced == 1 {
        "occurrence"
    } else {
        "occurrences"
    };
    Ok(format!("Replaced {replaced} {occurrences} in {shown}"))
}

/// Why `old` could not be replaced.
#[derive(Debug, PartialEq, Eq)]
enum Miss {
    /// It does not occur.
    NotFound,
    /// It occurs this many times and only one was allowed.
    Ambiguous(usize),
}

/// Replaces `old` with `new` in `text`: the one occurrence, or all of them
/// if `replace_all`. Returns the new text and how many were replaced.
fn replace(text: &str, old: &str, new: &str, replace_all: bool) -> Result<(String, usize), Miss> {
    let count = text.matches(old).count();
    match count {
        0 => Err(Miss::NotFound),
        1 => Ok((text.replacen(old, new, 1), 1)),
        _ if replace_all => Ok((text.replace(old, new), count)),
        _ => Err(Miss::Ambiguous(count)),
    }
}

/// Says why `old` may have missed when it nearly matches: line numbers
/// copied from fs.read, other line endings, or other whitespace.
fn near_miss_hint(text: &str, old: &str) -> Option<&'static str> {
    if starts_lines_with_numbers(old) {
        return Some(
            "Its lines seem to start with the line numbers fs.read shows; leave out each \
             number and the tab after it.",
        );
    }
    if !old.contains('\r') && old.contains('\n') && text.contains(&old.replace('\n', "\r\n")) {
        return Some(
            "It does occur with \\r\\n line endings, which this file uses: write the line \
             breaks in `old` and `new` as \\r\\n.",
        );
    }
    if old.contains("\r\n") && text.contains(&old.replace("\r\n", "\n")) {
        return Some(
            "It does occur with \\n line endings, which this file uses: write the line \
             breaks in `old` and `new` as \\n.",
        );
    }
    let wanted = collapse_whitespace(old);
    if !wanted.is_empty() && collapse_whitespace(text).contains(&wanted) {
        return Some(
            "A text differing only in whitespace (indentation, spaces, tabs or line breaks) \
             does occur; read the file again with fs.read and copy it exactly.",
        );
    }
    None
}

/// Whether every non-blank line of `text` starts like an fs.read line:
/// spaces, digits, a tab.
fn starts_lines_with_numbers(text: &str) -> bool {
    let mut any = false;
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let rest = line.trim_start_matches(' ');
        let after_digits = rest.trim_start_matches(|c: char| c.is_ascii_digit());
        if after_digits.len() == rest.len() || !after_digits.starts_with('\t') {
            return false;
        }
        any = true;
    }
    any
}

/// `text` with every run of whitespace turned into one space, and none at
/// either end.
fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;

    use super::*;

    #[test]
    fn a_single_occurrence_is_replaced() {
        assert_eq!(
            replace("a b c", "b", "x", false),
            Ok(("a x c".to_string(), 1))
        );
    }

    #[test]
    fn several_occurrences_need_replace_all() {
        assert_eq!(replace("b b b", "b", "x", false), Err(Miss::Ambiguous(3)));
        assert_eq!(
            replace("b b b", "b", "x", true),
            Ok(("x x x".to_string(), 3))
        );
        assert_eq!(replace("abc", "z", "x", true), Err(Miss::NotFound));
    }

    #[test]
    fn occurrences_are_counted_without_overlap() {
        assert_eq!(replace("aaaa", "aa", "b", true), Ok(("bb".to_string(), 2)));
    }

    #[test]
    fn near_misses_get_a_hint() {
        let crlf = "fn a() {\r\n    1\r\n}\r\n";
        assert!(
            near_miss_hint(crlf, "{\n    1\n}")
                .unwrap()
                .contains("\\r\\n line endings")
        );
        let lf = "fn a() {\n    1\n}\n";
        assert!(
            near_miss_hint(lf, "{\r\n    1\r\n}")
                .unwrap()
                .contains("\\n line endings")
        );
        assert!(
            near_miss_hint(lf, "{\n  1\n}")
                .unwrap()
                .contains("whitespace")
        );
        assert!(
            near_miss_hint(lf, "     2\t    1\n     3\t}")
                .unwrap()
                .contains("line numbers")
        );
        assert_eq!(near_miss_hint(lf, "fn b()"), None);
    }

    fn run(dir: &Path, input: &str) -> Result<Output, ToolError> {
        let ctx = Context {
            call_id: "c1".to_string(),
            workspace: Some(dir.to_path_buf()),
            ..Context::default()
        };
        tool().run(input, &ctx)
    }

    #[test]
    fn edits_a_file_and_reports_the_count() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.rs");
        fs::write(&path, "let x = 1;\nlet y = 1;\n").unwrap();
        let err = run(dir.path(), r#"{"path":"a.rs","old":"= 1","new":"= 2"}"#).unwrap_err();
        assert_eq!(
            err,
            ToolError::failed(
                "`old` was found 2 times in a.rs; include more surrounding text to make it \
                 unique, or set replace_all to replace every occurrence"
            )
        );
        let out = run(
            dir.path(),
            r#"{"path":"a.rs","old":"= 1","new":"= 2","replace_all":true}"#,
        )
        .unwrap();
        assert_eq!(out, Output::text("Replaced 2 occurrences in a.rs"));
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "let x = 2;\nlet y = 2;\n"
        );
        let out = run(dir.path(), r#"{"path":"a.rs","old":"x = 2","new":"x = 3"}"#).unwrap();
        assert_eq!(out, Output::text("Replaced 1 occurrence in a.rs"));
    }

    #[test]
    fn bad_inputs_are_refused_before_touching_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = run(dir.path(), r#"{"path":"a.rs","old":"","new":"x"}"#).unwrap_err();
        assert!(matches!(err, ToolError::InvalidInput(m) if m.starts_with("field `old`")));
        let err = run(dir.path(), r#"{"path":"a.rs","old":"x","new":"x"}"#).unwrap_err();
        assert!(matches!(err, ToolError::InvalidInput(_)));
        let err = run(dir.path(), r#"{"path":"a.rs","old":"x","new":"y"}"#).unwrap_err();
        assert_eq!(
            err,
            ToolError::failed("a.rs does not exist; to create a file, use fs.write")
        );
    }

    #[test]
    fn a_missing_text_is_a_failure_with_a_hint() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.rs"), "fn a() {\n    1\n}\n").unwrap();
        let err = run(dir.path(), r#"{"path":"a.rs","old":"{\n  1","new":"x"}"#).unwrap_err();
        assert!(
            matches!(&err, ToolError::Failed(m) if m.starts_with("`old` was not found in a.rs. A text differing only in whitespace")),
            "{err:?}"
        );
    }

    #[test]
    fn binary_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("b.bin"), b"a\0b").unwrap();
        let err = run(dir.path(), r#"{"path":"b.bin","old":"a","new":"c"}"#).unwrap_err();
        assert_eq!(
            err,
            ToolError::failed("b.bin is a binary file (3 bytes); fs.edit changes text files only")
        );
    }
}
