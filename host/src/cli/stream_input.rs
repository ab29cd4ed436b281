//! `--input-format stream-json`: prompts as Claude Code's SDK sends them,
//! one JSON user message per line on stdin,
//! `{"type":"user","message":{"role":"user","content":"..."}}`, where the
//! content is a string or a list of `text` blocks. Lines are read as they
//! come, so a driver can send its next message after reading a result.
//!
//! The SDK's control requests are answered at once, on the reading
//! thread, even while a prompt runs:
//! `{"type":"control_request","request_id":ID,"request":{"subtype":...}}`
//! gets `{"type":"control_response","response":{"subtype":"success",
//! "request_id":ID,"response":{...}}}`, or `"subtype":"error"` with an
//! `error` for what capstan does not do. `interrupt` stops the running
//! turn (the session goes on with the next message); `initialize`, like
//! the settings, is applied between prompts ([`super::driver_init`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::driver_questions::Delivery;
use crate::agent::Interrupt;

/// One line of input: a prompt, or why the line is not one.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// A user message's text.
    Prompt(String),
    /// A control request that changes the session (`set_permission_mode`,
    /// `set_model`): applied between prompts, as Claude Code applies it,
    /// and answered then.
    Setting {
        /// The request's id, for its response.
        request_id: String,
        /// The `request` object.
        request: Value,
    },
    /// A line that is not a user message, with its number (from 1).
    Malformed {
        /// The line's number.
        line: usize,
        /// What is wrong with it.
        error: String,
    },
}

/// What answers a driver's control requests.
pub struct Control {
    /// The session's interrupt, raised by `interrupt`.
    pub interrupt: Interrupt,
    /// Set when the driver raised the interrupt (rather than Ctrl-C): the
    /// session then goes on with the next message.
    pub by_driver: Arc<AtomicBool>,
    /// capstan's own questions to the driver, which its
    /// `control_response` lines answer.
    pub questions: super::driver_questions::DriverQuestions,
    /// What answers the requests about MCP servers, if the session has
    /// them ([`super::driver_requests`]).
    pub requests: Option<super::driver_requests::DriverRequests>,
}

impl Control {
    /// The answer to `line` when it is a control request (acting on it),
    /// else none.
    pub fn answer(&self, line: &str) -> Option<Value> {
        let value: Value = serde_json::from_str(line.trim()).ok()?;
        if value.get("type").and_then(Value::as_str) != Some("control_request") {
            return None;
        }
        let id = value.get("request_id").cloned().unwrap_or(Value::Null);
        let error = |message: String| {
            json!({
                "type": "control_response",
                "response": {"subtype": "error", "request_id": id, "error": message},
            })
        };
        if !id.is_string() {
            return Some(error(
                "a control request needs a string `request_id`".to_string(),
            ));
        }
        let request = value.get("request").unwrap_or(&Value::Null);
        let body = match request.get("subtype").and_then(Value::as_str) {
            Some("interrupt") => {
                self.by_driver.store(true, Ordering::SeqCst);
                self.interrupt.raise();
                json!({})
            }
            // Answered once applied, between prompts.
            Some(SET_PERMISSION_MODE | SET_MODEL | INITIALIZE) => return None,
            Some(other) if super::driver_requests::BETWEEN_PROMPTS.contains(&other) => {
                return None;
            }
            Some(other) => {
                use super::driver_requests::Handled;
                match self
                    .requests
                    .as_ref()
                    .map(|r| r.answer(other, request, &id))
                {
                    Some(Handled::Now(Ok(body))) => body,
                    Some(Handled::Now(Err(message))) => return Some(error(message)),
                    // Null: the answer comes later, from another task.
                    Some(Handled::Later) => return Some(Value::Null),
                    Some(Handled::NotMine) | None => {
                        return Some(error(format!(
                            "the control request `{other}` is not supported; capstan answers `{INITIALIZE}`, `interrupt`, `{SET_PERMISSION_MODE}`, `{SET_MODEL}`, `mcp_status`, `mcp_reconnect`, `mcp_toggle` and `get_context_usage`"
                        )));
                    }
                }
            }
            None => {
                return Some(error(
                    "the control request has no `request.subtype`".to_string(),
                ));
            }
        };
        Some(json!({
            "type": "control_response",
            "response": {"subtype": "success", "request_id": id, "response": body},
        }))
    }
}

