//! `/init`: the model studies the project and writes an `AGENTS.md` for
//! the agents that work on it later (capstan reads it into every
//! session's prompt). An existing file is only rewritten after the user
//! says so.

use std::path::{Path, PathBuf};

/// The file `/init` writes.
pub const FILE_NAME: &str = "AGENTS.md";

/// What `/init` is about to do.
pub struct InitPlan {
    /// The prompt for the model.
    pub prompt: String,
    /// The file, and its content before (to tell whether it changed).
    path: PathBuf,
    before: Option<Vec<u8>>,
}

/// Prepares `/init` in `workspace`; `confirm` is asked (with a question)
/// before an existing file may be rewritten. `None` when the user said no.
pub fn prepare(workspace: &Path, confirm: impl FnOnce(&str) -> bool) -> Option<InitPlan> {
    let path = workspace.join(FILE_NAME);
    let before = std::fs::read(&path).ok();
    if let Some(existing) = &before {
        let lines = String::from_utf8_lossy(existing).lines().count();
        let question =
            format!("{FILE_NAME} already exists ({lines} lines); let the model rewrite it? [y/N] ");
        if !confirm(&question) {
            eprintln!("{FILE_NAME} left as it is");
            return None;
        }
    }
    Some(InitPlan {
        prompt: prompt(before.is_some()),
        path,
        before,
    })
}

impl InitPlan {
    /// Says what became of the file after the model's turn.
    pub fn report(&self) {
        let after = std::fs::read(&self.path).ok();
        match (&self.before, after) {
            (_, None) => eprintln!(
                "the model did not write {FILE_NAME}; ask it again, or run /init once more"
            ),
            (Some(before), Some(after)) if *before == after => {
                eprintln!("{FILE_NAME} is unchanged")
            }
            (_, Some(after)) => eprintln!(
                "{FILE_NAME} written ({} lines); capstan reads it into every session in this project",
                String::from_utf8_lossy(&after).lines().count()
            ),
        }
    }
}

/// The instruction for the model, in the spirit of Claude Code's `/init`.
pub fn prompt(exists: bool) -> String {
    let mut prompt = String::from(
        "Please analyze this codebase and write an AGENTS.md file in the root of the workspace. \
It will be given to future coding agents (and read by people) working in this repository.\n\
\n\
What to add:\n\
1. The commands used to build, lint and test, and how to run a single test. Take them from \
the build files and CI configuration, not from guesses.\n\
2. The high-level architecture: how the code is organized, the parts that take reading \
several files to understand, and where to look for what.\n\
3. Conventions the project follows that an agent would not guess (code style, error \
handling, how tests are written, commit messages).\n\
\n\
Usage notes:\n\
- Look at the README, the build and CI files, and the main source folders before writing. \
If there is a CLAUDE.md, .cursorrules, .cursor/rules/, or .github/copilot-instructions.md, \
include their important parts.\n\
- Do not repeat yourself, do not list every file or component (they are easy to find), \
and do not include generic advice (\"write tests\", \"handle errors\").\n\
- Do not make up information that is not in the project.\n\
- Keep it short: a page or two of Markdown, starting with:\n\
\n\
```\n\
# AGENTS.md\n\
\n\
This file guides coding agents working in this repository.\n\
```\n\
\n\
Write the file with your file tools.",
    );
    if exists {
        prompt.push_str(
            " An AGENTS.md already exists: read it first, keep what is still true and useful, \
and improve it rather than starting over.",
        );
    }
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_file_is_kept_unless_the_user_agrees() {
        let dir = tempfile::tempdir().unwrap();
        let plan = prepare(dir.path(), |_| panic!("nothing to confirm")).unwrap();
        assert!(plan.prompt.contains("write an AGENTS.md"));
        assert!(!plan.prompt.contains("already exists"));

        std::fs::write(dir.path().join(FILE_NAME), "# old\nline\n").unwrap();
        let mut asked = String::new();
        assert!(
            prepare(dir.path(), |q| {
                asked = q.to_string();
                false
            })
            .is_none()
        );
        assert!(asked.contains("already exists (2 lines)"), "{asked}");
        let plan = prepare(dir.path(), |_| true).unwrap();
        assert!(plan.prompt.contains("already exists: read it first"));
    }
}
