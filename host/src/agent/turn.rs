//! The loop of one turn: the user's prompt, then a request to the model,
//! its answer streamed to the front end, the tool calls it asks for
//! ([`super::dispatch`]), their results back to the model, and again, until
//! the model ends its turn, the user interrupts, or `max_turns` requests
//! were made.

use std::time::Instant;

use serde_json::json;
use tracing::Instrument;

use super::dispatch::Call;
use super::{
    Agent, AgentError, AgentEvent, Frontend, Interrupt, MAX_STOP_CONTINUES, TurnEnd, TurnReport,
    compact, structured_output,
};
use crate::hooks::{Combined, HookEvent};
use crate::model::{Block, Message, Request, Response, Role, StopReason, StreamEvent, Usage};
use crate::session::record::Event;

/// What became of one request to the model.
enum Answered {
    /// The model answered.
    Response(Response),
    /// The user interrupted it; the text streamed so far was kept.
    Interrupted,
    /// The model stayed overloaded through the retries, nothing was
    /// streamed, and a fallback model is there to try.
    Overloaded(crate::model::ModelError),
}

impl Agent {
    /// Runs one turn: the user's `prompt`, then model answers and tool
    /// calls until the model ends its turn, the user interrupts, or
    /// `max_turns` requests were made. Skills loaded during the turn (or
    /// run by the user just before it) stop being active when it ends.
    pub async fn run_turn(
        &mut self,
        prompt: &str,
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
    ) -> Result<TurnReport, AgentError> {
        // Plugins parked while the session idled are linked again and
        // their next instances made while the model is busy; none is
        // parked until the turn is over.
        let _warm = self.parts.toolbox.sandbox().keep_warm();
        // The span, its `turn done` line and every model request and tool
        // call in it are at `debug` (`-v`): at the default level a turn
        // writes nothing unless something fails or is retried, because a
        // line every turn costs the loop more than its own bookkeeping of a
        // call (`cargo bench --bench agent`, with `BENCH_LOG_FILTER`).
        let span = tracing::debug_span!(
            "turn",
            session = self.session_id().unwrap_or_default(),
            model = self.parts.config.model.as_str(),
        );
        let started = Instant::now();
        let report = self
            .turn(prompt, frontend, interrupt)
            .instrument(span.clone())
            .await;
        span.in_scope(|| match &report {
            Ok(report) => tracing::debug!(
                session = self.session_id().unwrap_or_default(),
                model = self.parts.config.model.as_str(),
                end = ?report.end,
                requests = report.requests,
                tool_calls = report.tool_calls,
                tokens_in = report.usage.input_tokens,
                tokens_out = report.usage.output_tokens,
                duration_ms = started.elapsed().as_millis() as u64,
                "turn done"
            ),
            Err(error) => tracing::warn!(
                session = self.session_id().unwrap_or_default(),
                %error,
                duration_ms = started.elapsed().as_millis() as u64,
                "turn failed"
            ),
        });
        self.flush_checkpoints(frontend);
        self.parts.toolbox.end_skill_turn();
        report
    }

