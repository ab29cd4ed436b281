//! capstan's stream-json against the real Claude Code's, taken during the
//! test: both CLIs run the same scripted turns on the mock model (a text
//! answer; a tool call, its result and a final text, with partial
//! messages; a run the model's API fails with a 400), and their messages
//! are compared kind by kind, in order, and key by key, type by type. The
//! only differences allowed are listed in [`DIFFERENCES`], each with its
//! reason (docs/headless.md has the same table). Then both official SDKs
//! read what capstan prints: every message parses into a typed message,
//! and a failed run reaches the app as Claude Code's does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::process::Output;

use serde_json::{Value, json};

use crate::support::agent_sdk::{Cli, json_lines, node_modules, run_bounded};
use crate::support::mock_model::{Answer, MockModel, Received, Reply, anthropic_error};
use crate::support::{Env, stderr, stdout};

/// The differences between capstan's messages and Claude Code's that are
/// allowed: `(kind, path, difference)`, where a difference is `missing`
/// (Claude Code has the key, capstan not), `extra` (capstan's own key)
/// or `type X, not Y` (capstan's type X where Claude Code has Y). Each is
/// explained in docs/headless.md's table.
const DIFFERENCES: &[(&str, &str, &str)] = &[
    // system/init
    ("system/init", "memory_paths", "missing"),
    ("system/init", "messaging_socket_path", "missing"),
    ("system/init", "fast_mode_disabled_reason", "missing"),
    ("system/init", "provider", "extra"),
    ("system/init", "hooks", "extra"),
    ("system/init", "resumed", "extra"),
    // assistant messages: capstan gives every answer the usage in the
    // shape of the result's (its SDK's NonNullableUsage).
    ("assistant/text", "message.usage.cache_creation", "extra"),
    ("assistant/text", "message.usage.server_tool_use", "extra"),
    ("assistant/text", "message.usage.service_tier", "extra"),
    (
        "assistant/text",
        "message.usage.output_tokens_details",
        "extra",
    ),
    ("assistant/text", "message.usage.speed", "extra"),
    ("assistant/text", "message.stop_sequence", "extra"),
    (
        "assistant/tool_use",
        "message.usage.cache_creation",
        "extra",
    ),
    (
        "assistant/tool_use",
        "message.usage.server_tool_use",
        "extra",
    ),
    ("assistant/tool_use", "message.usage.service_tier", "extra"),
    (
        "assistant/tool_use",
        "message.usage.output_tokens_details",
        "extra",
    ),
    ("assistant/tool_use", "message.usage.speed", "extra"),
    ("assistant/tool_use", "message.stop_sequence", "extra"),
    // The API error's assistant message.
    ("assistant/api_error", "message.diagnostics", "missing"),
    ("assistant/api_error", "message.container", "missing"),
    ("assistant/api_error", "message.stop_details", "missing"),
    (
        "assistant/api_error",
        "message.usage.output_tokens_details",
        "type object, not null",
    ),
    (
        "assistant/api_error",
        "message.usage.output_tokens_details.thinking_tokens",
        "extra",
    ),
    (
        "assistant/api_error",
        "message.usage.service_tier",
        "type string, not null",
    ),
    (
        "assistant/api_error",
        "message.usage.inference_geo",
        "missing",
    ),
    ("assistant/api_error", "message.usage.iterations", "missing"),
    (
        "assistant/api_error",
        "message.usage.speed",
        "type string, not null",
    ),
    (
        "assistant/api_error",
        "message.usage.fallback_credit",
        "missing",
    ),
    // user tool results
    ("user/tool_result", "tool_result_meta", "missing"),
    ("user/tool_result", "message.content[].is_error", "extra"),
    // stream events
    ("stream_event/message_start", "ttft_ms", "missing"),
    ("stream_event/message_start", "thinking_display", "missing"),
    (
        "stream_event/message_start",
        "event.message.usage.cache_creation_input_tokens",
        "missing",
    ),
    (
        "stream_event/message_start",
        "event.message.usage.cache_read_input_tokens",
        "missing",
    ),
    (
        "stream_event/message_start",
        "event.message.stop_sequence",
        "extra",
    ),
    // result (success and error)
    ("result/success", "usage.inference_geo", "missing"),
    ("result/success", "usage.iterations", "missing"),
    ("result/success", "usage.fallback_credit", "missing"),
    ("result/success", "fast_mode_disabled_reason", "missing"),
    ("result/success", "subagent_stats", "missing"),
    ("result/success", "safety_stops", "missing"),
    ("result/success", "queued_turn_count", "missing"),
    ("result/success", "error", "extra"),
    ("result/success", "error_kind", "extra"),
    ("result/success", "model", "extra"),
    ("result/success", "num_tool_calls", "extra"),
    ("result/api_error", "usage.inference_geo", "missing"),
    ("result/api_error", "usage.iterations", "missing"),
    ("result/api_error", "usage.fallback_credit", "missing"),
    ("result/api_error", "fast_mode_disabled_reason", "missing"),
    ("result/api_error", "subagent_stats", "missing"),
    ("result/api_error", "safety_stops", "missing"),
    ("result/api_error", "queued_turn_count", "missing"),
    ("result/api_error", "error", "extra"),
    ("result/api_error", "error_kind", "extra"),
    ("result/api_error", "model", "extra"),
    ("result/api_error", "num_tool_calls", "extra"),
];

