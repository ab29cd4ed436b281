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
//! - [`turn`]: the loop of one turn;
//! - [`dispatch`]: running one answer's tool calls, batch by batch;
//! - [`approval`]: whether a call may run (hooks, policy, the user);
//! - [`tool`]: the one shape of every tool, [`ToolHandler`];
//! - [`toolbox`]: the registry of the session's tools;
//! - [`component_tool`], [`skill_tool`], [`subagent`]: the tool sources
//!   (plugins' components, `skill`, `task`);
//! - [`profile`]: the user's session or a sub-agent, and its tools;
//! - [`scheduler`]: which calls run together, and capping results;
//! - [`interrupt`]: the user's Ctrl-C;
//! - [`context`]: the system prompt and project instructions;
//! - [`output_styles`]: Claude Code output styles added to the prompt;
//! - [`cost`]: tokens and cost;
//! - [`compact`]: replacing a long conversation by the model's summary;
//! - [`session_parts`]: what a sub-agent shares with its session;
//! - [`hook_agent`]: the read-only sub-agents of agent hooks;
//! - [`checkpoints`]: what each prompt changed, and rewinding to it.

pub mod approval;
pub mod checkpoints;
pub mod compact;
pub mod component_tool;
pub mod context;
pub mod context_use;
pub mod cost;
pub mod custom_agents;
pub mod dispatch;
pub mod exec_tool;
pub mod hook_agent;
pub mod interrupt;
pub mod lsp_tool;
mod markdown_parts;
pub mod output_styles;
pub mod profile;
pub mod prompt_tool;
pub mod scheduler;
pub mod session_parts;
pub mod skill_tool;
pub mod structured_output;
pub mod subagent;
pub mod tool;
pub mod toolbox;
pub mod turn;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::LocalBoxFuture;
use serde_json::{Value, json};

use crate::audit::{AuditEvent, AuditLog, AuditScope};
use crate::home::Home;
use crate::hooks::{self, Combined, HookAnswer, HookEvent, HookSet, SessionFacts};
use crate::model::{Message, ModelError, Provider, StopReason, Usage};
use crate::policy::{Decision, Layer, Mode, Policy, Rule, RuleKind};
use crate::session::checkpoint::CheckpointStore;
use crate::session::record::Event;
use crate::session::{SessionError, TranscriptWriter};

pub use approval::{PermissionAnswer, PermissionRequest};
pub use checkpoints::RewindError;
pub use compact::{CompactError, CompactReport, CompactTrigger};
pub use cost::SessionCost;
pub use interrupt::Interrupt;
pub use profile::{AgentProfile, ToolAllowance};
pub use session_parts::SessionParts;
pub use tool::{
    AgentTool, CallNeeds, CallWants, Reach, SessionEvents, ToolCall, ToolHandler, ToolOutcome,
};
pub use toolbox::{Toolbox, ToolboxError};

/// How many times per prompt a Stop hook can make the model keep going.
pub const MAX_STOP_CONTINUES: u32 = 3;

/// How the result of a call that was not allowed to run begins (refused by
/// a rule, the mode, a hook or the user); what follows says why.
pub use crate::model::REFUSAL_PREFIX;

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
    /// The tool asked in the user's place when a call needs permission and
    /// the front end cannot ask ([`prompt_tool`]); `None` denies such calls.
    pub permission_prompt_tool: Option<String>,
    /// The model switched to when the model is still overloaded after the
    /// provider's retries (`--fallback-model`).
    pub fallback_model: Option<String>,
    /// The most a turn's model requests may cost, in US dollars
    /// (`--max-budget-usd`); a turn that passes it stops with
    /// [`TurnEnd::MaxBudget`].
    pub max_budget_usd: Option<f64>,
    /// The JSON schema of the structured output a turn ends with
    /// (`--json-schema`, [`structured_output`]); the user's session only.
    pub output_schema: Option<serde_json::Value>,
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
            permission_prompt_tool: None,
            fallback_model: None,
            max_budget_usd: None,
            output_schema: None,
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

