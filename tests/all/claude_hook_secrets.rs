//! Secrets granted at install to a Claude Code plugin's command hooks,
//! scripts and inline commands (`plugin install --hook-secret NAME`): set
//! as environment variables when they run, absent when not granted, and
//! never written anywhere under capstan's home — lock, transcript, audit
//! log or logs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::support;
use support::mock_model::{Answer, MockModel, Reply};
use support::{Env, assert_exit, stderr, stdout};

const TOKEN: &str = "tok-9f3e-hook-secret-value";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn executable(path: &Path, text: &str) {
    write(path, text);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A Claude Code plugin whose PreToolUse hook script says whether `$TOKEN`
/// is set (and prints it), and whose skill's inline command does the same.
fn plugin(env: &Env) -> std::path::PathBuf {
    let plugin = env.outside.path().join("tokened");
    write(
        &plugin.join(".claude-plugin/plugin.json"),
        r#"{"name": "tokened", "version": "1.0.0", "description": "Uses a token."}"#,
    );
    write(
        &plugin.join("hooks/hooks.json"),
        r#"{"hooks": {"PreToolUse": [{"matcher": "Write", "hooks": [
            {"type": "command", "command": "\"${CLAUDE_PLUGIN_ROOT}/scripts/check.sh\"", "timeout": 20}
        ]}]}}"#,
    );
    executable(
        &plugin.join("scripts/check.sh"),
        "#!/bin/bash\ncat > /dev/null\nif [ -n \"$TOKEN\" ]; then echo \"hook: TOKEN is set: $TOKEN\" >&2; else echo 'hook: TOKEN is absent' >&2; fi\nexit 2\n",
    );
    write(
        &plugin.join("skills/status/SKILL.md"),
        "---\nname: status\ndescription: Says whether the token is there.\n---\nToken: !`if [ -n \"$TOKEN\" ]; then echo \"inline set $TOKEN\"; else echo inline absent; fi`\n",
    );
    plugin
}

/// Installs the plugin (with `extra` arguments), runs a session where the
/// model loads the skill and writes a file, with `TOKEN` in capstan's
/// environment; returns the hook's and the skill's results and the
/// install's output.
fn run(extra: &[&str]) -> (Env, String, String, String) {
    let env = Env::new();
    let plugin = plugin(&env);
    let installed = env
        .capstan()
        .args(["plugin", "install", plugin.to_str().unwrap(), "--yes"])
        .args(extra)
        .output()
        .unwrap();
    assert_exit(&installed, 0);
    let consent = stdout(&installed) + &stderr(&installed);
    let mock = MockModel::start(vec![
        Reply::sse(
            Answer::text("")
                .call("toolu_skill", "skill", json!({"name": "status"}))
                .anthropic(),
        ),
        Reply::sse(
            Answer::text("")
                .call(
                    "toolu_w",
                    "fs__write",
                    json!({"path": "out.txt", "content": "x"}),
                )
                .anthropic(),
        ),
        Reply::sse(Answer::text("Done.").anthropic()),
    ]);
    let output = env
        .anthropic_session(&mock.url(), "sk-ant-mock", "claude-sonnet-4-5", "go")
        .timeout(Duration::from_secs(90))
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("TOKEN", TOKEN)
        .args([
            "--output-format",
            "json",
            "--permission-mode",
            "accept-edits",
        ])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert!(!stdout(&output).contains(TOKEN) && !stderr(&output).contains(TOKEN));
    (
        env,
        mock.result_of("toolu_w"),
        mock.result_of("toolu_skill"),
        consent,
    )
}

/// Every file under `dir` whose bytes hold `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                let bytes = std::fs::read(&path).unwrap_or_default();
                if bytes
                    .windows(needle.len())
                    .any(|window| window == needle.as_bytes())
                {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    found
}

/// Granted: the hook script and the inline command see `$TOKEN`; what they
/// print of its value reaches the model as `[secret TOKEN]`; the consent
/// text names the secret and the lock records its name only; nothing under
/// capstan's home (transcripts, audit log, logs, lock) holds the value.
#[test]
fn a_granted_hook_secret_is_set_for_hooks_and_inline_commands_and_never_written() {
    let (env, hook, skill, consent) = run(&["--hook-secret", "TOKEN"]);
    assert!(
        consent.contains("secrets  TOKEN: set as environment variables of its command hooks"),
        "{consent}"
    );
    assert!(
        hook.contains("hook: TOKEN is set: [secret TOKEN]"),
        "{hook}"
    );
    assert!(skill.contains("inline set [secret TOKEN]"), "{skill}");
    assert!(!hook.contains(TOKEN) && !skill.contains(TOKEN));
    assert!(!env.ws.path().join("out.txt").exists());
    let lock = support::lock(&env);
    assert!(lock.contains("hook_secrets = [\"TOKEN\"]"), "{lock}");
    assert!(
        std::fs::read_dir(env.home.path()).unwrap().count() > 0,
        "the home holds the session's files"
    );
    let leaked = files_holding(env.home.path(), TOKEN);
    assert!(leaked.is_empty(), "the value was written to {leaked:?}");
}

/// Not granted: the same hook and inline command run without `$TOKEN`,
/// though capstan's own environment has it.
#[test]
fn a_hook_secret_not_granted_is_absent() {
    let (env, hook, skill, consent) = run(&[]);
    assert!(!consent.contains("secrets  TOKEN"), "{consent}");
    assert!(hook.contains("hook: TOKEN is absent"), "{hook}");
    assert!(skill.contains("inline absent"), "{skill}");
    assert!(!support::lock(&env).contains("hook_secrets"));
    assert!(files_holding(env.home.path(), TOKEN).is_empty());
}

/// A secret the host keeps for itself, or a name that is no variable, is
/// refused with a reason, and nothing is installed; a capstan plugin is
/// told where its secrets are requested instead.
#[test]
fn bad_hook_secrets_are_refused_before_anything_is_installed() {
    let env = Env::new();
    let plugin = plugin(&env);
    for (name, why) in [
        ("ANTHROPIC_API_KEY", "cannot be given to a plugin's hooks"),
        ("NOT-A-NAME", "is not a valid secret name"),
    ] {
        let out = env
            .capstan()
            .args(["plugin", "install", plugin.to_str().unwrap(), "--yes"])
            .args(["--hook-secret", name])
            .output()
            .unwrap();
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(err.contains(why), "{name}: {err}");
        assert!(!support::lock(&env).contains("tokened"));
    }
}

/// `plugin grant NAME hook-secret SECRET` and `revoke` change the secrets
/// of an installed Claude Code plugin; a capstan plugin is refused.
#[test]
fn hook_secrets_are_granted_and_revoked_after_install() {
    let env = Env::new();
    support::install(&env, &plugin(&env));
    let plugin_cmd = |args: &[&str]| env.capstan().arg("plugin").args(args).output().unwrap();
    let out = plugin_cmd(&["grant", "tokened", "hook-secret", "TOKEN"]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("granted tokened hook-secret TOKEN"));
    assert!(support::lock(&env).contains("hook_secrets = [\"TOKEN\"]"));
    let out = plugin_cmd(&["grant", "tokened", "hook-secret", "ANTHROPIC_API_KEY"]);
    assert_exit(&out, 2);
    let out = plugin_cmd(&["revoke", "tokened", "hook-secret", "TOKEN"]);
    assert_exit(&out, 0);
    assert!(!support::lock(&env).contains("hook_secrets"));
}
