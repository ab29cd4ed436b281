//! The session's tool registry: every tool the model can call, each a
//! [`ToolHandler`] registered under the name the model uses for it.
//!
//! [`Toolbox::load`] registers every plugin's component tools
//! ([`super::component_tool`]), each plugin under what
//! [`Provision`](crate::plugin::Provision) decided its calls get: built-in
//! plugins and `--plugin` files the workspace, an installed plugin what the
//! user granted it, its own limits and its audit log. Host tools are
//! registered from above with [`Toolbox::register`] (the session's setup
//! registers `task`); [`Toolbox::set_skills`] registers the `skill` tool
//! along with the skills whose `allowed-tools` narrow every call.
//!
//! An installed plugin that cannot be used (see
//! [`crate::plugin::availability`]) is left out and recorded in the
//! catalog's unavailable plugins, which the toolbox keeps for `/plugins`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::component_tool::PluginRuntime;
use super::interrupt::Interrupt;
use super::skill_tool::SkillTool;
use super::tool::{AgentTool, FileWatch, SessionEvents, ToolCall, ToolHandler, ToolSource};
use crate::audit::AuditLog;
use crate::model::ToolDef;
use crate::plugin::{Catalog, CatalogError, Provision, ProvisionError, UnavailablePlugins, Writes};
use crate::sandbox::{CallError, EventSink, Limits, PluginEvent, Sandbox};
use crate::skills::Skills;

pub use super::tool::model_name;

/// Why the tools could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ToolboxError {
    /// A plugin could not be loaded.
    #[error(transparent)]
    Plugin(#[from] CatalogError),
    /// A plugin could not describe its tools.
    #[error("plugin {plugin} could not list its tools: {source}")]
    Describe {
        /// The plugin.
        plugin: String,
        /// What went wrong.
        source: CallError,
    },
    /// Two tools would have the same name for the model.
    #[error(
        "tools {first} and {second} would both be called `{model_name}` by the model; rename one of the plugins"
    )]
    NameClash {
        /// The model's name for both.
        model_name: String,
        /// One tool.
        first: String,
        /// The other.
        second: String,
    },
    /// A plugin's calls cannot be given what they need.
    #[error(transparent)]
    Provision(#[from] ProvisionError),
}

/// The registered tools, the sandbox components run in, and what every
/// call is given.
pub struct Toolbox {
    sandbox: Arc<Sandbox>,
    plugins: Vec<Arc<PluginRuntime>>,
    tools: Vec<AgentTool>,
    events: Option<SessionEvents>,
    audit: Option<AuditLog>,
    skills: Option<Arc<Skills>>,
    unavailable: UnavailablePlugins,
    /// Sources whose tools come and go (MCP servers).
    sources: Vec<Arc<dyn ToolSource>>,
    /// Never raised: the interrupt of calls made outside a turn.
    idle: Interrupt,
    /// Told of the files calls read and change (language servers).
    file_watch: Option<Arc<dyn FileWatch>>,
}

impl Toolbox {
    /// No tools yet, running components in `sandbox`.
    pub fn new(sandbox: impl Into<Arc<Sandbox>>) -> Self {
        Self {
            sandbox: sandbox.into(),
            plugins: Vec::new(),
            tools: Vec::new(),
            events: None,
            audit: None,
            skills: None,
            unavailable: UnavailablePlugins::default(),
            sources: Vec::new(),
            idle: Interrupt::new(),
            file_watch: None,
        }
    }

    /// Loads every plugin of `catalog` and registers its tools. Calls
    /// will see `workspace`: read-only for tools that say they change
    /// nothing, read-write for the others. An installed plugin that cannot
    /// be used is left out and marked unavailable in the catalog.
    pub async fn load(
        sandbox: impl Into<Arc<Sandbox>>,
        catalog: &Catalog,
        workspace: &Path,
        limits: Limits,
    ) -> Result<Self, ToolboxError> {
        Self::load_with_writes(sandbox, catalog, workspace, limits, Writes::WhenAllowed).await
    }

