//! The log file: lines handed to a writer thread through a bounded queue,
//! so a turn never waits on the disk, and written to a file that rolls
//! over at a size and whose folder keeps a bounded number of files.
//!
//! An event is queued as a [`Record`] (its values, taken on the thread that
//! logged it) and formatted into its line here, on the writer thread; when the queue is full the line is dropped and counted
//! rather than the caller blocked, and the next line written says how many
//! were lost. Lines logged before the session has an id wait (up to a
//! bound) in memory and go to the session's file once it is named.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel};
use std::thread::Thread;
use std::time::Duration;

use super::record::Record;

/// How large one log file grows before it rolls over to `NAME.1`.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// How many rolled-over files one log keeps (`NAME.1` .. `NAME.N`).
pub const KEPT_ROLLOVERS: u32 = 2;
/// How many files the logs folder keeps; the oldest beyond are removed.
pub const KEPT_FILES: usize = 60;
/// How many bytes the logs folder keeps; the oldest files beyond are removed.
pub const KEPT_BYTES: u64 = 256 * 1024 * 1024;
/// Lines the queue holds before new ones are dropped.
const QUEUE_LINES: usize = 8192;
/// Lines kept in memory before the file is named.
const PENDING_LINES: usize = 4096;
/// How often the writer wakes to write what was queued. A line wakes
/// nobody (waking a thread per line would cost the logging thread a
/// system call and a context switch); naming the file and flushing do.
const WRITE_EVERY: Duration = Duration::from_millis(50);

/// What the writer thread is told.
enum Message {
    /// One formatted event.
    Line(Vec<u8>),
    /// An event, formatted into its line by the writer.
    Record(Box<Record>),
    /// Write from now on to this file (appending), created if need be.
    Open(PathBuf),
    /// Write everything queued, then answer.
    Flush(SyncSender<()>),
}

/// The sending side: cheap to clone, one per layer.
#[derive(Clone)]
pub struct FileSink {
    queue: SyncSender<Message>,
    dropped: Arc<AtomicU64>,
    writer: Thread,
}

/// The file a log goes to before it is named, if it never is.
pub struct Fallback(pub PathBuf);

impl FileSink {
    /// Starts the writer thread for files in `dir`; lines wait in memory
    /// until [`FileSink::open`] names the file (or go to `fallback` when
    /// the log ends unnamed).
    pub fn start(dir: PathBuf, fallback: Fallback) -> io::Result<Self> {
        let (queue, inbox) = sync_channel(QUEUE_LINES);
        let dropped = Arc::new(AtomicU64::new(0));
        let counter = dropped.clone();
        let writer = std::thread::Builder::new()
            .name("capstan-log".into())
            .spawn(move || write_lines(inbox, dir, fallback, counter))?
            .thread()
            .clone();
        Ok(Self {
            queue,
            dropped,
            writer,
        })
    }

    /// Sends the lines from now on (and those waiting) to `path`.
    pub fn open(&self, path: PathBuf) {
        // Blocking here is fine: this is not a hot path.
        let _ = self.queue.send(Message::Open(path));
        self.writer.unpark();
    }

    /// Waits (briefly) until every queued line is written.
    pub fn flush(&self) {
        let (done, wait) = sync_channel(1);
        if self.queue.send(Message::Flush(done)).is_ok() {
            self.writer.unpark();
            let _ = wait.recv_timeout(Duration::from_secs(2));
        }
    }

    fn send(&self, line: Vec<u8>) {
        self.queue_message(Message::Line(line));
    }

    /// Queues an event, dropped (and counted) when the queue is full.
    pub fn send_record(&self, record: Record) {
        self.queue_message(Message::Record(Box::new(record)));
    }

    fn queue_message(&self, message: Message) {
        match self.queue.try_send(message) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for FileSink {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter {
            sink: self,
            line: Vec::new(),
        }
    }
}

/// One event's text, queued when the formatter is done with it.
pub struct LineWriter<'a> {
    sink: &'a FileSink,
    line: Vec<u8>,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter<'_> {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            self.sink.send(std::mem::take(&mut self.line));
        }
    }
}

