//! Skills end to end: the real `capstan` binary discovering `SKILL.md`
//! folders from every source, listing them, settling clashes, putting
//! them in the system prompt within a budget, loading them through the
//! `skill` tool in sessions against the mock model server (arguments,
//! supporting files, `allowed-tools`, inline shell run read-only in the sandbox,
//! `disable-model-invocation`, `user-invocable`, `/name args`), a skill
//! component installed and loaded, and a Claude Code plugin folder imported
//! with its agents and hooks sandboxed and its other native parts refused.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use support::mock_model::{Answer, MockModel, Reply};
use support::{Env, assert_exit, fixture, repo_root, stderr, stdout};

const RUN_TIMEOUT: Duration = Duration::from_secs(90);

/// `capstan -p PROMPT` against the mock as an Anthropic server.
fn session(env: &Env, mock: &MockModel, prompt: &str) -> assert_cmd::Command {
    let mut cmd = env.anthropic_session(&mock.url(), "sk-ant-mock", "mock-model", prompt);
    cmd.timeout(RUN_TIMEOUT);
    cmd
}

fn run(cmd: &mut assert_cmd::Command) -> Output {
    cmd.output().expect("run capstan")
}

/// Writes `NAME/SKILL.md` under `root` with `front` (front matter lines)
/// and `body`.
fn write_skill(root: &Path, name: &str, front: &str, body: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\n{front}\n---\n{body}"),
    )
    .unwrap();
    dir
}

fn project_skills(env: &Env) -> PathBuf {
    env.ws.path().join(".capstan/skills")
}

fn user_skills(env: &Env) -> PathBuf {
    env.home.path().join("skills")
}

fn skill_list_json(env: &Env) -> Value {
    let output = run(env.capstan().args(["skill", "list", "--json"]));
    assert_exit(&output, 0);
    serde_json::from_str(&stdout(&output)).unwrap()
}