/// Where the session shows what happens and asks for permission.
pub trait Frontend: Send {
    /// Shows an event.
    fn event(&mut self, event: AgentEvent<'_>);

    /// Whether the user can be asked (a terminal is attached).
    fn can_prompt(&self) -> bool {
        false
    }

    /// Asks the user about a call. Only called when [`Self::can_prompt`].
    /// Asynchronous, so the answer may come from elsewhere than a
    /// terminal (an MCP client's elicitation, a sub-agent's parent).
    fn ask<'a>(
        &'a mut self,
        request: &'a PermissionRequest<'a>,
    ) -> LocalBoxFuture<'a, PermissionAnswer> {
        let _ = request;
        Box::pin(std::future::ready(PermissionAnswer::Deny { reason: None }))
    }

    /// Asks the program that drives the session over stdin and stdout
    /// (`--permission-prompt-tool stdio`) about a call, with Claude Code's
    /// `can_use_tool` `request`; its answer is `{"behavior":"allow",...}`
    /// or `{"behavior":"deny",...}`. Without such a program, an error
    /// saying so.
    fn ask_driver<'a>(&'a mut self, request: Value) -> LocalBoxFuture<'a, Result<Value, String>> {
        let _ = request;
        Box::pin(std::future::ready(Err(
            "no program drives this session over stdin and stdout".to_string(),
        )))
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
    /// Its model requests cost more than `max_budget_usd`; the calls of
    /// the last answer were not run.
    MaxBudget,
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
    /// The input of the `StructuredOutput` call that ended it, when a
    /// schema was asked for ([`structured_output`]).
    pub structured_output: Option<serde_json::Value>,
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
    parts: SessionParts,
    profile: AgentProfile,
    /// For a sub-agent, the session and the call it works for.
    parent: Option<ParentLink>,
    messages: Vec<Message>,
    transcript: Option<TranscriptWriter>,
    /// What each prompt changed in the workspace (the user's session only).
    checkpoints: Option<CheckpointStore>,
    cost: SessionCost,
    home: Option<Home>,
    /// The tokens the last request used, for deciding when to compact.
    context_tokens: Option<u64>,
    /// Context from SessionStart hooks, given with the next prompt.
    hook_context: Vec<(String, String)>,
    /// What the user added for the model outside a prompt (a `!command`'s
    /// output, an `@file`), given with the next prompt.
    user_context: Vec<String>,
    /// The output style chosen, applied to the system prompt of each
    /// request (the user's session only).
    output_style: Option<output_styles::OutputStyle>,
}

