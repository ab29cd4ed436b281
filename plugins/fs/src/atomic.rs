//! Replacing a file's contents all at once.
//!
//! The new contents go to a temporary file in the same folder, which is then
//! renamed over the target: anyone reading the file sees the old contents or
//! the new ones, never half of them, and a failed write leaves the old file
//! as it was.
//!
//! A change made from what was read (`fs.edit`) checks, just before the
//! rename, that the file still holds what was read, and every writer holds
//! a lock file beside the target while it reads and writes, so two capstan
//! sessions changing one file never lose either change: the second fails
//! with a clear error instead.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use capstan_sdk::prelude::*;

/// How many temporary names are tried before giving up, in case an earlier
/// call left one behind.
const TEMP_NAME_ATTEMPTS: u32 = 8;

/// The most symbolic links followed from one path, as in Linux.
const MAX_LINK_HOPS: usize = 40;

/// A lock file this old was left by a process that was killed (no call
/// runs this long), and is taken over.
const STALE_LOCK: Duration = Duration::from_secs(120);

/// A lock on changing one file, held while it is read and replaced: a
/// hidden `.NAME.capstan-lock` beside it, created exclusively and removed
/// when dropped.
#[derive(Debug)]
pub struct FileLock {
    path: PathBuf,
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Takes the lock on changing `target` (shown as `shown`), or fails at once
/// if another call holds it.
pub fn lock_file(target: &Path, shown: &str) -> Result<FileLock, ToolError> {
    let folder = target.parent().unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map(OsStr::to_string_lossy)
        .unwrap_or_default();
    let path = folder.join(format!(".{name}.capstan-lock"));
    for _ in 0..2 {
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(_) => return Ok(FileLock { path }),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                let stale = fs::metadata(&path)
                    .and_then(|meta| meta.modified())
                    .ok()
                    .and_then(|at| SystemTime::now().duration_since(at).ok())
                    .is_some_and(|age| age > STALE_LOCK);
                if !stale {
                    return Err(ToolError::failed(format!(
                        "{shown} is being changed by another capstan session right now; nothing \
                         was written. Read it again with fs.read and redo the change (if no other \
                         session is running, remove {})",
                        path.file_name()
                            .map(OsStr::to_string_lossy)
                            .unwrap_or_default()
                    )));
                }
                let _ = fs::remove_file(&path);
            }
            // A folder that cannot hold the lock (read-only workspace) makes
            // the write fail too; let it say so.
            Err(err) => return Err(ToolError::from_io(&err, format!("cannot write {shown}"))),
        }
    }
    Err(ToolError::failed(format!(
        "{shown} is being changed by another capstan session right now; nothing was written"
    )))
}

/// Replaces the file at `target` (shown to the model as `shown`) with
/// `contents`, creating it if it does not exist. The target's folder must
/// exist. If `target` is a symbolic link, the file it points to is replaced
/// and the link stays. With `expected`, the file must still hold exactly
/// that just before the rename (the contents were made from it), or nothing
/// is written.
pub fn replace_file(
    ctx: &Context,
    target: &Path,
    contents: &[u8],
    shown: &str,
    expected: Option<&[u8]>,
) -> Result<(), ToolError> {
    let target = follow_links(ctx, target, shown)?;
    let what = || format!("cannot write {shown}");
    let (temp_path, mut temp_file) = create_temp_beside(&target, &ctx.call_id)
        .map_err(|err| ToolError::from_io(&err, what()))?;
    let written = temp_file
        .write_all(contents)
        .map_err(|err| ToolError::from_io(&err, what()))
        .and_then(|()| {
            drop(temp_file);
            match expected {
                Some(expected) if !still_holds(&target, expected) => {
                    Err(ToolError::failed(format!(
                        "{shown} changed while the edit was being made (another program or \
                         session wrote it); nothing was written. Read it again with fs.read and \
                         redo the edit"
                    )))
                }
                _ => Ok(()),
            }
        })
        .and_then(|()| {
            fs::rename(&temp_path, &target).map_err(|err| ToolError::from_io(&err, what()))
        });
    if written.is_err() {
        // Best effort: the error that matters is the one being returned.
        let _ = fs::remove_file(&temp_path);
    }
    written
}

/// Whether the file at `path` holds exactly `expected`.
fn still_holds(path: &Path, expected: &[u8]) -> bool {
    fs::metadata(path).is_ok_and(|meta| meta.len() == expected.len() as u64)
        && fs::read(path).is_ok_and(|now| now == expected)
}

