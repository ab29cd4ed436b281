//! The records a transcript is made of: one JSON object per line, tagged
//! with its `type` and the time it was written.

use serde::{Deserialize, Serialize};

use crate::model::{Message, StopReason, Usage};

/// The transcript format this capstan writes; the start record carries it.
/// A reader meeting a higher number skips the record types it does not know.
pub const SCHEMA_VERSION: u32 = 1;

/// One line of a transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// When it was written, in milliseconds since the Unix epoch.
    pub ts_ms: u64,
    /// What happened.
    #[serde(flatten)]
    pub event: Event,
}

/// What a record says happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The session began; always the first record.
    Start {
        /// The transcript format, [`SCHEMA_VERSION`] when written.
        schema_version: u32,
        /// The session's id (also the file's name).
        session_id: String,
        /// The canonical workspace path.
        workspace: String,
        /// The model's id.
        model: String,
        /// The provider's name.
        provider: String,
        /// The capstan version that wrote it.
        capstan_version: String,
    },
    /// The session was taken up again, possibly with another model.
    Resumed {
        /// The model's id.
        model: String,
        /// The provider's name.
        provider: String,
        /// The capstan version now writing.
        capstan_version: String,
    },
    /// The user switched the model (`/model`); the session goes on with
    /// it, resumed too.
    ModelChanged {
        /// The model's id.
        model: String,
        /// The provider's name.
        provider: String,
    },
    /// The user said something.
    User {
        /// The message.
        message: Message,
    },
    /// The model answered.
    Assistant {
        /// The message.
        message: Message,
        /// Why the model stopped, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop_reason: Option<StopReason>,
    },
    /// Results of tool calls, sent back on the user's side.
    ToolResults {
        /// The message.
        message: Message,
    },
    /// The permission decision for one tool call: who decided, by which
    /// rule, and what.
    Permission {
        /// The tool call's id.
        tool_use_id: String,
        /// The tool, as `PLUGIN.TOOL`.
        tool: String,
        /// `allow` or `deny` (a question is recorded with its answer).
        outcome: String,
        /// What decided: the mode, a rule, the user, the session, or the
        /// non-interactive fallback.
        source: String,
        /// The rule that matched, if one did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
        /// Why, in words.
        reason: String,
    },
    /// A hook answered an event: which hook, what it decided and why.
    Hook {
        /// The event, with Claude Code's name (`PreToolUse`).
        event: String,
        /// The hook, `PLUGIN`.
        hook: String,
        /// `proceed`, `allow`, `ask`, `deny`, `modify`, `add-context`,
        /// `keep-going`, or `failed` when it gave no answer.
        decision: String,
        /// The reason, context or new input it gave, or why it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
        /// The tool call it concerned, for tool events.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_use_id: Option<String>,
    },
    /// Tokens one model answer used.
    Usage {
        /// The count.
        usage: Usage,
    },
    /// The turn was interrupted (Ctrl-C, an error) before it finished.
    Interrupted {
        /// Why, in words.
        reason: String,
    },
    /// A damaged line (a write cut short when the process was killed) was
    /// found when the session was resumed; readers skip that line.
    DamagedLine {
        /// The damaged line's number, counting from 1.
        line: usize,
    },
    /// The conversation was compacted: the messages so far are replaced,
    /// for the model and on resume, by `message`, which holds the summary.
    Compacted {
        /// `manual` (`/compact`) or `auto` (near the context window).
        trigger: String,
        /// How many messages the summary replaced.
        messages_before: usize,
        /// The user message the conversation continues from.
        message: Message,
    },
    /// The conversation was rewound to just before prompt `prompt` (the
    /// records after it were cut from the file); it goes on from here.
    Rewound {
        /// The prompt's number in the session's checkpoints.
        prompt: u32,
    },
    /// The session ended normally.
    End,
    /// A record type from a newer capstan; skipped when read.
    #[serde(other)]
    Unknown,
}