/// Skill `name` as `capstan skill list --json` shows it.
fn listed_skill(env: &Env, name: &str) -> Value {
    let list = skill_list_json(env);
    list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no skill {name} in {list:#}"))
}

/// Installs the plugin folder `plugin`, consenting.
fn install(env: &Env, plugin: &Path) {
    let output = run(env
        .capstan()
        .args(["plugin", "install"])
        .arg(plugin)
        .arg("--yes"));
    assert_exit(&output, 0);
}

#[test]
fn skills_are_discovered_from_every_source_and_clashes_say_which_won() {
    let env = Env::new();
    write_skill(
        &project_skills(&env),
        "project-skill",
        "description: From .capstan.",
        "P\n",
    );
    write_skill(
        &project_skills(&env),
        "shared",
        "description: The project's shared.",
        "P\n",
    );
    write_skill(
        &user_skills(&env),
        "user-skill",
        "description: From the user's folder.",
        "U\n",
    );
    write_skill(
        &user_skills(&env),
        "shared",
        "description: The user's shared.",
        "U\n",
    );
    write_skill(
        &env.ws.path().join(".claude/skills"),
        "claude-project",
        "description: From .claude/skills.",
        "C\n",
    );
    write_skill(
        &env.home.path().join(".claude/skills"),
        "claude-user",
        "description: From ~/.claude/skills.",
        "CU\n",
    );
    // Malformed front matter: skipped with the file and line, the rest load.
    let broken = project_skills(&env).join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(
        broken.join("SKILL.md"),
        "---\nname: broken\ndescription: ok\nuser-invocable: perhaps\n---\nbody\n",
    )
    .unwrap();

    let list = skill_list_json(&env);
    let skills = list["skills"].as_array().unwrap();
    let by_name = |name: &str| {
        skills
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {list:#}"))
    };
    assert_eq!(by_name("project-skill")["source"], "project");
    assert_eq!(by_name("user-skill")["source"], "user");
    assert_eq!(by_name("claude-project")["source"], "claude-project");
    assert_eq!(by_name("claude-user")["source"], "claude-user");
    assert_eq!(by_name("shared")["source"], "project");
    assert_eq!(by_name("shared")["description"], "The project's shared.");
    assert!(skills.iter().all(|s| s["name"] != "broken"));
    assert_eq!(list["shadowed"][0]["name"], "shared");
    assert_eq!(list["shadowed"][0]["loser"]["source"], "user");
    let warnings = list["warnings"].to_string();
    assert!(
        warnings.contains("broken/SKILL.md:4") && warnings.contains("user-invocable"),
        "{warnings}"
    );
    assert!(
        warnings.contains("using the one from .capstan/skills"),
        "{warnings}"
    );

    // The text listing says the same.
    let output = run(env.capstan().args(["skill", "list"]));
    assert_exit(&output, 0);
    let out = stdout(&output);
    assert!(out.contains("not used: .capstan/skills wins"), "{out}");
    assert!(
        stderr(&output).contains("broken/SKILL.md:4"),
        "{}",
        stderr(&output)
    );

    let output = run(env.capstan().args(["skill", "show", "user-skill"]));
    assert_exit(&output, 0);
    assert!(stdout(&output).contains("From the user's folder."));
    let output = run(env.capstan().args(["skill", "show", "nope"]));
    assert_exit(&output, 2);
    assert!(stderr(&output).contains("no skill called `nope`"));

    // A session warns about the clash and the broken file at its start.
    let mock = MockModel::start(vec![Reply::sse(Answer::text("ok").anthropic())]);
    let output = run(&mut session(&env, &mock, "hi"));
    assert_exit(&output, 0);
    let err = stderr(&output);
    assert!(err.contains("skill `shared` is offered by both"), "{err}");
    assert!(err.contains("broken/SKILL.md:4"), "{err}");
}

#[test]
fn the_model_sees_skills_and_loads_one_with_arguments_and_its_files() {
    let env = Env::new();
    let dir = write_skill(
        &user_skills(&env),
        "review-pr",
        "description: Reviews a pull request.\nwhen_to_use: The user asks for a PR review.\nargument-hint: \"[pr] [focus]\"",
        "Review PR $0 focusing on $1. All: $ARGUMENTS. Index: $ARGUMENTS[1].\nSee ${CLAUDE_SKILL_DIR}/checklist.md.\n",
    );
    std::fs::write(dir.join("checklist.md"), "CHECKLIST-CONTENT\n").unwrap();
    std::fs::write(env.outside.path().join("secret.txt"), "TOP-SECRET").unwrap();
    write_skill(
        &project_skills(&env),
        "hidden-from-model",
        "description: Only for the user.\ndisable-model-invocation: true",
        "Hidden body\n",
    );
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("Loading the skill.")
                .call(
                    "t1",
                    "skill",
                    json!({"name": "review-pr", "arguments": "123 \"error handling\""}),
                )
                .anthropic(),
        ),
        Reply::sse(
            Answer::text("Reading its checklist.")
                .call(
                    "t2",
                    "skill",
                    json!({"name": "review-pr", "resource": "checklist.md"}),
                )
                .call(
                    "t3",
                    "skill",
                    json!({"name": "review-pr", "resource": "../../../secret.txt"}),
                )
                .call("t4", "skill", json!({"name": "hidden-from-model"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("Reviewed.").anthropic()),
    ]);
    let output = run(&mut session(&env, &mock, "review PR 123"));
    assert_exit(&output, 0);
    let received = mock.received();
    assert_eq!(received.len(), 3);

    let prompt = received[0].system_text();
    assert!(prompt.contains("# Skills"), "{prompt}");
    assert!(
        prompt.contains(
            "- review-pr: Reviews a pull request. When to use: The user asks for a PR review."
        ),
        "{prompt}"
    );
    assert!(!prompt.contains("hidden-from-model"), "{prompt}");
    let tools = received[0].body["tools"].as_array().unwrap();
    let skill_tool = tools.iter().find(|t| t["name"] == "skill").unwrap();
    assert_eq!(skill_tool["input_schema"]["required"], json!(["name"]));

    let (loaded, is_error) = received[1].tool_result("t1");
    assert!(!is_error, "{loaded}");
    assert!(
        loaded.contains("Review PR 123 focusing on error handling. All: 123 \"error handling\". Index: error handling."),
        "{loaded}"
    );
    let dir_text = dir.canonicalize().unwrap_or(dir.clone());
    assert!(
        loaded.contains(&format!("{}/checklist.md", dir.display()))
            || loaded.contains(&format!("{}/checklist.md", dir_text.display())),
        "{loaded}"
    );
    assert!(loaded.contains("resource"), "{loaded}");

    let (file, is_error) = received[2].tool_result("t2");
    assert!(!is_error && file.contains("CHECKLIST-CONTENT"), "{file}");
    let (escape, is_error) = received[2].tool_result("t3");
    assert!(is_error && !escape.contains("TOP-SECRET"), "{escape}");
    let (hidden, is_error) = received[2].tool_result("t4");
    assert!(
        is_error && hidden.contains("only the user can run it"),
        "{hidden}"
    );
}

#[test]
fn many_skills_are_cut_to_the_budget_users_own_first() {
    let env = Env::new();
    let long = "x".repeat(180);
    for i in 0..60 {
        write_skill(
            &user_skills(&env),
            &format!("user-{i:02}"),
            &format!("description: User skill {i} {long}"),
            "U\n",
        );
    }
    for i in 0..5 {
        write_skill(
            &project_skills(&env),
            &format!("project-{i}"),
            &format!("description: Project skill {i} {long}"),
            "P\n",
        );
    }
    let mock = MockModel::start(vec![Reply::sse(Answer::text("ok").anthropic())]);
    let output = run(&mut session(&env, &mock, "hi"));
    assert_exit(&output, 0);
    let prompt = mock.received()[0].system_text();
    let section = &prompt[prompt.find("\n# Skills\n").unwrap()..];
    for i in 0..5 {
        assert!(section.contains(&format!("- project-{i}:")), "{section}");
    }
    let users = (0..60)
        .filter(|i| section.contains(&format!("- user-{i:02}:")))
        .count();
    assert!(users > 0 && users < 60, "{users} user skills listed");
    // The earliest discovered user skills are kept, the last ones cut.
    assert!(section.contains("- user-00:") && !section.contains("- user-59:"));
    assert!(
        section.contains(&format!("{} more skills are not listed", 60 - users)),
        "{section}"
    );
    let entries: usize = section
        .lines()
        .filter(|l| l.starts_with("- "))
        .map(|l| l.chars().count() + 1)
        .sum();
    assert!(entries <= 8000, "{entries} characters of entries");
    assert!(stderr(&output).contains("left out of the model's list"));
}

#[test]
fn allowed_tools_pre_approve_until_the_turn_ends_and_restrict_nothing() {
    let env = Env::new();
    env.write("notes.txt", "hello\n");
    write_skill(
        &project_skills(&env),
        "note-taker",
        "description: Writes notes.\nallowed-tools: Read, fs.write\ndisallowed-tools: LS",
        "Take notes.\n",
    );
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call("t1", "skill", json!({"name": "note-taker"}))
                .anthropic(),
        ),
        Reply::sse(
            Answer::text("")
                .call("t2", "fs__ls", json!({"path": "."}))
                .call("t3", "fs__read", json!({"path": "notes.txt"}))
                .call(
                    "t4",
                    "fs__write",
                    json!({"path": "out.txt", "content": "written"}),
                )
                .call("t5", "fs__grep", json!({"pattern": "hello"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("Done.").anthropic()),
    ]);
    let output = run(&mut session(&env, &mock, "take notes"));
    assert_exit(&output, 0);
    let received = mock.received();
    let (refused, is_error) = received[2].tool_result("t2");
    assert!(is_error, "{refused}");
    assert!(
        refused.contains("the skill `note-taker` is active") && refused.contains("fs.ls"),
        "{refused}"
    );
    let (read, is_error) = received[2].tool_result("t3");
    assert!(!is_error && read.contains("hello"), "{read}");
    // Pre-approved: print mode cannot ask, and the write still runs.
    let (written, is_error) = received[2].tool_result("t4");
    assert!(!is_error, "{written}");
    assert_eq!(env.read("out.txt"), "written");
    // Not listed and not disallowed: runs as the mode decides.
    let (grep, is_error) = received[2].tool_result("t5");
    assert!(!is_error && grep.contains("notes.txt"), "{grep}");

    // The next turn (a resumed session) has no active skill: listing runs,
    // and a write is decided by the mode again.
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call("t6", "fs__ls", json!({"path": "."}))
                .call(
                    "t7",
                    "fs__write",
                    json!({"path": "out2.txt", "content": "x"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Listed.").anthropic()),
    ]);
    let output = run(session(&env, &mock, "list files").arg("--continue"));
    assert_exit(&output, 0);
    let (listed, is_error) = mock.received()[1].tool_result("t6");
    assert!(!is_error && listed.contains("notes.txt"), "{listed}");
    let (denied, is_error) = mock.received()[1].tool_result("t7");
    assert!(is_error && denied.contains("Permission denied"), "{denied}");
    assert!(!env.ws.path().join("out2.txt").exists());
}

#[test]
fn allowed_tools_never_pass_a_deny_rule_or_plan_mode() {
    let env = Env::new();
    write_skill(
        &project_skills(&env),
        "writer",
        "description: Claims it may write.\nallowed-tools: fs.write, Write",
        "Write things.\n",
    );
    let script = || {
        MockModel::start(vec![
            Reply::sse(
                Answer::text("")
                    .call("t1", "skill", json!({"name": "writer"}))
                    .anthropic(),
            ),
            Reply::sse(
                Answer::text("")
                    .call(
                        "t2",
                        "fs__write",
                        json!({"path": "out.txt", "content": "written"}),
                    )
                    .anthropic(),
            ),
            Reply::sse(Answer::text("ok").anthropic()),
        ])
    };
    let mock = script();
    let output = run(session(&env, &mock, "write").args(["--deny", "fs.write"]));
    assert_exit(&output, 0);
    let (denied, is_error) = mock.received()[2].tool_result("t2");
    assert!(
        is_error && denied.contains("denied by the rule"),
        "{denied}"
    );

    let mock = script();
    let output = run(session(&env, &mock, "write").args(["--permission-mode", "plan"]));
    assert_exit(&output, 0);
    let (planned, is_error) = mock.received()[2].tool_result("t2");
    assert!(is_error && planned.contains("plan mode"), "{planned}");
    assert!(!env.ws.path().join("out.txt").exists());
}

/// A skill's inline shell runs in the sandbox, read-only: a write into the
/// workspace is refused, and the text says what the command lacked.
#[test]
fn inline_shell_in_a_skill_runs_read_only() {
    let env = Env::new();
    let marker = env.ws.path().join("marker");
    let marker2 = env.ws.path().join("marker2");
    write_skill(
        &project_skills(&env),
        "shelly",
        "description: Has inline shell.",
        &format!(
            "Status: !`touch {}`\n\n```!\ntouch {}\n```\n\nThen go on.\n",
            marker.display(),
            marker2.display()
        ),
    );
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call("t1", "skill", json!({"name": "shelly"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("ok").anthropic()),
    ]);
    let output = run(&mut session(&env, &mock, "go"));
    assert_exit(&output, 0);
    let (loaded, _) = mock.received()[1].tool_result("t1");
    assert!(
        loaded.contains("Read-only file system")
            && loaded.contains("it lacked: write the workspace"),
        "{loaded}"
    );
    assert!(
        !marker.exists() && !marker2.exists(),
        "a skill's inline shell ran"
    );

    // Run by the user as /shelly: the same.
    let mock = MockModel::start(vec![Reply::sse(Answer::text("ok").anthropic())]);
    let output = run(&mut session(&env, &mock, "/shelly"));
    assert_exit(&output, 0);
    let text = mock.received()[0].first_user_text();
    assert!(text.contains("Read-only file system"), "{text}");
    assert!(
        !marker.exists() && !marker2.exists(),
        "a skill's inline shell ran"
    );
    let output = run(env.capstan().args(["skill", "show", "shelly"]));
    assert_exit(&output, 0);
    assert!(!marker.exists());
}

#[test]
fn slash_name_in_print_mode_runs_the_skill_and_honours_invocability() {
    let env = Env::new();
    write_skill(
        &project_skills(&env),
        "deploy",
        "description: Deploys.\ndisable-model-invocation: true\nargument-hint: <env>",
        "Deploy to $0 now.\n",
    );
    write_skill(
        &project_skills(&env),
        "background",
        "description: Background knowledge.\nuser-invocable: false",
        "Background.\n",
    );
    let mock = MockModel::start(vec![Reply::sse(Answer::text("Deployed.").anthropic())]);
    let output = run(&mut session(&env, &mock, "/deploy staging"));
    assert_exit(&output, 0);
    let request = &mock.received()[0];
    let text = request.first_user_text();
    assert!(
        text.contains("The user ran the skill /deploy with arguments: staging"),
        "{text}"
    );
    assert!(text.contains("Deploy to staging now."), "{text}");
    assert!(!request.system_text().contains("- deploy:"));
    assert!(request.system_text().contains("- background:"));

    let mock = MockModel::start(vec![]);
    let output = run(&mut session(&env, &mock, "/background"));
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("user-invocable: false"),
        "{}",
        stderr(&output)
    );
    assert!(mock.received().is_empty());

    let output = run(&mut session(&env, &mock, "/no-such-skill x"));
    assert_exit(&output, 2);
    assert!(stderr(&output).contains("no skill called `no-such-skill`"));
}

#[test]
fn the_scripted_model_can_load_a_skill() {
    let env = Env::new();
    write_skill(
        &project_skills(&env),
        "greeting",
        "description: How to greet.",
        "Greet $0 warmly.\n",
    );
    let script = env.outside.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"turns": [
            {"text": "Loading.", "tool_calls": [{"tool": "skill", "input": {"name": "greeting", "arguments": "Ada"}}]},
            {"text": "Hello, Ada!"}
        ]}"#,
    )
    .unwrap();
    let output = run(env
        .capstan()
        .env("NO_COLOR", "1")
        .args(["--model", &format!("scripted:{}", script.display())])
        .args(["--output-format", "stream-json", "--capstan-events"])
        .args(["-p", "greet Ada"])
        .timeout(RUN_TIMEOUT));
    assert_exit(&output, 0);
    let events: Vec<Value> = stdout(&output)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let init = events.iter().find(|e| e["subtype"] == "init").unwrap();
    assert_eq!(init["skills"], json!(["greeting"]));
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_result" && e["tool"] == "skill")
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(result["is_error"], false);
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("Greet Ada warmly."),
        "{result}"
    );
}

