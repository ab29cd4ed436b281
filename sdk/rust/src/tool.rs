//! Declaring tools and dispatching calls to them.

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::bindings::capstan::plugin::types::CallContext;
use crate::bindings::exports::capstan::plugin::tool::{
    ToolError as WitToolError, ToolHints, ToolOutput, ToolSpec,
};
use crate::{Context, Output, ToolError};

type Handler = Box<dyn Fn(&str, &Context) -> Result<Output, ToolError>>;

/// One tool: a name, a description for the model, behaviour hints, and a
/// function from a typed input to a result.
pub struct Tool {
    name: Cow<'static, str>,
    description: Cow<'static, str>,
    hints: ToolHints,
    schema: fn() -> serde_json::Value,
    handler: Handler,
}

impl Tool {
    /// Declares a tool called `name` that runs `handler`.
    ///
    /// The input type `I` gives the tool's JSON Schema (through
    /// [`JsonSchema`]; doc comments on fields become descriptions the model
    /// reads) and is parsed from the call's JSON (through serde). Add
    /// `#[serde(deny_unknown_fields)]` to reject fields the tool does not know.
    pub fn new<I, O, F>(
        name: impl Into<Cow<'static, str>>,
        description: impl Into<Cow<'static, str>>,
        handler: F,
    ) -> Self
    where
        I: DeserializeOwned + JsonSchema,
        O: Into<Output>,
        F: Fn(I, &Context) -> Result<O, ToolError> + 'static,
    {
        Self {
            name: name.into(),
            description: description.into(),
            hints: ToolHints::empty(),
            schema: schema_of::<I>,
            handler: Box::new(move |input, ctx| {
                let parsed: I = parse_input(input)?;
                handler(parsed, ctx).map(Into::into)
            }),
        }
    }

    /// Marks the tool as only reading: it changes nothing. Read-only tools
    /// may run without asking the user and in parallel with each other.
    pub fn read_only(mut self) -> Self {
        self.hints |= ToolHints::READ_ONLY;
        self
    }

    /// Marks the tool as able to delete or overwrite data.
    pub fn destructive(mut self) -> Self {
        self.hints |= ToolHints::DESTRUCTIVE;
        self
    }

    /// Marks the tool as idempotent: calling it twice equals calling it once.
    pub fn idempotent(mut self) -> Self {
        self.hints |= ToolHints::IDEMPOTENT;
        self
    }

    /// Marks the tool as reaching outside the workspace (the network).
    pub fn open_world(mut self) -> Self {
        self.hints |= ToolHints::OPEN_WORLD;
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tool's JSON Schema, as generated from its input type.
    pub fn input_schema(&self) -> serde_json::Value {
        (self.schema)()
    }

    /// Runs the tool on a JSON input, as the host would.
    pub fn run(&self, input: &str, ctx: &Context) -> Result<Output, ToolError> {
        (self.handler)(input, ctx)
    }
}

fn schema_of<I: JsonSchema>() -> serde_json::Value {
    schemars::schema_for!(I).to_value()
}

/// Parses a tool's input, naming the offending field on error.
fn parse_input<I: DeserializeOwned>(input: &str) -> Result<I, ToolError> {
    let trimmed = input.trim();
    let text = if trimmed.is_empty() { "{}" } else { trimmed };
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ToolError::invalid_input(format!("the input is not valid JSON: {inner}"))
        } else if path == "." || inner.to_string().starts_with("unknown field") {
            ToolError::invalid_input(strip_position(&inner.to_string()))
        } else {
            ToolError::invalid_input(format!(
                "field `{path}`: {}",
                strip_position(&inner.to_string())
            ))
        }
    })?;
    de.end()
        .map_err(|e| ToolError::invalid_input(format!("the input is not valid JSON: {e}")))?;
    Ok(parsed)
}

/// serde_json appends " at line L column C" to data errors; on one-line
/// inputs that is noise next to the field name.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_string(),
        None => message.to_string(),
    }
}

/// Implements `describe` for a list of tools.
pub fn describe(tools: &[Tool]) -> Vec<ToolSpec> {
    tools
        .iter()
        .map(|t| ToolSpec {
            name: t.name.to_string(),
            description: t.description.to_string(),
            input_schema: t.input_schema().to_string(),
            hints: t.hints,
        })
        .collect()
}

/// Implements `call` for a list of tools.
pub fn call(
    tools: &[Tool],
    name: &str,
    input: &str,
    ctx: CallContext,
) -> Result<ToolOutput, WitToolError> {
    let ctx = Context::from(ctx);
    let Some(tool) = tools.iter().find(|t| t.name == name) else {
        let known: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        return Err(ToolError::invalid_input(format!(
            "unknown tool `{name}`; this plugin offers: {}",
            known.join(", ")
        ))
        .into());
    };
    tool.run(input, &ctx).map(Into::into).map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Read {
        /// The file.
        path: String,
        limit: Option<u32>,
    }

    fn read_tool() -> Tool {
        Tool::new("read", "Reads.", |i: Read, _ctx: &Context| {
            Ok::<_, ToolError>(format!("{}:{:?}", i.path, i.limit))
        })
        .read_only()
    }

    fn err(input: &str) -> String {
        match read_tool().run(input, &Context::default()) {
            Err(ToolError::InvalidInput(m)) => m,
            other => panic!("expected invalid input, got {other:?}"),
        }
    }

    #[test]
    fn valid_input_reaches_the_handler() {
        let out = read_tool()
            .run(r#"{"path":"a","limit":3}"#, &Context::default())
            .unwrap();
        assert_eq!(out, Output::text("a:Some(3)"));
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(
            err(r#"{"path":"a","limit":"x"}"#),
            "field `limit`: invalid type: string \"x\", expected u32"
        );
        assert!(err(r#"{"path":"a","bogus":1}"#).contains("unknown field `bogus`"));
        assert!(err(r#"{}"#).contains("missing field `path`"));
        assert!(err(r#"{"path":"#).starts_with("the input is not valid JSON"));
        assert!(err(r#"{"path":"a"} x"#).starts_with("the input is not valid JSON"));
    }

    #[test]
    fn schema_carries_descriptions_and_hints() {
        let tool = read_tool();
        let schema = tool.input_schema();
        assert_eq!(schema["properties"]["path"]["description"], "The file.");
        assert_eq!(schema["additionalProperties"], false);
        let specs = describe(&[tool]);
        assert!(specs[0].hints.contains(ToolHints::READ_ONLY));
    }

    #[test]
    fn unknown_tool_is_invalid_input() {
        let ctx = CallContext {
            call_id: "c".into(),
            workspace: None,
            session_id: None,
        };
        match call(&[read_tool()], "nope", "{}", ctx) {
            Err(WitToolError::InvalidInput(m)) => assert!(m.contains("offers: read")),
            _ => panic!("expected invalid input"),
        }
    }
}