/// The writer thread's loop.
fn write_lines(
    inbox: Receiver<Message>,
    dir: PathBuf,
    fallback: Fallback,
    dropped: Arc<AtomicU64>,
) {
    let mut pending: Vec<Vec<u8>> = Vec::new();
    let mut pending_lost = 0u64;
    let mut file: Option<RollingFile> = None;
    loop {
        let message = match inbox.try_recv() {
            Ok(message) => message,
            Err(TryRecvError::Empty) => {
                std::thread::park_timeout(WRITE_EVERY);
                continue;
            }
            Err(TryRecvError::Disconnected) => break,
        };
        match message {
            Message::Line(line) => {
                write_line(&mut file, &mut pending, &mut pending_lost, &dropped, line)
            }
            Message::Record(record) => write_line(
                &mut file,
                &mut pending,
                &mut pending_lost,
                &dropped,
                record.into_line(),
            ),
            Message::Open(path) => {
                if let Some(mut old) = file.take() {
                    old.flush();
                }
                prune(&dir, &path);
                let mut opened = RollingFile::open(path);
                for line in pending.drain(..) {
                    opened.write(&line);
                }
                if pending_lost > 0 {
                    opened.write(
                        format!("capstan: {pending_lost} early log lines dropped\n").as_bytes(),
                    );
                    pending_lost = 0;
                }
                file = Some(opened);
            }
            Message::Flush(done) => {
                if file.is_none() && !pending.is_empty() {
                    let path = dir.join(&fallback.0);
                    prune(&dir, &path);
                    let mut opened = RollingFile::open(path);
                    for line in pending.drain(..) {
                        opened.write(&line);
                    }
                    file = Some(opened);
                }
                if let Some(file) = file.as_mut() {
                    file.flush();
                }
                let _ = done.send(());
            }
        }
    }
}

/// Writes `line` to the file, or keeps it until the file is named.
fn write_line(
    file: &mut Option<RollingFile>,
    pending: &mut Vec<Vec<u8>>,
    pending_lost: &mut u64,
    dropped: &AtomicU64,
    line: Vec<u8>,
) {
    match file.as_mut() {
        Some(file) => {
            let lost = dropped.swap(0, Ordering::Relaxed);
            if lost > 0 {
                file.write(
                    format!("capstan: {lost} log lines dropped (the writer fell behind)\n")
                        .as_bytes(),
                );
            }
            file.write(&line);
        }
        None if pending.len() < PENDING_LINES => pending.push(line),
        None => *pending_lost += 1,
    }
}

/// A log file that rolls over to `NAME.1` (`NAME.1` to `NAME.2`, ...) when
/// it reaches [`MAX_FILE_BYTES`]. Failing to write loses the line, never
/// the session: logging must not stop the work it records.
struct RollingFile {
    path: PathBuf,
    file: Option<io::BufWriter<File>>,
    size: u64,
}

impl RollingFile {
    fn open(path: PathBuf) -> Self {
        let (file, size) = match open_append(&path) {
            Some((file, size)) => (Some(io::BufWriter::new(file)), size),
            None => (None, 0),
        };
        Self { path, file, size }
    }

    fn write(&mut self, line: &[u8]) {
        if self.size > 0 && self.size + line.len() as u64 > MAX_FILE_BYTES {
            self.roll_over();
        }
        if let Some(file) = self.file.as_mut()
            && file.write_all(line).is_ok()
        {
            self.size += line.len() as u64;
        }
    }

    fn flush(&mut self) {
        if let Some(file) = self.file.as_mut() {
            let _ = file.flush();
        }
    }

    fn roll_over(&mut self) {
        self.flush();
        self.file = None;
        for n in (1..KEPT_ROLLOVERS).rev() {
            let _ = std::fs::rename(numbered(&self.path, n), numbered(&self.path, n + 1));
        }
        let _ = std::fs::rename(&self.path, numbered(&self.path, 1));
        if let Some((file, size)) = open_append(&self.path) {
            self.file = Some(io::BufWriter::new(file));
            self.size = size;
        }
    }
}

