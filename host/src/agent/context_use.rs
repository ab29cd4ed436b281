//! What fills the model's context window (`/context`): the system prompt,
//! the project's instructions, the skills listing, the tool definitions,
//! the conversation's messages and the tools' results, each as an estimate
//! of its tokens and its share of the window.
//!
//! Tokens are estimated as one per four bytes, as the providers' own rule
//! of thumb says, and an image as Anthropic documents it: width × height
//! / 750 once scaled to fit 1568 pixels on its long edge, at most about
//! 1,600 tokens ([`image_tokens`]). The count the provider reported for
//! the last request is shown beside the estimate when there is one.

use base64::Engine as _;

use crate::model::{Block, Image, Message, ToolDef};

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

/// The most tokens an image costs: a larger one is scaled down by the API
/// first. Also the estimate for an image whose size cannot be read.
pub const MAX_IMAGE_TOKENS: u64 = 1600;

/// The longest edge, in pixels, the API keeps before scaling an image down.
const MAX_IMAGE_EDGE: u64 = 1568;

/// The estimated tokens of `image`: Anthropic's formula, width × height /
/// 750, on its size once its long edge fits [`MAX_IMAGE_EDGE`], at most
/// [`MAX_IMAGE_TOKENS`]; that most when its size cannot be read from its
/// header (PNG, JPEG, GIF, WebP).
pub fn image_tokens(image: &Image) -> u64 {
    let Some((width, height)) = image_size(image) else {
        return MAX_IMAGE_TOKENS;
    };
    let long = width.max(height).max(1);
    let (width, height) = if long > MAX_IMAGE_EDGE {
        (
            (width * MAX_IMAGE_EDGE).div_ceil(long),
            (height * MAX_IMAGE_EDGE).div_ceil(long),
        )
    } else {
        (width, height)
    };
    (width * height).div_ceil(750).clamp(1, MAX_IMAGE_TOKENS)
}

/// The estimated tokens of one block of a message: its text, a call's
/// name and input, a result's text and images.
pub fn block_tokens(block: &Block) -> u64 {
    match block {
        Block::Text { text } => estimate_tokens(text.len()),
        Block::ToolUse { name, input, .. } => estimate_tokens(name.len() + input.to_string().len()),
        Block::ToolResult {
            content, images, ..
        } => estimate_tokens(content.len()) + images.iter().map(image_tokens).sum::<u64>(),
    }
}

