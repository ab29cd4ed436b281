//! The agent loop: send the conversation to the model, stream its answer,
//! run the tool calls it asks for (each in a fresh sandbox, after the
//! permission policy and perhaps the user said yes), send the results back,
//! and repeat until the model ends its turn.
//!
//! Whatever happens to a tool call — an error, a denial, a trap, a timeout,
//! an interrupt — it ends as a result the model sees, so no request ever
//! carries a tool call without its result. Everything is written to the
//! session's transcript as it happens.
//!
//! - [`toolbox`]: the plugins' tools, named for the model, and calling them;
//! - [`scheduler`]: which calls run together, and capping results;
//! - [`interrupt`]: the user's Ctrl-C;
//! - [`context`]: the system prompt and project instructions;
//! - [`cost`]: tokens and cost;
//! - [`compact`]: replacing a long conversation by the model's summary;
//! - [`subagent`]: the `task` tool, which hands work to a sub-agent.

pub mod compact;
pub mod context;
pub mod cost;
pub mod interrupt;
pub mod scheduler;
pub mod subagent;
pub mod toolbox;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::home::Home;
use crate::hooks::{self, Combined, HookAnswer, HookEvent, HookSet, SessionFacts, Verdict};
use crate::model::{
    Block, Message, ModelError, Provider, Request, Role, StopReason, StreamEvent, Usage,
};
use crate::policy::audit::{AuditEvent, AuditLog, AuditScope};
use crate::policy::{
    Decision, DecisionSource, Layer, Mode, Outcome, Policy, Rule, RuleKind, ToolFacts,
};
use crate::sandbox::CallError;
use crate::session::record::Event;
use crate::session::{SessionError, TranscriptWriter};

pub use compact::{CompactError, CompactReport, CompactTrigger};
pub use cost::SessionCost;
pub use interrupt::Interrupt;
pub use toolbox::{AgentTool, Toolbox, ToolboxError};

/// How many times per prompt a Stop hook can make the model keep going.
pub const MAX_STOP_CONTINUES: u32 = 3;

/// How the result of a call that was not allowed to run begins (refused by
/// a rule, the mode, a hook or the user); what follows says why.
pub const REFUSAL_PREFIX: &str = "Permission denied:";

/// The result given for a tool call the user interrupted.
pub const INTERRUPTED_RESULT: &str = "The user interrupted this tool call before it finished; it may not have run at all. Wait for the user's next instruction.";

/// How the session runs.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The model's id.
    pub model: String,
    /// The most tokens one answer may have.
    pub max_tokens: u32,
    /// The most model requests one turn may make.
    pub max_turns: u32,
    /// The most read-only tool calls run at once.
    pub max_parallel: usize,
    /// The most bytes of a tool's result sent to the model.
    pub result_cap: usize,
    /// The system prompt.
    pub system: String,
    /// The model's context window in tokens; 0 turns automatic compaction
    /// off.
    pub context_window: u64,
}

impl AgentConfig {
    /// Defaults for `model` with a system prompt.
    pub fn new(model: impl Into<String>, system: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            max_tokens: 8192,
            max_turns: 50,
            max_parallel: 8,
            result_cap: 64 << 10,
            system: system.into(),
            context_window: 0,
        }
        .with_context_window_of_model()
    }

    /// Sets the context window from the model's family.
    fn with_context_window_of_model(mut self) -> Self {
        self.context_window = compact::context_window_for(&self.model);
        self
    }
}

