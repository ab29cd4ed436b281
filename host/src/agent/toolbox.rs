//! The tools an agent session offers the model: every plugin's tools,
//! loaded once, under names the model APIs accept, each call run in a fresh
//! sandbox.
//!
//! Built-in plugins and `--plugin` files get the workspace, read-only or
//! read-write. An installed plugin gets what the user granted it (its
//! folders, network, environment variables and secrets), its own limits,
//! and an audit record of every capability decision; its tools count as
//! reaching the network when it is granted any, so the permission policy
//! treats them as open-world. Either way a tool that says it changes
//! nothing sees the workspace read-only, and the others may change it only
//! once the policy has let the call run.
//!
//! An installed plugin that cannot be used (see
//! [`crate::plugin::availability`]) is left out and recorded in the
//! catalog's unavailable plugins, which the toolbox keeps for `/plugins`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::grants::{GrantError, Grants, PrepareError};
use crate::model::ToolDef;
use crate::plugin::{Catalog, CatalogError, UnavailablePlugins};
use crate::policy::audit::{AuditError, AuditLog};
use crate::sandbox::{
    CallError, CallOptions, EventSink, Limits, LoadedComponent, Sandbox, ToolSpec,
};
use crate::skills::Skills;

/// The `plugin` index of the host-implemented `skill` tool.
const SKILL_TOOL: usize = usize::MAX;

/// The `plugin` index of the `task` tool, which the agent runs itself.
const SUBAGENT_TOOL: usize = usize::MAX - 1;

