//! Language servers of Claude Code plugins: installed with their plugin
//! (shown at consent, hashed and locked), started in the OS sandbox when
//! a file they serve is first used, asked through the `lsp` tool, their
//! diagnostics added after an edit; a server that crashes or floods is
//! contained, and one cannot read outside the workspace.
//!
//! The server is `tests/fixtures/claude-plugins/fake-lsp/server.py`, a
//! small LSP server in Python (its README says what it answers).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mock_model::{Answer, MockModel, Reply};
use crate::support::{self, Env, assert_exit, stderr};

const API_KEY: &str = "test-key";

fn fake_plugin() -> PathBuf {
    support::repo_root().join("tests/fixtures/claude-plugins/fake-lsp")
}

/// A session against `mock`, edits allowed.
fn session(env: &Env, mock: &MockModel) -> Output {
    session_with(env, mock, &[])
}

/// The same, with more arguments.
fn session_with(env: &Env, mock: &MockModel, args: &[&str]) -> Output {
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "go");
    // The fake server runs on the system's Python (its `python3`), whose
    // files the sandbox reads, not on one installed under a home folder.
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(["--permission-mode", "accept-edits"])
        .args(args)
        .timeout(Duration::from_secs(180));
    cmd.output().unwrap()
}

/// One reply per list of calls, then a closing text.
fn script(turns: &[&[(&str, &str, Value)]]) -> MockModel {
    let mut replies: Vec<Reply> = turns
        .iter()
        .map(|calls| {
            let mut answer = Answer::text("Looking.");
            for (id, tool, input) in *calls {
                answer = answer.call(id, tool, input.clone());
            }
            Reply::sse(answer.anthropic())
        })
        .collect();
    replies.push(Reply::sse(Answer::text("Done.").anthropic()));
    MockModel::start(replies)
}

fn lsp(operation: &str, file: &str, line: u64, character: u64) -> Value {
    json!({"operation": operation, "filePath": file, "line": line, "character": character})
}

/// Installs the fake server's plugin and checks what consent showed.
fn install_fake(env: &Env) {
    let out = support::install(env, &fake_plugin());
    let shown = stderr(&out);
    assert!(shown.contains("  LSP servers ("), "{shown}");
    assert!(
        shown.contains(
            "fake: runs `python3 ${CLAUDE_PLUGIN_ROOT}/server.py` for .fk files in the OS sandbox: the workspace read-only, the plugin's folder readable, no network, no secrets"
        ),
        "{shown}"
    );
    assert!(!shown.contains("not installed"), "{shown}");
    assert!(support::lock(env).contains("lsp-servers.json"));
}

const APP: &str =
    "def greet(name):\n    return name\n\ndef main():\n    greet(\"a\")\n    greet(\"b\")\n";

