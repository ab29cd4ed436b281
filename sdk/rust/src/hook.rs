//! Declaring hooks and answering the host's events.
//!
//! A hook is an event, an optional matcher and a function from the event to
//! a [`Decision`]. The host matches events before it instantiates the
//! component; when several hooks of one component subscribe to the same
//! event, the SDK matches again to call only the ones the event is for, and
//! combines their answers the way the host does: any deny wins, then ask,
//! then allow.

use std::borrow::Cow;

use serde_json::Value;

use crate::Context;
use crate::bindings::capstan::plugin::types::CallContext;
use crate::bindings::hook_world::exports::capstan::plugin::hook as wit;

pub use wit::Event as HookEvent;

/// An event, as delivered to a hook.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Which event.
    pub kind: HookEvent,
    /// Its fields, with Claude Code's names (`session_id`, `cwd`,
    /// `permission_mode`, `hook_event_name`, `tool_name`, `tool_input`, ...).
    pub payload: Value,
}

impl Event {
    /// A field of the payload as text.
    pub fn str(&self, field: &str) -> Option<&str> {
        self.payload.get(field).and_then(Value::as_str)
    }

    /// The tool, as users name it (`fs.write`), for tool events.
    pub fn tool_name(&self) -> Option<&str> {
        self.str("tool_name")
    }

    /// The tool's input, for tool events.
    pub fn tool_input(&self) -> Option<&Value> {
        self.payload.get("tool_input")
    }

    /// A text field of the tool's input (`path`, `content`...).
    pub fn input_str(&self, field: &str) -> Option<&str> {
        self.tool_input()?.get(field)?.as_str()
    }

    /// The user's prompt, for UserPromptSubmit.
    pub fn prompt(&self) -> Option<&str> {
        self.str("prompt")
    }

    /// The hook event's name, as Claude Code spells it (`PreToolUse`).
    pub fn name(&self) -> &'static str {
        event_name(self.kind)
    }
}

/// What a hook wants to happen.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// No opinion.
    Proceed,
    /// Permit the action without asking the user (never over a deny rule,
    /// plan mode, or what the sandbox grants).
    Allow,
    /// Ask the user first, with this reason.
    Ask(String),
    /// Block the action; the reason goes to the model (or to the user, for
    /// a prompt).
    Deny(String),
    /// Run the tool with this input instead (a JSON object; the host checks
    /// it against the tool's schema).
    Modify(Value),
    /// Carry on, and give the model this context.
    AddContext(String),
    /// For Stop and SubagentStop: do not stop yet; the text says what is
    /// left to do.
    KeepGoing(String),
}

impl Decision {
    /// Denies with `reason`.
    pub fn deny(reason: impl Into<String>) -> Self {
        Self::Deny(reason.into())
    }

    /// Asks the user, with `reason`.
    pub fn ask(reason: impl Into<String>) -> Self {
        Self::Ask(reason.into())
    }

    /// Adds `text` to what the model sees.
    pub fn add_context(text: impl Into<String>) -> Self {
        Self::AddContext(text.into())
    }

    /// Adds a message for the user to the decision.
    pub fn with_message(self, message: impl Into<String>) -> Reply {
        Reply {
            decision: self,
            system_message: Some(message.into()),
        }
    }
}

/// A decision with an optional message for the user.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The decision.
    pub decision: Decision,
    /// A message shown to the user, not the model.
    pub system_message: Option<String>,
}

impl From<Decision> for Reply {
    fn from(decision: Decision) -> Self {
        Self {
            decision,
            system_message: None,
        }
    }
}

type Handler = Box<dyn Fn(&Event, &Context) -> Result<Reply, String>>;

/// One hook: an event, an optional matcher, and a function.
pub struct Hook {
    event: HookEvent,
    matcher: Option<Cow<'static, str>>,
    handler: Handler,
}

impl Hook {
    /// A hook on `event` that runs `handler`. An `Err` from the handler is
    /// a failure: on an event that guards an action (UserPromptSubmit,
    /// PreToolUse, PermissionRequest) the host then blocks the action.
    pub fn on<R, F>(event: HookEvent, handler: F) -> Self
    where
        R: Into<Reply>,
        F: Fn(&Event, &Context) -> Result<R, String> + 'static,
    {
        Self {
            event,
            matcher: None,
            handler: Box::new(move |event, ctx| handler(event, ctx).map(Into::into)),
        }
    }

