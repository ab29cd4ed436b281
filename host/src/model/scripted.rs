//! An offline scripted model: replays a conversation written in a JSON file
//! through the normal agent loop, with no API key and no network.
//!
//! `capstan --model scripted:FILE` uses it for the README demo, and tests
//! use it to drive the agent loop. Its provider name is `scripted`, so
//! nothing it says can be mistaken for a real model's answer.
//!
//! A script:
//!
//! ```json
//! {
//!   "description": "Renames a function in the demo project",
//!   "chunk_delay_ms": 30,
//!   "turns": [
//!     { "text": "Let me look at the file first.",
//!       "tool_calls": [ { "tool": "fs.read", "input": { "path": "src/lib.rs" } } ] },
//!     { "delay_ms": 500, "text": "Done." }
//!   ]
//! }
//! ```
//!
//! The turn played is the number of assistant messages already in the
//! request, so the provider keeps no state and a resumed session continues
//! where it left off.
//!
//! A turn can answer what happened to the previous turn's tool calls, so a
//! script stays true when a call is refused or fails:
//!
//! ```json
//! { "text": "Checking the result:",
//!   "tool_calls": [ { "tool": "fs.read", "input": { "path": "src/lib.rs" } } ],
//!   "if_refused": { "text": "The edit was not allowed, so nothing changed." },
//!   "if_error": { "text": "The edit failed; src/lib.rs is as it was." } }
//! ```
//!
//! `if_refused` is played instead of the turn when a result the request
//! ends with is a refusal (the call was not allowed to run: a rule, the
//! mode, a hook or the user said no); `if_error` when one is any error,
//! refusals included, and the turn has no `if_refused`. An alternative has
//! `text`, `tool_calls` and `delay_ms` like a turn, but no alternatives of
//! its own. It stands in for the turn, so the script goes on with the next
//! turn either way; an alternative without tool calls ends the answer. A request to summarize the conversation (compaction)
//! is answered with a plain account of it — the user's prompts and the
//! tools called — that also records how many turns were played, so the
//! script goes on from the right turn after the summary.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{
    Block, EventSink, ModelFuture, Provider, REFUSAL_PREFIX, Request, Response, Role, StopReason,
    StreamEvent, Usage, valid_tool_name,
};

/// The provider's name in messages.
const NAME: &str = "scripted";

/// What the model says once the script has no more turns.
const END_OF_SCRIPT: &str = "(The script has no more turns.)";

/// How many words each streamed text chunk holds.
const WORDS_PER_CHUNK: usize = 3;

/// The shape of a script, named in error messages.
const FORMAT_HINT: &str = r#"a script looks like {"turns": [{"text": "...", "tool_calls": [{"tool": "plugin.tool", "input": {...}}]}]}"#;

/// Why a script could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error(
        "cannot read the model script {}: {source}; check the path given as --model scripted:FILE",
        path.display()
    )]
    Read {
        /// The script's path.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The text is not valid JSON or not a valid script.
    #[error(
        "invalid model script {origin}, line {line}, column {column}: {message}; {FORMAT_HINT}"
    )]
    Invalid {
        /// Where the script came from (its path, or a label).
        origin: String,
        /// The line of the problem (1-based).
        line: usize,
        /// The column of the problem (1-based; 0 before the first character).
        column: usize,
        /// What is wrong.
        message: String,
    },
}

/// A script file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    /// What the script shows.
    #[serde(default)]
    description: Option<String>,
    /// The pause between streamed text chunks, in milliseconds.
    #[serde(default)]
    chunk_delay_ms: u64,
    /// The model's turns, in order.
    turns: Turns,
}

/// The turns of a script: at least one, each with text or tool calls.
#[derive(Debug, Deserialize)]
#[serde(try_from = "Vec<Turn>")]
struct Turns(Vec<Turn>);

impl TryFrom<Vec<Turn>> for Turns {
    type Error = String;

    fn try_from(turns: Vec<Turn>) -> Result<Self, Self::Error> {
        if turns.is_empty() {
            return Err("`turns` is empty; add at least one turn".to_string());
        }
        for (index, turn) in turns.iter().enumerate() {
            let number = index + 1;
            if turn.reply.is_empty() {
                return Err(format!(
                    "turn {number} (counting from 1) has neither `text` nor `tool_calls`; give it at least one"
                ));
            }
            for (key, alternative) in [
                ("if_refused", &turn.if_refused),
                ("if_error", &turn.if_error),
            ] {
                if alternative.as_ref().is_some_and(Reply::is_empty) {
                    return Err(format!(
                        "`{key}` of turn {number} (counting from 1) has neither `text` nor `tool_calls`; give it at least one"
                    ));
                }
            }
        }
        Ok(Self(turns))
    }
}

