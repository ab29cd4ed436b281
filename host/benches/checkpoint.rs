//! `just bench`: what a checkpoint costs.
//!
//! A workspace of 1,000 files (40 folders of 25, 1–8 KiB each, plus a
//! `target/` folder of build output that is skipped) is taken in once;
//! then each sample edits one file and times the checkpoint that finds and
//! copies the change (`CheckpointStore::record_changes`). Target: p50 ≤
//! 10 ms. The walk a session makes just before its calls
//! (`note_outside_changes`) is timed too, and the two together: what one
//! batch of calls costs in checkpoints. Printed against two baselines measured in the same run: a bare
//! stat walk of the same files (the least any scan can cost) and copying
//! the whole workspace (what a checkpoint without a manifest would do).
//!
//! Run with `cargo bench -p capstan --bench checkpoint`; `BENCH_SAMPLES`
//! sets the number of checkpoints timed (default 300).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod support;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use support::{Stats, header, measure, ratio, row, single, target};

use capstan::session::checkpoint::{CheckpointStore, Limits, scan};

const FOLDERS: usize = 40;
const FILES_PER_FOLDER: usize = 25;

/// Fills `root` with the workspace described above.
fn make_workspace(root: &Path) {
    for folder in 0..FOLDERS {
        let dir = root.join(format!("src/module{folder:02}"));
        fs::create_dir_all(&dir).unwrap();
        for file in 0..FILES_PER_FOLDER {
            let size = 1024 + (folder * 31 + file * 97) % 7168;
            let line = format!("// module {folder} file {file}\n");
            let content: String = line.repeat(size / line.len() + 1);
            fs::write(dir.join(format!("file{file:02}.rs")), &content[..size]).unwrap();
        }
    }
    let target = root.join("target/debug");
    fs::create_dir_all(&target).unwrap();
    for n in 0..200 {
        fs::write(target.join(format!("artifact{n}.o")), vec![0u8; 4096]).unwrap();
    }
}

/// Copies every file under `from` (skipping nothing but `target/`) to `to`.
fn copy_all(from: &Path, to: &Path) {
    for entry in fs::read_dir(from).unwrap().flatten() {
        let path = entry.path();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            if entry.file_name() == "target" {
                continue;
            }
            fs::create_dir_all(&dest).unwrap();
            copy_all(&path, &dest);
        } else {
            fs::copy(&path, &dest).unwrap();
        }
    }
}

fn stats_of(mut times: Vec<Duration>) -> Stats {
    times.sort();
    Stats {
        p50: times[times.len() / 2],
        p90: times[times.len() * 9 / 10],
        samples: times.len(),
    }
}

fn main() {
    let samples: usize = std::env::var("BENCH_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    fs::create_dir(&ws).unwrap();
    make_workspace(&ws);
    let transcript = root.path().join("sessions/s.jsonl");
    fs::create_dir_all(transcript.parent().unwrap()).unwrap();
    fs::write(&transcript, "").unwrap();
    // A workspace is not written the instant a session starts; files
    // modified within the file system's clock tick are read again.
    std::thread::sleep(Duration::from_millis(300));

    let mut store = CheckpointStore::open(
        capstan::session::checkpoint::store_dir(&transcript),
        ws.clone(),
        Limits::default(),
    );
    let started = Instant::now();
    store.begin_prompt("bench", 0).unwrap();
    let first = started.elapsed();
    let tracked = scan::walk(&ws, usize::MAX).files.len();
    assert_eq!(tracked, FOLDERS * FILES_PER_FOLDER);

    // Each sample: edit one file (untimed), then the checkpoint (timed):
    // the walk that finds and copies the change, and saving the manifest,
    // which a session does once per prompt (timed here at every edit).
    let mut times = Vec::with_capacity(samples);
    let mut walk_and_copy = Vec::with_capacity(samples);
    let mut before_calls = Vec::with_capacity(samples);
    let mut per_batch = Vec::with_capacity(samples);
    for n in 0..samples {
        // The walk a session makes just before its calls, so that what
        // changed meanwhile is not the prompt's (nothing did here).
        let started = Instant::now();
        store.note_outside_changes().unwrap();
        let before = started.elapsed();
        before_calls.push(before);
        let path = ws.join(format!(
            "src/module{:02}/file{:02}.rs",
            n % FOLDERS,
            (n / FOLDERS) % FILES_PER_FOLDER
        ));
        let mut content = fs::read_to_string(&path).unwrap();
        content.push_str(&format!("// edit {n}\n"));
        fs::write(&path, content).unwrap();
        let started = Instant::now();
        let changes = store.record_changes().unwrap();
        walk_and_copy.push(started.elapsed());
        store.flush().unwrap();
        times.push(started.elapsed());
        per_batch.push(before + started.elapsed());
        assert!(!changes.is_empty() || n > 0, "the edit was not seen");
    }
    let checkpoint = stats_of(times);
    let found = stats_of(walk_and_copy);
    let before_calls = stats_of(before_calls);
    let per_batch = stats_of(per_batch);

    let walk = measure(samples, || {
        let walked = scan::walk(&ws, usize::MAX);
        assert_eq!(walked.files.len(), tracked);
    });
    let copy_samples = samples.min(30);
    let copy = measure(copy_samples, || {
        let dest = tempfile::tempdir_in(root.path()).unwrap();
        copy_all(&ws, dest.path());
    });

    header(&format!(
        "checkpoint of a {tracked}-file workspace after one edit"
    ));
    single("first checkpoint (takes in every file)", first);
    row("checkpoint after an edit: walk, copy the change", &found);
    row("  ... and save the manifest", &checkpoint);
    row(
        "walk just before the calls (nothing changed)",
        &before_calls,
    );
    row(
        "per batch of calls: walk before + checkpoint after",
        &per_batch,
    );
    row("baseline: bare stat walk of the workspace", &walk);
    row("baseline: copying the whole workspace", &copy);
    println!(
        "checkpoint / stat walk: {:.2}x; whole copy / checkpoint: {:.1}x",
        ratio(checkpoint.p50, walk.p50),
        ratio(copy.p50, checkpoint.p50)
    );
    println!(
        "store after {samples} edits: {} bytes of copies",
        store.stored_bytes().unwrap()
    );
    target(
        "checkpoint after an edit p50",
        checkpoint.p50,
        Duration::from_millis(10),
    );
}
