//! Checking a hook's modified tool input against the tool's JSON Schema
//! before the call runs.
//!
//! Covers the keywords tool schemas use (those `schemars` writes and most
//! hand-written ones): `type` (one or a list), `properties`, `required`,
//! `additionalProperties`, `items`, `enum`, `const`, `minimum`, `maximum`,
//! `minLength`, `maxLength`, `minItems`, `maxItems`, `anyOf`, `oneOf`,
//! `allOf`, `not` and local `$ref`s (`#/$defs/...`, `#/definitions/...`).
//! Other keywords are not checked here; the tool checks its input too.

use serde_json::Value;

/// Checks `value` against `schema`; the error names the field (`/path`)
/// and what is wrong.
pub fn validate(value: &Value, schema: &Value) -> Result<(), String> {
    check(value, schema, schema, "", 0)
}

const MAX_DEPTH: usize = 64;

fn check(
    value: &Value,
    schema: &Value,
    root: &Value,
    at: &str,
    depth: usize,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("{} nests too deeply", place(at)));
    }
    let Some(schema) = schema.as_object() else {
        return match schema {
            Value::Bool(false) => Err(format!("{} is not allowed", place(at))),
            _ => Ok(()),
        };
    };
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let target = resolve(root, reference).ok_or_else(|| {
            format!("the schema refers to `{reference}`, which it does not define")
        })?;
        check(value, target, root, at, depth + 1)?;
    }
    if let Some(types) = schema.get("type") {
        let names: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.is_empty() && !names.iter().any(|t| is_type(value, t)) {
            return Err(format!(
                "{} must be {}, not {}",
                place(at),
                names.join(" or "),
                type_of(value)
            ));
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        return Err(format!(
            "{} must be one of {}",
            place(at),
            Value::Array(options.clone())
        ));
    }
    if let Some(expected) = schema.get("const")
        && expected != value
    {
        return Err(format!("{} must be {expected}", place(at)));
    }
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            if let Some(required) = schema.get("required").and_then(Value::as_array) {
                for name in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(name) {
                        return Err(format!("{} is required", place(&format!("{at}/{name}"))));
                    }
                }
            }
            for (key, item) in map {
                let here = format!("{at}/{key}");
                match properties.and_then(|p| p.get(key)) {
                    Some(sub) => check(item, sub, root, &here, depth + 1)?,
                    None => match schema.get("additionalProperties") {
                        Some(Value::Bool(false)) => {
                            return Err(format!("{} is not a field this tool takes", place(&here)));
                        }
                        Some(sub @ Value::Object(_)) => check(item, sub, root, &here, depth + 1)?,
                        _ => {}
                    },
                }
            }
        }
        Value::Array(items) => {
            let len = items.len() as u64;
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && len < min
            {
                return Err(format!("{} needs at least {min} items", place(at)));
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && len > max
            {
                return Err(format!("{} takes at most {max} items", place(at)));
            }
            if let Some(sub) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item, sub, root, &format!("{at}/{i}"), depth + 1)?;
                }
            }
        }
        Value::String(text) => {
            let len = text.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && len < min
            {
                return Err(format!("{} must be at least {min} characters", place(at)));
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && len > max
            {
                return Err(format!("{} must be at most {max} characters", place(at)));
            }
        }
        Value::Number(n) => {
            let n = n.as_f64().unwrap_or(0.0);
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
                && n < min
            {
                return Err(format!("{} must be at least {min}", place(at)));
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
                && n > max
            {
                return Err(format!("{} must be at most {max}", place(at)));
            }
        }
        _ => {}
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for sub in all {
            check(value, sub, root, at, depth + 1)?;
        }
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array)
        && !any
            .iter()
            .any(|sub| check(value, sub, root, at, depth + 1).is_ok())
    {
        return Err(format!(
            "{} matches none of the forms the schema allows",
            place(at)
        ));
    }
    if let Some(one) = schema.get("oneOf").and_then(Value::as_array) {
        let matching = one
            .iter()
            .filter(|sub| check(value, sub, root, at, depth + 1).is_ok())
            .count();
        if matching != 1 {
            return Err(format!(
                "{} must match exactly one of the forms the schema allows ({matching} match)",
                place(at)
            ));
        }
    }
    if let Some(not) = schema.get("not")
        && check(value, not, root, at, depth + 1).is_ok()
    {
        return Err(format!("{} has a form the schema forbids", place(at)));
    }
    Ok(())
}

fn place(at: &str) -> String {
    if at.is_empty() {
        "the input".to_string()
    } else {
        format!("`{at}`")
    }
}

fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

fn is_type(value: &Value, name: &str) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => true,
    }
}

fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "an object",
        Value::Array(_) => "an array",
        Value::String(_) => "a string",
        Value::Bool(_) => "a boolean",
        Value::Null => "null",
        Value::Number(_) => "a number",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1},
                "content": {"type": "string"},
                "mode": {"$ref": "#/$defs/Mode"},
                "limit": {"type": ["integer", "null"], "minimum": 1}
            },
            "required": ["path", "content"],
            "additionalProperties": false,
            "$defs": {"Mode": {"enum": ["create", "overwrite"]}}
        })
    }

    #[test]
    fn valid_inputs_pass() {
        let schema = write_schema();
        validate(&json!({"path": "a", "content": "x"}), &schema).unwrap();
        validate(
            &json!({"path": "a", "content": "x", "mode": "create", "limit": null}),
            &schema,
        )
        .unwrap();
    }

    #[test]
    fn invalid_inputs_name_the_field() {
        let schema = write_schema();
        let cases = [
            (json!({"path": "a"}), "`/content` is required"),
            (json!({"path": 3, "content": "x"}), "`/path` must be string"),
            (
                json!({"path": "a", "content": "x", "extra": 1}),
                "`/extra` is not a field",
            ),
            (
                json!({"path": "a", "content": "x", "mode": "append"}),
                "`/mode` must be one of",
            ),
            (json!({"path": "", "content": "x"}), "at least 1 characters"),
            (
                json!({"path": "a", "content": "x", "limit": 0}),
                "at least 1",
            ),
            (json!(["not", "an", "object"]), "the input must be object"),
        ];
        for (input, expected) in cases {
            let err = validate(&input, &schema).unwrap_err();
            assert!(err.contains(expected), "{input}: {err}");
        }
    }
}
