//! What a tool returns on success.

use serde::Serialize;

use crate::ToolError;
use crate::bindings::exports::capstan::plugin::tool::{Content as WitContent, ToolOutput};

/// One piece of a tool's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// A JSON document, as text.
    Json(String),
}

/// A tool's successful result: one or more pieces of content.
///
/// A tool function may return anything that converts into `Output`: a
/// `String`, a `&str`, a `Content` or an `Output` built with
/// [`Output::json`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// The pieces, in order.
    pub content: Vec<Content>,
}

impl Output {
    /// A result made of one text.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![Content::Text(text.into())],
        }
    }

    /// A result made of one JSON document, serialized from `value`.
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<Self, ToolError> {
        let text = serde_json::to_string(value)
            .map_err(|e| ToolError::failed(format!("cannot serialize the result as JSON: {e}")))?;
        Ok(Self {
            content: vec![Content::Json(text)],
        })
    }

    /// Appends a piece of content.
    pub fn push(&mut self, content: Content) {
        self.content.push(content);
    }
}

impl From<String> for Output {
    fn from(text: String) -> Self {
        Self::text(text)
    }
}

impl From<&str> for Output {
    fn from(text: &str) -> Self {
        Self::text(text)
    }
}

impl From<Content> for Output {
    fn from(content: Content) -> Self {
        Self {
            content: vec![content],
        }
    }
}

impl From<Output> for ToolOutput {
    fn from(output: Output) -> Self {
        ToolOutput {
            content: output
                .content
                .into_iter()
                .map(|c| match c {
                    Content::Text(t) => WitContent::Text(t),
                    Content::Json(j) => WitContent::Json(j),
                })
                .collect(),
        }
    }
}
