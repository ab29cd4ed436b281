//! The rules a conversation keeps so that the model APIs accept it, the
//! check of them, and the repair that restores them.
//!
//! Both the Anthropic Messages API and OpenAI-compatible Chat Completions
//! reject a request whose conversation breaks one of these:
//!
//! - the first message is the user's, and roles alternate;
//! - no message is empty, and no text block is empty or only white space;
//! - every tool call's id is unique in the conversation (and not empty);
//! - every tool call is answered exactly once, by a result in the user
//!   message right after it, and every result answers a call in the
//!   assistant message right before it;
//! - a user message's tool results come before its other blocks.
//!
//! A conversation capstan builds keeps them; one read back from a damaged
//! or hand-edited transcript, or holding a model's answer that repeated a
//! call id, may not. [`repair`] restores them without dropping anything
//! said: a missing start gets a placeholder user message, a repeated id is
//! renamed (and the result that answers it), an unanswered call gets an
//! "interrupted" error result, a result that answers no call becomes text,
//! and messages of one role in a row merge. The HTTP providers run every
//! request through [`super::retry::stream_with_retries`], which repairs the
//! conversation there if [`check`] finds it broken, so no request the APIs
//! would reject is ever sent.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;

use super::{Block, Message, Role};

/// The text of the result given to a tool call that never got one.
pub const INTERRUPTED_TOOL_RESULT: &str =
    "interrupted: the session ended before this tool call finished";

/// The text of the user message put before a conversation that starts
/// with the model's.
pub const MISSING_START: &str = "[The beginning of this conversation is missing; it continues from the assistant's message below.]";

/// One change [`repair`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    /// The conversation started with the model's message; a placeholder
    /// user message was put first.
    MissingStart,
    /// A tool call reused an id already taken (by an earlier call, or an
    /// earlier one in the same message); it and its result got a new one.
    RenamedToolCall {
        /// The id it had.
        id: String,
        /// The id it has now.
        new_id: String,
        /// The tool's name.
        name: String,
    },
    /// A tool call had no result; an "interrupted" error result was added.
    UnansweredToolCall {
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// A tool result answered no call just before it (or answered a call
    /// a second time); it was kept as text.
    OrphanedToolResult {
        /// The id it named.
        tool_use_id: String,
    },
}

