//! `fs.read`: a text file with line numbers.

use capstan_sdk::prelude::*;

use crate::input_field;
use crate::lines::{self, MAX_OUTPUT_BYTES};
use crate::text_file::{self, Refusals};
use crate::workspace_path;

/// Lines shown when the input gives no `limit`.
const DEFAULT_LIMIT: usize = 2000;

/// Width of the line-number column, as in `cat -n`.
const NUMBER_WIDTH: usize = 6;

/// Input of `fs.read`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadInput {
    /// The file to read, relative to the workspace (or absolute inside it,
    /// or inside another folder granted read-only, such as an installed
    /// plugin's files a skill names).
    path: String,
    /// The first line to show, counting from 1. Default: 1.
    #[schemars(range(min = 1))]
    offset: Option<usize>,
    /// How many lines to show. Default: 2000.
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

const DESCRIPTION: &str = "Reads a text file and shows its lines numbered like `cat -n`: \
the line number, a tab, then the line. Shows up to 2000 lines from `offset` (default 1); \
for a longer file it says which lines it showed and the `offset` to read on. \
Lines over 2000 characters are cut, and output stops at 256 KiB. \
The line numbers and tab are not part of the file: leave them out when quoting text to fs.edit. \
Refuses binary files. Use fs.ls for folders and fs.grep to find where something is.";

/// The `fs.read` tool.
pub fn tool() -> Tool {
    Tool::new("read", DESCRIPTION, read)
        .read_only()
        .idempotent()
}

fn read(input: ReadInput, ctx: &Context) -> Result<String, ToolError> {
    let first = match input.offset {
        Some(0) => {
            return Err(ToolError::invalid_input(
                "field `offset`: lines are numbered from 1; use offset 1 for the first line",
            ));
        }
        Some(offset) => offset,
        None => 1,
    };
    let limit = input_field::at_least_one("limit", input.limit, DEFAULT_LIMIT)?;
    let target = workspace_path::resolve_readable(ctx, "path", &input.path)?;
    let text = text_file::load_text(
        &target,
        &Refusals {
            binary: "fs.read shows text files only",
            folder: "use fs.ls to list it",
            missing: None,
        },
    )?;
    number_lines(&text, &target.shown, first, limit, MAX_OUTPUT_BYTES)
}

