//! File reading tuned for the sandbox.
//!
//! Every WASI call is a call into the host. `std::fs::read` goes through
//! wasi-libc and a stream, which costs several extra calls per file;
//! [`read`] speaks WASI directly: one open and, for a file under 16 KiB,
//! one read. On other targets (native unit tests) it is `std::fs::read`.
//! Either way the whole file ends up in memory, so the plugin's memory
//! limit bounds the size of a file it can read.
//!
//! Only regular files are read. A named pipe, a socket or a device in a
//! granted folder is refused (capstan's sandbox does not open one at all):
//! opening or reading one can wait forever for another program.

use std::io;
use std::path::Path;

/// What a path leads to, symbolic links followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A folder.
    Folder,
    /// Anything else: a named pipe, a socket, a device. Tools should refuse
    /// it, since opening or reading one can wait forever. Holds what it is,
    /// in words ("a named pipe (FIFO)").
    Special(&'static str),
}

/// What a path that is neither a file, a folder nor a known kind of special
/// file is called; capstan's sandbox reports named pipes and sockets so.
const SPECIAL_FILE: &str = "a special file (such as a named pipe or a socket)";

/// What `path` leads to, symbolic links followed, without opening it.
pub fn kind(path: &Path) -> io::Result<Kind> {
    imp::kind(path)
}

/// Reads a whole file, following symbolic links that stay inside the
/// granted folders. Errors have the usual [`io::ErrorKind`]s: `NotFound`,
/// `PermissionDenied` (outside the grants), `IsADirectory`; a path that is
/// neither a file nor a folder is not opened, and is `Unsupported`, with a
/// message such as "a named pipe (FIFO), not a regular file: ...".
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    imp::read(path)
}

/// The error for a path that is not a regular file.
fn not_regular(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "{what}, not a regular file: reading one can wait forever for another program, so only regular files are read"
        ),
    )
}

