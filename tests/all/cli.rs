//! The `capstan` command line itself: version and help, `tool list`, the
//! JSON output of `tool call`, where the input comes from, how the
//! workspace is chosen and how tool names resolve.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::process::Output;

use serde_json::Value;
use support::{Env, assert_exit, stderr, stdout};

/// Runs `capstan ARGS...` in the test's workspace.
fn capstan(env: &Env, args: &[&str]) -> Output {
    env.capstan().args(args).output().unwrap()
}

/// Parses what a command printed on stdout as one JSON value.
fn json_stdout(out: &Output) -> Value {
    serde_json::from_str(&stdout(out))
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", stdout(out)))
}

/// The exit-code table `--help` must show, one row per code.
const EXIT_CODE_ROWS: [&str; 10] = [
    "0  success",
    "1  capstan could not do its job",
    "2  usage error, or an unknown tool",
    "3  the tool rejected its input",
    "4  denied by the sandbox",
    "5  the tool ran and failed",
    "6  the plugin crashed, timed out, or hit a memory or output limit",
    "7  the model's provider refused or failed the request",
    "8  the agent reached its --max-turns limit",
    "130  interrupted (Ctrl-C)",
];

// ------------------------------------------------------------ version, help

#[test]
fn version_prints_the_crate_version() {
    let env = Env::new();
    for flag in ["--version", "-V"] {
        let out = capstan(&env, &[flag]);
        assert_exit(&out, 0);
        assert_eq!(
            stdout(&out),
            format!("capstan {}\n", env!("CARGO_PKG_VERSION"))
        );
    }
}

#[test]
fn help_describes_the_session_flags_the_commands_and_the_exit_codes() {
    let env = Env::new();
    let out = capstan(&env, &["--help"]);
    assert_exit(&out, 0);
    let help = stdout(&out);
    assert!(help.contains("Usage: capstan"), "{help}");
    assert!(help.contains("sandboxed WebAssembly"), "{help}");
    for item in [
        "tool",
        "session",
        "--print",
        "--output-format",
        "--continue",
        "--resume",
        "--permission-mode",
        "--allow",
        "--deny",
        "--max-turns",
        "--model",
        "scripted:",
        "OPENAI_BASE_URL",
    ] {
        assert!(help.contains(item), "no `{item}` in:\n{help}");
    }
    assert!(help.contains("Exit codes:"), "{help}");
    for row in EXIT_CODE_ROWS {
        assert!(help.contains(row), "no `{row}` in:\n{help}");
    }
}

