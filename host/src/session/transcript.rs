//! Writing a transcript: a new one (created with `create_new`, so two
//! sessions never share a file) or a resumed one (reopened for appending).
//! Each record is one `write_all` of one whole line, then a flush.
//!
//! A write that fails leaves no part of its record behind: the file is
//! cut back to where the record began (cutting needs no free space), or,
//! should that fail too, at the next write or resume. A write that failed
//! because the disk was full also leaves an empty marker file beside the
//! transcript (an empty file takes no data blocks, so it can be made on a
//! full disk), so that a resume can say the disk was full — not that the
//! process was probably killed — and cut off a record it finds cut short.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use super::load::{self, LoadedSession};
use super::record::{Event, Record, SCHEMA_VERSION};
use super::{SessionError, Sessions, new_session_id, now_ms};
use crate::model::{Message, StopReason, Usage};

/// How many fresh ids to try before giving up on creating a transcript;
/// a clash needs two sessions drawing the same 64 random bits.
const CREATE_ATTEMPTS: usize = 8;

/// An open transcript that records are appended to.
#[derive(Debug)]
pub struct TranscriptWriter {
    id: String,
    path: PathBuf,
    file: File,
    /// Where a record whose write failed began, while the file still
    /// holds part of it.
    cut_at: Option<u64>,
    /// Whether the transcript was reopened with a disk-full marker beside
    /// it, which goes once a record is written (a marker this writer
    /// makes stays, for the resume to tell).
    disk_full_marked: bool,
}

/// The empty file beside `transcript` that says its last write failed
/// because the disk was full.
pub fn disk_full_marker(transcript: &Path) -> PathBuf {
    let mut name = transcript.as_os_str().to_owned();
    name.push(".disk-full");
    PathBuf::from(name)
}

/// Whether `error` says the disk (or the user's quota on it) is full.
pub fn is_disk_full(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded
    )
}

impl Sessions {
    /// Starts a new session: creates its transcript and writes the start
    /// record.
    pub fn create(&self, model: &str, provider: &str) -> Result<TranscriptWriter, SessionError> {
        fs::create_dir_all(self.dir()).map_err(|source| SessionError::Io {
            action: "create the sessions folder",
            path: self.dir().to_path_buf(),
            source,
        })?;
        let mut attempt = 0;
        let (id, path, file) = loop {
            attempt += 1;
            let id = new_session_id();
            let path = self.transcript_path(&id);
            match OpenOptions::new().append(true).create_new(true).open(&path) {
                Ok(file) => break (id, path, file),
                Err(e) if e.kind() == ErrorKind::AlreadyExists && attempt < CREATE_ATTEMPTS => {}
                Err(source) => {
                    return Err(SessionError::Io {
                        action: "create the session transcript",
                        path,
                        source,
                    });
                }
            }
        };
        self.start(TranscriptWriter::fresh(id, path, file), model, provider)
    }