/// One answer of the model, with what it says instead when the previous
/// turn's tool calls were refused or failed.
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "TurnFile")]
struct Turn {
    /// What the model says when nothing went wrong.
    reply: Reply,
    /// What it says when a previous call was refused.
    if_refused: Option<Reply>,
    /// What it says when a previous call failed (or was refused, without
    /// `if_refused`).
    if_error: Option<Reply>,
}

/// A turn as written: a reply's fields beside the alternatives.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnFile {
    /// The text; empty for none.
    #[serde(default)]
    text: String,
    /// The tool calls, in order.
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
    /// The pause before the answer streams, in milliseconds.
    #[serde(default)]
    delay_ms: u64,
    /// Played instead when a previous call was refused.
    #[serde(default)]
    if_refused: Option<Reply>,
    /// Played instead when a previous call failed.
    #[serde(default)]
    if_error: Option<Reply>,
}

impl From<TurnFile> for Turn {
    fn from(file: TurnFile) -> Self {
        Self {
            reply: Reply {
                text: file.text,
                tool_calls: file.tool_calls,
                delay_ms: file.delay_ms,
            },
            if_refused: file.if_refused,
            if_error: file.if_error,
        }
    }
}

impl Turn {
    /// The reply to play after `previous`, the results the request ends with.
    fn reply_after(&self, previous: PreviousResults) -> &Reply {
        let alternative = match previous {
            PreviousResults::Refused => self.if_refused.as_ref().or(self.if_error.as_ref()),
            PreviousResults::Failed => self.if_error.as_ref(),
            PreviousResults::Fine => None,
        };
        alternative.unwrap_or(&self.reply)
    }
}

/// What the model says in one turn: text, tool calls, or both.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reply {
    /// The text; empty for none.
    #[serde(default)]
    text: String,
    /// The tool calls, in order.
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
    /// The pause before the answer streams, in milliseconds.
    #[serde(default)]
    delay_ms: u64,
}

impl Reply {
    /// Whether it says nothing and calls nothing.
    fn is_empty(&self) -> bool {
        self.text.trim().is_empty() && self.tool_calls.is_empty()
    }
}

/// How the tool results a request ends with went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PreviousResults {
    /// No results, or all succeeded.
    Fine,
    /// At least one failed, none was refused.
    Failed,
    /// At least one was refused.
    Refused,
}

impl PreviousResults {
    /// Reads the tool results in the request's last message.
    fn of(request: &Request) -> Self {
        let Some(last) = request
            .messages
            .last()
            .filter(|message| message.role == Role::User)
        else {
            return Self::Fine;
        };
        let mut outcome = Self::Fine;
        for block in &last.content {
            if let Block::ToolResult {
                content, is_error, ..
            } = block
            {
                if *is_error && content.starts_with(REFUSAL_PREFIX) {
                    return Self::Refused;
                }
                if *is_error {
                    outcome = Self::Failed;
                }
            }
        }
        outcome
    }
}

/// One tool call in a turn.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCall {
    /// The tool, as `plugin.tool`.
    tool: ScriptToolName,
    /// The call's input; `{}` if left out.
    #[serde(default)]
    input: Map<String, Value>,
}

/// A tool name as a script writes it: `plugin.tool`.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "String")]
struct ScriptToolName(String);

impl TryFrom<String> for ScriptToolName {
    type Error = String;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        match name.split_once('.') {
            Some((plugin, tool)) if valid_tool_name(plugin) && valid_tool_name(tool) => {
                Ok(Self(name))
            }
            // A tool of the host's own, such as `skill` or `task`.
            None if valid_tool_name(&name) => Ok(Self(name)),
            _ => Err(format!(
                "tool `{name}` is not of the form `plugin.tool` (lowercase letters, digits, `-` and `_`, like `fs.read`), nor a host tool's name like `skill`"
            )),
        }
    }
}

/// A model that replays a script; see the [module documentation](self).
#[derive(Debug, Clone)]
pub struct ScriptedProvider {
    origin: String,
    description: Option<String>,
    chunk_delay: Duration,
    turns: Vec<Turn>,
}

