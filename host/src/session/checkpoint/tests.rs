#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::path::Path;

use super::{CheckpointError, CheckpointStore, Limits, RewindScope, Version};

/// A workspace and a store for it, with a transcript beside the store.
struct Fixture {
    _root: tempfile::TempDir,
    ws: std::path::PathBuf,
    transcript: std::path::PathBuf,
    store: CheckpointStore,
}

fn fixture(limits: Limits) -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    fs::create_dir(&ws).unwrap();
    let transcript = root.path().join("sessions").join("s1.jsonl");
    fs::create_dir_all(transcript.parent().unwrap()).unwrap();
    fs::write(&transcript, "{\"type\":\"start\"}\n").unwrap();
    let store = CheckpointStore::open(super::store_dir(&transcript), ws.clone(), limits);
    Fixture {
        _root: root,
        ws,
        transcript,
        store,
    }
}

impl Fixture {
    fn write(&self, rel: &str, content: &str) {
        let path = self.ws.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    fn read(&self, rel: &str) -> Option<String> {
        fs::read_to_string(self.ws.join(rel)).ok()
    }

    /// Begins a prompt, appending its user record to the transcript first
    /// as the agent does.
    fn prompt(&mut self, text: &str) -> u32 {
        let offset = fs::metadata(&self.transcript).unwrap().len();
        let number = self.store.begin_prompt(text, offset).unwrap();
        let mut content = fs::read_to_string(&self.transcript).unwrap();
        content.push_str(&format!("{{\"type\":\"user\",\"text\":\"{text}\"}}\n"));
        fs::write(&self.transcript, content).unwrap();
        number
    }

    fn changed_paths(&mut self, number: u32) -> Vec<String> {
        let checkpoint = self.store.find(number).unwrap();
        checkpoint.changes.iter().map(|c| c.path.clone()).collect()
    }
}

#[test]
fn a_prompts_edits_creations_and_deletions_are_put_back() {
    let mut f = fixture(Limits::default());
    f.write("src/main.rs", "fn main() {}\n");
    f.write("gone.txt", "keep me\n");
    f.write("target/debug/out", "built\n");
    let one = f.prompt("edit things");
    f.write("src/main.rs", "fn main() { println!(\"hi\"); }\n");
    f.write("new/dir/created.txt", "new\n");
    fs::remove_file(f.ws.join("gone.txt")).unwrap();
    f.write("target/debug/out", "rebuilt\n");
    let changes = f.store.record_changes().unwrap();
    assert_eq!(changes.len(), 3, "{changes:?}");
    let mut paths = f.changed_paths(one);
    paths.sort();
    // Build output under target/ is not tracked.
    assert_eq!(
        paths,
        ["gone.txt", "new/dir/created.txt", "src/main.rs"],
        "{paths:?}"
    );
    let created = f
        .store
        .find(one)
        .unwrap()
        .changes
        .iter()
        .find(|c| c.path == "new/dir/created.txt")
        .unwrap()
        .clone();
    assert_eq!(created.before, Version::Absent);

    let report = f
        .store
        .rewind(&f.transcript, one, RewindScope::Files, false)
        .unwrap();
    assert_eq!(report.restored.len(), 2, "{report:?}");
    assert_eq!(report.removed, ["new/dir/created.txt"]);
    assert!(report.conflicts.is_empty() && report.failed.is_empty());
    assert_eq!(f.read("src/main.rs").unwrap(), "fn main() {}\n");
    assert_eq!(f.read("gone.txt").unwrap(), "keep me\n");
    assert_eq!(f.read("new/dir/created.txt"), None);
    assert_eq!(f.read("target/debug/out").unwrap(), "rebuilt\n");
    // The restore is not taken for a change of the next prompt.
    let two = f.prompt("next");
    assert!(f.store.record_changes().unwrap().is_empty());
    assert!(f.changed_paths(two).is_empty());
}

#[test]
fn rewinding_to_an_earlier_prompt_undoes_every_later_one() {
    let mut f = fixture(Limits::default());
    f.write("a.txt", "v0\n");
    let one = f.prompt("first");
    f.write("a.txt", "v1\n");
    f.store.record_changes().unwrap();
    let two = f.prompt("second");
    f.write("a.txt", "v2 longer\n");
    f.write("b.txt", "b\n");
    f.store.record_changes().unwrap();
    assert_eq!(f.changed_paths(two), ["a.txt", "b.txt"]);

    let report = f
        .store
        .rewind(&f.transcript, two, RewindScope::Files, false)
        .unwrap();
    assert_eq!(report.restored, ["a.txt"]);
    assert_eq!(f.read("a.txt").unwrap(), "v1\n");
    assert_eq!(f.read("b.txt"), None);
    // Files only: the checkpoints stay, and prompt 1 can still be undone.
    f.store
        .rewind(&f.transcript, one, RewindScope::Files, false)
        .unwrap();
    assert_eq!(f.read("a.txt").unwrap(), "v0\n");
}

#[test]
fn changes_made_outside_capstan_are_not_rewound_and_not_clobbered() {
    let mut f = fixture(Limits::default());
    f.write("a.txt", "original\n");
    f.write("b.txt", "untouched by prompts\n");
    let one = f.prompt("change a");
    f.write("a.txt", "by the tool\n");
    f.store.record_changes().unwrap();
    // Between prompts the user edits both files in an editor.
    f.write("a.txt", "by the user\n");
    f.write("b.txt", "edited by the user\n");
    f.prompt("another");
    f.store.record_changes().unwrap();

    let report = f
        .store
        .rewind(&f.transcript, one, RewindScope::Files, false)
        .unwrap();
    assert!(report.restored.is_empty(), "{report:?}");
    assert_eq!(report.conflicts.len(), 1, "{report:?}");
    assert_eq!(report.conflicts[0].path, "a.txt");
    assert!(
        report.conflicts[0]
            .reason
            .contains("changed since prompt 1 by something other than capstan"),
        "{report:?}"
    );
    assert_eq!(f.read("a.txt").unwrap(), "by the user\n");
    assert_eq!(f.read("b.txt").unwrap(), "edited by the user\n");

    let forced = f
        .store
        .rewind(&f.transcript, one, RewindScope::Files, true)
        .unwrap();
    assert_eq!(forced.restored, ["a.txt"]);
    assert_eq!(f.read("a.txt").unwrap(), "original\n");
    assert_eq!(f.read("b.txt").unwrap(), "edited by the user\n");
}

#[test]
fn a_same_size_rewrite_right_after_a_walk_is_still_seen() {
    let mut f = fixture(Limits::default());
    f.write("calc.py", "return a - b\n");
    let one = f.prompt("fix");
    // Same size, written at once: only the content tells.
    f.write("calc.py", "return a + b\n");
    f.store.record_changes().unwrap();
    assert_eq!(f.changed_paths(one), ["calc.py"]);
    f.store
        .rewind(&f.transcript, one, RewindScope::Files, false)
        .unwrap();
    assert_eq!(f.read("calc.py").unwrap(), "return a - b\n");
}

#[test]
fn oldest_copies_are_pruned_to_stay_under_the_cap() {
    let limits = Limits {
        max_bytes: 10_000,
        max_file_bytes: 5_000,
        max_files: 1000,
    };
    let mut f = fixture(limits);
    f.write("small.txt", "s\n");
    let mut numbers = Vec::new();
    for round in 0..6 {
        numbers.push(f.prompt(&format!("round {round}")));
        f.write("big.bin", &format!("{round}").repeat(3000));
        f.store.record_changes().unwrap();
        let stored = f.store.stored_bytes().unwrap();
        assert!(stored <= limits.max_bytes, "round {round}: {stored} bytes");
        let on_disk: u64 = fs::read_dir(f.store.dir().join("blobs"))
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert_eq!(on_disk, stored, "round {round}");
    }
    let pruned: Vec<u32> = f
        .store
        .checkpoints()
        .unwrap()
        .iter()
        .filter(|c| c.pruned)
        .map(|c| c.number)
        .collect();
    assert!(!pruned.is_empty() && pruned[0] == 1, "{pruned:?}");
    let last = *numbers.last().unwrap();
    assert!(!pruned.contains(&last));

    let err = f
        .store
        .rewind(&f.transcript, 1, RewindScope::Files, false)
        .unwrap_err();
    assert!(matches!(err, CheckpointError::Pruned { .. }), "{err}");
    assert!(err.to_string().contains("were pruned"), "{err}");
    // The conversation can still go back to a pruned prompt.
    f.store
        .rewind(&f.transcript, last, RewindScope::Files, false)
        .unwrap();
    assert_eq!(
        f.read("big.bin").unwrap(),
        format!("{}", last - 2).repeat(3000)
    );
}

#[test]
fn files_over_the_size_limit_are_listed_not_copied() {
    let limits = Limits {
        max_bytes: 1 << 20,
        max_file_bytes: 100,
        max_files: 1000,
    };
    let mut f = fixture(limits);
    f.write("huge.log", &"x".repeat(500));
    let one = f.prompt("grow the log");
    f.write("huge.log", &"y".repeat(600));
    let changes = f.store.record_changes().unwrap();
    assert_eq!(changes.len(), 1);
    assert!(matches!(changes[0].before, Version::Untracked { .. }));
    assert_eq!(f.store.stored_bytes().unwrap(), 0);
    let report = f
        .store
        .rewind(&f.transcript, one, RewindScope::Files, false)
        .unwrap();
    assert_eq!(report.conflicts.len(), 1, "{report:?}");
    let forced = f
        .store
        .rewind(&f.transcript, one, RewindScope::Files, true)
        .unwrap();
    assert_eq!(forced.failed.len(), 1, "{forced:?}");
    assert!(
        forced.failed[0].reason.contains("larger than 100B"),
        "{forced:?}"
    );
    assert_eq!(f.read("huge.log").unwrap(), "y".repeat(600));
}

#[test]
fn a_restore_never_writes_through_a_symlinked_folder() {
    let mut f = fixture(Limits::default());
    let outside = tempfile::tempdir().unwrap();
    f.write("sub/file.txt", "inside\n");
    let one = f.prompt("replace the folder");
    fs::remove_dir_all(f.ws.join("sub")).unwrap();
    std::os::unix::fs::symlink(outside.path(), f.ws.join("sub")).unwrap();
    f.store.record_changes().unwrap();
    assert_eq!(f.changed_paths(one), ["sub/file.txt"]);
    let report = f
        .store
        .rewind(&f.transcript, one, RewindScope::Files, false)
        .unwrap();
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert!(
        report.failed[0].reason.contains("not a folder"),
        "{report:?}"
    );
    assert!(fs::read_dir(outside.path()).unwrap().next().is_none());
}

#[test]
fn the_conversation_is_cut_back_atomically_and_later_prompts_forgotten() {
    let mut f = fixture(Limits::default());
    f.write("a.txt", "0\n");
    f.prompt("one");
    f.write("a.txt", "1\n");
    f.store.record_changes().unwrap();
    let before_two = fs::read_to_string(&f.transcript).unwrap();
    let two = f.prompt("two");
    f.write("a.txt", "2\n");
    f.store.record_changes().unwrap();
    f.prompt("three");

    let report = f
        .store
        .rewind(&f.transcript, two, RewindScope::Both, false)
        .unwrap();
    assert!(report.conversation_rewound);
    assert_eq!(report.prompt, "two");
    assert_eq!(f.read("a.txt").unwrap(), "1\n");
    let after = fs::read_to_string(&f.transcript).unwrap();
    assert!(after.starts_with(&before_two), "{after}");
    let rest = &after[before_two.len()..];
    assert!(
        rest.starts_with("{") && rest.contains("\"type\":\"rewound\"") && rest.lines().count() == 1,
        "{after}"
    );
    // No temporary file is left beside the transcript.
    let leftovers: Vec<_> = fs::read_dir(f.transcript.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers.len(), 2, "{leftovers:?}");
    let numbers: Vec<u32> = f
        .store
        .checkpoints()
        .unwrap()
        .iter()
        .map(|c| c.number)
        .collect();
    assert_eq!(numbers, [1]);
    // The next prompt takes number 2 again; a reopened store agrees.
    assert_eq!(f.prompt("two again"), 2);
    let mut reopened = CheckpointStore::open(
        super::store_dir(&f.transcript),
        f.ws.clone(),
        Limits::default(),
    );
    assert_eq!(reopened.checkpoints().unwrap().len(), 2);
    let err = reopened
        .rewind(&f.transcript, 7, RewindScope::Both, false)
        .unwrap_err();
    assert!(err.to_string().contains("numbered 1 to 2"), "{err}");
}

#[test]
fn a_damaged_store_is_reported_with_what_to_do() {
    let mut f = fixture(Limits::default());
    f.prompt("one");
    fs::write(f.store.dir().join("log.json"), "{not json").unwrap();
    let mut reopened =
        CheckpointStore::open(f.store.dir().to_path_buf(), f.ws.clone(), Limits::default());
    let err = reopened.checkpoints().unwrap_err();
    assert!(err.to_string().contains("is damaged"), "{err}");
    assert!(err.to_string().contains("remove the folder"), "{err}");
    assert!(Path::new(&f.ws).exists());
}

#[test]
fn a_new_session_shares_the_copies_of_the_last_one_for_unchanged_files() {
    let mut f = fixture(Limits::default());
    f.write("same.txt", "unchanged\n");
    f.write("edited.txt", "before\n");
    // Files older than the racy window, as in a real workspace.
    std::thread::sleep(std::time::Duration::from_millis(150));
    f.prompt("first session");
    f.store.flush().unwrap();
    f.write("edited.txt", "after the first session\n");

    let second = f.transcript.with_file_name("s2.jsonl");
    fs::write(&second, "").unwrap();
    let mut next =
        CheckpointStore::open(super::store_dir(&second), f.ws.clone(), Limits::default());
    next.begin_prompt("second session", 0).unwrap();
    use std::os::unix::fs::MetadataExt;
    let blobs = |dir: &Path| -> Vec<(String, u64)> {
        let mut found: Vec<(String, u64)> = fs::read_dir(dir.join("blobs"))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().unwrap().nlink(),
                )
            })
            .collect();
        found.sort();
        found
    };
    let mine = blobs(next.dir());
    // Two copies: the unchanged file's, shared with the first session (two
    // links), and the edited file's new content, read afresh.
    assert_eq!(mine.len(), 2, "{mine:?}");
    assert_eq!(
        mine.iter().filter(|(_, links)| *links == 2).count(),
        1,
        "{mine:?}"
    );
    // Removing the first session's store leaves the second's intact.
    fs::remove_dir_all(f.store.dir()).unwrap();
    fs::write(f.ws.join("same.txt"), "changed in the second session\n").unwrap();
    next.record_changes().unwrap();
    next.rewind(&second, 1, RewindScope::Files, false).unwrap();
    assert_eq!(f.read("same.txt").unwrap(), "unchanged\n");
}

