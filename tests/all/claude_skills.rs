//! Skills and commands written for Claude Code behave as their authors
//! meant, through the real binary and the mock model: arguments
//! (`$ARGUMENTS`, `$0`, missing positionals, quotes, named arguments,
//! `$2.5M`, escapes), `allowed-tools` as pre-approval and
//! `disallowed-tools` as a block while the skill is active, every Claude
//! Code tool name mapped or reported, display-style and `_` names,
//! `plugin:name` with two plugins offering one name, the project's and the
//! user's `.claude/commands/`, and suggestions for an unknown `/name`.
//! The fixtures are in `tests/fixtures/claude-code-compat/`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use support::mock_model::{Answer, MockModel, Reply};
use support::{Env, assert_exit, repo_root, stderr, stdout};

const RUN_TIMEOUT: Duration = Duration::from_secs(120);

fn fixtures() -> PathBuf {
    repo_root().join("tests/fixtures/claude-code-compat")
}

/// Copies the folder `from` into `to`, recursively.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// An environment with the fixture project's `.claude/commands/` in the
/// workspace and the fixture user's `~/.claude/commands/` in `$HOME`.
fn env_with_commands() -> Env {
    let env = Env::new();
    copy_tree(&fixtures().join("project"), env.ws.path());
    copy_tree(&fixtures().join("home"), env.home.path());
    env
}

/// `capstan -p PROMPT` against the mock, with the system PATH (so
/// commands find `git`).
fn session(env: &Env, mock: &MockModel, prompt: &str, args: &[&str]) -> Output {
    let mut cmd = env.anthropic_session(&mock.url(), "sk-ant-mock", "mock-model", prompt);
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(args)
        .timeout(RUN_TIMEOUT);
    cmd.output().unwrap()
}

/// The first user message of a `-p PROMPT` run that answers at once.
fn prompt_text(env: &Env, prompt: &str) -> String {
    let mock = MockModel::start(vec![Reply::sse(Answer::text("ok").anthropic())]);
    let output = session(env, &mock, prompt, &[]);
    assert_exit(&output, 0);
    mock.received()[0].first_user_text()
}

/// Installs a fixture plugin, consenting.
fn install(env: &Env, name: &str) {
    let output = env
        .capstan()
        .args(["plugin", "install"])
        .arg(fixtures().join(name))
        .arg("--yes")
        .output()
        .unwrap();
    assert_exit(&output, 0);
}

/// The `command_run` audit records of `call_id`.
fn commands_run(env: &Env, call_id: &str) -> usize {
    support::audit_records(env)
        .iter()
        .filter(|r| r["kind"] == "command_run" && r["call_id"] == call_id)
        .count()
}

#[test]
fn arguments_are_substituted_as_claude_code_does() {
    let env = env_with_commands();
    let text = prompt_text(&env, "/pitch \"Acme Robotics\" logistics");
    assert!(
        text.contains(
            "First: Acme Robotics. Second: logistics. Third: $ARGUMENTS[2]. All: \"Acme Robotics\" logistics."
        ),
        "{text}"
    );
    assert!(
        text.contains("Named: Acme Robotics in logistics. Year 2: $2.5M ARR, up from $1k."),
        "{text}"
    );
    // A named argument with none for it is empty; a backslash keeps a
    // placeholder as written and is dropped.
    assert!(
        text.contains("Lead: []. Kept: $0 costs $1.50; awk '{print $1}'."),
        "{text}"
    );
    assert!(!text.contains("ARGUMENTS: "), "{text}");

    // No arguments: every positional stays as written, prices too; named
    // ones are empty, as in Claude Code.
    let text = prompt_text(&env, "/pitch");
    assert!(
        text.contains("First: $0. Second: $1. Third: $ARGUMENTS[2]. All: .\nNamed:  in . Year 2: $2.5M ARR, up from $1k.\nLead: []. Kept: $0 costs $1.50;"),
        "{text}"
    );

    // A third argument is what `$2` stands for, as in Claude Code, and
    // the name with a `-` in it.
    let text = prompt_text(&env, "/pitch a b c");
    assert!(
        text.contains("Third: c.") && text.contains("Year 2: c.5M ARR"),
        "{text}"
    );
    assert!(
        text.contains("Lead: [c]. Kept: $0 costs $1.50; awk '{print $1}'."),
        "{text}"
    );

    // No placeholder: the arguments are appended.
    let text = prompt_text(&env, "/plain src/ --short");
    assert!(
        text.contains("Summarise the workspace.\n\nARGUMENTS: src/ --short"),
        "{text}"
    );
}

