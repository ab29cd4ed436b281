//! Claude Code plugin folders end to end: a marketplace installed by path
//! with its plugins picked, LSP plugins installed with their servers,
//! `${CLAUDE_PLUGIN_ROOT}` files the model opens with `fs.read`, the
//! supporting file of a skill only the user may run, the consent text's
//! grouped files — and the compatibility count over every fixture in
//! `tests/fixtures/claude-plugins/` (`just compat` prints it).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use support::mock_model::{Answer, MockModel, Received, Reply};
use support::{Env, assert_exit, repo_root, stderr, stdout};

const RUN_TIMEOUT: Duration = Duration::from_secs(90);

fn fixtures() -> PathBuf {
    repo_root().join("tests/fixtures/claude-plugins")
}

fn run(cmd: &mut assert_cmd::Command) -> Output {
    cmd.timeout(RUN_TIMEOUT);
    cmd.output().expect("run capstan")
}

fn install(env: &Env, args: &[&str]) -> Output {
    run(env.capstan().args(["plugin", "install"]).args(args))
}

fn skill_names(env: &Env) -> Vec<String> {
    let output = run(env.capstan().args(["skill", "list", "--json"]));
    assert_exit(&output, 0);
    let list: Value = serde_json::from_str(&stdout(&output)).unwrap();
    list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

/// The lines of the consent text's section that starts with `heading`
/// (indented four spaces beneath it).
fn section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(heading));
    if lines.next().is_none() {
        return Vec::new();
    }
    lines
        .take_while(|l| l.starts_with("    "))
        .map(str::trim)
        .collect()
}

