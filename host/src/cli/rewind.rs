//! `/rewind` in the interactive session: the prompts with the files each
//! changed, which one to go back to, and what to put back — the code and
//! the conversation, the conversation only, or the code only, as Claude
//! Code asks. Also the listing and report `capstan session rewind` prints.

use std::fmt::Write as _;

use rustyline::error::ReadlineError;

use super::escape;
use super::setup::Session;
use crate::session::checkpoint::{Checkpoint, RestoreReport, RewindScope};

/// How many changed files a listing names per prompt.
const FILES_NAMED: usize = 3;

/// The prompts, numbered, each with the files it changed.
pub fn listing(checkpoints: &[Checkpoint]) -> String {
    let mut text = String::new();
    for checkpoint in checkpoints {
        let files = if checkpoint.pruned {
            "files: copies pruned".to_string()
        } else if checkpoint.changes.is_empty() {
            "no files changed".to_string()
        } else {
            let named: Vec<&str> = checkpoint
                .changes
                .iter()
                .take(FILES_NAMED)
                .map(|c| c.path.as_str())
                .collect();
            let more = checkpoint.changes.len().saturating_sub(FILES_NAMED);
            let count = checkpoint.changes.len();
            let plural = if count == 1 { "" } else { "s" };
            let mut files = format!("{count} file{plural}: {}", named.join(", "));
            if more > 0 {
                let _ = write!(files, " and {more} more");
            }
            files
        };
        let _ = writeln!(
            text,
            "{:>3}. {}  ({})",
            checkpoint.number,
            escape::line(&checkpoint.title()),
            escape::line(&files)
        );
    }
    text
}

/// What a rewind did, in lines.
pub fn describe(report: &RestoreReport, number: u32, scope: RewindScope) -> String {
    let mut text = String::new();
    if scope.files() {
        let count = report.restored.len() + report.removed.len();
        if count == 0 && report.conflicts.is_empty() && report.failed.is_empty() {
            let _ = writeln!(
                text,
                "files: nothing to restore (prompt {number} and later changed no file, or they are already back)"
            );
        } else {
            let _ = writeln!(
                text,
                "files: {count} put back as they were before prompt {number}"
            );
        }
        for path in &report.restored {
            let _ = writeln!(text, "  restored  {}", escape::line(path));
        }
        for path in &report.removed {
            let _ = writeln!(
                text,
                "  removed   {} (it did not exist)",
                escape::line(path)
            );
        }
        if !report.conflicts.is_empty() {
            let _ = writeln!(
                text,
                "left as they are (rewind again with --force from the shell to overwrite them):"
            );
            for problem in &report.conflicts {
                let _ = writeln!(
                    text,
                    "  {}: {}",
                    escape::line(&problem.path),
                    escape::line(&problem.reason)
                );
            }
        }
        if !report.failed.is_empty() {
            let _ = writeln!(text, "not restored:");
            for problem in &report.failed {
                let _ = writeln!(
                    text,
                    "  {}: {}",
                    escape::line(&problem.path),
                    escape::line(&problem.reason)
                );
            }
        }
    }
    if report.conversation_rewound {
        let _ = writeln!(
            text,
            "conversation: rewound to before prompt {number}; the transcript now ends there"
        );
    }
    text
}

/// Whether `command` (after the `/`) is `/rewind`, and its argument.
pub fn command(command: &str) -> Option<&str> {
    let (name, argument) = command
        .split_once(char::is_whitespace)
        .unwrap_or((command, ""));
    (name == "rewind" || name == "checkpoint").then_some(argument.trim())
}

/// `/rewind [N]`: lists the prompts, asks which one and what to put back,
/// and rewinds. Returns the rewound prompt when the conversation went back,
/// so the next prompt line starts with it (to send again, or change).
pub fn run(
    session: &mut Session,
    editor: &mut super::repl::LineEditor,
    argument: &str,
) -> Option<String> {
    let Some(store) = session.agent.checkpoints() else {
        eprintln!("this session is not saved, so there is nothing to rewind");
        return None;
    };
    let checkpoints = match store.checkpoints() {
        Ok(checkpoints) => checkpoints.to_vec(),
        Err(e) => {
            eprintln!("error: {}", escape::message(&e.to_string()));
            return None;
        }
    };
    let Some(last) = checkpoints.last().map(|c| c.number) else {
        eprintln!("nothing to rewind yet: no prompt has run in this session");
        return None;
    };
    eprint!("{}", listing(&checkpoints));
    let number = if argument.is_empty() {
        ask(
            editor,
            &format!("Rewind to before which prompt? [1-{last}, Enter cancels] "),
        )?
    } else {
        argument.to_string()
    };
    let number = match number.trim().parse::<u32>() {
        Ok(n) if checkpoints.iter().any(|c| c.number == n) => n,
        _ => {
            eprintln!(
                "no prompt {}; /rewind N takes a number from the list",
                escape::line(number.trim())
            );
            return None;
        }
    };
    eprintln!("  1. restore code and conversation");
    eprintln!("  2. restore conversation (files stay as they are)");
    eprintln!("  3. restore code (the conversation goes on)");
    let scope = match ask(editor, "What to restore? [1-3, Enter cancels] ")?.trim() {
        "1" => RewindScope::Both,
        "2" => RewindScope::Conversation,
        "3" => RewindScope::Files,
        other => {
            eprintln!("nothing rewound ({} is not 1, 2 or 3)", escape::line(other));
            return None;
        }
    };
    let mut force = false;
    if scope.files() {
        let conflicts = match session.agent.checkpoints().map(|s| s.conflicts(number)) {
            Some(Ok(conflicts)) => conflicts,
            Some(Err(e)) => {
                eprintln!("error: {}", escape::message(&e.to_string()));
                return None;
            }
            None => Vec::new(),
        };
        if !conflicts.is_empty() {
            eprintln!("changed since by something other than this session:");
            for problem in &conflicts {
                eprintln!(
                    "  {}: {}",
                    escape::line(&problem.path),
                    escape::line(&problem.reason)
                );
            }
            let answer = ask(
                editor,
                "Overwrite these too? [y = overwrite, n = leave them as they are, Enter cancels] ",
            )?;
            match answer.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => force = true,
                "n" | "no" => {}
                other => {
                    eprintln!("nothing rewound ({} is not y or n)", escape::line(other));
                    return None;
                }
            }
        }
    }
    match session.agent.rewind(number, scope, force) {
        Ok(report) => {
            if let Some(said) = &report.recovered {
                eprintln!("{}", escape::message(said));
            }
            eprint!("{}", describe(&report, number, scope));
            report
                .conversation_rewound
                .then_some(report.prompt)
                .filter(|prompt| !prompt.contains('\n') && !prompt.ends_with('…'))
        }
        Err(e) => {
            eprintln!("error: {}", escape::message(&e.to_string()));
            None
        }
    }
}

/// One answer read on the prompt line; `None` if the user cancelled (Enter
/// on an empty line, Ctrl-C, Ctrl-D).
fn ask(editor: &mut super::repl::LineEditor, question: &str) -> Option<String> {
    match editor.readline(question) {
        Ok(answer) if !answer.trim().is_empty() => Some(answer),
        Ok(_) | Err(ReadlineError::Interrupted | ReadlineError::Eof) => {
            eprintln!("nothing rewound");
            None
        }
        Err(e) => {
            eprintln!("error: cannot read from the terminal: {e}");
            None
        }
    }
}
