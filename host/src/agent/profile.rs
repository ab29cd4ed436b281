//! What kind of agent a conversation runs as: the user's own session, or a
//! sub-agent with its own name, system prompt, tools and model. The `task`
//! tool's sub-agent is one profile ([`super::subagent::profile`]); custom
//! sub-agents are others.

use super::AgentConfig;
use super::tool::{AgentTool, Reach};

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
    /// What its calls' sandboxes may reach at most.
    pub reach: Reach,
}

/// Which of the session's tools an agent is offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolAllowance {
    /// Every tool.
    All,
    /// Every tool except those named (full names).
    AllBut(Vec<String>),
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
            Self::AllBut(except) => !except.contains(&tool.name),
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
            reach: Reach::FULL,
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures_util::future::LocalBoxFuture;

    use super::*;
    use crate::agent::tool::{ToolCall, ToolHandler, ToolOutcome};
    use crate::sandbox::ToolSpec;

    struct Named {
        name: &'static str,
        plugin: Option<&'static str>,
        spec: ToolSpec,
    }

    impl ToolHandler for Named {
        fn name(&self) -> &str {
            self.name
        }

        fn spec(&self) -> &ToolSpec {
            &self.spec
        }

        fn plugin(&self) -> Option<&str> {
            self.plugin
        }

        fn call<'a>(&'a self, _call: ToolCall<'a>) -> LocalBoxFuture<'a, ToolOutcome> {
            Box::pin(async { ToolOutcome::from(Ok(String::new())) })
        }
    }

    fn tool(name: &'static str, plugin: Option<&'static str>, read_only: bool) -> AgentTool {
        AgentTool::new(Arc::new(Named {
            name,
            plugin,
            spec: ToolSpec {
                name: name.to_string(),
                description: String::new(),
                input_schema: serde_json::json!({"type": "object"}),
                read_only,
                destructive: false,
                idempotent: false,
                open_world: false,
            },
        }))
    }

    #[test]
    fn allowances_pick_tools_by_hint_or_by_name() {
        let read = tool("fs.read", Some("fs"), true);
        let write = tool("fs.write", Some("fs"), false);
        let task = tool("task", None, true);
        let web = tool("web.fetch", Some("web"), true);
        assert!(
            [&read, &write, &task]
                .iter()
                .all(|t| ToolAllowance::All.allows(t))
        );
        let read_only = ToolAllowance::ReadOnly {
            except: vec!["task".to_string()],
        };
        assert!(read_only.allows(&read) && read_only.allows(&web));
        assert!(!read_only.allows(&write) && !read_only.allows(&task));
        let named = ToolAllowance::Named(vec!["fs.*".to_string(), "task".to_string()]);
        assert!(named.allows(&read) && named.allows(&write) && named.allows(&task));
        assert!(!named.allows(&web));
    }

    #[test]
    fn a_profile_replaces_the_prompt_and_model_it_names() {
        let config = AgentConfig::new("claude-sonnet-4-5", "session prompt");
        assert_eq!(
            AgentProfile::main().apply(config.clone()).system,
            "session prompt"
        );
        let custom = AgentProfile {
            name: "reviewer".to_string(),
            system: Some("review".to_string()),
            model: Some("small-model".to_string()),
            tools: ToolAllowance::Named(vec!["fs.read".to_string()]),
            reach: Reach {
                write: false,
                net: false,
            },
        };
        let applied = custom.apply(config);
        assert_eq!(
            (applied.system.as_str(), applied.model.as_str()),
            ("review", "small-model")
        );
        assert_eq!(applied.max_turns, 50);
    }
}