#[test]
fn the_lsp_tool_answers_from_a_plugins_server_and_edits_bring_diagnostics() {
    let env = Env::new();
    install_fake(&env);
    let secret = env.write_outside("secret.txt", "outside secret");
    env.write("inside.txt", "inside words");
    let ws = env.ws_path();
    env.write(
        "app.fk",
        format!(
            "{APP}# probe: {}\n# probe: {}\n",
            secret.display(),
            ws.join("inside.txt").display()
        ),
    );
    let mock = script(&[
        &[
            ("def", "lsp", lsp("goToDefinition", "app.fk", 5, 5)),
            ("refs", "lsp", lsp("findReferences", "app.fk", 5, 5)),
            ("hover", "lsp", lsp("hover", "app.fk", 6, 6)),
            (
                "outline",
                "lsp",
                json!({"operation": "documentSymbol", "filePath": "app.fk"}),
            ),
            (
                "search",
                "lsp",
                json!({"operation": "workspaceSymbol", "filePath": "app.fk", "query": "gre"}),
            ),
            ("callers", "lsp", lsp("incomingCalls", "app.fk", 1, 5)),
            ("other", "lsp", lsp("hover", "inside.txt", 1, 1)),
        ],
        &[(
            "edit",
            "fs__edit",
            json!({"path": "app.fk", "old": "return name", "new": "return error  # TODO"}),
        )],
    ]);
    let out = session(&env, &mock);
    assert_exit(&out, 0);
    assert_eq!(
        mock.result_of("def"),
        "1 definition in 1 file:\napp.fk:1:5: def greet(name):"
    );
    let refs = mock.result_of("refs");
    assert!(refs.starts_with("3 references in 1 file:"), "{refs}");
    assert!(refs.contains("app.fk:6:5: greet(\"b\")"), "{refs}");
    let hover = mock.result_of("hover");
    assert!(hover.contains("def greet(name):"), "{hover}");
    // The server's settings came from the plugin's definition, asked for
    // with workspace/configuration.
    assert!(hover.contains("greeting: hello from settings"), "{hover}");
    // The sandbox: the workspace is readable, the folder outside is not.
    assert!(hover.contains("inside.txt: read 'inside words'"), "{hover}");
    assert!(
        hover.contains(&format!("probe {}: refused", secret.display())),
        "{hover}"
    );
    assert!(!hover.contains("outside secret"), "{hover}");
    assert_eq!(
        mock.result_of("outline"),
        "function greet (line 1)\nfunction main (line 4)"
    );
    assert_eq!(
        mock.result_of("search"),
        "function greet — app.fk:1:5: def greet(name):"
    );
    let callers = mock.result_of("callers");
    assert!(
        callers.starts_with("function main — app.fk:4:5: def main():"),
        "{callers}"
    );
    let (other, is_error) = mock.tool_result("other");
    assert!(is_error, "{other}");
    assert!(
        other.contains("no language server serves inside.txt"),
        "{other}"
    );
    // After the edit, the server's new diagnostics, errors first.
    let edit = mock.result_of("edit");
    assert!(
        edit.contains(
            "Diagnostics from language server fake-lsp-fake for app.fk after this change (1 error, 1 warning):\n  app.fk:2:12 error: found the word error [F001]\n  app.fk:2:21 warning: a TODO is left"
        ),
        "{edit}"
    );
    // Every request is audited under the server's name.
    let records = support::audit_records(&env);
    let asked: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "lsp_request")
        .collect();
    assert!(asked.len() >= 6, "{records:?}");
    assert!(
        asked
            .iter()
            .any(|r| r.to_string().contains("textDocument/definition")
                && r.to_string().contains("lsp__fake-lsp-fake")),
        "{asked:?}"
    );
    // The server ran once, read-only, and exited when the session ended,
    // asked to (`shutdown`, then `exit`).
    let runs: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "command_run" && r["plugin"] == "lsp__fake-lsp-fake")
        .collect();
    assert_eq!(runs.len(), 1, "{records:?}");
    assert_eq!(runs[0]["write"], false);
    assert_eq!(runs[0]["ending"], "exited", "{:?}", runs[0]);
    assert_eq!(runs[0]["exit_code"], 0, "{:?}", runs[0]);
}