#[test]
fn the_first_prompt_in_an_empty_folder_is_recorded_and_rewound() {
    let mut f = fixture(Limits::default());
    let one = f.prompt("create a file");
    f.store.note_outside_changes().unwrap();
    f.write("new.txt", "new\n");
    f.store.record_changes().unwrap();
    assert_eq!(f.changed_paths(one), ["new.txt"]);
    // A later process knows the first walk was made.
    let dir = f.store.dir().to_path_buf();
    drop(std::mem::replace(
        &mut f.store,
        CheckpointStore::open(dir, f.ws.clone(), Limits::default()),
    ));
    let two = f.prompt("create another");
    f.store.note_outside_changes().unwrap();
    f.write("other.txt", "other\n");
    f.store.record_changes().unwrap();
    assert_eq!(f.changed_paths(two), ["other.txt"]);
    let transcript = f.transcript.clone();
    let report = f
        .store
        .rewind(&transcript, one, RewindScope::Files, false)
        .unwrap();
    assert_eq!(report.removed, ["new.txt", "other.txt"], "{report:?}");
    assert!(f.read("new.txt").is_none());
}

#[test]
fn a_change_by_something_else_between_the_sessions_own_is_not_reverted_unasked() {
    let mut f = fixture(Limits::default());
    f.write("a.txt", "original\n");
    f.store.begin_prompt("warm up", 0).unwrap();
    let one = f.prompt("edit twice");
    f.store.note_outside_changes().unwrap();
    f.write("a.txt", "mine\n");
    f.store.record_changes().unwrap();
    // Someone else, while the model thinks.
    f.write("a.txt", "mine and theirs\n");
    f.store.note_outside_changes().unwrap();
    f.write("a.txt", "mine and theirs and mine again\n");
    f.store.record_changes().unwrap();
    let transcript = f.transcript.clone();
    let report = f
        .store
        .rewind(&transcript, one, RewindScope::Files, false)
        .unwrap();
    assert_eq!(report.conflicts.len(), 1, "{report:?}");
    assert!(
        report.conflicts[0]
            .reason
            .contains("between its own changes"),
        "{report:?}"
    );
    assert_eq!(f.read("a.txt").unwrap(), "mine and theirs and mine again\n");
    let forced = f
        .store
        .rewind(&transcript, one, RewindScope::Files, true)
        .unwrap();
    assert_eq!(forced.restored, ["a.txt"], "{forced:?}");
    assert_eq!(f.read("a.txt").unwrap(), "original\n");
}