/// Paths whose value differs by tool or by CLI by nature (a tool's input,
/// what a tool reports): only their JSON type is compared.
const OPAQUE: &[&str] = &[
    "tool_use_result",
    "message.content[].input",
    "event.content_block.input",
];

/// The scripted turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// One text answer.
    Text,
    /// A file read, its result, a final text; with partial messages.
    Tool,
    /// The model's API answers every request with a 400.
    Failed,
}

impl Turn {
    fn prompt(self) -> &'static str {
        match self {
            Self::Text => "say hello",
            Self::Tool => "what does a.txt say?",
            Self::Failed => "say hello",
        }
    }

    /// The mock's replies for `cli` in workspace `ws`: the same answers,
    /// the tool call under each CLI's name for reading a file.
    fn replies(self, cli: Cli, ws: &std::path::Path) -> Vec<Reply> {
        match self {
            Self::Text => vec![Reply::sse(Answer::text("Hello there.").anthropic())],
            Self::Tool => {
                let (name, input) = match cli {
                    Cli::ClaudeCode => ("Read", json!({"file_path": ws.join("a.txt")})),
                    Cli::Capstan => ("fs__read", json!({"path": "a.txt"})),
                };
                vec![
                    Reply::sse(
                        Answer::text("Reading it.")
                            .call("toolu_read", name, input)
                            .anthropic(),
                    ),
                    Reply::sse(Answer::text("It says hello.").anthropic()),
                ]
            }
            Self::Failed => (0..20)
                .map(|_| {
                    Reply::status(
                        400,
                        anthropic_error("invalid_request_error", "mock bad request"),
                    )
                })
                .collect(),
        }
    }
}

/// The mock's answer to a request that is not the turn's: one for a
/// path other than the Messages API's, or a small side request (a title,
/// a quota check) — so the script is the turn's alone.
fn aside(request: &Received) -> Option<Reply> {
    let path = request.path.split('?').next().unwrap_or_default();
    if path != "/v1/messages" {
        return Some(Reply::status(
            404,
            anthropic_error("not_found_error", "not served by the mock"),
        ));
    }
    let small = request.body["max_tokens"]
        .as_u64()
        .is_some_and(|n| n < 1024);
    let toolless = request.body["tools"]
        .as_array()
        .is_none_or(|tools| tools.is_empty());
    (small || toolless).then(|| Reply::sse(Answer::text("Side answer.").anthropic()))
}

/// Runs `cli` on `turn` in a fresh environment: its output.
fn run(cli: Cli, turn: Turn) -> Output {
    let env = Env::new();
    env.write("a.txt", "hello\n");
    let mock = MockModel::start_with_aside(turn.replies(cli, &env.ws_path()), aside);
    let mut cmd = env.cli_std(cli, &mock.url());
    cmd.args(["-p", turn.prompt()])
        .args(["--output-format", "stream-json", "--verbose"])
        .arg("--dangerously-skip-permissions");
    if turn == Turn::Tool {
        cmd.arg("--include-partial-messages");
    }
    let out = run_bounded(cmd);
    if turn != Turn::Failed {
        assert_eq!(
            mock.replies_left(),
            0,
            "{cli:?} did not take every scripted reply\n{}",
            stderr(&out)
        );
    }
    out
}