    /// Starts a new session with the id the user chose (`--session-id`): a
    /// UUID, not used by any session of any workspace.
    pub fn create_with_id(
        &self,
        id: &str,
        model: &str,
        provider: &str,
    ) -> Result<TranscriptWriter, SessionError> {
        let id = super::session_uuid(id).ok_or_else(|| SessionError::BadId { id: id.into() })?;
        fs::create_dir_all(self.dir()).map_err(|source| SessionError::Io {
            action: "create the sessions folder",
            path: self.dir().to_path_buf(),
            source,
        })?;
        let name = format!("{id}.jsonl");
        let elsewhere = self.dir().parent().and_then(|root| fs::read_dir(root).ok());
        if elsewhere
            .into_iter()
            .flatten()
            .flatten()
            .any(|folder| folder.path().join(&name).exists())
        {
            return Err(SessionError::IdTaken { id });
        }
        let path = self.transcript_path(&id);
        let file = match OpenOptions::new().append(true).create_new(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                return Err(SessionError::IdTaken { id });
            }
            Err(source) => {
                return Err(SessionError::Io {
                    action: "create the session transcript",
                    path,
                    source,
                });
            }
        };
        self.start(TranscriptWriter::fresh(id, path, file), model, provider)
    }

    /// Writes a new transcript's start record.
    fn start(
        &self,
        mut writer: TranscriptWriter,
        model: &str,
        provider: &str,
    ) -> Result<TranscriptWriter, SessionError> {
        writer.append(Event::Start {
            schema_version: SCHEMA_VERSION,
            session_id: writer.id.clone(),
            workspace: self.workspace().to_string_lossy().into_owned(),
            model: model.to_string(),
            provider: provider.to_string(),
            capstan_version: env!("CARGO_PKG_VERSION").to_string(),
        })?;
        Ok(writer)
    }

    /// Takes up session `id` again: reads its conversation back, reopens
    /// the transcript for appending and records that it was resumed. A line
    /// cut short at the end (the process was killed mid-write) is closed off
    /// and marked damaged, so the file stays readable; nothing is deleted.
    pub fn resume(
        &self,
        id: &str,
        model: &str,
        provider: &str,
    ) -> Result<(TranscriptWriter, LoadedSession), SessionError> {
        let (mut writer, loaded) = self.reopen(id)?;
        writer.append(Event::Resumed {
            model: model.to_string(),
            provider: provider.to_string(),
            capstan_version: env!("CARGO_PKG_VERSION").to_string(),
        })?;
        Ok((writer, loaded))
    }

    /// Reads session `id` back and reopens its transcript for appending
    /// (after a rewind rewrote the file), without recording a resume.
    pub fn reopen(&self, id: &str) -> Result<(TranscriptWriter, LoadedSession), SessionError> {
        TranscriptWriter::reopen(&self.transcript_path(id))
    }
}

impl TranscriptWriter {
    /// The writer of a transcript just created, empty.
    fn fresh(id: String, path: PathBuf, file: File) -> Self {
        TranscriptWriter {
            id,
            path,
            file,
            cut_at: None,
            disk_full_marked: false,
        }
    }
}

impl TranscriptWriter {
    /// Reads the transcript at `path` back and reopens it for appending,
    /// closing off a line cut short at its end.
    pub fn reopen(path: &Path) -> Result<(TranscriptWriter, LoadedSession), SessionError> {
        let path = path.to_path_buf();
        let id = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let loaded = load::load(&path)?;
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|source| SessionError::Io {
                action: "reopen the session transcript",
                path: path.clone(),
                source,
            })?;
        let mut writer = TranscriptWriter {
            id,
            path,
            file,
            cut_at: None,
            disk_full_marked: loaded.disk_full,
        };
        match (loaded.disk_full, loaded.damaged_tail_offset) {
            // The record cut short by a full disk is nobody's work: cut
            // it off, now that there is a chance to write again.
            (true, Some(offset)) => writer.cut_back(offset)?,
            _ => {
                if !loaded.ends_with_newline {
                    writer.write_line("\n")?;
                }
                if let Some(line) = loaded.damaged_tail_line {
                    writer.append(Event::DamagedLine { line })?;
                }
            }
        }
        Ok((writer, loaded))
    }
}

