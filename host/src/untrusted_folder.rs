//! Files capstan itself reads from folders someone else may control: the
//! workspace and its repository (`AGENTS.md`, `CLAUDE.md`, project skills,
//! the project config) and a package being installed.
//!
//! A plugin granted the workspace, or a cloned repository, can plant a
//! symbolic link such as `CLAUDE.md -> ../../proc/self/environ`; capstan
//! runs outside the sandbox, so reading it naïvely would hand the host's
//! environment to the model. Here every path is resolved *beneath* the
//! folder it is read from, with the resolution that keeps plugins inside
//! their preopens (cap-primitives: `openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS` on Linux, a checked walk elsewhere): a link may
//! point anywhere inside the folder, never out of it, and never through a
//! `/proc` magic link. Only regular files are read — a FIFO, socket or
//! device is refused (files are opened non-blocking, so a FIFO cannot hold
//! capstan up, then checked on the open handle) — and never more than the
//! caller's cap, whatever size the file claims.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use cap_primitives::fs::{FollowSymlinks, OpenOptions};

/// A folder opened once, whose files are read beneath it.
#[derive(Debug)]
pub struct UntrustedFolder {
    dir: std::fs::File,
    path: PathBuf,
}

/// What was read of a file, at most the cap asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CappedRead {
    /// The first bytes of the file, at most the cap.
    pub bytes: Vec<u8>,
    /// Whether the file holds more than the cap.
    pub more: bool,
    /// The size the file's metadata gives, for messages only (it is not
    /// what bounds the read).
    pub size: u64,
}

