//! The host's `skill` tool: the model loads one of the session's skills
//! (or a supporting file of one) by name. The skills themselves, and which
//! are active, live in [`crate::skills::session`].

use std::sync::Arc;

use futures_util::future::LocalBoxFuture;

use super::tool::{ToolCall, ToolHandler, ToolOutcome};
use crate::sandbox::{Sandbox, ToolSpec};
use crate::skills::Skills;

/// The `skill` tool over a session's skills.
pub struct SkillTool {
    skills: Arc<Skills>,
    sandbox: Arc<Sandbox>,
    spec: ToolSpec,
}

impl SkillTool {
    /// The tool loading `skills`, whose components run in `sandbox`.
    pub fn new(skills: Arc<Skills>, sandbox: Arc<Sandbox>) -> Self {
        Self {
            skills,
            sandbox,
            spec: Skills::tool_spec(),
        }
    }
}

impl ToolHandler for SkillTool {
    fn name(&self) -> &str {
        crate::skills::session::TOOL_NAME
    }

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(&'a self, call: ToolCall<'a>) -> LocalBoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            self.skills
                .call(&self.sandbox, call.input, call.session_id)
                .await
                .into()
        })
    }
}