    /// The same as [`Toolbox::load`], with the workspace writable only
    /// under [`Writes::WhenAllowed`] (`capstan mcp serve` without
    /// `--allow-write` passes [`Writes::Never`]).
    pub async fn load_with_writes(
        sandbox: impl Into<Arc<Sandbox>>,
        catalog: &Catalog,
        workspace: &Path,
        limits: Limits,
        writes: Writes,
    ) -> Result<Self, ToolboxError> {
        let mut toolbox = Self::new(sandbox);
        toolbox.unavailable = catalog.unavailable().clone();
        for plugin in catalog.names() {
            let Some(runtime) = toolbox.load_plugin(catalog, plugin, workspace, limits, writes)?
            else {
                continue;
            };
            let described = runtime
                .describe()
                .await
                .map_err(|source| ToolboxError::Describe {
                    plugin: plugin.to_string(),
                    source,
                });
            let Some(specs) = catalog.unless_unavailable(plugin, described)? else {
                continue;
            };
            for tool in runtime.tools(specs) {
                toolbox.register(Arc::new(tool))?;
            }
            toolbox.plugins.push(runtime);
        }
        Ok(toolbox)
    }

    /// Plugin `plugin`'s tool component and what its calls get, or `None`
    /// when it offers no tools or is an installed plugin that cannot be
    /// used (then marked unavailable).
    fn load_plugin(
        &self,
        catalog: &Catalog,
        plugin: &str,
        workspace: &Path,
        limits: Limits,
        writes: Writes,
    ) -> Result<Option<Arc<PluginRuntime>>, ToolboxError> {
        let own = self.sandbox.own_folders();
        if catalog.check_available(plugin, workspace, own).is_err() {
            return Ok(None);
        }
        let loaded = catalog.load_tools(&self.sandbox, plugin);
        let Some(Some(component)) = catalog.unless_unavailable(plugin, loaded)? else {
            return Ok(None);
        };
        let provision = Provision::for_plugin(catalog, plugin, workspace, own, limits, writes);
        let Some(provision) = catalog.unless_unavailable(plugin, provision)? else {
            return Ok(None);
        };
        Ok(Some(Arc::new(PluginRuntime::new(
            self.sandbox.clone(),
            component,
            provision,
        ))))
    }

    /// Offers `handler`'s tool to the model, under the name the model APIs
    /// accept. Two tools the model would call by one name are an error.
    pub fn register(&mut self, handler: Arc<dyn ToolHandler>) -> Result<(), ToolboxError> {
        let tool = AgentTool::new(handler);
        if let Some(other) = self.tools.iter().find(|t| t.model_name == tool.model_name) {
            return Err(ToolboxError::NameClash {
                model_name: tool.model_name,
                first: other.name.clone(),
                second: tool.name,
            });
        }
        self.tools.push(tool);
        Ok(())
    }

