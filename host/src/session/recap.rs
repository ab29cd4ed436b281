//! What a resumed session shows first: the last prompt, what was done
//! (the tool calls, the last answer) and the files changed, read from the
//! conversation alone — no model is asked.

use std::collections::{BTreeMap, HashMap};

use crate::model::{Block, Message, Role};

/// How many characters of a prompt or answer a recap shows.
const LINE_CHARS: usize = 100;

/// How many changed files a recap names.
const MAX_FILES: usize = 8;

/// A short account of a conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recap {
    /// The user's last prompt, on one line, cut.
    pub last_prompt: Option<String>,
    /// The first line of the model's last answer, cut.
    pub last_answer: Option<String>,
    /// How many times each tool was called, by the model's name for it.
    pub tool_calls: BTreeMap<String, usize>,
    /// The files changed by calls that succeeded, in the order first
    /// changed.
    pub files_changed: Vec<String>,
    /// How many messages the conversation has.
    pub messages: usize,
}

impl Recap {
    /// The recap as lines to show, each starting with two spaces.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(prompt) = &self.last_prompt {
            lines.push(format!("  last prompt: {prompt}"));
        }
        if !self.tool_calls.is_empty() {
            let total: usize = self.tool_calls.values().sum();
            let each: Vec<String> = self
                .tool_calls
                .iter()
                .map(|(tool, n)| format!("{tool} ×{n}"))
                .collect();
            lines.push(format!("  done: {total} tool calls ({})", each.join(", ")));
        }
        if let Some(answer) = &self.last_answer {
            lines.push(format!("  last answer: {answer}"));
        }
        if !self.files_changed.is_empty() {
            let mut files =
                self.files_changed[..self.files_changed.len().min(MAX_FILES)].join(", ");
            if self.files_changed.len() > MAX_FILES {
                files.push_str(&format!(
                    " and {} more",
                    self.files_changed.len() - MAX_FILES
                ));
            }
            lines.push(format!("  files changed: {files}"));
        }
        if lines.is_empty() {
            lines.push("  (nothing was said yet)".to_string());
        }
        lines
    }
}

/// The recap of `messages`; `tool` gives, for the name the model calls a
/// tool by, the name to show and whether it changes the file its input's
/// `path` names.
pub fn recap(messages: &[Message], tool: impl Fn(&str) -> (String, bool)) -> Recap {
    let failed: HashMap<&str, bool> = messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|block| match block {
            Block::ToolResult {
                tool_use_id,
                is_error,
                ..
            } => Some((tool_use_id.as_str(), *is_error)),
            _ => None,
        })
        .collect();
    let mut recap = Recap {
        messages: messages.len(),
        ..Recap::default()
    };
    for message in messages {
        let first_text = message.content.iter().find_map(|block| match block {
            Block::Text { text } if !text.trim().is_empty() => Some(text.as_str()),
            _ => None,
        });
        match message.role {
            Role::User => {
                if let Some(text) = first_text {
                    recap.last_prompt = Some(one_line(text));
                }
            }
            Role::Assistant => {
                if let Some(text) = first_text {
                    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or(text);
                    recap.last_answer = Some(one_line(first));
                }
                for block in &message.content {
                    let Block::ToolUse { id, name, input } = block else {
                        continue;
                    };
                    let (shown, writes) = tool(name);
                    *recap.tool_calls.entry(shown).or_default() += 1;
                    let succeeded = failed.get(id.as_str()) == Some(&false);
                    let path = input
                        .get("path")
                        .or_else(|| input.get("file_path"))
                        .and_then(|p| p.as_str());
                    if let Some(path) = path
                        && succeeded
                        && writes
                        && !recap.files_changed.iter().any(|f| f == path)
                    {
                        recap.files_changed.push(path.to_string());
                    }
                }
            }
        }
    }
    recap
}

/// `text` on one line, cut to [`LINE_CHARS`] characters.
fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= LINE_CHARS {
        return line;
    }
    let mut cut: String = line.chars().take(LINE_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(role: Role, text: &str) -> Message {
        Message {
            role,
            content: vec![Block::Text { text: text.into() }],
        }
    }

    fn call(id: &str, name: &str, path: &str) -> Block {
        Block::ToolUse {
            id: id.into(),
            name: name.into(),
            input: json!({ "path": path }),
        }
    }

    fn result(id: &str, is_error: bool) -> Block {
        Block::ToolResult {
            tool_use_id: id.into(),
            content: "ok".into(),
            is_error,
            images: Vec::new(),
        }
    }

    #[test]
    fn recaps_prompt_calls_answer_and_changed_files() {
        let messages = vec![
            text(Role::User, "first   thing"),
            text(Role::Assistant, "done"),
            text(Role::User, "rename foo\nto bar"),
            Message {
                role: Role::Assistant,
                content: vec![
                    Block::Text {
                        text: "Reading.".into(),
                    },
                    call("1", "fs_read", "src/a.rs"),
                    call("2", "fs_edit", "src/a.rs"),
                    call("3", "fs_write", "src/new.rs"),
                    call("4", "fs_write", "denied.rs"),
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    result("1", false),
                    result("2", false),
                    result("3", false),
                    result("4", true),
                ],
            },
            Message {
                role: Role::Assistant,
                content: vec![
                    call("5", "fs_edit", "src/a.rs"),
                    Block::Text {
                        text: "\nRenamed foo to bar.\nMore.".into(),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![result("5", false)],
            },
        ];
        let recap = recap(&messages, |name| {
            (name.replace('_', "."), name != "fs_read")
        });
        assert_eq!(recap.last_prompt.as_deref(), Some("rename foo to bar"));
        assert_eq!(recap.last_answer.as_deref(), Some("Renamed foo to bar."));
        assert_eq!(recap.files_changed, ["src/a.rs", "src/new.rs"]);
        assert_eq!(recap.tool_calls["fs.edit"], 2);
        assert_eq!(recap.messages, 7);
        let lines = recap.lines().join("\n");
        assert!(
            lines.contains("done: 5 tool calls (fs.edit ×2, fs.read ×1, fs.write ×2)"),
            "{lines}"
        );
        assert!(
            lines.contains("files changed: src/a.rs, src/new.rs"),
            "{lines}"
        );
    }

    #[test]
    fn an_empty_conversation_says_so_and_long_lines_are_cut() {
        assert_eq!(
            recap(&[], |n| (n.to_string(), true)).lines(),
            ["  (nothing was said yet)"]
        );
        let long = "word ".repeat(100);
        let recap = recap(&[text(Role::User, &long)], |n| (n.to_string(), true));
        let prompt = recap.last_prompt.unwrap();
        assert_eq!(prompt.chars().count(), LINE_CHARS);
        assert!(prompt.ends_with('…'));
    }
}
