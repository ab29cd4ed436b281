//! What fills the model's context window (`/context`): the system prompt,
//! the project's instructions, the skills listing, the tool definitions,
//! the conversation's messages and the tools' results, each as an estimate
//! of its tokens and its share of the window.
//!
//! Tokens are estimated as one per four bytes, as the providers' own rule
//! of thumb says; the count the provider reported for the last request is
//! shown beside the estimate when there is one.

use crate::model::{Block, Message, ToolDef};

/// The heading the project's instructions start with in the system prompt
/// ([`super::context::system_prompt`]).
const INSTRUCTIONS_HEADING: &str = "\n# Project instructions\n";

/// One part of what the model is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextPart {
    /// capstan's own system prompt: who it is, the environment, the tools
    /// in a line each, how to work.
    SystemPrompt,
    /// AGENTS.md and CLAUDE.md files.
    ProjectInstructions,
    /// The skills listing.
    Skills,
    /// The tools' names, descriptions and input schemas.
    ToolDefinitions,
    /// What the user and the model said, and the model's tool calls.
    Messages,
    /// The results of tool calls.
    ToolResults,
    /// A `!command`'s output or an attached file, waiting for the next
    /// prompt.
    Pending,
}

impl ContextPart {
    /// How `/context` names it.
    pub fn label(self) -> &'static str {
        match self {
            Self::SystemPrompt => "system prompt",
            Self::ProjectInstructions => "project instructions",
            Self::Skills => "skills",
            Self::ToolDefinitions => "tool definitions",
            Self::Messages => "messages",
            Self::ToolResults => "tool results",
            Self::Pending => "for the next prompt",
        }
    }
}

/// What the context holds.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextUse {
    /// Each part with its estimated tokens, in the order sent.
    pub parts: Vec<(ContextPart, u64)>,
    /// The model's context window in tokens.
    pub window: u64,
}

impl ContextUse {
    /// The estimated tokens of all parts.
    pub fn total(&self) -> u64 {
        self.parts.iter().map(|(_, tokens)| tokens).sum()
    }

    /// `tokens` as a percentage of the window (0 without a window).
    pub fn percent(&self, tokens: u64) -> f64 {
        if self.window == 0 {
            return 0.0;
        }
        tokens as f64 * 100.0 / self.window as f64
    }

    /// A report for `/context`: a bar of the window's use, then a line a
    /// part; `measured` is what the provider counted for the last request.
    pub fn report(&self, model: &str, measured: Option<u64>) -> String {
        const BAR: usize = 40;
        let total = self.total();
        let filled = if self.window == 0 {
            0
        } else {
            usize::try_from((total.min(self.window) * BAR as u64).div_ceil(self.window))
                .unwrap_or(BAR)
        };
        let mut text = format!(
            "context of {model}: ~{} of {} tokens ({:.1}%)\n[{}{}]\n",
            thousands(total),
            thousands(self.window),
            self.percent(total),
            "#".repeat(filled),
            ".".repeat(BAR - filled.min(BAR)),
        );
        for (part, tokens) in &self.parts {
            text.push_str(&format!(
                "  {:22} {:>9} tokens  {:>5.1}%\n",
                part.label(),
                thousands(*tokens),
                self.percent(*tokens)
            ));
        }
        text.push_str(&format!(
            "  {:22} {:>9} tokens  {:>5.1}%\n",
            "free",
            thousands(self.window.saturating_sub(total)),
            self.percent(self.window.saturating_sub(total))
        ));
        match measured {
            Some(tokens) => text.push_str(&format!(
                "the last request used {} tokens as the provider counted them; the parts are estimates (4 bytes a token)",
                thousands(tokens)
            )),
            None => text.push_str("estimates (4 bytes a token); no request has been made yet"),
        }
        text
    }
}

/// The estimated tokens of `bytes` bytes of text.
pub fn estimate_tokens(bytes: usize) -> u64 {
    u64::try_from(bytes.div_ceil(4)).unwrap_or(u64::MAX)
}

