//! Protected paths at any depth of the workspace, through the real binary:
//! a command under `--allow-write` (with and without namespaces) and a
//! plugin's component under a write grant try to plant code that runs
//! outside the sandbox — a git hook and `core.fsmonitor` in nested
//! repositories at depth 1 and 3 and in one they `git init` themselves,
//! Claude Code settings, an MCP config — and the test then runs git itself
//! in those repositories, as the user would, and checks that no planted
//! code ran. A control repository outside the workspace, planted the same
//! way by the test, shows the markers do appear when the plants are live.
//!
//! And a workspace that is a `git worktree` (its `.git` a file pointing
//! outside): a commit from a command fails, saying why, and nothing outside
//! the workspace is written.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{Env, stderr, stdout};
use tempfile::TempDir;

/// The workspace, a user home, and a folder outside for the markers.
struct Setup {
    env: Env,
    user_home: TempDir,
    /// Where planted code would leave its marker files.
    markers: TempDir,
}

impl Setup {
    fn new(namespaces: bool) -> Self {
        let setup = Self {
            env: Env::new(),
            user_home: tempfile::tempdir().unwrap(),
            markers: tempfile::tempdir().unwrap(),
        };
        if !namespaces {
            std::fs::write(
                setup.env.home.path().join("config.toml"),
                "[exec]\nnamespaces = \"off\"\n",
            )
            .unwrap();
        }
        setup
    }

    fn ws(&self) -> PathBuf {
        self.env.ws_path()
    }

    fn marker_dir(&self) -> PathBuf {
        self.markers.path().canonicalize().unwrap()
    }

    /// `capstan exec FLAGS -- bash -c SCRIPT`.
    fn sh(&self, flags: &[&str], script: &str) -> Output {
        let mut cmd = self.env.capstan_std();
        cmd.env("HOME", self.user_home.path())
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .arg("exec")
            .args(flags)
            .args(["--", "bash", "-c", script]);
        cmd.output().unwrap()
    }

