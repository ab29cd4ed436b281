//! Reading a transcript back: the conversation, the summed usage, and what
//! was skipped on the way. Reading never changes the file.
//!
//! A damaged last line (the process was killed mid-write, or the disk was
//! full: then a marker beside the transcript says so) is skipped with a
//! warning; a damaged line in the middle is an error, unless a later
//! `damaged_line` record (written on resume) names it. Record types from a
//! newer capstan are skipped with a warning. The conversation is then
//! repaired so the model APIs accept it ([`conversation::repair`]): a
//! missing start gets a placeholder, repeated call ids are renamed, tool
//! calls left without a result get an "interrupted" error result, results
//! without a call become text, and consecutive messages of one role are
//! merged; each change is a warning the user is shown on resume.

use std::collections::HashSet;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::SessionError;
use super::record::{Event, Record, SCHEMA_VERSION};
use super::transcript::disk_full_marker;
use crate::model::conversation::{self, Repair};
use crate::model::{Message, Usage};

pub use crate::model::conversation::INTERRUPTED_TOOL_RESULT;

/// Something skipped or changed while reading a transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadWarning {
    /// The last line is not a complete record, most likely because the
    /// process was killed while writing it.
    DamagedLastLine {
        /// The line's number, counting from 1.
        line: usize,
    },
    /// The last line is not a complete record because the disk was full
    /// when it was written; resuming cuts it off.
    DiskFullLastLine {
        /// The line's number, counting from 1.
        line: usize,
    },
    /// A write to the transcript failed because the disk was full; the
    /// record being written was not kept.
    StoppedByFullDisk,
    /// A damaged line that an earlier resume already marked was skipped.
    MarkedDamagedLine {
        /// The line's number, counting from 1.
        line: usize,
    },
    /// A record of a type this capstan does not know was skipped.
    UnknownRecord {
        /// The line's number, counting from 1.
        line: usize,
        /// Its `type`.
        kind: String,
    },
    /// The transcript was written in a newer format.
    NewerFormat {
        /// The format's version.
        version: u32,
    },
    /// A tool call had no result; an "interrupted" error result was added.
    UnansweredToolCall {
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// A tool result answered no call just before it; it was kept as text.
    OrphanedToolResult {
        /// The id it named.
        tool_use_id: String,
    },
    /// The conversation started with the model's message; a placeholder
    /// user message was put first.
    MissingStart,
    /// A tool call reused an id; it and its result got a new one.
    RenamedToolCall {
        /// The id it had.
        id: String,
        /// The id it has now.
        new_id: String,
        /// The tool's name.
        name: String,
    },
}

impl From<Repair> for LoadWarning {
    fn from(repair: Repair) -> Self {
        match repair {
            Repair::MissingStart => Self::MissingStart,
            Repair::RenamedToolCall { id, new_id, name } => {
                Self::RenamedToolCall { id, new_id, name }
            }
            Repair::UnansweredToolCall { id, name } => Self::UnansweredToolCall { id, name },
            Repair::OrphanedToolResult { tool_use_id } => Self::OrphanedToolResult { tool_use_id },
        }
    }
}