/// The kind of a message for the comparison: its type, and what
/// distinguishes messages of that type.
fn kind(message: &Value) -> String {
    let ty = message["type"].as_str().unwrap_or("?");
    match ty {
        "system" => format!("system/{}", message["subtype"].as_str().unwrap_or("?")),
        "stream_event" => format!(
            "stream_event/{}",
            message["event"]["type"].as_str().unwrap_or("?")
        ),
        "assistant" if message["is_api_error_message"] == true => "assistant/api_error".into(),
        "assistant" => format!(
            "assistant/{}",
            message["message"]["content"][0]["type"]
                .as_str()
                .unwrap_or("?")
        ),
        "user" => format!(
            "user/{}",
            message["message"]["content"][0]["type"]
                .as_str()
                .unwrap_or("?")
        ),
        "result" if message["terminal_reason"] == "api_error" => "result/api_error".into(),
        "result" => format!("result/{}", message["subtype"].as_str().unwrap_or("?")),
        other => other.to_string(),
    }
}

/// The JSON type of `value`.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every path of `value` under `path` with its JSON type; array elements
/// share the path `name[]`; the keys of `modelUsage` maps (model names)
/// become `<model>`.
fn paths(value: &Value, path: &str, into: &mut BTreeMap<String, BTreeSet<&'static str>>) {
    if !path.is_empty() {
        into.entry(path.to_string())
            .or_default()
            .insert(type_name(value));
    }
    if OPAQUE.contains(&path) {
        return;
    }
    let join = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match value {
        Value::Object(fields) => {
            let by_model = path == "modelUsage" || path == "model_usage_since_last_result";
            for (key, field) in fields {
                let key = if by_model { "<model>" } else { key.as_str() };
                paths(field, &join(key), into);
            }
        }
        Value::Array(items) => {
            for item in items {
                paths(item, &format!("{path}[]"), into);
            }
        }
        _ => {}
    }
}

/// The structure of a run's messages: kind → path → types.
type Shapes = BTreeMap<String, BTreeMap<String, BTreeSet<&'static str>>>;

fn shapes(messages: &[Value]) -> Shapes {
    let mut shapes = Shapes::new();
    for message in messages {
        paths(message, "", shapes.entry(kind(message)).or_default());
    }
    shapes
}

/// The kinds of a run's messages in order, consecutive deltas as one.
fn sequence(messages: &[Value]) -> Vec<String> {
    let mut kinds: Vec<String> = messages.iter().map(kind).collect();
    kinds.dedup_by(|a, b| a == b && a == "stream_event/content_block_delta");
    kinds
}

/// Whether `path` lies in the elements of an array that `shape` has only
/// empty (nothing to compare there).
fn in_empty_array(shape: &BTreeMap<String, BTreeSet<&'static str>>, path: &str) -> bool {
    path.match_indices("[]")
        .any(|(at, _)| shape.contains_key(&path[..at]) && !shape.contains_key(&path[..at + 2]))
}

/// Where `capstan`'s structure differs from Claude Code's, as
/// `(kind, path, difference)`.
fn differences(claude: &Shapes, capstan: &Shapes) -> BTreeSet<(String, String, String)> {
    let mut found = BTreeSet::new();
    for (kind, want) in claude {
        let Some(got) = capstan.get(kind) else {
            found.insert((kind.clone(), String::new(), "missing".into()));
            continue;
        };
        for (path, types) in want {
            match got.get(path) {
                None if in_empty_array(got, path) => {}
                None => {
                    // Under a key capstan lacks, one difference says it.
                    let parent_missing = path.rmatch_indices(['.', '[']).any(|(at, _)| {
                        !got.contains_key(&path[..at]) && want.contains_key(&path[..at])
                    });
                    if !parent_missing {
                        found.insert((kind.clone(), path.clone(), "missing".into()));
                    }
                }
                Some(got_types) if got_types != types => {
                    // Claude Code's null for "none" matches capstan's
                    // null beside a value of the same type.
                    let named =
                        |set: &BTreeSet<&str>| set.iter().copied().collect::<Vec<_>>().join("|");
                    found.insert((
                        kind.clone(),
                        path.clone(),
                        format!("type {}, not {}", named(got_types), named(types)),
                    ));
                }
                Some(_) => {}
            }
        }
        for path in got.keys() {
            if !want.contains_key(path) && !in_empty_array(want, path) {
                let parent_extra = path.rmatch_indices(['.', '[']).any(|(at, _)| {
                    !want.contains_key(&path[..at]) && got.contains_key(&path[..at])
                });
                if !parent_extra {
                    found.insert((kind.clone(), path.clone(), "extra".into()));
                }
            }
        }
    }
    for kind in capstan.keys() {
        if !claude.contains_key(kind) {
            found.insert((kind.clone(), String::new(), "extra".into()));
        }
    }
    found
}

