//! The built-in `fs` tools through the real `capstan` binary: each tool's
//! normal use with its exact output, its error paths with their exit codes
//! and messages, the input checks every tool shares, and attempts to use
//! the tools themselves to get out of the workspace (`escapes.rs` does the
//! same with a fixture that skips the tools' own path checks).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::process::Output;

use support::{Env, assert_exit, names_in, stderr, stdout};

/// Runs `capstan tool call TOOL INPUT EXTRA...` and returns what it did.
fn run(env: &Env, tool: &str, input: &str, extra: &[&str]) -> Output {
    env.call(tool, input, extra).output().unwrap()
}

// ---------------------------------------------------------------- fs.read

#[test]
fn read_numbers_lines_like_cat_n() {
    let env = Env::new();
    env.write("src/a.txt", "alpha\n\nbeta");
    let out = run(&env, "fs.read", r#"{"path":"src/a.txt"}"#, &[]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "     1\talpha\n     2\t\n     3\tbeta\n");
}

#[test]
fn read_with_offset_and_limit_says_how_to_read_more() {
    let env = Env::new();
    env.write("five.txt", "a\nb\nc\nd\ne\n");
    let out = run(
        &env,
        "fs.read",
        r#"{"path":"five.txt","offset":2,"limit":2}"#,
        &[],
    );
    assert_exit(&out, 0);
    assert_eq!(
        stdout(&out),
        "     2\tb\n     3\tc\n\n(lines 2-3 of 5; use offset=4 to read more)\n"
    );
    // Reading to the end needs no note.
    let out = run(&env, "fs.read", r#"{"path":"five.txt","offset":4}"#, &[]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "     4\td\n     5\te\n");
}

#[test]
fn read_shows_2000_lines_by_default_with_a_note() {
    let env = Env::new();
    let text: String = (1..=2500).map(|n| format!("line {n}\n")).collect();
    env.write("long.txt", text);
    let out = run(&env, "fs.read", r#"{"path":"long.txt"}"#, &[]);
    assert_exit(&out, 0);
    let shown = stdout(&out);
    assert!(shown.contains("  2000\tline 2000\n"), "{shown}");
    assert!(!shown.contains("line 2001"), "{shown}");
    assert!(
        shown.ends_with("\n(lines 1-2000 of 2500; use offset=2001 to read more)\n"),
        "{}",
        &shown[shown.len() - 200..]
    );
}

#[test]
fn read_caps_long_output_and_long_lines_with_notes() {
    let env = Env::new();
    // 2000 lines of 1000 characters: each shown line takes 6 + 1 + 1000 + 1
    // = 1008 bytes, so 256 KiB (262144 bytes) hold 260 of them.
    env.write("wide.txt", format!("{}\n", "x".repeat(1000)).repeat(2000));
    let out = run(&env, "fs.read", r#"{"path":"wide.txt"}"#, &[]);
    assert_exit(&out, 0);
    let shown = stdout(&out);
    assert!(shown.len() <= 256 * 1024 + 200, "{} bytes", shown.len());
    assert!(shown.contains(&format!("   260\t{}\n", "x".repeat(1000))));
    assert!(!shown.contains("   261\t"));
    assert!(
        shown.ends_with(
            "\n(output cut at 256 KiB after line 260 of 2000; use offset=261 to read on, \
             with a smaller limit)\n"
        ),
        "{}",
        &shown[shown.len() - 200..]
    );

    // A line over 2000 characters is cut, and says how long it was.
    env.write("line.txt", format!("{}\nshort\n", "é".repeat(2500)));
    let out = run(&env, "fs.read", r#"{"path":"line.txt"}"#, &[]);
    assert_exit(&out, 0);
    assert_eq!(
        stdout(&out),
        format!(
            "     1\t{}… [line cut: 2500 characters, showing the first 2000]\n     2\tshort\n",
            "é".repeat(2000)
        )
    );
}

#[test]
fn read_gets_every_byte_of_files_around_read_sizes() {
    // Files are read in pieces (16 KiB first, then 64 KiB); sizes at and
    // around those boundaries must come back whole.
    let env = Env::new();
    for size in [
        16 * 1024 - 1,
        16 * 1024,
        16 * 1024 + 1,
        80 * 1024,
        128 * 1024 + 5,
    ] {
        // Lines of 8 bytes ("nnnnnnn\n"), the last one possibly partial.
        let text: String = (0..size / 8)
            .map(|i| format!("{i:07}\n"))
            .chain(std::iter::once("t".repeat(size % 8)))
            .collect();
        assert_eq!(text.len(), size);
        env.write("sized.txt", &text);
        let out = run(
            &env,
            "fs.read",
            r#"{"path":"sized.txt","limit":100000}"#,
            &[],
        );
        assert_exit(&out, 0);
        let shown = stdout(&out);
        let last_full = size / 8 - 1;
        assert!(
            shown.contains(&format!("\t{last_full:07}\n")),
            "size {size}: line {last_full} missing"
        );
        if size % 8 != 0 {
            assert!(
                shown.contains(&"t".repeat(size % 8)),
                "size {size}: tail missing"
            );
        }
    }
}

#[test]
fn read_refuses_a_binary_file_clearly() {
    let env = Env::new();
    env.write("x.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    let out = run(&env, "fs.read", r#"{"path":"x.png"}"#, &[]);
    assert_exit(&out, 5);
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains(
            "error: fs.read: x.png is a binary file (16 bytes); fs.read shows text files only"
        ),
        "{}",
        stderr(&out)
    );
    // Invalid UTF-8 without a NUL byte is binary too.
    env.write("latin1.txt", b"caf\xe9\n");
    let out = run(&env, "fs.read", r#"{"path":"latin1.txt"}"#, &[]);
    assert_exit(&out, 5);
    assert!(stderr(&out).contains("latin1.txt is a binary file (5 bytes)"));
}

#[test]
fn read_of_a_missing_file_fails_with_exit_5() {
    let env = Env::new();
    let out = run(&env, "fs.read", r#"{"path":"nope.txt"}"#, &[]);
    assert_exit(&out, 5);
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains("error: fs.read: cannot read nope.txt: no such file or folder"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("os error"), "{}", stderr(&out));
}

#[test]
fn read_of_a_folder_points_to_fs_ls() {
    let env = Env::new();
    env.write("src/lib.rs", "");
    let out = run(&env, "fs.read", r#"{"path":"src"}"#, &[]);
    assert_exit(&out, 5);
    assert!(
        stderr(&out).contains("error: fs.read: src is a folder; use fs.ls to list it"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn read_of_an_empty_file_says_so() {
    let env = Env::new();
    env.write("empty.txt", "");
    let out = run(&env, "fs.read", r#"{"path":"empty.txt"}"#, &[]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "(empty.txt is empty)\n");
}

#[test]
fn read_with_an_offset_past_the_end_names_the_line_count() {
    let env = Env::new();
    env.write("two.txt", "a\nb\n");
    let out = run(&env, "fs.read", r#"{"path":"two.txt","offset":3}"#, &[]);
    assert_exit(&out, 5);
    assert!(
        stderr(&out).contains(
            "offset 3 is past the end of two.txt, which has 2 lines; use an offset from 1 to 2"
        ),
        "{}",
        stderr(&out)
    );
    // Offset 0 is a mistake in the input, not a failure of the tool.
    let out = run(&env, "fs.read", r#"{"path":"two.txt","offset":0}"#, &[]);
    assert_exit(&out, 3);
    assert!(stderr(&out).contains("field `offset`"), "{}", stderr(&out));
}

// --------------------------------------------------------------- fs.write

#[test]
fn write_creates_parent_folders() {
    let env = Env::new();
    let out = run(
        &env,
        "fs.write",
        r#"{"path":"a/b/c.txt","content":"héllo\n"}"#,
        &["--allow-write"],
    );
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "Created a/b/c.txt (7 bytes)\n");
    assert_eq!(env.read("a/b/c.txt"), "héllo\n");
}

#[test]
fn write_overwrites_whole_and_leaves_no_temporary_file() {
    let env = Env::new();
    env.write("notes/a.txt", "a much longer old text\n");
    let out = run(
        &env,
        "fs.write",
        r#"{"path":"notes/a.txt","content":"new"}"#,
        &["--allow-write"],
    );
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "Overwrote notes/a.txt (3 bytes)\n");
    assert_eq!(env.read("notes/a.txt"), "new");
    assert_eq!(names_in(&env.ws.path().join("notes")), ["a.txt"]);
    assert_eq!(names_in(env.ws.path()), ["notes"]);
}

#[test]
fn write_without_allow_write_is_denied_and_writes_nothing() {
    let env = Env::new();
    env.write("keep.txt", "original");
    for (input, path) in [
        (r#"{"path":"new.txt","content":"x"}"#, "new.txt"),
        (r#"{"path":"deep/er/new.txt","content":"x"}"#, "deep"),
        (r#"{"path":"keep.txt","content":"changed"}"#, "keep.txt"),
    ] {
        let out = run(&env, "fs.write", input, &[]);
        assert_exit(&out, 4);
        assert_eq!(stdout(&out), "");
        assert!(
            stderr(&out).contains("error: fs.write: denied"),
            "{}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("pass --allow-write to let fs.write change files"),
            "{}",
            stderr(&out)
        );
        assert!(
            path == "keep.txt" || !env.ws.path().join(path).exists(),
            "{path} was created"
        );
        // Only a folder that is missing may be blamed on folder creation.
        if path != "deep" {
            assert!(
                !stderr(&out).contains("cannot create the folder"),
                "{input}: {}",
                stderr(&out)
            );
        }
    }
    assert_eq!(env.read("keep.txt"), "original");
    assert_eq!(names_in(env.ws.path()), ["keep.txt"]);
}

#[test]
fn write_over_a_folder_fails() {
    let env = Env::new();
    env.write("src/lib.rs", "");
    let out = run(
        &env,
        "fs.write",
        r#"{"path":"src","content":"x"}"#,
        &["--allow-write"],
    );
    assert_exit(&out, 5);
    assert!(
        stderr(&out).contains("src is a folder; give the path of a file to write"),
        "{}",
        stderr(&out)
    );
    assert_eq!(names_in(&env.ws.path().join("src")), ["lib.rs"]);
}

// ---------------------------------------------------------------- fs.edit

#[test]
fn edit_replaces_a_single_occurrence() {
    let env = Env::new();
    env.write("a.rs", "let x = 1;\nlet y = 1;\n");
    let out = run(
        &env,
        "fs.edit",
        r#"{"path":"a.rs","old":"x = 1","new":"x = 2"}"#,
        &["--allow-write"],
    );
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "Replaced 1 occurrence in a.rs\n");
    assert_eq!(env.read("a.rs"), "let x = 2;\nlet y = 1;\n");
    assert_eq!(names_in(env.ws.path()), ["a.rs"]);
}

#[test]
fn edit_with_old_absent_fails_and_leaves_the_file() {
    let env = Env::new();
    env.write("a.rs", "let x = 1;\n");
    let out = run(
        &env,
        "fs.edit",
        r#"{"path":"a.rs","old":"let z","new":"let w"}"#,
        &["--allow-write"],
    );
    assert_exit(&out, 5);
    assert!(
        stderr(&out).contains("error: fs.edit: `old` was not found in a.rs."),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.read("a.rs"), "let x = 1;\n");
    assert_eq!(names_in(env.ws.path()), ["a.rs"]);
}

#[test]
fn edit_of_a_text_that_is_not_unique_fails_with_the_count() {
    let env = Env::new();
    env.write("a.rs", "let x = 1;\nlet y = 1;\nlet z = 1;\n");
    let out = run(
        &env,
        "fs.edit",
        r#"{"path":"a.rs","old":"= 1","new":"= 2"}"#,
        &["--allow-write"],
    );
    assert_exit(&out, 5);
    assert!(
        stderr(&out).contains("`old` was found 3 times in a.rs"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("replace_all"), "{}", stderr(&out));
    assert_eq!(env.read("a.rs"), "let x = 1;\nlet y = 1;\nlet z = 1;\n");
}

#[test]
fn edit_with_replace_all_replaces_every_occurrence() {
    let env = Env::new();
    env.write("a.rs", "let x = 1;\nlet y = 1;\nlet z = 1;\n");
    let out = run(
        &env,
        "fs.edit",
        r#"{"path":"a.rs","old":"= 1","new":"= 2","replace_all":true}"#,
        &["--allow-write"],
    );
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "Replaced 3 occurrences in a.rs\n");
    assert_eq!(env.read("a.rs"), "let x = 2;\nlet y = 2;\nlet z = 2;\n");
    assert_eq!(names_in(env.ws.path()), ["a.rs"]);
}

#[test]
fn edit_without_allow_write_is_denied_and_leaves_the_file() {
    let env = Env::new();
    env.write("a.rs", "let x = 1;\n");
    let out = run(
        &env,
        "fs.edit",
        r#"{"path":"a.rs","old":"x = 1","new":"x = 2"}"#,
        &[],
    );
    assert_exit(&out, 4);
    assert!(
        stderr(&out).contains("error: fs.edit: denied"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("pass --allow-write to let fs.edit change files"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.read("a.rs"), "let x = 1;\n");
    assert_eq!(names_in(env.ws.path()), ["a.rs"]);
}

#[test]
fn edit_of_a_missing_file_points_to_fs_write() {
    let env = Env::new();
    let out = run(
        &env,
        "fs.edit",
        r#"{"path":"a.rs","old":"x","new":"y"}"#,
        &["--allow-write"],
    );
    assert_exit(&out, 5);
    assert!(
        stderr(&out).contains("a.rs does not exist; to create a file, use fs.write"),
        "{}",
        stderr(&out)
    );
    assert!(!env.ws.path().join("a.rs").exists());
}

// ---------------------------------------------------------------- fs.glob

/// A workspace with a `.git` folder, ignore files and files at several
/// depths, created out of name order.
fn project() -> Env {
    let env = Env::new();
    for (path, text) in [
        ("z.rs", "fn z() {}\n"),
        ("src/nested/c.rs", "fn c() {}\n"),
        ("src/b.rs", "fn b() {}\n"),
        ("src/a.rs", "fn a() {}\n"),
        ("src/gen.rs", "fn generated() {}\n"),
        ("src/.gitignore", "gen.rs\n"),
        ("script.py", "def a(): pass\n"),
        ("target/debug/out.rs", "fn out() {}\n"),
        ("debug.log", "fn log() {}\n"),
        (".gitignore", "target/\n*.log\n"),
        (".git/HEAD", "ref: refs/heads/main\n"),
        (".git/hooks/hook.rs", "fn hook() {}\n"),
    ] {
        env.write(path, text);
    }
    env
}

#[test]
fn glob_lists_sorted_and_skips_git_and_ignored_files() {
    let env = project();
    let out = run(&env, "fs.glob", r#"{"pattern":"**/*.rs"}"#, &[]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "src/a.rs\nsrc/b.rs\nsrc/nested/c.rs\nz.rs\n");
    let out = run(&env, "fs.glob", r#"{"pattern":"**/*"}"#, &[]);
    assert_exit(&out, 0);
    assert_eq!(
        stdout(&out),
        ".gitignore\nscript.py\nsrc/.gitignore\nsrc/a.rs\nsrc/b.rs\nsrc/nested/c.rs\nz.rs\n"
    );
}

#[test]
fn glob_in_a_folder_and_with_no_match() {
    let env = project();
    let out = run(&env, "fs.glob", r#"{"pattern":"*.rs","path":"src"}"#, &[]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "src/a.rs\nsrc/b.rs\n");
    let out = run(&env, "fs.glob", r#"{"pattern":"*.go"}"#, &[]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).starts_with("No files match `*.go` in ."),
        "{}",
        stdout(&out)
    );
}

#[test]
fn glob_with_a_bad_pattern_is_invalid_input() {
    let env = project();
    let out = run(&env, "fs.glob", r#"{"pattern":"src/[a"}"#, &[]);
    assert_exit(&out, 3);
    assert!(stderr(&out).contains("field `pattern`"), "{}", stderr(&out));
}

/// Patterns whose regular expression does not compile: the fs component
/// used to trap on them (a globset panic, "regex compilation shouldn't
/// fail"); each is now invalid input, for `fs.glob`'s `pattern` and
/// `fs.grep`'s `glob`, and the next call is served.
#[test]
fn glob_patterns_too_complex_to_match_are_invalid_input() {
    let env = project();
    let nested = |depth: usize| format!("{}a{}", "{".repeat(depth), "}".repeat(depth));
    let patterns = [
        nested(251),
        format!("src/{}/*.rs", nested(400)),
        format!("{{*.rs,{}}}", nested(300)),
    ];
    for pattern in &patterns {
        let input = serde_json::json!({ "pattern": pattern }).to_string();
        let out = run(&env, "fs.glob", &input, &[]);
        assert_exit(&out, 3);
        let err = stderr(&out);
        assert!(
            err.contains(
                "error: fs.glob: invalid input: field `pattern`: the pattern is too complex"
            ),
            "{err}"
        );
        assert!(!err.contains("panicked") && !err.contains("trap"), "{err}");

        let input = serde_json::json!({ "pattern": "fn", "glob": pattern }).to_string();
        let out = run(&env, "fs.grep", &input, &[]);
        assert_exit(&out, 3);
        let err = stderr(&out);
        assert!(
            err.contains("error: fs.grep: invalid input: field `glob`: the pattern is too complex"),
            "{err}"
        );
        assert!(!err.contains("panicked") && !err.contains("trap"), "{err}");
    }
    // Nesting the matcher takes still works.
    let input = serde_json::json!({ "pattern": format!("src/{}.rs", nested(50)) }).to_string();
    let out = run(&env, "fs.glob", &input, &[]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "src/a.rs\n");
}

// ---------------------------------------------------------------- fs.grep

const TEN_LINES: &str = "one\nHIT two\nthree\nHIT four\nfive\nsix\nseven\neight\nHIT nine\nten\n";

#[test]
fn grep_finds_lines_by_regex() {
    let env = project();
    let out = run(&env, "fs.grep", r#"{"pattern":"^fn \\w+\\(\\)"}"#, &[]);
    assert_exit(&out, 0);
    // gen.rs (ignored), out.rs (ignored folder), hook.rs (.git) and
    // debug.log (ignored) would match too if they were searched.
    assert_eq!(
        stdout(&out),
        "src/a.rs:1:fn a() {}\nsrc/b.rs:1:fn b() {}\nsrc/nested/c.rs:1:fn c() {}\nz.rs:1:fn z() {}\n"
    );
}

#[test]
fn grep_with_a_glob_searches_only_matching_files() {
    let env = project();
    let out = run(&env, "fs.grep", r#"{"pattern":"a\\(","glob":"*.py"}"#, &[]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "script.py:1:def a(): pass\n");
    let out = run(&env, "fs.grep", r#"{"pattern":"a\\(","glob":"*.rs"}"#, &[]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "src/a.rs:1:fn a() {}\n");
}

#[test]
fn grep_context_lines_are_grouped_with_separators() {
    let env = Env::new();
    env.write("a.txt", TEN_LINES);
    let out = run(&env, "fs.grep", r#"{"pattern":"HIT","context":1}"#, &[]);
    assert_exit(&out, 0);
    assert_eq!(
        stdout(&out),
        "a.txt-1-one\na.txt:2:HIT two\na.txt-3-three\na.txt:4:HIT four\na.txt-5-five\n\
         --\na.txt-8-eight\na.txt:9:HIT nine\na.txt-10-ten\n"
    );
}

#[test]
fn grep_stops_at_max_results_with_a_note() {
    let env = Env::new();
    env.write("a.txt", TEN_LINES);
    env.write("b.txt", "HIT\n");
    let out = run(&env, "fs.grep", r#"{"pattern":"HIT","max_results":2}"#, &[]);
    assert_exit(&out, 0);
    assert_eq!(
        stdout(&out),
        "a.txt:2:HIT two\na.txt:4:HIT four\n(stopped at max_results=2 matching lines; \
         narrow the pattern, path or glob, or raise max_results)\n"
    );
}

#[test]
fn grep_with_an_invalid_regex_is_invalid_input() {
    let env = Env::new();
    env.write("a.txt", "fn (\n");
    let out = run(&env, "fs.grep", r#"{"pattern":"fn ("}"#, &[]);
    assert_exit(&out, 3);
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out)
            .contains("error: fs.grep: invalid input: field `pattern` is not a valid regex"),
        "{}",
        stderr(&out)
    );
}

// ------------------------------------------------------------------ fs.ls

#[test]
fn ls_marks_folders_and_shows_sizes() {
    let env = Env::new();
    env.write("b.txt", "hello");
    env.write("big.bin", vec![7u8; 1536]);
    env.write(".env", "");
    env.write("src/lib.rs", "");
    let out = run(&env, "fs.ls", "{}", &[]);
    assert_exit(&out, 0);
    assert_eq!(
        stdout(&out),
        "./ (4 entries)\n.env  0 B\nb.txt  5 B\nbig.bin  1.5 KiB\nsrc/\n"
    );
    let out = run(&env, "fs.ls", r#"{"path":"src"}"#, &[]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "src/ (1 entry)\nlib.rs  0 B\n");
}

#[test]
fn ls_of_a_file_or_a_missing_folder_fails() {
    let env = Env::new();
    env.write("a.txt", "");
    let out = run(&env, "fs.ls", r#"{"path":"a.txt"}"#, &[]);
    assert_exit(&out, 5);
    assert!(
        stderr(&out).contains("a.txt is a file, not a folder; use fs.read to see it"),
        "{}",
        stderr(&out)
    );
    let out = run(&env, "fs.ls", r#"{"path":"nope"}"#, &[]);
    assert_exit(&out, 5);
    assert!(
        stderr(&out).contains("cannot list nope: no such file or folder"),
        "{}",
        stderr(&out)
    );
}

// ------------------------------------------------------ input every tool checks

#[test]
fn input_that_is_not_json_is_invalid() {
    let env = Env::new();
    let out = run(&env, "fs.read", r#"{"path":"#, &[]);
    assert_exit(&out, 3);
    assert!(
        stderr(&out).contains("the input is not valid JSON"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_unknown_field_is_invalid_and_named() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    for tool in [
        "fs.read", "fs.ls", "fs.grep", "fs.glob", "fs.write", "fs.edit",
    ] {
        let out = run(
            &env,
            tool,
            r#"{"path":"a.txt","bogus_field":1}"#,
            &["--allow-write"],
        );
        assert_exit(&out, 3);
        assert!(
            stderr(&out).contains("unknown field `bogus_field`"),
            "{tool}: {}",
            stderr(&out)
        );
    }
    assert_eq!(env.read("a.txt"), "a\n");
}

#[test]
fn a_field_of_the_wrong_type_is_named() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let out = run(&env, "fs.read", r#"{"path":5}"#, &[]);
    assert_exit(&out, 3);
    assert!(stderr(&out).contains("field `path`"), "{}", stderr(&out));
    let out = run(&env, "fs.read", r#"{"path":"a.txt","limit":"ten"}"#, &[]);
    assert_exit(&out, 3);
    assert!(stderr(&out).contains("field `limit`"), "{}", stderr(&out));
    let out = run(&env, "fs.grep", r#"{"pattern":"a","context":-1}"#, &[]);
    assert_exit(&out, 3);
    assert!(stderr(&out).contains("field `context`"), "{}", stderr(&out));
}

#[test]
fn a_missing_required_field_is_named() {
    let env = Env::new();
    let cases = [
        ("fs.read", "{}", "missing field `path`"),
        ("fs.write", r#"{"path":"a.txt"}"#, "missing field `content`"),
        (
            "fs.edit",
            r#"{"path":"a.txt","old":"x"}"#,
            "missing field `new`",
        ),
        ("fs.grep", "{}", "missing field `pattern`"),
        ("fs.glob", "{}", "missing field `pattern`"),
    ];
    for (tool, input, expected) in cases {
        let out = run(&env, tool, input, &["--allow-write"]);
        assert_exit(&out, 3);
        assert!(stderr(&out).contains(expected), "{tool}: {}", stderr(&out));
    }
    assert!(names_in(env.ws.path()).is_empty());
}

#[test]
fn an_unknown_tool_lists_the_tools_there_are() {
    let env = Env::new();
    let out = run(&env, "fs.nope", "{}", &[]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains(
            "unknown tool `fs.nope`; available: fs.read, fs.write, fs.edit, fs.glob, fs.grep, fs.ls"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_unknown_plugin_is_a_usage_error() {
    let env = Env::new();
    let out = run(&env, "nope.read", "{}", &[]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("`nope`"), "{}", stderr(&out));
    assert!(stderr(&out).contains("available: fs"), "{}", stderr(&out));
}

// ------------------------------------------------------ escapes through the tools

#[test]
fn read_cannot_reach_outside_the_workspace() {
    let env = Env::new();
    let secret = env.write_outside("secret.txt", "TOP SECRET");
    env.write("inside.txt", "inside\n");
    for path in [
        env.dotdot_outside("secret.txt"),
        secret.display().to_string(),
        format!("sub/../{}", env.dotdot_outside("secret.txt")),
        "/proc/self/environ".to_string(),
        "/etc/passwd".to_string(),
    ] {
        let out = env
            .call("fs.read", &format!(r#"{{"path":"{path}"}}"#), &[])
            .env("CAPSTAN_TEST_SECRET", "hunter2")
            .output()
            .unwrap();
        assert_exit(&out, 4);
        assert!(stderr(&out).contains("denied"), "{path}: {}", stderr(&out));
        for text in [stdout(&out), stderr(&out)] {
            assert!(!text.contains("TOP SECRET"), "{path}: {text}");
            assert!(!text.contains("hunter2"), "{path}: {text}");
            assert!(!text.contains("root:"), "{path}: {text}");
        }
    }
    // Control: an absolute path inside the workspace is fine.
    let inside = env.ws_path().join("inside.txt");
    let out = run(
        &env,
        "fs.read",
        &format!(r#"{{"path":"{}"}}"#, inside.display()),
        &[],
    );
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "     1\tinside\n");
}

#[test]
fn a_symlink_out_of_the_workspace_leads_nowhere() {
    let env = Env::new();
    let secret = env.write_outside("secret.txt", "TOP SECRET");
    let ws = env.ws_path();
    std::os::unix::fs::symlink(&secret, ws.join("abs-link.txt")).unwrap();
    std::os::unix::fs::symlink(env.dotdot_outside("secret.txt"), ws.join("rel-link.txt")).unwrap();
    std::os::unix::fs::symlink(env.outside.path(), ws.join("linkdir")).unwrap();

    for path in ["abs-link.txt", "rel-link.txt", "linkdir/secret.txt"] {
        let out = run(&env, "fs.read", &format!(r#"{{"path":"{path}"}}"#), &[]);
        assert!(!out.status.success(), "read through {path} succeeded");
        assert!(
            !stdout(&out).contains("TOP SECRET"),
            "{path}: {}",
            stdout(&out)
        );
        assert!(
            !stderr(&out).contains("TOP SECRET"),
            "{path}: {}",
            stderr(&out)
        );

        let out = run(
            &env,
            "fs.write",
            &format!(r#"{{"path":"{path}","content":"pwned"}}"#),
            &["--allow-write"],
        );
        assert_exit(&out, 4);

        let out = run(
            &env,
            "fs.edit",
            &format!(r#"{{"path":"{path}","old":"TOP","new":"pwned"}}"#),
            &["--allow-write"],
        );
        assert_exit(&out, 4);
        assert!(
            !stderr(&out).contains("TOP SECRET"),
            "{path}: {}",
            stderr(&out)
        );
    }
    let out = run(
        &env,
        "fs.write",
        r#"{"path":"linkdir/new.txt","content":"pwned"}"#,
        &["--allow-write"],
    );
    assert_exit(&out, 4);

    // Searching and listing do not follow the links out either.
    let out = run(&env, "fs.grep", r#"{"pattern":"SECRET"}"#, &[]);
    assert!(!stdout(&out).contains("TOP SECRET"), "{}", stdout(&out));
    let out = run(&env, "fs.ls", r#"{"path":"linkdir"}"#, &[]);
    assert_exit(&out, 4);
    assert!(!stdout(&out).contains("secret.txt"), "{}", stdout(&out));

    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "TOP SECRET");
    assert_eq!(names_in(env.outside.path()), ["secret.txt"]);
    for link in ["abs-link.txt", "rel-link.txt", "linkdir"] {
        let meta = std::fs::symlink_metadata(ws.join(link)).unwrap();
        assert!(meta.file_type().is_symlink(), "{link} was replaced");
    }

    // Control: a relative link that stays inside can be read and written
    // through, and stays a link.
    env.write("real.txt", "inside\n");
    std::os::unix::fs::symlink("real.txt", ws.join("inner-link.txt")).unwrap();
    let out = run(&env, "fs.read", r#"{"path":"inner-link.txt"}"#, &[]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "     1\tinside\n");
    let out = run(
        &env,
        "fs.write",
        r#"{"path":"inner-link.txt","content":"changed\n"}"#,
        &["--allow-write"],
    );
    assert_exit(&out, 0);
    assert_eq!(env.read("real.txt"), "changed\n");
    let meta = std::fs::symlink_metadata(ws.join("inner-link.txt")).unwrap();
    assert!(meta.file_type().is_symlink());
}

#[test]
fn writing_outside_the_workspace_is_denied_even_with_allow_write() {
    let env = Env::new();
    let outside_path = env.outside.path().canonicalize().unwrap().join("new.txt");
    for path in [
        env.dotdot_outside("new.txt"),
        outside_path.display().to_string(),
    ] {
        let out = run(
            &env,
            "fs.write",
            &format!(r#"{{"path":"{path}","content":"pwned"}}"#),
            &["--allow-write"],
        );
        assert_exit(&out, 4);
    }
    assert!(names_in(env.outside.path()).is_empty());
}

#[test]
fn write_and_edit_need_the_write_grant_not_just_read() {
    let env = Env::new();
    env.write("a.txt", "old\n");
    // Reading works with the default, read-only grant...
    let out = run(&env, "fs.read", r#"{"path":"a.txt"}"#, &[]);
    assert_exit(&out, 0);
    // ...writing does not, whatever the path looks like.
    let absolute = env.ws_path().join("a.txt");
    for input in [
        r#"{"path":"a.txt","content":"new"}"#.to_string(),
        format!(r#"{{"path":"{}","content":"new"}}"#, absolute.display()),
        r#"{"path":"./sub/../a.txt","content":"new"}"#.to_string(),
    ] {
        let out = run(&env, "fs.write", &input, &[]);
        assert_exit(&out, 4);
    }
    let out = run(
        &env,
        "fs.edit",
        r#"{"path":"a.txt","old":"old","new":"new"}"#,
        &[],
    );
    assert_exit(&out, 4);
    assert_eq!(env.read("a.txt"), "old\n");
    assert_eq!(names_in(env.ws.path()), ["a.txt"]);
}

/// Makes a named pipe at `rel` in the workspace. Nothing ever writes to it,
/// so opening it for reading would wait for ever.
fn make_fifo(env: &Env, rel: &str) {
    let made = std::process::Command::new("mkfifo")
        .arg(env.ws.path().join(rel))
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo failed");
}

/// Runs a call that must end by itself, with a deadline of `--timeout 5s`;
/// the test fails (rather than hangs) if it does not end within a minute.
fn run_bounded(env: &Env, tool: &str, input: &str, extra: &[&str]) -> Output {
    env.call(tool, input, extra)
        .args(["--timeout", "5s"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap()
}

#[test]
fn every_fs_tool_refuses_a_named_pipe_instead_of_waiting_on_it() {
    let env = Env::new();
    make_fifo(&env, "pipe");
    let cases: [(&str, &str, &[&str], &str); 5] = [
        (
            "fs.read",
            r#"{"path":"pipe"}"#,
            &[],
            "pipe is a special file (such as a named pipe or a socket), not a regular file",
        ),
        (
            "fs.edit",
            r#"{"path":"pipe","old":"a","new":"b"}"#,
            &["--allow-write"],
            "pipe is a special file (such as a named pipe or a socket), not a regular file",
        ),
        (
            "fs.grep",
            r#"{"pattern":"a","path":"pipe"}"#,
            &[],
            "pipe is a special file (such as a named pipe or a socket), not a regular file",
        ),
        (
            "fs.ls",
            r#"{"path":"pipe"}"#,
            &[],
            "pipe is a special file (such as a named pipe or a socket), not a folder",
        ),
        (
            "fs.write",
            r#"{"path":"pipe","content":"x"}"#,
            &["--allow-write"],
            "pipe is a special file (such as a named pipe or a socket), not a regular file",
        ),
    ];
    for (tool, input, extra, says) in cases {
        let out = run_bounded(&env, tool, input, extra);
        assert_exit(&out, 5);
        let err = stderr(&out);
        assert!(err.contains(says), "{tool}: {err}");
        assert!(!err.contains("timed out"), "{tool} waited: {err}");
    }
    // The pipe is still a pipe: fs.write did not replace it.
    use std::os::unix::fs::FileTypeExt;
    let kind = std::fs::symlink_metadata(env.ws.path().join("pipe"))
        .unwrap()
        .file_type();
    assert!(kind.is_fifo());
}

#[test]
fn a_plugin_opening_a_named_pipe_itself_is_refused_before_the_open_can_block() {
    // The misbehave fixture reads with `std::fs::read_to_string`, none of
    // the fs tools' checks: the sandbox itself must not open the pipe,
    // since a blocked open would hold the call's thread past its deadline.
    let env = Env::new();
    make_fifo(&env, "pipe");
    let plugin = format!("--plugin={}", support::fixture("misbehave").display());
    let path = |name: &str| format!(r#"{{"path":"{}/{name}"}}"#, env.ws_path().display());
    let out = run_bounded(&env, "misbehave.raw-read", &path("pipe"), &[&plugin]);
    assert_exit(&out, 5);
    let err = stderr(&out);
    assert!(
        err.contains("pipe") && err.contains("Not supported"),
        "{err}"
    );
    assert!(!err.contains("timed out"), "{err}");
    // Control: a regular file next to it is read as usual.
    env.write("a.txt", "alpha\n");
    let out = run_bounded(&env, "misbehave.raw-read", &path("a.txt"), &[&plugin]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "alpha\n");
}