/// A plugin folder holding the `skill-kit` fixture component.
fn skill_kit_plugin(env: &Env) -> PathBuf {
    let dir = env.outside.path().join("skill-kit");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixture("skill-kit"), dir.join("skill_kit.wasm")).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        "name = \"skill-kit\"\nversion = \"0.1.0\"\ndescription = \"Computed skills\"\ncomponents = [\"skill_kit.wasm\"]\n\n[capabilities]\nfs = [{ path = \"$WORKSPACE\", access = \"read\" }]\n",
    )
    .unwrap();
    dir
}

#[test]
fn a_skill_component_is_installed_listed_and_loaded_under_its_grants() {
    let env = Env::new();
    env.write("VERSION", "9.9.9\n");
    let plugin = skill_kit_plugin(&env);
    install(&env, &plugin);

    let output = run(env.capstan().args(["plugin", "info", "skill-kit"]));
    assert_exit(&output, 0);
    let info = stdout(&output);
    assert!(info.contains("exports skill"), "{info}");
    assert!(
        info.contains("skills:") && info.contains("release-notes"),
        "{info}"
    );

    let notes = listed_skill(&env, "release-notes");
    assert_eq!(notes["source"], "plugin");
    assert_eq!(notes["plugin"], "skill-kit");
    assert_eq!(notes["argument_hint"], "[version]");

    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "t1",
                    "skill",
                    json!({"name": "release-notes", "arguments": "2.0 beta"}),
                )
                .anthropic(),
        ),
        Reply::sse(
            Answer::text("")
                .call(
                    "t2",
                    "skill",
                    json!({"name": "release-notes", "resource": "template.md"}),
                )
                .call("t3", "skill", json!({"name": "maintainer-only"}))
                .call("t4", "fs__ls", json!({"path": "."}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("Drafted.").anthropic()),
    ]);
    let output = run(&mut session(&env, &mock, "release notes please"));
    assert_exit(&output, 0);
    let received = mock.received();
    let prompt = received[0].system_text();
    assert!(
        prompt.contains("- release-notes: Drafts release notes"),
        "{prompt}"
    );
    assert!(!prompt.contains("maintainer-only"), "{prompt}");
    let (loaded, is_error) = received[1].tool_result("t1");
    assert!(!is_error, "{loaded}");
    assert!(
        loaded.contains("Draft release notes for 2.0 (computed with 2 argument(s))"),
        "{loaded}"
    );
    assert!(loaded.contains("The VERSION file says 9.9.9."), "{loaded}");
    let (template, is_error) = received[2].tool_result("t2");
    assert!(
        !is_error && template.contains("TEMPLATE-MARKER"),
        "{template}"
    );
    let (denied, is_error) = received[2].tool_result("t3");
    assert!(is_error && denied.contains("only the user"), "{denied}");
    // Its allowed-tools (fs.read, fs.grep) pre-approve; they restrict
    // nothing, so t4 is decided by the mode as usual.
    let (t4, is_error) = received[2].tool_result("t4");
    assert!(!is_error && !t4.contains("is active"), "{t4}");

    // The user runs it as /release-notes.
    let mock = MockModel::start(vec![Reply::sse(Answer::text("ok").anthropic())]);
    let output = run(&mut session(&env, &mock, "/release-notes 3.1"));
    assert_exit(&output, 0);
    let text = mock.received()[0].first_user_text();
    assert!(text.contains("Draft release notes for 3.1"), "{text}");
}