/// The file that writing to `path` changes: `path` itself, or the end of the
/// chain of symbolic links starting there. Renaming over a link would turn
/// it into a plain file, so the rename must land on what it points to.
fn follow_links(ctx: &Context, path: &Path, shown: &str) -> Result<PathBuf, ToolError> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINK_HOPS {
        let is_link =
            fs::symlink_metadata(&current).is_ok_and(|meta| meta.file_type().is_symlink());
        if !is_link {
            return Ok(current);
        }
        let points_to = fs::read_link(&current)
            .map_err(|err| ToolError::from_io(&err, format!("cannot follow the link {shown}")))?;
        let folder = current.parent().unwrap_or(Path::new("/"));
        let joined = folder.join(&points_to);
        current = ctx.resolve(&joined.to_string_lossy()).map_err(|_| {
            ToolError::denied(format!(
                "{shown} is a symbolic link to {}, which is outside the workspace; only \
                 files inside it can be written",
                points_to.display()
            ))
        })?;
    }
    Err(ToolError::failed(format!(
        "cannot write {shown}: too many levels of symbolic links"
    )))
}

/// Creates a new, empty temporary file in the folder of `target`, named
/// `.NAME.capstan-tmp-TAG`.
fn create_temp_beside(target: &Path, call_id: &str) -> io::Result<(PathBuf, File)> {
    let folder = target.parent().unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map(OsStr::to_string_lossy)
        .unwrap_or_default();
    let tag = temp_tag(call_id);
    let mut attempt = 0;
    loop {
        let temp_name = match attempt {
            0 => format!(".{name}.capstan-tmp-{tag}"),
            n => format!(".{name}.capstan-tmp-{tag}-{n}"),
        };
        let temp_path = folder.join(temp_name);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp_path)
        {
            Ok(file) => return Ok((temp_path, file)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                attempt += 1;
                if attempt >= TEMP_NAME_ATTEMPTS {
                    return Err(err);
                }
            }
            Err(err) => return Err(err),
        }
    }
}

/// A tag for a temporary file name: the call id, kept to characters safe in
/// a file name, or the clock's nanoseconds when there is no call id.
fn temp_tag(call_id: &str) -> String {
    let safe: String = call_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(40)
        .collect();
    if !safe.is_empty() {
        return safe;
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos())
        .unwrap_or_default();
    format!("{nanos:09}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(dir: &Path) -> Context {
        Context {
            call_id: "c1".to_string(),
            workspace: Some(dir.to_path_buf()),
            ..Context::default()
        }
    }

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replaces_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.txt");
        fs::write(&target, "old").unwrap();
        replace_file(&ctx(dir.path()), &target, b"new", "a.txt", None).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(names_in(dir.path()), vec!["a.txt"]);
    }

    #[test]
    fn a_leftover_temporary_file_is_stepped_around() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.txt");
        let leftover = dir.path().join(".a.txt.capstan-tmp-c1");
        fs::write(&leftover, "stale").unwrap();
        replace_file(&ctx(dir.path()), &target, b"new", "a.txt", None).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(fs::read_to_string(&leftover).unwrap(), "stale");
    }

    #[test]
    fn a_failed_rename_removes_the_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        // A non-empty folder cannot be replaced by a file.
        let target = dir.path().join("sub");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("keep"), "x").unwrap();
        let err = replace_file(&ctx(dir.path()), &target, b"new", "sub", None).unwrap_err();
        assert!(err.message().starts_with("cannot write sub"), "{err}");
        assert_eq!(names_in(dir.path()), vec!["sub"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_stays_a_link_and_its_target_changes() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("docs")).unwrap();
        fs::write(dir.path().join("docs/real.md"), "old").unwrap();
        let link = dir.path().join("link.md");
        std::os::unix::fs::symlink("docs/real.md", &link).unwrap();
        replace_file(&ctx(dir.path()), &link, b"new", "link.md", None).unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("docs/real.md")).unwrap(),
            "new"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_out_of_the_workspace_is_denied() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("link.md");
        std::os::unix::fs::symlink(outside.path().join("x.md"), &link).unwrap();
        let err = replace_file(&ctx(dir.path()), &link, b"new", "link.md", None).unwrap_err();
        assert!(matches!(err, ToolError::Denied(_)), "{err:?}");
        assert!(!outside.path().join("x.md").exists());
    }

    #[test]
    fn an_edit_of_a_file_changed_since_it_was_read_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.txt");
        fs::write(&target, "changed by someone else").unwrap();
        let err =
            replace_file(&ctx(dir.path()), &target, b"new", "a.txt", Some(b"old")).unwrap_err();
        assert!(err.message().contains("changed while the edit"), "{err}");
        assert_eq!(
            fs::read_to_string(&target).unwrap(),
            "changed by someone else"
        );
        assert_eq!(names_in(dir.path()), vec!["a.txt"]);
    }

    #[test]
    fn a_held_lock_makes_a_second_writer_fail_and_goes_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.txt");
        let held = lock_file(&target, "a.txt").unwrap();
        let err = lock_file(&target, "a.txt").unwrap_err();
        assert!(err.message().contains("another capstan session"), "{err}");
        drop(held);
        assert!(names_in(dir.path()).is_empty());
        let _again = lock_file(&target, "a.txt").unwrap();
    }

    #[test]
    fn temporary_names_keep_only_safe_characters() {
        assert_eq!(temp_tag("call/../1 x"), "call1x");
        assert_eq!(temp_tag("").len(), 9);
    }
}
