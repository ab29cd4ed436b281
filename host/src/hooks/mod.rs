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
//! - [`command`]: Claude Code command hooks, run in the OS sandbox;
//! - [`prompt`]: Claude Code prompt hooks, which ask the session's model;
//! - [`agent`]: Claude Code agent hooks, a read-only sub-agent the session
//!   runs;
//! - [`http`]: Claude Code http hooks, which post the event to a URL;
//! - [`driver`]: the hooks of the program driving a print-mode session
//!   (the Agent SDKs' `hooks`), called back over the control protocol;
//! - [`matcher`]: which hooks an event reaches;
//! - [`dispatch`]: running the matching hooks and combining their answers;
//! - [`schema`]: checking a modified tool input against the tool's schema.

pub mod agent;
pub mod command;
pub mod component;
pub mod dispatch;
pub mod driver;
pub mod http;
pub mod matcher;
pub mod prompt;
pub mod schema;

pub use component::{HOOK_LIMITS, HookComponent, HookEvents};
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

    /// What a hook subscribed to the event sees and what its answer can
    /// do, in plain words, for the question asked before installing it.
    pub fn reach(self) -> &'static str {
        match self {
            Self::SessionStart => "sees each session start; may add text for the model",
            Self::SessionEnd => "sees each session end",
            Self::UserPromptSubmit => {
                "sees every prompt you send; may block it or add text for the model"
            }
            Self::PreToolUse => {
                "sees each call's input before it runs; may deny the call, change its input, ask you first, or let it run without asking you"
            }
            Self::PostToolUse => {
                "sees each call's input and result; may add notes to the result for the model"
            }
            Self::PostToolUseFailure => {
                "sees each failed call's input and error; may add notes for the model"
            }
            Self::PermissionRequest => {
                "sees each permission question before you do; may answer it for you, yes or no"
            }
            Self::Stop => "sees the model's answer each time it stops; may make it keep going",
            Self::SubagentStart => "sees each sub-agent's task as it starts",
            Self::SubagentStop => {
                "sees each sub-agent's answer when it stops; may make it keep going"
            }
            Self::PreCompact => "sees each summary request before the conversation is compacted",
            Self::PostCompact => "sees each summary that replaces the conversation",
            Self::Notification => "sees the notifications capstan gives you",
        }
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
/// (`fs\..*`); `None` matches every tool. The lockfile records a hook
/// component's subscriptions in this shape: `{ event = "PreToolUse",
/// matcher = "fs.write" }`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subscription {
    /// The event.
    pub event: HookEvent,
    /// Which tools, for tool events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
}

