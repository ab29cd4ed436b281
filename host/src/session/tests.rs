//! Tests for writing, reading, repairing, resuming and finding transcripts.
//! Every test uses a `Home` in a temporary folder, never the real one.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::json;

use super::load::{INTERRUPTED_TOOL_RESULT, LoadWarning, load, repair};
use super::record::SCHEMA_VERSION;
use super::{SessionError, Sessions, new_session_id, workspace_key};
use crate::home::Home;
use crate::model::{Block, Message, Role, StopReason, Usage};

struct Fixture {
    _root: tempfile::TempDir,
    workspace: PathBuf,
    home: Home,
}

fn fixture() -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("my project");
    fs::create_dir(&workspace).unwrap();
    let home = Home::at(root.path().join("data"), root.path().join("cache"));
    Fixture {
        _root: root,
        workspace,
        home,
    }
}

impl Fixture {
    fn sessions(&self) -> Sessions {
        Sessions::for_workspace(&self.home, &self.workspace).unwrap()
    }
}

fn user(text: &str) -> Message {
    Message {
        role: Role::User,
        content: vec![Block::Text { text: text.into() }],
    }
}

fn assistant_text(text: &str) -> Message {
    Message {
        role: Role::Assistant,
        content: vec![Block::Text { text: text.into() }],
    }
}

fn assistant_calls(ids: &[&str]) -> Message {
    let mut content = vec![Block::Text {
        text: "Let me look.".into(),
    }];
    content.extend(ids.iter().map(|id| Block::ToolUse {
        id: (*id).into(),
        name: "read".into(),
        input: json!({"path": "src/main.rs"}),
    }));
    Message {
        role: Role::Assistant,
        content,
    }
}

fn results(ids: &[&str]) -> Message {
    Message {
        role: Role::User,
        content: ids
            .iter()
            .map(|id| Block::ToolResult {
                tool_use_id: (*id).into(),
                content: format!("contents for {id}"),
                is_error: false,
                images: Vec::new(),
            })
            .collect(),
    }
}

fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: 1,
        cache_write_tokens: 2,
    }
}

/// Writes a full turn with one tool call; returns the conversation written.
fn write_turn(writer: &mut super::TranscriptWriter) -> Vec<Message> {
    let conversation = vec![
        user("what does main do?\nin detail"),
        assistant_calls(&["call_1"]),
        results(&["call_1"]),
        assistant_text("It prints hello."),
    ];
    writer.record_user(&conversation[0]).unwrap();
    writer
        .record_assistant(&conversation[1], Some(StopReason::ToolUse))
        .unwrap();
    writer.record_usage(usage(10, 5)).unwrap();
    writer.record_tool_results(&conversation[2]).unwrap();
    writer
        .record_assistant(&conversation[3], Some(StopReason::EndTurn))
        .unwrap();
    writer.record_usage(usage(20, 7)).unwrap();
    conversation
}

fn append_raw(path: &Path, bytes: &[u8]) {
    let mut file = OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
}

#[test]
fn a_written_session_reads_back_equal() {
    let fx = fixture();
    let sessions = fx.sessions();
    let mut writer = sessions.create("claude-x", "anthropic").unwrap();
    let conversation = write_turn(&mut writer);
    writer.record_end().unwrap();

    let loaded = load(writer.path()).unwrap();
    assert_eq!(loaded.messages, conversation);
    assert_eq!(
        loaded.usage,
        Usage {
            input_tokens: 30,
            output_tokens: 12,
            cache_read_tokens: 2,
            cache_write_tokens: 4,
        }
    );
    assert!(loaded.ended);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.id, writer.id());
    assert_eq!(loaded.model.as_deref(), Some("claude-x"));
    assert_eq!(loaded.provider.as_deref(), Some("anthropic"));
    assert!(loaded.ends_with_newline);
    assert!(loaded.started <= loaded.updated);

    // One record per line; the first names the format and the session.
    let text = fs::read_to_string(writer.path()).unwrap();
    assert!(text.ends_with('\n'));
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 8);
    assert_eq!(lines[0]["type"], "start");
    assert_eq!(lines[0]["schema_version"], SCHEMA_VERSION);
    assert_eq!(lines[0]["session_id"], writer.id());
    assert_eq!(lines[0]["capstan_version"], env!("CARGO_PKG_VERSION"));
    let workspace = fs::canonicalize(&fx.workspace).unwrap();
    assert_eq!(lines[0]["workspace"], workspace.to_str().unwrap());
    assert_eq!(lines[1]["type"], "user");
    assert_eq!(lines[2]["type"], "assistant");
    assert_eq!(lines[2]["stop_reason"], "tool_use");
    assert_eq!(lines[4]["type"], "tool_results");
    assert_eq!(lines[7]["type"], "end");
    assert!(lines.iter().all(|l| l["ts_ms"].as_u64().unwrap() > 0));
}