/// Width and height of `image`, read from the start of its data.
fn image_size(image: &Image) -> Option<(u64, u64)> {
    // The header of every format but JPEG is in the first bytes; a JPEG's
    // frame header follows its metadata, which may be long.
    let chars = if image.media_type == "image/jpeg" {
        128 * 1024
    } else {
        64
    };
    let end = image.data.len().min(chars) / 4 * 4;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(image.data.get(..end)?)
        .ok()?;
    let u16_be = |at: usize| {
        Some(u64::from(u16::from_be_bytes([
            *bytes.get(at)?,
            *bytes.get(at + 1)?,
        ])))
    };
    let u16_le = |at: usize| {
        Some(u64::from(u16::from_le_bytes([
            *bytes.get(at)?,
            *bytes.get(at + 1)?,
        ])))
    };
    let u24_le = |at: usize| {
        Some(
            u64::from(*bytes.get(at)?)
                | u64::from(*bytes.get(at + 1)?) << 8
                | u64::from(*bytes.get(at + 2)?) << 16,
        )
    };
    let size = if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        let word = |at: usize| {
            Some(u64::from(u32::from_be_bytes(
                bytes.get(at..at + 4)?.try_into().ok()?,
            )))
        };
        (word(16)?, word(20)?)
    } else if bytes.starts_with(b"GIF8") {
        (u16_le(6)?, u16_le(8)?)
    } else if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        match bytes.get(12..16)? {
            b"VP8 " => (u16_le(26)? & 0x3fff, u16_le(28)? & 0x3fff),
            b"VP8L" => {
                let bits = u64::from(u32::from_le_bytes(bytes.get(21..25)?.try_into().ok()?));
                ((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1)
            }
            b"VP8X" => (u24_le(24)? + 1, u24_le(27)? + 1),
            _ => return None,
        }
    } else if bytes.starts_with(&[0xff, 0xd8]) {
        // Segments follow one another, each a marker and its length, up
        // to a start-of-frame marker holding the size.
        let mut at = 2;
        loop {
            if *bytes.get(at)? != 0xff {
                return None;
            }
            let marker = *bytes.get(at + 1)?;
            if marker == 0xff {
                at += 1;
                continue;
            }
            if (0xc0..=0xcf).contains(&marker) && ![0xc4, 0xc8, 0xcc].contains(&marker) {
                break (u16_be(at + 7)?, u16_be(at + 5)?);
            }
            at += 2 + usize::try_from(u16_be(at + 2)?).ok()?;
        }
    } else {
        return None;
    };
    (size.0 > 0 && size.1 > 0).then_some(size)
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
    let (mut said, mut results, mut images) = (0usize, 0usize, 0u64);
    for block in messages.iter().flat_map(|m| &m.content) {
        match block {
            Block::Text { text } => said += text.len(),
            Block::ToolUse { name, input, .. } => said += name.len() + input.to_string().len(),
            Block::ToolResult {
                content,
                images: result_images,
                ..
            } => {
                results += content.len();
                images += result_images.iter().map(image_tokens).sum::<u64>();
            }
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
        (ContextPart::ToolResults, estimate_tokens(results) + images),
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

    fn image(media_type: &str, bytes: &[u8]) -> Image {
        Image {
            media_type: media_type.into(),
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }

    #[test]
    fn images_count_by_their_size_as_anthropic_documents() {
        let png = |width: u32, height: u32| {
            let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
            bytes.extend(width.to_be_bytes());
            bytes.extend(height.to_be_bytes());
            bytes.extend([8, 6, 0, 0, 0, 0, 0, 0, 0]);
            image("image/png", &bytes)
        };
        // 200 x 150 / 750.
        assert_eq!(image_tokens(&png(200, 150)), 40);
        // 1000 x 1000 / 750, rounded up.
        assert_eq!(image_tokens(&png(1000, 1000)), 1334);
        // Scaled to 1568 x 392 first: 819.6.
        assert_eq!(image_tokens(&png(4000, 1000)), 820);
        // Large: the most an image costs.
        assert_eq!(image_tokens(&png(4000, 4000)), MAX_IMAGE_TOKENS);
        // A GIF's logical screen, 30 x 25.
        let gif = image("image/gif", b"GIF89a\x1e\0\x19\0\0\0\0");
        assert_eq!(image_tokens(&gif), 1);
        // A JPEG: its APP0 segment skipped, the size from its SOF0.
        let mut jpeg = vec![0xff, 0xd8, 0xff, 0xe0, 0, 16];
        jpeg.extend(b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0");
        jpeg.extend([0xff, 0xc0, 0, 17, 8, 0x01, 0xe0, 0x02, 0x80, 3]);
        jpeg.extend([0; 12]);
        assert_eq!(image_tokens(&image("image/jpeg", &jpeg)), 410);
        // A WebP with an extended header, 300 x 200.
        let mut webp = b"RIFF\0\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
        webp.extend([0x2b, 0x01, 0x00, 0xc7, 0x00, 0x00]);
        assert_eq!(image_tokens(&image("image/webp", &webp)), 80);
        // Unreadable: the fixed estimate.
        assert_eq!(
            image_tokens(&image("image/png", b"not an image at all")),
            MAX_IMAGE_TOKENS
        );
        assert_eq!(
            image_tokens(&Image {
                media_type: "image/png".into(),
                data: "!!!!".into()
            }),
            MAX_IMAGE_TOKENS
        );

        // In /context, a result's images count with the tool results.
        let messages = [Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: "1".into(),
                content: "r".repeat(40),
                is_error: false,
                images: vec![png(200, 150), png(200, 150)],
            }],
        }];
        let used = breakdown("", "", &[], &messages, &[], 10_000);
        assert_eq!(tokens(&used, ContextPart::ToolResults), 10 + 80);
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