#[test]
fn results_in_files_a_read_rule_denies_are_counted_never_shown() {
    let env = Env::new();
    install_fake(&env);
    env.write("app.fk", format!("{APP}hidden()\n"));
    env.write(
        "secrets/key.fk",
        "def hidden():\n    greet(\"SECRET_LINE\")\n",
    );
    let calls: &[(&str, &str, Value)] = &[
        ("refs", "lsp", lsp("findReferences", "app.fk", 5, 5)),
        ("def", "lsp", lsp("goToDefinition", "app.fk", 7, 1)),
        (
            "search",
            "lsp",
            json!({"operation": "workspaceSymbol", "filePath": "app.fk", "query": "hid"}),
        ),
        ("direct", "lsp", lsp("hover", "secrets/key.fk", 1, 5)),
    ];

    // Without a rule the server's answers name the other file, its lines
    // shown.
    let mock = script(&[calls]);
    assert_exit(&session(&env, &mock), 0);
    let refs = mock.result_of("refs");
    assert!(
        refs.starts_with("4 references in 2 files:")
            && refs.contains("secrets/key.fk:2:5: greet(\"SECRET_LINE\")"),
        "{refs}"
    );
    assert_eq!(
        mock.result_of("def"),
        "1 definition in 1 file:\nsecrets/key.fk:1:5: def hidden():"
    );

    // With Claude Code's `Read` deny rule, the server could quote the file
    // in any answer, so no server runs over this workspace and nothing of
    // the file reaches the model.
    let mock = script(&[calls]);
    let out = session_with(&env, &mock, &["--deny", "Read(secrets/**)"]);
    assert_exit(&out, 0);
    for id in ["refs", "def", "search"] {
        let (text, is_error) = mock.tool_result(id);
        assert!(
            is_error && text.contains("language servers are off"),
            "{id}: {text}"
        );
    }
    let (direct, is_error) = mock.tool_result("direct");
    assert!(is_error && direct.contains("Read(secrets/**)"), "{direct}");
    for request in mock.received() {
        let body = request.body.to_string();
        assert!(!body.contains("SECRET_LINE"), "{body}");
    }
}

/// A server that quotes a file the rules deny reading — in its hover text
/// and in its diagnostics, under another file's location — never gets the
/// chance: no server runs over a workspace holding such a file, and the
/// model receives nothing of it.
#[test]
fn a_server_quoting_a_read_denied_file_never_reaches_the_model() {
    const SECRET: &str = "hunter2-sekrit-7f3a";
    let env = Env::new();
    install_fake(&env);
    let ws = env.ws_path();
    env.write(".env", format!("DB_PASSWORD={SECRET}\n"));
    let dotenv = ws.join(".env");
    env.write(
        "app.fk",
        format!(
            "{APP}# probe: {}\n# lint: {}\n",
            dotenv.display(),
            dotenv.display()
        ),
    );
    let turns: &[&[(&str, &str, Value)]] = &[
        &[("hover", "lsp", lsp("hover", "app.fk", 1, 5))],
        &[(
            "edit",
            "fs__edit",
            json!({"path": "app.fk", "old": "return name", "new": "return name  # edited"}),
        )],
    ];

    // Without a rule the attack works: the server reads .env and quotes
    // it, in a hover of app.fk and in app.fk's diagnostics.
    let mock = script(turns);
    assert_exit(&session(&env, &mock), 0);
    assert!(mock.result_of("hover").contains(SECRET));
    assert!(mock.result_of("edit").contains(SECRET));

    // With `Read(.env)` denied, nothing of it reaches the model: no
    // request it receives holds the secret, the lsp tool says why, and
    // the server never started.
    env.write(
        "app.fk",
        format!(
            "{APP}# probe: {}\n# lint: {}\n",
            dotenv.display(),
            dotenv.display()
        ),
    );
    let before = support::audit_records(&env).len();
    let mock = script(turns);
    let out = session_with(&env, &mock, &["--deny", "Read(.env)"]);
    assert_exit(&out, 0);
    let received = mock.received();
    assert_eq!(received.len(), 3, "{received:?}");
    for request in &received {
        let body = request.body.to_string();
        assert!(!body.contains(SECRET), "the model received it: {body}");
    }
    let (hover, is_error) = mock.tool_result("hover");
    assert!(
        is_error && hover.contains("language servers are off") && hover.contains("deny reading"),
        "{hover}"
    );
    let edit = mock.result_of("edit");
    assert!(!edit.contains("Diagnostics from"), "{edit}");
    let runs = support::audit_records(&env)
        .into_iter()
        .skip(before)
        .filter(|r| r["kind"] == "command_run" && r["plugin"] == "lsp__fake-lsp-fake")
        .count();
    assert_eq!(runs, 0, "a server ran over the denied file");
    // The edit itself went through.
    assert!(
        std::fs::read_to_string(ws.join("app.fk"))
            .unwrap()
            .contains("# edited")
    );
}

