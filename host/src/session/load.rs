//! Reading a transcript back: the conversation, the summed usage, and what
//! was skipped on the way. Reading never changes the file.
//!
//! A damaged last line (the process was killed mid-write) is skipped with a
//! warning; a damaged line in the middle is an error, unless a later
//! `damaged_line` record (written on resume) names it. Record types from a
//! newer capstan are skipped with a warning. The conversation is then
//! repaired so the model APIs accept it: tool calls left without a result
//! get an "interrupted" error result, results without a call become text,
//! and consecutive messages of one role are merged.

use std::collections::HashSet;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::SessionError;
use super::record::{Event, Record, SCHEMA_VERSION};
use crate::model::{Block, Message, Role, Usage};

/// The text of the result given to a tool call that never finished.
pub const INTERRUPTED_TOOL_RESULT: &str =
    "interrupted: the session ended before this tool call finished";

/// Something skipped or changed while reading a transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadWarning {
    /// The last line is not a complete record, most likely because the
    /// process was killed while writing it.
    DamagedLastLine {
        /// The line's number, counting from 1.
        line: usize,
    },
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
}

impl fmt::Display for LoadWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DamagedLastLine { line } => write!(
                f,
                "skipped line {line}: the last record was cut short (capstan was probably killed while writing it)"
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
            Self::UnansweredToolCall { id, name } => write!(
                f,
                "tool call {id} ({name}) never finished; it is marked interrupted"
            ),
            Self::OrphanedToolResult { tool_use_id } => write!(
                f,
                "the result of tool call {tool_use_id} answers no call; it is kept as text"
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

    let lines: Vec<(usize, &[u8])> = bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, line)| (i + 1, line))
        .filter(|(_, line)| !line.trim_ascii().is_empty())
        .collect();
    let parsed: Vec<(usize, Result<Record, String>, Option<String>)> = lines
        .iter()
        .map(|&(number, line)| {
            let (record, kind) = parse_line(line);
            (number, record, kind)
        })
        .collect();
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
                session.warnings.push(LoadWarning::DamagedLastLine { line });
                session.damaged_tail_line = Some(line);
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
/// anything said: empty messages go, every tool call gets a result right
/// after it, results that answer no call become text, consecutive messages
/// of one role merge, and tool results come first in a user message.
pub fn repair(messages: Vec<Message>, warnings: &mut Vec<LoadWarning>) -> Vec<Message> {
    let messages: Vec<Message> = messages
        .into_iter()
        .filter(|m| !m.content.is_empty())
        .collect();

    // Every tool call gets a result in the message right after it.
    let mut answered_calls = Vec::with_capacity(messages.len());
    let mut iter = messages.into_iter().peekable();
    while let Some(message) = iter.next() {
        let is_assistant = message.role == Role::Assistant;
        let calls: Vec<(String, String)> = if is_assistant {
            message
                .content
                .iter()
                .filter_map(|block| match block {
                    Block::ToolUse { id, name, .. } => Some((id.clone(), name.clone())),
                    _ => None,
                })
                .collect()
        } else {
            Vec::new()
        };
        answered_calls.push(message);
        if calls.is_empty() {
            continue;
        }
        let answered: HashSet<&str> = match iter.peek() {
            Some(next) if next.role == Role::User => tool_result_ids(next).collect(),
            _ => HashSet::new(),
        };
        let synthetic: Vec<Block> = calls
            .iter()
            .filter(|(id, _)| !answered.contains(id.as_str()))
            .map(|(id, name)| {
                warnings.push(LoadWarning::UnansweredToolCall {
                    id: id.clone(),
                    name: name.clone(),
                });
                Block::ToolResult {
                    tool_use_id: id.clone(),
                    content: INTERRUPTED_TOOL_RESULT.to_string(),
                    is_error: true,
                    images: Vec::new(),
                }
            })
            .collect();
        if !synthetic.is_empty() {
            answered_calls.push(Message {
                role: Role::User,
                content: synthetic,
            });
        }
    }

    // Consecutive messages of one role become one.
    let mut merged: Vec<Message> = Vec::with_capacity(answered_calls.len());
    for message in answered_calls {
        match merged.last_mut() {
            Some(last) if last.role == message.role => last.content.extend(message.content),
            _ => merged.push(message),
        }
    }

    // Results must answer a call in the assistant message just before.
    let mut previous_calls: HashSet<String> = HashSet::new();
    for message in &mut merged {
        match message.role {
            Role::Assistant => {
                previous_calls = message
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        Block::ToolUse { id, .. } => Some(id.clone()),
                        _ => None,
                    })
                    .collect();
            }
            Role::User => {
                for block in &mut message.content {
                    if let Block::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                        ..
                    } = block
                        && !previous_calls.remove(tool_use_id.as_str())
                    {
                        warnings.push(LoadWarning::OrphanedToolResult {
                            tool_use_id: tool_use_id.clone(),
                        });
                        let failed = if *is_error { " (failed)" } else { "" };
                        *block = Block::Text {
                            text: format!("[result of tool call {tool_use_id}{failed}]\n{content}"),
                        };
                    }
                }
                // Tool results first, in their order, then everything else.
                let (results, rest): (Vec<Block>, Vec<Block>) = message
                    .content
                    .drain(..)
                    .partition(|block| matches!(block, Block::ToolResult { .. }));
                message.content = results.into_iter().chain(rest).collect();
                previous_calls.clear();
            }
        }
    }
    merged
}

/// The ids of the calls a message's tool results answer.
fn tool_result_ids(message: &Message) -> impl Iterator<Item = &str> {
    message.content.iter().filter_map(|block| match block {
        Block::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
        _ => None,
    })
}