impl ScriptedProvider {
    /// Loads the script at `path`.
    pub fn from_file(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(&text, &path.display().to_string())
    }

    /// Parses a script; `origin` names it in error messages (a path, or a
    /// label such as "built-in demo").
    pub fn from_json(text: &str, origin: &str) -> Result<Self, ScriptError> {
        let file: ScriptFile = serde_json::from_str(text).map_err(|err| {
            let full = err.to_string();
            let location = format!(" at line {} column {}", err.line(), err.column());
            let message = full.strip_suffix(&location).unwrap_or(&full).to_string();
            ScriptError::Invalid {
                origin: origin.to_string(),
                line: err.line(),
                column: err.column(),
                message,
            }
        })?;
        Ok(Self {
            origin: origin.to_string(),
            description: file.description,
            chunk_delay: Duration::from_millis(file.chunk_delay_ms),
            turns: file.turns.0,
        })
    }

    /// Where the script came from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// What the script says it shows, if it says.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// How many turns the script has.
    pub fn turn_count(&self) -> usize {
        self.turns.len()
    }
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        NAME
    }

    fn stream<'a>(&'a self, request: &'a Request, events: EventSink<'a>) -> ModelFuture<'a> {
        Box::pin(async move {
            let played = turns_played(request);
            let summary;
            let (text, calls, delay): (&str, &[ToolCall], u64) = if request.summary {
                summary = summarize(request, played);
                (&summary, &[], 0)
            } else {
                match self.turns.get(played) {
                    Some(turn) => {
                        let reply = turn.reply_after(PreviousResults::of(request));
                        (&reply.text, &reply.tool_calls, reply.delay_ms)
                    }
                    None => (END_OF_SCRIPT, &[], 0),
                }
            };
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }

            let mut content = Vec::new();
            if !text.trim().is_empty() {
                for (index, chunk) in text_chunks(text).into_iter().enumerate() {
                    if index > 0 && !self.chunk_delay.is_zero() {
                        tokio::time::sleep(self.chunk_delay).await;
                    }
                    events(StreamEvent::TextDelta(chunk));
                }
                content.push(Block::Text {
                    text: text.to_string(),
                });
            }
            for (index, call) in calls.iter().enumerate() {
                let id = format!("toolu_scripted_{played}_{index}");
                let name = model_tool_name(&call.tool.0, request);
                let input = Value::Object(call.input.clone());
                events(StreamEvent::ToolUseStarted {
                    id: id.clone(),
                    name: name.clone(),
                });
                events(StreamEvent::ToolUseFinished {
                    id: id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                });
                content.push(Block::ToolUse { id, name, input });
            }

            let stop_reason = if calls.is_empty() {
                StopReason::EndTurn
            } else {
                StopReason::ToolUse
            };
            let usage = Usage {
                input_tokens: estimate_tokens(request_chars(request)),
                output_tokens: estimate_tokens(blocks_chars(&content)),
                ..Usage::default()
            };
            Ok(Response {
                content,
                stop_reason,
                usage,
            })
        })
    }
}

/// How a scripted summary records the turns played before it.
const PLAYED_MARK: &str = "[scripted turns played: ";

