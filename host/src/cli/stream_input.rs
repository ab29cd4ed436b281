//! `--input-format stream-json`: prompts as Claude Code's SDK sends them,
//! one JSON user message per line on stdin,
//! `{"type":"user","message":{"role":"user","content":"..."}}`, where the
//! content is a string or a list of `text` blocks. Lines are read as they
//! come, so a driver can send its next message after reading a result.

use serde_json::Value;
use tokio::sync::mpsc;

/// One line of input: a prompt, or why the line is not one.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// A user message's text.
    Prompt(String),
    /// A line that is not a user message, with its number (from 1).
    Malformed {
        /// The line's number.
        line: usize,
        /// What is wrong with it.
        error: String,
    },
}

/// Reads stdin on its own thread; each non-blank line arrives as a
/// [`Line`], and the channel closes at the end of the input (or when it
/// cannot be read, after a last [`Line::Malformed`] saying why).
pub fn read_stdin() -> mpsc::UnboundedReceiver<Line> {
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
    });
    receiver
}

/// Reads line `number`.
pub fn parse_line(number: usize, text: &str) -> Line {
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
            (r#"{"type":"control_request"}"#, "control_request"),
            (r#"{"type":"user"}"#, "no `message`"),
            (
                r#"{"type":"user","message":{"role":"user","content":5}}"#,
                "content",
            ),
            (
                r#"{"type":"user","message":{"role":"user","content":[{"type":"image"}]}}"#,
                "image",
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
}
