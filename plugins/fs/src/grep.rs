//! `fs.grep`: search file contents with a regular expression.

use std::fs;
use std::ops::ControlFlow;
use std::path::Path;

use capstan_sdk::prelude::*;
use globset::GlobSet;
use regex::{Regex, RegexBuilder};

use crate::glob_pattern;
use crate::input_field;
use crate::lines::{self, MAX_OUTPUT_BYTES};
use crate::text_file::{self, Contents, LoadError};
use crate::walk::{self, FileKind};
use crate::workspace_path;

/// Matching lines shown when the input gives no `max_results`.
const DEFAULT_MAX_RESULTS: usize = 200;

/// Input of `fs.grep`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GrepInput {
    /// A regular expression in Rust regex syntax (as in ripgrep), matched
    /// against each line on its own: `fn \w+\(`, `TODO|FIXME`, `^use `.
    /// Escape regex characters to match them literally: `foo\(\)`. `\w`,
    /// `\d`, `\s` and `(?i)` are Unicode-aware; `\p{..}` classes are not
    /// supported.
    pattern: String,
    /// The file or folder to search, relative to the workspace. Default:
    /// the whole workspace.
    path: Option<String>,
    /// Search only files matching this glob. Without a `/` it matches file
    /// names at any depth (`*.rs`, `*.{ts,tsx}`); with one it matches paths
    /// relative to `path` (`src/**/*.rs`).
    glob: Option<String>,
    /// Lines to show before and after each matching line. Default: 0.
    context: Option<usize>,
    /// Ignore case when matching. Default: false.
    #[serde(default)]
    case_insensitive: bool,
    /// Stop after this many matching lines. Default: 200.
    #[schemars(range(min = 1))]
    max_results: Option<usize>,
}

const DESCRIPTION: &str = "Searches file contents for a regular expression (Rust regex \
syntax, like ripgrep) and prints each matching line as `path:LINE:text`; with `context`, \
surrounding lines are printed as `path-LINE-text` and separate groups with `--`. Searches a \
file or a folder (default: the whole workspace), skipping binary files, the .git folder and \
files ignored by .gitignore or .ignore; `glob` narrows it to some files. Matches one line at \
a time. Use it to find where something is defined or used, then fs.read to see more.";

/// The `fs.grep` tool.
pub fn tool() -> Tool {
    Tool::new("grep", DESCRIPTION, grep)
        .read_only()
        .idempotent()
}

fn grep(input: GrepInput, ctx: &Context) -> Result<String, ToolError> {
    let max_results =
        input_field::at_least_one("max_results", input.max_results, DEFAULT_MAX_RESULTS)?;
    let search = Search::new(&input.pattern, input.case_insensitive)?;
    let filter = input.glob.as_deref().map(FileFilter::new).transpose()?;
    let workspace = ctx.workspace()?;
    let root = workspace_path::resolve(ctx, "path", input.path.as_deref().unwrap_or("."))?;
    let root_is_folder = match fs::metadata(&root.path) {
        Ok(meta) => meta.is_dir(),
        Err(err) => {
            return Err(ToolError::from_io(
                &err,
                format!("cannot search {}", root.shown),
            ));
        }
    };
    let mut report = Report::new(input.context.unwrap_or(0), max_results);

    if root_is_folder {
        let walked = walk::visit_files(&root.path, workspace, |file, kind| {
            // Links are not followed, as in ripgrep: what they point to is
            // searched where it lies, if it lies in the searched folder.
            if kind == FileKind::SymbolicLink {
                return ControlFlow::Continue(());
            }
            let relative = file.strip_prefix(&root.path).unwrap_or(file);
            if filter
                .as_ref()
                .is_some_and(|filter| !filter.accepts(relative))
            {
                return ControlFlow::Continue(());
            }
            match text_file::load(file) {
                Ok(Contents::Text(text)) => report.search_file(&ctx.display(file), &text, &search),
                Ok(Contents::Binary { .. }) => {
                    report.binary_skipped += 1;
                    ControlFlow::Continue(())
                }
                Err(_) => {
                    report.unreadable += 1;
                    ControlFlow::Continue(())
                }
            }
        });
        report.unreadable += walked.unreadable;
    } else {
        // A file named as `path` is searched whatever `glob` says.
        match text_file::load(&root.path) {
            Ok(Contents::Text(text)) => {
                let _ = report.search_file(&root.shown, &text, &search);
            }
            Ok(Contents::Binary { size }) => {
                return Err(ToolError::failed(format!(
                    "{} is a binary file ({size} bytes); fs.grep searches text files only",
                    root.shown
                )));
            }
            Err(LoadError::Folder) => {}
            Err(LoadError::NotRegular(what)) => {
                return Err(ToolError::failed(format!("{} is {what}", root.shown)));
            }
            Err(LoadError::Io(err)) => {
                return Err(ToolError::from_io(
                    &err,
                    format!("cannot read {}", root.shown),
                ));
            }
        }
    }
    Ok(report.finish(&input.pattern, input.glob.as_deref(), &root.shown))
}

