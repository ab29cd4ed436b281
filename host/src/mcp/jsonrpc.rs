//! JSON-RPC 2.0 messages as MCP exchanges them: requests, notifications and
//! responses, read from one frame (a stdio line, an HTTP body) and written
//! back as JSON. Batches are not part of the MCP revisions capstan speaks
//! and are refused. Nothing here knows a method; the server and, later, the
//! client share it.

use serde_json::{Map, Value, json};

/// The standard JSON-RPC error codes.
pub mod code {
    /// The frame is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON is not a valid request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The parameters do not fit the method.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The server failed.
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The error code.
    pub code: i64,
    /// What went wrong, for a person.
    pub message: String,
    /// More, for a program.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with `code` and `message` and no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same, carrying `data`.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    fn to_json(&self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }

    fn from_json(value: &Value) -> Self {
        Self {
            code: value.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: value
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            data: value.get("data").cloned(),
        }
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

/// One JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A call that expects a response with the same id.
    Request {
        /// A string or a number.
        id: Value,
        /// The method.
        method: String,
        /// Its parameters (an object), if any.
        params: Option<Value>,
    },
    /// A call that expects nothing back.
    Notification {
        /// The method.
        method: String,
        /// Its parameters (an object), if any.
        params: Option<Value>,
    },
    /// The answer to a request.
    Response {
        /// The request's id (null when the request could not be read).
        id: Value,
        /// The result, or the error.
        outcome: Result<Value, RpcError>,
    },
}

/// A frame that is not a message, with the id to answer it under when one
/// could be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Unreadable {
    /// The id of the request, or null.
    pub id: Value,
    /// Why it is not a message.
    pub error: RpcError,
}

impl Message {
    /// A successful response.
    pub fn result(id: Value, result: Value) -> Self {
        Self::Response {
            id,
            outcome: Ok(result),
        }
    }

    /// An error response.
    pub fn error(id: Value, error: RpcError) -> Self {
        Self::Response {
            id,
            outcome: Err(error),
        }
    }

    /// A notification.
    pub fn notification(method: &str, params: Value) -> Self {
        Self::Notification {
            method: method.to_string(),
            params: Some(params),
        }
    }

    /// Reads one message from a frame's bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self, Unreadable> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| Unreadable {
            id: Value::Null,
            error: RpcError::new(code::PARSE_ERROR, format!("the message is not JSON: {e}")),
        })?;
        Self::from_json(value)
    }

    /// Reads one message from parsed JSON.
    pub fn from_json(value: Value) -> Result<Self, Unreadable> {
        let invalid = |id: Value, message: &str| Unreadable {
            id,
            error: RpcError::new(code::INVALID_REQUEST, message),
        };
        let Value::Object(mut fields) = value else {
            let message = if value.is_array() {
                "batches are not supported: send one JSON-RPC message at a time"
            } else {
                "a JSON-RPC message must be a JSON object"
            };
            return Err(invalid(Value::Null, message));
        };
        let id = fields.remove("id");
        let valid_id = match &id {
            Some(Value::String(_)) => true,
            Some(Value::Number(n)) => n.is_i64() || n.is_u64(),
            _ => false,
        };
        if fields.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            let id = id.filter(|_| valid_id).unwrap_or(Value::Null);
            return Err(invalid(id, "the message must carry \"jsonrpc\": \"2.0\""));
        }
        let params = fields.remove("params");
        if params.as_ref().is_some_and(|p| !p.is_object()) {
            let id = id.filter(|_| valid_id).unwrap_or(Value::Null);
            return Err(invalid(id, "\"params\" must be an object"));
        }
        if let Some(method) = fields.remove("method") {
            let Value::String(method) = method else {
                let id = id.filter(|_| valid_id).unwrap_or(Value::Null);
                return Err(invalid(id, "\"method\" must be a string"));
            };
            return match id {
                None => Ok(Self::Notification { method, params }),
                Some(id) if valid_id => Ok(Self::Request { id, method, params }),
                Some(_) => Err(invalid(
                    Value::Null,
                    "a request's \"id\" must be a string or an integer",
                )),
            };
        }
        let Some(id) = id else {
            return Err(invalid(
                Value::Null,
                "the message has neither a method nor an id",
            ));
        };
        if let Some(error) = fields.remove("error") {
            return Ok(Self::Response {
                id,
                outcome: Err(RpcError::from_json(&error)),
            });
        }
        match fields.remove("result") {
            Some(result) => Ok(Self::Response {
                id,
                outcome: Ok(result),
            }),
            None => Err(invalid(
                Value::Null,
                "a response must carry \"result\" or \"error\"",
            )),
        }
    }

    /// The message as JSON.
    pub fn to_json(&self) -> Value {
        let mut fields = Map::new();
        fields.insert("jsonrpc".into(), Value::from("2.0"));
        match self {
            Self::Request { id, method, params } => {
                fields.insert("id".into(), id.clone());
                fields.insert("method".into(), Value::from(method.as_str()));
                if let Some(params) = params {
                    fields.insert("params".into(), params.clone());
                }
            }
            Self::Notification { method, params } => {
                fields.insert("method".into(), Value::from(method.as_str()));
                if let Some(params) = params {
                    fields.insert("params".into(), params.clone());
                }
            }
            Self::Response { id, outcome } => {
                fields.insert("id".into(), id.clone());
                match outcome {
                    Ok(result) => fields.insert("result".into(), result.clone()),
                    Err(error) => fields.insert("error".into(), error.to_json()),
                };
            }
        }
        Value::Object(fields)
    }

    /// The message as one line of JSON with its newline: the stdio frame.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(&self.to_json()).unwrap_or_default();
        line.push(b'\n');
        line
    }

    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match self {
            Self::Request { method, .. } | Self::Notification { method, .. } => Some(method),
            Self::Response { .. } => None,
        }
    }

    /// The parameters of a request or notification.
    pub fn params(&self) -> Option<&Value> {
        match self {
            Self::Request { params, .. } | Self::Notification { params, .. } => params.as_ref(),
            Self::Response { .. } => None,
        }
    }
}

