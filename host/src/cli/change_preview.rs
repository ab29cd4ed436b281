//! What a file-changing call would do, shown as a unified diff: in a
//! permission question, before the user answers.
//!
//! A call is a file change when its input has a `path` and either a
//! `content` (a whole-file write) or `old` and `new` (an exact replacement,
//! optionally `replace_all`) — the shape of `fs.write` and `fs.edit`, and
//! of any plugin tool that takes the same fields.

use std::path::Path;

use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use super::escape;
use super::render::Style;
use crate::untrusted_folder::UntrustedFolder;

/// How many lines of a new file, or of a diff, are shown.
const SHOWN_LINES: usize = 40;

/// How many unchanged lines surround each change.
const CONTEXT_LINES: usize = 3;

/// What a call would do to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The file does not exist yet; this is its content.
    Create {
        /// The path as the call gives it.
        path: String,
        /// The new file's text.
        content: String,
    },
    /// The file changes from `before` to `after`.
    Modify {
        /// The path as the call gives it.
        path: String,
        /// The text now (or the replaced text, when the file could not be
        /// read).
        before: String,
        /// The text after the call.
        after: String,
        /// Whether the whole file is compared (else only the replaced
        /// text, without line numbers of the file).
        whole_file: bool,
    },
}

impl Change {
    /// The change a call with `input` would make, reading the file's
    /// current text with `read` (relative to the workspace); `None` when
    /// the input is not a file change.
    pub fn of_call(input: &Value, read: impl Fn(&str) -> Option<String>) -> Option<Change> {
        let path = input.get("path")?.as_str()?.to_string();
        if let Some(content) = input.get("content").and_then(Value::as_str) {
            return Some(match read(&path) {
                Some(before) => Change::Modify {
                    path,
                    before,
                    after: content.to_string(),
                    whole_file: true,
                },
                None => Change::Create {
                    path,
                    content: content.to_string(),
                },
            });
        }
        let old = input.get("old")?.as_str()?;
        let new = input.get("new")?.as_str()?;
        let replace_all = input
            .get("replace_all")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let whole = read(&path).filter(|text| !old.is_empty() && text.contains(old));
        Some(match whole {
            Some(before) => {
                let after = if replace_all {
                    before.replace(old, new)
                } else {
                    before.replacen(old, new, 1)
                };
                Change::Modify {
                    path,
                    before,
                    after,
                    whole_file: true,
                }
            }
            None => Change::Modify {
                path,
                before: old.to_string(),
                after: new.to_string(),
                whole_file: false,
            },
        })
    }

    /// The path the change is to.
    pub fn path(&self) -> &str {
        match self {
            Change::Create { path, .. } | Change::Modify { path, .. } => path,
        }
    }

    /// One line saying what happens: "new file, 12 lines", "3 lines
    /// added, 1 removed".
    pub fn summary(&self) -> String {
        match self {
            Change::Create { content, .. } => {
                format!("new file, {}", plural(content.lines().count(), "line"))
            }
            Change::Modify { before, after, .. } => {
                let (added, removed) = counts(before, after);
                if added == 0 && removed == 0 {
                    "no change to the text".to_string()
                } else {
                    format!(
                        "{} added, {} removed",
                        plural(added, "line"),
                        plural(removed, "line")
                    )
                }
            }
        }
    }

    /// The change as lines for the terminal: a new file's first lines
    /// marked `+`, or a unified diff with `@@` hunk headers; coloured when
    /// `style` is. Control characters in the text are shown escaped.
    pub fn render(&self, style: Style) -> Vec<String> {
        self.render_at_most(style, SHOWN_LINES)
    }

    /// Lines added and removed.
    pub fn counts(&self) -> (usize, usize) {
        match self {
            Change::Create { content, .. } => (content.lines().count(), 0),
            Change::Modify { before, after, .. } => counts(before, after),
        }
    }

