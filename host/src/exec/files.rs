//! What a command's files look like: the Landlock rules (an allow list:
//! nothing exists for the command but what is listed here) and the paths
//! kept read-only under a workspace write grant.
//!
//! Readable: the system folders programs and toolchains need (`/usr`,
//! `/bin`, `/lib*`, `/opt`, `/etc` but its credentials, `/sys`, the
//! command's own `/proc`), a few device files, the tool homes of `[exec]
//! read`, and the workspace. No terminal of the host's: a command in
//! namespaces gets pseudo-terminals of its own (a new devpts instance,
//! [`TERMINAL_DEVICES`], granted by the sandbox's init once it is
//! mounted); without namespaces it gets none, and `/dev/pts` stays out of
//! reach either way (another terminal of the user, or capstan's own). Writable: the workspace when the call may
//! write, the command's private temporary folder and the folders of
//! `[exec] write`. Everything else — the user's home and its `~/.ssh`,
//! other projects, capstan's own folders — is refused by the kernel.

use std::fs::{File, OpenOptions};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
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

/// Device files commands may read and write. `/dev/tty` is the
/// command's controlling terminal, and a command has none but one it
/// makes itself: its first process starts a session of its own.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// The pseudo-terminal devices a command in namespaces may read and write,
/// once its own devpts instance is mounted on `/dev/pts` (never the
/// host's, whose terminals are the user's).
pub(super) const TERMINAL_DEVICES: [&std::ffi::CStr; 2] = [c"/dev/pts", c"/dev/ptmx"];

/// Files of `/proc` a command run without namespaces may read: the host's
/// `/proc` would show every process of the machine (command lines
/// included), so only these system-wide figures are readable.
pub(super) const PROC_GLOBAL: &[&str] = &[
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/loadavg",
    "/proc/uptime",
    "/proc/version",
    "/proc/filesystems",
];

/// The folders one command may reach.
#[derive(Default)]
pub(super) struct FileGrants {
    /// Readable folders (and files).
    pub read: Vec<PathBuf>,
    /// Readable and writable folders.
    pub write: Vec<PathBuf>,
    /// Readable and writable entries already opened ([`writable_around`]).
    pub write_opened: Vec<OpenedRule>,
    /// Folders that may only be listed (their entries are granted one by
    /// one, all but credential files: see [`super::credentials`]).
    pub list_only: Vec<PathBuf>,
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

/// The rights on a device file (read, write, its `ioctl`s) that both
/// capstan and the kernel handle, for rules added to a ruleset directly.
pub(super) fn device_access() -> BitFlags<AccessFs> {
    AccessFs::from_file(ABI_USED) & handled_access()
}

/// The rights the ruleset handles: those of both the kernel and
/// [`ABI_USED`] (a rule may give no other).
fn handled_access() -> BitFlags<AccessFs> {
    static KERNEL_ABI: OnceLock<i32> = OnceLock::new();
    let kernel = ABI::from(*KERNEL_ABI.get_or_init(super::spawn::landlock_abi));
    AccessFs::from_all(kernel) & AccessFs::from_all(ABI_USED)
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
    let all = AccessFs::from_all(ABI_USED);
    for path in &grants.read {
        created = add(created, path, read)?;
    }
    for path in &grants.write {
        created = add(created, path, all)?;
    }
    for path in &grants.list_only {
        created = add(created, path, AccessFs::ReadDir.into())?;
    }
    for rule in &grants.write_opened {
        created = created
            .add_rule(PathBeneath::new(&rule.file, rule.access))
            .map_err(|e| FileRulesError::Rules(format!("{}: {e}", rule.path.display())))?;
    }
    let fd: Option<OwnedFd> = created.into();
    let fd = fd.ok_or(FileRulesError::Unsupported)?;
    // The system rules, on descriptors opened once, are added directly:
    // the crate would look at each descriptor's type again, one more system
    // call per rule and command. Only the rights the ruleset handles (those
    // of both the kernel and ABI_USED) may be given.
    let handled = handled_access();
    for rule in system_rules().iter() {
        let access = rule.access & handled;
        if access.is_empty() {
            continue;
        }
        super::spawn::add_path_rule(&fd, &rule.file, access.bits())
            .map_err(|e| FileRulesError::Rules(format!("{}: {e}", rule.path.display())))?;
    }
    Ok(fd)
}

/// A path of the rules, opened, with the rights it gets.
pub(super) struct OpenedRule {
    path: PathBuf,
    file: File,
    access: BitFlags<AccessFs>,
}

/// Opens `path` (`O_PATH`) for a rule granting `access`, narrowed to the
/// rights of a file when it is not a folder; `None` when it does not exist.
fn open_rule(path: &Path, access: BitFlags<AccessFs>) -> Option<OpenedRule> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    let is_dir = file.metadata().ok()?.is_dir();
    let access = if is_dir {
        access
    } else {
        access & AccessFs::from_file(ABI_USED)
    };
    Some(OpenedRule {
        path: path.to_path_buf(),
        file,
        access,
    })
}