/// A file or folder capstan will not read.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The path leads out of the folder it is read from.
    #[error(
        "{} leads outside {}: a symbolic link on the way points out of it",
        path.display(),
        root.display()
    )]
    LeadsOutside {
        /// The path, joined to its folder.
        path: PathBuf,
        /// The folder it had to stay in.
        root: PathBuf,
    },
    /// The path is not a regular file (or, for a folder, not a folder).
    #[error("{} is {kind}, not a {expected}", path.display())]
    WrongKind {
        /// The path.
        path: PathBuf,
        /// What it is: `a FIFO`, `a socket`, `a device`, ...
        kind: &'static str,
        /// `regular file` or `folder`.
        expected: &'static str,
    },
    /// The path cannot be opened or read.
    #[error("cannot read {}: {}", path.display(), crate::untrusted_folder::os_reason(source))]
    Unreadable {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl UntrustedFolder {
    /// Opens the folder at `path`. The path itself is taken as given
    /// (capstan chose it: the workspace, the repository root, a package);
    /// only what is read beneath it is confined. `None` when it does not
    /// exist.
    pub fn open(path: &Path) -> Result<Option<Self>, Refused> {
        match cap_primitives::fs::open_ambient_dir(path, cap_primitives::ambient_authority()) {
            Ok(dir) => Ok(Some(Self {
                dir,
                path: path.to_path_buf(),
            })),
            Err(e) if is_absent(&e) => Ok(None),
            Err(e) if e.raw_os_error() == Some(NOT_A_DIRECTORY) => Err(Refused::WrongKind {
                path: path.to_path_buf(),
                kind: "a file",
                expected: "folder",
            }),
            Err(source) => Err(Refused::Unreadable {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// The folder's path, as opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The folder `rel` beneath this one, confined to it in turn. `None`
    /// when it does not exist.
    pub fn subfolder(&self, rel: &Path) -> Result<Option<Self>, Refused> {
        let path = self.path.join(rel);
        match cap_primitives::fs::open_dir(&self.dir, rel) {
            Ok(dir) => Ok(Some(Self { dir, path })),
            Err(e) if is_absent(&e) => Ok(None),
            Err(source) => Err(self.refusal(path, source, "folder")),
        }
    }

    /// The names of the folder's entries, sorted. Entries whose names are
    /// not UTF-8 are left out.
    pub fn entry_names(&self) -> Result<Vec<String>, Refused> {
        let unreadable = |source| Refused::Unreadable {
            path: self.path.clone(),
            source,
        };
        let mut names: Vec<String> = cap_primitives::fs::read_base_dir(&self.dir)
            .map_err(unreadable)?
            .flatten()
            .filter_map(|entry| entry.file_name().into_string().ok())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Reads at most `cap` bytes of the regular file `rel` beneath this
    /// folder. `None` when there is no such file.
    pub fn read(&self, rel: &Path, cap: usize) -> Result<Option<CappedRead>, Refused> {
        let path = self.path.join(rel);
        let mut options = OpenOptions::new();
        options.read(true);
        options._cap_fs_ext_follow(FollowSymlinks::Yes);
        // Non-blocking, so opening a FIFO returns at once instead of waiting
        // for a writer; it is refused below. Regular files ignore the flag.
        // (cap-primitives exposes the flag through this method for
        // cap-fs-ext's `nonblock` option.)
        options._cap_fs_ext_nonblock(true);
        let file = match cap_primitives::fs::open(&self.dir, rel, &options) {
            Ok(file) => file,
            Err(e) if is_absent(&e) => return Ok(None),
            Err(source) => return Err(self.refusal(path, source, "regular file")),
        };
        let unreadable = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Refused::Unreadable { path, source }
        };
        let meta = file.metadata().map_err(unreadable(&path))?;
        if !meta.is_file() {
            return Err(Refused::WrongKind {
                path,
                kind: kind_of(&meta.file_type()),
                expected: "regular file",
            });
        }
        // Never more than the cap, whatever the metadata says: a sparse file
        // can claim gigabytes, a procfs file claims nothing.
        let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
        let mut bytes = Vec::with_capacity(cap.min(usize::try_from(meta.len()).unwrap_or(cap)) + 1);
        file.take(limit)
            .read_to_end(&mut bytes)
            .map_err(unreadable(&path))?;
        let more = bytes.len() > cap;
        bytes.truncate(cap);
        Ok(Some(CappedRead {
            bytes,
            more,
            size: meta.len(),
        }))
    }

    /// Why opening `path` failed, in capstan's words.
    fn refusal(&self, path: PathBuf, source: std::io::Error, expected: &'static str) -> Refused {
        // cap-primitives reports a path resolved out of the folder as an
        // error of its own, without an OS error code.
        if source.kind() == std::io::ErrorKind::PermissionDenied && source.raw_os_error().is_none()
        {
            return Refused::LeadsOutside {
                path,
                root: self.path.clone(),
            };
        }
        if expected == "folder" && source.raw_os_error() == Some(NOT_A_DIRECTORY) {
            return Refused::WrongKind {
                path,
                kind: "a file",
                expected,
            };
        }
        if source.raw_os_error() == Some(TOO_MANY_LINKS) {
            return Refused::LeadsOutside {
                path,
                root: self.path.clone(),
            };
        }
        Refused::Unreadable { path, source }
    }
}

impl CappedRead {
    /// The bytes as text, invalid UTF-8 replaced.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// `ENOTDIR`.
const NOT_A_DIRECTORY: i32 = 20;
/// `ELOOP`: a loop of links, or a link where none may be.
const TOO_MANY_LINKS: i32 = 40;

/// Whether an open failed because nothing is there.
fn is_absent(err: &std::io::Error) -> bool {
    err.kind() == std::io::ErrorKind::NotFound
}

/// A file type in words.
fn kind_of(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
    }
    if kind.is_dir() {
        "a folder"
    } else {
        "not a regular file"
    }
}

/// An I/O error in words, without the `(os error N)` suffix.
pub(crate) fn os_reason(err: &std::io::Error) -> String {
    let text = err.to_string();
    match text.find(" (os error") {
        Some(end) => text[..end].to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn folder(path: &Path) -> UntrustedFolder {
        UntrustedFolder::open(path).unwrap().unwrap()
    }

    #[test]
    fn files_inside_are_read_links_inside_included() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        fs::write(dir.path().join("sub/a.md"), "hello").unwrap();
        symlink("sub/a.md", dir.path().join("link.md")).unwrap();
        let root = folder(dir.path());
        for rel in ["sub/a.md", "link.md"] {
            let read = root.read(Path::new(rel), 100).unwrap().unwrap();
            assert_eq!(read.bytes, b"hello", "{rel}");
            assert!(!read.more);
        }
        assert!(root.read(Path::new("missing.md"), 10).unwrap().is_none());
        let sub = root.subfolder(Path::new("sub")).unwrap().unwrap();
        assert_eq!(sub.entry_names().unwrap(), ["a.md"]);
        assert!(root.subfolder(Path::new("nope")).unwrap().is_none());
    }

    #[test]
    fn links_leading_out_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        fs::create_dir(&root).unwrap();
        fs::write(dir.path().join("secret.txt"), "secret").unwrap();
        fs::create_dir(dir.path().join("elsewhere")).unwrap();
        symlink("../secret.txt", root.join("up.md")).unwrap();
        symlink(dir.path().join("secret.txt"), root.join("abs.md")).unwrap();
        symlink("/proc/self/environ", root.join("environ.md")).unwrap();
        symlink(
            "../../../../../../../../proc/self/environ",
            root.join("climb.md"),
        )
        .unwrap();
        symlink("../elsewhere", root.join("out")).unwrap();
        let root_folder = folder(&root);
        for rel in ["up.md", "abs.md", "environ.md", "climb.md"] {
            let err = root_folder.read(Path::new(rel), 100).unwrap_err();
            assert!(matches!(err, Refused::LeadsOutside { .. }), "{rel}: {err}");
            assert!(err.to_string().contains("leads outside"), "{err}");
        }
        let err = root_folder.subfolder(Path::new("out")).unwrap_err();
        assert!(matches!(err, Refused::LeadsOutside { .. }), "{err}");
    }

    #[test]
    fn reads_stop_at_the_cap_whatever_the_size() {
        let dir = tempfile::tempdir().unwrap();
        let file = fs::File::create(dir.path().join("huge.md")).unwrap();
        file.set_len(1 << 40).unwrap(); // a sparse terabyte
        let read = folder(dir.path())
            .read(Path::new("huge.md"), 1024)
            .unwrap()
            .unwrap();
        assert_eq!(read.bytes.len(), 1024);
        assert!(read.more);
        assert_eq!(read.size, 1 << 40);
    }

    #[test]
    fn fifos_and_devices_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("AGENTS.md");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        symlink("/dev/zero", dir.path().join("zero.md")).unwrap();
        let root = folder(dir.path());
        let err = root.read(Path::new("AGENTS.md"), 10).unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
        // A link to a device outside is refused as leading out.
        assert!(root.read(Path::new("zero.md"), 10).is_err());
        let dev = folder(Path::new("/dev"));
        let err = dev.read(Path::new("zero"), 10).unwrap_err();
        assert!(err.to_string().contains("a device"), "{err}");
    }
}
