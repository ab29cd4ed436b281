//! Running the hooks an event reaches, concurrently, and combining their
//! answers: any deny wins, then ask, then allow. A hook that fails on a
//! blocking event counts as a deny that names it (fail closed); on other
//! events its failure is a warning and it is ignored.

use std::sync::Arc;

use serde_json::Value;

use super::agent::HookAgentRunner;
use super::matcher::{self, Matcher};
use super::{Decision, Hook, HookEvent, HookFailure, HookOutput};

/// A hook could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "hook {hook} subscribes to {event} with a matcher that cannot be used: {reason}; fix the plugin, or remove it with `capstan plugin remove`"
)]
pub struct SubscriptionError {
    /// The hook.
    pub hook: String,
    /// The event's name.
    pub event: &'static str,
    /// What is wrong with the matcher.
    pub reason: String,
}

struct Entry {
    hook: Arc<dyn Hook>,
    subscriptions: Vec<(HookEvent, Matcher)>,
}

/// The hooks of a session, with their matchers compiled.
#[derive(Default)]
pub struct HookSet {
    entries: Vec<Entry>,
}

impl std::fmt::Debug for HookSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| e.hook.name()))
            .finish()
    }
}

/// One hook's answer to an event.
#[derive(Debug, Clone, PartialEq)]
pub struct HookAnswer {
    /// The hook's name.
    pub hook: String,
    /// What it answered, or why it did not.
    pub result: Result<HookOutput, HookFailure>,
}

impl HookSet {
    /// Compiles the hooks' matchers. A matcher that is not a valid
    /// expression is an error naming the hook.
    pub fn new(hooks: Vec<Arc<dyn Hook>>) -> Result<Self, SubscriptionError> {
        let mut entries = Vec::new();
        for hook in hooks {
            let mut subscriptions = Vec::new();
            for sub in hook.subscriptions() {
                let matcher =
                    Matcher::parse(sub.matcher.as_deref()).map_err(|reason| SubscriptionError {
                        hook: hook.name().to_string(),
                        event: sub.event.name(),
                        reason,
                    })?;
                subscriptions.push((sub.event, matcher));
            }
            entries.push(Entry {
                hook,
                subscriptions,
            });
        }
        Ok(Self { entries })
    }

    /// The hooks, in order.
    pub fn hooks(&self) -> Vec<Arc<dyn Hook>> {
        self.entries.iter().map(|e| e.hook.clone()).collect()
    }

    /// Whether there are no hooks at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The hooks' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.hook.name())
    }

    /// Whether any hook subscribes to `event` at all, so the caller can skip
    /// building its payload.
    pub fn wants(&self, event: HookEvent) -> bool {
        self.entries
            .iter()
            .any(|e| e.subscriptions.iter().any(|(ev, _)| *ev == event))
    }

    /// The hooks `event` with `payload` reaches, in order. Matching happens
    /// here, before any hook is instantiated.
    pub fn matching(&self, event: HookEvent, payload: &Value) -> Vec<&Arc<dyn Hook>> {
        let subject = matcher::subject(event, payload);
        self.entries
            .iter()
            .filter(|entry| {
                entry.subscriptions.iter().any(|(ev, m)| {
                    *ev == event
                        && match &subject {
                            Some(names) => m.matches(names),
                            None => true,
                        }
                })
            })
            .map(|entry| &entry.hook)
            .collect()
    }

    /// Delivers `event` to every matching hook, concurrently, each in its
    /// own fresh instance, and returns their answers in hook order. Agent
    /// hooks fail here: they need [`Self::dispatch_with`].
    pub async fn dispatch(&self, event: HookEvent, payload: &Value) -> Vec<HookAnswer> {
        self.dispatch_with(event, payload, None).await
    }

    /// [`Self::dispatch`], with `agents` running the sub-agents of agent
    /// hooks (without it, an agent hook fails).
    pub async fn dispatch_with(
        &self,
        event: HookEvent,
        payload: &Value,
        agents: Option<&dyn HookAgentRunner>,
    ) -> Vec<HookAnswer> {
        let hooks = self.matching(event, payload);
        if hooks.is_empty() {
            return Vec::new();
        }
        let runs = hooks.into_iter().map(|hook| async move {
            let started = std::time::Instant::now();
            let result = match (hook.agent(), agents) {
                (Some(agent), Some(runner)) => agent.run(runner, event, payload).await,
                _ => hook.handle(event, payload).await,
            };
            let duration_ms = started.elapsed().as_millis() as u64;
            match &result {
                Ok(output) => tracing::info!(
                    event = event.name(),
                    hook = hook.name(),
                    decision = decision_name(&output.decision),
                    duration_ms,
                    "hook ran"
                ),
                Err(failure) => tracing::warn!(
                    event = event.name(),
                    hook = hook.name(),
                    %failure,
                    duration_ms,
                    "hook failed"
                ),
            }
            HookAnswer {
                hook: hook.name().to_string(),
                result,
            }
        });
        let span = tracing::debug_span!("hooks", event = event.name());
        tracing::Instrument::instrument(futures_util::future::join_all(runs), span).await
    }
}