#[test]
fn what_changes_while_the_model_thinks_is_not_the_prompts() {
    let mut f = fixture(Limits::default());
    f.write("keep.txt", "x\n");
    let one = f.prompt("write one file");
    f.store.note_outside_changes().unwrap();
    f.write("mine.txt", "mine\n");
    f.store.record_changes().unwrap();
    // Another session writes between this one's calls.
    f.write("theirs.txt", "theirs\n");
    f.store.note_outside_changes().unwrap();
    f.store.record_changes().unwrap();
    assert_eq!(f.changed_paths(one), ["mine.txt"]);
    let transcript = f.transcript.clone();
    let report = f
        .store
        .rewind(&transcript, one, RewindScope::Files, false)
        .unwrap();
    assert_eq!(report.removed, ["mine.txt"], "{report:?}");
    assert_eq!(f.read("theirs.txt").unwrap(), "theirs\n");
}

#[test]
fn a_file_another_session_changed_since_is_refused_naming_it_until_forced() {
    let mut f = fixture(Limits::default());
    f.write("keep.txt", "x\n");
    let other_transcript = f.transcript.with_file_name("s2.jsonl");
    fs::write(&other_transcript, "{\"type\":\"start\"}\n").unwrap();
    let mut other = CheckpointStore::open(
        super::store_dir(&other_transcript),
        f.ws.clone(),
        Limits::default(),
    );
    let one = f.prompt("mine");
    other.begin_prompt("theirs", 0).unwrap();
    // The other session's command runs while this one's does: both walks
    // see its file.
    f.store.note_outside_changes().unwrap();
    other.note_outside_changes().unwrap();
    f.write("theirs.txt", "theirs\n");
    other.record_changes().unwrap();
    f.store.record_changes().unwrap();
    assert_eq!(f.changed_paths(one), ["theirs.txt"]);
    let transcript = f.transcript.clone();
    assert_eq!(f.store.conflicts(one).unwrap().len(), 1);
    let report = f
        .store
        .rewind(&transcript, one, RewindScope::Files, false)
        .unwrap();
    assert_eq!(report.conflicts.len(), 1, "{report:?}");
    assert!(
        report.conflicts[0]
            .reason
            .contains("also changed by session s2"),
        "{report:?}"
    );
    assert_eq!(f.read("theirs.txt").unwrap(), "theirs\n");
    let forced = f
        .store
        .rewind(&transcript, one, RewindScope::Files, true)
        .unwrap();
    assert_eq!(forced.removed, ["theirs.txt"], "{forced:?}");
}