#[test]
fn transcripts_live_under_the_workspace_key_and_never_share_a_file() {
    let fx = fixture();
    let sessions = fx.sessions();
    let first = sessions.create("m", "p").unwrap();
    let second = sessions.create("m", "p").unwrap();
    assert_ne!(first.id(), second.id());
    assert_ne!(first.path(), second.path());
    let expected_dir = fx
        .home
        .sessions_dir()
        .join(workspace_key(&fs::canonicalize(&fx.workspace).unwrap()));
    assert_eq!(first.path().parent().unwrap(), expected_dir);
    let parts: Vec<&str> = first.id().split('-').collect();
    assert_eq!(
        parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
        [8, 4, 4, 4, 12],
        "{}",
        first.id()
    );
    assert!(
        parts
            .iter()
            .all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
    );
    assert!(parts[2].starts_with('4'), "{}", first.id());
}

#[test]
fn session_ids_differ() {
    let ids: std::collections::HashSet<String> = (0..200).map(|_| new_session_id()).collect();
    assert_eq!(ids.len(), 200);
}

#[test]
fn a_chosen_id_must_be_a_uuid_not_used_in_any_workspace() {
    let f = fixture();
    let sessions = Sessions::for_workspace(&f.home, &f.workspace).unwrap();
    let id = "123E4567-E89B-42D3-A456-426614174000";
    let writer = sessions.create_with_id(id, "m", "p").unwrap();
    assert_eq!(writer.id(), id.to_ascii_lowercase());
    assert!(matches!(
        sessions.create_with_id(id, "m", "p"),
        Err(SessionError::IdTaken { .. })
    ));
    let other = f.workspace.parent().unwrap().join("other");
    fs::create_dir(&other).unwrap();
    let elsewhere = Sessions::for_workspace(&f.home, &other).unwrap();
    assert!(matches!(
        elsewhere.create_with_id(&id.to_ascii_lowercase(), "m", "p"),
        Err(SessionError::IdTaken { .. })
    ));
    for bad in [
        "",
        "not-a-uuid",
        "123e4567e89b42d3a456426614174000",
        "123e4567-e89b-42d3-a456-42661417400g",
    ] {
        assert!(
            matches!(
                sessions.create_with_id(bad, "m", "p"),
                Err(SessionError::BadId { .. })
            ),
            "{bad}"
        );
    }
}

#[test]
fn workspace_keys_are_readable_and_tell_paths_apart() {
    let a = workspace_key(Path::new("/home/ann/code/My Project"));
    let b = workspace_key(Path::new("/home/ann/code/My-Project"));
    assert!(a.starts_with("home-ann-code-my-project-"), "{a}");
    assert_ne!(a, b);
    assert_eq!(a, workspace_key(Path::new("/home/ann/code/My Project")));
    let long = workspace_key(Path::new(&format!("/{}", "deep/".repeat(30))));
    assert!(long.len() <= 40 + 1 + 12, "{long}");
    assert!(!long.starts_with('-'), "{long}");
    assert_eq!(workspace_key(Path::new("/")).len(), 12);
}

#[test]
fn a_cut_short_last_line_is_skipped_and_reported() {
    let fx = fixture();
    let mut writer = fx.sessions().create("m", "p").unwrap();
    let conversation = write_turn(&mut writer);
    // Half of a record, as left by a process killed mid-write.
    let line = serde_json::to_string(&json!({
        "type": "user", "ts_ms": 1, "message": user("lost")
    }))
    .unwrap();
    append_raw(writer.path(), &line.as_bytes()[..line.len() / 2]);

    let loaded = load(writer.path()).unwrap();
    assert_eq!(loaded.messages, conversation);
    assert_eq!(
        loaded.warnings,
        vec![LoadWarning::DamagedLastLine { line: 8 }]
    );
    assert_eq!(loaded.damaged_tail_line, Some(8));
    assert!(!loaded.ends_with_newline);
    assert!(!loaded.ended);
    assert!(loaded.warnings[0].to_string().contains("line 8"));
}