impl fmt::Display for LoadWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DamagedLastLine { line } => write!(
                f,
                "skipped line {line}: the last record was cut short (capstan was probably killed while writing it)"
            ),
            Self::DiskFullLastLine { line } => write!(
                f,
                "skipped line {line}: the last record was cut short because the disk was full; it is removed when the session is resumed"
            ),
            Self::StoppedByFullDisk => write!(
                f,
                "the session stopped writing its transcript because the disk was full; the record being written then (the last answer or result) was not kept"
            ),
            Self::MarkedDamagedLine { line } => {
                write!(
                    f,
                    "skipped line {line}: marked damaged when the session was resumed"
                )
            }
            Self::UnknownRecord { line, kind } => write!(
                f,
                "skipped line {line}: record type `{kind}` comes from a newer capstan; update capstan to read it"
            ),
            Self::NewerFormat { version } => write!(
                f,
                "the transcript uses format {version}, newer than {SCHEMA_VERSION}; some records may be skipped"
            ),
            Self::UnansweredToolCall { id, name } => fmt::Display::fmt(
                &Repair::UnansweredToolCall {
                    id: id.clone(),
                    name: name.clone(),
                },
                f,
            ),
            Self::OrphanedToolResult { tool_use_id } => fmt::Display::fmt(
                &Repair::OrphanedToolResult {
                    tool_use_id: tool_use_id.clone(),
                },
                f,
            ),
            Self::MissingStart => fmt::Display::fmt(&Repair::MissingStart, f),
            Self::RenamedToolCall { id, new_id, name } => fmt::Display::fmt(
                &Repair::RenamedToolCall {
                    id: id.clone(),
                    new_id: new_id.clone(),
                    name: name.clone(),
                },
                f,
            ),
        }
    }
}

/// A transcript read back.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedSession {
    /// The transcript file.
    pub path: PathBuf,
    /// The session's id (the file's name without `.jsonl`).
    pub id: String,
    /// The model named by the latest start, resume or model change record.
    pub model: Option<String>,
    /// The provider named by the latest start or resume record.
    pub provider: Option<String>,
    /// When the session started (the file's modification time if the start
    /// record is missing).
    pub started: SystemTime,
    /// When the last record was written.
    pub updated: SystemTime,
    /// The conversation, repaired so that roles alternate and every tool
    /// call has a result.
    pub messages: Vec<Message>,
    /// Tokens used over the whole session.
    pub usage: Usage,
    /// Whether the session ended normally (rather than being killed or
    /// still running).
    pub ended: bool,
    /// What was skipped or changed while reading.
    pub warnings: Vec<LoadWarning>,
    /// The damaged last line, if there is one.
    pub damaged_tail_line: Option<usize>,
    /// Where the damaged last line starts in the file, if there is one.
    pub damaged_tail_offset: Option<u64>,
    /// Whether a write to the transcript failed because the disk was full
    /// (its marker is beside it): then a damaged last line is that record,
    /// and resuming cuts it off.
    pub disk_full: bool,
    /// Whether the file ends with a newline (it does not if a write was cut
    /// short); appending must start a new line first.
    pub ends_with_newline: bool,
}

