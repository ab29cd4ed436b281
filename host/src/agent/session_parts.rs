//! What an agent is made of besides its conversation: the model, the tools,
//! the permission policy, the configuration, the workspace and the hooks.
//! A sub-agent starts from a copy of its session's parts.

use std::path::PathBuf;
use std::sync::Arc;

use super::AgentConfig;
use super::toolbox::Toolbox;
use crate::audit::AuditLog;
use crate::hooks::HookSet;
use crate::model::Provider;
use crate::policy::Policy;

/// The parts of an agent session a sub-agent shares (the policy and the
/// configuration as they are when it starts).
#[derive(Clone)]
pub struct SessionParts {
    pub(super) provider: Arc<dyn Provider>,
    pub(super) toolbox: Arc<Toolbox>,
    pub(super) policy: Policy,
    pub(super) config: AgentConfig,
    pub(super) workspace: PathBuf,
    pub(super) hooks: Arc<HookSet>,
    pub(super) hook_audit: Option<AuditLog>,
}