    /// Limits the hook to some tools (or sources, triggers...): a name, a
    /// `|`-separated list, or a regular expression matching the whole name.
    /// Tools may be named `fs.write`, `fs__write` or, for the built-in file
    /// tools, as Claude Code does (`Write|Edit`).
    pub fn matching(mut self, matcher: impl Into<Cow<'static, str>>) -> Self {
        self.matcher = Some(matcher.into());
        self
    }

    /// Runs the hook on an event, as the host would.
    pub fn run(&self, event: &Event, ctx: &Context) -> Result<Reply, String> {
        (self.handler)(event, ctx)
    }

    /// Whether this hook is for `event`.
    pub fn wants(&self, event: &Event) -> bool {
        self.event == event.kind && matches(self.matcher.as_deref(), event)
    }
}

/// Claude Code's name for an event.
pub fn event_name(event: HookEvent) -> &'static str {
    match event {
        HookEvent::SessionStart => "SessionStart",
        HookEvent::SessionEnd => "SessionEnd",
        HookEvent::UserPromptSubmit => "UserPromptSubmit",
        HookEvent::PreToolUse => "PreToolUse",
        HookEvent::PostToolUse => "PostToolUse",
        HookEvent::PostToolUseFailure => "PostToolUseFailure",
        HookEvent::PermissionRequest => "PermissionRequest",
        HookEvent::Stop => "Stop",
        HookEvent::SubagentStart => "SubagentStart",
        HookEvent::SubagentStop => "SubagentStop",
        HookEvent::PreCompact => "PreCompact",
        HookEvent::PostCompact => "PostCompact",
        HookEvent::Notification => "Notification",
    }
}

/// The names the event's matcher is tried against (as the host does).
fn subject(event: &Event) -> Option<Vec<String>> {
    let one = |key: &str| event.str(key).map(|v| vec![v.to_string()]);
    match event.kind {
        HookEvent::PreToolUse
        | HookEvent::PostToolUse
        | HookEvent::PostToolUseFailure
        | HookEvent::PermissionRequest => {
            let name = event.tool_name().unwrap_or_default();
            let mut names = vec![name.to_string(), name.replacen('.', "__", 1)];
            let aliases: &[&str] = match name {
                "fs.read" => &["Read"],
                "fs.write" => &["Write"],
                "fs.edit" => &["Edit", "MultiEdit"],
                "fs.glob" => &["Glob"],
                "fs.grep" => &["Grep"],
                "fs.ls" => &["LS"],
                _ => &[],
            };
            names.extend(aliases.iter().map(|a| a.to_string()));
            Some(names)
        }
        HookEvent::SessionStart => one("source"),
        HookEvent::SessionEnd => one("reason"),
        HookEvent::PreCompact | HookEvent::PostCompact => one("trigger"),
        HookEvent::Notification => one("notification_type"),
        HookEvent::SubagentStart | HookEvent::SubagentStop => one("agent_type"),
        _ => None,
    }
}

fn matches(matcher: Option<&str>, event: &Event) -> bool {
    let text = matcher.map(str::trim).unwrap_or_default();
    if text.is_empty() || text == "*" {
        return true;
    }
    let Some(names) = subject(event) else {
        return true;
    };
    let plain = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '|' | ' '));
    if plain {
        return text
            .split('|')
            .map(str::trim)
            .any(|wanted| names.iter().any(|n| n == wanted));
    }
    match regex::Regex::new(&format!("^(?:{text})$")) {
        Ok(re) => names.iter().any(|n| re.is_match(n)),
        Err(_) => false,
    }
}

/// Implements `subscriptions` for a list of hooks.
pub fn subscriptions(hooks: &[Hook]) -> Vec<wit::Subscription> {
    hooks
        .iter()
        .map(|h| wit::Subscription {
            event: h.event,
            matcher: h.matcher.as_ref().map(|m| m.to_string()),
        })
        .collect()
}