#[test]
fn verbose_works_before_or_after_the_subcommand() {
    let env = Env::new();
    env.write("a.txt", "hello\n");
    for args in [
        &["-v", "tool", "call", "fs.read", r#"{"path":"a.txt"}"#][..],
        &["tool", "-v", "call", "fs.read", r#"{"path":"a.txt"}"#],
        &["tool", "call", "fs.read", r#"{"path":"a.txt"}"#, "-v"],
        &[
            "--verbose",
            "tool",
            "call",
            "fs.read",
            r#"{"path":"a.txt"}"#,
        ],
    ] {
        let out = capstan(&env, args);
        assert_exit(&out, 0);
        assert!(stdout(&out).contains("hello"), "{args:?}: {}", stdout(&out));
        // Verbose output: where the component came from, and timings.
        assert!(
            stderr(&out).contains("capstan: plugin fs"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    let quiet = capstan(&env, &["tool", "call", "fs.read", r#"{"path":"a.txt"}"#]);
    assert_exit(&quiet, 0);
    assert!(
        !stderr(&quiet).contains("capstan: plugin fs"),
        "{}",
        stderr(&quiet)
    );
    // Session options still cannot be mixed with a subcommand.
    let out = capstan(&env, &["-p", "tool", "list"]);
    assert_ne!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn double_verbose_prints_the_start_up_breakdown_of_only_what_ran() {
    let env = Env::new();
    env.write("a.txt", "hello\n");
    let out = capstan(
        &env,
        &["-vv", "tool", "call", "fs.read", r#"{"path":"a.txt"}"#],
    );
    assert_exit(&out, 0);
    let err = stderr(&out);
    assert!(err.contains("capstan: start-up breakdown ("), "{err}");
    for phase in [
        "arguments",
        "sandbox set-up",
        "component load (fs)",
        "describe (fs)",
        "tool call (fs.read)",
    ] {
        assert!(err.contains(phase), "no `{phase}` in:\n{err}");
    }
    // A call of fs loads no other plugin and starts nothing else.
    for other in ["(web)", "proxy", "MCP", "language servers"] {
        assert!(!err.contains(other), "`{other}` in:\n{err}");
    }
    let once = capstan(
        &env,
        &["-v", "tool", "call", "fs.read", r#"{"path":"a.txt"}"#],
    );
    assert_exit(&once, 0);
    assert!(
        !stderr(&once).contains("start-up breakdown"),
        "{}",
        stderr(&once)
    );

    let out = capstan(&env, &["-vv", "exec", "--", "true"]);
    assert_exit(&out, 0);
    let err = stderr(&out);
    for phase in [
        "config",
        "grants",
        "command set-up",
        "sandbox spawn",
        "command ran",
    ] {
        assert!(err.contains(phase), "no `{phase}` in:\n{err}");
    }
    assert!(!err.contains("component load"), "{err}");
}
#[test]
fn without_a_terminal_or_a_prompt_it_says_what_to_do() {
    let env = Env::new();
    let out = env
        .capstan()
        .env_remove("ANTHROPIC_API_KEY")
        .write_stdin("")
        .output()
        .unwrap();
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("prompt is empty"), "{}", stderr(&out));
}

#[test]
fn without_an_api_key_it_names_the_variable_and_the_offline_demo() {
    let env = Env::new();
    let out = env
        .capstan()
        .args(["-p", "hello"])
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .unwrap();
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(err.contains("ANTHROPIC_API_KEY"), "{err}");
    assert!(err.contains("--model scripted:"), "{err}");
}

#[test]
fn bad_session_flags_are_usage_errors_that_say_what_is_valid() {
    let env = Env::new();
    let out = capstan(&env, &["-p", "x", "--permission-mode", "yolo"]);
    assert_exit(&out, 2);
    for mode in ["default", "accept-edits", "plan", "bypass"] {
        assert!(stderr(&out).contains(mode), "{}", stderr(&out));
    }
    let out = capstan(&env, &["-p", "x", "--allow", "fs.edit(src/**"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("fs.edit(src/**"), "{}", stderr(&out));
    let out = capstan(&env, &["-p", "x", "--output-format", "xml"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("stream-json"), "{}", stderr(&out));
}

#[test]
fn a_missing_or_broken_script_is_named_with_the_problem() {
    let env = Env::new();
    let out = capstan(&env, &["-p", "x", "--model", "scripted:nope.json"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("nope.json"), "{}", stderr(&out));
    env.write(
        "bad.json",
        "{\n  \"turns\": [\n    { \"text\": 1 }\n  ]\n}\n",
    );
    let out = capstan(&env, &["-p", "x", "--model", "scripted:bad.json"]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(err.contains("bad.json") && err.contains("line 3"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_broken_user_config_is_named_with_its_line() {
    let env = Env::new();
    let config = env.home.path().join("config.toml");
    std::fs::write(&config, "[model]\nname = \"x\"\ncolour = 3\n").unwrap();
    let out = capstan(&env, &["-p", "x", "--model", "scripted:nope.json"]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("config.toml") && err.contains("colour"),
        "{err}"
    );
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn session_list_is_empty_for_a_new_folder() {
    let env = Env::new();
    let out = capstan(&env, &["session", "list", "--json"]);
    assert_exit(&out, 0);
    assert_eq!(json_stdout(&out), serde_json::json!([]));
}

#[test]
fn tool_call_help_explains_the_grant_and_the_exit_codes() {
    let env = Env::new();
    let out = capstan(&env, &["tool", "call", "--help"]);
    assert_exit(&out, 0);
    let help = stdout(&out);
    assert!(help.contains("Usage: capstan tool call"), "{help}");
    for flag in [
        "--allow-write",
        "--workspace",
        "--json",
        "--timeout",
        "--memory",
    ] {
        assert!(help.contains(flag), "no {flag} in:\n{help}");
    }
    let flowing = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flowing.contains("read-only unless --allow-write"), "{help}");
    assert!(
        help.contains("capstan tool call fs.read '{\"path\":"),
        "no example in:\n{help}"
    );
    // The exit codes are what a script calling a tool branches on, so the
    // help of `tool call` must show them too.
    assert!(help.contains("Exit codes:"), "{help}");
    for row in EXIT_CODE_ROWS {
        assert!(help.contains(row), "no `{row}` in:\n{help}");
    }
}

#[test]
fn an_unknown_option_is_a_usage_error() {
    let env = Env::new();
    let out = capstan(&env, &["tool", "call", "fs.read", "{}", "--allow-writes"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("--allow-writes"), "{}", stderr(&out));
}

// --------------------------------------------------------------- tool list

#[test]
fn tool_list_shows_the_fs_tools_with_their_modes() {
    let env = Env::new();
    let out = capstan(&env, &["tool", "list"]);
    assert_exit(&out, 0);
    let listing = stdout(&out);
    let rows: Vec<(&str, &str)> = listing
        .lines()
        .map(|line| {
            let mut words = line.split_whitespace();
            (words.next().unwrap(), words.next().unwrap())
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("fs.read", "read-only"),
            ("fs.write", "writes"),
            ("fs.edit", "writes"),
            ("fs.glob", "read-only"),
            ("fs.grep", "read-only"),
            ("fs.ls", "read-only"),
            ("web.fetch", "read-only"),
            ("web.search", "read-only"),
        ],
        "{listing}"
    );
    // Each row carries a one-line summary.
    for line in listing.lines() {
        assert!(line.split_whitespace().count() > 3, "no summary: {line}");
    }
}

#[test]
fn tool_list_json_gives_every_tool_with_its_input_schema() {
    let env = Env::new();
    let out = capstan(&env, &["tool", "list", "--json"]);
    assert_exit(&out, 0);
    let tools = json_stdout(&out);
    let tools = tools.as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "fs.read",
            "fs.write",
            "fs.edit",
            "fs.glob",
            "fs.grep",
            "fs.ls",
            "web.fetch",
            "web.search"
        ]
    );
    for tool in tools {
        let name = tool["name"].as_str().unwrap();
        let read_only = !matches!(name, "fs.write" | "fs.edit");
        assert_eq!(tool["read_only"], read_only, "{name}");
        assert!(!tool["description"].as_str().unwrap().is_empty(), "{name}");
        let schema = &tool["input_schema"];
        assert_eq!(schema["type"], "object", "{name}");
        assert_eq!(schema["additionalProperties"], false, "{name}");
        assert!(schema["properties"].is_object(), "{name}");
    }
    let read = &tools[0]["input_schema"];
    assert_eq!(read["required"], serde_json::json!(["path"]));
    for field in ["path", "offset", "limit"] {
        assert!(
            read["properties"][field]["description"].is_string(),
            "fs.read.{field}"
        );
    }
    let edit = &tools[2]["input_schema"];
    assert_eq!(edit["required"], serde_json::json!(["path", "old", "new"]));
}

// ------------------------------------------------------------- JSON output

#[test]
fn a_call_with_json_prints_one_object_with_the_content() {
    let env = Env::new();
    env.write("a.txt", "alpha\nbeta\n");
    let out = env
        .call("fs.read", r#"{"path":"a.txt"}"#, &["--json"])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(stdout(&out).lines().count(), 1, "{}", stdout(&out));
    assert_eq!(
        json_stdout(&out),
        serde_json::json!({
            "ok": true,
            "tool": "fs.read",
            "content": [{ "type": "text", "text": "     1\talpha\n     2\tbeta\n" }],
        })
    );
}

#[test]
fn an_error_with_json_prints_its_kind_and_message_on_stdout() {
    let env = Env::new();
    env.write("a.txt", "alpha\n");
    let cases = [
        (
            "fs.read",
            r#"{"path":"nope.txt"}"#,
            5,
            "tool_failed",
            "cannot read nope.txt",
        ),
        (
            "fs.write",
            r#"{"path":"a.txt","content":"x"}"#,
            4,
            "denied",
            "denied",
        ),
        (
            "fs.read",
            r#"{"path":"a.txt","offset":0}"#,
            3,
            "invalid_input",
            "field `offset`",
        ),
        ("fs.nope", "{}", 2, "usage", "unknown tool `fs.nope`"),
    ];
    for (tool, input, code, kind, message) in cases {
        let out = env.call(tool, input, &["--json"]).output().unwrap();
        assert_exit(&out, code);
        let value = json_stdout(&out);
        assert_eq!(value["ok"], false, "{tool}: {value}");
        assert_eq!(value["tool"], tool, "{tool}: {value}");
        assert_eq!(value["error"]["kind"], kind, "{tool}: {value}");
        let text = value["error"]["message"].as_str().unwrap();
        assert!(text.contains(message), "{tool}: {text}");
        assert!(!stderr(&out).contains("error:"), "{tool}: {}", stderr(&out));
    }
    assert_eq!(env.read("a.txt"), "alpha\n");
}

#[test]
fn errors_found_before_the_call_are_json_too_with_json() {
    // `--json` promises "the result (or the error) as one JSON object on
    // stdout"; a script must not have to parse stderr for some errors.
    let env = Env::new();
    let cases: [(&[&str], i32, &str); 4] = [
        (&["fs.read", "{\"path\":"], 3, "invalid_input"),
        (&["fs.read", "[1]"], 3, "invalid_input"),
        (&["nope.read", "{}"], 2, "usage"),
        (
            &["fs.read", "{}", "--workspace", "/no/such/folder"],
            1,
            "error",
        ),
    ];
    for (args, code, kind) in cases {
        let out = env
            .capstan()
            .args(["tool", "call"])
            .args(args)
            .arg("--json")
            .output()
            .unwrap();
        assert_exit(&out, code);
        let value: Value = serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| {
            panic!(
                "{args:?}: stdout is not JSON ({e}): {:?}; stderr: {}",
                stdout(&out),
                stderr(&out)
            )
        });
        assert_eq!(value["ok"], false, "{args:?}: {value}");
        assert_eq!(value["error"]["kind"], kind, "{args:?}: {value}");
    }
}

// ------------------------------------------------------------------- input

#[test]
fn input_can_come_from_stdin() {
    let env = Env::new();
    env.write("a.txt", "from stdin\n");
    // As `-`...
    let out = env
        .capstan()
        .args(["tool", "call", "fs.read", "-"])
        .write_stdin(r#"{"path":"a.txt"}"#)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "     1\tfrom stdin\n");
    // ...or left out.
    let out = env
        .capstan()
        .args(["tool", "call", "fs.read"])
        .write_stdin("{\"path\":\"a.txt\"}\n")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "     1\tfrom stdin\n");
    // Empty stdin is an empty object: fine for fs.ls, missing `path` for
    // fs.read.
    let out = env
        .capstan()
        .args(["tool", "call", "fs.ls"])
        .write_stdin("")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "./ (1 entry)\na.txt  11 B\n");
    let out = env
        .capstan()
        .args(["tool", "call", "fs.read", "-"])
        .write_stdin("")
        .output()
        .unwrap();
    assert_exit(&out, 3);
    assert!(
        stderr(&out).contains("missing field `path`"),
        "{}",
        stderr(&out)
    );
    // Invalid JSON on stdin is refused like invalid JSON in the argument.
    let out = env
        .capstan()
        .args(["tool", "call", "fs.read", "-"])
        .write_stdin("path=a.txt")
        .output()
        .unwrap();
    assert_exit(&out, 3);
    assert!(stderr(&out).contains("not valid JSON"), "{}", stderr(&out));
}

#[test]
fn input_that_is_not_an_object_is_invalid() {
    let env = Env::new();
    for input in ["[1]", "\"a.txt\"", "42", "null"] {
        let out = env.call("fs.read", input, &[]).output().unwrap();
        assert_exit(&out, 3);
        assert!(
            stderr(&out).contains("the input must be a JSON object"),
            "{input}: {}",
            stderr(&out)
        );
    }
}

// --------------------------------------------------------------- workspace

#[test]
fn workspace_points_the_tools_at_another_folder() {
    let env = Env::new();
    env.write("a.txt", "in the current folder\n");
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("a.txt"), "in the other folder\n").unwrap();
    let other_path = other.path().to_str().unwrap();

    let out = env
        .call(
            "fs.read",
            r#"{"path":"a.txt"}"#,
            &["--workspace", other_path],
        )
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "     1\tin the other folder\n");

    // Writes land there too, and only with --allow-write.
    let out = env
        .call(
            "fs.write",
            r#"{"path":"b.txt","content":"new"}"#,
            &["-w", other_path, "--allow-write"],
        )
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(
        std::fs::read_to_string(other.path().join("b.txt")).unwrap(),
        "new"
    );
    assert!(!env.ws.path().join("b.txt").exists());

    // The current folder is then outside the workspace.
    let current = env.ws_path().join("a.txt");
    let out = env
        .call(
            "fs.read",
            &format!(r#"{{"path":"{}"}}"#, current.display()),
            &["--workspace", other_path],
        )
        .output()
        .unwrap();
    assert_exit(&out, 4);
    assert!(!stdout(&out).contains("current folder"), "{}", stdout(&out));
}

#[test]
fn a_missing_workspace_folder_is_a_clear_error() {
    let env = Env::new();
    let missing = env.ws_path().join("no-such-folder");
    let out = env
        .call("fs.ls", "{}", &["--workspace", missing.to_str().unwrap()])
        .output()
        .unwrap();
    assert_exit(&out, 1);
    let message = stderr(&out);
    assert!(message.starts_with("error: "), "{message}");
    assert!(message.contains(missing.to_str().unwrap()), "{message}");
    let lower = message.to_lowercase();
    assert!(
        lower.contains("does not exist") || lower.contains("no such"),
        "{message}"
    );
    // Said in words, not as a bare OS error code.
    assert!(!message.contains("os error"), "{message}");

    // A file is not a folder either.
    env.write("a.txt", "");
    let file = env.ws_path().join("a.txt");
    let out = env
        .call("fs.ls", "{}", &["--workspace", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_exit(&out, 1);
    assert!(stderr(&out).contains("is not a folder"), "{}", stderr(&out));
}

// -------------------------------------------------------------- tool names

#[test]
fn a_bare_tool_name_resolves_to_the_plugin_that_offers_it() {
    let env = Env::new();
    env.write("a.txt", "bare\n");
    let bare = env
        .call("read", r#"{"path":"a.txt"}"#, &[])
        .output()
        .unwrap();
    assert_exit(&bare, 0);
    assert_eq!(stdout(&bare), "     1\tbare\n");
    let full = env
        .call("fs.read", r#"{"path":"a.txt"}"#, &[])
        .output()
        .unwrap();
    assert_eq!(stdout(&bare), stdout(&full));

    let out = env.call("ls", "{}", &[]).output().unwrap();
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "./ (1 entry)\na.txt  5 B\n");

    let out = env.call("nope", "{}", &[]).output().unwrap();
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("unknown tool `nope`"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("PLUGIN.TOOL"), "{}", stderr(&out));
}

#[test]
fn output_closed_by_its_reader_ends_quietly_with_141() {
    let env = Env::new();
    // The reading end is gone before capstan starts, so its first write to
    // stdout fails as it does under `capstan tool list | head -0`.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = env
        .capstan_std()
        .args(["tool", "list"])
        .stdout(writer)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(141), "stderr:\n{}", stderr(&out));
    assert!(
        !stderr(&out).contains("panicked"),
        "a closed pipe is reported as a crash:\n{}",
        stderr(&out)
    );
}

/// Every `.cwasm` file beneath `dir`.
fn compiled_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "cwasm") {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn built_in_tools_run_precompiled_with_an_empty_home_and_write_no_cache() {
    let env = Env::new();
    env.write("a.txt", "hello from a fresh home\n");
    let (home, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for _ in 0..2 {
        let out = env
            .capstan()
            .env("CAPSTAN_HOME", home.path())
            .env("HOME", home.path())
            .env("CAPSTAN_CACHE_DIR", cache.path())
            .args(["-v", "tool", "call", "fs.read", r#"{"path":"a.txt"}"#])
            .output()
            .unwrap();
        assert_exit(&out, 0);
        assert!(
            stdout(&out).contains("hello from a fresh home"),
            "{}",
            stdout(&out)
        );
        assert!(
            stderr(&out).contains("plugin fs loaded precompiled in the binary"),
            "{}",
            stderr(&out)
        );
        assert_eq!(
            compiled_files(cache.path()),
            Vec::<std::path::PathBuf>::new()
        );
        assert_eq!(
            compiled_files(home.path()),
            Vec::<std::path::PathBuf>::new()
        );
    }
}