#[test]
fn a_marketplace_lists_its_plugins_and_installs_the_ones_picked() {
    let env = Env::new();
    let market = fixtures().join("team-marketplace");
    let market_arg = market.to_str().unwrap();

    // Nothing picked: the plugins are listed and nothing is installed.
    let output = install(&env, &[market_arg, "--yes"]);
    assert_exit(&output, 2);
    let listing = stdout(&output);
    for expected in [
        "marketplace team-tools with 3 plugins",
        "formatter",
        "docs-writer",
        "remote-tool",
        "fetched at install",
    ] {
        assert!(listing.contains(expected), "{expected:?} in {listing}");
    }
    assert!(
        stderr(&output).contains("--plugin NAME"),
        "{}",
        stderr(&output)
    );
    assert!(skill_names(&env).is_empty());

    // --plugin picks one; NAME@PATH another (its source is relative to
    // metadata.pluginRoot).
    let output = install(&env, &[market_arg, "--plugin", "formatter", "--yes"]);
    assert_exit(&output, 0);
    assert!(stdout(&output).contains("installed formatter 1.0.0"));
    let picked = format!("docs-writer@{market_arg}");
    let output = install(&env, &[&picked, "--yes"]);
    assert_exit(&output, 0);
    let names = skill_names(&env);
    for name in ["format", "api-docs", "tutorial"] {
        assert!(names.contains(&name.to_string()), "{names:?}");
    }
    let output = run(env.capstan().args(["plugin", "list"]));
    let list = stdout(&output);
    assert!(
        list.contains("formatter") && list.contains("docs-writer"),
        "{list}"
    );
    // NAME@PATH updates from the marketplace too.
    let output = run(env.capstan().args(["plugin", "update", &picked, "--yes"]));
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("docs-writer 0.0.0 is already installed with the same content"),
        "{}",
        stdout(&output)
    );

    // An unknown name lists the known ones (the GitHub-sourced one is
    // fetched at install: `claude_remote` tests that against 127.0.0.1).
    let output = install(&env, &[market_arg, "--plugin", "nope", "--yes"]);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("it has: formatter, docs-writer, remote-tool"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_marketplace_of_skill_bundles_installs_each_bundle_with_its_own_skills() {
    let env = Env::new();
    let market = fixtures().join("skills-marketplace");
    let output = install(&env, &[market.to_str().unwrap(), "--all", "--yes"]);
    assert_exit(&output, 0);
    let out = stdout(&output);
    assert!(out.contains("installed document-skills"), "{out}");
    assert!(out.contains("installed example-skills"), "{out}");
    let names = skill_names(&env);
    for name in [
        "docx",
        "pptx",
        "brand-guidelines",
        "canvas-design",
        "internal-comms",
    ] {
        assert_eq!(
            names.iter().filter(|n| *n == name).count(),
            1,
            "{name} in {names:?}"
        );
    }
}

#[test]
fn lsp_plugins_install_with_their_servers_shown_at_consent() {
    let env = Env::new();
    let market = fixtures().join("lsp-marketplace");
    let output = install(&env, &[market.to_str().unwrap(), "--all", "--yes"]);
    assert_exit(&output, 0);
    let err = stderr(&output);
    // The LSP-only plugin installs its server; the other its server and
    // its skill.
    let servers = section(&err, "  LSP servers (");
    assert!(
        servers.iter().any(|l| l
            .starts_with("rust-analyzer: runs `rust-analyzer` for .rs files in the OS sandbox")),
        "{err}"
    );
    assert!(
        err.contains(
            "    pyright: runs `pyright-langserver --stdio` for .py files in the OS sandbox: the workspace read-only"
        ),
        "{err}"
    );
    assert!(
        !err.contains("capstan does not run language servers"),
        "{err}"
    );
    assert!(stdout(&output).contains("installed pyright-lsp"));
    assert!(stdout(&output).contains("installed rust-analyzer-lsp"));
    assert!(skill_names(&env).contains(&"typing".to_string()));

    // A plugin folder whose plugin.json declares a language server.
    let output = install(
        &env,
        &[fixtures().join("gopls-plugin").to_str().unwrap(), "--yes"],
    );
    assert_exit(&output, 0);
    let err = stderr(&output);
    assert!(section(&err, "  not installed:").is_empty(), "{err}");
    assert!(
        section(&err, "  LSP servers (")
            .iter()
            .any(|l| l.starts_with("gopls: runs `gopls serve` for .go files")),
        "{err}"
    );
    assert!(skill_names(&env).contains(&"go-idioms".to_string()));
}

#[test]
fn consent_groups_a_plugins_programs_by_folder_and_kind() {
    let env = Env::new();
    let plugin = fixtures().join("release-scripts");
    let output = install(&env, &[plugin.to_str().unwrap(), "--yes"]);
    assert_exit(&output, 0);
    let err = stderr(&output);
    let files = section(
        &err,
        "  files    kept in the plugin's folder, which the model may read (read-only); none is run:",
    );
    assert_eq!(
        files,
        [
            "scripts/: 37 shell scripts, 2 Python scripts",
            "41 files in all (39 of them programs): the model may read them, nothing runs them",
        ],
        "{err}"
    );
    assert!(!err.contains("step-07.sh"), "{err}");
    assert!(!err.contains("__pycache__"), "{err}");
    assert!(err.lines().count() < 25, "{err}");
}

/// A session whose model calls `calls` (id, tool, input) in one answer,
/// then says it is done; returns the second request.
fn session_calling(env: &Env, prompt: &str, calls: &[(&str, &str, Value)]) -> Received {
    let mut answer = Answer::text("");
    for (id, tool, input) in calls {
        answer = answer.call(id, tool, input.clone());
    }
    let mock = MockModel::start(vec![
        Reply::sse(answer.anthropic()),
        Reply::sse(Answer::text("Done.").anthropic()),
    ]);
    let mut cmd = env.anthropic_session(&mock.url(), "sk-ant-mock", "mock-model", prompt);
    let output = run(&mut cmd);
    assert_exit(&output, 0);
    let received = mock.received();
    assert_eq!(received.len(), 2, "{}", stderr(&output));
    received.into_iter().nth(1).unwrap()
}

/// The folder a path in a skill's text points into, cut at `marker`.
fn path_in(text: &str, marker: &str) -> String {
    let end = text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} in {text}"))
        + marker.len();
    let start = text[..end].rfind(char::is_whitespace).map_or(0, |i| i + 1);
    text[start..end].to_string()
}