/// Shows `limit` lines of `text` from line `first`, numbered, in at most
/// about `max_bytes`, with a note when more remains.
fn number_lines(
    text: &str,
    shown: &str,
    first: usize,
    limit: usize,
    max_bytes: usize,
) -> Result<String, ToolError> {
    if text.is_empty() {
        return Ok(format!("({shown} is empty)"));
    }
    let total = lines::count(text);
    if first > total {
        let lines_word = if total == 1 { "line" } else { "lines" };
        return Err(ToolError::failed(format!(
            "offset {first} is past the end of {shown}, which has {total} {lines_word}; \
             use an offset from 1 to {total}"
        )));
    }
    let wanted_last = first.saturating_add(limit - 1).min(total);
    let mut out = String::with_capacity((text.len() + text.len() / 4 + 64).min(max_bytes + 1024));
    let mut last_shown = first - 1;
    let mut cut = false;
    let mut crlf = false;
    for (number, line, ends_in_crlf) in lines::numbered(text)
        .skip(first - 1)
        .take(wanted_last + 1 - first)
    {
        let line_start = out.len();
        lines::push_number_right_aligned(&mut out, number, NUMBER_WIDTH);
        out.push('\t');
        lines::push_clipped(&mut out, line);
        out.push('\n');
        if out.len() > max_bytes {
            out.truncate(line_start);
            cut = true;
            break;
        }
        crlf |= ends_in_crlf;
        last_shown = number;
    }
    if cut {
        out.push_str(&format!(
            "\n(output cut at {} KiB after line {last_shown} of {total}; \
             use offset={} to read on, with a smaller limit)",
            max_bytes / 1024,
            last_shown + 1
        ));
    } else if last_shown < total {
        out.push_str(&format!(
            "\n(lines {first}-{last_shown} of {total}; use offset={} to read more)",
            last_shown + 1
        ));
    }
    if crlf {
        out.push_str("\n(this file ends its lines with \\r\\n; the \\r are not shown)");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn numbered(text: &str, first: usize, limit: usize) -> String {
        number_lines(text, "a.txt", first, limit, MAX_OUTPUT_BYTES).unwrap()
    }

    #[test]
    fn lines_are_numbered_like_cat_n() {
        assert_eq!(numbered("a\nb\n", 1, 10), "     1\ta\n     2\tb\n");
        assert_eq!(
            numbered("a\n\nc", 1, 10),
            "     1\ta\n     2\t\n     3\tc\n"
        );
    }

    #[test]
    fn a_partial_range_says_how_to_read_on() {
        let text = "1\n2\n3\n4\n5\n";
        assert_eq!(
            numbered(text, 2, 2),
            "     2\t2\n     3\t3\n\n(lines 2-3 of 5; use offset=4 to read more)"
        );
        assert_eq!(numbered(text, 4, 100), "     4\t4\n     5\t5\n");
    }

    #[test]
    fn an_offset_past_the_end_names_the_line_count() {
        let err = number_lines("a\nb\n", "a.txt", 3, 10, MAX_OUTPUT_BYTES).unwrap_err();
        assert_eq!(
            err,
            ToolError::failed(
                "offset 3 is past the end of a.txt, which has 2 lines; use an offset from 1 to 2"
            )
        );
    }

    #[test]
    fn an_empty_file_says_so() {
        assert_eq!(numbered("", 1, 10), "(a.txt is empty)");
    }

    #[test]
    fn output_past_the_cap_is_cut_at_a_line_with_a_note() {
        let text = "0123456789\n".repeat(200);
        // Each shown line takes 6 + 1 + 10 + 1 = 18 bytes; 2 KiB hold 113.
        let out = number_lines(&text, "a.txt", 1, 2000, 2048).unwrap();
        assert!(out.contains("   113\t0123456789\n\n(output cut at 2 KiB after line 113 of 200"));
        assert!(
            out.ends_with("use offset=114 to read on, with a smaller limit)"),
            "{out}"
        );
        assert!(!out.contains("   114\t"));
    }

    #[test]
    fn crlf_files_are_shown_without_the_cr_and_noted() {
        assert_eq!(
            numbered("a\r\nb\r\n", 1, 10),
            "     1\ta\n     2\tb\n\n(this file ends its lines with \\r\\n; the \\r are not shown)"
        );
    }

    fn run(input: &str, files: &[(&str, &[u8])]) -> Result<Output, ToolError> {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in files {
            let path = dir.path().join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, bytes).unwrap();
        }
        let ctx = Context {
            workspace: Some(dir.path().to_path_buf()),
            ..Context::default()
        };
        tool().run(input, &ctx)
    }

    #[test]
    fn reads_a_file_in_the_workspace() {
        let out = run(r#"{"path":"src/a.rs"}"#, &[("src/a.rs", b"fn main() {}\n")]).unwrap();
        assert_eq!(out, Output::text("     1\tfn main() {}\n"));
    }

    #[test]
    fn refuses_binary_files_and_folders() {
        let png: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        let err = run(r#"{"path":"x.png"}"#, &[("x.png", png), ("src/a", b"")]).unwrap_err();
        assert_eq!(
            err,
            ToolError::failed("x.png is a binary file (16 bytes); fs.read shows text files only")
        );
        let err = run(r#"{"path":"src"}"#, &[("src/a", b"")]).unwrap_err();
        assert_eq!(
            err,
            ToolError::failed("src is a folder; use fs.ls to list it")
        );
    }

    #[test]
    fn a_missing_file_or_a_zero_offset_is_an_error() {
        let err = run(r#"{"path":"nope.txt"}"#, &[]).unwrap_err();
        assert_eq!(
            err,
            ToolError::failed("cannot read nope.txt: no such file or folder")
        );
        let err = run(r#"{"path":"a","offset":0}"#, &[("a", b"x")]).unwrap_err();
        assert!(matches!(err, ToolError::InvalidInput(m) if m.starts_with("field `offset`")));
    }

    #[test]
    fn paths_outside_the_workspace_are_denied() {
        let err = run(r#"{"path":"../etc/passwd"}"#, &[]).unwrap_err();
        assert!(matches!(err, ToolError::Denied(_)), "{err:?}");
    }
}
