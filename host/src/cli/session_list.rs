//! `capstan session list`: the saved sessions of a folder, newest first.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand};
use serde_json::json;

use super::Exit;
use crate::home::Home;
use crate::session::Sessions;

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// List the saved sessions of the workspace, most recent first.
    List(ListArgs),
    /// Show one session: title, dates, messages and its checkpoints.
    Show(super::session_show::ShowArgs),
    /// Remove a session: its transcript and checkpoints (asks, or --yes).
    Rm(super::session_show::RmArgs),
    /// Go back to before a prompt: restore the files it and later prompts
    /// changed, rewind the conversation, or both (the default). Without N,
    /// list the prompts.
    Rewind(super::session_show::RewindArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// The folder whose sessions to list [default: the current folder].
    #[arg(long, short = 'w', value_name = "DIR")]
    workspace: Option<PathBuf>,

    /// Print the sessions as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs a `session` subcommand.
pub fn run(command: SessionCommand) -> Exit {
    match command {
        SessionCommand::List(args) => list(&args),
        SessionCommand::Show(args) => super::session_show::show(&args),
        SessionCommand::Rm(args) => super::session_show::rm(&args),
        SessionCommand::Rewind(args) => super::session_show::rewind(&args),
    }
}

fn list(args: &ListArgs) -> Exit {
    let workspace = match &args.workspace {
        Some(dir) => dir.clone(),
        None => match std::env::current_dir() {
            Ok(dir) => dir,
            Err(e) => {
                eprintln!("error: cannot tell the current folder ({e}); pass --workspace DIR");
                return Exit::Error;
            }
        },
    };
    let listing = Home::from_env()
        .map_err(|e| e.to_string())
        .and_then(|home| Sessions::for_workspace(&home, &workspace).map_err(|e| e.to_string()))
        .and_then(|sessions| sessions.list().map_err(|e| e.to_string()));
    let listing = match listing {
        Ok(listing) => listing,
        Err(message) => {
            eprintln!("error: {message}");
            return Exit::Error;
        }
    };
    for problem in &listing.unreadable {
        eprintln!("warning: {problem}");
    }
    if args.json {
        let sessions: Vec<_> = listing
            .sessions
            .iter()
            .map(|s| {
                json!({
                    "id": s.id,
                    "path": s.path,
                    "started_ms": epoch_ms(s.started),
                    "updated_ms": epoch_ms(s.updated),
                    "first_prompt": s.first_prompt,
                    "messages": s.message_count,
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(sessions));
        return Exit::Success;
    }
    if listing.sessions.is_empty() {
        eprintln!("no saved sessions for {}", workspace.display());
        return Exit::Success;
    }
    let now = SystemTime::now();
    for s in &listing.sessions {
        let age = now
            .duration_since(s.updated)
            .map(|d| format_age(d.as_secs()))
            .unwrap_or_else(|_| "just now".to_string());
        println!(
            "{}  {:>9}  {:>4} msgs  {}",
            s.id,
            age,
            s.message_count,
            s.first_prompt.as_deref().unwrap_or("(no prompt)")
        );
    }
    Exit::Success
}

fn epoch_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// "just now", "5 min ago", "3 h ago", "2 d ago".
fn format_age(seconds: u64) -> String {
    match seconds {
        0..60 => "just now".to_string(),
        60..3600 => format!("{} min ago", seconds / 60),
        3600..86400 => format!("{} h ago", seconds / 3600),
        _ => format!("{} d ago", seconds / 86400),
    }
}
