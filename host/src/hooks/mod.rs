//! Hooks: sandboxed components that run when something happens in an agent
//! session and answer with a typed decision.
//!
//! Event names and payload fields follow Claude Code's hooks. A hook
//! subscribes to events (with a matcher for tool events); matching happens
//! here, before anything is instantiated. Matching hooks run concurrently,
//! each with a short deadline and a memory cap, and their decisions are
//! combined: any deny wins, then ask, then allow. A hook's allow never
//! overrides a deny rule or widens a grant. A hook that traps or times out
//! on a blocking event blocks the action (fail closed); on other events it
//! is logged and ignored.
//!
//! - [`component`]: a hook component run in the sandbox;
//! - [`matcher`]: which hooks an event reaches;
//! - [`dispatch`]: running the matching hooks and combining their answers;
//! - [`schema`]: checking a modified tool input against the tool's schema.

pub mod component;
pub mod dispatch;
pub mod matcher;
pub mod schema;

pub use component::{HOOK_LIMITS, HookComponent, HookLoadError, load_hooks};
pub use dispatch::{Combined, HookAnswer, HookSet, SubscriptionError, Verdict, combine};

use futures_util::future::BoxFuture;

/// Claude Code's hook events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum HookEvent {
    /// A session starts or resumes.
    SessionStart,
    /// A session ends.
    SessionEnd,
    /// The user submitted a prompt, before the model sees it.
    UserPromptSubmit,
    /// A tool call is about to run.
    PreToolUse,
    /// A tool call finished successfully.
    PostToolUse,
    /// A tool call failed.
    PostToolUseFailure,
    /// The user is about to be asked to permit a tool call.
    PermissionRequest,
    /// The model finished its turn.
    Stop,
    /// A sub-agent starts.
    SubagentStart,
    /// A sub-agent finished its turn.
    SubagentStop,
    /// The conversation is about to be compacted.
    PreCompact,
    /// The conversation was compacted.
    PostCompact,
    /// The host shows the user a notification.
    Notification,
}

impl HookEvent {
    /// Every event, in the order above.
    pub const ALL: [HookEvent; 13] = [
        Self::SessionStart,
        Self::SessionEnd,
        Self::UserPromptSubmit,
        Self::PreToolUse,
        Self::PostToolUse,
        Self::PostToolUseFailure,
        Self::PermissionRequest,
        Self::Stop,
        Self::SubagentStart,
        Self::SubagentStop,
        Self::PreCompact,
        Self::PostCompact,
        Self::Notification,
    ];

    /// Claude Code's name for it (`PreToolUse`), also the payload's
    /// `hook_event_name`.
    pub fn name(self) -> &'static str {
        match self {
            Self::SessionStart => "SessionStart",
            Self::SessionEnd => "SessionEnd",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
            Self::PostToolUseFailure => "PostToolUseFailure",
            Self::PermissionRequest => "PermissionRequest",
            Self::Stop => "Stop",
            Self::SubagentStart => "SubagentStart",
            Self::SubagentStop => "SubagentStop",
            Self::PreCompact => "PreCompact",
            Self::PostCompact => "PostCompact",
            Self::Notification => "Notification",
        }
    }

    /// Whether a hook guards the action the event announces, so a hook
    /// that fails on it blocks the action (fail closed). Stop and
    /// SubagentStop are not: a failing hook cannot make the model carry on.
    pub fn is_blocking(self) -> bool {
        matches!(
            self,
            Self::UserPromptSubmit | Self::PreToolUse | Self::PermissionRequest
        )
    }

    /// The event called `name` (Claude Code's spelling, `PreToolUse`).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.name() == name)
    }

    /// Whether the event concerns one tool, so matchers apply to it.
    pub fn concerns_tool(self) -> bool {
        matches!(
            self,
            Self::PreToolUse
                | Self::PostToolUse
                | Self::PostToolUseFailure
                | Self::PermissionRequest
        )
    }
}

