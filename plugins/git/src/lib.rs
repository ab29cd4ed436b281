//! capstan's first-party git tools: `git.status`, `git.diff`, `git.log`,
//! `git.show`, `git.add` and `git.commit`.
//!
//! Each tool builds an argument list for git and runs it through the
//! `capstan:plugin/exec` interface: git runs in capstan's OS sandbox, with
//! only the argument patterns the plugin's `exec` grant lists, the
//! workspace read-only and — for `add` and `commit` only — `.git` writable.
//! Revisions are checked not to look like options, and paths always come
//! after `--`, so no input can become an option git did not expect.

use capstan_sdk::exec::{Command, Outcome};
use capstan_sdk::prelude::*;

/// The tools this plugin offers.
fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "status",
            "Shows the working tree status: the branch, and which files are staged, changed or untracked (git status --short --branch).",
            status,
        )
        .read_only()
        .idempotent(),
        Tool::new(
            "diff",
            "Shows changes as a unified diff: unstaged changes by default, staged ones with `staged`, or between revisions with `rev` (such as `HEAD~3` or `main..feature`).",
            diff,
        )
        .read_only()
        .idempotent(),
        Tool::new(
            "log",
            "Shows the commit history, newest first, one commit per line by default.",
            log,
        )
        .read_only()
        .idempotent(),
        Tool::new(
            "show",
            "Shows one commit (its message and diff), or a file as it was at a revision with `path`.",
            show,
        )
        .read_only()
        .idempotent(),
        Tool::new(
            "add",
            "Stages files for the next commit (git add -- PATHS); `.` stages everything under the workspace, deletions included.",
            add,
        )
        .idempotent(),
        Tool::new(
            "commit",
            "Records the staged changes as a commit with the given message; with `all`, changes to tracked files are staged first (git commit -a).",
            commit,
        ),
    ]
}

capstan_sdk::export_tools!(tools);

/// Input of `git.status`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StatusInput {
    /// Only these paths (relative to the workspace); all when empty.
    #[serde(default)]
    paths: Vec<String>,
}

/// Input of `git.diff`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DiffInput {
    /// Show what is staged for the next commit instead of unstaged changes.
    #[serde(default)]
    staged: bool,
    /// A revision or range to compare (`HEAD~1`, `main..feature`); the
    /// working tree against the index when absent.
    rev: Option<String>,
    /// Only these paths; all when empty.
    #[serde(default)]
    paths: Vec<String>,
    /// Only the summary of changed files and line counts (--stat).
    #[serde(default)]
    stat: bool,
    /// Lines of context around each change (default 3).
    context: Option<u32>,
}

/// Input of `git.log`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LogInput {
    /// How many commits at most (default 20).
    max_count: Option<u32>,
    /// A revision or range (`main`, `v1.0..HEAD`); the current branch when
    /// absent.
    rev: Option<String>,
    /// Only commits touching these paths.
    #[serde(default)]
    paths: Vec<String>,
    /// Full messages with author and date instead of one line per commit.
    #[serde(default)]
    full: bool,
}

/// Input of `git.show`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ShowInput {
    /// The revision (default `HEAD`).
    rev: Option<String>,
    /// Show this file as it was at `rev` instead of the commit.
    path: Option<String>,
    /// Only the summary of changed files (--stat).
    #[serde(default)]
    stat: bool,
}

/// Input of `git.add`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddInput {
    /// The files or folders to stage (`.` for everything).
    paths: Vec<String>,
}

/// Input of `git.commit`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CommitInput {
    /// The commit message: a short subject line, then a blank line and the
    /// body if any.
    message: String,
    /// Stage changes to tracked files first (git commit -a).
    #[serde(default)]
    all: bool,
    /// Commit only these paths (their current content), leaving other
    /// staged changes for later.
    #[serde(default)]
    paths: Vec<String>,
}

fn status(input: StatusInput, _ctx: &Context) -> Result<String, ToolError> {
    let mut args = strings(&["status", "--short", "--branch"]);
    with_paths(&mut args, &input.paths);
    let out = git(&args, None)?;
    Ok(if out.trim().is_empty() {
        "nothing to report".to_string()
    } else {
        out
    })
}

fn diff(input: DiffInput, _ctx: &Context) -> Result<String, ToolError> {
    let mut args = strings(&["diff", "--no-color", "--no-ext-diff", "--no-textconv"]);
    if input.staged {
        args.push("--cached".into());
    }
    if input.stat {
        args.push("--stat".into());
    }
    if let Some(lines) = input.context {
        args.push(format!("--unified={lines}"));
    }
    if let Some(rev) = &input.rev {
        args.push(revision("rev", rev)?);
    }
    with_paths(&mut args, &input.paths);
    let out = git(&args, None)?;
    Ok(if out.trim().is_empty() {
        "no differences".to_string()
    } else {
        out
    })
}