/// Reads stdin on its own thread; each non-blank line arrives as a
/// [`Line`], and the channel closes at the end of the input (or when it
/// cannot be read, after a last [`Line::Malformed`] saying why). Control
/// requests are answered by `control` on that thread, at once.
pub fn read_stdin(control: Control) -> mpsc::UnboundedReceiver<Line> {
    let (sender, receiver) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut number = 0;
        loop {
            let mut text = String::new();
            number += 1;
            match stdin.read_line(&mut text) {
                Ok(0) => break,
                Ok(_) if text.trim().is_empty() => continue,
                Ok(_) => {
                    if let Ok(value) = serde_json::from_str::<Value>(text.trim()) {
                        match control.questions.deliver(&value) {
                            Delivery::NotAResponse => {}
                            Delivery::Delivered => continue,
                            Delivery::Unexpected(error) => {
                                if sender
                                    .send(Line::Malformed {
                                        line: number,
                                        error,
                                    })
                                    .is_err()
                                {
                                    break;
                                }
                                continue;
                            }
                        }
                    }
                    if let Some(answer) = control.answer(&text) {
                        // Null: the answer comes later, from another task.
                        if !answer.is_null() {
                            super::render::StreamJsonFrontend::emit(&answer);
                        }
                        continue;
                    }
                    if sender.send(parse_line(number, &text)).is_err() {
                        break;
                    }
                }
                Err(e) => {
                    let _ = sender.send(Line::Malformed {
                        line: number,
                        error: format!("cannot read stdin: {e}"),
                    });
                    break;
                }
            }
        }
        control.questions.close();
    });
    receiver
}

/// The control request that changes the permission mode.
const SET_PERMISSION_MODE: &str = "set_permission_mode";
/// The control request that changes the model.
const SET_MODEL: &str = "set_model";
/// The driver's first control request.
const INITIALIZE: &str = "initialize";

/// Reads line `number`.
pub fn parse_line(number: usize, text: &str) -> Line {
    if let Ok(value) = serde_json::from_str::<Value>(text.trim())
        && value.get("type").and_then(Value::as_str) == Some("control_request")
        && let Some(request_id) = value.get("request_id").and_then(Value::as_str)
    {
        let request = value.get("request").cloned().unwrap_or(Value::Null);
        let subtype = request.get("subtype").and_then(Value::as_str);
        if matches!(subtype, Some(SET_PERMISSION_MODE | SET_MODEL | INITIALIZE))
            || subtype.is_some_and(|s| super::driver_requests::BETWEEN_PROMPTS.contains(&s))
        {
            return Line::Setting {
                request_id: request_id.to_string(),
                request,
            };
        }
    }
    match prompt_of(text) {
        Ok(prompt) => Line::Prompt(prompt),
        Err(error) => Line::Malformed {
            line: number,
            error,
        },
    }
}

fn prompt_of(text: &str) -> Result<String, String> {
    const SHAPE: &str =
        r#"each line must be {"type":"user","message":{"role":"user","content":"..."}}"#;
    let value: Value =
        serde_json::from_str(text.trim()).map_err(|e| format!("not JSON ({e}); {SHAPE}"))?;
    match value.get("type").and_then(Value::as_str) {
        Some("user") => {}
        Some(other) => {
            return Err(format!(
                "a message of type `{other}` cannot be taken; only user messages are read; {SHAPE}"
            ));
        }
        None => return Err(format!("no `type`; {SHAPE}")),
    }
    let message = value
        .get("message")
        .ok_or_else(|| format!("no `message`; {SHAPE}"))?;
    if let Some(role) = message.get("role").and_then(Value::as_str)
        && role != "user"
    {
        return Err(format!("the message's role is `{role}`, not user; {SHAPE}"));
    }
    let prompt = match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::new();
            for block in blocks {
                match (
                    block.get("type").and_then(Value::as_str),
                    block.get("text").and_then(Value::as_str),
                ) {
                    (Some("text"), Some(text)) => texts.push(text),
                    (Some("image"), _) => return Err(image_refused(block)),
                    (kind, _) => {
                        return Err(format!(
                            "a content block of type `{}` cannot be taken; only text blocks are read",
                            kind.unwrap_or("?")
                        ));
                    }
                }
            }
            texts.join("\n\n")
        }
        _ => {
            return Err(format!(
                "the message's `content` must be a string or a list of text blocks; {SHAPE}"
            ));
        }
    };
    if prompt.trim().is_empty() {
        return Err("the message's text is empty".into());
    }
    Ok(prompt)
}

