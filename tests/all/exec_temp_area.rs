//! What native commands get outside the workspace: a private temporary
//! folder each and a private, writable home per session, all removed when
//! capstan ends — normally, on SIGTERM, on a second Ctrl-C — and, when a
//! capstan was killed outright, by the next one.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use tempfile::TempDir;

use crate::support::mock_model::{Answer, MockModel, Reply};
use crate::support::running::Running;
use crate::support::{Env, MODEL_VARS, names_in as entries, stderr, stdout};

const API_KEY: &str = "sk-ant-mock-key-temp-area";

/// `capstan -p PROMPT` against `mock`, commands allowed without asking,
/// events as stream-json, the system PATH, and `tmp` as its `TMPDIR`.
fn session(env: &Env, mock: &MockModel, tmp: &Path) -> std::process::Command {
    let mut cmd = env.capstan_std();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("ANTHROPIC_API_KEY", API_KEY)
        .env("NO_COLOR", "1")
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("TMPDIR", tmp)
        .args(["--base-url", &mock.url(), "--model", "mock-model"])
        .args([
            "--permission-mode",
            "bypass",
            "--output-format",
            "stream-json",
            "--capstan-events",
        ])
        .args(["-p", "run it"]);
    cmd
}

/// Replies calling `exec.run` with each command in turn, then a text.
fn commands(list: &[(&str, &str)]) -> MockModel {
    let mut replies: Vec<Reply> = list
        .iter()
        .map(|(id, command)| {
            Reply::sse(
                Answer::text("Running.")
                    .call(id, "exec__run", json!({"command": command}))
                    .anthropic(),
            )
        })
        .collect();
    replies.push(Reply::sse(Answer::text("Done.").anthropic()));
    MockModel::start(replies)
}

/// Starts a session whose command sleeps, and waits until the command has
/// its folders in `tmp`.
fn sleeping_session(env: &Env, tmp: &TempDir) -> (Running, MockModel) {
    let mock = commands(&[("t_sleep", "echo started > started.txt; sleep 60")]);
    let mut running = Running::spawn(session(env, &mock, tmp.path()));
    let started = running.wait_for_event("tool_started");
    assert_eq!(started["tool_use_id"], "t_sleep");
    let (areas, folders) = wait_for_command_folder(tmp.path());
    assert_eq!(areas.len(), 1, "one area for the process: {areas:?}");
    assert!(!folders.is_empty(), "the command has its temporary folder");
    (running, mock)
}

/// This process's area in `tmp` and the folders in it, once the running
/// command's temporary folder is there.
fn wait_for_command_folder(tmp: &Path) -> (Vec<String>, Vec<String>) {
    for _ in 0..500 {
        let areas = entries(tmp);
        if let [area] = areas.as_slice() {
            let inside = entries(&tmp.join(area));
            if inside.iter().any(|name| name.starts_with("tmp-")) {
                return (areas, inside);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!(
        "no command folder appeared in {}: {:?}",
        tmp.display(),
        entries(tmp)
    );
}

#[test]
fn sigterm_during_a_command_leaves_no_temporary_folder() {
    let env = Env::new();
    let tmp = tempfile::tempdir().unwrap();
    let (running, _mock) = sleeping_session(&env, &tmp);
    running.signal("TERM");
    let (status, _, err) = running.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(143), "{status:?}\n{err}");
    assert!(entries(tmp.path()).is_empty(), "{:?}", entries(tmp.path()));
}

#[test]
fn sighup_during_a_command_leaves_no_temporary_folder() {
    let env = Env::new();
    let tmp = tempfile::tempdir().unwrap();
    let (running, _mock) = sleeping_session(&env, &tmp);
    running.signal("HUP");
    let (status, _, err) = running.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(129), "{status:?}\n{err}");
    assert!(entries(tmp.path()).is_empty(), "{:?}", entries(tmp.path()));
}

#[test]
fn a_second_ctrl_c_during_a_command_leaves_no_temporary_folder() {
    let env = Env::new();
    let tmp = tempfile::tempdir().unwrap();
    let (running, _mock) = sleeping_session(&env, &tmp);
    // The first interrupts the turn; the second, before it has wound
    // down, quits at once.
    running.signal("INT");
    running.signal("INT");
    let (status, _, err) = running.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "{status:?}\n{err}");
    assert!(entries(tmp.path()).is_empty(), "{:?}", entries(tmp.path()));
}