/// The compiled pattern.
struct Search {
    /// Matches one line.
    line: Regex,
    /// Matches a whole file when some line of it may match: `^` and `$`
    /// match at line breaks. Files it rejects are not split into lines.
    file: Regex,
}

impl Search {
    fn new(pattern: &str, case_insensitive: bool) -> Result<Self, ToolError> {
        let build = |multi_line: bool| {
            RegexBuilder::new(pattern)
                .case_insensitive(case_insensitive)
                .multi_line(multi_line)
                .crlf(multi_line)
                .build()
                .map_err(|err| {
                    let hint = if pattern.contains(r"\p{") || pattern.contains(r"\P{") {
                        "\nUnicode classes such as \\p{L} are not supported; use \\w or a \
                         character range instead."
                    } else {
                        ""
                    };
                    ToolError::invalid_input(format!(
                        "field `pattern` is not a valid regex: {err}{hint}"
                    ))
                })
        };
        Ok(Self {
            line: build(false)?,
            file: build(true)?,
        })
    }
}

/// Which files a `glob` lets through.
struct FileFilter {
    matcher: GlobSet,
    /// A glob without `/` is matched against the file name alone.
    name_only: bool,
}

impl FileFilter {
    fn new(glob: &str) -> Result<Self, ToolError> {
        let glob = glob.strip_prefix("./").unwrap_or(glob);
        let matcher = glob_pattern::compile("glob", glob)?;
        Ok(Self {
            matcher,
            name_only: !glob.contains('/'),
        })
    }

    /// Whether a file at `relative` (to the searched folder) is searched.
    fn accepts(&self, relative: &Path) -> bool {
        if self.name_only {
            relative
                .file_name()
                .is_some_and(|name| self.matcher.is_match(name))
        } else {
            self.matcher.is_match(relative)
        }
    }
}

/// The output of a search, built as files are searched.
struct Report {
    out: String,
    context: usize,
    max_results: usize,
    /// Matching lines found so far.
    matches: usize,
    /// Whether a group of lines has been printed, so the next
    /// non-adjacent group needs a `--` before it.
    printed_group: bool,
    /// Why the search stopped early, if it did.
    stopped: Option<Stop>,
    binary_skipped: usize,
    unreadable: usize,
}

/// Why a search stopped before the end.
enum Stop {
    MaxResults,
    OutputFull,
}

impl Report {
    fn new(context: usize, max_results: usize) -> Self {
        Self {
            out: String::new(),
            context,
            max_results,
            matches: 0,
            printed_group: false,
            stopped: None,
            binary_skipped: 0,
            unreadable: 0,
        }
    }