/// Why an `image` block is not taken: a malformed one says what is wrong
/// with it; a well-formed one that the model layer cannot carry yet.
fn image_refused(block: &Value) -> String {
    const SHAPE: &str = r#"an image block is {"type":"image","source":{"type":"base64","media_type":"image/png","data":"..."}}"#;
    let source = block.get("source");
    let field = |name: &str| {
        source
            .and_then(|s| s.get(name))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    if field("type") != "base64" {
        return format!("the image block's `source.type` must be `base64`; {SHAPE}");
    }
    let media_type = field("media_type");
    if !["image/png", "image/jpeg", "image/gif", "image/webp"].contains(&media_type) {
        return format!(
            "the image block's `source.media_type` must be image/png, image/jpeg, image/gif or image/webp, not `{media_type}`"
        );
    }
    if field("data").is_empty() {
        return format!("the image block has no `source.data`; {SHAPE}");
    }
    "image blocks cannot be taken yet: capstan passes only text to the model; send the message without the image (a text block may name the image's file in the workspace)".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_messages_become_prompts() {
        let line = r#"{"type":"user","message":{"role":"user","content":"hi"},"session_id":"","parent_tool_use_id":null}"#;
        assert_eq!(parse_line(1, line), Line::Prompt("hi".into()));
        let blocks = r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}"#;
        assert_eq!(parse_line(2, blocks), Line::Prompt("a\n\nb".into()));
    }

    #[test]
    fn other_lines_are_malformed_with_their_number() {
        for (text, needle) in [
            ("{not json", "not JSON"),
            (r#"{"type":"control_response"}"#, "control_response"),
            (r#"{"type":"user"}"#, "no `message`"),
            (
                r#"{"type":"user","message":{"role":"user","content":5}}"#,
                "content",
            ),
            (
                r#"{"type":"user","message":{"role":"user","content":[{"type":"image"}]}}"#,
                "source.type",
            ),
            (
                r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"see"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}}"#,
                "only text to the model",
            ),
            (
                r#"{"type":"user","message":{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"text/html","data":"eA=="}}]}}"#,
                "text/html",
            ),
        ] {
            match parse_line(7, text) {
                Line::Malformed { line, error } => {
                    assert_eq!(line, 7);
                    assert!(error.contains(needle), "{error}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    fn control() -> Control {
        Control {
            interrupt: Interrupt::new(),
            by_driver: Arc::default(),
            questions: Default::default(),
            requests: None,
        }
    }

    #[test]
    fn control_requests_are_answered_and_act() {
        let control = control();
        assert_eq!(control.answer(r#"{"type":"user"}"#), None);
        let answer = control
            .answer(
                r#"{"type":"control_request","request_id":"r1","request":{"subtype":"interrupt"}}"#,
            )
            .unwrap();
        assert_eq!(
            answer,
            json!({"type":"control_response","response":{"subtype":"success","request_id":"r1","response":{}}})
        );
        assert!(control.interrupt.is_raised());
        assert!(control.by_driver.load(Ordering::SeqCst));
        // initialize is applied by the prompt loop.
        let init = r#"{"type":"control_request","request_id":"r2","request":{"subtype":"initialize","hooks":null}}"#;
        assert_eq!(control.answer(init), None);
        assert!(matches!(parse_line(2, init), Line::Setting { .. }));
        for (line, needle) in [
            (
                r#"{"type":"control_request","request_id":"r3","request":{"subtype":"frobnicate"}}"#,
                "frobnicate",
            ),
            (
                r#"{"type":"control_request","request_id":"r4","request":{}}"#,
                "subtype",
            ),
            (
                r#"{"type":"control_request","request":{"subtype":"interrupt"}}"#,
                "request_id",
            ),
        ] {
            let answer = control.answer(line).unwrap();
            assert_eq!(answer["type"], "control_response");
            assert_eq!(answer["response"]["subtype"], "error", "{line}");
            let error = answer["response"]["error"].as_str().unwrap();
            assert!(error.contains(needle), "{error}");
        }
        // Settings are left to the prompt loop, which applies and answers
        // them between prompts.
        let setting = r#"{"type":"control_request","request_id":"r6","request":{"subtype":"set_permission_mode","mode":"plan"}}"#;
        assert_eq!(control.answer(setting), None);
        assert_eq!(
            parse_line(3, setting),
            Line::Setting {
                request_id: "r6".into(),
                request: json!({"subtype": "set_permission_mode", "mode": "plan"}),
            }
        );
    }
}
