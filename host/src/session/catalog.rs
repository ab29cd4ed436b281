//! Listing a workspace's sessions, newest first, and finding one by id or
//! id prefix (`--continue`, `--resume 7f3c`).

use std::fs;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::time::SystemTime;

use super::load::{self, LoadedSession};
use super::{SessionError, Sessions};
use crate::model::{Block, Role};

/// How many characters of the first prompt a listing shows.
const PROMPT_PREVIEW_CHARS: usize = 80;

/// How many matching ids an ambiguity error names.
const AMBIGUOUS_EXAMPLES: usize = 5;

/// One saved session, as a listing shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    /// The session's id.
    pub id: String,
    /// The transcript file.
    pub path: PathBuf,
    /// When it started.
    pub started: SystemTime,
    /// When its last record was written.
    pub updated: SystemTime,
    /// The first thing the user typed, on one line, cut to 80 characters
    /// (with `…` when cut).
    pub first_prompt: Option<String>,
    /// How many messages the conversation has.
    pub message_count: usize,
}

/// The sessions listed, and those that could not be read.
#[derive(Debug)]
pub struct SessionListing {
    /// Readable sessions, most recently active first.
    pub sessions: Vec<SessionSummary>,
    /// Transcripts that could not be read, each with the reason.
    pub unreadable: Vec<SessionError>,
}

impl Sessions {
    /// The workspace's sessions, most recently active first. A damaged
    /// transcript does not hide the others: it is reported in
    /// [`SessionListing::unreadable`].
    pub fn list(&self) -> Result<SessionListing, SessionError> {
        let mut listing = SessionListing {
            sessions: Vec::new(),
            unreadable: Vec::new(),
        };
        for id in self.ids()? {
            match load::load(&self.transcript_path(&id)) {
                Ok(loaded) => listing.sessions.push(summarise(&loaded)),
                Err(e) => listing.unreadable.push(e),
            }
        }
        listing.sessions.sort_by(|a, b| {
            b.updated
                .cmp(&a.updated)
                .then_with(|| b.started.cmp(&a.started))
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(listing)
    }

    /// The most recently active session (for `--continue`).
    pub fn most_recent(&self) -> Result<SessionSummary, SessionError> {
        let listing = self.list()?;
        if let Some(newest) = listing.sessions.into_iter().next() {
            return Ok(newest);
        }
        // Only damaged transcripts: say why the newest cannot be read.
        match listing.unreadable.into_iter().next() {
            Some(error) => Err(error),
            None => Err(SessionError::NoSessions {
                workspace: self.workspace().to_path_buf(),
            }),
        }
    }

    /// The id of the session whose id is `prefix`, or the only one that
    /// starts with it (for `--resume`).
    pub fn find(&self, prefix: &str) -> Result<String, SessionError> {
        let prefix = prefix.trim().to_ascii_lowercase();
        let not_found = || SessionError::NotFound {
            workspace: self.workspace().to_path_buf(),
            prefix: prefix.clone(),
        };
        if prefix.is_empty() {
            return Err(not_found());
        }
        let mut matches: Vec<String> = self
            .ids()?
            .into_iter()
            .filter(|id| id.starts_with(&prefix))
            .collect();
        if matches.contains(&prefix) {
            return Ok(prefix);
        }
        match matches.len() {
            0 => Err(not_found()),
            1 => Ok(matches.remove(0)),
            count => {
                matches.sort();
                let mut examples = matches[..count.min(AMBIGUOUS_EXAMPLES)].join(", ");
                if count > AMBIGUOUS_EXAMPLES {
                    examples.push_str(", …");
                }
                Err(SessionError::Ambiguous {
                    prefix,
                    count,
                    examples,
                })
            }
        }
    }

    /// The ids of all transcripts in the workspace's folder.
    fn ids(&self) -> Result<Vec<String>, SessionError> {
        let entries = match fs::read_dir(self.dir()) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(SessionError::Io {
                    action: "list the sessions folder",
                    path: self.dir().to_path_buf(),
                    source,
                });
            }
        };
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| SessionError::Io {
                action: "list the sessions folder",
                path: self.dir().to_path_buf(),
                source,
            })?;
            let path = entry.path();
            if path.extension().is_some_and(|ext| ext == "jsonl")
                && let Some(stem) = path.file_stem().and_then(|s| s.to_str())
            {
                ids.push(stem.to_string());
            }
        }
        Ok(ids)
    }
}

/// What a listing shows of a loaded session.
pub fn summarise(loaded: &LoadedSession) -> SessionSummary {
    let first_prompt = loaded
        .messages
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| &m.content)
        .find_map(|block| match block {
            Block::Text { text } if !text.trim().is_empty() => Some(preview(text)),
            _ => None,
        });
    SessionSummary {
        id: loaded.id.clone(),
        path: loaded.path.clone(),
        started: loaded.started,
        updated: loaded.updated,
        first_prompt,
        message_count: loaded.messages.len(),
    }
}

/// `text` on one line, cut to [`PROMPT_PREVIEW_CHARS`] characters.
fn preview(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= PROMPT_PREVIEW_CHARS {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(PROMPT_PREVIEW_CHARS - 1).collect();
    cut.push('…');
    cut
}