    /// Adds the matches in one file's `text`, with their context. Breaks
    /// when the search should stop.
    fn search_file(&mut self, shown: &str, text: &str, search: &Search) -> ControlFlow<()> {
        if !search.file.is_match(text) {
            return ControlFlow::Continue(());
        }
        let file_lines: Vec<&str> = lines::numbered(text).map(|(_, line, _)| line).collect();
        let budget = self.max_results - self.matches;
        let hits: Vec<usize> = file_lines
            .iter()
            .enumerate()
            .filter(|(_, line)| search.line.is_match(line))
            .map(|(index, _)| index)
            .take(budget)
            .collect();
        // The next line index not yet printed for this file.
        let mut next = 0;
        for (nth, &hit) in hits.iter().enumerate() {
            let start = hit.saturating_sub(self.context).max(next);
            let end = hit.saturating_add(self.context).min(file_lines.len() - 1);
            let starts_group = nth == 0 || start > next;
            if self.context > 0 && self.printed_group && starts_group {
                self.out.push_str("--\n");
            }
            for (index, line) in file_lines.iter().enumerate().take(end + 1).skip(start) {
                let is_match = index == hit || search.line.is_match(line);
                if self.push_line(shown, index + 1, line, is_match).is_break() {
                    return ControlFlow::Break(());
                }
            }
            self.printed_group = true;
            next = end + 1;
        }
        self.matches += hits.len();
        if self.matches >= self.max_results {
            self.stopped = Some(Stop::MaxResults);
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    /// Prints one line as `path:N:text` (a match) or `path-N-text`
    /// (context); breaks when the output is full.
    fn push_line(
        &mut self,
        shown: &str,
        number: usize,
        line: &str,
        is_match: bool,
    ) -> ControlFlow<()> {
        let line_start = self.out.len();
        let separator = if is_match { ':' } else { '-' };
        self.out.push_str(shown);
        self.out.push(separator);
        lines::push_number(&mut self.out, number);
        self.out.push(separator);
        lines::push_clipped(&mut self.out, line);
        self.out.push('\n');
        if self.out.len() > MAX_OUTPUT_BYTES {
            self.out.truncate(line_start);
            self.stopped = Some(Stop::OutputFull);
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    /// The text returned to the model.
    fn finish(mut self, pattern: &str, glob: Option<&str>, shown_root: &str) -> String {
        if self.out.is_empty() {
            self.out = format!("No lines match `{pattern}` in {shown_root}");
            if let Some(glob) = glob {
                self.out.push_str(&format!(" (files matching `{glob}`)"));
            }
            self.out.push('.');
        } else {
            // Drop the last line break: notes follow on their own lines.
            self.out.pop();
        }
        match self.stopped {
            Some(Stop::MaxResults) => self.out.push_str(&format!(
                "\n(stopped at max_results={} matching lines; narrow the pattern, path or \
                 glob, or raise max_results)",
                self.max_results
            )),
            Some(Stop::OutputFull) => self.out.push_str(&format!(
                "\n(output cut at {} KiB; narrow the pattern, path or glob)",
                MAX_OUTPUT_BYTES / 1024
            )),
            None => {}
        }
        if self.binary_skipped > 0 {
            let files = if self.binary_skipped == 1 {
                "file"
            } else {
                "files"
            };
            self.out.push_str(&format!(
                "\n(skipped {} binary {files})",
                self.binary_skipped
            ));
        }
        if self.unreadable > 0 {
            self.out.push_str(&format!(
                "\n(skipped {} entries that could not be read)",
                self.unreadable
            ));
        }
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(files: &[(&str, &[u8])]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in files {
            let path = dir.path().join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, bytes).unwrap();
        }
        dir
    }

    fn run(dir: &Path, input: &str) -> Result<String, ToolError> {
        crate::run_in_workspace::run_text(&tool(), dir, input)
    }

    const TEN_LINES: &[u8] =
        b"one\nHIT two\nthree\nHIT four\nfive\nsix\nseven\neight\nHIT nine\nten\n";

    #[test]
    fn matches_print_as_path_line_text() {
        let dir = workspace(&[("a.txt", TEN_LINES)]);
        assert_eq!(
            run(dir.path(), r#"{"pattern":"HIT"}"#).unwrap(),
            "a.txt:2:HIT two\na.txt:4:HIT four\na.txt:9:HIT nine"
        );
    }

    #[test]
    fn context_lines_merge_into_groups_split_by_dashes() {
        let dir = workspace(&[("a.txt", TEN_LINES)]);
        assert_eq!(
            run(dir.path(), r#"{"pattern":"HIT","context":1}"#).unwrap(),
            "a.txt-1-one\na.txt:2:HIT two\na.txt-3-three\na.txt:4:HIT four\na.txt-5-five\n\
             --\na.txt-8-eight\na.txt:9:HIT nine\na.txt-10-ten"
        );
    }

    #[test]
    fn groups_in_different_files_are_split_by_dashes() {
        let dir = workspace(&[("a.txt", b"x\nHIT\n"), ("b.txt", b"HIT\ny\n")]);
        assert_eq!(
            run(dir.path(), r#"{"pattern":"HIT","context":1}"#).unwrap(),
            "a.txt-1-x\na.txt:2:HIT\n--\nb.txt:1:HIT\nb.txt-2-y"
        );
        assert_eq!(
            run(dir.path(), r#"{"pattern":"HIT"}"#).unwrap(),
            "a.txt:2:HIT\nb.txt:1:HIT"
        );
    }

    #[test]
    fn max_results_stops_with_a_note() {
        let dir = workspace(&[("a.txt", TEN_LINES), ("b.txt", b"HIT\n")]);
        assert_eq!(
            run(dir.path(), r#"{"pattern":"HIT","max_results":2}"#).unwrap(),
            "a.txt:2:HIT two\na.txt:4:HIT four\n(stopped at max_results=2 matching lines; \
             narrow the pattern, path or glob, or raise max_results)"
        );
    }

    #[test]
    fn anchors_and_case_work_per_line() {
        let dir = workspace(&[("a.rs", b"fn main() {}\r\n  fn inner() {}\r\nFN LOUD\r\n")]);
        assert_eq!(
            run(dir.path(), r#"{"pattern":"^fn \\w+\\(\\) \\{\\}$"}"#).unwrap(),
            "a.rs:1:fn main() {}"
        );
        assert_eq!(
            run(dir.path(), r#"{"pattern":"^fn","case_insensitive":true}"#).unwrap(),
            "a.rs:1:fn main() {}\na.rs:3:FN LOUD"
        );
    }

    #[test]
    fn globs_filter_by_name_or_by_path() {
        let dir = workspace(&[
            ("src/a.rs", b"HIT\n"),
            ("src/b.py", b"HIT\n"),
            ("tests/c.rs", b"HIT\n"),
        ]);
        assert_eq!(
            run(dir.path(), r#"{"pattern":"HIT","glob":"*.rs"}"#).unwrap(),
            "src/a.rs:1:HIT\ntests/c.rs:1:HIT"
        );
        assert_eq!(
            run(dir.path(), r#"{"pattern":"HIT","glob":"src/**/*.rs"}"#).unwrap(),
            "src/a.rs:1:HIT"
        );
        assert_eq!(
            run(dir.path(), r#"{"pattern":"HIT","path":"tests"}"#).unwrap(),
            "tests/c.rs:1:HIT"
        );
    }

    #[test]
    fn binary_ignored_and_linked_files_are_skipped() {
        let dir = workspace(&[
            (".gitignore", b"out/\n"),
            ("out/gen.txt", b"HIT\n"),
            ("img.bin", b"HIT\0\n"),
            ("a.txt", b"HIT\n"),
        ]);
        #[cfg(unix)]
        std::os::unix::fs::symlink("a.txt", dir.path().join("b-link.txt")).unwrap();
        assert_eq!(
            run(dir.path(), r#"{"pattern":"HIT"}"#).unwrap(),
            "a.txt:1:HIT\n(skipped 1 binary file)"
        );
        let err = run(dir.path(), r#"{"pattern":"HIT","path":"img.bin"}"#).unwrap_err();
        assert!(matches!(err, ToolError::Failed(m) if m.contains("binary file")));
    }

    #[test]
    fn no_match_is_a_plain_statement() {
        let dir = workspace(&[("a.txt", b"nothing\n")]);
        assert_eq!(
            run(dir.path(), r#"{"pattern":"HIT","glob":"*.txt"}"#).unwrap(),
            "No lines match `HIT` in . (files matching `*.txt`)."
        );
    }

    #[test]
    fn bad_regexes_and_globs_name_their_field() {
        let dir = workspace(&[]);
        let err = run(dir.path(), r#"{"pattern":"fn ("}"#).unwrap_err();
        assert!(
            matches!(&err, ToolError::InvalidInput(m) if m.starts_with("field `pattern` is not a valid regex")),
            "{err:?}"
        );
        let err = run(dir.path(), r#"{"pattern":"\\p{Greek}"}"#).unwrap_err();
        assert!(
            matches!(&err, ToolError::InvalidInput(m) if m.contains("Unicode classes such as")),
            "{err:?}"
        );
        let err = run(dir.path(), r#"{"pattern":"x","glob":"[a"}"#).unwrap_err();
        assert!(
            matches!(&err, ToolError::InvalidInput(m) if m.starts_with("field `glob`")),
            "{err:?}"
        );
    }
}