    /// [`Agent::run_turn`], without ending the turn's skills (a sub-agent
    /// runs its task this way).
    pub(super) async fn turn(
        &mut self,
        prompt: &str,
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
    ) -> Result<TurnReport, AgentError> {
        if self.should_compact() {
            self.compact_or_notice(frontend, interrupt, false).await?;
        }
        let mut report = TurnReport {
            end: TurnEnd::Finished(StopReason::EndTurn),
            text: String::new(),
            requests: 0,
            tool_calls: 0,
            usage: Usage::default(),
            structured_output: None,
        };
        if let Some(blocked) = self.submit_prompt(prompt, frontend).await? {
            report.end = blocked;
            return Ok(report);
        }
        let mut stop_continues = 0;
        let mut reminded = false;
        loop {
            if report.requests >= self.parts.config.max_turns {
                let reason = format!(
                    "stopped after {} model requests (--max-turns)",
                    report.requests
                );
                self.record(Event::Interrupted { reason })?;
                report.end = TurnEnd::MaxTurns(report.requests);
                return Ok(report);
            }
            if report.requests > 0 && self.should_compact() {
                self.compact_or_notice(frontend, interrupt, true).await?;
            }
            report.requests += 1;
            let mut answered = self.request_answer(frontend, interrupt).await?;
            if let Answered::Overloaded(error) = answered {
                self.fall_back(error, frontend)?;
                answered = self.request_answer(frontend, interrupt).await?;
            }
            let response = match answered {
                Answered::Response(response) => response,
                Answered::Interrupted => {
                    report.end = TurnEnd::Interrupted;
                    return Ok(report);
                }
                Answered::Overloaded(error) => return Err(error.into()),
            };
            report.usage.add(response.usage);
            let stop_reason = response.stop_reason.clone();
            let (text, mut calls) = self.keep_answer(response, frontend)?;
            report.text = text;
            if let Some(budget) = self.parts.config.max_budget_usd
                && let Some(spent) = super::cost::cost_usd(&self.parts.config.model, &report.usage)
                && spent > budget
            {
                self.record(Event::Interrupted {
                    reason: format!(
                        "stopped: the model requests cost ${spent:.4}, past the budget of ${budget} (--max-budget-usd)"
                    ),
                })?;
                report.end = TurnEnd::MaxBudget;
                return Ok(report);
            }
            let structured: Vec<Call> = if self.output_schema().is_some() {
                let (structured, rest) = calls
                    .into_iter()
                    .partition(|call| call.name == structured_output::TOOL);
                calls = rest;
                structured
            } else {
                Vec::new()
            };
            if calls.is_empty() && structured.is_empty() {
                if self
                    .keep_going(&mut stop_continues, &report.text, frontend)
                    .await?
                {
                    continue;
                }
                if self.output_schema().is_some() && !reminded {
                    reminded = true;
                    self.push_user_text(structured_output::REMINDER, &[], &[])?;
                    continue;
                }
                report.end = TurnEnd::Finished(stop_reason);
                return Ok(report);
            }
            report.tool_calls += u32::try_from(calls.len()).unwrap_or(u32::MAX);
            let may_write = calls.iter().any(|call| {
                self.find_tool(&call.name)
                    .is_some_and(|tool| !tool.spec.read_only)
            });
            if may_write {
                self.note_outside_checkpoint_changes(frontend);
            }
            let mut results = if calls.is_empty() {
                Vec::new()
            } else {
                self.run_calls(&calls, frontend, interrupt).await?
            };
            if may_write {
                self.record_checkpoint_changes(frontend);
            }
            report.tool_calls += u32::try_from(structured.len()).unwrap_or(u32::MAX);
            for call in &structured {
                let schema = self.output_schema().cloned().unwrap_or_default();
                let checked = structured_output::fits(&schema, &call.input);
                let content = match &checked {
                    Ok(()) if report.structured_output.is_none() => {
                        report.structured_output = Some(call.input.clone());
                        structured_output::ACCEPTED.to_string()
                    }
                    Ok(()) => structured_output::ACCEPTED.to_string(),
                    Err(why) => format!(
                        "The output does not fit the schema: {why}. Call {} again with output that fits it.",
                        structured_output::TOOL
                    ),
                };
                results.push(Block::ToolResult {
                    tool_use_id: call.id.clone(),
                    content,
                    is_error: checked.is_err(),
                    images: Vec::new(),
                });
            }
            let message = Message {
                role: Role::User,
                content: results,
            };
            frontend.event(AgentEvent::ToolResults(&message));
            if let Some(transcript) = &mut self.transcript {
                transcript.record_tool_results(&message)?;
            }
            self.messages.push(message);
            if let Some(output) = &report.structured_output {
                report.text = output.to_string();
                report.end = TurnEnd::Finished(stop_reason);
                return Ok(report);
            }
            if interrupt.is_raised() {
                self.record(Event::Interrupted {
                    reason: "interrupted by the user while tools were running".into(),
                })?;
                report.end = TurnEnd::Interrupted;
                return Ok(report);
            }
        }
    }

