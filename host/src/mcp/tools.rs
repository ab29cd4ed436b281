//! The tools a server offers: every built-in and installed plugin's tools
//! (and `--plugin` files), registered in a [`Toolbox`] under what
//! [`Provision`](crate::plugin::Provision) decides their calls get in one
//! workspace, described as MCP tools.
//!
//! A tool's MCP name is the name capstan gives it for models (`fs__read`
//! for `fs.read`): clients such as Claude Code put it into their own model
//! tool names, where a `.` is not allowed. Its title is `fs.read`, and a
//! call may use either.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::agent::{AgentTool, Toolbox};
use crate::home::Home;
use crate::plugin::{Catalog, Writes};
use crate::sandbox::{Limits, Sandbox};

/// The tools of one workspace, with their MCP descriptions.
pub struct ToolSet {
    toolbox: Toolbox,
    listing: Value,
    workspace: PathBuf,
}

impl ToolSet {
    /// Loads every plugin's tools for calls in `workspace`: writable only
    /// under [`Writes::WhenAllowed`]. `plugin_files` are `--plugin` specs.
    pub async fn load(
        home: &Home,
        sandbox: &Arc<Sandbox>,
        workspace: &Path,
        writes: Writes,
        plugin_files: &[String],
    ) -> Result<Self, String> {
        let mut catalog = Catalog::builtin();
        // Its hosts are allowed by a session's questions and rules, which
        // an MCP client's calls do not go through.
        catalog.leave_out_builtin(crate::plugin::web::WEB_PLUGIN);
        catalog.add_installed(home).map_err(|e| e.to_string())?;
        for spec in plugin_files {
            catalog.add_file(spec).map_err(|e| e.to_string())?;
        }
        let mut toolbox = Toolbox::load_with_writes(
            sandbox.clone(),
            &catalog,
            workspace,
            Limits::default(),
            writes,
        )
        .await
        .map_err(|e| e.to_string())?;
        // Calls of plugins with no audit log of their own are recorded in
        // the home's, as in a session.
        match crate::audit::AuditLog::open(&home.audit_log()) {
            Ok(log) => toolbox.set_audit(log),
            Err(error) => eprintln!(
                "capstan mcp: calls of built-in plugins and plugin files are not audited: {error}"
            ),
        }
        for unavailable in toolbox.unavailable().all() {
            eprintln!("capstan mcp: {unavailable}");
        }
        let listing = Value::Array(
            toolbox
                .tools()
                .iter()
                .filter(|tool| toolbox.find(&tool.model_name).is_some())
                .map(describe)
                .collect(),
        );
        Ok(Self {
            toolbox,
            listing,
            workspace: workspace.to_path_buf(),
        })
    }

    /// The tools as `tools/list` gives them.
    pub fn listing(&self) -> &Value {
        &self.listing
    }

    /// The tool named `name`, by its MCP name or as `PLUGIN.TOOL`.
    pub fn find(&self, name: &str) -> Option<&AgentTool> {
        self.toolbox.find(name)
    }

    /// The names a call may use, for an error naming an unknown tool.
    pub fn names(&self) -> Vec<String> {
        self.toolbox
            .tools()
            .iter()
            .map(|t| t.model_name.clone())
            .collect()
    }

    /// The home's audit log, where its calls are recorded, if it opened.
    pub fn audit(&self) -> Option<&crate::audit::AuditLog> {
        self.toolbox.audit()
    }

    /// The workspace its calls see.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }
}

/// One tool as MCP describes it: name, title, description, input schema
/// and the annotations its hints give.
pub fn describe(tool: &AgentTool) -> Value {
    let spec = &tool.spec;
    let mut schema = spec.input_schema.clone();
    if !schema.is_object() {
        schema = json!({ "type": "object" });
    }
    if schema.get("type").is_none() {
        schema["type"] = json!("object");
    }
    json!({
        "name": tool.model_name,
        "title": tool.name,
        "description": spec.description,
        "inputSchema": schema,
        "annotations": {
            "title": tool.name,
            "readOnlyHint": spec.read_only,
            "destructiveHint": !spec.read_only && spec.destructive,
            "idempotentHint": spec.idempotent,
            "openWorldHint": spec.open_world,
        },
    })
}