/// The folders this call was granted, as the plugin sees them (for a
/// skill's `load`, which gets no call context: the workspace is among them
/// when the plugin was granted `$WORKSPACE`). Empty outside WebAssembly.
pub fn granted_folders() -> Vec<std::path::PathBuf> {
    imp::granted_folders()
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::*;

    pub fn granted_folders() -> Vec<std::path::PathBuf> {
        Vec::new()
    }

    pub fn kind(path: &Path) -> io::Result<Kind> {
        let file_type = std::fs::metadata(path)?.file_type();
        if file_type.is_file() {
            return Ok(Kind::File);
        }
        if file_type.is_dir() {
            return Ok(Kind::Folder);
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if file_type.is_fifo() {
                return Ok(Kind::Special("a named pipe (FIFO)"));
            }
            if file_type.is_socket() {
                return Ok(Kind::Special("a socket"));
            }
            if file_type.is_char_device() {
                return Ok(Kind::Special("a character device"));
            }
            if file_type.is_block_device() {
                return Ok(Kind::Special("a block device"));
            }
        }
        Ok(Kind::Special(SPECIAL_FILE))
    }

    pub fn read(path: &Path) -> io::Result<Vec<u8>> {
        match kind(path)? {
            Kind::File => std::fs::read(path),
            Kind::Folder => Err(io::Error::new(io::ErrorKind::IsADirectory, "is a folder")),
            Kind::Special(what) => Err(not_regular(what)),
        }
    }
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::*;
    use wasip2::filesystem::preopens::get_directories;
    use wasip2::filesystem::types::{
        Descriptor, DescriptorFlags, DescriptorType, ErrorCode, OpenFlags, PathFlags,
    };

    /// The first read's size: most source files fit, and asking the host
    /// for more would have it allocate and clear a larger buffer. A host
    /// returns fewer bytes than asked only at the end of a file, unless it
    /// caps reads below this (wasmtime caps them at 64 KiB).
    const FIRST_READ: u64 = 16 << 10;

    /// The size of later reads, once a file turned out to be larger.
    const CHUNK: u64 = 64 << 10;

    pub fn granted_folders() -> Vec<std::path::PathBuf> {
        get_directories()
            .into_iter()
            .map(|(_, root)| std::path::PathBuf::from(root))
            .collect()
    }

    /// What `relative` in the granted folder `dir` leads to.
    fn kind_at(dir: &Descriptor, relative: &str) -> io::Result<Kind> {
        let stat = dir
            .stat_at(PathFlags::SYMLINK_FOLLOW, relative)
            .map_err(to_io)?;
        Ok(match stat.type_ {
            DescriptorType::RegularFile => Kind::File,
            DescriptorType::Directory => Kind::Folder,
            DescriptorType::Fifo => Kind::Special("a named pipe (FIFO)"),
            DescriptorType::Socket => Kind::Special("a socket"),
            DescriptorType::CharacterDevice => Kind::Special("a character device"),
            DescriptorType::BlockDevice => Kind::Special("a block device"),
            // How wasmtime reports a named pipe or a socket.
            DescriptorType::SymbolicLink | DescriptorType::Unknown => Kind::Special(SPECIAL_FILE),
        })
    }

    /// The granted folder holding `path`, and the rest of the path.
    fn locate<'a>(
        preopens: &'a [(Descriptor, String)],
        path: &'a Path,
    ) -> io::Result<(&'a Descriptor, &'a str)> {
        let text = path
            .to_str()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path is not UTF-8"))?;
        preopen_for(preopens, text).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                "outside the folders this plugin was granted",
            )
        })
    }

    pub fn kind(path: &Path) -> io::Result<Kind> {
        let preopens = get_directories();
        let (dir, relative) = locate(&preopens, path)?;
        kind_at(dir, relative)
    }

    pub fn read(path: &Path) -> io::Result<Vec<u8>> {
        let preopens = get_directories();
        let (dir, relative) = locate(&preopens, path)?;
        // No stat first: the host refuses to open what is not a file or a
        // folder, and only then is the path looked at, to say what it is.
        let file = dir
            .open_at(
                PathFlags::SYMLINK_FOLLOW,
                relative,
                OpenFlags::empty(),
                DescriptorFlags::READ,
            )
            .map_err(|code| {
                if matches!(code, ErrorCode::Unsupported)
                    && let Ok(Kind::Special(what)) = kind_at(dir, relative)
                {
                    return not_regular(what);
                }
                to_io(code)
            })?;
        // A short first read means the whole file is in, and a folder is
        // recognised when reading it fails; that saves a call per file. A
        // longer file is read on until the host reports its end.
        let (first, end) = file.read(FIRST_READ, 0).map_err(|e| read_error(&file, e))?;
        if end || (first.len() as u64) < FIRST_READ {
            return Ok(first);
        }
        let mut bytes = first;
        loop {
            let (chunk, end) = file
                .read(CHUNK, bytes.len() as u64)
                .map_err(|e| read_error(&file, e))?;
            if end || chunk.is_empty() {
                return Ok(bytes);
            }
            bytes.extend_from_slice(&chunk);
        }
    }

    /// A failed read of a folder says "bad descriptor"; say "is a folder".
    fn read_error(file: &Descriptor, code: ErrorCode) -> io::Error {
        match file.get_type() {
            Ok(DescriptorType::Directory) => {
                io::Error::new(io::ErrorKind::IsADirectory, "is a folder")
            }
            _ => to_io(code),
        }
    }

    /// The granted folder holding `path` (the longest match), and the rest
    /// of the path relative to it.
    fn preopen_for<'a>(
        preopens: &'a [(Descriptor, String)],
        path: &'a str,
    ) -> Option<(&'a Descriptor, &'a str)> {
        preopens
            .iter()
            .filter_map(|(dir, root)| {
                let rest = path.strip_prefix(root.trim_end_matches('/'))?;
                let rest = if rest.is_empty() {
                    "."
                } else {
                    rest.strip_prefix('/')?
                };
                Some((root.len(), dir, if rest.is_empty() { "." } else { rest }))
            })
            .max_by_key(|(len, _, _)| *len)
            .map(|(_, dir, rest)| (dir, rest))
    }

    fn to_io(code: ErrorCode) -> io::Error {
        let kind = match code {
            ErrorCode::NoEntry => io::ErrorKind::NotFound,
            ErrorCode::Access | ErrorCode::NotPermitted => io::ErrorKind::PermissionDenied,
            ErrorCode::ReadOnly => io::ErrorKind::ReadOnlyFilesystem,
            ErrorCode::IsDirectory => io::ErrorKind::IsADirectory,
            ErrorCode::NotDirectory => io::ErrorKind::NotADirectory,
            ErrorCode::InsufficientMemory => io::ErrorKind::OutOfMemory,
            ErrorCode::IllegalByteSequence | ErrorCode::Invalid => io::ErrorKind::InvalidInput,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, code.message())
    }
}
