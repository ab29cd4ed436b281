//! Running one answer's tool calls: batch by batch ([`super::scheduler`]),
//! each call authorized ([`super::approval`]) before its batch starts, the
//! calls of a batch run concurrently through their handlers, PostToolUse
//! (or PostToolUseFailure) hooks run as part of their call, and one result
//! per call goes back in the order the model asked for them.
//!
//! Results are recorded as each call finishes, so an interrupt keeps the
//! ones already done and only the rest are reported as interrupted.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};
use tracing::Instrument;

use super::approval::Authorized;
use super::tool::{ToolCall, ToolOutcome};
use super::{Agent, AgentError, AgentEvent, Frontend, INTERRUPTED_RESULT, Interrupt, scheduler};
use crate::hooks::{self, Combined, HookAnswer, HookEvent, SessionFacts};
use crate::model::{Block, Image, Usage};
use crate::session::TranscriptWriter;

/// One tool call the model asked for.
pub(super) struct Call {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) input: Value,
}

/// A call that ran: which one, how it ended, how long it took, and what
/// its PostToolUse (or PostToolUseFailure) hooks answered.
struct Ran<'a> {
    index: usize,
    authorized: &'a Authorized,
    outcome: ToolOutcome,
    duration: Duration,
    event: HookEvent,
    answers: Vec<HookAnswer>,
}

/// A call's result for the model, and its hooks' answers to record.
struct Settled<'a> {
    index: usize,
    authorized: &'a Authorized,
    output: String,
    is_error: bool,
    images: Vec<Image>,
    duration: Duration,
    post: PostHooks,
}

impl<'a> Ran<'a> {
    /// The result for the model (capped at `result_cap` bytes), with the
    /// notes of the hooks that ran before and after the call.
    fn settle(self, call_id: &str, result_cap: usize) -> Settled<'a> {
        let (mut output, is_error) = match self.outcome.result {
            Ok(text) => (scheduler::cap_result(text, result_cap), false),
            Err(error) => (scheduler::cap_result(error.to_string(), result_cap), true),
        };
        let combined = hooks::combine(self.event, &self.answers);
        let mut notes = self.authorized.notes.clone();
        if let Some((hook, reason)) = combined.denied() {
            notes.push(format!("Hook {hook} flagged this result: {reason}"));
        }
        notes.extend(
            combined
                .context
                .iter()
                .map(|(hook, text)| format!("Note from hook {hook}: {text}")),
        );
        for note in notes {
            output.push_str("\n\n[");
            output.push_str(&note);
            output.push(']');
        }
        Settled {
            index: self.index,
            authorized: self.authorized,
            output,
            is_error,
            images: self.outcome.images,
            duration: self.duration,
            post: PostHooks {
                call_id: call_id.to_string(),
                event: self.event,
                answers: self.answers,
                combined,
            },
        }
    }
}

/// The hooks' answers after a call, to record once the batch is done.
struct PostHooks {
    call_id: String,
    event: HookEvent,
    answers: Vec<HookAnswer>,
    combined: Combined,
}

impl Agent {
    /// Runs an answer's tool calls batch by batch and returns one result
    /// per call, in call order.
    pub(super) async fn run_calls(
        &mut self,
        calls: &[Call],
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
    ) -> Result<Vec<Block>, AgentError> {
        let mut results: Vec<Option<(String, bool, Vec<Image>)>> = vec![None; calls.len()];
        let read_only: Vec<bool> = calls
            .iter()
            .map(|call| {
                self.find_tool(&call.name)
                    .is_none_or(|tool| tool.spec.read_only)
            })
            .collect();
        for batch in scheduler::batches(&read_only) {
            if interrupt.is_raised() {
                break;
            }
            let mut runnable: Vec<(usize, Authorized)> = Vec::new();
            for index in batch {
                let call = &calls[index];
                match self.authorize(call, frontend, interrupt).await? {
                    Ok(authorized) => runnable.push((index, authorized)),
                    Err(refusal) => {
                        let tool = self.tool_label(&call.name);
                        frontend.event(AgentEvent::ToolFinished {
                            id: &call.id,
                            tool: &tool,
                            input: &call.input,
                            is_error: true,
                            output: &refusal,
                            duration: Duration::ZERO,
                        });
                        results[index] = Some((refusal, true, Vec::new()));
                    }
                }
            }
            if !runnable.is_empty() {
                self.run_batch(calls, &runnable, &mut results, frontend, interrupt)
                    .await?;
            }
            if interrupt.is_raised() {
                break;
            }
        }
        Ok(calls
            .iter()
            .zip(results)
            .map(|(call, result)| {
                let (content, is_error, images) = result.unwrap_or_else(|| {
                    let tool = self.tool_label(&call.name);
                    frontend.event(AgentEvent::ToolFinished {
                        id: &call.id,
                        tool: &tool,
                        input: &call.input,
                        is_error: true,
                        output: INTERRUPTED_RESULT,
                        duration: Duration::ZERO,
                    });
                    (INTERRUPTED_RESULT.to_string(), true, Vec::new())
                });
                Block::ToolResult {
                    tool_use_id: call.id.clone(),
                    content,
                    is_error,
                    images,
                }
            })
            .collect())
    }

    /// The tool's full name, or the model's name for it if unknown.
    fn tool_label(&self, name: &str) -> String {
        self.find_tool(name)
            .map_or(name.to_string(), |t| t.name.clone())
    }