/// What the context of a session holds: `system` is the whole system
/// prompt, which ends with `skills_listing`; `tools` the definitions
/// offered; `messages` the conversation; `pending` what waits for the next
/// prompt; `window` the model's context window.
pub fn breakdown(
    system: &str,
    skills_listing: &str,
    tools: &[ToolDef],
    messages: &[Message],
    pending: &[String],
    window: u64,
) -> ContextUse {
    let (rest, skills) = match system.strip_suffix(skills_listing) {
        Some(rest) if !skills_listing.is_empty() => (rest, skills_listing.len()),
        _ => (system, 0),
    };
    let (own, instructions) = match rest.find(INSTRUCTIONS_HEADING) {
        Some(at) => (at, rest.len() - at),
        None => (rest.len(), 0),
    };
    let tool_bytes: usize = tools
        .iter()
        .map(|tool| tool.name.len() + tool.description.len() + tool.input_schema.to_string().len())
        .sum();
    let (mut said, mut results) = (0usize, 0usize);
    for block in messages.iter().flat_map(|m| &m.content) {
        match block {
            Block::Text { text } => said += text.len(),
            Block::ToolUse { name, input, .. } => said += name.len() + input.to_string().len(),
            Block::ToolResult { content, .. } => results += content.len(),
        }
    }
    let pending: usize = pending.iter().map(String::len).sum();
    let mut parts = vec![
        (ContextPart::SystemPrompt, estimate_tokens(own)),
        (
            ContextPart::ProjectInstructions,
            estimate_tokens(instructions),
        ),
        (ContextPart::Skills, estimate_tokens(skills)),
        (ContextPart::ToolDefinitions, estimate_tokens(tool_bytes)),
        (ContextPart::Messages, estimate_tokens(said)),
        (ContextPart::ToolResults, estimate_tokens(results)),
    ];
    if pending > 0 {
        parts.push((ContextPart::Pending, estimate_tokens(pending)));
    }
    ContextUse { parts, window }
}

/// `n` with commas between thousands.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Role;
    use serde_json::json;

    fn tokens(used: &ContextUse, part: ContextPart) -> u64 {
        used.parts
            .iter()
            .find(|(p, _)| *p == part)
            .map_or(0, |(_, t)| *t)
    }

    #[test]
    fn each_part_is_counted_where_it_belongs() {
        let own = "x".repeat(400);
        let instructions = format!("{INSTRUCTIONS_HEADING}{}", "i".repeat(177));
        let skills = format!("\n# Skills\n{}", "s".repeat(90));
        let system = format!("{own}{instructions}{skills}");
        let tools = [ToolDef {
            name: "fs_read".into(),
            description: "d".repeat(93),
            input_schema: json!({}),
        }];
        let messages = [
            Message {
                role: Role::User,
                content: vec![Block::Text {
                    text: "a".repeat(40),
                }],
            },
            Message {
                role: Role::Assistant,
                content: vec![
                    Block::Text {
                        text: "b".repeat(20),
                    },
                    Block::ToolUse {
                        id: "1".into(),
                        name: "fs_read".into(),
                        input: json!({"path": "a"}),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![Block::ToolResult {
                    tool_use_id: "1".into(),
                    content: "r".repeat(4000),
                    is_error: false,
                    images: Vec::new(),
                }],
            },
        ];
        let used = breakdown(&system, &skills, &tools, &messages, &[], 10_000);
        assert_eq!(tokens(&used, ContextPart::SystemPrompt), 100);
        assert_eq!(
            tokens(&used, ContextPart::ProjectInstructions),
            estimate_tokens(instructions.len())
        );
        assert_eq!(
            tokens(&used, ContextPart::Skills),
            estimate_tokens(skills.len())
        );
        // 7 + 93 + 2 ("{}") bytes.
        assert_eq!(tokens(&used, ContextPart::ToolDefinitions), 26);
        // 40 + 20 + 7 + 12 ({"path":"a"}) bytes.
        assert_eq!(tokens(&used, ContextPart::Messages), 20);
        assert_eq!(tokens(&used, ContextPart::ToolResults), 1000);
        assert!(!used.parts.iter().any(|(p, _)| *p == ContextPart::Pending));
        assert_eq!(used.total(), used.parts.iter().map(|(_, t)| t).sum::<u64>());
        assert!((used.percent(1000) - 10.0).abs() < 1e-9);

        let report = used.report("claude-sonnet-4-5", Some(1234));
        assert!(report.contains("tool results"), "{report}");
        assert!(report.contains("10.0%"), "{report}");
        assert!(report.contains("of 10,000 tokens"), "{report}");
        assert!(
            report.contains("1,234 tokens as the provider counted"),
            "{report}"
        );
    }

    #[test]
    fn without_instructions_or_skills_all_is_the_system_prompt() {
        let used = breakdown("abcd", "", &[], &[], &["12345678".into()], 0);
        assert_eq!(tokens(&used, ContextPart::SystemPrompt), 1);
        assert_eq!(tokens(&used, ContextPart::ProjectInstructions), 0);
        assert_eq!(tokens(&used, ContextPart::Skills), 0);
        assert_eq!(tokens(&used, ContextPart::Pending), 2);
        // No window: no percentages to divide by zero.
        assert_eq!(used.percent(5), 0.0);
        assert!(
            used.report("m", None)
                .contains("no request has been made yet")
        );
    }
}