#[test]
fn a_claude_code_plugin_folder_is_imported_with_its_native_parts_refused() {
    let env = Env::new();
    let source = repo_root().join("tests/fixtures/claude-code-plugin");
    let output = run(env
        .capstan()
        .args(["plugin", "install"])
        .arg(&source)
        .arg("--yes"));
    assert_exit(&output, 0);
    let err = stderr(&output);
    for expected in [
        "review-kit 1.4.2",
        "skills   commands/deploy.md, skills/changelog/SKILL.md, skills/code-review/SKILL.md",
        "inline commands in skills/code-review/SKILL.md run when the skill loads, in the OS sandbox",
        "command hook  hooks/hooks.json: PreToolUse for Write, Edit: ",
        "runs `${CLAUDE_PLUGIN_ROOT}/scripts/check.sh` in the OS sandbox: reads the workspace and the plugin's folder (read-only), no network",
        "command hook  hooks/hooks.json: PostToolUse for Write, Edit: ",
        "MCP servers (their tools become mcp__PLUGIN-SERVER__TOOL):",
        "docs: connects to https://mcp.example.com/docs (that origin only)",
        "tracker: runs `${CLAUDE_PLUGIN_ROOT}/bin/tracker-server --stdio` in the OS sandbox: the workspace and the plugin's folder (its files checked against the lock before each start) read-only, no network, no secrets; variables TRACKER_TOKEN",
        "agent    agents/security-reviewer.md: sub-agent `security-reviewer`: tools Read, Grep; the workspace is read-only for it, commands included; no network",
        "files    kept in the plugin's folder, which the model may read (read-only); none is run but by the command hooks and MCP servers above:",
        "    bin/: 1 executable\n",
        "    scripts/: 2 shell scripts\n",
        "    skills/code-review/scripts/: 1 Python script\n",
    ] {
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
    }
    assert!(stdout(&output).contains("installed review-kit 1.4.2"));

    let output = run(env.capstan().args(["plugin", "info", "review-kit"]));
    assert_exit(&output, 0);
    let info = stdout(&output);
    assert!(
        info.contains("skills:") && info.contains("code-review"),
        "{info}"
    );
    // Every part of it is installed: nothing is listed as left out.
    assert!(
        !info.contains("not installed from the Claude Code plugin:"),
        "{info}"
    );
    // The whole folder is stored, for the model to read; only the command
    // hooks run, in the OS sandbox.
    assert!(info.contains("mcp-servers.json"), "{info}");
    assert!(
        info.contains("  bin/tracker-server\n"),
        "bin/tracker-server was not stored:\n{info}"
    );
    for sandboxed in [
        "  hooks/hooks.json\n",
        "  scripts/check.sh\n",
        "  agents/security-reviewer.md\n",
    ] {
        assert!(
            info.contains(sandboxed),
            "{sandboxed:?} was not stored:\n{info}"
        );
    }
    assert!(
        info.contains("skills/code-review/references/checklist.md"),
        "{info}"
    );

    let list = skill_list_json(&env);
    let skills = list["skills"].as_array().unwrap();
    let names: Vec<&str> = skills.iter().map(|s| s["name"].as_str().unwrap()).collect();
    for name in ["code-review", "changelog", "deploy"] {
        assert!(names.contains(&name), "{names:?}");
    }
    let deploy = skills.iter().find(|s| s["name"] == "deploy").unwrap();
    assert_eq!(deploy["user_invocable"], true);
    assert_eq!(deploy["argument_hint"], "<environment>");

    // In a session the skill loads from the store, its inline shell runs
    // in the sandbox (the workspace is no git repository, so git fails and
    // the text says so), and its checklist comes through the skill tool.
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "t1",
                    "skill",
                    json!({"name": "code-review", "arguments": "feature-x"}),
                )
                .anthropic(),
        ),
        Reply::sse(
            Answer::text("")
                .call(
                    "t2",
                    "skill",
                    json!({"name": "code-review", "resource": "references/checklist.md"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Reviewed.").anthropic()),
    ]);
    let output = run(&mut session(&env, &mock, "review feature-x"));
    assert_exit(&output, 0);
    let received = mock.received();
    let (loaded, is_error) = received[1].tool_result("t1");
    assert!(!is_error, "{loaded}");
    assert!(loaded.contains("Review feature-x."), "{loaded}");
    assert!(
        !loaded.contains("NOT executed")
            && !loaded.contains("!`git")
            && loaded.contains("inline commands run in capstan's sandbox"),
        "{loaded}"
    );
    let (checklist, is_error) = received[2].tool_result("t2");
    assert!(
        !is_error && checklist.contains("CHECKLIST-MARKER"),
        "{checklist}"
    );

    // A skill file changed in the store is refused, not loaded.
    let store_file = walk_find(
        &env.home.path().join("plugins"),
        "skills/code-review/SKILL.md",
    )
    .unwrap();
    std::fs::write(
        &store_file,
        "---\nname: code-review\ndescription: evil\n---\nEvil\n",
    )
    .unwrap();
    let list = skill_list_json(&env);
    assert!(
        list["skills"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["name"] != "code-review"),
        "{list:#}"
    );
    assert!(
        list["warnings"]
            .to_string()
            .contains("has changed since it was installed")
    );
}

#[test]
fn a_claude_code_plugin_installs_from_a_tar_gz_too() {
    let env = Env::new();
    let source = repo_root().join("tests/fixtures/claude-code-plugin");
    let archive = env.outside.path().join("review-kit.tar.gz");
    let file = std::fs::File::create(&archive).unwrap();
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    tar.follow_symlinks(false);
    tar.append_dir_all("review-kit", &source).unwrap();
    tar.into_inner().unwrap().finish().unwrap();
    let output = run(env
        .capstan()
        .args(["plugin", "install"])
        .arg(&archive)
        .arg("--yes"));
    assert_exit(&output, 0);
    assert!(stderr(&output).contains("command hook  hooks/hooks.json: PreToolUse for Write, Edit"));
    let list = skill_list_json(&env);
    assert!(list["skills"].to_string().contains("code-review"));
}

fn walk_find(dir: &Path, suffix: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = walk_find(&path, suffix) {
                return Some(found);
            }
        } else if path.to_string_lossy().ends_with(suffix) {
            return Some(path);
        }
    }
    None
}