/// Something that happened during a turn, for the front end to show.
#[derive(Debug)]
pub enum AgentEvent<'a> {
    /// A request to the model is on its way.
    Thinking,
    /// More of the model's text.
    Text(&'a str),
    /// The model began writing a tool call.
    PreparingTool {
        /// The tool's full name, or the model's name for it if unknown.
        tool: &'a str,
    },
    /// The request is retried after a failure.
    Retrying {
        /// The attempt about to be made.
        attempt: u32,
        /// The wait first.
        after: Duration,
        /// What went wrong.
        reason: &'a str,
    },
    /// The model's answer is complete.
    Answer(&'a Message),
    /// The permission decision for a call.
    Permission {
        /// The call's id.
        id: &'a str,
        /// The tool.
        tool: &'a str,
        /// The decision.
        decision: &'a Decision,
    },
    /// A tool call starts running.
    ToolStarted {
        /// The call's id.
        id: &'a str,
        /// The tool's full name.
        tool: &'a str,
        /// Its input.
        input: &'a Value,
    },
    /// A tool call is done (or was refused, or interrupted).
    ToolFinished {
        /// The call's id.
        id: &'a str,
        /// The tool's full name (the model's name if unknown).
        tool: &'a str,
        /// Its input.
        input: &'a Value,
        /// Whether it failed.
        is_error: bool,
        /// The result sent to the model.
        output: &'a str,
        /// How long it ran.
        duration: Duration,
    },
    /// The results going back to the model.
    ToolResults(&'a Message),
    /// Tokens one answer used.
    Usage(Usage),
    /// Something the user should know that is not an error of the turn.
    Notice(&'a str),
    /// The model is summarizing the conversation.
    Compacting {
        /// Why.
        trigger: CompactTrigger,
    },
    /// The conversation was replaced by the model's summary.
    Compacted(&'a CompactReport),
}

/// A tool call that needs the user's say-so.
#[derive(Debug)]
pub struct PermissionRequest<'a> {
    /// The tool.
    pub tool: &'a AgentTool,
    /// Its input.
    pub input: &'a Value,
    /// Why the policy asks.
    pub reason: &'a str,
    /// The permission mode.
    pub mode: Mode,
    /// The workspace, against which the call's relative paths resolve.
    pub workspace: &'a Path,
}

/// What the user answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionAnswer {
    /// Run this call.
    AllowOnce,
    /// Run this tool without asking for the rest of the session.
    AllowSession,
    /// Run this tool without asking, in this project, from now on.
    AllowAlways,
    /// Don't run it; the reason, if given, goes to the model.
    Deny {
        /// What the user said.
        reason: Option<String>,
    },
    /// Don't run it, and stop the turn.
    Interrupt,
}

/// Where the session shows what happens and asks for permission.
pub trait Frontend: Send {
    /// Shows an event.
    fn event(&mut self, event: AgentEvent<'_>);

    /// Whether the user can be asked (a terminal is attached).
    fn can_prompt(&self) -> bool {
        false
    }

    /// Asks the user about a call. Only called when [`Self::can_prompt`].
    fn ask(&mut self, request: &PermissionRequest<'_>) -> PermissionAnswer {
        let _ = request;
        PermissionAnswer::Deny { reason: None }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEnd {
    /// The model finished, for this reason.
    Finished(StopReason),
    /// The user interrupted it.
    Interrupted,
    /// It made `max_turns` requests without finishing.
    MaxTurns(u32),
    /// A UserPromptSubmit hook blocked the prompt; the model never saw it.
    PromptBlocked {
        /// The hook.
        hook: String,
        /// Why, as the hook said.
        reason: String,
    },
}

/// What a turn did.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnReport {
    /// How it ended.
    pub end: TurnEnd,
    /// The text of the model's last answer.
    pub text: String,
    /// How many requests it made to the model.
    pub requests: u32,
    /// How many tool calls the model asked for.
    pub tool_calls: u32,
    /// Tokens it used.
    pub usage: Usage,
}

/// Why a turn failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The model's provider failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The transcript could not be written.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A compaction the user asked for could not be made.
    #[error("cannot compact: {0}")]
    Compact(#[from] CompactError),
}

/// One agent session: the conversation, the model, the tools and the
/// permission policy.
pub struct Agent {
    provider: Arc<dyn Provider>,
    toolbox: Arc<Toolbox>,
    policy: Policy,
    config: AgentConfig,
    messages: Vec<Message>,
    transcript: Option<TranscriptWriter>,
    cost: SessionCost,
    workspace: PathBuf,
    home: Option<Home>,
    /// The tokens the last request used, for deciding when to compact.
    context_tokens: Option<u64>,
    /// Whether this is a sub-agent, which offers only the tools
    /// [`subagent::allowed`] keeps.
    subagent: bool,
    hooks: Arc<HookSet>,
    hook_audit: Option<AuditLog>,
    /// Context from SessionStart hooks, given with the next prompt.
    hook_context: Vec<(String, String)>,
    /// For a sub-agent, the session it works for.
    parent_session_id: Option<String>,
    /// For a sub-agent, its id in hook payloads (the `task` call's id).
    subagent_id: Option<String>,
}

/// What a sub-agent is made of: the session's model, tools, policy,
/// configuration and workspace, shared.
#[derive(Clone)]
struct SubagentParts {
    provider: Arc<dyn Provider>,
    toolbox: Arc<Toolbox>,
    policy: Policy,
    config: AgentConfig,
    workspace: PathBuf,
    hooks: Arc<HookSet>,
    hook_audit: Option<AuditLog>,
    /// The session the sub-agent works for, named in its hooks' payloads.
    session_id: Option<String>,
}

/// A sub-agent's run: its result for the model, how long it took, and the
/// tokens it used.
type SubagentRun = Pin<Box<dyn Future<Output = (Result<String, CallError>, Duration, Usage)>>>;

impl SubagentParts {
    /// Runs the `task` call `input` in a fresh sub-agent. Boxed, because a
    /// sub-agent runs the same loop that called it.
    fn run(self, input: Value, call_id: String, interrupt: Interrupt) -> SubagentRun {
        Box::pin(async move {
            let started = Instant::now();
            let task = match subagent::parse_input(&input) {
                Ok(task) => task,
                Err(problem) => {
                    return (
                        Err(CallError::InvalidInput(problem)),
                        started.elapsed(),
                        Usage::default(),
                    );
                }
            };
            let mut config = self.config;
            config.system = subagent::system_prompt(&config.system);
            let cost = SessionCost::new(config.model.clone());
            let mut agent = Agent {
                provider: self.provider,
                toolbox: self.toolbox,
                policy: self.policy,
                config,
                messages: Vec::new(),
                transcript: None,
                cost,
                workspace: self.workspace,
                home: None,
                context_tokens: None,
                subagent: true,
                hooks: self.hooks,
                hook_audit: self.hook_audit,
                hook_context: Vec::new(),
                parent_session_id: self.session_id,
                subagent_id: None,
            };
            let mut log = subagent::SubagentLog::default();
            agent.subagent_id = Some(call_id);
            let start = json!({
                "agent_type": subagent::TOOL_NAME,
                "description": task.description,
                "prompt": task.prompt,
            });
            let outcome = match agent
                .fire(HookEvent::SubagentStart, start, None, &mut log)
                .await
            {
                Ok(_) => agent.turn(&task.prompt, &mut log, &interrupt).await,
                Err(error) => Err(error),
            };
            let elapsed = started.elapsed();
            match outcome {
                Ok(report) => {
                    let text = match report.end {
                        TurnEnd::Finished(_) => log.result(&report.text, report.requests, elapsed),
                        TurnEnd::PromptBlocked { hook, reason } => {
                            return (
                                Err(CallError::Denied(format!(
                                    "hook {hook} blocked the sub-agent's task: {reason}"
                                ))),
                                elapsed,
                                report.usage,
                            );
                        }
                        TurnEnd::Interrupted => {
                            return (
                                Err(CallError::Failed("the sub-agent was interrupted".into())),
                                elapsed,
                                report.usage,
                            );
                        }
                        TurnEnd::MaxTurns(n) => log.result(
                            &format!(
                                "{}\n\n(The sub-agent stopped after {n} model requests without finishing.)",
                                report.text
                            ),
                            report.requests,
                            elapsed,
                        ),
                    };
                    (Ok(text), elapsed, report.usage)
                }
                Err(error) => (
                    Err(CallError::Failed(format!("the sub-agent failed: {error}"))),
                    elapsed,
                    agent.cost.usage,
                ),
            }
        })
    }
}

/// One tool call the model asked for.
struct Call {
    id: String,
    name: String,
    input: Value,
}

/// A call the checks let run: the tool, the input it runs with (a hook may
/// have changed it), and notes from hooks for the model.
struct Authorized {
    tool: AgentTool,
    input: Value,
    notes: Vec<String>,
}

impl Agent {
    /// A session with no history. `home` is where "always allow" answers are
    /// saved; without it they count for the session only.
    pub fn new(
        provider: Box<dyn Provider>,
        toolbox: Toolbox,
        policy: Policy,
        config: AgentConfig,
        workspace: PathBuf,
        home: Option<Home>,
    ) -> Self {
        let cost = SessionCost::new(config.model.clone());
        Self {
            provider: Arc::from(provider),
            toolbox: Arc::new(toolbox),
            policy,
            config,
            messages: Vec::new(),
            transcript: None,
            cost,
            workspace,
            home,
            context_tokens: None,
            subagent: false,
            hooks: Arc::default(),
            hook_audit: None,
            hook_context: Vec::new(),
            parent_session_id: None,
            subagent_id: None,
        }
    }

    /// Whether the model is offered `tool` in this conversation.
    fn offers(&self, tool: &AgentTool) -> bool {
        !self.subagent || subagent::allowed(tool)
    }

    /// The tool the model calls `name`, if this conversation offers it.
    fn find_tool(&self, name: &str) -> Option<&AgentTool> {
        self.toolbox.find(name).filter(|tool| self.offers(tool))
    }

    /// The tools offered to the model.
    fn tool_defs(&self) -> Vec<crate::model::ToolDef> {
        self.toolbox.defs_where(|tool| self.offers(tool))
    }

    /// Runs `hooks` on this session's events, recording their decisions in
    /// `audit` as well as the transcript.
    pub fn set_hooks(&mut self, hooks: HookSet, audit: Option<AuditLog>) {
        self.hooks = Arc::new(hooks);
        self.hook_audit = audit;
    }

    /// The session's hooks.
    pub fn hooks(&self) -> &HookSet {
        &self.hooks
    }

    /// Fires SessionStart (`source`: `startup`, `resume` or `clear`); context
    /// the hooks add goes to the model with the next prompt.
    pub async fn start_session(
        &mut self,
        source: &str,
        frontend: &mut dyn Frontend,
    ) -> Result<(), AgentError> {
        let fields = json!({ "source": source, "model": self.config.model });
        let combined = self
            .fire(HookEvent::SessionStart, fields, None, frontend)
            .await?;
        self.hook_context.extend(combined.context);
        Ok(())
    }

    /// Fires SessionEnd (`reason`: `clear`, `prompt_input_exit` or `other`)
    /// and records that the session ended.
    pub async fn end_session(
        &mut self,
        reason: &str,
        frontend: &mut dyn Frontend,
    ) -> Result<(), AgentError> {
        self.fire_session_end(reason, frontend).await?;
        self.finish()
    }

    /// Fires SessionEnd without ending the transcript (before `/clear`
    /// starts a new one).
    pub async fn fire_session_end(
        &mut self,
        reason: &str,
        frontend: &mut dyn Frontend,
    ) -> Result<(), AgentError> {
        self.fire(
            HookEvent::SessionEnd,
            json!({ "reason": reason }),
            None,
            frontend,
        )
        .await
        .map(drop)
    }

    /// Writes everything from now on to `transcript`.
    pub fn set_transcript(&mut self, transcript: TranscriptWriter) {
        self.transcript = Some(transcript);
    }

    /// Continues an earlier conversation (already repaired, so every tool
    /// call has its result), counting its tokens.
    pub fn restore(&mut self, messages: Vec<Message>, usage: Usage) {
        self.messages = messages;
        self.cost.add_previous(usage);
    }

    /// Forgets the conversation, starting over with `transcript`.
    pub fn clear(&mut self, transcript: Option<TranscriptWriter>) -> Result<(), AgentError> {
        if let Some(old) = &mut self.transcript {
            old.record_end()?;
        }
        self.messages.clear();
        self.context_tokens = None;
        self.hook_context.clear();
        self.transcript = transcript;
        self.cost = SessionCost::new(self.config.model.clone());
        Ok(())
    }

    /// Records that the session ended normally.
    pub fn finish(&mut self) -> Result<(), AgentError> {
        if let Some(transcript) = &mut self.transcript {
            transcript.record_end()?;
        }
        Ok(())
    }

    /// The session's id, if it has a transcript.
    pub fn session_id(&self) -> Option<&str> {
        self.transcript
            .as_ref()
            .map(TranscriptWriter::id)
            .or(self.parent_session_id.as_deref())
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The tools.
    pub fn toolbox(&self) -> &Toolbox {
        &self.toolbox
    }

    /// The permission policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Changes the permission mode.
    pub fn set_mode(&mut self, mode: Mode) {
        self.policy.set_mode(mode);
    }

    /// Stops applying a rule for the rest of the session (`/permissions
    /// remove`); whether it was there.
    pub fn remove_rule(&mut self, kind: RuleKind, rule: &Rule, layer: Layer) -> bool {
        self.policy.remove_rule(kind, rule, layer)
    }

    /// Tokens and cost so far.
    pub fn cost(&self) -> &SessionCost {
        &self.cost
    }

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The provider's name.
    pub fn provider_name(&self) -> &str {
        self.provider.name()
    }

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
        let _warm = self.toolbox.sandbox().keep_warm();
        let report = self.turn(prompt, frontend, interrupt).await;
        self.toolbox.end_skill_turn();
        report
    }

    async fn turn(
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
        };
        // A sub-agent's task is not a prompt the user submitted; its start
        // fired SubagentStart instead.
        let submitted = if self.subagent {
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
            report.end = TurnEnd::PromptBlocked { hook, reason };
            return Ok(report);
        }
        let mut context = std::mem::take(&mut self.hook_context);
        context.extend(submitted.context);
        self.push_user_text(prompt, &context)?;
        let mut stop_continues = 0;
        loop {
            if report.requests >= self.config.max_turns {
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
            let request = Request {
                model: self.config.model.clone(),
                system: self.config.system.clone(),
                messages: self.messages.clone(),
                tools: self.tool_defs(),
                max_tokens: self.config.max_tokens,
            };
            frontend.event(AgentEvent::Thinking);
            let mut streamed = String::new();
            let outcome = {
                let toolbox = &self.toolbox;
                let mut sink = |event: StreamEvent| match event {
                    StreamEvent::TextDelta(text) => {
                        frontend.event(AgentEvent::Text(&text));
                        streamed.push_str(&text);
                    }
                    StreamEvent::ToolUseStarted { name, .. } => {
                        let tool = toolbox.find(&name).map_or(name.as_str(), |t| &t.name);
                        frontend.event(AgentEvent::PreparingTool { tool });
                    }
                    StreamEvent::ToolUseFinished { .. } => {}
                    StreamEvent::Retrying {
                        attempt,
                        after,
                        reason,
                    } => frontend.event(AgentEvent::Retrying {
                        attempt,
                        after,
                        reason: &reason,
                    }),
                };
                tokio::select! {
                    result = self.provider.stream(&request, &mut sink) => Some(result),
                    () = interrupt.raised() => None,
                }
            };
            let response = match outcome {
                None => {
                    self.keep_partial_answer(streamed)?;
                    self.record(Event::Interrupted {
                        reason: "interrupted by the user while the model was answering".into(),
                    })?;
                    report.end = TurnEnd::Interrupted;
                    return Ok(report);
                }
                Some(Err(error)) => {
                    self.keep_partial_answer(streamed)?;
                    self.record(Event::Interrupted {
                        reason: error.to_string(),
                    })?;
                    return Err(error.into());
                }
                Some(Ok(response)) => response,
            };
            report.usage.add(response.usage);
            self.context_tokens = Some(compact::tokens_in_context(response.usage));
            self.cost.add(response.usage);
            frontend.event(AgentEvent::Usage(response.usage));
            if let Some(transcript) = &mut self.transcript {
                transcript.record_usage(response.usage)?;
            }
            let content: Vec<Block> = response
                .content
                .into_iter()
                .filter(|block| !matches!(block, Block::Text { text } if text.is_empty()))
                .collect();
            report.text = content
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
                if self
                    .keep_going(&mut stop_continues, &report.text, frontend)
                    .await?
                {
                    continue;
                }
                report.end = TurnEnd::Finished(response.stop_reason);
                return Ok(report);
            }
            let message = Message {
                role: Role::Assistant,
                content,
            };
            frontend.event(AgentEvent::Answer(&message));
            if let Some(transcript) = &mut self.transcript {
                transcript.record_assistant(&message, Some(response.stop_reason.clone()))?;
            }
            self.messages.push(message);
            if calls.is_empty() {
                if self
                    .keep_going(&mut stop_continues, &report.text, frontend)
                    .await?
                {
                    continue;
                }
                report.end = TurnEnd::Finished(response.stop_reason);
                return Ok(report);
            }
            report.tool_calls += u32::try_from(calls.len()).unwrap_or(u32::MAX);
            let results = self.run_calls(&calls, frontend, interrupt).await?;
            let message = Message {
                role: Role::User,
                content: results,
            };
            frontend.event(AgentEvent::ToolResults(&message));
            if let Some(transcript) = &mut self.transcript {
                transcript.record_tool_results(&message)?;
            }
            self.messages.push(message);
            if interrupt.is_raised() {
                self.record(Event::Interrupted {
                    reason: "interrupted by the user while tools were running".into(),
                })?;
                report.end = TurnEnd::Interrupted;
                return Ok(report);
            }
        }
    }

    /// Whether the last request came close enough to the context window
    /// that the conversation should be compacted before the next one.
    fn should_compact(&self) -> bool {
        self.context_tokens
            .is_some_and(|tokens| compact::needs_compaction(tokens, self.config.context_window))
    }

    /// Compacts automatically; a summary the model could not give is a
    /// notice, and the conversation goes on as it was.
    async fn compact_or_notice(
        &mut self,
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
        mid_turn: bool,
    ) -> Result<(), AgentError> {
        match self
            .compact_with(CompactTrigger::Auto, None, frontend, interrupt, mid_turn)
            .await
        {
            Ok(_) => Ok(()),
            Err(AgentError::Compact(error)) => {
                // Not asked again until another request reports its size.
                self.context_tokens = None;
                let text = format!("could not compact the conversation: {error}");
                frontend.event(AgentEvent::Notice(&text));
                Ok(())
            }
            Err(other) => Err(other),
        }
    }

    /// Replaces the conversation by the model's summary of it (`/compact`,
    /// with an optional focus for the summary). The transcript keeps the
    /// whole history and records the compaction.
    pub async fn compact(
        &mut self,
        focus: Option<&str>,
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
    ) -> Result<CompactReport, AgentError> {
        self.compact_with(CompactTrigger::Manual, focus, frontend, interrupt, false)
            .await
    }

    async fn compact_with(
        &mut self,
        trigger: CompactTrigger,
        focus: Option<&str>,
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
        mid_turn: bool,
    ) -> Result<CompactReport, AgentError> {
        if self.messages.is_empty() {
            return Err(CompactError::Empty.into());
        }
        let fields = json!({
            "trigger": trigger.name(),
            "custom_instructions": focus.unwrap_or_default(),
        });
        self.fire(HookEvent::PreCompact, fields, None, frontend)
            .await?;
        frontend.event(AgentEvent::Compacting { trigger });
        let request = Request {
            model: self.config.model.clone(),
            system: self.config.system.clone(),
            messages: compact::summary_request_messages(&self.messages, focus),
            // Requests holding tool calls must declare the tools; the
            // instruction says not to call them, and calls are ignored.
            tools: self.tool_defs(),
            max_tokens: self.config.max_tokens,
        };
        let mut sink = |event: StreamEvent| {
            if let StreamEvent::Retrying {
                attempt,
                after,
                reason,
            } = event
            {
                frontend.event(AgentEvent::Retrying {
                    attempt,
                    after,
                    reason: &reason,
                });
            }
        };
        let outcome = tokio::select! {
            result = self.provider.stream(&request, &mut sink) => Some(result),
            () = interrupt.raised() => None,
        };
        let response = match outcome {
            None => return Err(CompactError::Interrupted.into()),
            Some(result) => result?,
        };
        self.cost.add(response.usage);
        frontend.event(AgentEvent::Usage(response.usage));
        if let Some(transcript) = &mut self.transcript {
            transcript.record_usage(response.usage)?;
        }
        let summary = compact::summary_text(&response.content).ok_or(CompactError::NoSummary)?;
        let message = compact::summary_message(&summary, mid_turn);
        let report = CompactReport {
            trigger,
            messages_before: self.messages.len(),
            tokens_before: self.context_tokens,
            summary,
        };
        self.record(Event::Compacted {
            trigger: trigger.name().to_string(),
            messages_before: report.messages_before,
            message: message.clone(),
        })?;
        self.messages = vec![message];
        self.context_tokens = None;
        frontend.event(AgentEvent::Compacted(&report));
        let fields = json!({
            "trigger": trigger.name(),
            "compact_summary": report.summary,
        });
        self.fire(HookEvent::PostCompact, fields, None, frontend)
            .await?;
        Ok(report)
    }

    /// Adds the user's text, and context hooks added to it, joining it to a
    /// user message already last (after an interrupted turn) so roles keep
    /// alternating.
    fn push_user_text(
        &mut self,
        text: &str,
        context: &[(String, String)],
    ) -> Result<(), AgentError> {
        let mut blocks = vec![Block::Text {
            text: text.to_string(),
        }];
        blocks.extend(context.iter().map(|(hook, text)| Block::Text {
            text: format!("Context from hook {hook}:\n{text}"),
        }));
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
        let event = if self.subagent {
            HookEvent::SubagentStop
        } else {
            HookEvent::Stop
        };
        if !self.hooks.wants(event) {
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
        )?;
        Ok(true)
    }

    /// What every hook payload says about the session.
    fn session_facts(&self) -> SessionFacts<'_> {
        SessionFacts {
            session_id: self.session_id().unwrap_or_default(),
            transcript_path: self.transcript.as_ref().map(|t| t.path()),
            cwd: &self.workspace,
            mode: self.policy.mode(),
        }
    }

    /// Delivers `event` to the hooks that want it, records their answers and
    /// shows their messages; returns the answers combined.
    async fn fire(
        &mut self,
        event: HookEvent,
        fields: Value,
        tool_use_id: Option<&str>,
        frontend: &mut dyn Frontend,
    ) -> Result<Combined, AgentError> {
        if !self.hooks.wants(event) {
            return Ok(Combined::default());
        }
        let mut fields = fields;
        // A sub-agent's events say which sub-agent, as Claude Code's do.
        if let (Some(id), Some(object)) = (&self.subagent_id, fields.as_object_mut()) {
            object.entry("agent_id").or_insert_with(|| json!(id));
            object
                .entry("agent_type")
                .or_insert_with(|| json!(subagent::TOOL_NAME));
        }
        let payload = hooks::payload(event, &self.session_facts(), fields);
        let answers = self.hooks.dispatch(event, &payload).await;
        let combined = hooks::combine(event, &answers);
        self.record_hooks(event, &answers, &combined, tool_use_id, frontend)?;
        Ok(combined)
    }

    /// Records each hook's answer in the transcript and (unless it had no
    /// opinion) the audit log, and shows the user the hooks' messages and
    /// warnings.
    fn record_hooks(
        &mut self,
        event: HookEvent,
        answers: &[HookAnswer],
        combined: &Combined,
        tool_use_id: Option<&str>,
        frontend: &mut dyn Frontend,
    ) -> Result<(), AgentError> {
        for answer in answers {
            let (decision, detail) = match &answer.result {
                Ok(output) => describe_decision(&output.decision),
                Err(failure) => ("failed", Some(failure.to_string())),
            };
            let detail = detail.map(|d| clip(&d, 2000));
            if decision != "proceed"
                && let Some(log) = &self.hook_audit
            {
                AuditScope::new(
                    log.clone(),
                    &answer.hook,
                    tool_use_id.unwrap_or(event.name()),
                    self.session_id(),
                )
                .record(AuditEvent::HookDecision {
                    event: event.name().to_string(),
                    decision: decision.to_string(),
                    detail: detail.clone(),
                });
            }
            self.record(Event::Hook {
                event: event.name().to_string(),
                hook: answer.hook.clone(),
                decision: decision.to_string(),
                detail,
                tool_use_id: tool_use_id.map(str::to_string),
            })?;
        }
        for (hook, message) in &combined.messages {
            frontend.event(AgentEvent::Notice(&format!("hook {hook}: {message}")));
        }
        for warning in &combined.warnings {
            frontend.event(AgentEvent::Notice(&format!("warning: {warning}")));
        }
        Ok(())
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

    fn record(&mut self, event: Event) -> Result<(), AgentError> {
        if let Some(transcript) = &mut self.transcript {
            transcript.append(event)?;
        }
        Ok(())
    }

    /// Runs an answer's tool calls batch by batch and returns one result
    /// per call, in call order.
    async fn run_calls(
        &mut self,
        calls: &[Call],
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
    ) -> Result<Vec<Block>, AgentError> {
        let mut results: Vec<Option<(String, bool)>> = vec![None; calls.len()];
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
                        let tool = self
                            .find_tool(&call.name)
                            .map_or(call.name.clone(), |t| t.name.clone());
                        frontend.event(AgentEvent::ToolFinished {
                            id: &call.id,
                            tool: &tool,
                            input: &call.input,
                            is_error: true,
                            output: &refusal,
                            duration: Duration::ZERO,
                        });
                        results[index] = Some((refusal, true));
                    }
                }
            }
            if runnable.is_empty() {
                continue;
            }
            for (index, authorized) in &runnable {
                let call = &calls[*index];
                frontend.event(AgentEvent::ToolStarted {
                    id: &call.id,
                    tool: &authorized.tool.name,
                    input: &authorized.input,
                });
            }
            let toolbox = &self.toolbox;
            let hooks = &self.hooks;
            let session_id = self.transcript.as_ref().map(TranscriptWriter::id);
            let parts = SubagentParts {
                provider: self.provider.clone(),
                toolbox: self.toolbox.clone(),
                policy: self.policy.clone(),
                config: self.config.clone(),
                workspace: self.workspace.clone(),
                hooks: self.hooks.clone(),
                hook_audit: self.hook_audit.clone(),
                session_id: session_id.map(str::to_string),
            };
            let mut subagent_usage = Usage::default();
            let facts = self.session_facts();
            let facts = &facts;
            let mut post_hooks = Vec::new();
            // Results are recorded as each call finishes, so an interrupt
            // keeps the ones already done and only the rest are reported as
            // interrupted. PostToolUse (or PostToolUseFailure) hooks run as
            // part of their call. A `task` call runs a sub-agent.
            let mut runs =
                futures_util::stream::iter(runnable.iter().map(|(index, authorized)| {
                    let call = &calls[*index];
                    let parts = parts.clone();
                    let interrupt = interrupt.clone();
                    async move {
                        let tool = &authorized.tool;
                        let (result, duration, usage) = if Toolbox::is_subagent_tool(tool) {
                            parts
                                .run(authorized.input.clone(), call.id.clone(), interrupt)
                                .await
                        } else {
                            let (result, duration) =
                                toolbox.call(tool, &authorized.input, session_id).await;
                            (result, duration, Usage::default())
                        };
                        let (event, fields) = match &result {
                            Ok(text) => (
                                HookEvent::PostToolUse,
                                json!({
                                    "tool_name": tool.name,
                                    "tool_input": authorized.input,
                                    "tool_response": text,
                                    "tool_use_id": call.id,
                                }),
                            ),
                            Err(error) => (
                                HookEvent::PostToolUseFailure,
                                json!({
                                    "tool_name": tool.name,
                                    "tool_input": authorized.input,
                                    "tool_use_id": call.id,
                                    "error": error.to_string(),
                                    "is_interrupt": false,
                                }),
                            ),
                        };
                        let answers = if hooks.wants(event) {
                            let payload = hooks::payload(event, facts, fields);
                            hooks.dispatch(event, &payload).await
                        } else {
                            Vec::new()
                        };
                        (*index, authorized, result, duration, event, answers, usage)
                    }
                }))
                .buffer_unordered(self.config.max_parallel.max(1));
            loop {
                let next = tokio::select! {
                    biased;
                    () = interrupt.raised() => None,
                    next = runs.next() => next,
                };
                let Some((index, authorized, result, duration, event, answers, usage)) = next
                else {
                    break;
                };
                subagent_usage.add(usage);
                let call = &calls[index];
                let (mut output, is_error) = match result {
                    Ok(text) => (scheduler::cap_result(text, self.config.result_cap), false),
                    Err(error) => (
                        scheduler::cap_result(error.to_string(), self.config.result_cap),
                        true,
                    ),
                };
                let combined = hooks::combine(event, &answers);
                let mut notes = authorized.notes.clone();
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
                frontend.event(AgentEvent::ToolFinished {
                    id: &call.id,
                    tool: &authorized.tool.name,
                    input: &authorized.input,
                    is_error,
                    output: &output,
                    duration,
                });
                results[index] = Some((output, is_error));
                post_hooks.push((call.id.clone(), event, answers, combined));
            }
            drop(runs);
            for (id, event, answers, combined) in post_hooks {
                self.record_hooks(event, &answers, &combined, Some(&id), frontend)?;
            }
            if subagent_usage != Usage::default() {
                self.cost.add(subagent_usage);
                frontend.event(AgentEvent::Usage(subagent_usage));
                if let Some(transcript) = &mut self.transcript {
                    transcript.record_usage(subagent_usage)?;
                }
            }
            if interrupt.is_raised() {
                break;
            }
        }
        Ok(calls
            .iter()
            .zip(results)
            .map(|(call, result)| {
                let (content, is_error) = result.unwrap_or_else(|| {
                    let tool = self
                        .find_tool(&call.name)
                        .map_or(call.name.clone(), |t| t.name.clone());
                    frontend.event(AgentEvent::ToolFinished {
                        id: &call.id,
                        tool: &tool,
                        input: &call.input,
                        is_error: true,
                        output: INTERRUPTED_RESULT,
                        duration: Duration::ZERO,
                    });
                    (INTERRUPTED_RESULT.to_string(), true)
                });
                Block::ToolResult {
                    tool_use_id: call.id.clone(),
                    content,
                    is_error,
                }
            })
            .collect())
    }

    /// Decides whether a call may run: the tool must exist and its input be
    /// an object, and the policy (or the user) must allow it. Returns the
    /// tool, or the error result to send back.
    async fn authorize(
        &mut self,
        call: &Call,
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
    ) -> Result<Result<Authorized, String>, AgentError> {
        let Some(tool) = self.find_tool(&call.name).cloned() else {
            let known: Vec<&str> = self
                .toolbox
                .tools()
                .iter()
                .filter(|tool| self.offers(tool))
                .map(|t| t.model_name.as_str())
                .collect();
            return Ok(Err(format!(
                "There is no tool called `{}`. Available tools: {}.",
                call.name,
                known.join(", ")
            )));
        };
        if !call.input.is_object() {
            return Ok(Err(format!(
                "The input of {} must be a JSON object matching its schema.",
                tool.model_name
            )));
        }
        if let Some(refusal) = self.toolbox.skill_refusal(&tool) {
            return Ok(Err(refusal));
        }
        let mut input = call.input.clone();
        let mut notes = Vec::new();
        let mut verdict = Verdict::Proceed;
        let mut hook_decision = None;
        if self.hooks.wants(HookEvent::PreToolUse) {
            let fields = json!({
                "tool_name": tool.name,
                "tool_input": call.input,
                "tool_use_id": call.id,
            });
            let combined = self
                .fire(HookEvent::PreToolUse, fields, Some(&call.id), frontend)
                .await?;
            notes.extend(
                combined
                    .context
                    .iter()
                    .map(|(hook, text)| format!("Note from hook {hook}: {text}")),
            );
            if let Some((hook, reason)) = combined.denied() {
                hook_decision = Some(hook_deny(
                    hook,
                    format!("hook {hook} blocked this call: {reason}"),
                ));
            } else if let Some((hook, modified)) = &combined.modified {
                match hooks::schema::validate(modified, &tool.spec.input_schema) {
                    Ok(()) => {
                        input = modified.clone();
                        let text = format!("hook {hook} changed the input of {}", tool.name);
                        frontend.event(AgentEvent::Notice(&text));
                    }
                    Err(why) => {
                        hook_decision = Some(hook_deny(
                            hook,
                            format!(
                                "hook {hook} changed the input of {} to one its schema refuses ({why}), so the call was not run.",
                                tool.name
                            ),
                        ));
                    }
                }
            }
            verdict = combined.verdict;
        }
        let mut decision = match hook_decision {
            Some(decision) => decision,
            None => {
                let facts = ToolFacts {
                    tool: &tool.name,
                    read_only: tool.spec.read_only,
                    destructive: tool.spec.destructive,
                    open_world: tool.spec.open_world,
                    input: &input,
                    workspace: &self.workspace,
                };
                self.policy.decide(&facts)
            }
        };
        // A hook's allow spares the user a question the mode would ask, but
        // never overrides a deny rule or plan mode (those are denials), nor
        // an ask rule the user wrote; a hook's ask makes an allowed call ask.
        let asked_by_rule = decision.outcome == Outcome::Ask
            && matches!(decision.source, DecisionSource::Rule { .. });
        match verdict {
            Verdict::Allow { hook } if decision.outcome == Outcome::Ask && !asked_by_rule => {
                decision = Decision {
                    outcome: Outcome::Allow,
                    reason: format!("hook {hook} allowed this call"),
                    source: DecisionSource::Hook(hook),
                };
            }
            Verdict::Ask { hook, reason } if decision.outcome == Outcome::Allow => {
                decision = Decision {
                    outcome: Outcome::Ask,
                    reason: format!("hook {hook} asks first: {reason}"),
                    source: DecisionSource::Hook(hook),
                };
            }
            _ => {}
        }
        if decision.outcome == Outcome::Ask && self.hooks.wants(HookEvent::PermissionRequest) {
            let fields = json!({
                "tool_name": tool.name,
                "tool_input": input,
                "tool_use_id": call.id,
                "reason": decision.reason,
            });
            let combined = self
                .fire(
                    HookEvent::PermissionRequest,
                    fields,
                    Some(&call.id),
                    frontend,
                )
                .await?;
            match combined.verdict {
                Verdict::Deny { hook, reason } => {
                    decision = hook_deny(
                        &hook,
                        format!("hook {hook} refused the permission request: {reason}"),
                    );
                }
                // The same holds here: a question an ask rule puts is the
                // user's to answer, whatever a hook says.
                Verdict::Allow { hook } if asked_by_rule => {
                    let text = format!(
                        "hook {hook} allowed {}, but an ask rule you wrote asks first, and only you can answer it",
                        tool.name
                    );
                    frontend.event(AgentEvent::Notice(&text));
                }
                Verdict::Allow { hook } => {
                    decision = Decision {
                        outcome: Outcome::Allow,
                        reason: format!("hook {hook} granted the permission request"),
                        source: DecisionSource::Hook(hook),
                    };
                }
                _ => {}
            }
        }
        if decision.outcome == Outcome::Ask {
            decision = if frontend.can_prompt() {
                let fields = json!({
                    "message": format!("capstan needs your permission to use {}", tool.name),
                    "notification_type": "permission_prompt",
                    "title": "Permission needed",
                });
                self.fire(HookEvent::Notification, fields, Some(&call.id), frontend)
                    .await?;
                let request = PermissionRequest {
                    tool: &tool,
                    input: &input,
                    reason: &decision.reason,
                    mode: self.policy.mode(),
                    workspace: &self.workspace,
                };
                let answer = frontend.ask(&request);
                self.apply_answer(&tool, answer, frontend, interrupt)
            } else {
                decision.without_prompt(&tool.name)
            };
        }
        let (source, rule) = describe_source(&decision.source);
        self.record(Event::Permission {
            tool_use_id: call.id.clone(),
            tool: tool.name.clone(),
            outcome: match decision.outcome {
                Outcome::Allow => "allow",
                Outcome::Ask => "ask",
                Outcome::Deny => "deny",
            }
            .to_string(),
            source,
            rule,
            reason: decision.reason.clone(),
        })?;
        frontend.event(AgentEvent::Permission {
            id: &call.id,
            tool: &tool.name,
            decision: &decision,
        });
        Ok(match decision.outcome {
            Outcome::Allow => Ok(Authorized { tool, input, notes }),
            Outcome::Ask | Outcome::Deny => Err(format!(
                "{REFUSAL_PREFIX} {} Do not retry the same call; adapt, or ask the user.",
                decision.reason
            )),
        })
    }

    /// Turns the user's answer into a decision, remembering it as asked.
    fn apply_answer(
        &mut self,
        tool: &AgentTool,
        answer: PermissionAnswer,
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
    ) -> Decision {
        let allow = |source: DecisionSource, reason: String| Decision {
            outcome: Outcome::Allow,
            source,
            reason,
        };
        match answer {
            PermissionAnswer::AllowOnce => allow(
                DecisionSource::User,
                "the user allowed this call".to_string(),
            ),
            PermissionAnswer::AllowSession => {
                self.policy.allow_for_session(Rule::tool(&tool.name));
                allow(
                    DecisionSource::Session,
                    format!("the user allowed {} for this session", tool.name),
                )
            }
            PermissionAnswer::AllowAlways => {
                let rule = Rule::tool(&tool.name);
                let saved = self.home.as_ref().map(|home| {
                    crate::policy::settings::save_local_allow(home, &self.workspace, &rule)
                });
                // The rule applies from now on as the file it was saved in
                // says, so `/permissions` removes it from there.
                match saved {
                    Some(Ok(_)) => {
                        self.policy
                            .add_rule(RuleKind::Allow, rule.clone(), Layer::ProjectLocal)
                    }
                    _ => self.policy.allow_for_session(rule.clone()),
                }
                let reason = match saved {
                    Some(Ok(path)) => {
                        let text = format!(
                            "{} is always allowed in this project: the rule `{rule}` was saved to {}; /permissions lists saved rules and removes them",
                            tool.name,
                            path.display()
                        );
                        frontend.event(AgentEvent::Notice(&text));
                        format!(
                            "the user always allows {} in this project (saved to {})",
                            tool.name,
                            path.display()
                        )
                    }
                    Some(Err(error)) => {
                        let text = format!(
                            "{} allowed for this session only: the answer could not be saved: {error}",
                            tool.name
                        );
                        frontend.event(AgentEvent::Notice(&text));
                        text
                    }
                    None => format!("the user allowed {} for this session", tool.name),
                };
                allow(DecisionSource::User, reason)
            }
            PermissionAnswer::Deny { reason } => Decision {
                outcome: Outcome::Deny,
                source: DecisionSource::User,
                reason: match reason {
                    Some(why) if !why.trim().is_empty() => {
                        format!("the user denied this call, saying: {}.", why.trim())
                    }
                    _ => "the user denied this call.".to_string(),
                },
            },
            PermissionAnswer::Interrupt => {
                interrupt.raise();
                Decision {
                    outcome: Outcome::Deny,
                    source: DecisionSource::User,
                    reason: "the user interrupted instead of answering.".to_string(),
                }
            }
        }
    }
}