#[test]
fn a_damaged_middle_line_is_an_error_naming_file_and_line() {
    let fx = fixture();
    let mut writer = fx.sessions().create("m", "p").unwrap();
    writer.record_user(&user("one")).unwrap();
    append_raw(writer.path(), b"{\"type\": \"user\", garbage\n");
    writer
        .record_assistant(&assistant_text("two"), None)
        .unwrap();

    let before = fs::read(writer.path()).unwrap();
    let error = load(writer.path()).unwrap_err();
    match &error {
        SessionError::Corrupt { path, line, .. } => {
            assert_eq!(path, writer.path());
            assert_eq!(*line, 3);
        }
        other => panic!("expected a corrupt-line error, got {other:?}"),
    }
    let message = error.to_string();
    assert!(message.contains("line 3"), "{message}");
    assert!(
        message.contains(&writer.path().display().to_string()),
        "{message}"
    );
    assert!(message.contains("repair or delete that line"), "{message}");
    // Reading never changes the file.
    assert_eq!(fs::read(writer.path()).unwrap(), before);
}

#[test]
fn a_known_record_with_wrong_fields_in_the_middle_is_an_error() {
    let fx = fixture();
    let mut writer = fx.sessions().create("m", "p").unwrap();
    append_raw(
        writer.path(),
        b"{\"type\":\"usage\",\"ts_ms\":5,\"usage\":\"lots\"}\n",
    );
    writer.record_end().unwrap();
    let error = load(writer.path()).unwrap_err();
    assert!(
        matches!(error, SessionError::Corrupt { line: 2, .. }),
        "{error:?}"
    );
}