    /// Fires UserPromptSubmit (not for a sub-agent, whose task is not a
    /// prompt the user submitted; its start fired SubagentStart) and adds
    /// the prompt with the hooks' context; how the turn ends if a hook
    /// blocked it instead.
    async fn submit_prompt(
        &mut self,
        prompt: &str,
        frontend: &mut dyn Frontend,
    ) -> Result<Option<TurnEnd>, AgentError> {
        // A rewind cuts the transcript here, before the hooks' records.
        let offset = self.transcript.as_ref().map(|t| t.size()).transpose()?;
        let submitted = if self.parent.is_some() {
            Combined::default()
        } else {
            self.fire(
                HookEvent::UserPromptSubmit,
                json!({ "prompt": prompt }),
                None,
                frontend,
            )
            .await?
        };
        if let Some((hook, reason)) = submitted.denied() {
            let (hook, reason) = (hook.to_string(), reason.to_string());
            let text = format!("hook {hook} blocked the prompt: {reason}");
            frontend.event(AgentEvent::Notice(&text));
            self.record(Event::Interrupted { reason: text })?;
            return Ok(Some(TurnEnd::PromptBlocked { hook, reason }));
        }
        let mut context = std::mem::take(&mut self.hook_context);
        context.extend(submitted.context);
        let added = std::mem::take(&mut self.user_context);
        self.begin_checkpoint(prompt, offset, frontend);
        self.push_user_text(prompt, &context, &added)?;
        Ok(None)
    }

    /// The fallback model, unless the session already uses it.
    fn fallback_model(&self) -> Option<&String> {
        let config = &self.parts.config;
        config
            .fallback_model
            .as_ref()
            .filter(|fallback| **fallback != config.model)
    }

    /// Switches the session to the fallback model after `error` (the model
    /// overloaded through every retry), as Claude Code's `--fallback-model`
    /// does, and tells the front end why the request is made again.
    fn fall_back(
        &mut self,
        error: crate::model::ModelError,
        frontend: &mut dyn Frontend,
    ) -> Result<(), AgentError> {
        let Some(model) = self.fallback_model().cloned() else {
            return Err(error.into());
        };
        tracing::warn!(%error, fallback = model.as_str(), "model overloaded; switching to the fallback model");
        self.set_model(&model, None)?;
        let reason = format!("{error}; switching to the fallback model {model}");
        frontend.event(AgentEvent::Retrying {
            attempt: 1,
            after: std::time::Duration::ZERO,
            reason: &reason,
        });
        Ok(())
    }