#[test]
fn plugin_root_paths_in_a_skill_open_with_fs_read_and_nothing_else_does() {
    let env = Env::new();
    let plugin = fixtures().join("template-kit");
    assert_exit(&install(&env, &[plugin.to_str().unwrap(), "--yes"]), 0);

    let received = session_calling(
        &env,
        "record the decision",
        &[("t1", "skill", json!({"name": "adr"}))],
    );
    let (loaded, is_error) = received.tool_result("t1");
    assert!(!is_error, "{loaded}");
    assert!(!loaded.contains("${CLAUDE_PLUGIN_ROOT}"), "{loaded}");
    let template = path_in(&loaded, "/templates/adr.md");
    assert!(Path::new(&template).is_absolute(), "{template}");
    assert!(
        template.starts_with(env.home.path().to_str().unwrap())
            || template.contains("/plugins/store/template-kit/"),
        "{template}"
    );

    // The model's fs.read opens it; writing there, or reading the
    // lockfile beside the store, is refused.
    let store = Path::new(&template)
        .ancestors()
        .find(|a| a.ends_with("plugins"))
        .unwrap()
        .to_path_buf();
    let lockfile = store.join("capstan.lock");
    assert!(lockfile.is_file());
    let received = session_calling(
        &env,
        "read the template",
        &[
            ("r1", "fs__read", json!({"path": template})),
            (
                "r2",
                "fs__read",
                json!({"path": lockfile.to_str().unwrap()}),
            ),
            (
                "r3",
                "fs__write",
                json!({"path": template, "content": "tampered"}),
            ),
        ],
    );
    let (read, is_error) = received.tool_result("r1");
    assert!(!is_error && read.contains("TEMPLATE-ADR-MARKER"), "{read}");
    let (lock, is_error) = received.tool_result("r2");
    assert!(is_error && !lock.contains("sha256"), "{lock}");
    let (write, is_error) = received.tool_result("r3");
    assert!(is_error, "{write}");
    assert!(
        std::fs::read_to_string(&template)
            .unwrap()
            .contains("TEMPLATE-ADR-MARKER")
    );

    // A plugin whose stored files changed is not offered to the model.
    std::fs::write(&template, "CHANGED-BEHIND-CAPSTANS-BACK").unwrap();
    let received = session_calling(
        &env,
        "read the template",
        &[("c1", "fs__read", json!({"path": template}))],
    );
    let (read, is_error) = received.tool_result("c1");
    assert!(is_error && !read.contains("CHANGED"), "{read}");
}