#[test]
fn every_claude_code_tool_name_maps_or_is_reported() {
    let env = env_with_commands();
    let text = prompt_text(&env, "/triage");
    // Mapped: the MCP server wildcard and `Task`.
    assert!(
        text.contains("these run without asking, within the permission mode and deny rules: `mcp__github__*`, `task`."),
        "{text}"
    );
    // A refusal naming one agent refuses them all; WebSearch is web.search.
    assert!(
        text.contains("these tools are refused: `task`, `WebSearch`."),
        "{text}"
    );
    assert!(
        text.contains("`Agent(deployer)` refuses every call of `task`"),
        "{text}"
    );
    // Reported, with the reason, never kept as a rule matching nothing.
    for (name, why) in [
        ("TodoWrite", "no to-do list tool"),
        ("NotebookEdit", "no notebook tool"),
        ("Reed", "no tool of that name"),
        ("Agent(reviewer)", "nothing is pre-approved"),
    ] {
        assert!(
            text.contains(&format!("(Ignored from its front matter: `{name}`: "))
                && text.contains(why),
            "{name}: {text}"
        );
    }
}

#[test]
fn allowed_tools_of_only_bash_entries_pre_approve_and_restrict_nothing() {
    let env = env_with_commands();
    env.write("notes.txt", "NOTES-CONTENT\n");
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Staging.")
                .call("read", "fs__read", json!({"path": "notes.txt"}))
                .call(
                    "add",
                    "exec__run",
                    json!({"command": "git add notes.txt", "write": true}),
                )
                .call(
                    "other",
                    "exec__run",
                    json!({"command": "touch made-by-other", "write": true}),
                )
                .call(
                    "chained",
                    "exec__run",
                    json!({"command": "git add notes.txt && touch made-by-chain", "write": true}),
                )
                .call("push", "exec__run", json!({"command": "git push"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("Committed.").anthropic()),
    ]);
    let output = session(&env, &mock, "/commit", &[]);
    assert_exit(&output, 0);
    let text = mock.received()[0].first_user_text();
    assert!(text.contains("run without asking"), "{text}");
    assert!(text.contains("`Bash(git add:*)`"), "{text}");

    // Not listed, still allowed: reading.
    let (read, is_error) = mock.tool_result("read");
    assert!(!is_error && read.contains("NOTES-CONTENT"), "{read}");
    // Pre-approved: `git add` with a writable workspace runs without a
    // question, which this run could not have asked.
    let (added, _) = mock.tool_result("add");
    assert!(added.starts_with("exit code"), "{added}");
    assert_eq!(commands_run(&env, "add"), 1);
    // Not covered: decided by the mode, which asks, and -p cannot ask.
    let (other, is_error) = mock.tool_result("other");
    assert!(is_error && other.contains("Permission denied"), "{other}");
    assert!(!env.ws.path().join("made-by-other").exists());
    // A compound command is not pre-approved by its first word.
    let (chained, is_error) = mock.tool_result("chained");
    assert!(
        is_error && chained.contains("Permission denied"),
        "{chained}"
    );
    assert!(!env.ws.path().join("made-by-chain").exists());
    // disallowed-tools: refused while the command is active.
    let (push, is_error) = mock.tool_result("push");
    assert!(
        is_error && push.contains("`commit` is active") && push.contains("Bash(git push:*)"),
        "{push}"
    );
    assert_eq!(commands_run(&env, "push"), 0);

    // The next turn has no active skill: `git add` is decided by the mode.
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "add2",
                    "exec__run",
                    json!({"command": "git add notes.txt", "write": true}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("ok").anthropic()),
    ]);
    let output = session(&env, &mock, "stage again", &["--continue"]);
    assert_exit(&output, 0);
    let (again, is_error) = mock.tool_result("add2");
    assert!(is_error && again.contains("Permission denied"), "{again}");
    assert_eq!(commands_run(&env, "add2"), 0);
}

#[test]
fn pre_approval_never_passes_plan_mode_or_a_deny_rule() {
    let env = env_with_commands();
    let script = |id: &str| {
        MockModel::start(vec![
            Reply::sse(
                Answer::text("")
                    .call(
                        id,
                        "exec__run",
                        json!({"command": "git add x", "write": true}),
                    )
                    .anthropic(),
            ),
            Reply::sse(Answer::text("ok").anthropic()),
        ])
    };
    let mock = script("planned");
    let output = session(&env, &mock, "/commit", &["--permission-mode", "plan"]);
    assert_exit(&output, 0);
    let (planned, is_error) = mock.tool_result("planned");
    assert!(is_error && planned.contains("plan mode"), "{planned}");

    let mock = script("denied");
    let output = session(&env, &mock, "/commit", &["--deny", "Bash(git add:*)"]);
    assert_exit(&output, 0);
    let (denied, is_error) = mock.tool_result("denied");
    assert!(
        is_error && denied.contains("denied by the rule `Bash(git add:*)`"),
        "{denied}"
    );
    assert_eq!(
        commands_run(&env, "planned") + commands_run(&env, "denied"),
        0
    );

    // Pre-approval never gives a command the network.
    env.write(
        ".claude/commands/fetch.md",
        "---\ndescription: Fetches.\nallowed-tools: Bash(curl:*)\n---\nFetch it.\n",
    );
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "net",
                    "exec__run",
                    json!({"command": "curl -s https://example.com", "net": ["https://example.com"]}),
                )
                .call("local", "exec__run", json!({"command": "curl --version", "write": true}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("ok").anthropic()),
    ]);
    let output = session(&env, &mock, "/fetch", &[]);
    assert_exit(&output, 0);
    let (net, is_error) = mock.tool_result("net");
    assert!(is_error && net.contains("Permission denied"), "{net}");
    assert_eq!(commands_run(&env, "net"), 0);
    let (local, _) = mock.tool_result("local");
    assert!(!local.contains("Permission denied"), "{local}");
    assert_eq!(commands_run(&env, "local"), 1);
}

