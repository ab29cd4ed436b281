//! The host's view of tools: specs and results, converted from the WIT types.

use serde::Serialize;

use crate::model::valid_tool_name;

use super::bindings::exports::capstan::plugin::tool as wit;

/// A tool, as a plugin describes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// The tool's name within its plugin.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its input.
    pub input_schema: serde_json::Value,
    /// It changes nothing.
    pub read_only: bool,
    /// It may delete or overwrite data.
    pub destructive: bool,
    /// Calling it twice equals calling it once.
    pub idempotent: bool,
    /// It reaches outside the workspace.
    pub open_world: bool,
}

impl ToolSpec {
    /// Converts a spec from the guest, checking its name and schema.
    pub fn from_wit(spec: wit::ToolSpec) -> Result<Self, String> {
        if !valid_tool_name(&spec.name) {
            return Err(format!(
                "tool name `{}` is not valid: use lowercase letters, digits, `-` and `_`, starting with a letter",
                spec.name
            ));
        }
        let input_schema: serde_json::Value =
            serde_json::from_str(&spec.input_schema).map_err(|e| {
                format!(
                    "tool `{}` has an input schema that is not valid JSON: {e}",
                    spec.name
                )
            })?;
        if !input_schema.is_object() {
            return Err(format!(
                "tool `{}` has an input schema that is not a JSON object",
                spec.name
            ));
        }
        Ok(Self {
            read_only: spec.hints.contains(wit::ToolHints::READ_ONLY),
            destructive: spec.hints.contains(wit::ToolHints::DESTRUCTIVE),
            idempotent: spec.hints.contains(wit::ToolHints::IDEMPOTENT),
            open_world: spec.hints.contains(wit::ToolHints::OPEN_WORLD),
            name: spec.name,
            description: spec.description,
            input_schema,
        })
    }
}

/// One piece of a tool's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Content {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// A JSON document.
    Json {
        /// The document.
        json: serde_json::Value,
    },
}

/// A tool's successful result.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolOutput {
    /// The pieces, in order.
    pub content: Vec<Content>,
}

impl ToolOutput {
    /// Converts a result from the guest. JSON that does not parse is kept as
    /// text rather than lost.
    pub fn from_wit(output: wit::ToolOutput) -> Self {
        let content = output
            .content
            .into_iter()
            .map(|c| match c {
                wit::Content::Text(text) => Content::Text { text },
                wit::Content::Json(text) => match serde_json::from_str(&text) {
                    Ok(json) => Content::Json { json },
                    Err(_) => Content::Text { text },
                },
            })
            .collect();
        Self { content }
    }

    /// The result as text: texts as they are, JSON pretty-printed.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for piece in &self.content {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            match piece {
                Content::Text { text } => out.push_str(text),
                Content::Json { json } => {
                    out.push_str(&serde_json::to_string_pretty(json).unwrap_or_default());
                }
            }
        }
        out
    }
}

/// The size in bytes of a result as the guest returned it.
pub fn wit_output_size(output: &wit::ToolOutput) -> usize {
    output
        .content
        .iter()
        .map(|c| match c {
            wit::Content::Text(t) | wit::Content::Json(t) => t.len(),
        })
        .sum()
}