/// Reads the transcript at `path`.
pub fn load(path: &Path) -> Result<LoadedSession, SessionError> {
    let bytes = fs::read(path).map_err(|source| SessionError::Io {
        action: "read the session transcript",
        path: path.to_path_buf(),
        source,
    })?;
    let modified = fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(UNIX_EPOCH);
    let id = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();

    // Each line with its number (from 1) and the offset it starts at.
    let mut offset = 0u64;
    let lines: Vec<(usize, u64, &[u8])> = bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, line)| {
            let start = offset;
            offset += line.len() as u64 + 1;
            (i + 1, start, line)
        })
        .filter(|(_, _, line)| !line.trim_ascii().is_empty())
        .collect();
    let offsets: std::collections::HashMap<usize, u64> = lines
        .iter()
        .map(|&(number, start, _)| (number, start))
        .collect();
    let parsed: Vec<(usize, Result<Record, String>, Option<String>)> = lines
        .iter()
        .map(|&(number, _, line)| {
            let (record, kind) = parse_line(line);
            (number, record, kind)
        })
        .collect();
    let disk_full = disk_full_marker(path).exists();
    let marked_damaged: HashSet<usize> = parsed
        .iter()
        .filter_map(|(_, record, _)| match record {
            Ok(Record {
                event: Event::DamagedLine { line },
                ..
            }) => Some(*line),
            _ => None,
        })
        .collect();

    let mut session = LoadedSession {
        path: path.to_path_buf(),
        id,
        model: None,
        provider: None,
        started: modified,
        updated: modified,
        messages: Vec::new(),
        usage: Usage::default(),
        ended: false,
        warnings: Vec::new(),
        damaged_tail_line: None,
        damaged_tail_offset: None,
        disk_full,
        ends_with_newline: bytes.last().is_none_or(|&b| b == b'\n'),
    };
    let mut raw_messages = Vec::new();
    let last_index = parsed.len().saturating_sub(1);
    for (index, (line, record, kind)) in parsed.into_iter().enumerate() {
        let record = match record {
            Ok(record) => record,
            Err(_) if marked_damaged.contains(&line) => {
                session
                    .warnings
                    .push(LoadWarning::MarkedDamagedLine { line });
                continue;
            }
            Err(_) if index == last_index => {
                session.warnings.push(if disk_full {
                    LoadWarning::DiskFullLastLine { line }
                } else {
                    LoadWarning::DamagedLastLine { line }
                });
                session.damaged_tail_line = Some(line);
                session.damaged_tail_offset = offsets.get(&line).copied();
                continue;
            }
            Err(problem) => {
                return Err(SessionError::Corrupt {
                    path: path.to_path_buf(),
                    line,
                    problem,
                });
            }
        };
        if record.ts_ms > 0 {
            session.updated = UNIX_EPOCH + Duration::from_millis(record.ts_ms);
        }
        match record.event {
            Event::Start {
                schema_version,
                model,
                provider,
                ..
            } => {
                if schema_version > SCHEMA_VERSION {
                    session.warnings.push(LoadWarning::NewerFormat {
                        version: schema_version,
                    });
                }
                session.started = UNIX_EPOCH + Duration::from_millis(record.ts_ms);
                session.model = Some(model);
                session.provider = Some(provider);
            }
            Event::Resumed {
                model, provider, ..
            } => {
                session.model = Some(model);
                session.provider = Some(provider);
                session.ended = false;
            }
            Event::ModelChanged { model, provider } => {
                session.model = Some(model);
                session.provider = Some(provider);
            }
            Event::User { message }
            | Event::Assistant { message, .. }
            | Event::ToolResults { message } => raw_messages.push(message),
            Event::Usage { usage } => session.usage.add(usage),
            Event::Compacted { message, .. } => {
                raw_messages.clear();
                raw_messages.push(message);
            }
            Event::End => session.ended = true,
            Event::Interrupted { .. }
            | Event::DamagedLine { .. }
            | Event::Rewound { .. }
            | Event::Permission { .. }
            | Event::Hook { .. } => {}
            Event::Unknown => session.warnings.push(LoadWarning::UnknownRecord {
                line,
                kind: kind.unwrap_or_default(),
            }),
        }
    }
    if disk_full && session.damaged_tail_line.is_none() {
        session.warnings.push(LoadWarning::StoppedByFullDisk);
    }
    session.messages = repair(raw_messages, &mut session.warnings);
    Ok(session)
}

/// Parses one line; on success also returns its `type` (for warnings
/// about unknown records), on failure what is wrong.
fn parse_line(line: &[u8]) -> (Result<Record, String>, Option<String>) {
    let value: serde_json::Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => return (Err(format!("not valid JSON ({e})")), None),
    };
    let kind = value
        .get("type")
        .and_then(|t| t.as_str())
        .map(str::to_string);
    let record = serde_json::from_value::<Record>(value)
        .map_err(|e| format!("not a valid transcript record ({e})"));
    (record, kind)
}

/// Makes the conversation acceptable to the model APIs without dropping
/// anything said ([`conversation::repair`]), noting each change in
/// `warnings`.
pub fn repair(messages: Vec<Message>, warnings: &mut Vec<LoadWarning>) -> Vec<Message> {
    let mut repairs = Vec::new();
    let messages = conversation::repair(messages, &mut repairs);
    warnings.extend(repairs.into_iter().map(LoadWarning::from));
    messages
}