#[test]
fn capstan_new_skill_without_a_language_writes_a_skill_md_plugin_that_installs_and_loads() {
    let env = Env::new();
    let output = run(env.capstan().args(["new", "skill", "review-it"]));
    assert_exit(&output, 0);
    let project = env.ws.path().join("review-it");
    let skill_md = project.join("skills/review-it/SKILL.md");
    assert!(skill_md.is_file(), "{}", stdout(&output));
    assert!(project.join("skills/review-it/checklist.md").is_file());
    assert!(stdout(&output).contains("capstan plugin install . --yes"));

    // Nothing to build; the build says so and succeeds.
    let output = run(env.capstan().args(["plugin", "build"]).arg(&project));
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("nothing to build"),
        "{}",
        stdout(&output)
    );

    install(&env, &project);
    let skill = listed_skill(&env, "review-it");
    assert_eq!(skill["source"], "plugin");
    assert_eq!(skill["argument_hint"], "[files or folder]");

    // Loaded by the model, with its arguments and its supporting file.
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "t1",
                    "skill",
                    json!({"name": "review-it", "arguments": "src/"}),
                )
                .call(
                    "t2",
                    "skill",
                    json!({"name": "review-it", "resource": "checklist.md"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Reviewed.").anthropic()),
    ]);
    let output = run(&mut session(&env, &mock, "review src/"));
    assert_exit(&output, 0);
    let requests = mock.received();
    let (text, is_error) = requests[1].tool_result("t1");
    assert!(!is_error && text.contains("Review src/."), "{text}");
    let (text, is_error) = requests[1].tool_result("t2");
    assert!(!is_error && text.contains("checklist"), "{text}");

    // A tool or hook still needs a language.
    let output = run(env.capstan().args(["new", "tool", "weather"]));
    assert_exit(&output, 2);
    assert!(stderr(&output).contains("--lang"), "{}", stderr(&output));
}