#[test]
fn a_user_only_skills_supporting_file_is_readable_once_the_user_runs_it() {
    let env = Env::new();
    let plugin = fixtures().join("template-kit");
    assert_exit(&install(&env, &[plugin.to_str().unwrap(), "--yes"]), 0);
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "o1",
                    "skill",
                    json!({"name": "postmortem", "resource": "outline.md"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Written.").anthropic()),
    ]);
    let mut cmd = env.anthropic_session(&mock.url(), "sk-ant-mock", "mock-model", "/postmortem");
    let output = run(&mut cmd);
    assert_exit(&output, 0);
    let received = mock.received();
    let first: String = received[0].messages()[0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect();
    assert!(
        first.contains("The user ran the skill /postmortem"),
        "{first}"
    );
    assert!(!first.contains("${CLAUDE_SKILL_DIR}"), "{first}");
    let tools = received[0].body["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t["name"] == "skill"), "{tools:?}");
    let (outline, is_error) = received[1].tool_result("o1");
    assert!(
        !is_error && outline.contains("OUTLINE-POSTMORTEM-MARKER"),
        "{outline}"
    );
    // The path the text names opens with fs.read as well.
    let outline_path = path_in(&first, "/outline.md");
    let received = session_calling(
        &env,
        "read it",
        &[("p1", "fs__read", json!({"path": outline_path}))],
    );
    let (read, is_error) = received.tool_result("p1");
    assert!(
        !is_error && read.contains("OUTLINE-POSTMORTEM-MARKER"),
        "{read}"
    );
}

/// One fixture's install, as the compatibility count sees it.
struct Outcome {
    label: String,
    installed: bool,
    imported: usize,
    styles: usize,
    skipped: usize,
    not_installed: usize,
}

fn outcome(label: String, output: &Output) -> Outcome {
    let err = stderr(output);
    let imported = err
        .lines()
        .find_map(|l| l.strip_prefix("  imported from a Claude Code plugin: "))
        .map_or(0, |names| names.split(", ").count());
    Outcome {
        label,
        installed: output.status.success(),
        imported,
        styles: err
            .lines()
            .filter(|l| l.starts_with("  output style  "))
            .count(),
        skipped: section(&err, "  skipped  ").len(),
        not_installed: section(&err, "  not installed:").len(),
    }
}

/// Installs every fixture (each plugin of a marketplace on its own) and
/// prints the counts; `just compat` runs it.
/// `folder`, or a copy of it at `copy` whose marketplace entries with a
/// GitHub source point at the repository `url` on 127.0.0.1.
fn local_sources(folder: &Path, copy: &Path, url: &str) -> PathBuf {
    let file = folder.join(".claude-plugin/marketplace.json");
    let Ok(text) = std::fs::read_to_string(&file) else {
        return folder.to_path_buf();
    };
    let mut market: Value = serde_json::from_str(&text).unwrap();
    let mut changed = false;
    for entry in market["plugins"].as_array_mut().unwrap() {
        if entry["source"]["source"] == "github" {
            entry["source"] = json!({"source": "url", "url": url});
            changed = true;
        }
    }
    if !changed {
        return folder.to_path_buf();
    }
    support::git_server::copy_tree(folder, copy);
    std::fs::write(
        copy.join(".claude-plugin/marketplace.json"),
        market.to_string(),
    )
    .unwrap();
    copy.to_path_buf()
}

#[test]
fn compat_every_fixture_plugin_installs_or_says_why() {
    let env = Env::new();
    let mut outcomes = Vec::new();
    let mut folders: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    folders.sort();
    assert!(folders.len() >= 15, "{folders:?}");
    // GitHub sources are served from 127.0.0.1 instead: the marketplace is
    // copied with their entries pointing at a local repository.
    let remote = support::git_server::serve(
        "remote-tool",
        &[&repo_root().join("tests/fixtures/claude-remote/remote-tool-1.1")],
    );
    let copies = tempfile::tempdir().unwrap();
    for folder in folders {
        let name = folder.file_name().unwrap().to_string_lossy().into_owned();
        let folder = local_sources(&folder, &copies.path().join(&name), &remote.url);
        let path = folder.to_str().unwrap();
        let marketplace = folder.join(".claude-plugin/marketplace.json");
        let own = folder.join(".claude-plugin/plugin.json");
        if marketplace.is_file() && !own.is_file() {
            let market: Value =
                serde_json::from_str(&std::fs::read_to_string(&marketplace).unwrap()).unwrap();
            for entry in market["plugins"].as_array().unwrap() {
                let plugin = entry["name"].as_str().unwrap();
                let output = install(&env, &[path, "--plugin", plugin, "--yes"]);
                if !output.status.success() {
                    assert!(!stderr(&output).trim().is_empty());
                }
                outcomes.push(outcome(format!("{name} → {plugin}"), &output));
            }
        } else {
            let output = install(&env, &[path, "--yes"]);
            if !output.status.success() {
                assert!(!stderr(&output).trim().is_empty());
            }
            outcomes.push(outcome(name, &output));
        }
    }
    let installed: Vec<&Outcome> = outcomes.iter().filter(|o| o.installed).collect();
    let clean = installed
        .iter()
        .filter(|o| o.skipped == 0 && o.not_installed == 0)
        .count();
    let failed = outcomes.len() - installed.len();
    let imported: usize = installed.iter().map(|o| o.imported).sum();
    let skipped: usize = installed.iter().map(|o| o.skipped).sum();
    println!(
        "Claude Code plugin compatibility, {} fixture plugins:",
        outcomes.len()
    );
    for o in &outcomes {
        println!(
            "  {:44} {:9} imported {:2}  output styles {}  skipped {:2}  parts not installed {:2}",
            o.label,
            if !o.installed {
                "failed"
            } else if o.skipped + o.not_installed == 0 {
                "clean"
            } else {
                "warnings"
            },
            o.imported,
            o.styles,
            o.skipped,
            o.not_installed
        );
    }
    let styles: usize = installed.iter().map(|o| o.styles).sum();
    println!(
        "installed cleanly {clean}, with warnings {}, failed {failed}",
        installed.len() - clean
    );
    println!(
        "installed with at least one usable part: {} of {} ({:.1}%)",
        installed.len(),
        outcomes.len(),
        100.0 * installed.len() as f64 / outcomes.len() as f64
    );
    println!(
        "skills and commands imported {imported}, skipped {skipped}: {:.1}% import with no warning",
        100.0 * imported as f64 / (imported + skipped).max(1) as f64
    );
    println!("output styles imported {styles}");
    // Every fixture installs: LSP-only plugins, and the one whose source
    // is a git repository (served here from 127.0.0.1).
    let failed_labels: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.installed)
        .map(|o| o.label.as_str())
        .collect();
    assert!(failed_labels.is_empty(), "{failed_labels:?}");
    // Every skill and command of the fixtures is either imported or
    // reported as skipped, none lost silently.
    assert_eq!(imported + skipped, 46);
    // Output styles are items too: the explanatory-style plugin's.
    assert_eq!(styles, 1);
}