/// `path` with `.n` added (`abc.log.1`).
fn numbered(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// Opens `path` for appending, readable by the user alone (a log names
/// files and prompts of the user's projects).
fn open_append(path: &Path) -> Option<(File, u64)> {
    if let Some(dir) = path.parent() {
        create_private_dir(dir).ok()?;
    }
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path).ok()?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    Some((file, size))
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Removes the oldest files of `dir` until it holds at most [`KEPT_FILES`]
/// files and [`KEPT_BYTES`] bytes, counting the one about to be written
/// (`keep`), which is never removed.
pub fn prune(dir: &Path, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let meta = entry.metadata().ok()?;
            if !meta.is_file() {
                return None;
            }
            Some((meta.modified().ok()?, meta.len(), entry.path()))
        })
        .filter(|(_, _, path)| path != keep)
        .collect();
    // Newest first; the file about to be written counts as the newest.
    files.sort_by_key(|file| std::cmp::Reverse(file.0));
    let mut count = 1usize;
    let mut bytes = std::fs::metadata(keep).map(|m| m.len()).unwrap_or(0);
    for (_, len, path) in files {
        count += 1;
        bytes += len;
        if count > KEPT_FILES || bytes > KEPT_BYTES {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_file_rolls_over_and_keeps_a_bounded_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.log");
        let mut file = RollingFile::open(path.clone());
        let line = vec![b'x'; 1024 * 1024];
        for _ in 0..(MAX_FILE_BYTES / (1024 * 1024)) * 4 {
            file.write(&line);
        }
        file.flush();
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["s.log", "s.log.1", "s.log.2"]);
        for name in &names {
            let len = std::fs::metadata(dir.path().join(name)).unwrap().len();
            assert!(len <= MAX_FILE_BYTES, "{name}: {len}");
        }
    }

    #[test]
    fn pruning_removes_the_oldest_files_beyond_the_count() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::time::SystemTime::now() - Duration::from_secs(100_000);
        for n in 0..KEPT_FILES + 5 {
            let path = dir.path().join(format!("{n:03}.log"));
            std::fs::write(&path, "x\n").unwrap();
            let file = File::options().write(true).open(&path).unwrap();
            file.set_modified(base + Duration::from_secs(n as u64 * 10))
                .unwrap();
        }
        let current = dir.path().join("current.log");
        prune(dir.path(), &current);
        let left = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(left, KEPT_FILES - 1);
        // The oldest went, the newest stayed.
        assert!(!dir.path().join("000.log").exists());
        assert!(!dir.path().join("005.log").exists());
        assert!(dir.path().join("006.log").exists());
        assert!(
            dir.path()
                .join(format!("{:03}.log", KEPT_FILES + 4))
                .exists()
        );
    }

    #[test]
    fn lines_wait_for_the_file_to_be_named() {
        let dir = tempfile::tempdir().unwrap();
        let sink = FileSink::start(dir.path().to_path_buf(), Fallback("x.log".into())).unwrap();
        let mut writer = tracing_subscriber::fmt::MakeWriter::make_writer(&sink);
        writer.write_all(b"early\n").unwrap();
        drop(writer);
        sink.open(dir.path().join("named.log"));
        let mut writer = tracing_subscriber::fmt::MakeWriter::make_writer(&sink);
        writer.write_all(b"late\n").unwrap();
        drop(writer);
        sink.flush();
        let text = std::fs::read_to_string(dir.path().join("named.log")).unwrap();
        assert_eq!(text, "early\nlate\n");
        assert!(!dir.path().join("x.log").exists());
    }

    #[test]
    fn an_unnamed_log_ends_in_its_fallback() {
        let dir = tempfile::tempdir().unwrap();
        let sink = FileSink::start(dir.path().to_path_buf(), Fallback("x.log".into())).unwrap();
        let mut writer = tracing_subscriber::fmt::MakeWriter::make_writer(&sink);
        writer.write_all(b"only\n").unwrap();
        drop(writer);
        sink.flush();
        let text = std::fs::read_to_string(dir.path().join("x.log")).unwrap();
        assert_eq!(text, "only\n");
    }
}
