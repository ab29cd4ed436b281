//! The folders commands get outside the workspace, all under one folder
//! of this process, `$TMPDIR/capstan-exec-PID-XXXXXX`:
//!
//! - a private temporary folder per command (its `TMPDIR`), removed when
//!   the command is done;
//! - a private `HOME` per holder (the model's commands, a plugin, a hook,
//!   an MCP server), writable, kept for the session so `git config
//!   --global` or a tool's cache lasts from one command to the next, and
//!   never the user's own home. The tool folders of the user's home that
//!   commands may read (`~/.cargo`, `~/.rustup`, ...) appear in it at the
//!   same places, as links, so tools still find their toolchains.
//!
//! The whole folder goes when capstan ends: at exit, on SIGTERM or SIGHUP,
//! on a second Ctrl-C ([`remove_area`]). Should capstan be killed outright,
//! the next capstan to run a command removes the folders of processes that
//! are gone: owned by this user, real folders (never followed links),
//! named for a process id that no longer runs.

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// What this process's folders are called, before the process id.
const PREFIX: &str = "capstan-exec-";

/// This process's folder, once a command needed it.
static AREA: Mutex<Option<Area>> = Mutex::new(None);

struct Area {
    root: PathBuf,
    /// Each holder's private home.
    homes: HashMap<String, PathBuf>,
}

fn area() -> MutexGuard<'static, Option<Area>> {
    AREA.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// This process's folder, made (after removing stale ones) if need be.
fn root(area: &mut Option<Area>) -> io::Result<&mut Area> {
    // Made again if removed behind our back (a cleaner of /tmp).
    if !area.as_ref().is_some_and(|area| area.root.is_dir()) {
        let parent = std::env::temp_dir();
        let pid = std::process::id();
        remove_stale(&parent, pid);
        let root = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{pid}-"))
            .tempdir_in(&parent)?
            .keep();
        *area = Some(Area {
            root,
            homes: HashMap::new(),
        });
    }
    area.as_mut()
        .ok_or_else(|| io::Error::other("the temporary area could not be made"))
}

/// A command's private temporary folder, removed when dropped.
pub fn command_folder() -> io::Result<tempfile::TempDir> {
    let mut area = area();
    let area = root(&mut area)?;
    tempfile::Builder::new()
        .prefix("tmp-")
        .tempdir_in(&area.root)
}

/// The private home of `holder` for this session, made on first use with
/// links to the folders of `user_home` among `readable` (the tool folders
/// commands may read).
pub fn home_for(
    holder: &str,
    user_home: Option<&Path>,
    readable: &[PathBuf],
) -> io::Result<PathBuf> {
    let mut area = area();
    let area = root(&mut area)?;
    if let Some(home) = area.homes.get(holder)
        && home.is_dir()
    {
        return Ok(home.clone());
    }
    let home = tempfile::Builder::new()
        .prefix("home-")
        .tempdir_in(&area.root)?
        .keep();
    // Linked before any command runs in it, so nothing here can have been
    // replaced by a link of a command's making.
    if let Some(user_home) = user_home {
        let canonical = user_home
            .canonicalize()
            .unwrap_or_else(|_| user_home.to_path_buf());
        for folder in readable {
            let inside = folder
                .strip_prefix(user_home)
                .or_else(|_| folder.strip_prefix(&canonical));
            if let Ok(inside) = inside
                && !inside.as_os_str().is_empty()
            {
                let _ = link_into(&home, inside, folder);
            }
        }
    }
    area.homes.insert(holder.to_string(), home.clone());
    Ok(home)
}

/// An empty, read-only file of this process's folder (which no command
/// can reach: each gets only its own folder in it), mounted over credential
/// files in a command's namespace. Made again if it is no longer an empty
/// plain file.
pub fn empty_file() -> io::Result<PathBuf> {
    let mut area = area();
    let area = root(&mut area)?;
    let path = area.root.join("empty");
    let fine = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() == 0);
    if !fine {
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_dir_all(&path);
        std::fs::File::create_new(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444))?;
    }
    Ok(path)
}

/// Makes `home/inside` a link to `target`, with the folders above it.
fn link_into(home: &Path, inside: &Path, target: &Path) -> io::Result<()> {
    let link = home.join(inside);
    if let Some(parent) = link.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::os::unix::fs::symlink(target, link)
}

/// Removes this process's folder, with every command folder and home in
/// it; what runs after may make a new one.
pub fn remove_area() {
    if let Some(area) = area().take() {
        remove_tree(&area.root);
    }
}