#[test]
fn stream_json_has_claude_codes_structure_on_the_same_turns() {
    let mut all_claude = Shapes::new();
    let mut all_capstan = Shapes::new();
    for turn in [Turn::Text, Turn::Tool, Turn::Failed] {
        let claude = run(Cli::ClaudeCode, turn);
        let capstan = run(Cli::Capstan, turn);
        // The same exit code: 0, or 1 for the failed run.
        assert_eq!(
            capstan.status.code(),
            claude.status.code(),
            "{turn:?}: exit code\ncapstan stderr: {}",
            stderr(&capstan)
        );
        // Nothing on stderr with --verbose, as Claude Code.
        assert_eq!(stderr(&capstan), "", "{turn:?}: capstan's stderr");
        let claude_messages = json_lines(&claude);
        let capstan_messages = json_lines(&capstan);
        assert!(
            !claude_messages.is_empty(),
            "Claude Code printed nothing: {}",
            stderr(&claude)
        );
        // The same messages in the same order.
        assert_eq!(
            sequence(&capstan_messages),
            sequence(&claude_messages),
            "{turn:?}: the messages' kinds in order\ncapstan: {}\nClaude Code: {}",
            stdout(&capstan),
            stdout(&claude)
        );
        for (kind, paths) in shapes(&claude_messages) {
            let merged = all_claude.entry(kind).or_default();
            for (path, types) in paths {
                merged.entry(path).or_default().extend(types);
            }
        }
        for (kind, paths) in shapes(&capstan_messages) {
            let merged = all_capstan.entry(kind).or_default();
            for (path, types) in paths {
                merged.entry(path).or_default().extend(types);
            }
        }
        // The failed run's values, beyond their types.
        if turn == Turn::Failed {
            let result = |messages: &[Value]| messages.last().cloned().unwrap();
            let (theirs, ours) = (result(&claude_messages), result(&capstan_messages));
            for key in [
                "subtype",
                "is_error",
                "api_error_status",
                "api_error_type",
                "terminal_reason",
                "stop_reason",
            ] {
                assert_eq!(ours[key], theirs[key], "result.{key}\n{ours}\n{theirs}");
            }
            assert!(
                ours["result"].as_str().unwrap().starts_with("API Error: "),
                "{ours}"
            );
            assert!(
                ours["result"]
                    .as_str()
                    .unwrap()
                    .contains("mock bad request")
            );
        }
        // Each answer's blocks share the answer's message id.
        if turn == Turn::Tool {
            let ids: Vec<&Value> = capstan_messages
                .iter()
                .filter(|m| m["type"] == "assistant")
                .map(|m| &m["message"]["id"])
                .collect();
            assert_eq!(ids.len(), 3, "{}", stdout(&capstan));
            assert_eq!(ids[0], ids[1]);
            assert_ne!(ids[1], ids[2]);
        }
    }
    let found = differences(&all_claude, &all_capstan);
    let allowed: BTreeSet<(String, String, String)> = DIFFERENCES
        .iter()
        .map(|(k, p, d)| (k.to_string(), p.to_string(), d.to_string()))
        .collect();
    let undocumented: Vec<_> = found.difference(&allowed).collect();
    let stale: Vec<_> = allowed.difference(&found).collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "differences from Claude Code not in DIFFERENCES:\n{undocumented:#?}\nlisted but gone:\n{stale:#?}"
    );
}

/// A Python app: the turn's `query`, each message as its SDK class and
/// fields, the exception that ended it, and any message the SDK skipped
/// as unknown (its parser logs those).
const PY_APP: &str = r#"
import anyio, dataclasses, json, logging, os, sys
from claude_agent_sdk import query, ClaudeAgentOptions

skipped = []
class Catch(logging.Handler):
    def emit(self, record):
        text = record.getMessage()
        if "nknown" in text:
            skipped.append(text)
logger = logging.getLogger("claude_agent_sdk")
logger.setLevel(logging.DEBUG)
logger.addHandler(Catch())

async def main():
    options = ClaudeAgentOptions(
        cli_path=os.environ["CLI"], cwd=os.environ["WS"],
        permission_mode="bypassPermissions",
        include_partial_messages=os.environ.get("PARTIAL") == "1",
    )
    try:
        async for message in query(prompt=os.environ["PROMPT"], options=options):
            print(json.dumps({"kind": type(message).__name__, **dataclasses.asdict(message)}, default=str), flush=True)
    except Exception as error:
        print(json.dumps({"kind": "raised", "class": type(error).__name__,
                          "exit_code": getattr(error, "exit_code", None)}), flush=True)
    for text in skipped:
        print(json.dumps({"kind": "skipped", "text": text}), flush=True)

