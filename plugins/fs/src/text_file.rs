//! Loading a file whole and telling text from binary.
//!
//! Every WASI call is a call into the host, so files are read with
//! `capstan_sdk::fs::read`: one open, one stat, one read.

use std::io;

use capstan_sdk::ToolError;

use crate::workspace_path::InputPath;
use std::path::Path;

/// How many leading bytes are searched for a NUL byte, the mark of a binary
/// file (the same rule git and ripgrep use).
const BINARY_PROBE_BYTES: usize = 8 * 1024;

/// What a file holds.
#[derive(Debug)]
pub enum Contents {
    /// UTF-8 text without NUL bytes in its first 8 KiB.
    Text(String),
    /// Anything else.
    Binary {
        /// The file's size in bytes.
        size: usize,
    },
}

/// Why a file could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    /// The path is a folder.
    Folder,
    /// The path is neither a file nor a folder (a named pipe, a socket, a
    /// device), and was not opened; the text says what it is and why it
    /// was refused.
    NotRegular(String),
    /// Opening or reading failed.
    Io(io::Error),
}

/// What a tool says when a path is not a text file it can use. Each text
/// follows "PATH is a binary file (N bytes); ", "PATH is a folder; " or
/// "PATH does not exist; ".
pub struct Refusals {
    /// Why a binary file will not do.
    pub binary: &'static str,
    /// What to do with a folder instead.
    pub folder: &'static str,
    /// What to do about a missing file, if the tool has advice.
    pub missing: Option<&'static str>,
}

/// Loads the text file `target` for a tool, refusing anything else in the
/// tool's own words.
pub fn load_text(target: &InputPath, refusals: &Refusals) -> Result<String, ToolError> {
    let shown = &target.shown;
    match load(&target.path) {
        Ok(Contents::Text(text)) => Ok(text),
        Ok(Contents::Binary { size }) => Err(ToolError::failed(format!(
            "{shown} is a binary file ({size} bytes); {}",
            refusals.binary
        ))),
        Err(LoadError::Folder) => Err(ToolError::failed(format!(
            "{shown} is a folder; {}",
            refusals.folder
        ))),
        Err(LoadError::NotRegular(what)) => Err(ToolError::failed(format!("{shown} is {what}"))),
        Err(LoadError::Io(err)) => match refusals.missing {
            Some(advice) if err.kind() == io::ErrorKind::NotFound => Err(ToolError::failed(
                format!("{shown} does not exist; {advice}"),
            )),
            _ => Err(ToolError::from_io(&err, format!("cannot read {shown}"))),
        },
    }
}

/// Reads the file at `path` whole and says whether it is text.
pub fn load(path: &Path) -> Result<Contents, LoadError> {
    let bytes = read_whole(path)?;
    Ok(classify(bytes))
}

/// Decides whether `bytes` are text, keeping them without a copy if so.
pub fn classify(bytes: Vec<u8>) -> Contents {
    let probe = &bytes[..bytes.len().min(BINARY_PROBE_BYTES)];
    if probe.contains(&0) {
        return Contents::Binary { size: bytes.len() };
    }
    match String::from_utf8(bytes) {
        Ok(text) => Contents::Text(text),
        Err(err) => Contents::Binary {
            size: err.as_bytes().len(),
        },
    }
}

fn read_whole(path: &Path) -> Result<Vec<u8>, LoadError> {
    capstan_sdk::fs::read(path).map_err(|err| match err.kind() {
        io::ErrorKind::IsADirectory => LoadError::Folder,
        io::ErrorKind::Unsupported => LoadError::NotRegular(err.to_string()),
        _ => LoadError::Io(err),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_without_nul_is_text() {
        assert!(
            matches!(classify(b"fn main() {}\n".to_vec()), Contents::Text(t) if t == "fn main() {}\n")
        );
        assert!(matches!(
            classify("héllo".as_bytes().to_vec()),
            Contents::Text(_)
        ));
        assert!(matches!(classify(Vec::new()), Contents::Text(t) if t.is_empty()));
    }

    #[test]
    fn a_nul_byte_early_means_binary() {
        let mut bytes = b"\x89PNG\r\n".to_vec();
        bytes.push(0);
        assert!(matches!(classify(bytes), Contents::Binary { size: 7 }));
    }

    #[test]
    fn invalid_utf8_means_binary() {
        assert!(matches!(
            classify(vec![b'a', 0xff, b'b']),
            Contents::Binary { size: 3 }
        ));
    }

    #[test]
    fn a_nul_byte_past_the_probe_is_not_searched_for() {
        let mut bytes = vec![b'a'; BINARY_PROBE_BYTES];
        bytes.push(0);
        assert!(matches!(classify(bytes), Contents::Text(_)));
    }

    #[test]
    fn loading_a_folder_says_so() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(load(dir.path()), Err(LoadError::Folder)));
    }

    #[test]
    fn a_named_pipe_is_refused_without_being_opened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // Opening it would wait for a writer that never comes.
        match load(&fifo) {
            Err(LoadError::NotRegular(what)) => {
                assert!(
                    what.starts_with("a named pipe (FIFO), not a regular file"),
                    "{what}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn loading_reads_files_larger_than_the_first_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.txt");
        let text = "line of text\n".repeat(10_000);
        std::fs::write(&path, &text).unwrap();
        assert!(matches!(load(&path), Ok(Contents::Text(t)) if t == text));
    }
}
