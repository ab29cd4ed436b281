//! `--include-partial-messages`: the model's answer as it streams, in
//! Claude Code's `stream_event` messages, each carrying one event of the
//! Messages API's stream (`message_start`, `content_block_start`,
//! `content_block_delta`, `content_block_stop`, `message_delta`,
//! `message_stop`). Text arrives in deltas as the provider sends it; a
//! tool call's input, which capstan reads whole, arrives in one
//! `input_json_delta` when the answer is complete. Each block's
//! `assistant` message comes before the block's `content_block_stop`, as
//! in Claude Code's stream; [`super::headless`] interleaves them.

use serde_json::{Value, json};

use crate::model::{Block, Message, Usage};

/// Where the answer being streamed is.
#[derive(Default)]
pub struct PartialMessages {
    /// The next content block's index.
    next_index: usize,
    /// The index of the text block being streamed, if one is.
    open_text: Option<usize>,
}

impl PartialMessages {
    /// A request starts: its answer will be message `id` from `model`.
    pub fn start(&mut self, id: &str, model: &str) -> Vec<Value> {
        *self = Self::default();
        vec![json!({
            "type": "message_start",
            "message": {
                "id": id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            },
        })]
    }

    /// More of the answer's text.
    pub fn text(&mut self, text: &str) -> Vec<Value> {
        let mut events = Vec::new();
        let index = match self.open_text {
            Some(index) => index,
            None => {
                let index = self.take_index();
                self.open_text = Some(index);
                events.push(json!({
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                }));
                index
            }
        };
        events.push(json!({
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "text_delta", "text": text},
        }));
        events
    }

    /// The answer's text block is complete: its `content_block_stop`, or
    /// (when no text was streamed for it) the whole block — start, one
    /// delta and stop. The block's `assistant` message goes before the
    /// last event, as Claude Code orders them.
    pub fn text_block(&mut self, text: &str) -> Vec<Value> {
        let mut events = match self.open_text {
            Some(_) => Vec::new(),
            None => self.text(text),
        };
        if let Some(index) = self.open_text.take() {
            events.push(json!({"type": "content_block_stop", "index": index}));
        }
        events
    }

    /// A tool call of the answer, whole: start, its input in one delta,
    /// stop (capstan reads a call's input whole). The block's `assistant`
    /// message goes before the last event.
    pub fn tool_block(&mut self, id: &str, name: &str, input: &Value) -> Vec<Value> {
        let index = self.take_index();
        vec![
            json!({
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}},
            }),
            json!({
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": input.to_string()},
            }),
            json!({"type": "content_block_stop", "index": index}),
        ]
    }

    /// The answer is complete: its end, with why the model stopped and
    /// the tokens it used.
    pub fn finish(&mut self, answer: &Message, usage: &Usage) -> Vec<Value> {
        let mut events = Vec::new();
        if let Some(index) = self.open_text.take() {
            events.push(json!({"type": "content_block_stop", "index": index}));
        }
        let calls = answer
            .content
            .iter()
            .any(|block| matches!(block, Block::ToolUse { .. }));
        events.push(json!({
            "type": "message_delta",
            "delta": {
                "stop_reason": if calls { "tool_use" } else { "end_turn" },
                "stop_sequence": null,
            },
            "usage": {"output_tokens": usage.output_tokens},
        }));
        events.push(json!({"type": "message_stop"}));
        events
    }

    fn take_index(&mut self) -> usize {
        let index = self.next_index;
        self.next_index += 1;
        index
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Role;

    #[test]
    fn an_answer_streams_as_the_messages_api_events() {
        let mut partial = PartialMessages::default();
        let mut events = partial.start("msg_1", "m");
        events.extend(partial.text("Hel"));
        events.extend(partial.text("lo"));
        let answer = Message {
            role: Role::Assistant,
            content: vec![
                Block::Text {
                    text: "Hello".into(),
                },
                Block::ToolUse {
                    id: "toolu_1".into(),
                    name: "fs__read".into(),
                    input: json!({"path": "a"}),
                },
            ],
        };
        let usage = Usage {
            output_tokens: 9,
            ..Usage::default()
        };
        events.extend(partial.text_block("Hello"));
        events.extend(partial.tool_block("toolu_1", "fs__read", &json!({"path": "a"})));
        events.extend(partial.finish(&answer, &usage));
        let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        assert_eq!(events[3]["delta"]["text"], "lo");
        assert_eq!(events[5]["index"], 1);
        assert_eq!(events[6]["delta"]["partial_json"], r#"{"path":"a"}"#);
        assert_eq!(events[8]["delta"]["stop_reason"], "tool_use");
        assert_eq!(events[8]["usage"]["output_tokens"], 9);
    }
}