/// An event a hook wants, with a matcher for tool events: an exact name
/// (`fs.write`), a list (`fs.write|fs.edit`) or a regular expression
/// (`fs\..*`); `None` matches every tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// The event.
    pub event: HookEvent,
    /// Which tools, for tool events.
    pub matcher: Option<String>,
}

/// What a hook wants to happen.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// No opinion.
    Proceed,
    /// Permit without asking the user (never over a deny rule or a grant).
    Allow,
    /// Ask the user, with this reason.
    Ask(String),
    /// Block, with this reason for the model.
    Deny(String),
    /// Run the tool with this input instead (re-validated by the host).
    Modify(serde_json::Value),
    /// Carry on, giving the model this extra context.
    AddContext(String),
    /// For Stop and SubagentStop: do not stop yet (bounded by the host).
    KeepGoing(String),
}

/// A hook's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct HookOutput {
    /// The decision.
    pub decision: Decision,
    /// A message for the user, not the model.
    pub system_message: Option<String>,
}

/// Why a hook gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookFailure {
    /// It trapped, panicked or hit its memory cap.
    #[error("it crashed: {0}")]
    Crashed(String),
    /// It ran past its deadline.
    #[error("it did not answer within {0} ms")]
    TimedOut(u64),
    /// It returned an error, or an answer that makes no sense.
    #[error("it failed: {0}")]
    Failed(String),
}

/// One loaded hook.
pub trait Hook: Send + Sync {
    /// Its name, `PLUGIN` or `PLUGIN/HOOK`, for messages.
    fn name(&self) -> &str;
    /// The events it wants, read once when loaded.
    fn subscriptions(&self) -> &[Subscription];
    /// Handles one event; `payload` is the JSON object with Claude Code's
    /// field names (`session_id`, `cwd`, `permission_mode`,
    /// `hook_event_name`, `tool_name`, `tool_input`, ...).
    fn handle<'a>(
        &'a self,
        event: HookEvent,
        payload: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<HookOutput, HookFailure>>;
}

/// What every event's payload says about the session, with Claude Code's
/// field names.
#[derive(Debug, Clone)]
pub struct SessionFacts<'a> {
    /// The session's id.
    pub session_id: &'a str,
    /// Its transcript file, if it has one.
    pub transcript_path: Option<&'a std::path::Path>,
    /// The workspace.
    pub cwd: &'a std::path::Path,
    /// The permission mode.
    pub mode: crate::policy::Mode,
}

/// Claude Code's name for a permission mode (`acceptEdits`,
/// `bypassPermissions`), as hooks written for it expect.
pub fn permission_mode_name(mode: crate::policy::Mode) -> &'static str {
    use crate::policy::Mode;
    match mode {
        Mode::Default => "default",
        Mode::AcceptEdits => "acceptEdits",
        Mode::Plan => "plan",
        Mode::Bypass => "bypassPermissions",
    }
}

/// The payload of `event`: the session fields (`session_id`,
/// `transcript_path`, `cwd`, `permission_mode`, `hook_event_name`) and the
/// event's own `fields` (an object: `tool_name`, `tool_input`, `prompt`...).
pub fn payload(
    event: HookEvent,
    session: &SessionFacts<'_>,
    fields: serde_json::Value,
) -> serde_json::Value {
    let mut object = serde_json::Map::new();
    object.insert("session_id".into(), session.session_id.into());
    if let Some(path) = session.transcript_path {
        object.insert("transcript_path".into(), path.display().to_string().into());
    }
    object.insert("cwd".into(), session.cwd.display().to_string().into());
    object.insert(
        "permission_mode".into(),
        permission_mode_name(session.mode).into(),
    );
    object.insert("hook_event_name".into(), event.name().into());
    if let serde_json::Value::Object(fields) = fields {
        object.extend(fields);
    }
    serde_json::Value::Object(object)
}
