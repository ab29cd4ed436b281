//! `fs.glob`: find files by name pattern.

use std::fs;
use std::ops::ControlFlow;
use std::path::Path;

use capstan_sdk::prelude::*;

use crate::glob_pattern;
use crate::input_field;
use crate::walk;
use crate::workspace_path;

/// Paths returned when the input gives no `limit`.
const DEFAULT_LIMIT: usize = 1000;

/// Input of `fs.glob`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GlobInput {
    /// The pattern, matched against paths relative to `path`. `*` and `?`
    /// stay within one folder level, `**` spans any number of folders, and
    /// `{a,b}` is either. `**/*.rs` finds Rust files at any depth; `*.rs`
    /// only those directly in `path`.
    pattern: String,
    /// The folder to search, relative to the workspace. Default: the
    /// whole workspace.
    path: Option<String>,
    /// The most paths to return. Default: 1000.
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

const DESCRIPTION: &str = "Finds files whose path matches a glob pattern such as `**/*.rs` or \
`src/**/test_*.py`, and lists them (and matching symbolic links) relative to the workspace, \
sorted. Skips the .git folder and files ignored by .gitignore or .ignore files. Use it to find files by name; use fs.grep to \
find files by content.";

/// The `fs.glob` tool.
pub fn tool() -> Tool {
    Tool::new("glob", DESCRIPTION, glob)
        .read_only()
        .idempotent()
}

fn glob(input: GlobInput, ctx: &Context) -> Result<String, ToolError> {
    let limit = input_field::at_least_one("limit", input.limit, DEFAULT_LIMIT)?;
    let workspace = ctx.workspace()?;
    let root = workspace_path::resolve(ctx, "path", input.path.as_deref().unwrap_or("."))?;
    let pattern = relative_pattern(&input.pattern, &root.path)?;
    let matcher = glob_pattern::compile("pattern", pattern)?;
    match fs::metadata(&root.path) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(ToolError::failed(format!(
                "{} is a file; fs.glob searches a folder, so give its folder as `path`",
                root.shown
            )));
        }
        Err(err) => {
            return Err(ToolError::from_io(
                &err,
                format!("cannot search {}", root.shown),
            ));
        }
    }

    let mut found: Vec<String> = Vec::new();
    let mut more = false;
    let walked = walk::visit_files(&root.path, workspace, |file, _kind| {
        let relative = file.strip_prefix(&root.path).unwrap_or(file);
        if !matcher.is_match(relative) {
            return ControlFlow::Continue(());
        }
        if found.len() == limit {
            more = true;
            return ControlFlow::Break(());
        }
        found.push(ctx.display(file));
        ControlFlow::Continue(())
    });

    let mut out = if found.is_empty() {
        no_match_message(&input.pattern, pattern, &root.shown)
    } else {
        found.join("\n")
    };
    if more {
        out.push_str(&format!(
            "\n(showing the first {limit} matches; there are more: narrow the pattern or \
             path, or raise limit)"
        ));
    }
    if walked.unreadable > 0 {
        out.push_str(&format!(
            "\n(skipped {} entries that could not be read)",
            walked.unreadable
        ));
    }
    Ok(out)
}

/// The pattern relative to the searched folder: a leading `./` is dropped,
/// and an absolute pattern inside the folder is made relative to it.
fn relative_pattern<'a>(pattern: &'a str, root: &Path) -> Result<&'a str, ToolError> {
    let mut rest = pattern;
    while let Some(stripped) = rest.strip_prefix("./") {
        rest = stripped;
    }
    if rest.starts_with('/') {
        let inside = root
            .to_str()
            .and_then(|root| rest.strip_prefix(root))
            .and_then(|below| below.strip_prefix('/'));
        return inside.ok_or_else(|| {
            ToolError::invalid_input(format!(
                "field `pattern`: {pattern} is absolute; give a pattern relative to the \
                 searched folder, such as **/*.rs, and the folder as `path`"
            ))
        });
    }
    if rest.is_empty() {
        return Err(ToolError::invalid_input(
            "field `pattern` is empty; give a glob such as **/*.rs",
        ));
    }
    Ok(rest)
}

/// Says plainly that nothing matched, with a hint for the usual mistake.
fn no_match_message(original: &str, pattern: &str, shown_root: &str) -> String {
    let mut message = format!(
        "No files match `{original}` in {shown_root} (the .git folder and ignored files are \
         not searched)."
    );
    if !pattern.contains('/') && !pattern.starts_with("**") {
        message.push_str(&format!(
            " `{pattern}` matches only files directly in {shown_root}; use `**/{pattern}` to \
             search subfolders too."
        ));
    }
    message
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn workspace() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            ".gitignore",
            "Cargo.toml",
            "src/main.rs",
            "src/lib.rs",
            "src/net/http.rs",
            "target/debug/build.rs",
            "docs/guide.md",
        ] {
            let path = dir.path().join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, "").unwrap();
        }
        fs::write(dir.path().join(".gitignore"), "target/\n").unwrap();
        dir
    }

    fn run(dir: &Path, input: &str) -> Result<String, ToolError> {
        crate::run_in_workspace::run_text(&tool(), dir, input)
    }

    #[test]
    fn double_star_matches_at_any_depth_and_skips_ignored_files() {
        let dir = workspace();
        assert_eq!(
            run(dir.path(), r#"{"pattern":"**/*.rs"}"#).unwrap(),
            "src/lib.rs\nsrc/main.rs\nsrc/net/http.rs"
        );
    }

    #[test]
    fn a_single_star_stays_in_one_folder() {
        let dir = workspace();
        assert_eq!(
            run(dir.path(), r#"{"pattern":"*.rs","path":"src"}"#).unwrap(),
            "src/lib.rs\nsrc/main.rs"
        );
        let none = run(dir.path(), r#"{"pattern":"*.rs"}"#).unwrap();
        assert!(none.starts_with("No files match `*.rs` in ."), "{none}");
        assert!(none.contains("use `**/*.rs`"), "{none}");
    }

    #[test]
    fn the_limit_truncates_with_a_note() {
        let dir = workspace();
        let out = run(dir.path(), r#"{"pattern":"**/*","limit":2}"#).unwrap();
        assert_eq!(
            out,
            ".gitignore\nCargo.toml\n(showing the first 2 matches; there are more: narrow \
             the pattern or path, or raise limit)"
        );
    }

    #[test]
    fn absolute_patterns_inside_the_folder_become_relative() {
        let root = PathBuf::from("/ws/src");
        assert_eq!(
            relative_pattern("/ws/src/**/*.rs", &root).unwrap(),
            "**/*.rs"
        );
        assert_eq!(relative_pattern("./*.rs", &root).unwrap(), "*.rs");
        assert!(relative_pattern("/etc/*", &root).is_err());
        assert!(relative_pattern("", &root).is_err());
    }

    #[test]
    fn bad_patterns_and_file_roots_are_refused() {
        let dir = workspace();
        let err = run(dir.path(), r#"{"pattern":"src/[a"}"#).unwrap_err();
        assert!(
            matches!(&err, ToolError::InvalidInput(m) if m.starts_with("field `pattern`")),
            "{err:?}"
        );
        let err = run(dir.path(), r#"{"pattern":"*","path":"Cargo.toml"}"#).unwrap_err();
        assert!(matches!(err, ToolError::Failed(_)));
        let err = run(dir.path(), r#"{"pattern":"*","path":"nope"}"#).unwrap_err();
        assert_eq!(
            err,
            ToolError::failed("cannot search nope: no such file or folder")
        );
    }
}