fn log(input: LogInput, _ctx: &Context) -> Result<String, ToolError> {
    let count = input.max_count.unwrap_or(20).clamp(1, 1000);
    let mut args = strings(&["log", "--no-color", "--no-ext-diff"]);
    args.push(format!("--max-count={count}"));
    args.push(if input.full {
        "--format=medium".into()
    } else {
        "--format=%h %ad %an: %s".into()
    });
    args.push("--date=short".into());
    if let Some(rev) = &input.rev {
        args.push(revision("rev", rev)?);
    }
    with_paths(&mut args, &input.paths);
    git(&args, None)
}

fn show(input: ShowInput, _ctx: &Context) -> Result<String, ToolError> {
    let rev = revision("rev", input.rev.as_deref().unwrap_or("HEAD"))?;
    let mut args = strings(&["show", "--no-color", "--no-ext-diff", "--no-textconv"]);
    match &input.path {
        // `REV:PATH` begins with the checked revision: never an option.
        Some(path) => args.push(format!("{rev}:{}", path.trim_start_matches("./"))),
        None => {
            if input.stat {
                args.push("--stat".into());
            }
            args.push(rev);
        }
    }
    git(&args, None)
}

fn add(input: AddInput, _ctx: &Context) -> Result<String, ToolError> {
    if input.paths.is_empty() {
        return Err(ToolError::invalid_input(
            "field `paths`: name the files or folders to stage (`.` for everything)",
        ));
    }
    let mut args = strings(&["add", "--"]);
    args.extend(input.paths.iter().cloned());
    git(&args, None)?;
    let summary = git(&strings(&["status", "--short", "--branch"]), None)?;
    Ok(format!("staged {}\n{summary}", input.paths.join(", ")))
}

fn commit(input: CommitInput, _ctx: &Context) -> Result<String, ToolError> {
    if input.message.trim().is_empty() {
        return Err(ToolError::invalid_input(
            "field `message`: write a commit message",
        ));
    }
    // The message goes through standard input (`-F -`), so no text of it
    // can be read as an option.
    let mut args = strings(&["commit", "-F", "-"]);
    if input.all {
        args.push("--all".into());
    }
    if !input.paths.is_empty() {
        args.push("--".into());
        args.extend(input.paths.iter().cloned());
    }
    git(&args, Some(input.message.into_bytes()))
}

/// Runs git with `args` (and `stdin`): its output on success, else an
/// error with what git said.
fn git(args: &[String], stdin: Option<Vec<u8>>) -> Result<String, ToolError> {
    let mut command = Command::new("git").args(args.iter().cloned());
    if let Some(bytes) = stdin {
        command = command.stdin(bytes);
    }
    let outcome = command.run()?;
    finish(args, outcome)
}

fn finish(args: &[String], outcome: Outcome) -> Result<String, ToolError> {
    let subcommand = args.first().map_or("", String::as_str);
    if outcome.timed_out {
        return Err(ToolError::failed(format!(
            "git {subcommand} ran out of time and was stopped"
        )));
    }
    if !outcome.success() {
        let said = [outcome.stderr.trim(), outcome.stdout.trim()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        return Err(ToolError::failed(format!(
            "git {subcommand} failed (exit code {}): {said}",
            outcome.exit_code
        )));
    }
    let mut text = outcome.stdout;
    if !outcome.stderr.trim().is_empty() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(outcome.stderr.trim_end());
    }
    Ok(text)
}

/// A revision from the input: never something git would read as an
/// option.
fn revision(field: &str, rev: &str) -> Result<String, ToolError> {
    let rev = rev.trim();
    if rev.is_empty() || rev.starts_with('-') || rev.contains(char::is_whitespace) {
        return Err(ToolError::invalid_input(format!(
            "field `{field}`: `{rev}` is not a revision (such as HEAD~1, main or v1.0..HEAD)"
        )));
    }
    Ok(rev.to_string())
}

fn strings(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_string()).collect()
}

/// Appends `paths` after `--`, so none is read as an option.
fn with_paths(args: &mut Vec<String>, paths: &[String]) {
    if !paths.is_empty() {
        args.push("--".into());
        args.extend(paths.iter().cloned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_that_look_like_options_are_refused() {
        assert_eq!(revision("rev", "HEAD~1").unwrap(), "HEAD~1");
        assert_eq!(revision("rev", "main..feature").unwrap(), "main..feature");
        for bad in ["--output=/tmp/x", "-p", "", "a b"] {
            assert!(revision("rev", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn paths_come_after_a_double_dash() {
        let mut args = strings(&["status"]);
        with_paths(&mut args, &["--exec=x".to_string()]);
        assert_eq!(args, ["status", "--", "--exec=x"]);
    }

    #[test]
    fn every_tool_has_an_object_schema() {
        let tools = tools();
        let names: Vec<&str> = tools.iter().map(Tool::name).collect();
        assert_eq!(names, ["status", "diff", "log", "show", "add", "commit"]);
        for tool in &tools {
            assert_eq!(tool.input_schema()["type"], "object", "{}", tool.name());
        }
    }
}
