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

/// Whether `value` fits `schema`: the keywords `type`, `properties`,
/// `required`, `additionalProperties: false`, `items`, `enum`, `const`,
/// `minimum`/`maximum`, `minLength`/`maxLength` and `minItems`/`maxItems`
/// are checked; others are taken as fitting. The error says where and why.
pub fn fits(schema: &Value, value: &Value) -> Result<(), String> {
    check(schema, value, "$")
}

fn check(schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    let Some(schema) = schema.as_object() else {
        return Ok(());
    };
    if let Some(kinds) = schema.get("type") {
        let kinds: Vec<&str> = match kinds {
            Value::String(kind) => vec![kind.as_str()],
            Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !kinds.is_empty() && !kinds.iter().any(|kind| is_of(value, kind)) {
            return Err(format!(
                "{at} must be of type {}, not {}",
                kinds.join(" or "),
                type_of(value)
            ));
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        return Err(format!(
            "{at} must be one of {}",
            Value::Array(allowed.clone())
        ));
    }
    if let Some(expected) = schema.get("const")
        && expected != value
    {
        return Err(format!("{at} must be {expected}"));
    }
    if let Some(number) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && number < min
        {
            return Err(format!("{at} must be at least {min}"));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && number > max
        {
            return Err(format!("{at} must be at most {max}"));
        }
    }
    if let Some(text) = value.as_str() {
        let length = text.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && length < min
        {
            return Err(format!("{at} must have at least {min} characters"));
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && length > max
        {
            return Err(format!("{at} must have at most {max} characters"));
        }
    }
    if let Some(object) = value.as_object() {
        let properties = schema.get("properties").and_then(Value::as_object);
        for name in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !object.contains_key(name) {
                return Err(format!("{at} is missing the required property `{name}`"));
            }
        }
        for (name, item) in object {
            match properties.and_then(|p| p.get(name)) {
                Some(property) => check(property, item, &format!("{at}.{name}"))?,
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        return Err(format!(
                            "{at} has the property `{name}`, which the schema does not allow"
                        ));
                    }
                    Some(extra @ Value::Object(_)) => check(extra, item, &format!("{at}.{name}"))?,
                    _ => {}
                },
            }
        }
    }
    if let Some(items) = value.as_array() {
        let count = items.len() as u64;
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && count < min
        {
            return Err(format!("{at} must have at least {min} items"));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && count > max
        {
            return Err(format!("{at} must have at most {max} items"));
        }
        if let Some(item_schema) = schema.get("items") {
            for (index, item) in items.iter().enumerate() {
                check(item_schema, item, &format!("{at}[{index}]"))?;
            }
        }
    }
    Ok(())
}

fn is_of(value: &Value, kind: &str) -> bool {
    match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|n| n.fract() == 0.0)
        }
        _ => true,
    }
}

fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
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
            (json!({}), "missing the required property `n`"),
            (json!({"n": "3"}), "$.n must be of type integer"),
            (json!({"n": -1}), "at least 0"),
            (json!({"n": 1, "tags": [1]}), "$.tags[0]"),
            (json!({"n": 1, "kind": "c"}), "one of"),
            (json!({"n": 1, "extra": true}), "`extra`"),
            (json!([1]), "type object"),
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
