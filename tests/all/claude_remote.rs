//! Claude Code marketplace plugins from remote git sources: fetched with
//! `git clone` in the OS sandbox (network to the repository's origin
//! only), then installed as a local folder is. The repositories are
//! served on 127.0.0.1 by `git http-backend`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use support::git_server::{self, GitServer};
use support::{Env, assert_exit, repo_root, stderr, stdout};

fn versions() -> (PathBuf, PathBuf) {
    let root = repo_root().join("tests/fixtures/claude-remote");
    (root.join("remote-tool-1.0"), root.join("remote-tool-1.1"))
}

fn serve() -> GitServer {
    let (v1, v2) = versions();
    git_server::serve("remote-tool", &[&v1, &v2])
}

/// A marketplace folder whose one plugin has `source`.
fn marketplace(source: Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(".claude-plugin/marketplace.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let market = json!({
        "name": "remote-market",
        "owner": {"name": "Team"},
        "plugins": [{"name": "remote-tool", "source": source, "description": "Lives elsewhere"}]
    });
    std::fs::write(file, market.to_string()).unwrap();
    dir
}

fn install(env: &Env, market: &Path, extra: &[&str]) -> Output {
    let mut cmd = env.capstan();
    cmd.args([
        "plugin",
        "install",
        market.to_str().unwrap(),
        "--plugin",
        "remote-tool",
    ])
    .args(extra)
    .timeout(Duration::from_secs(180));
    cmd.output().unwrap()
}

/// The text of the installed command `deploy`, wherever the store keeps it.
fn installed_deploy(env: &Env) -> Option<String> {
    fn walk(dir: &Path) -> Option<String> {
        for entry in std::fs::read_dir(dir).ok()? {
            let path = entry.ok()?.path();
            if path.is_dir() {
                if let Some(found) = walk(&path) {
                    return Some(found);
                }
            } else if let Ok(text) = std::fs::read_to_string(&path)
                && text.contains("Deploy to")
            {
                return Some(text);
            }
        }
        None
    }
    walk(env.home.path())
}

#[test]
fn a_plugin_from_a_git_url_is_fetched_in_the_sandbox_and_installed() {
    let server = serve();
    let env = Env::new();
    let market = marketplace(json!({"source": "url", "url": server.url}));

    // The listing says where it comes from.
    let mut cmd = env.capstan();
    cmd.args(["plugin", "install", market.path().to_str().unwrap()]);
    let listing = cmd.output().unwrap();
    assert_exit(&listing, 2);
    assert!(
        stdout(&listing).contains(&format!("from {}; fetched at install", server.url)),
        "{}",
        stdout(&listing)
    );

    let output = install(&env, market.path(), &["--yes"]);
    assert_exit(&output, 0);
    let said = format!("{}{}", stdout(&output), stderr(&output));
    assert!(
        said.contains(&format!("fetched from {}", server.url)),
        "the consent names the source: {said}"
    );
    let deploy = installed_deploy(&env).expect("the command is installed");
    assert!(deploy.contains("version 1.1"), "the tip is taken: {deploy}");
    let mut list = env.capstan();
    list.args(["skill", "list", "--json"]);
    let list = stdout(&list.output().unwrap());
    assert!(
        list.contains("remote-tool:deploy") || list.contains("\"deploy\""),
        "{list}"
    );
    assert!(list.contains("changelog"), "{list}");
    // The clone ran in the sandbox and is in the audit log.
    let records = support::audit_records(&env);
    assert!(
        records
            .iter()
            .any(|r| r["plugin"] == "plugin-fetch" && r.to_string().contains("clone")),
        "{records:?}"
    );
}

#[test]
fn a_pinned_commit_is_the_one_installed() {
    let server = serve();
    let env = Env::new();
    let market = marketplace(json!({
        "source": "git", "url": server.url, "ref": "main", "sha": server.commits[0]
    }));
    let output = install(&env, market.path(), &["--yes"]);
    assert_exit(&output, 0);
    let deploy = installed_deploy(&env).expect("the command is installed");
    assert!(deploy.contains("version 1.0"), "{deploy}");
}

#[test]
fn a_source_that_cannot_be_fetched_says_why_and_installs_nothing() {
    let env = Env::new();
    // Nobody listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/gone.git", closed.local_addr().unwrap());
    drop(closed);
    let market = marketplace(json!({"source": "url", "url": url}));
    let output = install(&env, market.path(), &["--yes"]);
    assert_ne!(output.status.code(), Some(0));
    assert!(
        stderr(&output).contains(&format!("cannot fetch {url}")),
        "{}",
        stderr(&output)
    );
    assert!(installed_deploy(&env).is_none());

    let market = marketplace(json!({"source": "url", "url": "git@github.com:o/r.git"}));
    let output = install(&env, market.path(), &["--yes"]);
    assert_ne!(output.status.code(), Some(0));
    assert!(
        stderr(&output).contains("HTTPS only"),
        "{}",
        stderr(&output)
    );
}
