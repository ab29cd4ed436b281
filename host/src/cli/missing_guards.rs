//! The question "Start without guard X?", asked at session start when an
//! installed plugin whose hooks guard something (they may block prompts,
//! tool calls or permission questions) cannot run: its component is
//! missing or changed, it cannot load, it cannot say which events it
//! wants, or it subscribes to other events than the user agreed to. A
//! session never starts without a guard silently (fail closed): at an
//! interactive start the user is asked, and anywhere else (print mode, no
//! terminal) the session does not start and the error names each guard.

use std::io::{BufRead, IsTerminal, Write};

use super::Exit;
use super::escape;
use super::exit::Failure;
use super::setup::SessionArgs;
use crate::plugin::Unavailable;

/// Whether the session may start although the guards `missing` cannot
/// run: only if the user, asked at an interactive start, says so; what was
/// decided goes to `notices`.
pub fn start_without(
    missing: &[Unavailable],
    args: &SessionArgs,
    notices: &mut Vec<String>,
) -> Result<(), Failure> {
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|m| m.plugin.as_str()).collect();
    let interactive =
        !args.print && std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if interactive {
        for guard in missing {
            eprintln!(
                "The guard hook plugin {} cannot run: {}",
                escape::line(&guard.plugin),
                escape::line(&guard.reason)
            );
        }
        eprint!(
            "Start without guard {}? Its hooks would not check this session's prompts and tool calls. [y/N] ",
            names.join(", ")
        );
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
            notices.push(format!(
                "warning: this session runs without guard {}, as you chose",
                names.join(", ")
            ));
            return Ok(());
        }
    }
    let reasons: Vec<String> = missing
        .iter()
        .map(|guard| format!("  {}: {}", guard.plugin, guard.reason))
        .collect();
    Err(Failure::new(
        Exit::Integrity,
        format!(
            "the session was not started: the guard hook plugin{} {} cannot run, and a session does not start without its guards:\n{}\nfix it as said, or remove it with `capstan plugin remove NAME`{}",
            if names.len() == 1 { "" } else { "s" },
            names.join(", "),
            reasons.join("\n"),
            if interactive {
                ""
            } else {
                " (started in a terminal without -p, capstan asks whether to start without it)"
            }
        ),
    ))
}
