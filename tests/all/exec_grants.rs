//! Plugins that run native programs through `exec` grants, and planted
//! code kept inert for components, through the real binary: the first-party
//! git plugin commits in a temporary repository; no argv outside its grant
//! runs (audited); a hostile component granted one program cannot run
//! another; no component write lands in `.git` and the other protected
//! paths; consent, update and malformed manifests speak of the grant.
//!
//! These tests run as root here: the sandbox must hold for root too.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Output};

use serde_json::{Value, json};
use support::mock_model::script;
use support::{Env, fixture, stderr, stdout, target_dir};

/// Who commits, passed to the git plugin through its env grants.
const IDENTITY: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "Test Author"),
    ("GIT_AUTHOR_EMAIL", "author@example.com"),
    ("GIT_COMMITTER_NAME", "Test Author"),
    ("GIT_COMMITTER_EMAIL", "author@example.com"),
];

fn plugin(env: &Env, args: &[&str]) -> Output {
    env.capstan().arg("plugin").args(args).output().unwrap()
}

fn install(env: &Env, source: &Path) -> Output {
    let out = plugin(env, &["install", source.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "install failed: {}", stderr(&out));
    out
}

/// `git` run by the test itself (outside capstan) in `dir`.
fn host_git(dir: &Path, args: &[&str]) -> String {
    let out = StdCommand::new("git")
        .args(args)
        .current_dir(dir)
        .envs(IDENTITY)
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    stdout(&out)
}

/// A git repository in the workspace with one untracked file.
fn repository(env: &Env) {
    host_git(env.ws.path(), &["init", "-q", "-b", "main"]);
    env.write("notes.txt", "first line\n");
}

/// The git plugin's package, as the build script prepared it.
fn git_package() -> PathBuf {
    let path = target_dir().join("plugins/git");
    assert!(
        path.join("plugin.toml").is_file(),
        "{} was not built",
        path.display()
    );
    path
}

/// The git plugin's `[capabilities]`, as its manifest writes them.
fn git_capabilities() -> String {
    let manifest = std::fs::read_to_string(git_package().join("plugin.toml")).unwrap();
    let start = manifest.find("[capabilities]").unwrap();
    manifest[start..].to_string()
}

/// A package of the hostile fixture named `name`, at `version`, with
/// `capabilities` (a `[capabilities]` table). The fixture imports sockets,
/// so it is granted one origin it never uses.
fn hostile_package(root: &Path, name: &str, version: &str, capabilities: &str) -> PathBuf {
    let capabilities = capabilities.replacen(
        "[capabilities]\n",
        "[capabilities]\nnet = [\"https://unused.example.com\"]\n",
        1,
    );
    let dir = root.join(format!("{name}-{version}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixture("hostile"), dir.join("tool.wasm")).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        format!(
            "name = \"{name}\"\nversion = \"{version}\"\ndescription = \"Tries to get out\"\ncomponents = [\"tool.wasm\"]\n\n{capabilities}"
        ),
    )
    .unwrap();
    dir
}

/// Calls `tool` with `input` and the commit identity.
fn call(env: &Env, tool: &str, input: &str, extra: &[&str]) -> Output {
    env.call(tool, input, extra)
        .envs(IDENTITY)
        .output()
        .unwrap()
}

/// The audit log's records of `kind`.
fn audit(env: &Env, kind: &str) -> Vec<Value> {
    let text =
        std::fs::read_to_string(env.home.path().join("audit/audit.jsonl")).unwrap_or_default();
    text.lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|record| record["kind"] == kind)
        .collect()
}