/// A tool as the session knows it.
#[derive(Debug, Clone)]
pub struct AgentTool {
    /// The name the model calls it by: `fs__read` for `fs.read`, because
    /// model APIs allow only letters, digits, `_` and `-` in tool names.
    pub model_name: String,
    /// The tool's full name, `PLUGIN.TOOL`.
    pub name: String,
    /// What the plugin said about it.
    pub spec: ToolSpec,
    plugin: usize,
}

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
    /// The workspace cannot be granted.
    #[error(transparent)]
    Grant(#[from] GrantError),
    /// An installed plugin's grants cannot be made.
    #[error("plugin {plugin} cannot be given what it was granted: {source}")]
    PluginGrant {
        /// The plugin.
        plugin: String,
        /// Why.
        source: PrepareError,
    },
    /// The audit log cannot be opened.
    #[error(transparent)]
    Audit(#[from] AuditError),
}

/// What the calls of one plugin get.
struct PluginGrants {
    /// For tools that say they change nothing.
    read: Grants,
    /// For the others.
    write: Grants,
    /// Its limits.
    limits: Limits,
    /// Where its capability decisions are recorded, if not the session's.
    audit: Option<AuditLog>,
}

/// The plugins' tools, the sandbox they run in and the workspace grants.
pub struct Toolbox {
    sandbox: Arc<Sandbox>,
    components: Vec<LoadedComponent>,
    grants: Vec<PluginGrants>,
    tools: Vec<AgentTool>,
    events: Option<EventSink>,
    audit: Option<AuditLog>,
    skills: Option<Arc<Skills>>,
    unavailable: UnavailablePlugins,
}

/// The name the model uses for tool `PLUGIN.TOOL`.
pub fn model_name(name: &str) -> String {
    name.replacen('.', "__", 1)
}

impl Toolbox {
    /// Loads every plugin of `catalog` and asks each for its tools. Calls
    /// will see `workspace`: read-only for tools that say they change
    /// nothing, read-write for the others. An installed plugin that cannot
    /// be used is left out and marked unavailable in the catalog.
    pub async fn load(
        sandbox: impl Into<Arc<Sandbox>>,
        catalog: &Catalog,
        workspace: &Path,
        limits: Limits,
    ) -> Result<Self, ToolboxError> {
        let sandbox: Arc<Sandbox> = sandbox.into();
        let read = Grants::workspace(workspace, false, sandbox.own_folders())?;
        let write = Grants::workspace(workspace, true, sandbox.own_folders())?;
        let mut components = Vec::new();
        let mut grants = Vec::new();
        let mut tools: Vec<AgentTool> = Vec::new();
        for plugin in catalog.names() {
            if catalog
                .check_available(plugin, workspace, sandbox.own_folders())
                .is_err()
            {
                continue;
            }
            let loaded = catalog.load_tools(&sandbox, plugin);
            let Some(Some(component)) = catalog.unless_unavailable(plugin, loaded)? else {
                continue;
            };
            let (plugin_grants, networked) = match catalog.installed(plugin) {
                Some(installed) => {
                    let made = (|| {
                        let grant = |writable| {
                            installed
                                .grants(workspace, writable, sandbox.own_folders())
                                .map_err(|source| ToolboxError::PluginGrant {
                                    plugin: plugin.to_string(),
                                    source,
                                })
                        };
                        Ok::<_, ToolboxError>(PluginGrants {
                            read: grant(false)?,
                            write: grant(true)?,
                            limits: installed.limits(limits),
                            audit: Some(installed.audit()?),
                        })
                    })();
                    let Some(plugin_grants) = catalog.unless_unavailable(plugin, made)? else {
                        continue;
                    };
                    (plugin_grants, installed.reaches_network())
                }
                None => (
                    PluginGrants {
                        read: read.clone(),
                        write: write.clone(),
                        limits,
                        audit: None,
                    },
                    false,
                ),
            };
            let described =
                sandbox
                    .describe(&component)
                    .await
                    .map_err(|source| ToolboxError::Describe {
                        plugin: plugin.to_string(),
                        source,
                    });
            let Some(specs) = catalog.unless_unavailable(plugin, described)? else {
                continue;
            };
            for mut spec in specs {
                spec.open_world |= networked;
                let name = format!("{plugin}.{}", spec.name);
                let model_name = model_name(&name);
                if let Some(other) = tools.iter().find(|t| t.model_name == model_name) {
                    return Err(ToolboxError::NameClash {
                        model_name,
                        first: other.name.clone(),
                        second: name,
                    });
                }
                tools.push(AgentTool {
                    model_name,
                    name,
                    spec,
                    plugin: components.len(),
                });
            }
            components.push(component);
            grants.push(plugin_grants);
        }
        Ok(Self {
            sandbox,
            components,
            grants,
            tools,
            events: None,
            audit: None,
            skills: None,
            unavailable: catalog.unavailable().clone(),
        })
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
    /// the model may load any of them), and to the user as `/name`.
    pub fn set_skills(&mut self, skills: Skills) {
        self.tools.retain(|t| t.plugin != SKILL_TOOL);
        let loadable = skills.set().skills().iter().any(|s| s.meta.model_invocable);
        if !loadable {
            self.skills = Some(Arc::new(skills));
            return;
        }
        self.tools.push(AgentTool {
            model_name: crate::skills::session::TOOL_NAME.to_string(),
            name: crate::skills::session::TOOL_NAME.to_string(),
            spec: Skills::tool_spec(),
            plugin: SKILL_TOOL,
        });
        self.skills = Some(Arc::new(skills));
    }

    /// Offers the `task` tool, which hands work to a sub-agent.
    pub fn enable_subagents(&mut self) {
        self.tools.retain(|t| t.plugin != SUBAGENT_TOOL);
        self.tools.push(AgentTool {
            model_name: super::subagent::TOOL_NAME.to_string(),
            name: super::subagent::TOOL_NAME.to_string(),
            spec: super::subagent::tool_spec(),
            plugin: SUBAGENT_TOOL,
        });
    }

    /// Whether `tool` is the `task` tool.
    pub fn is_subagent_tool(tool: &AgentTool) -> bool {
        tool.plugin == SUBAGENT_TOOL
    }

    /// The session's skills, if any were set.
    pub fn skills(&self) -> Option<&Skills> {
        self.skills.as_deref()
    }

    /// Why `tool` may not run now, if an active skill's `allowed-tools`
    /// leaves it out.
    pub fn skill_refusal(&self, tool: &AgentTool) -> Option<String> {
        self.skills.as_ref()?.refusal(&tool.name, &tool.model_name)
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

    /// Sends plugins' log lines and progress reports to `events`.
    pub fn set_events(&mut self, events: EventSink) {
        self.events = Some(events);
    }

    /// Records every call's capability decisions in `log`.
    pub fn set_audit(&mut self, log: AuditLog) {
        self.audit = Some(log);
    }

    /// Every tool, in plugin order.
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
        self.components
            .get(tool.plugin)
            .is_none_or(|c| self.unavailable.get(c.name()).is_none())
    }

    /// The tools as offered to the model.
    pub fn defs(&self) -> Vec<ToolDef> {
        self.defs_where(|_| true)
    }

    /// The tools `offered` keeps, as offered to the model.
    pub fn defs_where(&self, offered: impl Fn(&AgentTool) -> bool) -> Vec<ToolDef> {
        self.tools
            .iter()
            .filter(|tool| self.offered(tool) && offered(tool))
            .map(|tool| ToolDef {
                name: tool.model_name.clone(),
                description: tool.spec.description.clone(),
                input_schema: tool.spec.input_schema.clone(),
            })
            .collect()
    }

    /// The plugins' names and component hashes, for `/plugins`.
    pub fn plugins(&self) -> impl Iterator<Item = (&str, &str)> {
        self.components.iter().map(|c| (c.name(), c.sha256()))
    }

    /// Runs one call of `tool` in a fresh sandbox. A tool that says it
    /// changes nothing gets the workspace read-only, so the sandbox holds it
    /// to its word.
    pub async fn call(
        &self,
        tool: &AgentTool,
        input: &Value,
        session_id: Option<&str>,
    ) -> (Result<String, CallError>, Duration) {
        let started = Instant::now();
        if tool.plugin == SUBAGENT_TOOL {
            let err =
                CallError::Failed("the task tool runs only inside an agent session".to_string());
            return (Err(err), started.elapsed());
        }
        if tool.plugin == SKILL_TOOL {
            let result = match &self.skills {
                Some(skills) => skills.call(&self.sandbox, input, session_id).await,
                None => Err(CallError::Failed("no skills are loaded".to_string())),
            };
            return (result, started.elapsed());
        }
        let (Some(component), Some(plugin)) = (
            self.components.get(tool.plugin),
            self.grants.get(tool.plugin),
        ) else {
            let err = CallError::UnknownTool {
                name: tool.name.clone(),
                known: Vec::new(),
            };
            return (Err(err), started.elapsed());
        };
        let grants = if tool.spec.read_only {
            &plugin.read
        } else {
            &plugin.write
        };
        let options = CallOptions {
            grants: grants.clone(),
            limits: plugin.limits,
            session_id: session_id.map(str::to_string),
            events: self.events.clone(),
            audit: plugin.audit.clone().or_else(|| self.audit.clone()),
        };
        let input = input.to_string();
        let result = self
            .sandbox
            .call_tool(component, &tool.spec.name, &input, &options)
            .await
            .map(|output| output.to_text());
        (result, started.elapsed())
    }
}