/// The user's text blocks of a request, in order.
fn user_texts(request: &Request) -> impl Iterator<Item = &str> {
    request
        .messages
        .iter()
        .filter(|message| message.role == Role::User)
        .flat_map(|message| &message.content)
        .filter_map(|block| match block {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
}

/// The turns played so far: the assistant messages in the request, plus
/// those a compaction summary stood in for.
fn turns_played(request: &Request) -> usize {
    let answered = request
        .messages
        .iter()
        .filter(|message| message.role == Role::Assistant)
        .count();
    let summarized = user_texts(request)
        .filter_map(|text| {
            let start = text.find(PLAYED_MARK)? + PLAYED_MARK.len();
            let digits = text[start..].split(']').next()?;
            digits.parse::<usize>().ok()
        })
        .last()
        .unwrap_or(0);
    answered + summarized
}

/// A summary of the conversation: the user's prompts and the tools called,
/// with the turns played.
fn summarize(request: &Request, played: usize) -> String {
    // The last message is the instruction to summarize, not a prompt.
    let before_instruction = &request.messages[..request.messages.len().saturating_sub(1)];
    let prompts: Vec<&str> = before_instruction
        .iter()
        .filter(|message| message.role == Role::User)
        .flat_map(|message| &message.content)
        .filter_map(|block| match block {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .filter(|text| !text.contains(PLAYED_MARK))
        .collect();
    let tools: Vec<&str> = request
        .messages
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|block| match block {
            Block::ToolUse { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    let mut text = String::from("Summary of the scripted conversation. ");
    if prompts.is_empty() {
        text.push_str("The user asked nothing new. ");
    } else {
        text.push_str("The user asked: ");
        text.push_str(&prompts.join(" / "));
        text.push_str(". ");
    }
    if tools.is_empty() {
        text.push_str("No tools were called. ");
    } else {
        text.push_str("Tools called: ");
        text.push_str(&tools.join(", "));
        text.push_str(". ");
    }
    text.push_str(&format!("{PLAYED_MARK}{played}]"));
    text
}

/// The name the model knows a script's tool by: the tool offered under
/// exactly that name, else `plugin__tool` (offered or not; the agent loop
/// reports an unknown tool to the model).
fn model_tool_name(script_name: &str, request: &Request) -> String {
    if request.tools.iter().any(|tool| tool.name == script_name) {
        script_name.to_string()
    } else {
        script_name.replacen('.', "__", 1)
    }
}

/// Splits `text` into chunks of a few words each, keeping every character,
/// so the chunks joined give the text back.
fn text_chunks(text: &str) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut current = String::new();
    let mut words = 0;
    for piece in text.split_inclusive(char::is_whitespace) {
        current.push_str(piece);
        if !piece.trim().is_empty() {
            words += 1;
        }
        if words == WORDS_PER_CHUNK && piece.ends_with(char::is_whitespace) {
            chunks.push(std::mem::take(&mut current));
            words = 0;
        }
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// A rough token count: a token is about four characters. The scripted
/// model replays text, so its usage is an estimate, not a measurement.
fn estimate_tokens(chars: usize) -> u64 {
    u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX)
}

/// The characters of a request: system prompt, messages and tools.
fn request_chars(request: &Request) -> usize {
    let tools: usize = request
        .tools
        .iter()
        .map(|tool| {
            tool.name.chars().count()
                + tool.description.chars().count()
                + tool.input_schema.to_string().chars().count()
        })
        .sum();
    let messages: usize = request
        .messages
        .iter()
        .map(|message| blocks_chars(&message.content))
        .sum();
    request.system.chars().count() + messages + tools
}

/// The characters of some blocks.
fn blocks_chars(blocks: &[Block]) -> usize {
    blocks
        .iter()
        .map(|block| match block {
            Block::Text { text } => text.chars().count(),
            Block::ToolUse { name, input, .. } => {
                name.chars().count() + input.to_string().chars().count()
            }
            Block::ToolResult { content, .. } => content.chars().count(),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Message, ToolDef};

    const DEMO: &str = r#"{
  "description": "Renames a function in the demo project",
  "turns": [
    { "text": "Let me look at the file first.",
      "tool_calls": [ { "tool": "fs.read", "input": { "path": "src/lib.rs" } },
                      { "tool": "fs.grep", "input": { "pattern": "old_name" } } ] },
    { "text": "Now the edit.", "tool_calls": [ { "tool": "fs.edit", "input": { "path": "src/lib.rs", "old": "old_name", "new": "new_name" } } ] },
    { "text": "Done: renamed old_name to new_name." }
  ]
}"#;

    fn invalid(text: &str) -> (usize, usize, String) {
        match ScriptedProvider::from_json(text, "demo.json") {
            Err(ScriptError::Invalid {
                origin,
                line,
                column,
                message,
            }) => {
                assert_eq!(origin, "demo.json");
                (line, column, message)
            }
            other => panic!("expected an invalid-script error, got {other:?}"),
        }
    }

    fn tool(name: &str) -> ToolDef {
        ToolDef {
            name: name.to_string(),
            description: format!("The {name} tool."),
            input_schema: serde_json::json!({"type": "object"}),
        }
    }

    fn message(role: Role, text: &str) -> Message {
        Message {
            role,
            content: vec![Block::Text {
                text: text.to_string(),
            }],
        }
    }

    fn request(assistant_turns: usize, tools: Vec<ToolDef>) -> Request {
        let mut messages = vec![message(Role::User, "Rename old_name.")];
        for turn in 0..assistant_turns {
            messages.push(message(Role::Assistant, &format!("turn {turn}")));
            messages.push(message(Role::User, "ok"));
        }
        Request {
            model: "scripted".to_string(),
            system: "You are capstan.".to_string(),
            messages,
            tools,
            max_tokens: 1000,
            summary: false,
        }
    }

    async fn play(provider: &ScriptedProvider, request: &Request) -> (Response, Vec<StreamEvent>) {
        let mut seen = Vec::new();
        let mut sink = |event: StreamEvent| seen.push(event);
        let response = provider.stream(request, &mut sink).await.unwrap();
        (response, seen)
    }

    #[test]
    fn parses_the_demo_script() {
        let provider = ScriptedProvider::from_json(DEMO, "demo.json").unwrap();
        assert_eq!(provider.name(), "scripted");
        assert_eq!(provider.origin(), "demo.json");
        assert_eq!(
            provider.description(),
            Some("Renames a function in the demo project")
        );
        assert_eq!(provider.turn_count(), 3);
        assert_eq!(provider.chunk_delay, Duration::ZERO);
    }

    #[test]
    fn bad_json_names_line_and_column() {
        let (line, column, message) =
            invalid("{\n  \"turns\": [\n    { \"text\": \"hi\" },,\n  ]\n}");
        assert_eq!((line, column), (3, 22));
        assert!(message.contains("expected value"), "{message}");
        assert!(!message.contains(" at line "), "{message}");
        let error = ScriptedProvider::from_json("{", "demo.json")
            .unwrap_err()
            .to_string();
        assert!(error.contains("demo.json, line 1"), "{error}");
        assert!(error.contains("a script looks like"), "{error}");
    }

    #[test]
    fn unknown_keys_are_errors() {
        let (line, _, message) =
            invalid("{\n  \"turns\": [ { \"text\": \"hi\", \"delay\": 5 } ]\n}");
        assert_eq!(line, 2);
        assert!(message.contains("unknown field `delay`"), "{message}");
        let (_, _, message) = invalid(r#"{"turns": [{"text": "hi"}], "speed": 1}"#);
        assert!(message.contains("unknown field `speed`"), "{message}");
        let (_, _, message) =
            invalid(r#"{"turns": [{"tool_calls": [{"tool": "fs.read", "args": {}}]}]}"#);
        assert!(message.contains("unknown field `args`"), "{message}");
    }

    #[test]
    fn a_script_needs_turns_with_something_in_them() {
        // serde_json places these errors at the end of the script object.
        let (line, _, message) = invalid("{\n  \"turns\": []\n}");
        assert_eq!(line, 3);
        assert!(message.contains("`turns` is empty"), "{message}");
        let (_, _, message) = invalid(r#"{"description": "x"}"#);
        assert!(message.contains("missing field `turns`"), "{message}");
        let (line, _, message) =
            invalid("{\"turns\": [\n {\"text\": \"a\"},\n {\"delay_ms\": 5}\n]}");
        assert_eq!(line, 4);
        assert!(
            message.contains("turn 2 (counting from 1) has neither `text` nor `tool_calls`"),
            "{message}"
        );
    }

    #[test]
    fn tool_input_must_be_an_object() {
        let (line, _, message) = invalid(
            "{\"turns\": [{\"tool_calls\": [\n  {\"tool\": \"fs.read\", \"input\": \"src/lib.rs\"}\n]}]}",
        );
        assert_eq!(line, 2);
        assert!(message.contains("expected a map"), "{message}");
        let (_, _, message) =
            invalid(r#"{"turns": [{"tool_calls": [{"tool": "fs.read", "input": [1]}]}]}"#);
        assert!(message.contains("expected a map"), "{message}");
    }

    #[test]
    fn tool_names_must_be_plugin_dot_tool() {
        for name in ["Read", "fs.", ".read", "Fs.read", "fs read", ""] {
            let script = format!(r#"{{"turns": [{{"tool_calls": [{{"tool": "{name}"}}]}}]}}"#);
            let (_, _, message) = invalid(&script);
            assert!(
                message.contains("not of the form `plugin.tool`"),
                "{message}"
            );
        }
        let script = r#"{"turns": [{"tool_calls": [{"tool": "my-plugin.do_it"}]}]}"#;
        assert!(ScriptedProvider::from_json(script, "x").is_ok());
        // A host tool's name has no dot.
        let script = r#"{"turns": [{"tool_calls": [{"tool": "skill"}]}]}"#;
        assert!(ScriptedProvider::from_json(script, "x").is_ok());
    }

    #[test]
    fn unreadable_files_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing.json");
        let error = ScriptedProvider::from_file(&path).unwrap_err();
        assert!(matches!(error, ScriptError::Read { .. }));
        let text = error.to_string();
        assert!(text.contains("missing.json"), "{text}");
        assert!(text.contains("--model scripted:FILE"), "{text}");

        std::fs::write(&path, DEMO).unwrap();
        assert_eq!(ScriptedProvider::from_file(&path).unwrap().turn_count(), 3);
        std::fs::write(&path, "{\"turns\": 1}").unwrap();
        let text = ScriptedProvider::from_file(&path).unwrap_err().to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
    }

    #[test]
    fn tool_names_map_to_what_the_model_sees() {
        let offered = request(0, vec![tool("fs__read"), tool("web.fetch")]);
        assert_eq!(model_tool_name("fs.read", &offered), "fs__read");
        assert_eq!(model_tool_name("web.fetch", &offered), "web.fetch");
        assert_eq!(model_tool_name("fs.grep", &offered), "fs__grep");
    }

    #[test]
    fn text_chunks_keep_every_character() {
        let text = "Let me  look at the file\nfirst, then edit it. ";
        let chunks = text_chunks(text);
        assert!(chunks.len() > 2, "{chunks:?}");
        assert_eq!(chunks.concat(), text);
        assert_eq!(chunks[0], "Let me  look ");
        assert_eq!(text_chunks("one"), vec!["one".to_string()]);
    }

    #[tokio::test]
    async fn plays_the_turn_after_the_assistant_messages_so_far() {
        let provider = ScriptedProvider::from_json(DEMO, "demo.json").unwrap();
        let tools = vec![tool("fs__read"), tool("fs__grep"), tool("fs__edit")];

        let (first, _) = play(&provider, &request(0, tools.clone())).await;
        assert_eq!(first.stop_reason, StopReason::ToolUse);
        assert_eq!(
            first.content[0],
            Block::Text {
                text: "Let me look at the file first.".to_string()
            }
        );
        assert_eq!(first.content.len(), 3);

        let (second, _) = play(&provider, &request(1, tools.clone())).await;
        assert_eq!(
            second.content[1],
            Block::ToolUse {
                id: "toolu_scripted_1_0".to_string(),
                name: "fs__edit".to_string(),
                input: serde_json::json!({"path": "src/lib.rs", "old": "old_name", "new": "new_name"}),
            }
        );

        let (third, _) = play(&provider, &request(2, tools.clone())).await;
        assert_eq!(third.stop_reason, StopReason::EndTurn);
        assert_eq!(
            third.content,
            vec![Block::Text {
                text: "Done: renamed old_name to new_name.".to_string()
            }]
        );
        assert!(third.usage.input_tokens > 0);
        assert_eq!(third.usage.output_tokens, 9);
    }

    #[tokio::test]
    async fn a_summary_request_is_answered_and_the_script_goes_on_after_it() {
        let provider = ScriptedProvider::from_json(DEMO, "demo.json").unwrap();
        let tools = vec![tool("fs__read"), tool("fs__grep"), tool("fs__edit")];
        let mut asked = request(2, tools.clone());
        asked
            .messages
            .push(message(Role::User, "Summarize the conversation."));
        asked.summary = true;
        let (summary, _) = play(&provider, &asked).await;
        let Block::Text { text } = &summary.content[0] else {
            panic!("the summary is not text");
        };
        assert!(text.contains("The user asked: Rename old_name."), "{text}");
        assert!(text.ends_with("[scripted turns played: 2]"), "{text}");

        // After the compaction only the summary is left, and the script
        // plays its third turn.
        let mut after = request(0, tools);
        after.messages = vec![message(Role::User, text)];
        let (third, _) = play(&provider, &after).await;
        assert_eq!(
            third.content,
            vec![Block::Text {
                text: "Done: renamed old_name to new_name.".to_string()
            }]
        );
    }

    #[tokio::test]
    async fn streams_text_then_each_tool_call() {
        let provider = ScriptedProvider::from_json(DEMO, "demo.json").unwrap();
        let (response, events) = play(&provider, &request(0, vec![tool("fs__read")])).await;

        let split = events
            .iter()
            .position(|event| !matches!(event, StreamEvent::TextDelta(_)))
            .unwrap();
        assert!(
            split >= 2,
            "text should arrive in several chunks: {events:?}"
        );
        let text: String = events[..split]
            .iter()
            .map(|event| match event {
                StreamEvent::TextDelta(chunk) => chunk.as_str(),
                _ => "",
            })
            .collect();
        assert_eq!(text, "Let me look at the file first.");

        let read = serde_json::json!({"path": "src/lib.rs"});
        let grep = serde_json::json!({"pattern": "old_name"});
        assert_eq!(
            events[split..],
            [
                StreamEvent::ToolUseStarted {
                    id: "toolu_scripted_0_0".to_string(),
                    name: "fs__read".to_string()
                },
                StreamEvent::ToolUseFinished {
                    id: "toolu_scripted_0_0".to_string(),
                    name: "fs__read".to_string(),
                    input: read.clone(),
                },
                StreamEvent::ToolUseStarted {
                    id: "toolu_scripted_0_1".to_string(),
                    name: "fs__grep".to_string()
                },
                StreamEvent::ToolUseFinished {
                    id: "toolu_scripted_0_1".to_string(),
                    name: "fs__grep".to_string(),
                    input: grep.clone(),
                },
            ]
        );
        assert_eq!(
            response.content[1..],
            [
                Block::ToolUse {
                    id: "toolu_scripted_0_0".to_string(),
                    name: "fs__read".to_string(),
                    input: read,
                },
                Block::ToolUse {
                    id: "toolu_scripted_0_1".to_string(),
                    name: "fs__grep".to_string(),
                    input: grep,
                },
            ]
        );
    }

    #[tokio::test]
    async fn a_turn_of_only_tool_calls_has_no_text() {
        let script = r#"{"turns": [{"tool_calls": [{"tool": "fs.ls"}]}]}"#;
        let provider = ScriptedProvider::from_json(script, "x").unwrap();
        let (response, events) = play(&provider, &request(0, vec![])).await;
        assert_eq!(events.len(), 2);
        assert_eq!(
            response.content,
            vec![Block::ToolUse {
                id: "toolu_scripted_0_0".to_string(),
                name: "fs__ls".to_string(),
                input: serde_json::json!({}),
            }]
        );
        assert_eq!(response.stop_reason, StopReason::ToolUse);
    }

    #[tokio::test]
    async fn says_so_after_the_last_turn() {
        let provider = ScriptedProvider::from_json(DEMO, "demo.json").unwrap();
        let (response, events) = play(&provider, &request(3, vec![])).await;
        assert_eq!(response.stop_reason, StopReason::EndTurn);
        assert_eq!(
            response.content,
            vec![Block::Text {
                text: "(The script has no more turns.)".to_string()
            }]
        );
        assert!(
            events
                .iter()
                .all(|event| matches!(event, StreamEvent::TextDelta(_)))
        );
        let (again, _) = play(&provider, &request(7, vec![])).await;
        assert_eq!(again.content, response.content);
    }

    /// A script whose second turn answers a refused or failed first call.
    const BRANCHING: &str = r#"{"turns": [
        {"text": "Editing.", "tool_calls": [{"tool": "fs.edit", "input": {"path": "a.rs"}}]},
        {"text": "Checking.", "tool_calls": [{"tool": "fs.read", "input": {"path": "a.rs"}}],
         "if_refused": {"text": "The edit was refused; a.rs is unchanged."},
         "if_error": {"text": "The edit failed.", "tool_calls": [{"tool": "fs.read", "input": {"path": "a.rs"}}]}},
        {"text": "Done.", "if_error": {"text": "Something else failed."}}
    ]}"#;

    /// A request after one assistant turn whose calls got `results`
    /// (content, is_error).
    fn after_results(results: &[(&str, bool)]) -> Request {
        let mut request = request(0, vec![tool("fs__read"), tool("fs__edit")]);
        request.messages.push(message(Role::Assistant, "Editing."));
        request.messages.push(Message {
            role: Role::User,
            content: results
                .iter()
                .enumerate()
                .map(|(index, (content, is_error))| Block::ToolResult {
                    tool_use_id: format!("toolu_{index}"),
                    content: (*content).to_string(),
                    is_error: *is_error,
                    images: Vec::new(),
                })
                .collect(),
        });
        request
    }

    async fn text_of(provider: &ScriptedProvider, request: &Request) -> (String, StopReason) {
        let (response, _) = play(provider, request).await;
        let text = match &response.content[0] {
            Block::Text { text } => text.clone(),
            other => panic!("the answer starts with {other:?}"),
        };
        (text, response.stop_reason)
    }

    #[tokio::test]
    async fn a_turn_branches_on_how_the_previous_calls_went() {
        let provider = ScriptedProvider::from_json(BRANCHING, "x").unwrap();
        let refusal = format!("{REFUSAL_PREFIX} `fs.edit` needs permission.");

        let fine = after_results(&[("Replaced 1 occurrence", false)]);
        assert_eq!(
            text_of(&provider, &fine).await,
            ("Checking.".to_string(), StopReason::ToolUse)
        );
        let refused = after_results(&[("Replaced 1 occurrence", false), (&refusal, true)]);
        assert_eq!(
            text_of(&provider, &refused).await,
            (
                "The edit was refused; a.rs is unchanged.".to_string(),
                StopReason::EndTurn
            )
        );
        let failed = after_results(&[("a.rs: no such file", true)]);
        assert_eq!(
            text_of(&provider, &failed).await,
            ("The edit failed.".to_string(), StopReason::ToolUse)
        );
        // A refusal is an error too: without `if_refused`, `if_error` plays.
        let mut third = after_results(&[(&refusal, true)]);
        third
            .messages
            .insert(1, message(Role::Assistant, "Checking."));
        third.messages.insert(2, message(Role::User, "ok"));
        assert_eq!(
            text_of(&provider, &third).await,
            ("Something else failed.".to_string(), StopReason::EndTurn)
        );
        // Successful output that merely starts like a refusal is no refusal.
        let lookalike = after_results(&[(&refusal, false)]);
        assert_eq!(text_of(&provider, &lookalike).await.0, "Checking.");
    }

    #[tokio::test]
    async fn a_new_prompt_after_a_refusal_plays_the_turn_itself() {
        let provider = ScriptedProvider::from_json(BRANCHING, "x").unwrap();
        let refusal = format!("{REFUSAL_PREFIX} no.");
        let mut request = after_results(&[(&refusal, true)]);
        request.messages.push(message(Role::Assistant, "Checking."));
        request.messages.push(message(Role::User, "Try again."));
        assert_eq!(text_of(&provider, &request).await.0, "Done.");
    }

    #[test]
    fn alternatives_are_checked_like_turns() {
        let (_, _, message) = invalid(r#"{"turns": [{"text": "a", "if_refused": {"text": " "}}]}"#);
        assert!(
            message.contains("`if_refused` of turn 1 (counting from 1) has neither"),
            "{message}"
        );
        let (_, _, message) =
            invalid(r#"{"turns": [{"text": "a", "if_error": {"text": "b", "if_refused": {}}}]}"#);
        assert!(message.contains("unknown field `if_refused`"), "{message}");
        let (_, _, message) = invalid(r#"{"turns": [{"text": "a", "if_denied": {"text": "b"}}]}"#);
        assert!(message.contains("unknown field `if_denied`"), "{message}");
        let (_, _, message) = invalid(
            r#"{"turns": [{"text": "a", "if_refused": {"tool_calls": [{"tool": "No-dot"}]}}]}"#,
        );
        assert!(
            message.contains("not of the form `plugin.tool`"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn the_demo_script_tells_the_truth_after_a_refused_edit() {
        let script = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/demo/script.json"),
        )
        .unwrap();
        let provider = ScriptedProvider::from_json(&script, "docs/demo/script.json").unwrap();
        let refusal = format!("{REFUSAL_PREFIX} `fs.edit` needs permission.");
        let mut request = after_results(&[("1:fn greet", false)]);
        request
            .messages
            .push(message(Role::Assistant, "Renaming both:"));
        request.messages.push(Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: "toolu_edit".to_string(),
                content: refusal,
                is_error: true,
                images: Vec::new(),
            }],
        });
        let (text, stop) = text_of(&provider, &request).await;
        assert_eq!(stop, StopReason::EndTurn);
        assert!(!text.contains("is now `welcome`"), "{text}");
        assert!(text.contains("not renamed"), "{text}");
    }

    #[tokio::test]
    async fn delays_pause_before_and_between_chunks() {
        let script = r#"{"chunk_delay_ms": 20, "turns": [
            {"delay_ms": 60, "text": "one two three four five six seven"}]}"#;
        let provider = ScriptedProvider::from_json(script, "x").unwrap();
        let started = std::time::Instant::now();
        let (_, events) = play(&provider, &request(0, vec![])).await;
        assert_eq!(events.len(), 3);
        assert!(started.elapsed() >= Duration::from_millis(100));
    }
}