    /// Sends the conversation to the model and streams its answer to the
    /// front end. On an interrupt or an error, what was streamed is kept
    /// and the reason recorded.
    async fn request_answer(
        &mut self,
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
    ) -> Result<Answered, AgentError> {
        let request = Request {
            model: self.parts.config.model.clone(),
            system: self.request_system_prompt(),
            messages: self.messages.clone(),
            tools: self.tool_defs(),
            max_tokens: self.parts.config.max_tokens,
            summary: false,
        };
        frontend.event(AgentEvent::Thinking);
        let span = tracing::debug_span!(
            "model_request",
            provider = self.parts.provider.name(),
            model = request.model.as_str(),
            messages = request.messages.len(),
            tools = request.tools.len(),
        );
        let started = Instant::now();
        let mut retries = 0u32;
        let mut streamed = String::new();
        let outcome = {
            let toolbox = &self.parts.toolbox;
            let mut sink = |event: StreamEvent| match event {
                StreamEvent::TextDelta(text) => {
                    tracing::trace!(bytes = text.len(), "model text");
                    frontend.event(AgentEvent::Text(&text));
                    streamed.push_str(&text);
                }
                StreamEvent::ToolUseStarted { name, .. } => {
                    tracing::trace!(tool = name.as_str(), "model tool call started");
                    let found = toolbox.lookup(&name);
                    let tool = found.as_ref().map_or(name.as_str(), |t| &t.name);
                    frontend.event(AgentEvent::PreparingTool { tool });
                }
                StreamEvent::ToolUseFinished { .. } => {}
                StreamEvent::Retrying {
                    attempt,
                    after,
                    reason,
                } => {
                    retries += 1;
                    tracing::info!(
                        attempt,
                        after_ms = after.as_millis() as u64,
                        %reason,
                        "model request retried"
                    );
                    frontend.event(AgentEvent::Retrying {
                        attempt,
                        after,
                        reason: &reason,
                    });
                }
            };
            tokio::select! {
                result = self.parts.provider.stream(&request, &mut sink).instrument(span.clone()) => Some(result),
                () = interrupt.raised() => None,
            }
        };
        span.in_scope(|| {
            let latency_ms = started.elapsed().as_millis() as u64;
            match &outcome {
                None => tracing::info!(latency_ms, retries, "model request interrupted"),
                Some(Err(error)) => {
                    tracing::warn!(status = "failed", %error, latency_ms, retries, "model request failed");
                }
                Some(Ok(response)) => tracing::debug!(
                    status = "ok",
                    stop = ?response.stop_reason,
                    tokens_in = response.usage.input_tokens,
                    tokens_out = response.usage.output_tokens,
                    cache_read = response.usage.cache_read_tokens,
                    latency_ms,
                    retries,
                    "model answered"
                ),
            }
        });
        match outcome {
            None => {
                self.keep_partial_answer(streamed)?;
                self.record(Event::Interrupted {
                    reason: "interrupted by the user while the model was answering".into(),
                })?;
                Ok(Answered::Interrupted)
            }
            Some(Err(error))
                if streamed.is_empty()
                    && matches!(error, crate::model::ModelError::Overloaded { .. })
                    && self.fallback_model().is_some() =>
            {
                Ok(Answered::Overloaded(error))
            }
            Some(Err(error)) => {
                self.keep_partial_answer(streamed)?;
                self.record(Event::Interrupted {
                    reason: error.to_string(),
                })?;
                Err(error.into())
            }
            Some(Ok(response)) => Ok(Answered::Response(response)),
        }
    }