    /// Runs the authorized calls of one batch concurrently (at most
    /// `max_parallel` at once), recording each result as it finishes,
    /// until all are done or the user interrupts.
    async fn run_batch(
        &mut self,
        calls: &[Call],
        runnable: &[(usize, Authorized)],
        results: &mut [Option<(String, bool, Vec<Image>)>],
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
    ) -> Result<(), AgentError> {
        for (index, authorized) in runnable {
            frontend.event(AgentEvent::ToolStarted {
                id: &calls[*index].id,
                tool: &authorized.tool.name,
                input: &authorized.input,
            });
        }
        let parts = self.parts.clone();
        let session_id = self.transcript.as_ref().map(TranscriptWriter::id);
        let facts = self.session_facts();
        let context = CallContext {
            parts: &parts,
            session_id,
            facts: &facts,
            interrupt,
            reach: self.profile.reach,
        };
        let result_cap = self.parts.config.result_cap;
        let mut used = Usage::default();
        let mut post_hooks = Vec::new();
        let mut runs = futures_util::stream::iter(
            runnable
                .iter()
                .map(|(index, authorized)| context.run(*index, &calls[*index].id, authorized)),
        )
        .buffer_unordered(self.parts.config.max_parallel.max(1));
        loop {
            let next = tokio::select! {
                biased;
                () = interrupt.raised() => None,
                next = runs.next() => next,
            };
            let Some(ran) = next else {
                break;
            };
            used.add(ran.outcome.usage);
            let call_id = &calls[ran.index].id;
            let settled = ran.settle(call_id, result_cap);
            frontend.event(AgentEvent::ToolFinished {
                id: &calls[settled.index].id,
                tool: &settled.authorized.tool.name,
                input: &settled.authorized.input,
                is_error: settled.is_error,
                output: &settled.output,
                duration: settled.duration,
            });
            results[settled.index] = Some((settled.output, settled.is_error, settled.images));
            post_hooks.push(settled.post);
        }
        drop(runs);
        for post in post_hooks {
            self.record_hooks(
                post.event,
                &post.answers,
                &post.combined,
                Some(&post.call_id),
                frontend,
            )?;
        }
        if used != Usage::default() {
            self.cost.add(used);
            frontend.event(AgentEvent::Usage(used));
            if let Some(transcript) = &mut self.transcript {
                transcript.record_usage(used)?;
            }
        }
        Ok(())
    }
}

/// What every call of a batch is run with.
struct CallContext<'a> {
    parts: &'a super::SessionParts,
    session_id: Option<&'a str>,
    facts: &'a SessionFacts<'a>,
    interrupt: &'a Interrupt,
    reach: super::tool::Reach,
}

impl<'a> CallContext<'a> {
    /// Runs one authorized call through its handler, then the hooks that
    /// follow it.
    async fn run(&self, index: usize, call_id: &'a str, authorized: &'a Authorized) -> Ran<'a> {
        let tool = &authorized.tool;
        let span = tracing::debug_span!(
            "tool_call",
            tool = tool.name.as_str(),
            plugin = tool.name.split_once('.').map_or("", |(plugin, _)| plugin),
            call = call_id,
            instance = tracing::field::Empty,
        );
        let started = Instant::now();
        let events = self.parts.toolbox.events_for(call_id);
        let outcome = tool
            .call(ToolCall {
                input: &authorized.input,
                call_id,
                session_id: self.session_id,
                interrupt: self.interrupt,
                events: events.as_ref(),
                audit: self.parts.toolbox.audit(),
                session: Some(self.parts),
                reach: self.reach,
            })
            .instrument(span.clone())
            .await;
        let mut outcome = outcome;
        if let (Ok(text), Some(watch)) = (&mut outcome.result, self.parts.toolbox.file_watch()) {
            let path = ["path", "file_path"]
                .iter()
                .find_map(|key| authorized.input.get(*key).and_then(Value::as_str));
            if let Some(path) = path
                && let Some(note) = watch.touched(path, !tool.spec.read_only).await
            {
                text.push_str("\n\n");
                text.push_str(&note);
            }
        }
        let duration = started.elapsed();
        span.in_scope(|| match &outcome.result {
            Ok(text) => tracing::debug!(
                outcome = "ok",
                result_bytes = text.len(),
                duration_ms = duration.as_millis() as u64,
                "tool call done"
            ),
            Err(error) => tracing::info!(
                tool = tool.name.as_str(),
                call = call_id,
                outcome = "error",
                %error,
                duration_ms = duration.as_millis() as u64,
                "tool call done"
            ),
        });
        let (event, fields) = match &outcome.result {
            Ok(text) => (
                HookEvent::PostToolUse,
                json!({
                    "tool_name": tool.name,
                    "tool_input": authorized.input,
                    "tool_response": text,
                    "tool_use_id": call_id,
                }),
            ),
            Err(error) => (
                HookEvent::PostToolUseFailure,
                json!({
                    "tool_name": tool.name,
                    "tool_input": authorized.input,
                    "tool_use_id": call_id,
                    "error": error.to_string(),
                    "is_interrupt": false,
                }),
            ),
        };
        let hooks = &self.parts.hooks;
        let answers = if hooks.wants(event) {
            let payload = hooks::payload(event, self.facts, fields);
            let agents = super::hook_agent::HookAgents::new(self.parts, self.session_id);
            let answers = hooks.dispatch_with(event, &payload, Some(&agents)).await;
            // Agent hooks' tokens count with the call's.
            outcome.usage.add(agents.used());
            answers
        } else {
            Vec::new()
        };
        Ran {
            index,
            authorized,
            outcome,
            duration,
            event,
            answers,
        }
    }
}
