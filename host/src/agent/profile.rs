//! What kind of agent a conversation runs as: the user's own session, or a
//! sub-agent with its own name, system prompt, tools and model. The `task`
//! tool's sub-agent is one profile ([`super::subagent::profile`]); custom
//! sub-agents are others.

use super::AgentConfig;
use super::tool::AgentTool;

/// The agent a conversation runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentProfile {
    /// Its name: `main` for the user's session, the agent type of a
    /// sub-agent (hook payloads name it as `agent_type`).
    pub name: String,
    /// Its system prompt; `None` keeps the session's.
    pub system: Option<String>,
    /// The model it talks to; `None` keeps the session's.
    pub model: Option<String>,
    /// The tools offered to it.
    pub tools: ToolAllowance,
}

/// Which of the session's tools an agent is offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolAllowance {
    /// Every tool.
    All,
    /// Only the tools that say they change nothing, except those named
    /// (full names, such as `task`).
    ReadOnly {
        /// Tools left out although read-only.
        except: Vec<String>,
    },
    /// Only the tools named (full names, `PLUGIN.TOOL`, or `PLUGIN.*` for
    /// all of a plugin's).
    Named(Vec<String>),
}

impl ToolAllowance {
    /// Whether `tool` is offered.
    pub fn allows(&self, tool: &AgentTool) -> bool {
        match self {
            Self::All => true,
            Self::ReadOnly { except } => tool.spec.read_only && !except.contains(&tool.name),
            Self::Named(names) => names.iter().any(|name| match name.strip_suffix(".*") {
                Some(plugin) => tool.plugin() == Some(plugin),
                None => *name == tool.name,
            }),
        }
    }
}

impl AgentProfile {
    /// The user's own session: the session's prompt and model, every tool.
    pub fn main() -> Self {
        Self {
            name: "main".to_string(),
            system: None,
            model: None,
            tools: ToolAllowance::All,
        }
    }

    /// The session's configuration `config` with this profile's system
    /// prompt and model.
    pub fn apply(&self, mut config: AgentConfig) -> AgentConfig {
        if let Some(system) = &self.system {
            config.system.clone_from(system);
        }
        if let Some(model) = &self.model {
            config.model.clone_from(model);
            config.context_window = super::compact::context_window_for(model);
        }
        config
    }
}
