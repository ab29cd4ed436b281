//! The tools of a plugin's component, each call run in a fresh sandbox under
//! what [`Provision`] decided the plugin's calls get. The agent's toolbox
//! and `capstan tool call` both run component tools through this handler.
//!
//! A tool that says it changes nothing gets the read-only grants, so the
//! sandbox holds it to its word; the others get the write grants, which
//! are read-only too unless the caller provisioned writes (the agent does,
//! and runs such a call only once the permission policy let it;
//! `capstan tool call` does with `--allow-write`) and the calling agent
//! may write ([`super::tool::Reach`]). An installed plugin
//! granted any network access makes its tools open-world for the policy.

use std::sync::Arc;

use futures_util::future::LocalBoxFuture;

use super::tool::{CallNeeds, ToolCall, ToolHandler, ToolOutcome};
use crate::plugin::Provision;
use crate::policy::web_hosts;
use crate::sandbox::{CallError, LoadedComponent, Sandbox, ToolOutput, ToolSpec};

/// A plugin's loaded tool component and what its calls get, shared by its
/// tools.
pub struct PluginRuntime {
    sandbox: Arc<Sandbox>,
    component: LoadedComponent,
    provision: Provision,
}

impl PluginRuntime {
    /// `component`, run in `sandbox` under `provision`.
    pub fn new(sandbox: Arc<Sandbox>, component: LoadedComponent, provision: Provision) -> Self {
        Self {
            sandbox,
            component,
            provision,
        }
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        self.component.name()
    }

    /// What its calls get.
    pub fn provision(&self) -> &Provision {
        &self.provision
    }

    /// The component's SHA-256.
    pub fn sha256(&self) -> &str {
        self.component.sha256()
    }

    /// Asks the component for its tools (in a fresh sandbox, with no
    /// grants).
    pub async fn describe(&self) -> Result<Vec<ToolSpec>, CallError> {
        self.sandbox.describe(&self.component).await
    }

    /// The handlers of the tools `specs` describes.
    pub fn tools(self: &Arc<Self>, specs: Vec<ToolSpec>) -> Vec<ComponentTool> {
        specs
            .into_iter()
            .filter(|spec| self.provision.offers(&spec.name))
            .map(|spec| ComponentTool::new(self.clone(), spec))
            .collect()
    }
}

/// One tool of a plugin's component.
pub struct ComponentTool {
    name: String,
    spec: ToolSpec,
    runtime: Arc<PluginRuntime>,
}

impl ComponentTool {
    /// Tool `spec` of `runtime`'s component, named `PLUGIN.TOOL`.
    pub fn new(runtime: Arc<PluginRuntime>, mut spec: ToolSpec) -> Self {
        spec.open_world |= runtime.provision.reaches_network();
        Self {
            name: format!("{}.{}", runtime.plugin(), spec.name),
            spec,
            runtime,
        }
    }
}

impl ComponentTool {
    /// Runs one call and returns the component's output as it gave it
    /// (`capstan tool call --json` prints its content items).
    pub async fn run(&self, call: &ToolCall<'_>) -> Result<ToolOutput, CallError> {
        let mut options = self.runtime.provision.options(
            !self.spec.read_only && call.reach.write,
            call.session_id,
            call.events.cloned(),
            call.audit,
        );
        // Its capability decisions carry the tool call's id.
        options.call_id = Some(call.call_id.to_string());
        // An agent without network tools gets no network in any call:
        // neither the plugin's origins nor the secrets sent to them.
        if !call.reach.net {
            options.grants.net.clear();
            options.grants.secrets.clear();
        } else if self.runtime.provision.gates_hosts() && self.name == web_hosts::FETCH_TOOL {
            // Each request to a host not granted is put to the session's
            // policy as it is now; the URL's own host was just authorized.
            options.grants.net_gate = Some(web_hosts::fetch_gate(
                call.session.map(|s| s.policy.clone()),
                call.session
                    .map(|s| s.workspace.clone())
                    .unwrap_or_default(),
                call.input,
            ));
        }
        let input = call.input.to_string();
        self.runtime
            .sandbox
            .call_tool(&self.runtime.component, &self.spec.name, &input, &options)
            .await
    }
}

impl ToolHandler for ComponentTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plugin(&self) -> Option<&str> {
        Some(self.runtime.plugin())
    }

    fn needs(&self) -> CallNeeds {
        CallNeeds {
            writes_workspace: !self.spec.read_only,
            granted: self.runtime.provision.granted().to_vec(),
        }
    }

    fn call<'a>(&'a self, call: ToolCall<'a>) -> LocalBoxFuture<'a, ToolOutcome> {
        Box::pin(async move { self.run(&call).await.map(|output| output.to_text()).into() })
    }
}
