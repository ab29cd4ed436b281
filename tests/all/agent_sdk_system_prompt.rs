//! The Agent SDKs' system prompts against the real `capstan` binary, in
//! each form Claude Code takes (measured on Claude Code 2.1.330, see
//! docs/headless.md): none or empty (Python's `--system-prompt ""`,
//! TypeScript's `systemPrompt: [""]` in `initialize`) keeps capstan's
//! identity, the workspace and the project's instructions but no tool
//! guidance; a string replaces the prompt but keeps the workspace and the
//! instructions; the `claude_code` preset is capstan's own prompt, with
//! its `append` after it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::Env;
use crate::support::agent_sdk::Cli;
use crate::support::mock_model::{Answer, MockModel, Reply};

/// Marks capstan's own prompt (its tool guidance).
const OWN: &str = "# How to work";
/// The start of capstan's prompt, also kept when replaced with nothing.
const IDENTITY: &str = "You are capstan";

const PY_FORMS: &str = r#"
import anyio, os
from claude_agent_sdk import query, ClaudeAgentOptions

FORMS = [None, "STRING-PROMPT-MARKER",
         {"type": "preset", "preset": "claude_code", "append": "APPENDED-MARKER"},
         {"type": "preset", "preset": "claude_code"}]

async def main():
    for form in FORMS:
        options = ClaudeAgentOptions(cli_path=os.environ["CLI"], cwd=os.environ["WS"], system_prompt=form)
        async for message in query(prompt="hi", options=options):
            pass
        print("DONE", flush=True)

anyio.run(main)
"#;

const JS_FORMS: &str = r#"
import { query } from "@anthropic-ai/claude-agent-sdk";
const forms = [undefined, "STRING-PROMPT-MARKER",
    { type: "preset", preset: "claude_code", append: "APPENDED-MARKER" },
    { type: "preset", preset: "claude_code" }];
for (const systemPrompt of forms) {
    const options = { pathToClaudeCodeExecutable: process.env.CLI, cwd: process.env.WS, systemPrompt };
    for await (const message of query({ prompt: "hi", options })) {}
    console.log("DONE");
}
"#;

fn check(sdk: &str) {
    let env = Env::new();
    env.write("CLAUDE.md", "PROJECT-RULES-MARKER\n");
    let mock = MockModel::start(
        (0..4)
            .map(|_| Reply::sse(Answer::text("ok").anthropic()))
            .collect(),
    );
    let out = match sdk {
        "python" => env.sdk_python(Cli::Capstan, &mock.url(), PY_FORMS),
        _ => env.sdk_node(Cli::Capstan, &mock.url(), JS_FORMS),
    };
    let received = mock.received();
    assert_eq!(
        received.len(),
        4,
        "{sdk}:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let systems: Vec<String> = received.iter().map(|r| r.system_text()).collect();
    let workspace = env.ws_path().display().to_string();
    // Every form keeps the workspace and the project's instructions.
    for system in &systems {
        assert!(system.contains(&workspace), "{sdk}: {system}");
        assert!(system.contains("PROJECT-RULES-MARKER"), "{sdk}: {system}");
    }
    // None: capstan's identity, no tool guidance.
    assert!(systems[0].starts_with(IDENTITY), "{sdk}: {}", systems[0]);
    assert!(!systems[0].contains(OWN), "{sdk}: {}", systems[0]);
    // A string: it, no tool guidance.
    assert!(
        systems[1].starts_with("STRING-PROMPT-MARKER"),
        "{sdk}: {}",
        systems[1]
    );
    assert!(!systems[1].contains(OWN), "{sdk}: {}", systems[1]);
    // The preset with append: capstan's own, then the append.
    assert!(systems[2].contains(OWN), "{sdk}: {}", systems[2]);
    assert!(
        systems[2].trim_end().ends_with("APPENDED-MARKER"),
        "{sdk}: {}",
        systems[2]
    );
    // The preset alone: capstan's own.
    assert!(systems[3].contains(OWN), "{sdk}: {}", systems[3]);
    assert!(
        !systems[3].contains("APPENDED-MARKER"),
        "{sdk}: {}",
        systems[3]
    );
}

#[test]
fn python_sdk_system_prompt_forms_reach_the_model() {
    check("python");
}

#[test]
fn typescript_sdk_system_prompt_forms_reach_the_model() {
    check("typescript");
}