#[test]
fn the_git_plugin_shows_its_grant_and_commits_in_a_temporary_repository() {
    let env = Env::new();
    repository(&env);
    let out = install(&env, &git_package());
    let consent = stderr(&out);
    assert!(consent.contains("programs run git ("), "{consent}");
    assert!(
        consent.contains("with `status **`, `diff **`, `log **`, `show **`"),
        "{consent}"
    );
    assert!(
        consent.contains("with `add -- **`, `commit -F - **`; it may write .git"),
        "{consent}"
    );
    // The program was resolved when the grant was made, and recorded.
    let lock = std::fs::read_to_string(env.home.path().join("plugins/capstan.lock")).unwrap();
    assert!(lock.contains("program = \"git\""), "{lock}");
    assert!(lock.contains("path = \"/"), "{lock}");
    let info = plugin(&env, &["info", "git"]);
    assert!(
        stdout(&info).contains("programs run git ("),
        "{}",
        stdout(&info)
    );

    let out = call(&env, "git.status", "{}", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("?? notes.txt"), "{}", stdout(&out));

    let out = call(&env, "git.add", r#"{"paths":["notes.txt"]}"#, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("A  notes.txt"), "{}", stdout(&out));

    let out = call(
        &env,
        "git.commit",
        r#"{"message":"Add the notes\n\nThe first line of them."}"#,
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let subjects = host_git(env.ws.path(), &["log", "--format=%s|%an"]);
    assert_eq!(subjects, "Add the notes|Test Author\n");

    env.write("notes.txt", "first line\nsecond line\n");
    let out = call(&env, "git.diff", "{}", &[]);
    assert!(stdout(&out).contains("+second line"), "{}", stdout(&out));
    let out = call(&env, "git.log", "{}", &[]);
    assert!(stdout(&out).contains("Add the notes"), "{}", stdout(&out));
    let out = call(&env, "git.show", r#"{"rev":"HEAD","stat":true}"#, &[]);
    assert!(stdout(&out).contains("notes.txt"), "{}", stdout(&out));
    // A revision that would be an option is refused before git runs.
    let out = call(&env, "git.diff", r#"{"rev":"--output=/tmp/x"}"#, &[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is not a revision"),
        "{}",
        stderr(&out)
    );

    // Every run is in the audit log, tied to the plugin.
    let runs = audit(&env, "command_run");
    assert!(
        runs.iter()
            .any(|r| r["plugin"] == "git" && r["command"].as_str().unwrap().contains("commit -F -")),
        "{runs:?}"
    );
    // The component itself still cannot write .git: only git did.
    assert!(audit(&env, "command_refused").is_empty());
}

#[test]
fn arguments_outside_the_git_grant_are_refused_and_audited() {
    let env = Env::new();
    repository(&env);
    // The hostile fixture, granted exactly what the git plugin is.
    let src = hostile_package(env.outside.path(), "gitlike", "1.0.0", &git_capabilities());
    install(&env, &src);
    let run = |args: &[&str]| {
        let input = serde_json::json!({ "program": "git", "args": args }).to_string();
        call(&env, "gitlike.exec", &input, &[])
    };
    // What the grant allows runs.
    let out = run(&["status", "--short"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("?? notes.txt"), "{}", stdout(&out));
    // What it does not is refused, naming the grant, and never runs.
    for args in [
        &["config", "--global", "user.name", "Mallory"][..],
        &["config", "core.hooksPath", "/tmp"],
        &["-c", "core.hooksPath=/tmp", "status"],
        &["-C", "/", "status"],
        &["--exec-path=/tmp", "status"],
        &["push", "origin", "main"],
        &["add", "notes.txt"],
        &["commit", "-m", "x"],
    ] {
        let out = run(args);
        assert!(!out.status.success(), "{args:?}: {}", stdout(&out));
        let err = stderr(&out);
        assert!(
            err.contains("matches none of the argument patterns granted for git"),
            "{args:?}: {err}"
        );
    }
    // An allowed argv whose option writes a file: git run through the
    // read-only entry has neither the workspace nor .git writable, so no
    // hook is planted and nothing is written.
    for target in [".git/hooks/pre-commit", "notes-copy.txt"] {
        let output = format!("--output={target}");
        let out = run(&["diff", &output, "--no-index", "notes.txt", "/dev/null"]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(!env.ws.path().join(target).exists(), "{target}");
    }
    assert!(!env.home.path().join(".gitconfig").exists());
    assert!(!host_git(env.ws.path(), &["config", "--list", "--local"]).contains("hookspath"));
    let refused = audit(&env, "command_refused");
    assert_eq!(refused.len(), 8, "{refused:?}");
    assert!(
        refused
            .iter()
            .any(|r| r["command"] == "git config --global user.name Mallory"),
        "{refused:?}"
    );
}

#[test]
fn a_component_granted_one_program_cannot_run_another_or_other_arguments() {
    let env = Env::new();
    env.write("inside.txt", "INSIDE\n");
    let outside = env.write_outside("secret.txt", "OUTSIDE-SECRET\n");
    let capabilities = r#"[capabilities]
fs = [{ path = "$WORKSPACE", access = "read" }]
exec = [
    { program = "echo", args = ["hello *"] },
    { program = "cat", args = ["*"] },
]
"#;
    let src = hostile_package(env.outside.path(), "hostile", "1.0.0", capabilities);
    install(&env, &src);
    let run = |input: Value| call(&env, "hostile.exec", &input.to_string(), &[]);

    let out = run(serde_json::json!({"program": "echo", "args": ["hello", "world"]}));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("hello world"), "{}", stdout(&out));
    let out = run(serde_json::json!({"program": "cat", "args": ["inside.txt"]}));
    assert!(stdout(&out).contains("INSIDE"), "{}", stdout(&out));

    // Another program, by name or by path.
    for program in ["ls", "/bin/ls", "sh", "/usr/bin/cat"] {
        let out = run(serde_json::json!({"program": program, "args": ["/"]}));
        assert!(!out.status.success(), "{program}");
        assert!(
            stderr(&out).contains("is not a program this plugin was granted (granted: echo, cat)"),
            "{program}: {}",
            stderr(&out)
        );
    }
    // Arguments no pattern matches: another word, an option where an
    // operand goes, one argument too many.
    for args in [&["goodbye"][..], &["hello", "-e"], &["hello", "a", "b"]] {
        let out = run(serde_json::json!({"program": "echo", "args": args}));
        assert!(!out.status.success(), "{args:?}");
        assert!(
            stderr(&out).contains("`hello *`"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // A folder outside its grants.
    let out = run(serde_json::json!({"program": "cat", "args": ["x"], "cwd": "/etc"}));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is not inside a folder the plugin was granted"),
        "{}",
        stderr(&out)
    );
    // A granted program still reaches only the plugin's folders.
    let out = run(serde_json::json!({"program": "cat", "args": [outside.to_str().unwrap()]}));
    assert!(!stdout(&out).contains("OUTSIDE-SECRET"), "{}", stdout(&out));
    let answer: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_ne!(answer["exit_code"], 0, "{answer}");

    let refused = audit(&env, "command_refused");
    assert_eq!(refused.len(), 4 + 3 + 1, "{refused:?}");
    assert!(
        refused.iter().all(|r| r["plugin"] == "hostile"),
        "{refused:?}"
    );
    let runs = audit(&env, "command_run");
    assert_eq!(runs.len(), 3, "{runs:?}");
}

#[test]
fn fs_write_to_git_hooks_is_refused_under_allow_write() {
    let env = Env::new();
    repository(&env);
    let hook = env.ws_path().join(".git/hooks/pre-commit");
    let out = env
        .call(
            "fs.write",
            r##"{"path":".git/hooks/pre-commit","content":"#!/bin/sh\necho planted\n"}"##,
            &["--allow-write"],
        )
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("read-only for plugins"), "{err}");
    assert!(err.contains("git plugin"), "{err}");
    assert!(!hook.exists());
    let out = env
        .call(
            "fs.edit",
            r#"{"path":".git/config","old":"[core]","new":"[core]\n\thooksPath = /tmp"}"#,
            &["--allow-write"],
        )
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(!env.read(".git/config").contains("hooksPath"));
    // An ordinary write still works.
    let out = env
        .call(
            "fs.write",
            r#"{"path":"src/ok.txt","content":"fine\n"}"#,
            &["--allow-write"],
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(env.read("src/ok.txt"), "fine\n");
}

#[test]
fn a_hostile_component_cannot_plant_code_by_any_route() {
    let env = Env::new();
    repository(&env);
    std::fs::create_dir_all(env.ws.path().join("src")).unwrap();
    std::os::unix::fs::symlink(
        env.ws_path().join(".git/hooks"),
        env.ws.path().join("hooks-link"),
    )
    .unwrap();
    let config = env.read(".git/config");
    let capabilities =
        "[capabilities]\nfs = [{ path = \"$WORKSPACE\", access = \"read-write\" }]\n";
    let src = hostile_package(env.outside.path(), "hostile", "1.0.0", capabilities);
    install(&env, &src);
    let out = call(&env, "hostile.plant", "{}", &["--allow-write"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let results: Value = serde_json::from_str(&stdout(&out)).unwrap();
    for route in [
        "hook",
        "config",
        "through-link",
        "dotdot",
        "rename",
        "mkdir",
        "delete",
        "envrc",
    ] {
        assert!(
            results[route].as_str().unwrap().starts_with("refused"),
            "{route}: {results}"
        );
    }
    assert_eq!(results["ordinary"], "done", "{results}");
    let hooks: Vec<_> = std::fs::read_dir(env.ws.path().join(".git/hooks"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.ends_with(".sample"))
        .collect();
    assert!(hooks.is_empty(), "{hooks:?}");
    assert_eq!(env.read(".git/config"), config);
    assert!(env.ws.path().join(".git/description").exists());
    assert!(!env.ws.path().join(".vscode").exists());
    assert!(!env.ws.path().join(".envrc").exists());
    // Each refusal is in the audit log, saying which path stays read-only.
    let refused: Vec<Value> = audit(&env, "file_opened")
        .into_iter()
        .filter(|r| r["allowed"] == false)
        .collect();
    for name in [".git", ".vscode", ".envrc"] {
        let says = format!("{name} stays read-only");
        assert!(
            refused
                .iter()
                .any(|r| r["mode"].as_str().unwrap().contains(&says)),
            "{name}: {refused:?}"
        );
    }
    // The user was told.
    assert!(
        stderr(&out).contains("read-only for plugins"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_update_widening_an_exec_grant_asks_again_and_shows_it() {
    let env = Env::new();
    let narrow = "[capabilities]\nfs = [{ path = \"$WORKSPACE\", access = \"read\" }]\nexec = [{ program = \"echo\", args = [\"hello *\"] }]\n";
    let wide = "[capabilities]\nfs = [{ path = \"$WORKSPACE\", access = \"read\" }]\nexec = [{ program = \"echo\", args = [\"hello **\"] }]\n";
    install(
        &env,
        &hostile_package(env.outside.path(), "hostile", "1.0.0", narrow),
    );
    let src = hostile_package(env.outside.path(), "hostile", "2.0.0", wide);
    let out = plugin(&env, &["update", src.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("asks for more than you granted"), "{err}");
    assert!(err.contains("programs run echo ("), "{err}");
    assert!(err.contains("`hello **`"), "{err}");
    let out = plugin(&env, &["update", src.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = call(
        &env,
        "hostile.exec",
        r#"{"program":"echo","args":["hello","-n","x"]}"#,
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_malformed_exec_grant_is_refused_naming_its_line() {
    let env = Env::new();
    for (grant, expected) in [
        (
            "exec = [{ program = \"git\", args = [\"-c core.hooksPath=x status\"] }]",
            "global options",
        ),
        (
            "exec = [{ program = \"git\", args = [\"** status\"] }]",
            "may only be the last word",
        ),
        (
            "exec = [{ program = \"bash\", args = [\"-c **\"] }]",
            "cannot be granted",
        ),
        (
            "exec = [{ program = \"git\", args = [\"status\"], writes = [\"src\"] }]",
            "not one of the paths kept read-only",
        ),
    ] {
        let capabilities = format!("[capabilities]\n{grant}\n");
        let src = hostile_package(env.outside.path(), "broken", "1.0.0", &capabilities);
        let out = plugin(&env, &["install", src.to_str().unwrap(), "--yes"]);
        assert!(!out.status.success(), "{grant}");
        let err = stderr(&out);
        assert!(err.contains("capabilities.exec"), "{grant}: {err}");
        assert!(err.contains("line 8"), "{grant}: {err}");
        assert!(err.contains(expected), "{grant}: {err}");
    }
    // A program that is not on this machine is refused at install.
    let capabilities =
        "[capabilities]\nexec = [{ program = \"no-such-program-here\", args = [\"x\"] }]\n";
    let src = hostile_package(env.outside.path(), "missing", "1.0.0", capabilities);
    let out = plugin(&env, &["install", src.to_str().unwrap(), "--yes"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("`no-such-program-here` is not an executable program"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_call_deadline_kills_a_program_and_every_process_it_started() {
    let env = Env::new();
    let marker = format!("{}", std::process::id() * 7 + 13);
    let capabilities = r#"[capabilities]
fs = [{ path = "$WORKSPACE", access = "read" }]
exec = [{ program = "sleep", args = ["*"] }]

[limits]
timeout = "2s"
"#;
    let src = hostile_package(env.outside.path(), "sleepy", "1.0.0", capabilities);
    install(&env, &src);
    let input = serde_json::json!({"program": "sleep", "args": [marker]}).to_string();
    let out = call(&env, "sleepy.exec", &input, &[]);
    // The program's time is what was left of the call: it is stopped and
    // the plugin is told it timed out.
    assert!(out.status.success(), "{}", stderr(&out));
    let answer: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(answer["exit_code"], 124, "{answer}");
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.starts_with("sleep ") && c.contains(&marker))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let runs = audit(&env, "command_run");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["ending"], "timed out", "{runs:?}");
}

#[test]
fn a_model_commits_through_the_git_tools_in_a_session() {
    let env = Env::new();
    repository(&env);
    install(&env, &git_package());
    let calls = [
        ("c1", "git__status", json!({})),
        ("c2", "git__add", json!({"paths": ["notes.txt"]})),
        (
            "c3",
            "git__commit",
            json!({"message": "Notes from the session"}),
        ),
        ("c4", "git__log", json!({"max_count": 5})),
    ];
    let mock = script(&calls);
    let mut cmd = env.anthropic_session(
        &mock.url(),
        "sk-ant-mock-key-git",
        "mock-model",
        "commit the notes",
    );
    let out = cmd
        .args(["--permission-mode", "accept-edits"])
        .envs(IDENTITY)
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    assert!(
        mock.result_of("c1").contains("?? notes.txt"),
        "{}",
        mock.result_of("c1")
    );
    assert!(
        mock.result_of("c4").contains("Notes from the session"),
        "{}",
        mock.result_of("c4")
    );
    assert_eq!(
        host_git(env.ws.path(), &["log", "--format=%s"]),
        "Notes from the session\n"
    );
}
