//! `capstan session show ID`, `capstan session rm ID` and `capstan session
//! rewind ID [N]`: one saved session's facts and checkpoints, removing it
//! with its checkpoints, and rewinding it from the shell.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::SystemTime;

use clap::Args;

use super::Exit;
use super::escape;
use super::rewind;
use crate::home::Home;
use crate::session::checkpoint::{CheckpointStore, RewindScope};
use crate::session::{Sessions, load};

/// Which session of which folder.
#[derive(Debug, Args)]
pub struct SessionRef {
    /// The session's id, or the start of it.
    id: String,

    /// The folder the session belongs to [default: the current folder].
    #[arg(long, short = 'w', value_name = "DIR")]
    workspace: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    session: SessionRef,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    #[command(flatten)]
    session: SessionRef,

    /// Remove without asking.
    #[arg(long, short = 'y')]
    yes: bool,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("scope").args(["files", "conversation", "both"]))]
pub struct RewindArgs {
    #[command(flatten)]
    session: SessionRef,

    /// The prompt to go back to (from `capstan session show`); everything
    /// from this prompt on is undone. Without it, the prompts are listed.
    number: Option<u32>,

    /// Restore the files only; the conversation stays.
    #[arg(long)]
    files: bool,

    /// Rewind the conversation only; the files stay as they are.
    #[arg(long)]
    conversation: bool,

    /// Restore the files and rewind the conversation (the default).
    #[arg(long)]
    both: bool,

    /// Also overwrite files changed since by something other than capstan
    /// (without it they are listed and left as they are).
    #[arg(long)]
    force: bool,
}

/// The session named, its transcript and its store.
struct Found {
    sessions: Sessions,
    id: String,
}

fn find(session: &SessionRef) -> Result<Found, String> {
    let workspace = match &session.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()
            .map_err(|e| format!("cannot tell the current folder ({e}); pass --workspace DIR"))?,
    };
    let home = Home::from_env().map_err(|e| e.to_string())?;
    let sessions = Sessions::for_workspace(&home, &workspace).map_err(|e| e.to_string())?;
    let id = sessions.find(&session.id).map_err(|e| e.to_string())?;
    Ok(Found { sessions, id })
}

fn fail(message: &str) -> Exit {
    eprintln!("error: {}", escape::message(message));
    Exit::Error
}

/// `capstan session show ID`.
pub fn show(args: &ShowArgs) -> Exit {
    let found = match find(&args.session) {
        Ok(found) => found,
        Err(message) => return fail(&message),
    };
    let path = found.sessions.transcript_path(&found.id);
    let loaded = match load::load(&path) {
        Ok(loaded) => loaded,
        Err(e) => return fail(&e.to_string()),
    };
    let summary = crate::session::catalog::summarise(&loaded);
    println!("session   {}", found.id);
    println!(
        "title     {}",
        escape::line(summary.first_prompt.as_deref().unwrap_or("(no prompt)"))
    );
    println!("folder    {}", found.sessions.workspace().display());
    println!("started   {}", when(loaded.started));
    println!("updated   {}", when(loaded.updated));
    if let Some(model) = &loaded.model {
        println!(
            "model     {} ({})",
            escape::line(model),
            escape::line(loaded.provider.as_deref().unwrap_or("?"))
        );
    }
    println!(
        "messages  {}{}",
        loaded.messages.len(),
        if loaded.ended { "" } else { " (not ended)" }
    );
    println!(
        "tokens    {} in, {} out",
        loaded.usage.input_tokens, loaded.usage.output_tokens
    );
    println!("transcript {}", path.display());
    let mut store =
        CheckpointStore::for_transcript(&path, found.sessions.workspace().to_path_buf());
    match store.checkpoints() {
        Ok([]) => println!("checkpoints: none"),
        Ok(_) => {
            let stored = store.stored_bytes().unwrap_or(0);
            println!(
                "checkpoints ({} of file copies, at most {}; rewind with capstan session rewind {} N):",
                crate::quantity::format_size(stored),
                crate::quantity::format_size(store.limits().max_bytes),
                found.id
            );
            if let Ok(checkpoints) = store.checkpoints() {
                print!("{}", rewind::listing(checkpoints));
            }
        }
        Err(e) => println!("checkpoints: unreadable ({})", escape::line(&e.to_string())),
    }
    for warning in &loaded.warnings {
        eprintln!("warning: {}", escape::message(&warning.to_string()));
    }
    Exit::Success
}

/// `capstan session rm ID`.
pub fn rm(args: &RmArgs) -> Exit {
    let found = match find(&args.session) {
        Ok(found) => found,
        Err(message) => return fail(&message),
    };
    if !args.yes {
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            eprintln!(
                "error: session {} was not removed: there is no terminal to ask; pass --yes to remove it",
                found.id
            );
            return Exit::Refused;
        }
        eprint!(
            "Remove session {} (its transcript and checkpoints)? This cannot be undone. [y/N] ",
            found.id
        );
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if !matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
            eprintln!("Kept session {}.", found.id);
            return Exit::Refused;
        }
    }
    match found.sessions.remove(&found.id) {
        Ok(()) => {
            eprintln!("removed session {} and its checkpoints", found.id);
            Exit::Success
        }
        Err(e) => fail(&e.to_string()),
    }
}

/// `capstan session rewind ID [N]`.
pub fn rewind(args: &RewindArgs) -> Exit {
    let found = match find(&args.session) {
        Ok(found) => found,
        Err(message) => return fail(&message),
    };
    let path = found.sessions.transcript_path(&found.id);
    let mut store =
        CheckpointStore::for_transcript(&path, found.sessions.workspace().to_path_buf());
    let Some(number) = args.number else {
        match crate::session::checkpoint::recover(store.dir(), found.sessions.workspace()) {
            Ok(Some(said)) => eprintln!("{}", escape::message(&said)),
            Ok(None) => {}
            Err(e) => return fail(&e.to_string()),
        }
        return match store.checkpoints() {
            Ok([]) => {
                println!("session {} has no checkpoints", found.id);
                Exit::Success
            }
            Ok(checkpoints) => {
                print!("{}", rewind::listing(checkpoints));
                Exit::Success
            }
            Err(e) => fail(&e.to_string()),
        };
    };
    let scope = if args.files {
        RewindScope::Files
    } else if args.conversation {
        RewindScope::Conversation
    } else {
        RewindScope::Both
    };
    match store.rewind(&path, number, scope, args.force) {
        Ok(report) => {
            if let Some(said) = &report.recovered {
                eprintln!("{}", escape::message(said));
            }
            eprint!("{}", rewind::describe(&report, number, scope));
            if report.conversation_rewound {
                eprintln!(
                    "resume it with capstan --resume {} (the prompt was: {})",
                    found.id,
                    escape::line(&report.prompt)
                );
            }
            if report.conflicts.is_empty() && report.failed.is_empty() {
                Exit::Success
            } else {
                Exit::Error
            }
        }
        Err(e) => fail(&e.to_string()),
    }
}

/// A time as RFC 3339 UTC and how long ago.
fn when(time: SystemTime) -> String {
    let ago = SystemTime::now()
        .duration_since(time)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let age = match ago {
        0..60 => "just now".to_string(),
        60..3600 => format!("{} min ago", ago / 60),
        3600..86400 => format!("{} h ago", ago / 3600),
        _ => format!("{} d ago", ago / 86400),
    };
    format!("{} ({age})", crate::timestamp::rfc3339(time))
}