/// Whom a sub-agent works for.
struct ParentLink {
    /// The session, named in the sub-agent's hook payloads.
    session_id: Option<String>,
    /// The call that started it (the sub-agent's id in hook payloads).
    call_id: String,
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
        let parts = SessionParts {
            provider: Arc::from(provider),
            toolbox: Arc::new(toolbox),
            policy,
            config,
            workspace,
            hooks: Arc::default(),
            hook_audit: None,
        };
        Self::from_parts(parts, AgentProfile::main(), None, home)
    }

    /// A sub-agent of the session whose parts are `parts`, running as
    /// `profile` for call `call_id` of session `session_id`; it has no
    /// transcript of its own and saves no answers.
    pub(crate) fn subagent(
        parts: SessionParts,
        profile: AgentProfile,
        session_id: Option<&str>,
        call_id: &str,
    ) -> Self {
        let parent = ParentLink {
            session_id: session_id.map(str::to_string),
            call_id: call_id.to_string(),
        };
        Self::from_parts(parts, profile, Some(parent), None)
    }

    /// An agent with no history, running as `profile`.
    fn from_parts(
        mut parts: SessionParts,
        profile: AgentProfile,
        parent: Option<ParentLink>,
        home: Option<Home>,
    ) -> Self {
        parts.config = profile.apply(parts.config);
        let cost = SessionCost::new(parts.config.model.clone());
        Self {
            parts,
            profile,
            parent,
            messages: Vec::new(),
            transcript: None,
            checkpoints: None,
            cost,
            home,
            context_tokens: None,
            hook_context: Vec::new(),
            user_context: Vec::new(),
            output_style: None,
        }
    }

    /// The agent this conversation runs as.
    pub fn profile(&self) -> &AgentProfile {
        &self.profile
    }

    /// Whether the model is offered `tool` in this conversation.
    pub(super) fn offers(&self, tool: &AgentTool) -> bool {
        self.profile.tools.allows(tool)
    }

    /// The tool the model calls `name`, if this conversation offers it.
    pub(super) fn find_tool(&self, name: &str) -> Option<AgentTool> {
        self.parts
            .toolbox
            .lookup(name)
            .filter(|tool| self.offers(tool))
    }

    /// The tools offered to the model.
    pub(super) fn tool_defs(&self) -> Vec<crate::model::ToolDef> {
        let mut defs = self.parts.toolbox.defs_where(|tool| self.offers(tool));
        if let Some(schema) = self.output_schema() {
            defs.push(structured_output::tool_def(schema));
        }
        defs
    }

    /// The schema of the structured output this conversation ends with:
    /// the user's session's, never a sub-agent's.
    pub(super) fn output_schema(&self) -> Option<&serde_json::Value> {
        self.parent
            .is_none()
            .then_some(self.parts.config.output_schema.as_ref())
            .flatten()
    }

    /// Offers only the tools `allowance` lets through (`--tools`).
    pub fn limit_tools(&mut self, allowance: ToolAllowance) {
        self.profile.tools = allowance;
    }

    /// Runs `hooks` on this session's events, recording their decisions in
    /// `audit` as well as the transcript.
    pub fn set_hooks(&mut self, hooks: HookSet, audit: Option<AuditLog>) {
        self.parts.hooks = Arc::new(hooks);
        self.parts.hook_audit = audit;
    }

    /// Adds `hooks` after the session's own (the driver's, from its
    /// `initialize` request).
    pub fn add_hooks(
        &mut self,
        hooks: Vec<Arc<dyn hooks::Hook>>,
    ) -> Result<(), hooks::SubscriptionError> {
        let mut all = self.parts.hooks.hooks();
        all.extend(hooks);
        self.parts.hooks = Arc::new(HookSet::new(all)?);
        Ok(())
    }

    /// Puts `system` in place of the session's system prompt from the
    /// next request on.
    pub fn set_system_prompt(&mut self, system: String) {
        self.parts.config.system = system;
    }

    /// The session's hooks.
    pub fn hooks(&self) -> &HookSet {
        &self.parts.hooks
    }

    /// Fires SessionStart (`source`: `startup`, `resume` or `clear`); context
    /// the hooks add goes to the model with the next prompt.
    pub async fn start_session(
        &mut self,
        source: &str,
        frontend: &mut dyn Frontend,
    ) -> Result<(), AgentError> {
        let fields = json!({ "source": source, "model": self.parts.config.model });
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
        if let Some(watch) = self.parts.toolbox.file_watch() {
            watch.session_ended();
        }
        self.parts.toolbox.session_ended().await;
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
        self.keep_checkpoints_of(Some(&transcript));
        self.transcript = Some(transcript);
    }

    /// Keeps the checkpoints of the session whose transcript is
    /// `transcript` (none without one, or in a sub-agent).
    fn keep_checkpoints_of(&mut self, transcript: Option<&TranscriptWriter>) {
        self.checkpoints = transcript
            .filter(|_| self.parent.is_none())
            .map(|t| CheckpointStore::for_transcript(t.path(), self.parts.workspace.clone()));
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
        self.user_context.clear();
        self.keep_checkpoints_of(transcript.as_ref());
        self.transcript = transcript;
        self.cost = SessionCost::new(self.parts.config.model.clone());
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
            .or(self.parent.as_ref().and_then(|p| p.session_id.as_deref()))
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The tools.
    pub fn toolbox(&self) -> &Toolbox {
        &self.parts.toolbox
    }

    /// The permission policy.
    pub fn policy(&self) -> &Policy {
        &self.parts.policy
    }

    /// Changes the permission mode.
    pub fn set_mode(&mut self, mode: Mode) {
        self.parts.policy.set_mode(mode);
    }

    /// Stops applying a rule for the rest of the session (`/permissions
    /// remove`); whether it was there.
    pub fn remove_rule(&mut self, kind: RuleKind, rule: &Rule, layer: Layer) -> bool {
        self.parts.policy.remove_rule(kind, rule, layer)
    }

    /// Tokens and cost so far.
    pub fn cost(&self) -> &SessionCost {
        &self.cost
    }

    /// The tokens the conversation took in the last request (its share
    /// of the context window), once a request has reported it.
    pub fn context_used(&self) -> Option<u64> {
        self.context_tokens
    }

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.parts.config
    }

    /// The provider's name.
    pub fn provider_name(&self) -> &str {
        self.parts.provider.name()
    }

    /// The provider, to ask it which models it knows.
    pub fn provider(&self) -> &dyn Provider {
        self.parts.provider.as_ref()
    }

    /// The provider, shared (for prompt hooks, which ask it too).
    pub fn shared_provider(&self) -> Arc<dyn Provider> {
        Arc::clone(&self.parts.provider)
    }

    /// Talks to `model` (of the same provider) from the next request on,
    /// with `context_window` tokens (`None`: the model family's), and
    /// records the change so a resumed session goes on with it.
    pub fn set_model(
        &mut self,
        model: &str,
        context_window: Option<u64>,
    ) -> Result<(), AgentError> {
        self.record(Event::ModelChanged {
            model: model.to_string(),
            provider: self.parts.provider.name().to_string(),
        })?;
        // The system prompt names the model the session talks to.
        let config = &mut self.parts.config;
        config.system = config.system.replacen(
            &format!("\n- Model: {}\n", config.model),
            &format!("\n- Model: {model}\n"),
            1,
        );
        self.parts.config.model = model.to_string();
        self.parts.config.context_window =
            context_window.unwrap_or_else(|| compact::context_window_for(model));
        self.cost.switch_model(model);
        Ok(())
    }

    /// Uses `style` from the next request on (`None`: capstan's own
    /// prompt). Sub-agents keep the session's prompt without it.
    pub fn set_output_style(&mut self, style: Option<output_styles::OutputStyle>) {
        self.output_style = style;
    }

    /// The output style chosen, if any.
    pub fn output_style(&self) -> Option<&output_styles::OutputStyle> {
        self.output_style.as_ref()
    }

    /// The system prompt of the next request: the session's, under the
    /// output style chosen.
    pub fn request_system_prompt(&self) -> String {
        match &self.output_style {
            Some(style) => output_styles::apply(&self.parts.config.system, style),
            None => self.parts.config.system.clone(),
        }
    }

    /// Gives the model `text` with the next prompt, after it (what a
    /// `!command` printed, a file the prompt mentions).
    pub fn add_user_context(&mut self, text: String) {
        self.user_context.push(text);
    }

    /// What waits to go with the next prompt ([`Self::add_user_context`]).
    pub fn pending_user_context(&self) -> &[String] {
        &self.user_context
    }

    /// The tokens the last request used, as the provider counted them.
    pub fn context_tokens(&self) -> Option<u64> {
        self.context_tokens
    }

    /// The tools offered to the model, as it sees them.
    pub fn offered_tools(&self) -> Vec<crate::model::ToolDef> {
        self.tool_defs()
    }

    /// What every hook payload says about the session.
    pub(super) fn session_facts(&self) -> SessionFacts<'_> {
        SessionFacts {
            session_id: self.session_id().unwrap_or_default(),
            transcript_path: self.transcript.as_ref().map(|t| t.path()),
            cwd: &self.parts.workspace,
            mode: self.parts.policy.mode(),
        }
    }

    /// Delivers `event` to the hooks that want it, records their answers and
    /// shows their messages; returns the answers combined.
    pub(super) async fn fire(
        &mut self,
        event: HookEvent,
        fields: Value,
        tool_use_id: Option<&str>,
        frontend: &mut dyn Frontend,
    ) -> Result<Combined, AgentError> {
        if !self.parts.hooks.wants(event) {
            return Ok(Combined::default());
        }
        let mut fields = fields;
        // A sub-agent's events say which sub-agent, as Claude Code's do.
        if let (Some(parent), Some(object)) = (&self.parent, fields.as_object_mut()) {
            object
                .entry("agent_id")
                .or_insert_with(|| json!(parent.call_id));
            object
                .entry("agent_type")
                .or_insert_with(|| json!(self.profile.name));
        }
        let payload = hooks::payload(event, &self.session_facts(), fields);
        let agents = hook_agent::HookAgents::new(&self.parts, self.session_id());
        let answers = self
            .parts
            .hooks
            .dispatch_with(event, &payload, Some(&agents))
            .await;
        let used = agents.used();
        if used != Usage::default() {
            self.cost.add(used);
            frontend.event(AgentEvent::Usage(used));
            if let Some(transcript) = &mut self.transcript {
                transcript.record_usage(used)?;
            }
        }
        let combined = hooks::combine(event, &answers);
        self.record_hooks(event, &answers, &combined, tool_use_id, frontend)?;
        Ok(combined)
    }

    /// Records each hook's answer in the transcript and (unless it had no
    /// opinion) the audit log, and shows the user the hooks' messages and
    /// warnings.
    pub(super) fn record_hooks(
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
                && let Some(log) = &self.parts.hook_audit
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

    /// Appends `event` to the transcript, if there is one.
    pub(super) fn record(&mut self, event: Event) -> Result<(), AgentError> {
        if let Some(transcript) = &mut self.transcript {
            transcript.append(event)?;
        }
        Ok(())
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