    /// Offers the tools of `source` as well, as they are at each moment. A
    /// tool of it whose model name is taken by a registered tool is left
    /// out.
    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.push(source);
    }

    /// The tools the sources offer now, but those whose names are taken.
    fn source_tools(&self) -> Vec<AgentTool> {
        let mut found: Vec<AgentTool> = Vec::new();
        for source in &self.sources {
            for tool in source.tools() {
                let taken = self
                    .tools
                    .iter()
                    .chain(found.iter())
                    .any(|t| t.model_name == tool.model_name);
                if !taken {
                    found.push(tool);
                }
            }
        }
        found
    }

    /// Every tool offered now: the registered ones, then the sources'.
    pub fn all_tools(&self) -> Vec<AgentTool> {
        let mut tools: Vec<AgentTool> = self
            .tools
            .iter()
            .filter(|t| self.offered(t))
            .cloned()
            .collect();
        tools.extend(self.source_tools());
        tools
    }

    /// The tool the model calls `model_name` (or `PLUGIN.TOOL`), among the
    /// registered tools and the sources' current ones.
    pub fn lookup(&self, model_name: &str) -> Option<AgentTool> {
        if let Some(tool) = self.find(model_name) {
            return Some(tool.clone());
        }
        if self.sources.is_empty() {
            return None;
        }
        self.source_tools()
            .into_iter()
            .find(|t| t.model_name == model_name || t.name == model_name)
    }

    /// The same as [`Self::lookup`], first waiting for a source that is
    /// still bringing the tool (an MCP server starting).
    pub async fn lookup_when_ready(&self, model_name: &str) -> Option<AgentTool> {
        if let Some(tool) = self.lookup(model_name) {
            return Some(tool);
        }
        for source in &self.sources {
            if source.wait_for(model_name).await {
                return self.lookup(model_name);
            }
        }
        None
    }

    /// The installed plugins left out because they cannot be used, and
    /// why (hooks found unusable later are added as they are).
    pub fn unavailable(&self) -> &UnavailablePlugins {
        &self.unavailable
    }

    /// The sandbox the tools run in (hooks share it).
    pub fn sandbox(&self) -> &Arc<Sandbox> {
        &self.sandbox
    }

    /// Offers `skills` to the model through the host's `skill` tool (when
    /// the model may load any of them, or read the supporting files of a
    /// skill in a folder that only the user may run), and to the user as
    /// `/name`.
    pub fn set_skills(&mut self, skills: Skills) {
        let skills = Arc::new(skills);
        self.tools
            .retain(|t| t.name != crate::skills::session::TOOL_NAME || t.plugin().is_some());
        let loadable = skills.set().skills().iter().any(|s| {
            s.meta.model_invocable || matches!(s.origin, crate::skills::Origin::File { .. })
        });
        if loadable {
            let tool = SkillTool::new(skills.clone(), self.sandbox.clone());
            self.tools.push(AgentTool::new(Arc::new(tool)));
        }
        self.skills = Some(skills);
    }

    /// The session's skills, if any were set.
    pub fn skills(&self) -> Option<&Skills> {
        self.skills.as_deref()
    }

    /// Why the call of `tool` with `input` may not run now, if an active
    /// skill's `disallowed-tools` covers it.
    pub fn skill_refusal(
        &self,
        tool: &AgentTool,
        input: &serde_json::Value,
        workspace: &std::path::Path,
    ) -> Option<String> {
        self.skills.as_ref()?.refusal(&tool.name, input, workspace)
    }

    /// The active skill whose `allowed-tools` pre-approve the call of
    /// `tool` with `input`, and the entry that does: `(skill, rule)`.
    pub fn skill_pre_approval(
        &self,
        tool: &AgentTool,
        input: &serde_json::Value,
        workspace: &std::path::Path,
    ) -> Option<(String, String)> {
        self.skills
            .as_ref()?
            .pre_approval(&tool.name, input, workspace)
    }

    /// The user's turn ended: no skill stays active.
    pub fn end_skill_turn(&self) {
        if let Some(skills) = &self.skills {
            skills.end_turn();
        }
    }

    /// Runs skill `name` for the user (`/name arguments`): the text that
    /// becomes the user's message. The skill is active until the turn ends.
    pub async fn invoke_skill(
        &self,
        name: &str,
        arguments: &str,
        session_id: Option<&str>,
    ) -> Result<String, String> {
        match &self.skills {
            Some(skills) => {
                skills
                    .invoke(&self.sandbox, name, arguments, session_id)
                    .await
            }
            None => Err(format!("there is no skill called `{name}`")),
        }
    }

    /// Sends what calls report as they run (plugins' log lines and
    /// progress, commands' output) to `events`.
    pub fn set_events(&mut self, events: SessionEvents) {
        self.events = Some(events);
    }

    /// Records the capability decisions of calls whose plugin has no audit
    /// log of its own in `log`.
    pub fn set_audit(&mut self, log: AuditLog) {
        self.audit = Some(log);
    }

    /// Where call `call_id`'s log lines, progress reports and command
    /// output go.
    pub fn events_for(&self, call_id: &str) -> Option<EventSink> {
        let events = self.events.clone()?;
        let call_id = call_id.to_string();
        let sink: EventSink = Arc::new(move |plugin: &str, event: PluginEvent| {
            events(&call_id, plugin, event);
        });
        Some(sink)
    }

    /// Tells `watch` of the files calls read and change, and adds what it
    /// answers to their results.
    pub fn set_file_watch(&mut self, watch: Arc<dyn FileWatch>) {
        self.file_watch = Some(watch);
    }

    /// What is told of the files calls read and change, if anything.
    pub fn file_watch(&self) -> Option<&Arc<dyn FileWatch>> {
        self.file_watch.as_ref()
    }

    /// Tells every source of tools that the session ended, so the
    /// servers they run stop and their ends are recorded.
    pub async fn session_ended(&self) {
        for source in &self.sources {
            source.session_ended().await;
        }
    }

    /// The audit log of calls whose plugin has none of its own.
    pub fn audit(&self) -> Option<&AuditLog> {
        self.audit.as_ref()
    }

    /// Every tool, in the order registered.
    pub fn tools(&self) -> &[AgentTool] {
        &self.tools
    }

    /// The tool the model calls `model_name` (or, leniently, `PLUGIN.TOOL`);
    /// none for a tool of a plugin found unavailable since it was loaded.
    pub fn find(&self, model_name: &str) -> Option<&AgentTool> {
        self.tools
            .iter()
            .find(|t| t.model_name == model_name || t.name == model_name)
            .filter(|t| self.offered(t))
    }

    /// Whether `tool` is offered: its plugin has not been found unavailable
    /// since it was loaded (by its hooks, which load after its tools).
    fn offered(&self, tool: &AgentTool) -> bool {
        tool.plugin()
            .is_none_or(|plugin| self.unavailable.get(plugin).is_none())
    }

    /// The tools as offered to the model.
    pub fn defs(&self) -> Vec<ToolDef> {
        self.defs_where(|_| true)
    }

    /// The tools `offered` keeps, as offered to the model.
    pub fn defs_where(&self, offered: impl Fn(&AgentTool) -> bool) -> Vec<ToolDef> {
        let dynamic = self.source_tools();
        self.tools
            .iter()
            .filter(|tool| self.offered(tool))
            .chain(dynamic.iter())
            .filter(|tool| offered(tool))
            .map(|tool| ToolDef {
                name: tool.model_name.clone(),
                description: tool.spec.description.clone(),
                input_schema: tool.spec.input_schema.clone(),
            })
            .collect()
    }

    /// The plugins' names and component hashes, for `/plugins`.
    pub fn plugins(&self) -> impl Iterator<Item = (&str, &str)> {
        self.plugins.iter().map(|p| (p.plugin(), p.sha256()))
    }

    /// The plugins' tools the model is not offered, as `PLUGIN.TOOL`, each
    /// with why (`web.search` until `[web.search]` is set).
    pub fn withheld_tools(&self) -> Vec<(String, String)> {
        self.plugins
            .iter()
            .flat_map(|p| {
                p.provision()
                    .withheld_tools()
                    .map(|(tool, why)| (format!("{}.{tool}", p.plugin()), why.to_string()))
            })
            .collect()
    }

    /// Runs one call of `tool` outside a turn (no sub-agents, nothing to
    /// interrupt it), with how long it took.
    pub async fn call(
        &self,
        tool: &AgentTool,
        input: &Value,
        session_id: Option<&str>,
    ) -> (Result<String, CallError>, Duration) {
        let started = Instant::now();
        let events = self.events_for("");
        let outcome = tool
            .call(ToolCall {
                input,
                call_id: "",
                session_id,
                interrupt: &self.idle,
                events: events.as_ref(),
                audit: self.audit.as_ref(),
                session: None,
                reach: super::tool::Reach::FULL,
            })
            .await;
        (outcome.result, started.elapsed())
    }
}