anyio.run(main)
"#;

/// The same app in TypeScript: each message as the SDK yields it, and
/// what it threw. (The default permission mode: reading a file of the
/// workspace asks no one in either CLI.)
const JS_APP: &str = r#"
import { query } from "@anthropic-ai/claude-agent-sdk";
const options = {
    pathToClaudeCodeExecutable: process.env.CLI, cwd: process.env.WS,
    includePartialMessages: process.env.PARTIAL === "1",
};
try {
    for await (const message of query({ prompt: process.env.PROMPT, options })) {
        console.log(JSON.stringify(message));
    }
} catch (error) {
    console.log(JSON.stringify({ type: "thrown", message: String(error && error.message) }));
}
"#;

/// Runs the app `source` (Python or JavaScript) with `cli` on `turn`.
fn app(cli: Cli, turn: Turn, python: bool, source: &str) -> Vec<Value> {
    let env = Env::new();
    env.write("a.txt", "hello\n");
    let mock = MockModel::start_with_aside(turn.replies(cli, &env.ws_path()), aside);
    // The programs read the prompt and whether to stream partial
    // messages from their environment, set by a first line.
    let wrapped = format!(
        "{}{}",
        if python {
            format!(
                "import os\nos.environ['PROMPT'] = {:?}\nos.environ['PARTIAL'] = {:?}\n",
                turn.prompt(),
                if turn == Turn::Tool { "1" } else { "0" }
            )
        } else {
            format!(
                "process.env.PROMPT = {:?};\nprocess.env.PARTIAL = {:?};\n",
                turn.prompt(),
                if turn == Turn::Tool { "1" } else { "0" }
            )
        },
        source
    );
    let out = if python {
        env.sdk_python(cli, &mock.url(), &wrapped)
    } else {
        env.sdk_node(cli, &mock.url(), &wrapped)
    };
    let messages = json_lines(&out);
    assert!(
        !messages.is_empty(),
        "{cli:?}: the app printed nothing\n{}",
        stderr(&out)
    );
    messages
}

#[test]
fn python_sdk_reads_every_message_and_a_failed_run_as_claude_codes() {
    for turn in [Turn::Tool, Turn::Failed] {
        let ours = app(Cli::Capstan, turn, true, PY_APP);
        let skipped: Vec<&Value> = ours.iter().filter(|m| m["kind"] == "skipped").collect();
        assert!(skipped.is_empty(), "{turn:?}: skipped {skipped:#?}");
        let theirs = app(Cli::ClaudeCode, turn, true, PY_APP);
        let classes = |messages: &[Value]| {
            let mut kinds: Vec<String> = messages
                .iter()
                .map(|m| m["kind"].as_str().unwrap().to_string())
                .collect();
            kinds.dedup();
            kinds
        };
        assert_eq!(classes(&ours), classes(&theirs), "{turn:?}\n{ours:#?}");
        let result = |messages: &[Value]| {
            messages
                .iter()
                .find(|m| m["kind"] == "ResultMessage")
                .cloned()
                .unwrap_or_else(|| panic!("no ResultMessage: {messages:#?}"))
        };
        let (our_result, their_result) = (result(&ours), result(&theirs));
        for key in [
            "subtype",
            "is_error",
            "api_error_status",
            "terminal_reason",
            "stop_reason",
        ] {
            assert_eq!(
                our_result[key], their_result[key],
                "{turn:?}: ResultMessage.{key}\n{our_result}\n{their_result}"
            );
        }
        let raised = |messages: &[Value]| messages.iter().find(|m| m["kind"] == "raised").cloned();
        assert_eq!(raised(&ours), raised(&theirs), "{turn:?}: what was raised");
        if turn == Turn::Failed {
            // The app sees the API's error as the result's text and in
            // the assistant message, then the CLI's exit as an exception.
            assert!(
                our_result["result"]
                    .as_str()
                    .unwrap()
                    .contains("mock bad request"),
                "{our_result}"
            );
            let said = ours
                .iter()
                .find(|m| m["kind"] == "AssistantMessage")
                .unwrap();
            assert_eq!(said["error"], "invalid_request", "{said}");
            assert_eq!(raised(&ours).unwrap()["exit_code"], 1);
        } else {
            assert_eq!(our_result["result"], "It says hello.");
        }
    }
}