#[test]
fn folders_of_dead_capstans_are_removed_and_nothing_else() {
    let env = Env::new();
    let tmp = tempfile::tempdir().unwrap();
    let dead = dead_pid();
    let stale = tmp.path().join(format!("capstan-exec-{dead}-stale1"));
    std::fs::create_dir_all(stale.join("tmp-abc/sub")).unwrap();
    std::fs::write(stale.join("tmp-abc/sub/file"), "left").unwrap();
    // A link with a stale name: removed never, followed never.
    let precious = tempfile::tempdir().unwrap();
    std::fs::write(precious.path().join("keep.txt"), "keep").unwrap();
    let link = tmp.path().join(format!("capstan-exec-{dead}-link01"));
    std::os::unix::fs::symlink(precious.path(), &link).unwrap();
    // A folder of a capstan that still runs (this test) stays.
    let live = tmp
        .path()
        .join(format!("capstan-exec-{}-alive1", std::process::id()));
    std::fs::create_dir(&live).unwrap();

    let mock = commands(&[("t_echo", "echo hi")]);
    let output = session(&env, &mock, tmp.path()).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(mock.result_of("t_echo").contains("hi"));

    assert!(!stale.exists(), "the dead process's folder is removed");
    assert!(link.symlink_metadata().is_ok(), "the link stays");
    assert_eq!(
        std::fs::read_to_string(precious.path().join("keep.txt")).unwrap(),
        "keep"
    );
    assert!(live.is_dir(), "a running process's folder stays");
    let mut left = entries(tmp.path());
    left.sort();
    let mut expected = vec![
        link.file_name().unwrap().to_string_lossy().into_owned(),
        live.file_name().unwrap().to_string_lossy().into_owned(),
    ];
    expected.sort();
    assert_eq!(left, expected, "and capstan's own area is gone at exit");
}

#[test]
fn git_config_global_writes_a_private_home_not_the_users() {
    let env = Env::new();
    let tmp = tempfile::tempdir().unwrap();
    let user_home = env.home.path().to_path_buf();
    let mock = commands(&[
        (
            "t_set",
            "git config --global user.name 'Sandboxed Tester' && echo \"home=$HOME\"",
        ),
        (
            "t_get",
            "git config --global --get user.name; ls -d ~/.gitconfig",
        ),
    ]);
    let output = session(&env, &mock, tmp.path()).output().unwrap();
    assert!(
        output.status.success(),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    let set = mock.result_of("t_set");
    let home = set
        .lines()
        .find_map(|line| line.strip_prefix("home="))
        .unwrap_or_else(|| panic!("no home in: {set}"));
    let home = PathBuf::from(home.trim());
    assert!(home.starts_with(tmp.path()), "{}", home.display());
    assert!(!home.starts_with(&user_home), "{}", home.display());
    // The second command of the session sees what the first wrote.
    let get = mock.result_of("t_get");
    assert!(get.contains("Sandboxed Tester"), "{get}");
    // Nothing near the user's home, nor the workspace.
    assert!(!user_home.join(".gitconfig").exists());
    assert!(!env.ws.path().join(".gitconfig").exists());
    // Removed with the session.
    assert!(entries(tmp.path()).is_empty(), "{:?}", entries(tmp.path()));
}

/// A process id that runs no process: a child that has been waited for.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// `capstan exec` of a shell command that marks in the workspace that it
/// started, then, two seconds later, that it was left running; `tmp` is
/// its `TMPDIR`. Returns once the command has started.
fn exec_left_running(env: &Env, tmp: &Path) -> Running {
    let mut cmd = env.capstan_std();
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("TMPDIR", tmp)
        .args(["exec", "--allow-write", "--", "sh", "-c"])
        .arg("echo started > started.txt; sleep 2; echo late > late.txt; sleep 60");
    let running = Running::spawn(cmd);
    let started = env.ws.path().join("started.txt");
    for _ in 0..500 {
        if started.exists() {
            return running;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the command never started");
}

/// Whether the command, left running, went on after capstan ended.
fn went_on(env: &Env) -> bool {
    std::thread::sleep(Duration::from_secs(3));
    env.ws.path().join("late.txt").exists()
}

#[test]
fn ctrl_c_kills_capstan_execs_command_and_records_it() {
    let env = Env::new();
    let tmp = tempfile::tempdir().unwrap();
    let running = exec_left_running(&env, tmp.path());
    running.signal("INT");
    let (status, _, err) = running.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "{status:?}\n{err}");
    assert!(!went_on(&env), "the command went on after Ctrl-C");
    assert!(entries(tmp.path()).is_empty(), "{:?}", entries(tmp.path()));
    let audit = std::fs::read_to_string(env.home.path().join("audit/audit.jsonl")).unwrap();
    let run: Vec<serde_json::Value> = audit
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|record| record["kind"] == "command_run")
        .collect();
    assert_eq!(run.len(), 1, "{audit}");
    assert_eq!(run[0]["ending"], "cancelled", "{audit}");
}

#[test]
fn sigterm_ends_capstan_exec_and_its_command() {
    let env = Env::new();
    let tmp = tempfile::tempdir().unwrap();
    let running = exec_left_running(&env, tmp.path());
    running.signal("TERM");
    let (status, _, err) = running.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(143), "{status:?}\n{err}");
    assert!(!went_on(&env), "the command went on after SIGTERM");
    assert!(entries(tmp.path()).is_empty(), "{:?}", entries(tmp.path()));
}
