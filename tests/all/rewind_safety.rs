//! A rewind never destroys work it did not make, through the real binary:
//! two sessions writing one workspace each rewind only their own files (or
//! refuse, naming the other's, until `--force`); the first prompt in an
//! empty folder is checkpointed; a rewind killed with SIGKILL at random
//! points leaves no stray file in the workspace and is completed at the
//! next start; two sessions editing one file at once lose no edit.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::mock_model::{Answer, MockModel, Reply, tool_call_replies as replies};
use support::{Env, stderr, stdout};

const API_KEY: &str = "sk-ant-mock-key-rewind-safety";

/// `capstan -p TEXT` against `mock` as a plain command, allowed to edit and
/// run commands.
fn prompt_command(env: &Env, mock: &MockModel, text: &str) -> std::process::Command {
    let mut cmd = env.anthropic_session_std(&mock.url(), API_KEY, "mock-model", text);
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(["--permission-mode", "bypass"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Starts `capstan -p TEXT` in the background.
fn spawn_prompt(env: &Env, mock: &MockModel, text: &str) -> Child {
    prompt_command(env, mock, text).spawn().unwrap()
}

/// Waits for `child` and checks that it succeeded.
fn finish(child: Child) -> Output {
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        stdout(&output),
        stderr(&output)
    );
    output
}

/// `capstan -p TEXT`, to its end.
fn prompt(env: &Env, mock: &MockModel, text: &str) -> Output {
    finish(spawn_prompt(env, mock, text))
}

/// `capstan session ARGS` in the workspace.
fn session(env: &Env, args: &[&str]) -> Output {
    env.capstan()
        .arg("session")
        .args(args)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap()
}

/// The id of the saved session whose first prompt is `first_prompt`.
fn session_id(env: &Env, first_prompt: &str) -> String {
    let listed = session(env, &["list", "--json"]);
    let sessions: Vec<Value> = serde_json::from_str(&stdout(&listed)).unwrap();
    sessions
        .iter()
        .find(|s| s["first_prompt"] == first_prompt)
        .unwrap_or_else(|| panic!("no session {first_prompt:?} in {sessions:?}"))["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Waits until `ready` holds (a liveness bound, not a timing assertion).
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(120);
    while !ready() {
        assert!(Instant::now() < until, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One answer making `calls`, each `(id, tool, input)`, at once.
fn calls(calls: &[(&str, &str, Value)]) -> Reply {
    let mut answer = Answer::text("Working.");
    for (id, tool, input) in calls {
        answer = answer.call(id, tool, input.clone());
    }
    Reply::sse(answer.anthropic())
}

fn write_call(id: &str, path: &str, content: &str) -> Reply {
    calls(&[(id, "fs__write", json!({"path": path, "content": content}))])
}

fn text(text: &str) -> Reply {
    Reply::sse(Answer::text(text).anthropic())
}

/// A command that writes `b1.txt` … `b10.txt`.
const TEN_FILES: &str = "for i in 1 2 3 4 5 6 7 8 9 10; do echo b$i > b$i.txt; done";

fn b_files() -> Vec<String> {
    (1..=10).map(|i| format!("b{i}.txt")).collect()
}

/// Session A writes a file, waits for its model while session B writes
/// ten files with a command, then writes another: each session's
/// checkpoint holds only its own files, and rewinding either leaves the
/// other's alone.
#[test]
fn two_sessions_in_one_workspace_each_rewind_only_their_own_files() {
    let env = Env::new();
    env.write("shared.txt", "shared\n");
    let gate = env.outside.path().join("b-is-done");
    let mock_a = MockModel::start(vec![
        write_call("a1", "a1.txt", "a1\n"),
        Reply::wait_for(&gate, write_call("a2", "a2.txt", "a2\n")),
        text("A is done."),
    ]);
    let a = spawn_prompt(&env, &mock_a, "session a writes");
    // A has written a1.txt and waits for its model's next answer.
    wait_until("session A's second request", || {
        mock_a.received().len() >= 2
    });
    let mock_b = MockModel::start(replies(
        &[(
            "b",
            "exec__run",
            json!({"command": TEN_FILES, "write": true}),
        )],
        "B is done.",
    ));
    prompt(&env, &mock_b, "session b writes");
    std::fs::write(&gate, "").unwrap();
    finish(a);
    let a_id = session_id(&env, "session a writes");
    let b_id = session_id(&env, "session b writes");

    let listed_a = stdout(&session(&env, &["rewind", &a_id]));
    assert!(
        listed_a.contains("1. session a writes  (2 files: a1.txt, a2.txt)"),
        "{listed_a}"
    );
    let listed_b = stdout(&session(&env, &["rewind", &b_id]));
    assert!(
        listed_b.contains("1. session b writes  (10 files:"),
        "{listed_b}"
    );
    assert!(!listed_b.contains("a1.txt"), "{listed_b}");

    let rewound_a = session(&env, &["rewind", &a_id, "1", "--files"]);
    assert!(rewound_a.status.success(), "{}", stderr(&rewound_a));
    assert!(!env.ws.path().join("a1.txt").exists());
    assert!(!env.ws.path().join("a2.txt").exists());
    for (i, name) in b_files().iter().enumerate() {
        assert_eq!(env.read(name), format!("b{}\n", i + 1));
    }

    let rewound_b = session(&env, &["rewind", &b_id, "1", "--files"]);
    assert!(rewound_b.status.success(), "{}", stderr(&rewound_b));
    for name in b_files() {
        assert!(!env.ws.path().join(&name).exists(), "{name}");
    }
    assert_eq!(env.read("shared.txt"), "shared\n");
}

/// Session B writes ten files while a command of session A runs, so A's
/// walk after its command sees them too: A's rewind refuses to delete
/// them, naming each and session B, and deletes them only with `--force`.
#[test]
fn a_rewind_refuses_files_another_session_wrote_during_its_command_until_forced() {
    let env = Env::new();
    let waiting = "while [ ! -e go.flag ]; do sleep 0.05; done; echo a > a.txt";
    let mock_a = MockModel::start(replies(
        &[("a", "exec__run", json!({"command": waiting, "write": true}))],
        "A is done.",
    ));
    let a = spawn_prompt(&env, &mock_a, "session a waits");
    wait_until("session A's command", || !mock_a.received().is_empty());
    let mock_b = MockModel::start(replies(
        &[(
            "b",
            "exec__run",
            json!({"command": TEN_FILES, "write": true}),
        )],
        "B is done.",
    ));
    prompt(&env, &mock_b, "session b writes");
    env.write("go.flag", "");
    finish(a);
    let a_id = session_id(&env, "session a waits");
    let b_id = session_id(&env, "session b writes");

    let refused = session(&env, &["rewind", &a_id, "1", "--files"]);
    let said = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    for (i, name) in b_files().iter().enumerate() {
        assert!(
            said.contains(&format!("{name}: also changed by session {b_id}")),
            "{said}"
        );
        assert_eq!(env.read(name), format!("b{}\n", i + 1));
    }
    // A's own file is put back.
    assert!(!env.ws.path().join("a.txt").exists(), "{said}");

    let forced = session(&env, &["rewind", &a_id, "1", "--files", "--force"]);
    assert!(forced.status.success(), "{}", stderr(&forced));
    for name in b_files() {
        assert!(!env.ws.path().join(&name).exists(), "{name}");
    }
}

/// The first prompt in an empty folder creates files with a tool and a
/// command: its checkpoint lists them and rewinding it removes them.
#[test]
fn the_first_prompt_in_an_empty_folder_is_checkpointed_and_rewound() {
    let env = Env::new();
    let mock = MockModel::start(
        [
            vec![write_call("w", "new.txt", "new\n")],
            replies(
                &[(
                    "r",
                    "exec__run",
                    json!({"command": "mkdir -p out && echo made > out/made.txt", "write": true}),
                )],
                "Created.",
            ),
        ]
        .concat(),
    );
    prompt(&env, &mock, "create two files");
    assert_eq!(env.read("new.txt"), "new\n");
    let id = session_id(&env, "create two files");
    let listed = stdout(&session(&env, &["rewind", &id]));
    assert!(
        listed.contains("1. create two files  (2 files: new.txt, out/made.txt)"),
        "{listed}"
    );
    let rewound = session(&env, &["rewind", &id, "1", "--files"]);
    let said = stderr(&rewound);
    assert!(rewound.status.success(), "{said}");
    assert!(said.contains("removed   new.txt"), "{said}");
    assert!(!env.ws.path().join("new.txt").exists());
    assert!(!env.ws.path().join("out/made.txt").exists());
}

/// How many files the killed rewind puts back (as many rewritten, as many
/// removed).
const KILLED_FILES: usize = 300;

/// Copies the folder `from` to `to` (replacing it), keeping modes.
fn copy_tree(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Empties the workspace and fills it from `backup`.
fn restore_workspace(ws: &Path, backup: &Path) {
    for entry in std::fs::read_dir(ws).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", backup.display()))
        .arg(ws)
        .status()
        .unwrap();
    assert!(status.success());
}

/// The names in the workspace that are none of the test's own files.
fn strays(ws: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![ws.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                stack.push(path);
            } else if !(name.starts_with('f') || name.starts_with('n')) || name.contains('.') {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

/// Whether the workspace is as before the prompt (`true`) or as the prompt
/// left it (`false`); panics on anything in between.
fn rewound_whole(ws: &Path) -> bool {
    let mut before = 0;
    let mut after = 0;
    for i in 0..KILLED_FILES {
        let old = std::fs::read_to_string(ws.join(format!("f{i}"))).unwrap();
        let created = ws.join(format!("n{i}")).exists();
        match (old.as_str(), created) {
            (o, false) if o == format!("old {i}\n") => before += 1,
            (o, true) if o == format!("new {i}\n") => after += 1,
            (o, c) => panic!("f{i} holds {o:?} and n{i} exists: {c}"),
        }
    }
    assert!(
        before == KILLED_FILES || after == KILLED_FILES,
        "half rewound: {before} files back, {after} not"
    );
    before == KILLED_FILES
}

/// A rewind of 600 files killed with SIGKILL at 20 random points: nothing
/// of capstan's is left in the workspace, and the next start (a session
/// or `capstan session rewind`) completes it and says so.
#[test]
fn a_rewind_killed_at_random_points_is_completed_at_the_next_start() {
    let env = Env::new();
    for i in 0..KILLED_FILES {
        env.write(&format!("f{i}"), format!("old {i}\n"));
    }
    let rewrite = format!(
        "for i in $(seq 0 {}); do echo \"new $i\" > f$i; echo \"new $i\" > n$i; done",
        KILLED_FILES - 1
    );
    let mock = MockModel::start(replies(
        &[("r", "exec__run", json!({"command": rewrite, "write": true}))],
        "Rewritten.",
    ));
    prompt(&env, &mock, "rewrite everything");
    assert!(!rewound_whole(env.ws.path()));
    let id = session_id(&env, "rewrite everything");
    let sessions = std::fs::read_dir(env.home.path().join("sessions"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let journal = sessions.join(format!("{id}.checkpoints/rewind.json"));
    let backups = tempfile::tempdir().unwrap();
    let ws_backup = backups.path().join("ws");
    let sessions_backup = backups.path().join("sessions");
    copy_tree(env.ws.path(), &ws_backup);
    copy_tree(&sessions, &sessions_backup);

    // One whole rewind, to know how long one takes (only to spread the
    // kills over it; nothing is asserted about time).
    let started = Instant::now();
    let whole = session(&env, &["rewind", &id, "1", "--files"]);
    let took = started.elapsed();
    assert!(whole.status.success(), "{}", stderr(&whole));
    assert!(rewound_whole(env.ws.path()));

    let mut seed = u64::from(std::process::id()) ^ 0x9e37_79b9_7f4a_7c15;
    let mut interrupted = 0;
    for trial in 0..20 {
        restore_workspace(env.ws.path(), &ws_backup);
        copy_tree(&sessions_backup, &sessions);
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let fraction = (seed >> 33) as f64 / (1u64 << 31) as f64;
        let mut child = env
            .capstan_std()
            .args(["session", "rewind", &id, "1", "--files"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(took.mul_f64(fraction * 1.1));
        child.kill().unwrap();
        child.wait().unwrap();
        let stray = strays(env.ws.path());
        assert!(stray.is_empty(), "trial {trial}: {stray:?}");
        let was_interrupted = journal.exists();
        if was_interrupted {
            interrupted += 1;
        }
        let next = if trial % 2 == 0 {
            session(&env, &["rewind", &id])
        } else {
            let mock = MockModel::start(vec![text("Hello.")]);
            prompt(&env, &mock, "hello")
        };
        if was_interrupted {
            assert!(
                stderr(&next).contains("was interrupted; it is now complete"),
                "trial {trial}: {}",
                stderr(&next)
            );
            assert!(rewound_whole(env.ws.path()), "trial {trial}");
        } else {
            // Killed before it began or after it ended: all or nothing.
            rewound_whole(env.ws.path());
        }
        assert!(!journal.exists(), "trial {trial}");
        assert!(strays(env.ws.path()).is_empty(), "trial {trial}");
    }
    eprintln!("{interrupted} of 20 rewinds were killed half-way and completed at the next start");
}

/// How many lines each session edits.
const EDITS: usize = 20;

/// Two sessions, each making 20 `fs.edit` calls to one shared file at the
/// same moment: every edit reported done is in the file, and every edit
/// that failed said why and changed nothing.
#[test]
fn two_sessions_editing_one_file_at_once_lose_no_edit() {
    let env = Env::new();
    let mut original = String::new();
    for who in ["a", "b"] {
        for i in 0..EDITS {
            original.push_str(&format!("line-{who}-{i}\n"));
        }
    }
    env.write("shared.txt", &original);
    let edits = |who: &str| -> Vec<(String, String, Value)> {
        (0..EDITS)
            .map(|i| {
                (
                    format!("{who}{i}"),
                    "fs__edit".to_string(),
                    json!({"path": "shared.txt", "old": format!("line-{who}-{i}\n"), "new": format!("edited-{who}-{i}\n")}),
                )
            })
            .collect()
    };
    let mocks: Vec<MockModel> = ["a", "b"]
        .iter()
        .map(|who| {
            let list = edits(who);
            let borrowed: Vec<(&str, &str, Value)> = list
                .iter()
                .map(|(id, tool, input)| (id.as_str(), tool.as_str(), input.clone()))
                .collect();
            MockModel::start(vec![calls(&borrowed), text("Edited.")])
        })
        .collect();
    let children: Vec<Child> = mocks
        .iter()
        .zip(["edit as a", "edit as b"])
        .map(|(mock, text)| spawn_prompt(&env, mock, text))
        .collect();
    for child in children {
        finish(child);
    }
    let content = env.read("shared.txt");
    let mut failed = 0;
    for (mock, who) in mocks.iter().zip(["a", "b"]) {
        for i in 0..EDITS {
            let (result, is_error) = mock.tool_result(&format!("{who}{i}"));
            if is_error {
                failed += 1;
                assert!(
                    result.contains("another capstan session")
                        || result.contains("changed while the edit"),
                    "{result}"
                );
                assert!(
                    content.contains(&format!("line-{who}-{i}\n")),
                    "{who}{i} failed but changed the file:\n{content}"
                );
            } else {
                assert!(
                    content.contains(&format!("edited-{who}-{i}\n")),
                    "{who}{i} was reported done ({result}) but is not in the file:\n{content}"
                );
            }
        }
    }
    assert_eq!(content.lines().count(), 2 * EDITS, "{content}");
    assert!(
        !support::names_in(env.ws.path())
            .iter()
            .any(|n| n.contains("capstan")),
        "{:?}",
        support::names_in(env.ws.path())
    );
    eprintln!("{failed} of {} edits failed with a clear error", 2 * EDITS);
}