    /// Counts the answer's tokens and adds the answer to the conversation
    /// (unless it is empty); returns its text and the tool calls it asks
    /// for.
    fn keep_answer(
        &mut self,
        response: Response,
        frontend: &mut dyn Frontend,
    ) -> Result<(String, Vec<Call>), AgentError> {
        self.context_tokens = Some(compact::tokens_in_context(response.usage));
        self.cost.add(response.usage);
        frontend.event(AgentEvent::Usage(response.usage));
        if let Some(transcript) = &mut self.transcript {
            transcript.record_usage(response.usage)?;
        }
        let mut content: Vec<Block> = response
            .content
            .into_iter()
            .filter(|block| !matches!(block, Block::Text { text } if text.trim().is_empty()))
            .collect();
        self.make_call_ids_unique(&mut content, frontend);
        let text = content
            .iter()
            .filter_map(|block| match block {
                Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("");
        let calls: Vec<Call> = content
            .iter()
            .filter_map(|block| match block {
                Block::ToolUse { id, name, input } => Some(Call {
                    id: id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                }),
                _ => None,
            })
            .collect();
        if content.is_empty() {
            return Ok((text, calls));
        }
        let message = Message {
            role: Role::Assistant,
            content,
        };
        frontend.event(AgentEvent::Answer(&message));
        if let Some(transcript) = &mut self.transcript {
            transcript.record_assistant(&message, Some(response.stop_reason))?;
        }
        self.messages.push(message);
        Ok((text, calls))
    }

    /// Renames tool calls in a model's answer whose id is not unique in the
    /// conversation (the APIs reject a repeated id, and a result must name
    /// the one call it answers): a repeat inside the answer is the model's
    /// mistake and the user is told; a reused id of an earlier turn (some
    /// OpenAI-compatible servers number calls from 0 each turn) is only
    /// logged. Both calls run, each under its own id.
    fn make_call_ids_unique(&self, content: &mut [Block], frontend: &mut dyn Frontend) {
        let mut times_given: std::collections::HashMap<String, usize> = Default::default();
        for block in content.iter() {
            if let Block::ToolUse { id, .. } = block {
                *times_given.entry(id.clone()).or_default() += 1;
            }
        }
        let renamed = crate::model::conversation::make_call_ids_unique(content, &self.messages);
        for (id, new_id, tool) in renamed {
            tracing::info!(
                id = id.as_str(),
                new_id = new_id.as_str(),
                tool = tool.as_str(),
                "tool call id not unique in the conversation; renamed"
            );
            if times_given.get(&id).is_some_and(|&times| times > 1) {
                let notice = format!(
                    "the model gave more than one tool call the id {id}; this {tool} call runs as {new_id}"
                );
                frontend.event(AgentEvent::Notice(&notice));
            }
        }
    }

    /// Adds the user's text, and context hooks added to it, joining it to a
    /// user message already last (after an interrupted turn) so roles keep
    /// alternating.
    fn push_user_text(
        &mut self,
        text: &str,
        context: &[(String, String)],
        added: &[String],
    ) -> Result<(), AgentError> {
        let mut blocks = vec![Block::Text {
            text: text.to_string(),
        }];
        blocks.extend(context.iter().map(|(hook, text)| Block::Text {
            text: format!("Context from hook {hook}:\n{text}"),
        }));
        blocks.extend(added.iter().map(|text| Block::Text { text: text.clone() }));
        let message = Message {
            role: Role::User,
            content: blocks.clone(),
        };
        if let Some(transcript) = &mut self.transcript {
            transcript.record_user(&message)?;
        }
        match self.messages.last_mut() {
            Some(last) if last.role == Role::User => last.content.extend(blocks),
            _ => self.messages.push(message),
        }
        Ok(())
    }

    /// Fires Stop (SubagentStop in a sub-agent) when the model ends its
    /// turn; returns whether a hook asked it to keep going (at most
    /// [`MAX_STOP_CONTINUES`] times per prompt), in which case the hook's
    /// text was added for the model.
    async fn keep_going(
        &mut self,
        continues: &mut u32,
        last_message: &str,
        frontend: &mut dyn Frontend,
    ) -> Result<bool, AgentError> {
        let event = if self.parent.is_some() {
            HookEvent::SubagentStop
        } else {
            HookEvent::Stop
        };
        if !self.parts.hooks.wants(event) {
            return Ok(false);
        }
        let fields = json!({
            "stop_hook_active": *continues > 0,
            "last_assistant_message": last_message,
        });
        let combined = self.fire(event, fields, None, frontend).await?;
        let Some((hook, text)) = combined.keep_going else {
            return Ok(false);
        };
        if *continues >= MAX_STOP_CONTINUES {
            let notice = format!(
                "hook {hook} asked the model to keep going again; that happens at most {MAX_STOP_CONTINUES} times per prompt, so the turn ends"
            );
            frontend.event(AgentEvent::Notice(&notice));
            return Ok(false);
        }
        *continues += 1;
        let notice = format!("hook {hook} asked the model to keep going: {text}");
        frontend.event(AgentEvent::Notice(&notice));
        self.push_user_text(
            &format!(
                "A {} hook ({hook}) asked you not to stop yet: {text}",
                event.name()
            ),
            &[],
            &[],
        )?;
        Ok(true)
    }

    /// Keeps the text streamed before an answer broke off, so the
    /// conversation shows what the user saw.
    fn keep_partial_answer(&mut self, streamed: String) -> Result<(), AgentError> {
        if streamed.trim().is_empty() {
            return Ok(());
        }
        let message = Message {
            role: Role::Assistant,
            content: vec![Block::Text { text: streamed }],
        };
        if let Some(transcript) = &mut self.transcript {
            transcript.record_assistant(&message, None)?;
        }
        self.messages.push(message);
        Ok(())
    }
}