/// The rules every command gets — the system folders, `/etc` but its
/// credentials, the devices — opened once per process and again whenever
/// `/`, `/etc` or an `/etc` folder listed entry by entry changes (an entry
/// added, removed or replaced: a rule holds the file it was opened on, so a
/// file replaced by a rename would otherwise vanish for commands).
fn system_rules() -> Arc<Vec<OpenedRule>> {
    static CACHE: Mutex<Option<SystemRules>> = Mutex::new(None);
    let stamps = listed_folders_stamps();
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((seen, rules)) = cache.as_ref()
        && *seen == stamps
    {
        return rules.clone();
    }
    let read = AccessFs::from_read(ABI_USED);
    let file_rw = AccessFs::from_file(ABI_USED);
    let mut rules = Vec::new();
    for path in system_read() {
        rules.extend(open_rule(&path, read));
    }
    for device in DEVICES {
        rules.extend(open_rule(Path::new(device), file_rw));
    }
    let rules = Arc::new(rules);
    *cache = Some((stamps, rules.clone()));
    rules
}

/// The system rules, and the stamps of the folders they were listed from.
type SystemRules = (Vec<Stamp>, Arc<Vec<OpenedRule>>);

/// What identifies a folder's listing: its inode and change times.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp(Option<(u64, u64, i64, i64, i64, i64)>);

/// The stamps of the folders whose listing the system rules depend on.
fn listed_folders_stamps() -> Vec<Stamp> {
    let mut folders = vec![PathBuf::from("/"), PathBuf::from("/etc")];
    for hidden in ETC_HIDDEN {
        if let Some((parent, _)) = hidden.rsplit_once('/') {
            folders.push(Path::new("/etc").join(parent));
        }
    }
    folders
        .iter()
        .map(|folder| {
            Stamp(std::fs::metadata(folder).ok().map(|m| {
                (
                    m.dev(),
                    m.ino(),
                    m.mtime(),
                    m.mtime_nsec(),
                    m.ctime(),
                    m.ctime_nsec(),
                )
            }))
        })
        .collect()
}

/// Adds a rule for `path` if it exists (a missing system folder or device
/// is simply not there for the command either).
fn add(
    created: landlock::RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<landlock::RulesetCreated, FileRulesError> {
    let Some(rule) = open_rule(path, access) else {
        return Ok(created);
    };
    created
        .add_rule(PathBeneath::new(&rule.file, rule.access))
        .map_err(|e| FileRulesError::Rules(format!("{}: {e}", path.display())))
}

/// The system paths commands read: [`SYSTEM_READ`] and every entry of
/// `/etc` but [`ETC_HIDDEN`] (and their subfolders' hidden entries).
fn system_read() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
    paths.extend(listed_except(Path::new("/etc"), ""));
    paths
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

/// The workspace (canonical) writable but for its `protected` paths, for a
/// command without a mount namespace, where they cannot be mounted
/// read-only: Landlock grants a folder's rights to everything beneath it,
/// so the workspace and each folder holding a protected path stay
/// read-only (nothing can be created, removed or renamed directly in them)
/// and every other entry in them is writable, whole. Entries are opened
/// beneath the workspace without following any link, so none can lead a
/// write grant out of it.
pub(super) fn writable_around(workspace: &Path, protected: &[PathBuf]) -> Vec<OpenedRule> {
    let mut holders: Vec<PathBuf> = Vec::new();
    for path in protected {
        for ancestor in path.ancestors().skip(1) {
            if ancestor.starts_with(workspace) && !holders.iter().any(|h| h == ancestor) {
                holders.push(ancestor.to_path_buf());
            }
        }
    }
    let Ok(root) = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(workspace)
    else {
        return Vec::new();
    };
    let all = AccessFs::from_all(ABI_USED);
    let mut rules = Vec::new();
    for holder in &holders {
        let Ok(entries) = std::fs::read_dir(holder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if holders.contains(&path) || protected.contains(&path) {
                continue;
            }
            let Ok(relative) = path.strip_prefix(workspace) else {
                continue;
            };
            let Some(file) = super::spawn::open_beneath(&root, relative) else {
                continue;
            };
            let Ok(meta) = file.metadata() else {
                continue;
            };
            let access = if meta.is_dir() {
                all
            } else if meta.is_file() {
                all & AccessFs::from_file(ABI_USED)
            } else {
                continue;
            };
            rules.push(OpenedRule { path, file, access });
        }
    }
    rules
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
}