#[test]
fn an_interrupted_rewind_is_completed_by_recover() {
    let mut f = fixture(Limits::default());
    for i in 0..4 {
        f.write(&format!("f{i}"), &format!("old {i}\n"));
    }
    let one = f.prompt("rewrite");
    for i in 0..4 {
        f.write(&format!("f{i}"), &format!("new {i}\n"));
    }
    f.store.record_changes().unwrap();
    f.store.flush().unwrap();
    // What a rewind killed after its second file leaves: the journal, two
    // files put back, a staged copy.
    let transcript = f.transcript.clone();
    let plan = f.store.plan(one, false).unwrap();
    let journal = super::restore::Journal::for_test(one, plan.actions);
    f.store.save_journal(&journal).unwrap();
    f.write("f0", "old 0\n");
    f.write("f1", "old 1\n");
    let staging = f.store.dir().join("staging");
    fs::create_dir_all(&staging).unwrap();
    fs::write(staging.join("half"), "old 2").unwrap();
    let dir = f.store.dir().to_path_buf();
    drop(std::mem::replace(
        &mut f.store,
        CheckpointStore::open(dir.clone(), f.ws.clone(), Limits::default()),
    ));
    let said = super::recover(&dir, &f.ws).unwrap().unwrap();
    assert!(
        said.contains("was interrupted; it is now complete"),
        "{said}"
    );
    for i in 0..4 {
        assert_eq!(f.read(&format!("f{i}")).unwrap(), format!("old {i}\n"));
    }
    assert!(!dir.join("rewind.json").exists());
    assert!(!staging.exists());
    assert!(super::recover(&dir, &f.ws).unwrap().is_none());
    let _ = transcript;
}