/// What the hooks, together, want done about an action.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Verdict {
    /// No hook has an opinion.
    #[default]
    Proceed,
    /// A hook permits it without asking the user.
    Allow {
        /// The first hook that allowed it.
        hook: String,
    },
    /// A hook wants the user asked.
    Ask {
        /// The first hook that asked.
        hook: String,
        /// Why, as the hooks said.
        reason: String,
    },
    /// A hook blocks it, or failed on a blocking event.
    Deny {
        /// The hooks that denied or failed, joined.
        hook: String,
        /// Why, as the hooks said.
        reason: String,
    },
}

/// The answers to one event, combined.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Combined {
    /// Deny, ask, allow or nothing.
    pub verdict: Verdict,
    /// The new input a hook asked for, with the hook's name.
    pub modified: Option<(String, Value)>,
    /// Context for the model, with each hook's name.
    pub context: Vec<(String, String)>,
    /// A request not to stop yet (Stop, SubagentStop), with the hook's name.
    pub keep_going: Option<(String, String)>,
    /// Messages for the user, with each hook's name.
    pub messages: Vec<(String, String)>,
    /// What the user should know about hooks that failed or answered
    /// something the event does not take; they were ignored.
    pub warnings: Vec<String>,
}

impl Combined {
    /// The verdict's hook and reason when it is a deny.
    pub fn denied(&self) -> Option<(&str, &str)> {
        match &self.verdict {
            Verdict::Deny { hook, reason } => Some((hook, reason)),
            _ => None,
        }
    }
}

/// Which decisions an event takes. Others are ignored with a warning.
fn accepts(event: HookEvent, decision: &Decision) -> bool {
    match decision {
        Decision::Proceed => true,
        Decision::Deny(_) | Decision::AddContext(_) => true,
        Decision::Allow | Decision::Ask(_) => {
            matches!(event, HookEvent::PreToolUse | HookEvent::PermissionRequest)
        }
        Decision::Modify(_) => matches!(event, HookEvent::PreToolUse),
        Decision::KeepGoing(_) => matches!(event, HookEvent::Stop | HookEvent::SubagentStop),
    }
}

fn decision_name(decision: &Decision) -> &'static str {
    match decision {
        Decision::Proceed => "proceed",
        Decision::Allow => "allow",
        Decision::Ask(_) => "ask",
        Decision::Deny(_) => "deny",
        Decision::Modify(_) => "modify",
        Decision::AddContext(_) => "add-context",
        Decision::KeepGoing(_) => "keep-going",
    }
}