/// A request id as a map key: the id's JSON text, so `1` and `"1"` differ
/// as JSON-RPC says they do.
pub fn id_key(id: &Value) -> String {
    id.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_requests_notifications_and_responses() {
        let request = Message::parse(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).unwrap();
        assert_eq!(
            request,
            Message::Request {
                id: json!(7),
                method: "ping".into(),
                params: None
            }
        );
        let note = Message::parse(
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}"#,
        )
        .unwrap();
        assert_eq!(note.method(), Some("notifications/cancelled"));
        assert!(matches!(note, Message::Notification { .. }));
        let response =
            Message::parse(br#"{"jsonrpc":"2.0","id":"s1","result":{"roots":[]}}"#).unwrap();
        assert_eq!(response, Message::result(json!("s1"), json!({"roots": []})));
        let error =
            Message::parse(br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}"#)
                .unwrap();
        assert_eq!(
            error,
            Message::error(json!(3), RpcError::new(code::METHOD_NOT_FOUND, "no"))
        );
    }

    #[test]
    fn refuses_what_is_not_a_message_with_the_id_when_known() {
        let cases: [(&[u8], i64, Value); 6] = [
            (b"{not json", code::PARSE_ERROR, Value::Null),
            (b"[]", code::INVALID_REQUEST, Value::Null),
            (br#"{"id":1,"method":"x"}"#, code::INVALID_REQUEST, json!(1)),
            (
                br#"{"jsonrpc":"2.0","id":2,"method":"x","params":[1]}"#,
                code::INVALID_REQUEST,
                json!(2),
            ),
            (
                br#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#,
                code::INVALID_REQUEST,
                Value::Null,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1}"#,
                code::INVALID_REQUEST,
                Value::Null,
            ),
        ];
        for (bytes, expected, id) in cases {
            let err = Message::parse(bytes).unwrap_err();
            assert_eq!(
                err.error.code,
                expected,
                "{}",
                String::from_utf8_lossy(bytes)
            );
            assert_eq!(err.id, id, "{}", String::from_utf8_lossy(bytes));
        }
    }

    #[test]
    fn writes_one_line_that_reads_back_the_same() {
        let message = Message::error(
            json!("x\ny"),
            RpcError::new(code::INVALID_PARAMS, "bad\nthing").with_data(json!({"k": 1})),
        );
        let line = message.to_line();
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
        assert_eq!(Message::parse(&line).unwrap(), message);
        assert_ne!(id_key(&json!(1)), id_key(&json!("1")));
    }
}