#[test]
fn an_edit_waits_for_diagnostics_only_from_servers_known_to_give_them() {
    let env = Env::new();
    install_fake(&env);
    // This server never publishes for this file; for the next, only 3 s
    // after each change; `.fkp` files' server answers pull requests.
    env.write("quiet.fk", "# quiet\ndef f():\n    pass\n");
    env.write("late.fk", "# late 3\ndef f():\n    pass\n");
    env.write("p.fkp", "def f():\n    pass\n");
    let edit = |id: &'static str, file: &str| {
        (
            id,
            "fs__edit",
            json!({"path": file, "old": "pass", "new": "error"}),
        )
    };
    let mock = script(&[&[
        edit("quiet", "quiet.fk"),
        edit("late", "late.fk"),
        edit("pull", "p.fkp"),
    ]]);
    assert_exit(&session(&env, &mock), 0);
    // Not known to publish for the file: the short default wait, then
    // the result says nothing came.
    for (id, file) in [("quiet", "quiet.fk"), ("late", "late.fk")] {
        let result = mock.result_of(id);
        assert!(
            result.contains(&format!(
                "Language server fake-lsp-fake published no diagnostics for {file} within 1s of this change"
            )) && result.contains("[lsp] diagnostics_wait"),
            "{result}"
        );
    }
    // A server offering pull diagnostics is asked.
    let pull = mock.result_of("pull");
    assert!(
        pull.contains(
            "Diagnostics from language server fake-lsp-pull for p.fkp after this change (1 error):\n  p.fkp:2:5 error: found the word error [F001]"
        ),
        "{pull}"
    );

    // `[lsp] diagnostics_wait` set long enough, the late diagnostics come.
    std::fs::write(
        env.home.path().join("config.toml"),
        "[lsp]\ndiagnostics_wait = \"60s\"\n",
    )
    .unwrap();
    let mock = script(&[&[(
        "late",
        "fs__edit",
        json!({"path": "late.fk", "old": "error", "new": "error again"}),
    )]]);
    assert_exit(&session(&env, &mock), 0);
    let late = mock.result_of("late");
    assert!(
        late.contains(
            "Diagnostics from language server fake-lsp-fake for late.fk after this change (1 error)"
        ),
        "{late}"
    );
}

#[test]
fn a_server_that_crashes_is_restarted_and_one_that_floods_is_stopped() {
    let env = Env::new();
    install_fake(&env);
    env.write("app.fk", APP);
    env.write("crash.fk", "def f():\n    f()\n# crash\n");
    env.write("flood.fk", "def f():\n    f()\n# flood\n");
    let mock = script(&[
        &[("crash", "lsp", lsp("hover", "crash.fk", 1, 5))],
        &[("after", "lsp", lsp("goToDefinition", "app.fk", 5, 5))],
        &[("flood", "lsp", lsp("hover", "flood.fk", 1, 5))],
    ]);
    let out = session(&env, &mock);
    assert_exit(&out, 0);
    let (crash, is_error) = mock.tool_result("crash");
    assert!(is_error, "{crash}");
    assert!(
        crash.contains("exited with code 3") && crash.contains("crashing as asked"),
        "{crash}"
    );
    // Started again for the next call.
    assert_eq!(
        mock.result_of("after"),
        "1 definition in 1 file:\napp.fk:1:5: def greet(name):"
    );
    let (flood, is_error) = mock.tool_result("flood");
    assert!(is_error, "{flood}");
    assert!(
        flood.contains("was stopped: it wrote a header line longer than"),
        "{flood}"
    );
    // What reached the model is bounded.
    assert!(flood.len() < 4096, "{} bytes", flood.len());
}