/// Combines the answers to `event`: any deny wins, then ask, then allow.
/// On Stop and SubagentStop a deny means "do not stop", as in Claude Code,
/// so it becomes a keep-going. Two hooks that modify the input differently
/// deny the action rather than pick one.
pub fn combine(event: HookEvent, answers: &[HookAnswer]) -> Combined {
    let mut combined = Combined::default();
    let mut denies: Vec<(String, String)> = Vec::new();
    let mut ask: Option<(String, String)> = None;
    let mut allow: Option<String> = None;
    for answer in answers {
        let hook = &answer.hook;
        let output = match &answer.result {
            Ok(output) => output,
            Err(failure) => {
                if event.is_blocking() {
                    denies.push((
                        hook.clone(),
                        format!("hook {hook} failed, so the action was blocked (hooks fail closed): {failure}"),
                    ));
                } else {
                    combined.warnings.push(format!(
                        "hook {hook} failed on {} and was ignored: {failure}",
                        event.name()
                    ));
                }
                continue;
            }
        };
        if let Some(message) = &output.system_message {
            combined.messages.push((hook.clone(), message.clone()));
        }
        if !accepts(event, &output.decision) {
            combined.warnings.push(format!(
                "hook {hook} answered `{}` to {}, which does not take it; ignored",
                decision_name(&output.decision),
                event.name()
            ));
            continue;
        }
        match &output.decision {
            Decision::Proceed => {}
            Decision::Allow => {
                allow.get_or_insert_with(|| hook.clone());
            }
            Decision::Ask(reason) => {
                ask.get_or_insert_with(|| (hook.clone(), reason.clone()));
            }
            Decision::Deny(reason) => {
                if matches!(event, HookEvent::Stop | HookEvent::SubagentStop) {
                    combined
                        .keep_going
                        .get_or_insert_with(|| (hook.clone(), reason.clone()));
                } else {
                    denies.push((hook.clone(), reason.clone()));
                }
            }
            Decision::AddContext(text) => combined.context.push((hook.clone(), text.clone())),
            Decision::KeepGoing(text) => {
                combined
                    .keep_going
                    .get_or_insert_with(|| (hook.clone(), text.clone()));
            }
            Decision::Modify(input) => match &combined.modified {
                None => combined.modified = Some((hook.clone(), input.clone())),
                Some((_, same)) if same == input => {}
                Some((first, _)) => denies.push((
                    hook.clone(),
                    format!(
                        "hooks {first} and {hook} both changed the input, differently; the call was blocked rather than pick one"
                    ),
                )),
            },
        }
    }
    combined.verdict = if !denies.is_empty() {
        let hook = denies
            .iter()
            .map(|(h, _)| h.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let reason = if denies.len() == 1 {
            denies[0].1.clone()
        } else {
            denies
                .iter()
                .map(|(h, r)| format!("{h}: {r}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        Verdict::Deny { hook, reason }
    } else if let Some((hook, reason)) = ask {
        Verdict::Ask { hook, reason }
    } else if let Some(hook) = allow {
        Verdict::Allow { hook }
    } else {
        Verdict::Proceed
    };
    combined
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(hook: &str, decision: Decision) -> HookAnswer {
        HookAnswer {
            hook: hook.into(),
            result: Ok(HookOutput {
                decision,
                system_message: None,
            }),
        }
    }

    fn failed(hook: &str) -> HookAnswer {
        HookAnswer {
            hook: hook.into(),
            result: Err(HookFailure::TimedOut(5000)),
        }
    }

    #[test]
    fn deny_beats_ask_beats_allow() {
        let pre = HookEvent::PreToolUse;
        let all = [
            ok("a", Decision::Allow),
            ok("b", Decision::Ask("check".into())),
            ok("c", Decision::Deny("no".into())),
        ];
        assert_eq!(
            combine(pre, &all).verdict,
            Verdict::Deny {
                hook: "c".into(),
                reason: "no".into()
            }
        );
        assert_eq!(
            combine(pre, &all[..2]).verdict,
            Verdict::Ask {
                hook: "b".into(),
                reason: "check".into()
            }
        );
        assert_eq!(
            combine(pre, &all[..1]).verdict,
            Verdict::Allow { hook: "a".into() }
        );
        assert_eq!(
            combine(pre, &[ok("a", Decision::Proceed)]).verdict,
            Verdict::Proceed
        );
    }

    #[test]
    fn failures_block_blocking_events_and_are_ignored_on_others() {
        let blocked = combine(
            HookEvent::PreToolUse,
            &[ok("a", Decision::Allow), failed("b")],
        );
        let (hook, reason) = blocked.denied().unwrap();
        assert_eq!(hook, "b");
        assert!(
            reason.contains("hook b failed") && reason.contains("5000 ms"),
            "{reason}"
        );
        let ignored = combine(HookEvent::PostToolUse, &[failed("b")]);
        assert_eq!(ignored.verdict, Verdict::Proceed);
        assert!(ignored.warnings[0].contains("hook b failed on PostToolUse"));
    }

    #[test]
    fn differing_modifications_deny_and_equal_ones_apply() {
        let a = ok("a", Decision::Modify(json!({"path": "x"})));
        let b = ok("b", Decision::Modify(json!({"path": "y"})));
        let same = ok("c", Decision::Modify(json!({"path": "x"})));
        let both = combine(HookEvent::PreToolUse, &[a.clone(), b]);
        assert!(both.denied().unwrap().1.contains("differently"));
        let agreed = combine(HookEvent::PreToolUse, &[a, same]);
        assert_eq!(agreed.verdict, Verdict::Proceed);
        assert_eq!(agreed.modified, Some(("a".into(), json!({"path": "x"}))));
    }

    #[test]
    fn decisions_an_event_does_not_take_are_ignored() {
        let c = combine(
            HookEvent::PostToolUse,
            &[
                ok("a", Decision::Allow),
                ok("b", Decision::KeepGoing("more".into())),
            ],
        );
        assert_eq!(c.verdict, Verdict::Proceed);
        assert_eq!(c.keep_going, None);
        assert_eq!(c.warnings.len(), 2);
        let stop = combine(
            HookEvent::Stop,
            &[ok("s", Decision::Deny("tests fail".into()))],
        );
        assert_eq!(stop.verdict, Verdict::Proceed);
        assert_eq!(stop.keep_going, Some(("s".into(), "tests fail".into())));
    }

    struct Fixed {
        name: &'static str,
        subscriptions: Vec<super::super::Subscription>,
    }

    impl Hook for Fixed {
        fn name(&self) -> &str {
            self.name
        }

        fn subscriptions(&self) -> &[super::super::Subscription] {
            &self.subscriptions
        }

        fn handle<'a>(
            &'a self,
            _event: HookEvent,
            _payload: &'a Value,
        ) -> futures_util::future::BoxFuture<'a, Result<HookOutput, HookFailure>> {
            Box::pin(async {
                Ok(HookOutput {
                    decision: Decision::Deny(self.name.to_string()),
                    system_message: None,
                })
            })
        }
    }

    fn fixed(name: &'static str, event: HookEvent, matcher: Option<&str>) -> Arc<dyn Hook> {
        Arc::new(Fixed {
            name,
            subscriptions: vec![super::super::Subscription {
                event,
                matcher: matcher.map(str::to_string),
            }],
        })
    }

    #[test]
    fn a_bad_matcher_is_an_error_naming_the_hook() {
        let err = HookSet::new(vec![fixed(
            "broken",
            HookEvent::PreToolUse,
            Some("fs\\.(write"),
        )])
        .unwrap_err();
        assert_eq!(err.hook, "broken");
        assert!(err.to_string().contains("PreToolUse"), "{err}");
    }

    #[tokio::test]
    async fn only_matching_hooks_are_run() {
        let set = HookSet::new(vec![
            fixed("writes", HookEvent::PreToolUse, Some("Write|Edit")),
            fixed("reads", HookEvent::PreToolUse, Some(r"fs\.read")),
            fixed("stops", HookEvent::Stop, None),
        ])
        .unwrap();
        assert!(set.wants(HookEvent::Stop) && !set.wants(HookEvent::SessionEnd));
        let answers = set
            .dispatch(HookEvent::PreToolUse, &json!({"tool_name": "fs.write"}))
            .await;
        let names: Vec<&str> = answers.iter().map(|a| a.hook.as_str()).collect();
        assert_eq!(names, ["writes"]);
        let none = set
            .dispatch(HookEvent::PreToolUse, &json!({"tool_name": "web.fetch"}))
            .await;
        assert!(none.is_empty());
    }

    #[test]
    fn context_and_messages_are_kept_per_hook() {
        let mut with_message = ok("b", Decision::AddContext("two".into()));
        if let Ok(output) = &mut with_message.result {
            output.system_message = Some("hello".into());
        }
        let c = combine(
            HookEvent::UserPromptSubmit,
            &[ok("a", Decision::AddContext("one".into())), with_message],
        );
        assert_eq!(
            c.context,
            vec![("a".into(), "one".into()), ("b".into(), "two".into())]
        );
        assert_eq!(c.messages, vec![("b".into(), "hello".into())]);
    }
}
