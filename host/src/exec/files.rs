//! What a command's files look like: the Landlock rules (an allow list:
//! nothing exists for the command but what is listed here) and the paths
//! kept read-only under a workspace write grant.
//!
//! Readable: the system folders programs and toolchains need (`/usr`,
//! `/bin`, `/lib*`, `/opt`, `/etc` but its credentials, `/sys`, the
//! command's own `/proc`), a few device files, the tool homes of `[exec]
//! read`, and the workspace. Writable: the workspace when the call may
//! write, the command's private temporary folder and the folders of
//! `[exec] write`. Everything else — the user's home and its `~/.ssh`,
//! other projects, capstan's own folders — is refused by the kernel.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};

/// The newest Landlock ABI whose rights capstan asks for; older kernels
/// get what they support (every ABI refuses everything not listed).
const ABI_USED: ABI = ABI::V6;

/// System folders commands may read, where they exist.
const SYSTEM_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/sys", "/nix",
];

/// Entries of `/etc` commands may not read: credentials and keys.
const ETC_HIDDEN: &[&str] = &[
    "shadow",
    "shadow-",
    "gshadow",
    "gshadow-",
    "sudoers",
    "sudoers.d",
    "ssh",
    "ssl/private",
    "security/opasswd",
];

/// Device files commands may read and write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

// The paths of the workspace kept read-only when a command may write it:
// one list with the plugins' write grants. Only those that exist are
// protected here.
use crate::grants::fs::PROTECTED;

/// The folders one command may reach.
#[derive(Debug, Clone, Default)]
pub(super) struct FileGrants {
    /// Readable folders (and files).
    pub read: Vec<PathBuf>,
    /// Readable and writable folders.
    pub write: Vec<PathBuf>,
}

/// Landlock could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum FileRulesError {
    /// The kernel has no Landlock.
    #[error("this kernel does not enforce Landlock")]
    Unsupported,
    /// A rule could not be made.
    #[error("cannot build the Landlock rules: {0}")]
    Rules(String),
}

/// The read rights, for folders.
pub(super) fn read_access() -> BitFlags<AccessFs> {
    AccessFs::from_read(ABI_USED)
}

/// Builds the ruleset for `grants`: the system folders readable, the
/// devices usable, `grants` as given; signals and abstract Unix sockets
/// scoped to the command's own processes where the kernel can.
pub(super) fn ruleset(grants: &FileGrants) -> Result<OwnedFd, FileRulesError> {
    let error = |e: landlock::RulesetError| FileRulesError::Rules(e.to_string());
    let mut created = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(ABI_USED))
        .map_err(error)?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(error)?
        .create()
        .map_err(error)?;
    let read = AccessFs::from_read(ABI_USED);
    let file_rw = AccessFs::from_file(ABI_USED);
    let all = AccessFs::from_all(ABI_USED);
    for path in system_read() {
        created = add(created, path, read)?;
    }
    for device in DEVICES {
        created = add(created, Path::new(device), file_rw)?;
    }
    for path in &grants.read {
        created = add(created, path, read)?;
    }
    for path in &grants.write {
        created = add(created, path, all)?;
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or(FileRulesError::Unsupported)
}

/// Adds a rule for `path` if it exists (a missing system folder or device
/// is simply not there for the command either).
fn add(
    created: landlock::RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<landlock::RulesetCreated, FileRulesError> {
    let Ok(fd) = PathFd::new(path) else {
        return Ok(created);
    };
    let access = if path.is_dir() {
        access
    } else {
        access & AccessFs::from_file(ABI_USED)
    };
    created
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|e| FileRulesError::Rules(format!("{}: {e}", path.display())))
}

/// The system paths commands read: [`SYSTEM_READ`] and every entry of
/// `/etc` but [`ETC_HIDDEN`] (and their subfolders' hidden entries). Listed
/// once per process.
fn system_read() -> &'static [PathBuf] {
    static PATHS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    PATHS.get_or_init(|| {
        let mut paths: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
        paths.extend(listed_except(Path::new("/etc"), ""));
        paths
    })
}

/// The entries of `dir` (named relative to `/etc` as `prefix`) but the
/// hidden ones; a folder holding a hidden entry is listed entry by entry.
fn listed_except(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let relative = format!("{prefix}{name}");
        if ETC_HIDDEN.contains(&relative.as_str()) {
            continue;
        }
        let holds_hidden = ETC_HIDDEN
            .iter()
            .any(|hidden| hidden.starts_with(&format!("{relative}/")));
        if holds_hidden {
            paths.extend(listed_except(&entry.path(), &format!("{relative}/")));
        } else {
            paths.push(entry.path());
        }
    }
    paths
}

/// The protected paths that exist in `workspace` (canonical), resolved: a
/// protected name that is a link to elsewhere in the workspace protects
/// what it points to (a link out of the workspace leads nowhere writable).
pub(super) fn protected_in(workspace: &Path) -> Vec<PathBuf> {
    PROTECTED
        .iter()
        .filter_map(|name| workspace.join(name).canonicalize().ok())
        .filter(|path| path.starts_with(workspace) && path != workspace)
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn etc_credentials_are_not_listed() {
        let listed = system_read();
        assert!(listed.iter().any(|p| p == Path::new("/etc/passwd")));
        for hidden in ["/etc/shadow", "/etc/ssh", "/etc/sudoers"] {
            assert!(!listed.iter().any(|p| p == Path::new(hidden)), "{hidden}");
        }
    }

    #[test]
    fn only_existing_protected_paths_are_returned() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir(ws.join(".git")).unwrap();
        std::fs::write(ws.join(".envrc"), "").unwrap();
        std::fs::create_dir(ws.join("real-hooks")).unwrap();
        std::os::unix::fs::symlink(ws.join("real-hooks"), ws.join(".husky")).unwrap();
        let found = protected_in(&ws);
        assert_eq!(
            found,
            [ws.join(".git"), ws.join(".envrc"), ws.join("real-hooks")]
        );
    }
}