#[test]
fn unknown_record_types_and_newer_formats_are_skipped_with_warnings() {
    let fx = fixture();
    let path = fx.sessions().dir().join("abc.jsonl");
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let lines = [
        json!({"type": "start", "ts_ms": 1000, "schema_version": 7, "session_id": "abc",
               "workspace": "/w", "model": "m", "provider": "p", "capstan_version": "9.0.0"}),
        json!({"type": "user", "ts_ms": 1001, "message": user("hi"), "mood": "new field"}),
        json!({"type": "hologram", "ts_ms": 1002, "payload": [1, 2]}),
        json!({"type": "assistant", "ts_ms": 1003, "message": assistant_text("hello")}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    fs::write(&path, text).unwrap();

    let loaded = load(&path).unwrap();
    assert_eq!(loaded.messages, vec![user("hi"), assistant_text("hello")]);
    assert_eq!(
        loaded.warnings,
        vec![
            LoadWarning::NewerFormat { version: 7 },
            LoadWarning::UnknownRecord {
                line: 3,
                kind: "hologram".into()
            },
        ]
    );
}

#[test]
fn an_unanswered_tool_call_gets_an_interrupted_result_right_after_it() {
    let fx = fixture();
    let mut writer = fx.sessions().create("m", "p").unwrap();
    writer.record_user(&user("look at main")).unwrap();
    writer
        .record_assistant(&assistant_calls(&["call_a", "call_b"]), None)
        .unwrap();
    writer.record_interrupted("Ctrl-C").unwrap();
    // The user typed again after the interruption.
    writer.record_user(&user("never mind")).unwrap();

    let loaded = load(writer.path()).unwrap();
    let interrupted = |id: &str| Block::ToolResult {
        tool_use_id: id.into(),
        content: INTERRUPTED_TOOL_RESULT.into(),
        is_error: true,
        images: Vec::new(),
    };
    assert_eq!(
        loaded.messages,
        vec![
            user("look at main"),
            assistant_calls(&["call_a", "call_b"]),
            Message {
                role: Role::User,
                content: vec![
                    interrupted("call_a"),
                    interrupted("call_b"),
                    Block::Text {
                        text: "never mind".into()
                    },
                ],
            },
        ]
    );
    assert_eq!(
        loaded.warnings,
        vec![
            LoadWarning::UnansweredToolCall {
                id: "call_a".into(),
                name: "read".into()
            },
            LoadWarning::UnansweredToolCall {
                id: "call_b".into(),
                name: "read".into()
            },
        ]
    );
}

#[test]
fn a_partly_answered_call_set_keeps_real_results_and_fills_the_rest() {
    let mut warnings = Vec::new();
    let repaired = repair(
        vec![
            user("go"),
            assistant_calls(&["a", "b"]),
            results(&["b"]),
            assistant_text("done"),
        ],
        &mut warnings,
    );
    assert_eq!(repaired.len(), 4);
    let Block::ToolResult {
        tool_use_id,
        is_error,
        ..
    } = &repaired[2].content[0]
    else {
        panic!("expected a tool result first: {:?}", repaired[2]);
    };
    assert_eq!((tool_use_id.as_str(), *is_error), ("a", true));
    assert_eq!(repaired[2].content[1], results(&["b"]).content[0]);
    assert_eq!(warnings.len(), 1);
}

#[test]
fn a_trailing_unanswered_call_is_answered_so_the_next_request_is_valid() {
    let mut warnings = Vec::new();
    let repaired = repair(vec![user("go"), assistant_calls(&["a"])], &mut warnings);
    assert_eq!(repaired.len(), 3);
    assert_eq!(repaired[2].role, Role::User);
    assert!(matches!(
        &repaired[2].content[..],
        [Block::ToolResult { tool_use_id, is_error: true, content, .. }]
            if tool_use_id == "a" && content == INTERRUPTED_TOOL_RESULT
    ));
}

#[test]
fn results_that_answer_no_call_are_kept_as_text_and_roles_alternate() {
    let mut warnings = Vec::new();
    let repaired = repair(
        vec![
            user("one"),
            user("two"),
            results(&["ghost"]),
            assistant_text("a"),
            Message {
                role: Role::Assistant,
                content: vec![],
            },
            assistant_text("b"),
        ],
        &mut warnings,
    );
    assert_eq!(repaired.len(), 2);
    assert_eq!(repaired[0].role, Role::User);
    assert_eq!(repaired[0].content.len(), 3);
    assert!(matches!(
        &repaired[0].content[2],
        Block::Text { text } if text.contains("ghost") && text.contains("contents for ghost")
    ));
    assert_eq!(repaired[1].role, Role::Assistant);
    assert_eq!(repaired[1].content.len(), 2);
    assert_eq!(
        warnings,
        vec![LoadWarning::OrphanedToolResult {
            tool_use_id: "ghost".into()
        }]
    );
}

#[test]
fn resuming_a_cut_short_transcript_appends_and_stays_readable() {
    let fx = fixture();
    let sessions = fx.sessions();
    let mut writer = sessions.create("m", "p").unwrap();
    let id = writer.id().to_string();
    writer.record_user(&user("first")).unwrap();
    writer
        .record_assistant(&assistant_calls(&["call_1"]), None)
        .unwrap();
    append_raw(
        writer.path(),
        b"{\"type\":\"tool_results\",\"ts_ms\":12,\"mess",
    );
    drop(writer);

    let (mut resumed, loaded) = sessions.resume(&id, "m2", "p2").unwrap();
    assert_eq!(resumed.id(), id);
    assert_eq!(loaded.damaged_tail_line, Some(4));
    assert_eq!(loaded.messages.len(), 3, "{:?}", loaded.messages);
    resumed.record_user(&user("second")).unwrap();
    resumed
        .record_assistant(&assistant_text("answer"), None)
        .unwrap();
    resumed.record_end().unwrap();

    let reloaded = load(resumed.path()).unwrap();
    assert!(
        reloaded
            .warnings
            .contains(&LoadWarning::MarkedDamagedLine { line: 4 })
    );
    assert_eq!(reloaded.model.as_deref(), Some("m2"));
    assert!(reloaded.ended);
    assert_eq!(reloaded.messages.len(), 4);
    assert_eq!(reloaded.messages[3], assistant_text("answer"));
    assert!(matches!(
        &reloaded.messages[2].content[..],
        [Block::ToolResult { is_error: true, .. }, Block::Text { text }] if text == "second"
    ));
    // The damaged bytes are still there: nothing was deleted.
    let text = fs::read_to_string(resumed.path()).unwrap();
    assert!(text.contains("\"mess\n"));
}

/// A record cut short while the disk-full marker is there was cut short by
/// the full disk: loading says so, resuming cuts it off (not marks it), and
/// the marker goes once the resumed transcript is written.
#[test]
fn a_record_cut_short_by_a_full_disk_is_cut_off_on_resume() {
    let fx = fixture();
    let sessions = fx.sessions();
    let mut writer = sessions.create("m", "p").unwrap();
    let id = writer.id().to_string();
    writer.record_user(&user("first")).unwrap();
    let whole = fs::read(writer.path()).unwrap();
    append_raw(
        writer.path(),
        b"{\"type\":\"assistant\",\"ts_ms\":12,\"mess",
    );
    let marker = super::transcript::disk_full_marker(writer.path());
    fs::write(&marker, "").unwrap();
    drop(writer);

    let loaded = load(&sessions.transcript_path(&id)).unwrap();
    assert!(loaded.disk_full);
    assert_eq!(
        loaded.warnings,
        vec![LoadWarning::DiskFullLastLine { line: 3 }]
    );
    let note = loaded.warnings[0].to_string();
    assert!(note.contains("because the disk was full"), "{note}");
    assert!(!note.contains("probably killed"), "{note}");

    let (resumed, loaded) = sessions.resume(&id, "m", "p").unwrap();
    assert_eq!(loaded.messages, vec![user("first")]);
    let text = fs::read(resumed.path()).unwrap();
    assert!(text.starts_with(&whole));
    for line in String::from_utf8(text).unwrap().lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
    assert!(!marker.exists(), "written again, so the marker goes");
    let reloaded = load(resumed.path()).unwrap();
    assert_eq!(reloaded.warnings, vec![]);
}

/// A marker with no cut record: the failed write was cut off at once;
/// loading still says the disk was full.
#[test]
fn a_disk_full_marker_alone_is_a_note_on_load() {
    let fx = fixture();
    let sessions = fx.sessions();
    let mut writer = sessions.create("m", "p").unwrap();
    writer.record_user(&user("first")).unwrap();
    fs::write(super::transcript::disk_full_marker(writer.path()), "").unwrap();
    let loaded = load(writer.path()).unwrap();
    assert_eq!(loaded.warnings, vec![LoadWarning::StoppedByFullDisk]);
}

#[test]
fn resuming_a_session_that_does_not_exist_says_which_file() {
    let fx = fixture();
    let error = fx.sessions().resume("0000", "m", "p").unwrap_err();
    assert!(matches!(error, SessionError::Io { .. }), "{error:?}");
    assert!(error.to_string().contains("0000.jsonl"), "{error}");
}

/// Run only as a child process by
/// `a_transcript_from_a_killed_process_resumes`: writes part of a session,
/// starts a record it never finishes, says it is ready, and waits to be
/// killed.
#[test]
#[ignore = "run as a child process by another test"]
fn transcript_writer_child() {
    let (Some(home), Some(workspace)) = (
        std::env::var_os("CAPSTAN_SESSION_CHILD_HOME"),
        std::env::var_os("CAPSTAN_SESSION_CHILD_WORKSPACE"),
    ) else {
        return;
    };
    let home = PathBuf::from(home);
    let home = Home::at(home.join("data"), home.join("cache"));
    let sessions = Sessions::for_workspace(&home, Path::new(&workspace)).unwrap();
    let mut writer = sessions.create("m", "p").unwrap();
    writer.record_user(&user("from the child")).unwrap();
    writer
        .record_assistant(&assistant_calls(&["child_call"]), None)
        .unwrap();
    writer.record_usage(usage(3, 4)).unwrap();
    append_raw(writer.path(), b"{\"type\":\"tool_res");
    fs::write(sessions.dir().join("ready"), writer.id()).unwrap();
    sleep(Duration::from_secs(120));
}

#[test]
fn a_transcript_from_a_killed_process_resumes() {
    let fx = fixture();
    let sessions = fx.sessions();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "session::tests::transcript_writer_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            "CAPSTAN_SESSION_CHILD_HOME",
            fx.home.data_dir().parent().unwrap(),
        )
        .env("CAPSTAN_SESSION_CHILD_WORKSPACE", &fx.workspace)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ready = sessions.dir().join("ready");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready.exists() {
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("the child never wrote its session");
        }
        sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let id = fs::read_to_string(&ready).unwrap();

    assert_eq!(sessions.most_recent().unwrap().id, id);
    let (mut writer, loaded) = sessions.resume(&id, "m", "p").unwrap();
    assert_eq!(loaded.usage.output_tokens, 4);
    assert!(!loaded.ended);
    assert_eq!(loaded.messages[0], user("from the child"));
    assert!(matches!(
        &loaded.messages[2].content[..],
        [Block::ToolResult { tool_use_id, is_error: true, .. }] if tool_use_id == "child_call"
    ));
    writer.record_user(&user("after the crash")).unwrap();
    let reloaded = load(writer.path()).unwrap();
    assert_eq!(reloaded.messages.len(), 3);
    assert!(matches!(
        reloaded.messages[2].content.last(),
        Some(Block::Text { text }) if text == "after the crash"
    ));
}

#[test]
fn sessions_are_listed_newest_first_with_a_preview() {
    let fx = fixture();
    let sessions = fx.sessions();
    assert!(sessions.list().unwrap().sessions.is_empty());
    assert!(matches!(
        sessions.most_recent(),
        Err(SessionError::NoSessions { .. })
    ));

    let mut old = sessions.create("m", "p").unwrap();
    old.record_user(&user("old question")).unwrap();
    sleep(Duration::from_millis(10));
    let mut new = sessions.create("m", "p").unwrap();
    let long_prompt = format!("fix\n  the {}", "bug ".repeat(40));
    new.record_user(&user(&long_prompt)).unwrap();
    new.record_assistant(&assistant_text("ok"), None).unwrap();
    sleep(Duration::from_millis(10));
    // Activity in the old session makes it the most recent.
    old.record_assistant(&assistant_text("answer"), None)
        .unwrap();

    let listing = sessions.list().unwrap();
    assert!(listing.unreadable.is_empty());
    let ids: Vec<&str> = listing.sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, vec![old.id(), new.id()]);
    assert_eq!(
        listing.sessions[0].first_prompt.as_deref(),
        Some("old question")
    );
    assert_eq!(listing.sessions[0].message_count, 2);
    let preview = listing.sessions[1].first_prompt.clone().unwrap();
    assert!(preview.starts_with("fix the bug bug"), "{preview}");
    assert_eq!(preview.chars().count(), 80);
    assert!(preview.ends_with('…'));
    assert!(listing.sessions[1].started > listing.sessions[0].started);
    assert_eq!(sessions.most_recent().unwrap().id, old.id());
}