#[test]
fn plugins_sharing_a_skill_name_stay_reachable_by_qualified_names() {
    let env = Env::new();
    install(&env, "tools-one");
    install(&env, "tools-two");

    let list = env
        .capstan()
        .args(["skill", "list", "--json"])
        .output()
        .unwrap();
    assert_exit(&list, 0);
    let list: Value = serde_json::from_str(&stdout(&list)).unwrap();
    let skills = list["skills"].as_array().unwrap();
    let call_names: Vec<&str> = skills
        .iter()
        .map(|s| s["call_name"].as_str().unwrap())
        .collect();
    for name in [
        "tools-one:review",
        "tools-two:review",
        "agent-development",
        "clean-gone",
        "tidy",
    ] {
        assert!(call_names.contains(&name), "{name} in {call_names:?}");
    }
    let agent = skills
        .iter()
        .find(|s| s["name"] == "agent-development")
        .unwrap();
    assert_eq!(agent["display_name"], "Agent Development");
    let clean = skills.iter().find(|s| s["name"] == "clean-gone").unwrap();
    assert_eq!(clean["display_name"], "clean_gone");
    assert_eq!(clean["kind"], "command");
    // Within one plugin the skill wins over the command of the same name.
    let tidy = skills.iter().find(|s| s["name"] == "tidy").unwrap();
    assert_eq!(tidy["kind"], "skill");
    assert!(
        list["shadowed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "tidy"),
        "{list:#}"
    );

    // /plugin:name, and the bare name when it is unique, `_` as typed.
    assert!(prompt_text(&env, "/tools-two:review src/").contains("REVIEW-BY-TOOLS-TWO of src/."));
    assert!(prompt_text(&env, "/tools-one:review src/").contains("REVIEW-BY-TOOLS-ONE of src/."));
    assert!(prompt_text(&env, "/clean_gone").contains("CLEAN-GONE-BODY"));
    assert!(prompt_text(&env, "/tools-one:clean_gone").contains("CLEAN-GONE-BODY"));
    assert!(prompt_text(&env, "/tidy").contains("TIDY-SKILL-BODY"));
    // A plugin's command in a sub-folder is `plugin:folder:name`, and the
    // bare name while it is unique.
    assert!(prompt_text(&env, "/tools-one:git:sync main").contains("GIT-SYNC-BODY for main."));
    assert!(prompt_text(&env, "/sync dev").contains("GIT-SYNC-BODY for dev."));

    // The bare shared name says which qualified names exist.
    let mock = MockModel::start(vec![]);
    let output = session(&env, &mock, "/review src/", &[]);
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(
        err.contains("tools-one:review") && err.contains("tools-two:review"),
        "{err}"
    );
    assert!(mock.received().is_empty());

    // `capstan skill show` takes qualified names too.
    let show = env
        .capstan()
        .args(["skill", "show", "tools-two:review"])
        .output()
        .unwrap();
    assert_exit(&show, 0);
    assert!(
        stdout(&show).contains("REVIEW-BY-TOOLS-TWO"),
        "{}",
        stdout(&show)
    );
    let show = env
        .capstan()
        .args(["skill", "show", "Agent Development"])
        .output()
        .unwrap();
    assert_exit(&show, 0);
    assert!(stdout(&show).contains("AGENT-DEVELOPMENT-BODY"));

    // The model sees qualified names where a name is shared, and loads by
    // them; the bare name tells it which exist.
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "q",
                    "skill",
                    json!({"name": "tools-two:review", "arguments": "lib"}),
                )
                .call("bare", "skill", json!({"name": "review"}))
                .call("display", "skill", json!({"name": "Agent Development"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("ok").anthropic()),
    ]);
    let output = session(&env, &mock, "review lib", &[]);
    assert_exit(&output, 0);
    let prompt = mock.received()[0].system_text();
    assert!(
        prompt.contains("- tools-one:review: Reviews code the tools-one way."),
        "{prompt}"
    );
    assert!(prompt.contains("- tools-two:review:"), "{prompt}");
    assert!(
        prompt.contains("- agent-development (Agent Development):"),
        "{prompt}"
    );
    let (loaded, is_error) = mock.tool_result("q");
    assert!(
        !is_error && loaded.contains("REVIEW-BY-TOOLS-TWO of lib."),
        "{loaded}"
    );
    let (bare, is_error) = mock.tool_result("bare");
    assert!(
        is_error && bare.contains("tools-one:review, tools-two:review"),
        "{bare}"
    );
    let (display, is_error) = mock.tool_result("display");
    assert!(
        !is_error && display.contains("AGENT-DEVELOPMENT-BODY"),
        "{display}"
    );
}