#[test]
fn a_skill_component_whose_files_changed_or_whose_audit_log_fails_is_skipped() {
    let env = Env::new();
    env.write("VERSION", "9.9.9\n");
    install(&env, &skill_kit_plugin(&env));
    let names = |list: &Value| -> Vec<String> {
        list["skills"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(names(&skill_list_json(&env)).contains(&"release-notes".to_string()));

    // Its manifest changed in the store, not the component it runs: every
    // stored file is checked, as for tools and hooks, so its skills are
    // left out, with the reason.
    let manifest = walk_find(&env.home.path().join("plugins/store"), "plugin.toml").unwrap();
    let original = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        original.replace("access = \"read\"", "access = \"read-write\""),
    )
    .unwrap();
    let list = skill_list_json(&env);
    assert!(
        !names(&list).contains(&"release-notes".to_string()),
        "{list:#}"
    );
    let warnings = list["warnings"].to_string();
    assert!(
        warnings.contains("skill-kit") && warnings.contains("plugin.toml"),
        "{warnings}"
    );
    // Nor can the model load one in a session.
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call("t1", "skill", json!({"name": "release-notes"}))
                .anthropic(),
        ),
        Reply::sse(Answer::text("ok").anthropic()),
    ]);
    let output = run(&mut session(&env, &mock, "notes"));
    assert_exit(&output, 0);
    for request in mock.received() {
        assert!(
            !request.body.to_string().contains("The VERSION file says"),
            "{}",
            request.body
        );
    }
    std::fs::write(&manifest, original).unwrap();

    // Its audit log cannot be opened: its skills are left out too, rather
    // than run unaudited.
    let log = env.home.path().join("audit/audit.jsonl");
    let _ = std::fs::remove_file(&log);
    std::fs::create_dir_all(&log).unwrap();
    let list = skill_list_json(&env);
    assert!(
        !names(&list).contains(&"release-notes".to_string()),
        "{list:#}"
    );
    let warnings = list["warnings"].to_string();
    assert!(
        warnings.contains("skill-kit") && warnings.contains("audit log"),
        "{warnings}"
    );
}