/// Removes the folders in `parent` left by capstan processes that are
/// gone: owned by this user, real folders, named `capstan-exec-PID-...`
/// for a `PID` other than `own_pid` that no longer runs.
fn remove_stale(parent: &Path, own_pid: u32) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let uid = effective_uid();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner_pid) else {
            continue;
        };
        if pid == own_pid || process_runs(pid) {
            continue;
        }
        let path = entry.path();
        // Never followed: a link, or a folder of someone else, stays.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.file_type().is_dir() && Some(meta.uid()) == uid {
            remove_tree(&path);
        }
    }
}

/// The process id in a folder name `capstan-exec-PID-XXXXXX`.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (pid, suffix) = rest.split_once('-')?;
    if suffix.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok().filter(|pid| *pid > 0)
}

/// Whether process `pid` runs (in this process's PID namespace).
fn process_runs(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// The user this process runs as (the owner of `/proc/self`).
fn effective_uid() -> Option<u32> {
    std::fs::metadata("/proc/self").ok().map(|meta| meta.uid())
}

/// Removes `path` and everything in it without following links; folders a
/// command left unreadable or unwritable (`chmod 0`) are opened up first.
fn remove_tree(path: &Path) {
    if std::fs::remove_dir_all(path).is_ok() || !path.exists() {
        return;
    }
    open_up(path);
    let _ = std::fs::remove_dir_all(path);
}

/// Gives the owner full access to every real folder under `path`.
fn open_up(path: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if !meta.file_type().is_dir() {
        return;
    }
    let _ = std::fs::set_permissions(
        path,
        std::fs::Permissions::from_mode(meta.permissions().mode() | 0o700),
    );
    if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.flatten() {
            open_up(&entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_with_a_process_id_are_taken() {
        assert_eq!(owner_pid("capstan-exec-123-abcDEF"), Some(123));
        for name in [
            "capstan-exec-abcDEF",
            "capstan-exec-12x-abc",
            "capstan-exec--abc",
            "capstan-exec-0-abc",
            "capstan-exec-123-",
            "other-123-abc",
        ] {
            assert_eq!(owner_pid(name), None, "{name}");
        }
    }

    #[test]
    fn stale_folders_go_and_live_ones_links_and_strangers_stay() {
        let parent = tempfile::tempdir().unwrap();
        let dead = dead_pid();
        let stale = parent.path().join(format!("capstan-exec-{dead}-aaaaaa"));
        std::fs::create_dir_all(stale.join("tmp-x/locked")).unwrap();
        std::fs::write(stale.join("tmp-x/locked/file"), "x").unwrap();
        std::fs::set_permissions(
            stale.join("tmp-x/locked"),
            std::fs::Permissions::from_mode(0o000),
        )
        .unwrap();
        let live = parent
            .path()
            .join(format!("capstan-exec-{}-bbbbbb", std::process::id()));
        std::fs::create_dir(&live).unwrap();
        let target = tempfile::tempdir().unwrap();
        std::fs::write(target.path().join("keep"), "x").unwrap();
        let link = parent.path().join(format!("capstan-exec-{dead}-cccccc"));
        std::os::unix::fs::symlink(target.path(), &link).unwrap();
        let unnamed = parent.path().join("capstan-exec-dddddd");
        std::fs::create_dir(&unnamed).unwrap();

        remove_stale(parent.path(), std::process::id());

        assert!(!stale.exists(), "a dead process's folder goes");
        assert!(live.exists(), "this process's folder stays");
        assert!(link.symlink_metadata().is_ok(), "a link stays");
        assert!(target.path().join("keep").exists(), "never followed");
        assert!(unnamed.exists(), "a folder without a process id stays");
    }

    #[test]
    fn a_home_links_the_readable_tool_folders_of_the_user_home() {
        let user = tempfile::tempdir().unwrap();
        let cargo = user.path().join(".cargo");
        let pip = user.path().join(".cache/pip");
        std::fs::create_dir_all(&cargo).unwrap();
        std::fs::create_dir_all(&pip).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let readable = vec![cargo.clone(), pip.clone(), elsewhere.path().to_path_buf()];
        let holder = "test holder links";
        let home = home_for(holder, Some(user.path()), &readable).unwrap();
        assert!(!home.starts_with(user.path()));
        assert_eq!(std::fs::read_link(home.join(".cargo")).unwrap(), cargo);
        assert_eq!(std::fs::read_link(home.join(".cache/pip")).unwrap(), pip);
        assert_eq!(home_for(holder, Some(user.path()), &[]).unwrap(), home);
        assert_ne!(home_for("another holder", None, &[]).unwrap(), home);
    }

    /// A process id that runs no process: a child that has been waited for.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }
}