    /// Runs git as the user would, outside every sandbox, in `dir`.
    fn user_git(&self, dir: &Path, args: &[&str]) -> Output {
        Command::new("git")
            .current_dir(dir)
            .args(args)
            .env("HOME", self.user_home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env(
                "GIT_CEILING_DIRECTORIES",
                self.env.ws.path().parent().unwrap(),
            )
            .env("GIT_AUTHOR_NAME", "u")
            .env("GIT_AUTHOR_EMAIL", "u@example.com")
            .env("GIT_COMMITTER_NAME", "u")
            .env("GIT_COMMITTER_EMAIL", "u@example.com")
            .output()
            .unwrap()
    }

    /// The marker files planted code left.
    fn markers_left(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.markers.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

fn combined(out: &Output) -> String {
    format!("{}{}", stdout(out), stderr(out))
}

/// Shell lines planting, in the repository at `repo` (relative), a
/// pre-commit hook and a `core.fsmonitor` command that each leave a marker
/// named after `tag` in `markers`.
fn plant(repo: &str, tag: &str, markers: &Path) -> String {
    let m = markers.display();
    format!(
        "printf '#!/bin/sh\\ntouch {m}/hook-{tag}\\n' > {repo}/.git/hooks/pre-commit; \
         chmod +x {repo}/.git/hooks/pre-commit; \
         printf '#!/bin/sh\\ntouch {m}/fsmonitor-{tag}\\n' > {repo}/fsmon.sh; chmod +x {repo}/fsmon.sh; \
         git -C {repo} config core.fsmonitor \"$PWD/{repo}/fsmon.sh\"; \
         printf '[core]\\n\\tfsmonitor = %s\\n' \"$PWD/{repo}/fsmon.sh\" >> {repo}/.git/config; "
    )
}

/// Makes a repository at `rel` in the workspace with one commit.
fn repository(setup: &Setup, rel: &str) {
    let dir = setup.env.ws.path().join(rel);
    std::fs::create_dir_all(&dir).unwrap();
    for args in [
        &["init", "-q"][..],
        &["commit", "-q", "--allow-empty", "-m", "first"][..],
    ] {
        let out = setup.user_git(&dir, args);
        assert!(out.status.success(), "git {args:?}: {}", combined(&out));
    }
}

/// What the user does next in a repository: `git status`, then a commit.
fn user_status_and_commit(setup: &Setup, dir: &Path) {
    setup.user_git(dir, &["status"]);
    setup.user_git(dir, &["commit", "-q", "--allow-empty", "-m", "next"]);
}

fn plants_at_depth_are_inert(namespaces: bool) {
    let setup = Setup::new(namespaces);
    let markers = setup.marker_dir();
    repository(&setup, "sub");
    repository(&setup, "a/b/c");
    setup.env.write("sub/.claude/settings.json", "{}");
    setup.env.write("a/b/c/.claude/settings.json", "{}");
    // Existing files and a folder to work in: without namespaces, nothing
    // can be created directly in a folder holding a protected path.
    setup.env.write("sub/file.txt", "old\n");
    setup.env.write("a/b/c/file.txt", "old\n");
    setup.env.write("work/README", "");
    let config_before = |rel: &str| std::fs::read_to_string(setup.ws().join(rel)).unwrap();
    let sub_config = config_before("sub/.git/config");
    let deep_config = config_before("a/b/c/.git/config");

    // The control: the same plants, made by the test in a repository
    // outside the workspace, do run at the user's next git command.
    let control = tempfile::tempdir().unwrap();
    let control_ws = control.path().canonicalize().unwrap();
    std::fs::create_dir_all(control_ws.join("ctl")).unwrap();
    let init = setup.user_git(&control_ws.join("ctl"), &["init", "-q"]);
    assert!(init.status.success(), "{}", combined(&init));
    let out = Command::new("bash")
        .current_dir(&control_ws)
        .args(["-c", &plant("ctl", "control", &markers)])
        .env("HOME", setup.user_home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", combined(&out));
    user_status_and_commit(&setup, &control_ws.join("ctl"));
    assert_eq!(
        setup.markers_left(),
        ["fsmonitor-control", "hook-control"],
        "the control's plants must run, or this test proves nothing"
    );
    for marker in setup.markers_left() {
        std::fs::remove_file(markers.join(marker)).unwrap();
    }

    let script = format!(
        "echo ok > sub/file.txt; echo ok > a/b/c/file.txt; \
         {plant_sub} {plant_deep} \
         echo '{{\"hooks\":{{}}}}' > sub/.claude/settings.json; \
         echo '{{\"hooks\":{{}}}}' > a/b/c/.claude/settings.json; \
         mkdir -p sub/.claude/agents && echo x > sub/.claude/agents/evil.md; \
         cd work; git init -q fresh && {plant_fresh} \
         mkdir -p x/y/z && git init -q x/y/z && {plant_fresh_deep} \
         mkdir -p q/.claude && echo '{{}}' > q/.claude/settings.json; \
         echo '{{\"mcpServers\":{{}}}}' > q/.mcp.json; cd ..; \
         echo end",
        plant_sub = plant("sub", "sub", &markers),
        plant_deep = plant("a/b/c", "deep", &markers),
        plant_fresh = plant("fresh", "fresh", &markers),
        plant_fresh_deep = plant("x/y/z", "fresh-deep", &markers),
    );
    let out = setup.sh(&["--allow-write"], &script);
    let text = combined(&out);
    assert!(stdout(&out).contains("end"), "{text}");

    // Ordinary writes went through.
    assert_eq!(setup.env.read("sub/file.txt"), "ok\n");
    assert_eq!(setup.env.read("a/b/c/file.txt"), "ok\n");
    // The existing nested repositories and settings are unchanged.
    assert!(
        !setup.ws().join("sub/.git/hooks/pre-commit").exists(),
        "{text}"
    );
    assert!(
        !setup.ws().join("a/b/c/.git/hooks/pre-commit").exists(),
        "{text}"
    );
    assert_eq!(config_before("sub/.git/config"), sub_config, "{text}");
    assert_eq!(config_before("a/b/c/.git/config"), deep_config, "{text}");
    assert_eq!(setup.env.read("sub/.claude/settings.json"), "{}");
    assert_eq!(setup.env.read("a/b/c/.claude/settings.json"), "{}");
    assert!(!setup.ws().join("sub/.claude/agents").exists(), "{text}");
    // What the command created is renamed aside, and said so.
    for created in [
        "work/fresh/.git",
        "work/x/y/z/.git",
        "work/q/.claude",
        "work/q/.mcp.json",
    ] {
        assert!(
            std::fs::symlink_metadata(setup.ws().join(created)).is_err(),
            "{created} survived: {text}"
        );
        let aside = setup.ws().join(format!("{created}.capstan-quarantined"));
        assert!(aside.exists(), "{created} not put aside: {text}");
        assert!(stderr(&out).contains(&setup.ws().join(created).display().to_string()));
    }
    assert!(stderr(&out).contains("renamed it to"), "{text}");
    // The audit log's record of the run names what was put aside.
    let run = support::audit_records(&setup.env)
        .into_iter()
        .rev()
        .find(|r| r["kind"] == "command_run")
        .expect("a command_run record");
    let refused = run["refused"].to_string();
    assert!(
        refused.contains("work/fresh/.git") && refused.contains("renamed it to"),
        "{run}"
    );

    // The user's next git commands in each repository run no planted code.
    for repo in ["sub", "a/b/c", "work/fresh", "work/x/y/z"] {
        user_status_and_commit(&setup, &setup.ws().join(repo));
    }
    assert_eq!(setup.markers_left(), Vec::<String>::new(), "{text}");
}

#[test]
fn nested_plants_at_depth_1_and_3_and_after_git_init_are_inert() {
    plants_at_depth_are_inert(true);
}

#[test]
fn without_namespaces_nested_plants_at_depth_1_and_3_and_after_git_init_are_inert() {
    plants_at_depth_are_inert(false);
}

#[test]
fn a_gitdir_file_protects_its_target_in_the_workspace() {
    let setup = Setup::new(true);
    let markers = setup.marker_dir();
    // A repository whose `.git` is a file pointing elsewhere in the
    // workspace (`git init --separate-git-dir`).
    std::fs::create_dir_all(setup.ws().join("vault")).unwrap();
    let vault = setup.ws().join("vault/sub.git");
    let out = setup.user_git(
        &setup.ws(),
        &[
            "init",
            "-q",
            "--separate-git-dir",
            vault.to_str().unwrap(),
            "linked",
        ],
    );
    assert!(out.status.success(), "{}", combined(&out));
    let config = std::fs::read_to_string(setup.ws().join("vault/sub.git/config")).unwrap();
    let m = markers.display();
    let out = setup.sh(
        &["--allow-write"],
        &format!(
            "printf '#!/bin/sh\\ntouch {m}/hook\\n' > vault/sub.git/hooks/pre-commit; \
             chmod +x vault/sub.git/hooks/pre-commit; \
             echo '[core]' >> vault/sub.git/config; echo ok > linked/f.txt; echo end"
        ),
    );
    let text = combined(&out);
    assert!(stdout(&out).contains("end"), "{text}");
    assert!(
        !setup.ws().join("vault/sub.git/hooks/pre-commit").exists(),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(setup.ws().join("vault/sub.git/config")).unwrap(),
        config
    );
    assert_eq!(setup.env.read("linked/f.txt"), "ok\n");
    user_status_and_commit(&setup, &setup.ws().join("linked"));
    assert_eq!(setup.markers_left(), Vec::<String>::new());
}

#[test]
fn a_component_cannot_plant_in_nested_repositories_or_settings() {
    let setup = Setup::new(true);
    repository(&setup, "sub");
    repository(&setup, "a/b/c");
    let store = setup.ws().join("a/b/c/.git");
    for (path, content) in [
        ("sub/.git/hooks/pre-commit", "#!/bin/sh\necho planted\n"),
        ("a/b/c/.git/hooks/pre-commit", "#!/bin/sh\necho planted\n"),
        ("a/b/c/.claude/settings.json", "{}"),
        ("fresh/.git/config", "[core]\n"),
        ("sub/.mcp.json", "{}"),
    ] {
        let input = serde_json::json!({ "path": path, "content": content }).to_string();
        let out = setup
            .env
            .call("fs.write", &input, &["--allow-write"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{path}: {}", stdout(&out));
        assert!(
            stderr(&out).contains("read-only for plugins"),
            "{}",
            stderr(&out)
        );
        assert!(!setup.ws().join(path).exists(), "{path}");
    }
    assert!(store.join("HEAD").exists());
    let out = setup
        .env
        .call(
            "fs.write",
            r#"{"path":"a/b/c/ok.txt","content":"fine\n"}"#,
            &["--allow-write"],
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", combined(&out));
    assert_eq!(setup.env.read("a/b/c/ok.txt"), "fine\n");
}

#[test]
fn a_worktree_commit_fails_saying_why_and_nothing_outside_is_written() {
    let setup = Setup::new(true);
    // The main repository lies outside the workspace; the workspace is one
    // of its worktrees, its `.git` a file pointing there.
    let main = tempfile::tempdir().unwrap();
    let main_repo = main.path().canonicalize().unwrap().join("main");
    std::fs::create_dir_all(&main_repo).unwrap();
    for args in [
        &["init", "-q"][..],
        &["commit", "-q", "--allow-empty", "-m", "first"][..],
    ] {
        assert!(setup.user_git(&main_repo, args).status.success());
    }
    let ws = setup.ws();
    std::fs::remove_dir(&ws).unwrap();
    let out = setup.user_git(
        &main_repo,
        &["worktree", "add", "-q", "-b", "side", ws.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", combined(&out));
    assert!(ws.join(".git").is_file());
    let snapshot = |dir: &Path| {
        let mut all = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let meta = e.metadata().unwrap();
                if meta.is_dir() {
                    stack.push(e.path());
                } else {
                    all.push((e.path(), std::fs::read(e.path()).unwrap()));
                }
            }
        }
        all.sort();
        all
    };
    let before = snapshot(&main_repo);
    let out = setup.sh(
        &["--allow-write"],
        "echo change > f.txt; git add f.txt; \
         git -c user.name=m -c user.email=m@example.com commit -q -m planted; \
         status=$?; echo exit=$status; exit $status",
    );
    let text = combined(&out);
    assert!(stdout(&out).contains("exit="), "{text}");
    assert!(
        !stdout(&out).contains("exit=0"),
        "the commit went through: {text}"
    );
    // Nothing of the repository outside changed: no commit, no index, no
    // lock file left.
    assert_eq!(snapshot(&main_repo), before, "{text}");
    let log = setup.user_git(&ws, &["log", "--oneline"]);
    assert_eq!(stdout(&log).lines().count(), 1, "{}", combined(&log));
    // The reason is named.
    let err = stderr(&out);
    assert!(
        err.contains("git worktree") && err.contains(&main_repo.display().to_string()),
        "{text}"
    );
    // The file itself was written: the workspace is writable.
    assert_eq!(setup.env.read("f.txt"), "change\n");
}
