//! Compaction: when a conversation grows close to the model's context
//! window (or the user asks with `/compact`), the model writes a summary of
//! it and the conversation starts again from that summary.
//!
//! The summary goes back as the first user message, so the next request
//! carries the task, the decisions taken and the state of the work instead
//! of every tool result. The transcript keeps the whole history and records
//! the compaction, so a resumed session continues from the summary too.

use serde_json::json;

use super::{Agent, AgentError, AgentEvent, Frontend, Interrupt};
use crate::hooks::HookEvent;
use crate::model::{Block, Message, Request, Role, StreamEvent, Usage};
use crate::session::record::Event;

/// Why a compaction happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactTrigger {
    /// The user asked (`/compact`).
    Manual,
    /// The conversation neared the context window.
    Auto,
}

impl CompactTrigger {
    /// `manual` or `auto`, as Claude Code names them in hook payloads and
    /// as the transcript records them.
    pub fn name(self) -> &'static str {
        match self {
            Self::Manual => "manual",
            Self::Auto => "auto",
        }
    }
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactReport {
    /// Why it happened.
    pub trigger: CompactTrigger,
    /// How many messages the summary replaced.
    pub messages_before: usize,
    /// The tokens the last request used before compacting, if known.
    pub tokens_before: Option<u64>,
    /// The summary the model wrote.
    pub summary: String,
}

/// Why a compaction could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactError {
    /// There is nothing to compact yet.
    #[error("there is nothing to compact yet")]
    Empty,
    /// The model's answer held no text.
    #[error("the model answered without a summary; the conversation was left as it was")]
    NoSummary,
    /// The user interrupted the summary.
    #[error("compaction was interrupted; the conversation was left as it was")]
    Interrupted,
}

/// The share of the context window at which a conversation is compacted
/// before the next request, in percent.
pub const AUTO_COMPACT_PERCENT: u64 = 85;

/// The context window of `model` in tokens, as its family publishes it;
/// 128k for models this table does not know. `[model] context_window` in
/// the config overrides it.
pub fn context_window_for(model: &str) -> u64 {
    let id = model.to_ascii_lowercase();
    let id = id.rsplit('/').next().unwrap_or(&id);
    if id.contains("claude") {
        // Sonnet 4 and later offer more to some accounts; 200k is what
        // every account gets.
        200_000
    } else if id.starts_with("gpt-4.1") || id.starts_with("gpt-5") {
        if id.starts_with("gpt-5") {
            400_000
        } else {
            1_047_576
        }
    } else if id.starts_with("o1") || id.starts_with("o3") || id.starts_with("o4") {
        200_000
    } else if id.starts_with("gemini") {
        1_048_576
    } else {
        128_000
    }
}

/// The tokens a request used: everything it sent, plus what the answer
/// added (which the next request sends again).
pub fn tokens_in_context(usage: Usage) -> u64 {
    usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens + usage.output_tokens
}

/// The estimated tokens of what the next request adds to the last one:
/// the messages after the model's last answer (the results of its calls,
/// images counted by [`super::context_use::image_tokens`]), which the last
/// request's usage does not hold.
pub fn unsent_tokens(messages: &[Message]) -> u64 {
    let after = messages
        .iter()
        .rposition(|m| m.role == Role::Assistant)
        .map_or(0, |at| at + 1);
    messages[after..]
        .iter()
        .flat_map(|m| &m.content)
        .map(super::context_use::block_tokens)
        .sum()
}

/// Whether a conversation whose last request used `tokens` should be
/// compacted before the next one.
pub fn needs_compaction(tokens: u64, context_window: u64) -> bool {
    context_window > 0 && tokens * 100 >= context_window * AUTO_COMPACT_PERCENT
}

/// The marker that starts every summary request's instruction, so a
/// provider (the scripted one) can tell a summary request from a turn.
pub const SUMMARY_REQUEST_MARKER: &str = "[capstan: summarize the conversation]";

/// The instruction that asks the model for a summary, with the user's own
/// focus (`/compact keep the API design`) added when given.
pub fn summary_instruction(focus: Option<&str>) -> String {
    let mut text = format!(
        "{SUMMARY_REQUEST_MARKER}\n\
         The conversation is about to be replaced by your summary of it, because it is \
         nearing the model's context window. Do not call any tools. Write a summary that \
         lets you carry on the work without the conversation, with these sections:\n\
         1. The user's requests and intent, in their words where it matters.\n\
         2. Key technical facts, decisions and constraints.\n\
         3. Files read or changed, with what matters about each (paths exact).\n\
         4. Errors met and how they were resolved.\n\
         5. What was being worked on last, and the next step, if the task is not done.\n\
         Be complete about facts you would otherwise have to rediscover; leave out \
         pleasantries and anything already resolved that no longer matters."
    );
    if let Some(focus) = focus.map(str::trim).filter(|f| !f.is_empty()) {
        text.push_str("\n\nThe user asks the summary to focus on: ");
        text.push_str(focus);
    }
    text
}