/// Whether two lists of subscriptions subscribe to the same events with
/// the same matchers, in whatever order.
pub fn same_subscriptions(a: &[Subscription], b: &[Subscription]) -> bool {
    fn key(list: &[Subscription]) -> Vec<(&'static str, Option<&str>)> {
        let mut keys: Vec<(&'static str, Option<&str>)> = list
            .iter()
            .map(|s| (s.event.name(), s.matcher.as_deref()))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }
    key(a) == key(b)
}

/// How subscriptions `new` differ from `old`, one indented line each:
/// `+ PreToolUse for every tool: ...` for a new one, `- ...` for one no
/// longer there.
pub fn describe_subscription_change(old: &[Subscription], new: &[Subscription]) -> String {
    let mut text = String::new();
    for added in new.iter().filter(|s| !old.contains(s)) {
        text.push_str(&format!("    + {}\n", added.describe()));
    }
    for removed in old.iter().filter(|s| !new.contains(s)) {
        text.push_str(&format!("    - {}\n", removed.describe()));
    }
    text
}

/// Whether a hook with `subscriptions` guards something: it subscribes to
/// an event whose action it may block ([`HookEvent::is_blocking`]), so a
/// session without it would run what it exists to stop.
pub fn guards(subscriptions: &[Subscription]) -> bool {
    subscriptions.iter().any(|s| s.event.is_blocking())
}

impl Subscription {
    /// The subscription in plain words: the event, what it matches (which
    /// tools, for tool events) and what a hook on it sees and may do.
    pub fn describe(&self) -> String {
        let event = self.event.name();
        let reach = self.event.reach();
        let matcher = self.matcher.as_deref().map(str::trim).unwrap_or_default();
        let subject = match matcher::Matcher::parse(Some(matcher)) {
            Err(why) => format!(" (its matcher cannot be used: {why})"),
            Ok(matcher::Matcher::Any) if self.event.concerns_tool() => {
                " for every tool".to_string()
            }
            Ok(matcher::Matcher::Any) => String::new(),
            Ok(matcher::Matcher::Names(names)) if self.event.concerns_tool() => {
                format!(" for {}", names.join(", "))
            }
            Ok(matcher::Matcher::Pattern(_)) if self.event.concerns_tool() => {
                format!(" for tools matching `{matcher}`")
            }
            Ok(_) => format!(" matching `{matcher}`"),
        };
        format!("{event}{subject}: {reach}")
    }
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
    /// For an agent hook, the hook: the session runs it instead of
    /// [`Self::handle`] ([`HookSet::dispatch_with`]).
    fn agent(&self) -> Option<&agent::AgentHook> {
        None
    }
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
        Mode::DontAsk => "dontAsk",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn on(event: HookEvent, matcher: Option<&str>) -> String {
        Subscription {
            event,
            matcher: matcher.map(str::to_string),
        }
        .describe()
    }

    #[test]
    fn subscriptions_compare_in_any_order_and_guards_are_blocking_ones() {
        let sub = |event, matcher: Option<&str>| Subscription {
            event,
            matcher: matcher.map(str::to_string),
        };
        let a = vec![
            sub(HookEvent::PreToolUse, Some("fs.write")),
            sub(HookEvent::Stop, None),
        ];
        let b = vec![
            sub(HookEvent::Stop, None),
            sub(HookEvent::PreToolUse, Some("fs.write")),
        ];
        assert!(same_subscriptions(&a, &b));
        let wider = vec![sub(HookEvent::PreToolUse, None), sub(HookEvent::Stop, None)];
        assert!(!same_subscriptions(&a, &wider));
        let change = describe_subscription_change(&a, &wider);
        assert!(
            change.contains("    + PreToolUse for every tool"),
            "{change}"
        );
        assert!(change.contains("    - PreToolUse for fs.write"), "{change}");
        assert!(!change.contains("Stop"), "{change}");
        assert!(guards(&a));
        assert!(!guards(&[sub(HookEvent::PostToolUse, None)]));
    }

    #[test]
    fn subscriptions_say_which_tools_and_what_the_hook_may_do() {
        assert_eq!(
            on(HookEvent::PreToolUse, None),
            "PreToolUse for every tool: sees each call's input before it runs; may deny the call, change its input, ask you first, or let it run without asking you"
        );
        assert!(on(HookEvent::PreToolUse, Some("*")).starts_with("PreToolUse for every tool:"));
        assert!(
            on(HookEvent::PostToolUse, Some("fs.write|Edit"))
                .starts_with("PostToolUse for fs.write, Edit: sees each call's input and result")
        );
        assert!(
            on(HookEvent::PermissionRequest, Some(r"fs\..*"))
                .starts_with(r"PermissionRequest for tools matching `fs\..*`: ")
        );
        assert_eq!(
            on(HookEvent::UserPromptSubmit, None),
            "UserPromptSubmit: sees every prompt you send; may block it or add text for the model"
        );
        assert!(
            on(HookEvent::SessionStart, Some("resume"))
                .starts_with("SessionStart matching `resume`: ")
        );
        assert!(
            on(HookEvent::PreToolUse, Some("(")).contains("its matcher cannot be used"),
            "{}",
            on(HookEvent::PreToolUse, Some("("))
        );
        for event in HookEvent::ALL {
            assert!(!event.reach().is_empty());
        }
    }
}