#[test]
fn a_server_whose_program_is_missing_says_what_to_install() {
    let env = Env::new();
    let plugin = env.outside.path().join("missing-lsp");
    std::fs::create_dir_all(plugin.join(".claude-plugin")).unwrap();
    std::fs::write(
        plugin.join(".claude-plugin/plugin.json"),
        r#"{"name": "missing-lsp", "lspServers": {"nolsp": {"command": "no-such-language-server", "extensionToLanguage": {".zz": "zz"}}}}"#,
    )
    .unwrap();
    let out = support::install(&env, &plugin);
    let shown = stderr(&out);
    assert!(
        shown.contains("nolsp: runs `no-such-language-server` for .zz files")
            && shown.contains("`no-such-language-server` is not on PATH: install it"),
        "{shown}"
    );
    env.write("a.zz", "x\n");
    let mock = script(&[&[("c", "lsp", lsp("hover", "a.zz", 1, 1))]]);
    let out = session(&env, &mock);
    assert_exit(&out, 0);
    assert!(
        stderr(&out)
            .contains("LSP server missing-lsp-nolsp: `no-such-language-server` is not on PATH"),
        "{}",
        stderr(&out)
    );
    let (result, is_error) = mock.tool_result("c");
    assert!(is_error, "{result}");
    assert!(result.contains("not on PATH"), "{result}");
}

/// pyright's language server from npm, installed into
/// `target/lsp-pyright` (`npm install --prefix target/lsp-pyright
/// pyright@1`): its `.bin` folder, or `None` (the test is then skipped,
/// saying so) when it is not there.
fn pyright_bin() -> Option<PathBuf> {
    let bin = support::target_dir().join("lsp-pyright/node_modules/.bin");
    if bin.join("pyright-langserver").exists() {
        return Some(bin);
    }
    eprintln!(
        "skipped: pyright is not installed; run `npm install --prefix target/lsp-pyright pyright@1` to run this test"
    );
    None
}

#[test]
fn pyright_from_npm_answers_in_the_sandbox_and_reports_type_errors() {
    let Some(bin) = pyright_bin() else {
        return;
    };
    let env = Env::new();
    let plugin = env.outside.path().join("pyright-lsp");
    std::fs::create_dir_all(plugin.join(".claude-plugin")).unwrap();
    std::fs::write(
        plugin.join(".claude-plugin/plugin.json"),
        r#"{"name": "pyright-lsp", "lspServers": {"pyright": {"command": "pyright-langserver", "args": ["--stdio"], "extensionToLanguage": {".py": "python"}}}}"#,
    )
    .unwrap();
    support::install(&env, &plugin);
    // The server's own files are readable in its sandbox through the
    // session's `[exec] read`, as a user would grant a toolchain folder.
    let prefix = bin
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .canonicalize()
        .unwrap();
    std::fs::write(
        env.home.path().join("config.toml"),
        format!("[exec]\nread = [\"{}\"]\n", prefix.display()),
    )
    .unwrap();
    env.write(
        "app.py",
        "def greet(name: str) -> str:\n    return name\n\n\ngreet(\"a\")\n",
    );
    let mock = script(&[
        &[
            ("def", "lsp", lsp("goToDefinition", "app.py", 5, 1)),
            ("hover", "lsp", lsp("hover", "app.py", 5, 1)),
        ],
        &[(
            "edit",
            "fs__edit",
            json!({"path": "app.py", "old": "greet(\"a\")", "new": "greet(1)"}),
        )],
    ]);
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "go");
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    cmd.env("PATH", path)
        .args(["--permission-mode", "accept-edits"])
        .timeout(Duration::from_secs(240));
    let out = cmd.output().unwrap();
    assert_exit(&out, 0);
    assert_eq!(
        mock.result_of("def"),
        "1 definition in 1 file:\napp.py:1:5: def greet(name: str) -> str:"
    );
    let hover = mock.result_of("hover");
    assert!(hover.contains("def greet(name: str) -> str"), "{hover}");
    let edit = mock.result_of("edit");
    assert!(
        edit.contains("Diagnostics from language server pyright-lsp-pyright for app.py")
            && edit.contains("app.py:5:7 error:"),
        "{edit}"
    );
}
