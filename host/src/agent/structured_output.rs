//! Structured output (`--json-schema`), as Claude Code gives it: the model
//! is offered a `StructuredOutput` tool whose input schema is the schema
//! asked for; a call whose input fits the schema ends the turn, and that
//! input is the turn's structured output. A call that does not fit gets an
//! error result saying what is wrong, so the model can try again; a model
//! that ends its turn without calling the tool is told once to call it.

use serde_json::Value;

use crate::model::ToolDef;

/// The tool's name, as Claude Code names it.
pub const TOOL: &str = "StructuredOutput";

/// The tool result of a call that fit the schema.
pub const ACCEPTED: &str = "Structured output provided successfully";

/// What the model is told when it ends its turn without calling the tool.
pub const REMINDER: &str =
    "You MUST call the StructuredOutput tool to complete this request. Call this tool now.";

/// The tool's definition for `schema`.
pub fn tool_def(schema: &Value) -> ToolDef {
    ToolDef {
        name: TOOL.to_string(),
        description: "Use this tool to return your final response in the requested structured format. You MUST call this tool exactly once at the end of your response to provide the structured output.".to_string(),
        input_schema: schema.clone(),
    }
}

/// Checks that `schema` is one capstan can hold answers to: a JSON object
/// whose `type` (if any) is `object`, as a tool's input must be.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    let Some(object) = schema.as_object() else {
        return Err(
            "the schema must be a JSON object, such as {\"type\":\"object\",\"properties\":{...}}"
                .into(),
        );
    };
    match object.get("type") {
        None => Ok(()),
        Some(Value::String(kind)) if kind == "object" => Ok(()),
        Some(other) => Err(format!(
            "the schema's `type` is {other}; the structured output is a tool's input, so it must be \"object\""
        )),
    }
}

/// Whether `value` fits `schema`, checked as a hook's changed tool input
/// is ([`crate::hooks::schema`]: types, properties, required fields,
/// enums, bounds, `anyOf`/`oneOf`/`allOf`, local `$ref`s); the error says
/// where and why.
pub fn fits(schema: &Value, value: &Value) -> Result<(), String> {
    crate::hooks::schema::validate(value, schema)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_checked_against_the_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer", "minimum": 0},
                "tags": {"type": "array", "items": {"type": "string"}},
                "kind": {"enum": ["a", "b"]},
            },
            "required": ["n"],
            "additionalProperties": false,
        });
        assert_eq!(
            fits(&schema, &json!({"n": 3, "tags": ["x"], "kind": "a"})),
            Ok(())
        );
        for (value, needle) in [
            (json!({}), "`/n` is required"),
            (json!({"n": "3"}), "`/n` must be integer"),
            (json!({"n": -1}), "at least 0"),
            (json!({"n": 1, "tags": [1]}), "`/tags/0`"),
            (json!({"n": 1, "kind": "c"}), "one of"),
            (json!({"n": 1, "extra": true}), "`/extra`"),
            (json!([1]), "must be object"),
        ] {
            let why = fits(&schema, &value).unwrap_err();
            assert!(why.contains(needle), "{value}: {why}");
        }
    }

    #[test]
    fn only_object_schemas_are_taken() {
        assert!(check_schema(&json!({"type": "object"})).is_ok());
        assert!(check_schema(&json!({"properties": {}})).is_ok());
        assert!(check_schema(&json!({"type": "string"})).is_err());
        assert!(check_schema(&json!([1])).is_err());
    }
}