#[test]
fn a_damaged_transcript_is_listed_as_unreadable_without_hiding_others() {
    let fx = fixture();
    let sessions = fx.sessions();
    let mut good = sessions.create("m", "p").unwrap();
    good.record_user(&user("fine")).unwrap();
    let bad = sessions.create("m", "p").unwrap();
    append_raw(bad.path(), b"not json\n");
    append_raw(bad.path(), b"{\"type\":\"end\",\"ts_ms\":1}\n");

    let listing = sessions.list().unwrap();
    assert_eq!(listing.sessions.len(), 1);
    assert_eq!(listing.sessions[0].id, good.id());
    assert_eq!(listing.unreadable.len(), 1);
    assert!(matches!(
        &listing.unreadable[0],
        SessionError::Corrupt { line: 2, path, .. } if path == bad.path()
    ));
}

#[test]
fn sessions_are_found_by_id_or_unique_prefix() {
    let fx = fixture();
    let sessions = fx.sessions();
    let template = sessions.create("m", "p").unwrap();
    for id in ["7f3c01aa", "7f3c02bb", "abc", "abcd"] {
        fs::copy(template.path(), sessions.transcript_path(id)).unwrap();
    }
    // Another workspace's sessions are not candidates.
    let other_dir = fx.workspace.join("sub");
    fs::create_dir(&other_dir).unwrap();
    let other = Sessions::for_workspace(&fx.home, &other_dir).unwrap();
    fs::create_dir_all(other.dir()).unwrap();
    fs::copy(template.path(), other.transcript_path("eeee")).unwrap();

    assert_eq!(sessions.find("7f3c01").unwrap(), "7f3c01aa");
    assert_eq!(sessions.find("7F3C02").unwrap(), "7f3c02bb");
    assert_eq!(sessions.find(template.id()).unwrap(), template.id());
    // An exact id wins over longer ids it is a prefix of.
    assert_eq!(sessions.find("abc").unwrap(), "abc");
    assert_eq!(sessions.find("abcd").unwrap(), "abcd");

    let ambiguous = sessions.find("7f3c").unwrap_err();
    match &ambiguous {
        SessionError::Ambiguous {
            count, examples, ..
        } => {
            assert_eq!(*count, 2);
            assert_eq!(examples, "7f3c01aa, 7f3c02bb");
        }
        other => panic!("expected ambiguity, got {other:?}"),
    }
    assert!(ambiguous.to_string().contains("give more of the id"));

    assert!(matches!(
        sessions.find("eeee"),
        Err(SessionError::NotFound { .. })
    ));
    assert!(matches!(
        sessions.find(""),
        Err(SessionError::NotFound { .. })
    ));
    assert_eq!(other.find("e").unwrap(), "eeee");
}