impl TranscriptWriter {
    /// The session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The transcript file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many bytes the transcript holds: where the next record begins.
    pub fn size(&self) -> Result<u64, SessionError> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|source| SessionError::Io {
                action: "look at the session transcript",
                path: self.path.clone(),
                source,
            })
    }

    /// Records a message from the user.
    pub fn record_user(&mut self, message: &Message) -> Result<(), SessionError> {
        self.append(Event::User {
            message: message.clone(),
        })
    }

    /// Records the model's answer and why it stopped.
    pub fn record_assistant(
        &mut self,
        message: &Message,
        stop_reason: Option<StopReason>,
    ) -> Result<(), SessionError> {
        self.append(Event::Assistant {
            message: message.clone(),
            stop_reason,
        })
    }

    /// Records the results of tool calls sent back to the model.
    pub fn record_tool_results(&mut self, message: &Message) -> Result<(), SessionError> {
        self.append(Event::ToolResults {
            message: message.clone(),
        })
    }

    /// Records the tokens one answer used.
    pub fn record_usage(&mut self, usage: Usage) -> Result<(), SessionError> {
        self.append(Event::Usage { usage })
    }

    /// Records that the turn was interrupted, and why.
    pub fn record_interrupted(&mut self, reason: &str) -> Result<(), SessionError> {
        self.append(Event::Interrupted {
            reason: reason.to_string(),
        })
    }

    /// Records that the session ended normally.
    pub fn record_end(&mut self) -> Result<(), SessionError> {
        self.append(Event::End)
    }

    /// Appends any record as one line, written and flushed at once.
    pub fn append(&mut self, event: Event) -> Result<(), SessionError> {
        let record = Record {
            ts_ms: now_ms(),
            event,
        };
        // Serialising these types cannot fail (string keys, no maps of
        // non-string keys), but a failure is still reported, not unwrapped.
        let mut line = serde_json::to_string(&record).map_err(|e| SessionError::Io {
            action: "encode a record for the session transcript",
            path: self.path.clone(),
            source: std::io::Error::new(ErrorKind::InvalidData, e),
        })?;
        line.push('\n');
        self.write_line(&line)
    }

    /// Writes a whole line in one call and flushes it. If the write
    /// fails, what it wrote is cut off again (see the module's
    /// documentation); once a resumed transcript is written, its disk-full
    /// marker goes.
    fn write_line(&mut self, line: &str) -> Result<(), SessionError> {
        if let Some(offset) = self.cut_at {
            self.cut_back(offset)?;
        }
        let start = match self.file.metadata() {
            Ok(meta) => meta.len(),
            Err(source) => return Err(self.write_error(source)),
        };
        let written = self
            .file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.flush());
        let Err(source) = written else {
            if self.disk_full_marked {
                self.forget_disk_full();
            }
            return Ok(());
        };
        let disk_full = is_disk_full(&source);
        if disk_full {
            // Best effort: if even an empty file cannot be made, the note
            // on resume says less, and nothing else is lost.
            let _ = File::create(disk_full_marker(&self.path));
        }
        self.cut_at = Some(start);
        let _ = self.cut_back(start);
        if disk_full {
            return Err(SessionError::DiskFull {
                path: self.path.clone(),
                cut_back: self.cut_at.is_none(),
            });
        }
        Err(self.write_error(source))
    }

    /// The error of a failed write.
    fn write_error(&self, source: std::io::Error) -> SessionError {
        SessionError::Io {
            action: "write to the session transcript",
            path: self.path.clone(),
            source,
        }
    }

    /// Cuts the file back to `offset` bytes, the start of a record cut
    /// short; the next write goes there.
    fn cut_back(&mut self, offset: u64) -> Result<(), SessionError> {
        self.file
            .set_len(offset)
            .map_err(|source| SessionError::Io {
                action: "cut a record that was cut short off the session transcript",
                path: self.path.clone(),
                source,
            })?;
        self.cut_at = None;
        Ok(())
    }

    /// Removes the disk-full marker, if there is one: the transcript is
    /// whole and written to again.
    fn forget_disk_full(&mut self) {
        let marker = disk_full_marker(&self.path);
        match fs::remove_file(&marker) {
            Ok(()) => self.disk_full_marked = false,
            Err(error) if error.kind() == ErrorKind::NotFound => self.disk_full_marked = false,
            Err(error) => tracing::warn!(
                marker = %marker.display(),
                %error,
                "cannot remove the transcript's disk-full marker"
            ),
        }
    }
}