impl fmt::Display for Repair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingStart => write!(
                f,
                "the conversation started with the model's message, not the user's; a placeholder user message was put first"
            ),
            Self::RenamedToolCall { id, new_id, name } => write!(
                f,
                "tool call id {id} ({name}) was used twice; the second call is now {new_id}"
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

/// The first rule `messages` breaks, said plainly; `Ok` if it keeps them
/// all.
pub fn check(messages: &[Message]) -> Result<(), String> {
    if messages.first().is_some_and(|m| m.role != Role::User) {
        return Err("the first message is not the user's".into());
    }
    let mut ids: HashSet<&str> = HashSet::new();
    let mut open_calls: HashSet<&str> = HashSet::new();
    for (index, message) in messages.iter().enumerate() {
        let number = index + 1;
        if message.content.is_empty() {
            return Err(format!("message {number} is empty"));
        }
        if index > 0 && messages[index - 1].role == message.role {
            return Err(format!(
                "messages {index} and {number} are both the {}'s",
                role_name(message.role)
            ));
        }
        match message.role {
            Role::Assistant => {
                if let Some(id) = open_calls.iter().next() {
                    return Err(format!("tool call {id} has no result"));
                }
                for block in &message.content {
                    match block {
                        Block::Text { text } if text.trim().is_empty() => {
                            return Err(format!("message {number} has an empty text block"));
                        }
                        Block::ToolUse { id, .. } => {
                            if id.is_empty() {
                                return Err(format!("a tool call in message {number} has no id"));
                            }
                            if !ids.insert(id.as_str()) {
                                return Err(format!("tool call id {id} is used twice"));
                            }
                            open_calls.insert(id.as_str());
                        }
                        Block::ToolResult { tool_use_id, .. } => {
                            return Err(format!(
                                "message {number} is the model's but holds the result of {tool_use_id}"
                            ));
                        }
                        Block::Text { .. } => {}
                    }
                }
            }
            Role::User => {
                let mut past_results = false;
                for block in &message.content {
                    match block {
                        Block::ToolResult { tool_use_id, .. } => {
                            if past_results {
                                return Err(format!(
                                    "in message {number} the result of {tool_use_id} comes after other content"
                                ));
                            }
                            if !open_calls.remove(tool_use_id.as_str()) {
                                return Err(format!(
                                    "the result of {tool_use_id} in message {number} answers no call in the message before it"
                                ));
                            }
                        }
                        Block::Text { text } if text.trim().is_empty() => {
                            return Err(format!("message {number} has an empty text block"));
                        }
                        Block::ToolUse { id, .. } => {
                            return Err(format!(
                                "message {number} is the user's but holds tool call {id}"
                            ));
                        }
                        Block::Text { .. } => past_results = true,
                    }
                }
                if let Some(id) = open_calls.iter().next() {
                    return Err(format!("tool call {id} has no result"));
                }
            }
        }
    }
    if let Some(id) = open_calls.iter().next() {
        return Err(format!("tool call {id} has no result"));
    }
    Ok(())
}

/// A conversation [`check`] found broken, repaired.
#[derive(Debug, Clone, PartialEq)]
pub struct Repaired {
    /// The first rule it broke.
    pub problem: String,
    /// The conversation, repaired.
    pub messages: Vec<Message>,
    /// What was changed.
    pub repairs: Vec<Repair>,
}

/// `messages` repaired if [`check`] finds them broken; `None` if they keep
/// every rule.
pub fn repaired(messages: &[Message]) -> Option<Repaired> {
    let problem = check(messages).err()?;
    let mut repairs = Vec::new();
    let messages = repair(messages.to_vec(), &mut repairs);
    Some(Repaired {
        problem,
        messages,
        repairs,
    })
}

/// Makes the conversation keep every rule without dropping anything said
/// (see the module's documentation); each change is added to `repairs`.
pub fn repair(messages: Vec<Message>, repairs: &mut Vec<Repair>) -> Vec<Message> {
    // Blank text blocks, then empty messages, go.
    let mut messages: Vec<Message> = messages
        .into_iter()
        .map(|mut message| {
            message
                .content
                .retain(|block| !matches!(block, Block::Text { text } if text.trim().is_empty()));
            message
        })
        .filter(|message| !message.content.is_empty())
        .collect();
    // Blocks in the wrong role's message are kept as text.
    for message in &mut messages {
        for block in &mut message.content {
            let misplaced = match (message.role, &*block) {
                (Role::User, Block::ToolUse { id, name, input }) => {
                    Some(format!("[tool call {id} ({name}) with input {input}]"))
                }
                (
                    Role::Assistant,
                    Block::ToolResult {
                        tool_use_id,
                        content,
                        ..
                    },
                ) => Some(format!("[result of tool call {tool_use_id}]\n{content}")),
                _ => None,
            };
            if let Some(text) = misplaced {
                *block = Block::Text { text };
            }
        }
    }
    rename_repeated_ids(&mut messages, repairs);
    let answered = answer_every_call(messages, repairs);

    // Consecutive messages of one role become one.
    let mut merged: Vec<Message> = Vec::with_capacity(answered.len());
    for message in answered {
        match merged.last_mut() {
            Some(last) if last.role == message.role => last.content.extend(message.content),
            _ => merged.push(message),
        }
    }

    keep_results_with_their_calls(&mut merged, repairs);
    if merged.first().is_some_and(|m| m.role == Role::Assistant) {
        repairs.push(Repair::MissingStart);
        merged.insert(
            0,
            Message {
                role: Role::User,
                content: vec![Block::Text {
                    text: MISSING_START.to_string(),
                }],
            },
        );
    }
    merged
}

/// Gives every tool call in `content` (a model's answer, about to join the
/// conversation `earlier`) an id used nowhere else: a call that repeats an
/// id of `earlier` or of a call before it in `content`, or has none, gets
/// a fresh one. Returns the renames as `(old id, new id, tool name)`.
pub fn make_call_ids_unique(
    content: &mut [Block],
    earlier: &[Message],
) -> Vec<(String, String, String)> {
    let mut taken = ids_in(earlier);
    let mut renamed = Vec::new();
    for block in content.iter() {
        if let Block::ToolUse { id, .. } = block {
            taken.insert(id.clone());
        }
    }
    let mut seen: HashSet<String> = ids_of_calls(earlier);
    for block in content.iter_mut() {
        if let Block::ToolUse { id, name, .. } = block {
            if id.is_empty() || seen.contains(id.as_str()) {
                let new_id = fresh_id(id, &taken);
                taken.insert(new_id.clone());
                renamed.push((std::mem::replace(id, new_id.clone()), new_id, name.clone()));
            }
            seen.insert(id.clone());
        }
    }
    renamed
}

/// Renames every tool call whose id was already used by an earlier call
/// (or is empty), and the result in the next message that answers it.
fn rename_repeated_ids(messages: &mut [Message], repairs: &mut Vec<Repair>) {
    let mut taken = ids_in(messages);
    let mut seen: HashSet<String> = HashSet::new();
    for index in 0..messages.len() {
        if messages[index].role != Role::Assistant {
            continue;
        }
        // For each id this message's calls had, the ids they have now, in
        // order: the results in the next message are matched to them so.
        let mut now_called: HashMap<String, VecDeque<String>> = HashMap::new();
        let mut any_renamed = false;
        for block in &mut messages[index].content {
            let Block::ToolUse { id, name, .. } = block else {
                continue;
            };
            let old = id.clone();
            if id.is_empty() || seen.contains(id.as_str()) {
                let new_id = fresh_id(id, &taken);
                taken.insert(new_id.clone());
                repairs.push(Repair::RenamedToolCall {
                    id: old.clone(),
                    new_id: new_id.clone(),
                    name: name.clone(),
                });
                *id = new_id;
                any_renamed = true;
            }
            seen.insert(id.clone());
            now_called.entry(old).or_default().push_back(id.clone());
        }
        if !any_renamed {
            continue;
        }
        let Some(next) = messages.get_mut(index + 1) else {
            continue;
        };
        if next.role != Role::User {
            continue;
        }
        for block in &mut next.content {
            if let Block::ToolResult { tool_use_id, .. } = block
                && let Some(new_id) = now_called
                    .get_mut(tool_use_id.as_str())
                    .and_then(VecDeque::pop_front)
            {
                *tool_use_id = new_id;
            }
        }
    }
}

/// Adds an "interrupted" error result, in a user message right after, for
/// every tool call the next message does not answer.
fn answer_every_call(messages: Vec<Message>, repairs: &mut Vec<Repair>) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    let mut iter = messages.into_iter().peekable();
    while let Some(message) = iter.next() {
        let calls: Vec<(String, String)> = if message.role == Role::Assistant {
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
        out.push(message);
        if calls.is_empty() {
            continue;
        }
        let answered: HashSet<&str> = match iter.peek() {
            Some(next) if next.role == Role::User => result_ids(next).collect(),
            _ => HashSet::new(),
        };
        let synthetic: Vec<Block> = calls
            .iter()
            .filter(|(id, _)| !answered.contains(id.as_str()))
            .map(|(id, name)| {
                repairs.push(Repair::UnansweredToolCall {
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
            out.push(Message {
                role: Role::User,
                content: synthetic,
            });
        }
    }
    out
}

/// Turns results that answer no call of the assistant message just before
/// (or answer one a second time) into text, and puts a user message's
/// results before its other blocks.
fn keep_results_with_their_calls(messages: &mut [Message], repairs: &mut Vec<Repair>) {
    let mut previous_calls: HashSet<String> = HashSet::new();
    for message in messages {
        match message.role {
            Role::Assistant => {
                previous_calls = ids_of_calls(std::slice::from_ref(&*message));
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
                        repairs.push(Repair::OrphanedToolResult {
                            tool_use_id: tool_use_id.clone(),
                        });
                        let failed = if *is_error { " (failed)" } else { "" };
                        *block = Block::Text {
                            text: format!("[result of tool call {tool_use_id}{failed}]\n{content}"),
                        };
                    }
                }
                let (results, rest): (Vec<Block>, Vec<Block>) = message
                    .content
                    .drain(..)
                    .partition(|block| matches!(block, Block::ToolResult { .. }));
                message.content = results.into_iter().chain(rest).collect();
                previous_calls.clear();
            }
        }
    }
}

/// An id made from `base` (its letters, digits, `_` and `-`: the
/// characters every API takes) that is not in `taken`.
fn fresh_id(base: &str, taken: &HashSet<String>) -> String {
    let mut stem: String = base
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    if stem.is_empty() {
        stem = "call".into();
    }
    (2u64..)
        .map(|n| format!("{stem}_{n}"))
        .find(|candidate| !taken.contains(candidate))
        .unwrap_or(stem)
}

/// Every id that tool calls and results in `messages` name.
fn ids_in(messages: &[Message]) -> HashSet<String> {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|block| match block {
            Block::ToolUse { id, .. } => Some(id.clone()),
            Block::ToolResult { tool_use_id, .. } => Some(tool_use_id.clone()),
            Block::Text { .. } => None,
        })
        .collect()
}

/// The ids of the tool calls in `messages`.
fn ids_of_calls(messages: &[Message]) -> HashSet<String> {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|block| match block {
            Block::ToolUse { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect()
}

/// The ids of the calls a message's tool results answer.
fn result_ids(message: &Message) -> impl Iterator<Item = &str> {
    message.content.iter().filter_map(|block| match block {
        Block::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
        _ => None,
    })
}

/// "user" or "model", for messages.
fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "model",
    }
}

#[cfg(test)]
mod tests;
