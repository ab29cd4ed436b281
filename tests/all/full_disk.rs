//! A session whose home is on a disk that fills up: the record that did not
//! fit is not left cut short in the transcript, the user is told the disk
//! was full (not that capstan was probably killed), and the session resumes
//! once there is space. The disk is a real one: a small tmpfs mounted over
//! the test's home (the tests run as root, in CI too); where mounting is
//! impossible the test says why and skips.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use support::mock_model::{Answer, MockModel, Reply};
use support::{Env, stderr};

/// A tmpfs mounted over a folder until dropped.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` takes it) over `path`;
    /// why not, if it cannot.
    fn mount(path: &Path, size: &str) -> Result<Self, String> {
        let output = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(path)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(Self {
            path: path.to_path_buf(),
        })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// A test environment whose home is a 1 MiB tmpfs, or `None` (with the
/// reason printed) where no tmpfs can be mounted.
fn small_disk_env() -> Option<(Env, Tmpfs)> {
    let env = Env::new();
    match Tmpfs::mount(env.home.path(), "1m") {
        Ok(disk) => {
            support::share_compile_cache_key(env.home.path());
            Some((env, disk))
        }
        Err(reason) => {
            eprintln!("skipped: this test needs a real full disk, and {reason} (it needs root)");
            None
        }
    }
}

fn session(env: &Env, mock: &MockModel, prompt: &str, resume: bool) -> Output {
    let mut cmd = env.anthropic_session(&mock.url(), "sk-ant-mock", "mock-model", prompt);
    if resume {
        cmd.arg("--continue");
    }
    cmd.timeout(Duration::from_secs(60));
    cmd.output().unwrap()
}

fn only_transcript(env: &Env) -> PathBuf {
    let mut files = Vec::new();
    for dir in std::fs::read_dir(env.home.path().join("sessions"))
        .unwrap()
        .flatten()
    {
        for file in std::fs::read_dir(dir.path()).unwrap().flatten() {
            if file.path().extension().is_some_and(|e| e == "jsonl") {
                files.push(file.path());
            }
        }
    }
    assert_eq!(files.len(), 1, "{files:?}");
    files.remove(0)
}

fn marker(transcript: &Path) -> PathBuf {
    PathBuf::from(format!("{}.disk-full", transcript.display()))
}

/// Asserts every line of the transcript is a whole record and it ends
/// with a newline; returns the records.
fn whole_records(transcript: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(transcript).unwrap();
    assert!(text.ends_with('\n'), "the transcript ends in a cut record");
    text.lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("a cut record in the transcript ({e}): {line:.200}"))
        })
        .collect()
}

/// Runs a session whose model answers with more text than the disk holds:
/// the answer's record cannot be written. Returns the transcript.
fn fill_the_disk(env: &Env) -> PathBuf {
    let huge = "x".repeat(1536 * 1024);
    let mock = MockModel::start(vec![Reply::sse(Answer::text(&huge).anthropic())]);
    let output = session(env, &mock, "write a lot", false);
    let err = stderr(&output);
    assert_ne!(output.status.code(), Some(0), "{err}");
    assert!(err.contains("the disk is full"), "{err}");
    assert!(
        err.contains("free some space, then resume the session with --continue"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let transcript = only_transcript(env);
    let records = whole_records(&transcript);
    assert!(
        records.iter().all(|r| r["type"] != "assistant"),
        "the answer did not fit, so it is not there"
    );
    assert!(marker(&transcript).exists(), "the cause is recorded");
    transcript
}

#[test]
fn a_record_that_does_not_fit_is_not_left_cut_and_resume_says_the_disk_was_full() {
    let Some((env, _disk)) = small_disk_env() else {
        return;
    };
    let transcript = fill_the_disk(&env);

    let mock = MockModel::start(vec![Reply::sse(Answer::text("Back again.").anthropic())]);
    let output = session(&env, &mock, "shorter, please", true);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(err.contains("because the disk was full"), "{err}");
    assert!(!err.contains("probably killed"), "{err}");
    let received = mock.received();
    assert_eq!(received.len(), 1);
    let texts: Vec<&str> = received[0].messages()[0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect();
    assert_eq!(texts, ["write a lot", "shorter, please"]);
    let records = whole_records(&transcript);
    assert!(records.iter().any(|r| r["type"] == "assistant"));
    assert!(
        !marker(&transcript).exists(),
        "the marker goes once written"
    );
}

/// A record left cut short on the full disk (the process was killed before
/// it could cut it off itself) is cut off by the resume, which says the
/// disk was full.
#[test]
fn a_record_cut_short_by_a_full_disk_is_trimmed_on_resume() {
    let Some((env, _disk)) = small_disk_env() else {
        return;
    };
    let transcript = fill_the_disk(&env);
    let whole = std::fs::read(&transcript).unwrap();
    let mut file = OpenOptions::new().append(true).open(&transcript).unwrap();
    file.write_all(br#"{"ts_ms":1,"type":"assistant","message":{"role":"assi"#)
        .unwrap();
    drop(file);

    let mock = MockModel::start(vec![Reply::sse(Answer::text("Back again.").anthropic())]);
    let output = session(&env, &mock, "shorter, please", true);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(
        err.contains("the last record was cut short because the disk was full"),
        "{err}"
    );
    assert!(!err.contains("probably killed"), "{err}");
    let now = std::fs::read(&transcript).unwrap();
    assert!(
        now.starts_with(&whole),
        "records before the cut one are kept"
    );
    let records = whole_records(&transcript);
    assert!(
        records.iter().all(|r| r["type"] != "damaged_line"),
        "trimmed, not marked"
    );
    assert!(records.iter().any(|r| r["type"] == "resumed"));
    assert!(!marker(&transcript).exists());
    assert_eq!(mock.received().len(), 1);
}