#[test]
fn project_and_user_claude_commands_are_read_with_sub_folders_as_namespaces() {
    let env = env_with_commands();
    assert!(prompt_text(&env, "/mine today").contains("MINE-BODY with today"));
    assert!(prompt_text(&env, "/frontend:component Button").contains("FRONTEND-COMPONENT Button"));
    assert!(prompt_text(&env, "/backend:component Queue").contains("BACKEND-COMPONENT Queue"));
    let mock = MockModel::start(vec![]);
    let output = session(&env, &mock, "/component x", &[]);
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(
        err.contains("backend:component") && err.contains("frontend:component"),
        "{err}"
    );

    let list = env
        .capstan()
        .args(["skill", "list", "--json"])
        .output()
        .unwrap();
    assert_exit(&list, 0);
    let list: Value = serde_json::from_str(&stdout(&list)).unwrap();
    let source_of = |name: &str| {
        list["skills"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["call_name"] == name)
            .map(|s| s["source"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("no {name} in {list:#}"))
    };
    assert_eq!(source_of("mine"), "claude-user-commands");
    assert_eq!(source_of("pitch"), "claude-project-commands");
    assert_eq!(source_of("frontend:component"), "claude-project-commands");
}

#[test]
fn an_unknown_name_suggests_the_closest_few_not_every_skill() {
    let env = env_with_commands();
    for i in 0..60 {
        env.write(
            &format!(".claude/commands/generated-{i}.md"),
            format!("Generated command {i}.\n"),
        );
    }
    let mock = MockModel::start(vec![]);
    let output = session(&env, &mock, "/pich acme", &[]);
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(err.contains("did you mean `pitch`"), "{err}");
    assert!(!err.contains("generated-"), "{err}");

    let output = session(&env, &mock, "/zzzzzzzz", &[]);
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(err.contains("capstan skill list"), "{err}");
    assert!(!err.contains("generated-"), "{err}");
    assert!(mock.received().is_empty());
}

/// The interactive session takes the same names: `/namespace:name`, an
/// ambiguous bare name, and a typo answered with the closest few.
#[test]
fn the_interactive_session_runs_qualified_names_and_suggests_for_typos() {
    let _responsive = support::load::needs_a_responsive_machine();
    let env = env_with_commands();
    for i in 0..60 {
        env.write(
            &format!(".claude/commands/generated-{i}.md"),
            format!("Generated command {i}.\n"),
        );
    }
    let script = env.home.path().join("script.json");
    std::fs::write(
        &script,
        json!({ "turns": [ { "text": "Component made." } ] }).to_string(),
    )
    .unwrap();
    let mut cmd = env.capstan_std();
    for var in support::MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("NO_COLOR", "1")
        .arg("--model")
        .arg(format!("scripted:{}", script.display()));
    let mut terminal = support::terminal::Terminal::spawn(cmd);
    terminal.expect("Ctrl-D exits");
    terminal.expect("> ");

    terminal.type_slowly("/pich\r");
    let typo = terminal.expect("/help lists them all");
    assert!(typo.contains("did you mean /pitch"), "{typo}");
    assert!(!typo.contains("generated-"), "{typo}");
    terminal.type_slowly("/component\r");
    let ambiguous = terminal.expect("use one of these names");
    assert!(
        ambiguous.contains("backend:component") && ambiguous.contains("frontend:component"),
        "{ambiguous}"
    );
    terminal.type_slowly("/frontend:component Button\r");
    terminal.expect("Component made.");
    terminal.expect("> ");
    terminal.type_slowly("/exit\r");
    let status = terminal.wait();
    assert_eq!(status.code(), Some(0), "{}", terminal.screen());

    let transcripts: Vec<String> = walk(&env.home.path().join("sessions"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(
        transcripts
            .iter()
            .any(|t| t.contains("FRONTEND-COMPONENT Button")),
        "{transcripts:?}"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