    /// [`Change::render`], showing at most `shown_lines` lines of text and
    /// saying how many more there are.
    pub fn render_at_most(&self, style: Style, shown_lines: usize) -> Vec<String> {
        let mut lines = Vec::new();
        match self {
            Change::Create { content, .. } => {
                let total = content.lines().count();
                for (n, line) in content.lines().take(shown_lines).enumerate() {
                    lines.push(style.green(&format!("{:>4} + {}", n + 1, escape::text(line))));
                }
                if total > shown_lines {
                    lines.push(style.dim(&format!("     … {}", more_lines(total - shown_lines))));
                }
            }
            Change::Modify {
                before,
                after,
                whole_file,
                ..
            } => {
                let diff = TextDiff::from_lines(before.as_str(), after.as_str());
                let mut shown = 0;
                let mut hidden = 0;
                for group in diff.grouped_ops(CONTEXT_LINES) {
                    let (Some(first), Some(last)) = (group.first(), group.last()) else {
                        continue;
                    };
                    let old = first.old_range().start..last.old_range().end;
                    let new = first.new_range().start..last.new_range().end;
                    let header = if *whole_file {
                        format!(
                            "@@ -{},{} +{},{} @@",
                            old.start + 1,
                            old.len(),
                            new.start + 1,
                            new.len()
                        )
                    } else {
                        "@@ the replaced text @@".to_string()
                    };
                    if shown < shown_lines {
                        lines.push(style.cyan(&header));
                    }
                    for op in &group {
                        for change in diff.iter_changes(op) {
                            if shown >= shown_lines {
                                hidden += 1;
                                continue;
                            }
                            shown += 1;
                            let text = escape::text(change.value().trim_end_matches(['\n', '\r']));
                            let line = match change.tag() {
                                ChangeTag::Delete => style.red(&format!("- {text}")),
                                ChangeTag::Insert => style.green(&format!("+ {text}")),
                                ChangeTag::Equal => style.dim(&format!("  {text}")),
                            };
                            lines.push(line);
                        }
                    }
                }
                if hidden > 0 {
                    lines.push(style.dim(&format!("  … {}", more_lines(hidden))));
                }
            }
        }
        lines
    }
}

/// Reads a workspace file's text for a preview: `path` relative to
/// `workspace` (or absolute inside it); `None` when it cannot be read, is
/// not beneath the workspace (links included), is not a regular file or is
/// larger than [`PREVIEW_READ_CAP`].
pub fn read_for_preview(workspace: &Path, path: &str) -> Option<String> {
    let path = Path::new(path);
    let relative = match path.strip_prefix(workspace) {
        Ok(inside) => inside,
        Err(_) if path.is_absolute() => return None,
        Err(_) => path,
    };
    let folder = UntrustedFolder::open(workspace).ok()??;
    let read = folder.read(relative, PREVIEW_READ_CAP).ok()??;
    if read.more {
        return None;
    }
    Some(read.text())
}

/// The most a preview reads of a file.
const PREVIEW_READ_CAP: usize = 4 * 1024 * 1024;

/// Lines added and removed between two texts.
fn counts(before: &str, after: &str) -> (usize, usize) {
    let diff = TextDiff::from_lines(before, after);
    let mut added = 0;
    let mut removed = 0;
    for change in diff.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => added += 1,
            ChangeTag::Delete => removed += 1,
            ChangeTag::Equal => {}
        }
    }
    (added, removed)
}

/// "1 more line", "5 more lines".
fn more_lines(n: usize) -> String {
    if n == 1 {
        "1 more line".to_string()
    } else {
        format!("{n} more lines")
    }
}

fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn plain() -> Style {
        Style::new(false)
    }

    #[test]
    fn a_write_to_a_missing_file_is_a_new_file_shown_with_its_first_lines() {
        let input = json!({ "path": "src/new.rs", "content": "fn a() {}\nfn b() {}\n" });
        let change = Change::of_call(&input, |_| None).unwrap();
        assert_eq!(change.summary(), "new file, 2 lines");
        assert_eq!(
            change.render(plain()),
            vec!["   1 + fn a() {}", "   2 + fn b() {}"]
        );
    }

    #[test]
    fn a_long_new_file_is_cut_with_a_count() {
        let content: String = (1..=100).map(|n| format!("line {n}\n")).collect();
        let input = json!({ "path": "big.txt", "content": content });
        let lines = Change::of_call(&input, |_| None).unwrap().render(plain());
        assert_eq!(lines.len(), SHOWN_LINES + 1);
        assert_eq!(lines.last().unwrap(), "     … 60 more lines");
    }

    #[test]
    fn an_edit_is_a_unified_diff_against_the_file_with_its_line_numbers() {
        let file: String = (1..=10).map(|n| format!("line {n}\n")).collect();
        let input = json!({ "path": "a.txt", "old": "line 6\n", "new": "line six\nline 6b\n" });
        let change = Change::of_call(&input, |_| Some(file.clone())).unwrap();
        assert_eq!(change.summary(), "2 lines added, 1 line removed");
        assert_eq!(
            change.render(plain()),
            vec![
                "@@ -3,7 +3,8 @@",
                "  line 3",
                "  line 4",
                "  line 5",
                "- line 6",
                "+ line six",
                "+ line 6b",
                "  line 7",
                "  line 8",
                "  line 9",
            ]
        );
    }

    #[test]
    fn an_edit_of_an_unreadable_file_shows_the_replaced_text() {
        let input = json!({ "path": "gone.txt", "old": "a\n", "new": "b\n" });
        let change = Change::of_call(&input, |_| None).unwrap();
        assert_eq!(
            change.render(plain()),
            vec!["@@ the replaced text @@", "- a", "+ b"]
        );
    }

    #[test]
    fn replace_all_changes_every_occurrence() {
        let input = json!({ "path": "a.txt", "old": "x", "new": "y", "replace_all": true });
        let change = Change::of_call(&input, |_| Some("x\nx\n".into())).unwrap();
        assert_eq!(change.summary(), "2 lines added, 2 lines removed");
    }

    #[test]
    fn overwriting_a_file_diffs_against_it() {
        let input = json!({ "path": "a.txt", "content": "one\ntwo\n" });
        let change = Change::of_call(&input, |_| Some("one\n".into())).unwrap();
        assert_eq!(
            change.render(plain()),
            vec!["@@ -1,1 +1,2 @@", "  one", "+ two"]
        );
    }

    #[test]
    fn colour_and_escapes() {
        let input = json!({ "path": "a.txt", "content": "\u{1b}]52;c;bad\u{7}\n" });
        let lines = Change::of_call(&input, |_| None)
            .unwrap()
            .render(Style::new(true));
        assert_eq!(lines.len(), 1);
        let inner = lines[0]
            .strip_prefix("\u{1b}[32m")
            .and_then(|l| l.strip_suffix("\u{1b}[0m"))
            .unwrap();
        assert!(inner.starts_with("   1 + "), "{inner}");
        assert!(!inner.chars().any(char::is_control), "{inner:?}");
        assert!(inner.contains("]52;c;bad"), "{inner}");
    }

    #[test]
    fn a_long_diff_is_cut_at_the_limit_with_a_count() {
        let before: String = (1..=50).map(|n| format!("line {n}\n")).collect();
        let change = Change::Modify {
            path: "a.txt".into(),
            after: before.replace("line ", "row "),
            before,
            whole_file: true,
        };
        assert_eq!(change.counts(), (50, 50));
        let lines = change.render_at_most(plain(), 10);
        assert_eq!(lines.len(), 12, "{lines:?}");
        assert_eq!(lines[0], "@@ -1,50 +1,50 @@");
        assert_eq!(lines[1], "- line 1");
        assert_eq!(lines.last().unwrap(), "  … 90 more lines");
        let created = Change::Create {
            path: "b.txt".into(),
            content: "a\nb\n".into(),
        };
        assert_eq!(created.counts(), (2, 0));
    }

    #[test]
    fn other_inputs_are_not_file_changes() {
        assert_eq!(Change::of_call(&json!({ "pattern": "x" }), |_| None), None);
        assert_eq!(Change::of_call(&json!({ "path": "a" }), |_| None), None);
    }
}
