//! The trust gate of project hooks: the hooks of a project's
//! `.claude/settings.json` and `.claude/settings.local.json` run only once
//! the user trusts that folder's hook set; print mode without trust skips
//! them, saying so; `--trust-project-hooks` trusts them and is remembered;
//! a changed hook set is not trusted until trusted again.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::mock_model::{Answer, MockModel, Reply};
use support::{Env, assert_exit, stderr};

/// A project hook that blocks every write, saying `why`.
fn blocking_hook(why: &str) -> String {
    json!({"hooks": {"PreToolUse": [{"matcher": "Write", "hooks": [
        {"type": "command", "command": format!("cat > /dev/null; echo '{why}' >&2; exit 2")}
    ]}]}})
    .to_string()
}

/// A print-mode session asked to write `out.txt`; the tool's result and
/// capstan's stderr.
fn write_session(env: &Env, extra: &[&str]) -> (String, String) {
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call(
                    "toolu_w",
                    "fs__write",
                    json!({"path": "out.txt", "content": "written"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Done.").anthropic()),
    ]);
    let mut cmd = env.anthropic_session(&mock.url(), "sk-ant-mock", "claude-sonnet-4-5", "write");
    cmd.timeout(Duration::from_secs(90))
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(["--permission-mode", "bypass"])
        .args(extra);
    let output = cmd.output().unwrap();
    assert_exit(&output, 0);
    let _ = std::fs::remove_file(env.ws.path().join("out.txt"));
    (mock.result_of("toolu_w"), stderr(&output))
}

#[test]
fn project_hooks_run_only_once_their_folder_is_trusted() {
    let env = Env::new();
    env.write(
        ".claude/settings.json",
        blocking_hook("blocked by the project"),
    );

    // Not trusted: print mode skips them and says how to trust them.
    let (result, notes) = write_session(&env, &[]);
    assert!(!result.contains("blocked by the project"), "{result}");
    assert!(
        notes.contains("were not run") || notes.contains("was not run"),
        "{notes}"
    );
    assert!(notes.contains("--trust-project-hooks"), "{notes}");
    assert!(notes.contains(".claude/settings.json"), "{notes}");

    // Trusted on the command line: they run, and the trust is recorded.
    let (result, _) = write_session(&env, &["--trust-project-hooks"]);
    assert!(result.contains("blocked by the project"), "{result}");
    let record = std::fs::read_to_string(env.home.path().join("data/trusted-folders.json"))
        .or_else(|_| {
            walk_find(env.home.path(), "trusted-folders.json")
                .map(std::fs::read_to_string)
                .unwrap()
        })
        .unwrap();
    assert!(
        record.contains(&env.ws.path().canonicalize().unwrap().display().to_string()),
        "{record}"
    );

    // Remembered: the next session runs them without the flag.
    let (result, notes) = write_session(&env, &[]);
    assert!(result.contains("blocked by the project"), "{result}");
    assert!(!notes.contains("not trusted"), "{notes}");

    // A changed hook set is not trusted until trusted again.
    env.write(".claude/settings.json", blocking_hook("changed hook"));
    let (result, notes) = write_session(&env, &[]);
    assert!(!result.contains("changed hook"), "{result}");
    assert!(notes.contains("not trusted"), "{notes}");

    // So is one that gains hooks in settings.local.json.
    let (result, _) = write_session(&env, &["--trust-project-hooks"]);
    assert!(result.contains("changed hook"), "{result}");
    env.write(".claude/settings.local.json", blocking_hook("local hook"));
    let (result, notes) = write_session(&env, &[]);
    assert!(
        !result.contains("changed hook") && !result.contains("local hook"),
        "{result}"
    );
    assert!(notes.contains("settings.local.json"), "{notes}");
}

/// A file called `name` somewhere under `dir`.
fn walk_find(dir: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(dir).ok()? {
        let path = entry.ok()?.path();
        if path.file_name().is_some_and(|n| n == name) {
            return Some(path);
        }
        if path.is_dir()
            && let Some(found) = walk_find(&path, name)
        {
            return Some(found);
        }
    }
    None
}