/// The messages of a summary request: the conversation, with the
/// instruction added to its last user message (or as a new one), so roles
/// keep alternating.
pub fn summary_request_messages(messages: &[Message], focus: Option<&str>) -> Vec<Message> {
    let mut out = messages.to_vec();
    let instruction = Block::Text {
        text: summary_instruction(focus),
    };
    match out.last_mut() {
        Some(last) if last.role == Role::User => last.content.push(instruction),
        _ => out.push(Message {
            role: Role::User,
            content: vec![instruction],
        }),
    }
    out
}

/// The text of the model's summary answer: its text blocks, joined; tool
/// calls it made anyway are ignored.
pub fn summary_text(content: &[Block]) -> Option<String> {
    let text = content
        .iter()
        .filter_map(|block| match block {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("")
        .trim()
        .to_string();
    (!text.is_empty()).then_some(text)
}

/// The user message a compacted conversation starts from. `mid_turn` adds
/// that the work in progress should go on without waiting for the user.
pub fn summary_message(summary: &str, mid_turn: bool) -> Message {
    let mut text = format!(
        "This session continues an earlier conversation that was compacted to save \
         context. Summary of it so far:\n\n{summary}"
    );
    if mid_turn {
        text.push_str(
            "\n\nContinue the task from where it was left, without asking the user to \
             repeat anything; read files again if you need their exact content.",
        );
    }
    Message {
        role: Role::User,
        content: vec![Block::Text { text }],
    }
}

/// The agent's side of compaction: asking the model for the summary and
/// replacing the conversation by it.
impl Agent {
    /// Whether the last request came close enough to the context window
    /// that the conversation should be compacted before the next one.
    pub(super) fn should_compact(&self) -> bool {
        self.context_tokens.is_some_and(|tokens| {
            needs_compaction(
                tokens + unsent_tokens(&self.messages),
                self.parts.config.context_window,
            )
        })
    }

    /// Compacts automatically; a summary the model could not give is a
    /// notice, and the conversation goes on as it was.
    pub(super) async fn compact_or_notice(
        &mut self,
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
        mid_turn: bool,
    ) -> Result<(), AgentError> {
        match self
            .compact_with(CompactTrigger::Auto, None, frontend, interrupt, mid_turn)
            .await
        {
            Ok(_) => Ok(()),
            Err(AgentError::Compact(error)) => {
                // Not asked again until another request reports its size.
                self.context_tokens = None;
                let text = format!("could not compact the conversation: {error}");
                frontend.event(AgentEvent::Notice(&text));
                Ok(())
            }
            Err(other) => Err(other),
        }
    }

    /// Replaces the conversation by the model's summary of it (`/compact`,
    /// with an optional focus for the summary). The transcript keeps the
    /// whole history and records the compaction.
    pub async fn compact(
        &mut self,
        focus: Option<&str>,
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
    ) -> Result<CompactReport, AgentError> {
        self.compact_with(CompactTrigger::Manual, focus, frontend, interrupt, false)
            .await
    }

    async fn compact_with(
        &mut self,
        trigger: CompactTrigger,
        focus: Option<&str>,
        frontend: &mut dyn Frontend,
        interrupt: &Interrupt,
        mid_turn: bool,
    ) -> Result<CompactReport, AgentError> {
        if self.messages.is_empty() {
            return Err(CompactError::Empty.into());
        }
        let fields = json!({
            "trigger": trigger.name(),
            "custom_instructions": focus.unwrap_or_default(),
        });
        self.fire(HookEvent::PreCompact, fields, None, frontend)
            .await?;
        frontend.event(AgentEvent::Compacting { trigger });
        let request = Request {
            model: self.parts.config.model.clone(),
            system: self.parts.config.system.clone(),
            messages: summary_request_messages(&self.messages, focus),
            // Requests holding tool calls must declare the tools; the
            // instruction says not to call them, and calls are ignored.
            tools: self.tool_defs(),
            max_tokens: self.parts.config.max_tokens,
            summary: true,
        };
        let mut sink = |event: StreamEvent| {
            if let StreamEvent::Retrying {
                attempt,
                after,
                reason,
            } = event
            {
                frontend.event(AgentEvent::Retrying {
                    attempt,
                    after,
                    reason: &reason,
                });
            }
        };
        let outcome = tokio::select! {
            result = self.parts.provider.stream(&request, &mut sink) => Some(result),
            () = interrupt.raised() => None,
        };
        let response = match outcome {
            None => return Err(CompactError::Interrupted.into()),
            Some(result) => result?,
        };
        self.cost.add(response.usage);
        frontend.event(AgentEvent::Usage(response.usage));
        if let Some(transcript) = &mut self.transcript {
            transcript.record_usage(response.usage)?;
        }
        let summary = summary_text(&response.content).ok_or(CompactError::NoSummary)?;
        let message = summary_message(&summary, mid_turn);
        let report = CompactReport {
            trigger,
            messages_before: self.messages.len(),
            tokens_before: self.context_tokens,
            summary,
        };
        self.record(Event::Compacted {
            trigger: trigger.name().to_string(),
            messages_before: report.messages_before,
            message: message.clone(),
        })?;
        self.messages = vec![message];
        self.context_tokens = None;
        frontend.event(AgentEvent::Compacted(&report));
        let fields = json!({
            "trigger": trigger.name(),
            "compact_summary": report.summary,
        });
        self.fire(HookEvent::PostCompact, fields, None, frontend)
            .await?;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Message {
        Message {
            role: Role::User,
            content: vec![Block::Text { text: text.into() }],
        }
    }

    fn assistant(text: &str) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![Block::Text { text: text.into() }],
        }
    }

    #[test]
    fn the_threshold_is_a_share_of_the_window() {
        assert!(!needs_compaction(169_999, 200_000));
        assert!(needs_compaction(170_000, 200_000));
        assert!(needs_compaction(250_000, 200_000));
        assert!(!needs_compaction(1_000_000, 0));
    }

    #[test]
    fn results_not_yet_sent_count_with_their_images() {
        use base64::Engine as _;
        // A PNG's header: 1000 x 1000 pixels, 1,334 tokens by the formula.
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend(1000u32.to_be_bytes());
        png.extend(1000u32.to_be_bytes());
        png.extend([8, 6, 0, 0, 0]);
        let image = crate::model::Image {
            media_type: "image/png".into(),
            data: base64::engine::general_purpose::STANDARD.encode(&png),
        };
        let results = Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: "1".into(),
                content: "r".repeat(400),
                is_error: false,
                images: vec![image.clone(); 8],
            }],
        };
        let messages = vec![user("look"), assistant("calling"), results];
        assert_eq!(unsent_tokens(&messages), 100 + 8 * 1334);
        // What came before the last answer is in the last request's count.
        assert_eq!(unsent_tokens(&messages[..2]), 0);
        // A request at 80% of a 20k window is below the threshold; the
        // images on their way take the next one past it.
        assert!(!needs_compaction(16_000, 20_000));
        assert!(needs_compaction(16_000 + unsent_tokens(&messages), 20_000));
    }

    #[test]
    fn context_windows_follow_the_family_and_default_to_128k() {
        assert_eq!(context_window_for("claude-sonnet-4-5-20250929"), 200_000);
        assert_eq!(context_window_for("anthropic/claude-opus-4.1"), 200_000);
        assert_eq!(context_window_for("gpt-4.1-mini"), 1_047_576);
        assert_eq!(context_window_for("o3-mini"), 200_000);
        assert_eq!(context_window_for("qwen2.5-coder-32b"), 128_000);
    }

    #[test]
    fn tokens_in_context_count_every_kind() {
        let usage = Usage {
            input_tokens: 1,
            output_tokens: 2,
            cache_read_tokens: 30,
            cache_write_tokens: 400,
        };
        assert_eq!(tokens_in_context(usage), 433);
    }

    #[test]
    fn the_instruction_joins_a_last_user_message_and_carries_the_focus() {
        let messages = vec![user("hi"), assistant("hello"), user("more")];
        let request = summary_request_messages(&messages, Some("  the parser "));
        assert_eq!(request.len(), 3);
        let Block::Text { text } = &request[2].content[1] else {
            panic!("the instruction is not text");
        };
        assert!(text.starts_with(SUMMARY_REQUEST_MARKER));
        assert!(text.ends_with("focus on: the parser"));

        let request = summary_request_messages(&messages[..2], None);
        assert_eq!(request.len(), 3);
        assert_eq!(request[2].role, Role::User);
    }

    #[test]
    fn a_summary_is_the_answers_text_and_never_empty() {
        let content = vec![
            Block::Text {
                text: "  Task: x. ".into(),
            },
            Block::ToolUse {
                id: "t".into(),
                name: "fs__read".into(),
                input: serde_json::json!({}),
            },
        ];
        assert_eq!(summary_text(&content).as_deref(), Some("Task: x."));
        assert_eq!(summary_text(&[]), None);
        assert_eq!(summary_text(&[Block::Text { text: "  ".into() }]), None);
    }

    #[test]
    fn the_summary_message_says_what_it_is() {
        let Block::Text { text } = &summary_message("S", true).content[0] else {
            panic!("not text");
        };
        assert!(text.contains("compacted"));
        assert!(text.contains("\n\nS\n\nContinue the task"));
    }
}