/// Implements `handle` for a list of hooks: runs those the event is for and
/// combines their replies (deny, then ask, then allow, then the rest).
pub fn handle(
    hooks: &[Hook],
    input: wit::EventInput,
    ctx: CallContext,
) -> Result<wit::HookOutput, String> {
    let payload: Value = serde_json::from_str(&input.payload)
        .map_err(|e| format!("the event's payload is not valid JSON: {e}"))?;
    let event = Event {
        kind: input.event,
        payload,
    };
    let ctx = Context::from(ctx);
    // The host matched the event before instantiating the component; only
    // when several hooks share the event must the SDK tell them apart.
    let for_event: Vec<&Hook> = hooks.iter().filter(|h| h.event == event.kind).collect();
    let mut replies = Vec::new();
    for hook in &for_event {
        if for_event.len() == 1 || matches(hook.matcher.as_deref(), &event) {
            replies.push(hook.run(&event, &ctx)?);
        }
    }
    let reply = combine(replies);
    Ok(wit::HookOutput {
        decision: match reply.decision {
            Decision::Proceed => wit::Decision::Proceed,
            Decision::Allow => wit::Decision::Allow,
            Decision::Ask(r) => wit::Decision::Ask(r),
            Decision::Deny(r) => wit::Decision::Deny(r),
            Decision::Modify(v) => wit::Decision::Modify(v.to_string()),
            Decision::AddContext(t) => wit::Decision::AddContext(t),
            Decision::KeepGoing(t) => wit::Decision::KeepGoing(t),
        },
        system_message: reply.system_message,
    })
}

/// One reply from several: the strongest decision (deny, ask, allow,
/// modify, keep-going, add-context), contexts joined, messages joined.
fn combine(replies: Vec<Reply>) -> Reply {
    let rank = |d: &Decision| match d {
        Decision::Deny(_) => 6,
        Decision::Ask(_) => 5,
        Decision::Allow => 4,
        Decision::Modify(_) => 3,
        Decision::KeepGoing(_) => 2,
        Decision::AddContext(_) => 1,
        Decision::Proceed => 0,
    };
    let messages: Vec<String> = replies
        .iter()
        .filter_map(|r| r.system_message.clone())
        .collect();
    let contexts: Vec<&str> = replies
        .iter()
        .filter_map(|r| match &r.decision {
            Decision::AddContext(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    let mut decision = replies
        .iter()
        .map(|r| &r.decision)
        .max_by_key(|d| rank(d))
        .cloned()
        .unwrap_or(Decision::Proceed);
    if matches!(decision, Decision::AddContext(_)) {
        decision = Decision::AddContext(contexts.join("\n\n"));
    }
    Reply {
        decision,
        system_message: (!messages.is_empty()).then(|| messages.join("\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: HookEvent, payload: Value) -> Event {
        Event { kind, payload }
    }

    #[test]
    fn matchers_follow_the_host() {
        let write = event(HookEvent::PreToolUse, json!({"tool_name": "fs.write"}));
        assert!(matches(None, &write));
        assert!(matches(Some("fs.write|fs.edit"), &write));
        assert!(matches(Some("Write"), &write));
        assert!(matches(Some("fs__write"), &write));
        assert!(matches(Some(r"fs\..*"), &write));
        assert!(!matches(Some("fs.read"), &write));
        assert!(!matches(Some(r"s\.write"), &write));
        let start = event(HookEvent::SessionStart, json!({"source": "resume"}));
        assert!(matches(Some("resume"), &start));
        assert!(!matches(Some("startup"), &start));
    }

    #[test]
    fn only_matching_hooks_run_and_deny_wins() {
        let hooks = vec![
            Hook::on(HookEvent::PreToolUse, |_, _| Ok(Decision::Allow)),
            Hook::on(HookEvent::PreToolUse, |_, _| Ok(Decision::deny("no"))).matching("fs.write"),
            Hook::on(HookEvent::PreToolUse, |_, _| {
                Ok(Decision::add_context("read it").with_message("hi"))
            })
            .matching("fs.read"),
        ];
        let ctx = || CallContext {
            call_id: "c".into(),
            workspace: None,
            session_id: None,
        };
        let input = |tool: &str| wit::EventInput {
            event: HookEvent::PreToolUse,
            payload: json!({"tool_name": tool}).to_string(),
        };
        let out = handle(&hooks, input("fs.write"), ctx()).unwrap();
        assert!(matches!(&out.decision, wit::Decision::Deny(r) if r == "no"));
        let out = handle(&hooks, input("fs.read"), ctx()).unwrap();
        assert!(matches!(out.decision, wit::Decision::Allow));
        assert_eq!(out.system_message.as_deref(), Some("hi"));
        let bad = wit::EventInput {
            event: HookEvent::PreToolUse,
            payload: "{".into(),
        };
        assert!(handle(&hooks, bad, ctx()).is_err());
    }
}