/// The decision's source and rule, as recorded in the transcript.
fn describe_source(source: &DecisionSource) -> (String, Option<String>) {
    match source {
        DecisionSource::Mode(mode) => (format!("mode {mode}"), None),
        DecisionSource::Rule { rule, layer } => (format!("rule ({layer})"), Some(rule.clone())),
        DecisionSource::Session => ("session".to_string(), None),
        DecisionSource::User => ("user".to_string(), None),
        DecisionSource::NonInteractive => ("non-interactive".to_string(), None),
        DecisionSource::Hook(hook) => (format!("hook {hook}"), None),
    }
}

/// A denial by a hook.
fn hook_deny(hook: &str, reason: String) -> Decision {
    Decision {
        outcome: Outcome::Deny,
        source: DecisionSource::Hook(hook.to_string()),
        reason,
    }
}

/// A hook decision's name and the text it carries, for the records.
fn describe_decision(decision: &hooks::Decision) -> (&'static str, Option<String>) {
    use hooks::Decision as D;
    match decision {
        D::Proceed => ("proceed", None),
        D::Allow => ("allow", None),
        D::Ask(reason) => ("ask", Some(reason.clone())),
        D::Deny(reason) => ("deny", Some(reason.clone())),
        D::Modify(input) => ("modify", Some(input.to_string())),
        D::AddContext(text) => ("add-context", Some(text.clone())),
        D::KeepGoing(text) => ("keep-going", Some(text.clone())),
    }
}

/// `text` cut to at most `max` bytes at a character boundary, marked.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests;