/// The `(type, subtype)` pairs of the messages the TypeScript SDK
/// declares (`SDKMessage` in its sdk.d.ts); a subtype of `None` for a
/// message type that has none.
fn declared_messages() -> BTreeSet<(String, Option<String>)> {
    // The file has CRLF line ends.
    let dts =
        std::fs::read_to_string(node_modules().join("@anthropic-ai/claude-agent-sdk/sdk.d.ts"))
            .unwrap()
            .replace("\r\n", "\n");
    let union = dts
        .split("export declare type SDKMessage = ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .expect("sdk.d.ts declares SDKMessage");
    let literal = |line: &str, field: &str| {
        line.strip_prefix(&format!("    {field}: '"))
            .and_then(|rest| rest.split('\'').next())
            .map(str::to_string)
    };
    let mut declared = BTreeSet::new();
    for name in union.split('|').map(str::trim) {
        let Some(body) = dts
            .split(&format!("export declare type {name} = {{\n"))
            .nth(1)
            .and_then(|rest| rest.split("\n};").next())
        else {
            continue;
        };
        let ty = body.lines().find_map(|l| literal(l, "type"));
        let subtypes: Vec<String> = body
            .lines()
            .filter(|l| l.starts_with("    subtype: "))
            .flat_map(|l| {
                l.split('\'')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect();
        if let Some(ty) = ty {
            if subtypes.is_empty() {
                declared.insert((ty.clone(), None));
            }
            for subtype in subtypes {
                declared.insert((ty.clone(), Some(subtype)));
            }
        }
    }
    // SDKResultMessage is a union of its own.
    declared.insert(("result".into(), Some("success".into())));
    declared
}

#[test]
fn typescript_sdk_yields_only_declared_messages_and_a_failed_run_as_claude_codes() {
    let declared = declared_messages();
    assert!(
        declared.contains(&("system".into(), Some("init".into()))),
        "{declared:?}"
    );
    for turn in [Turn::Tool, Turn::Failed] {
        let ours = app(Cli::Capstan, turn, false, JS_APP);
        for message in ours.iter().filter(|m| m["type"] != "thrown") {
            let ty = message["type"].as_str().unwrap().to_string();
            let subtype = message["subtype"].as_str().map(str::to_string);
            let known = declared.contains(&(ty.clone(), subtype.clone()))
                || (ty != "system" && declared.contains(&(ty.clone(), None)));
            assert!(known, "{turn:?}: not an SDKMessage: {message}");
        }
        let theirs = app(Cli::ClaudeCode, turn, false, JS_APP);
        let kinds = |messages: &[Value]| {
            let mut kinds: Vec<String> = messages
                .iter()
                .map(|m| match m["type"].as_str().unwrap() {
                    "thrown" => "thrown".to_string(),
                    _ => kind(m),
                })
                .collect();
            kinds.dedup_by(|a, b| a == b && a == "stream_event/content_block_delta");
            kinds
        };
        assert_eq!(kinds(&ours), kinds(&theirs), "{turn:?}\n{ours:#?}");
        let result = |messages: &[Value]| {
            messages
                .iter()
                .find(|m| m["type"] == "result")
                .cloned()
                .unwrap_or_else(|| panic!("no result: {messages:#?}"))
        };
        let (our_result, their_result) = (result(&ours), result(&theirs));
        for key in [
            "subtype",
            "is_error",
            "api_error_status",
            "terminal_reason",
            "stop_reason",
        ] {
            assert_eq!(
                our_result[key], their_result[key],
                "{turn:?}: result.{key}\n{our_result}\n{their_result}"
            );
        }
        // The same error reaches the app: the SDK's words, then the
        // result's text (whose wording is each CLI's own).
        let thrown = |messages: &[Value]| {
            messages
                .iter()
                .find(|m| m["type"] == "thrown")
                .map(|m| m["message"].as_str().unwrap().to_string())
        };
        match (thrown(&ours), thrown(&theirs)) {
            (None, None) => assert_eq!(turn, Turn::Tool),
            (Some(ours), Some(theirs)) => {
                let words = "Claude Code returned an error result: API Error: ";
                assert!(theirs.starts_with(words), "{theirs}");
                assert!(ours.starts_with(words), "{ours}");
                assert!(ours.contains("mock bad request"), "{ours}");
            }
            (ours, theirs) => panic!("{turn:?}: capstan threw {ours:?}, Claude Code {theirs:?}"),
        }
    }
}
