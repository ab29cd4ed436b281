//! File-system grants: which folders a plugin can see, read-only or
//! read-write.
//!
//! A granted folder becomes a WASI preopen and nothing else exists for the
//! plugin. Paths are resolved and canonicalised when the grant is made, and
//! wasmtime-wasi resolves every guest path beneath the preopen with cap-std,
//! so neither `..` nor a symbolic link can lead outside it. A read-only grant
//! is enforced by the preopen's permissions, whatever the plugin attempts.
//!
//! Only regular files and folders can be opened ([`openable`]). A named
//! pipe, a socket or a device inside a granted folder is refused before it
//! is opened: opening a pipe waits for a writer, reading a device may wait
//! for ever, and file operations run on the thread serving the call, where
//! no deadline could end them.
//!
//! Some folders are never granted, whatever a manifest asks and whatever
//! the user answers, because the path is checked once resolved (symbolic
//! links and `/proc` magic links such as `/proc/self/root` followed): the
//! root of the file system, and capstan's own folders ([`OwnFolders`]: its
//! data with the lockfile, its settings, its compile cache, its compilers)
//! together with any folder that encloses one of them — a preopen cannot
//! leave a sub-folder out, so granting `~` would hand the plugin capstan's
//! lockfile and compiled components. The plugin's own data folder, inside
//! capstan's, is the one exception.
//!
//! An absolute folder is shown at consent as the folder it resolves to,
//! and the lockfile records that folder ([`ConsentedFolders`]): at each
//! use the path is resolved again, and a path that now resolves elsewhere
//! (a symbolic link on its way was changed) is refused
//! ([`GrantError::Moved`]) rather than followed. The folder is opened by
//! its resolved path, checked once more right before it is opened.

use std::path::{Path, PathBuf};

use wasmtime_wasi::p2::bindings::filesystem::types::DescriptorType;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

/// Whether a path whose stat says `kind` may be opened: regular files,
/// folders and (unresolved) links yes; otherwise why not, in words.
pub fn openable(kind: DescriptorType) -> Result<(), &'static str> {
    match kind {
        DescriptorType::RegularFile | DescriptorType::Directory | DescriptorType::SymbolicLink => {
            Ok(())
        }
        DescriptorType::Fifo => Err("a named pipe (FIFO)"),
        DescriptorType::Socket => Err("a socket"),
        DescriptorType::CharacterDevice => Err("a character device"),
        DescriptorType::BlockDevice => Err("a block device"),
        // How wasmtime-wasi reports a named pipe or a socket.
        DescriptorType::Unknown => Err("a special file (such as a named pipe or a socket)"),
    }
}

/// Paths kept read-only under every write grant, for plugins' components
/// (in each folder granted read-write) and native commands (in the
/// workspace, see [`crate::exec`]) alike: files that make code run later,
/// outside every sandbox — git hooks and config, capstan's and Claude
/// Code's project settings and hooks, editor tasks, direnv, commit hooks.
/// A component's write, create, rename or delete there is refused
/// ([`protected_path`]); an `exec` grant may name some of them in `writes`
/// for its program (the git plugin's `.git`).
pub const PROTECTED: &[&str] = &[
    ".git",
    ".gitmodules",
    ".capstan",
    ".claude",
    ".mcp.json",
    ".vscode",
    ".idea",
    ".envrc",
    ".husky",
    ".pre-commit-config.yaml",
];

/// The protected path ([`PROTECTED`]) that `target` — a path on the host,
/// absolute — is or lies in, under one of the writable folders `roots`
/// (given as their real paths), if any: a protected name at any depth
/// (`vendor/lib/.git/config` as much as `.git/config`), or a folder git
/// would take for a repository ([`is_git_dir`]: the target of a `gitdir:`
/// file, a bare repository). Both the path as written and the path it
/// resolves to (symbolic links followed as far as it exists) are checked,
/// so neither `..` nor a link planted in the folder leads into a `.git`
/// unnoticed.
pub fn protected_path(target: &Path, roots: &[PathBuf]) -> Option<(&'static str, PathBuf)> {
    let lexical = normalized(target);
    let resolved = resolve_through_links(&lexical, 16);
    for candidate in [&lexical, &resolved] {
        for root in roots {
            let Ok(below) = candidate.strip_prefix(root) else {
                continue;
            };
            let mut at = root.clone();
            for component in below.components() {
                let std::path::Component::Normal(name) = component else {
                    break;
                };
                at.push(name);
                if let Some(name) = name.to_str().and_then(protected_name) {
                    return Some((name, at));
                }
                if is_git_dir(&at) {
                    return Some((".git", at));
                }
            }
        }
    }
    None
}

/// The entry of [`PROTECTED`] that `name` is, if any.
pub fn protected_name(name: &str) -> Option<&'static str> {
    PROTECTED.iter().find(|p| **p == name).copied()
}

/// Whether git would take the folder `path` for a repository's own folder
/// (what a `.git` folder is, what a `gitdir:` file points to, a bare
/// repository): a `HEAD` file beside `objects` and `refs` folders, or
/// beside a `commondir` file (a linked worktree's). Its hooks and config
/// run code as much as a `.git` folder's do.
pub fn is_git_dir(path: &Path) -> bool {
    let has = |name: &str| std::fs::symlink_metadata(path.join(name)).ok();
    let Some(head) = has("HEAD") else {
        return false;
    };
    if head.is_dir() {
        return false;
    }
    has("commondir").is_some_and(|m| m.is_file())
        || (has("objects").is_some_and(|m| m.is_dir()) && has("refs").is_some_and(|m| m.is_dir()))
}

/// `path` with `.` and `..` taken out, lexically.
fn normalized(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `path` with its longest existing ancestor resolved (symbolic links
/// followed) and the rest appended as written; a link that leads nowhere
/// yet is followed (at most `links_left` times) to where it would create
/// its target.
fn resolve_through_links(path: &Path, links_left: u32) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for name in rest.iter().rev() {
                out.push(name);
            }
            return out;
        }
        let parent = existing.parent().map(Path::to_path_buf);
        if links_left > 0
            && let Ok(target) = std::fs::read_link(&existing)
            && let Some(parent) = &parent
        {
            let mut followed = normalized(&parent.join(target));
            for name in rest.iter().rev() {
                followed.push(name);
            }
            return resolve_through_links(&followed, links_left - 1);
        }
        match (
            existing.file_name().map(std::ffi::OsStr::to_os_string),
            parent,
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// How a folder may be used: `read` or `read-write`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum Access {
    /// Read files and list folders.
    Read,
    /// Also create, change, rename and delete.
    ReadWrite,
}

impl TryFrom<String> for Access {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        match text.as_str() {
            "read" => Ok(Self::Read),
            "read-write" => Ok(Self::ReadWrite),
            other => Err(format!(
                "\"{other}\" is not an access; use \"read\" or \"read-write\""
            )),
        }
    }
}

/// A folder as a manifest requests it: `$WORKSPACE`, `$PLUGIN_DATA` (the
/// plugin's own data folder) or an absolute path. Nothing else: `$HOME`,
/// `~` and relative paths are refused, since what they mean depends on who
/// runs the plugin and from where ([`FsRequest::validate`]).
///
/// Written `{ path = "$WORKSPACE", access = "read" }` in the manifest and
/// the lockfile alike; `access` is `read` unless it says `read-write`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table such as { path = \"$WORKSPACE\", access = \"read\" }"
)]
pub struct FsRequest {
    /// The folder.
    pub path: String,
    /// `read` or `read-write`.
    #[serde(default = "read_only")]
    pub access: Access,
}

fn read_only() -> Access {
    Access::Read
}

impl super::Capability for FsRequest {
    const WORD: &'static str = "fs";
    const ALIASES: &'static [&'static str] = &["files"];
    const LABEL: &'static str = "files";
    const CONSENT_RANK: u8 = 2;
    const SAY_NONE: bool = true;
    const EXAMPLE: &'static str = "{ path = \"$WORKSPACE\", access = \"read\" }";

    /// The folder as written, whatever its access.
    fn key(&self) -> String {
        self.path.clone()
    }

    fn words(&self) -> String {
        self.describe()
    }

    fn is_within(&self, granted: &Self) -> bool {
        FsRequest::is_within(self, granted)
    }

    fn check_value(value: &str) -> Result<(), String> {
        FsRequest::parse(value, Access::Read)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    fn validate(&self) -> Result<(), super::EntryError> {
        FsRequest::validate(self).map_err(|e| super::EntryError::field("path", e.to_string()))
    }
}

/// `, which is REAL` when the folder `request` names resolved, for the
/// consent text (see `Capabilities::resolve_folders`), to another folder
/// than it says.
pub fn resolved_note_for_consent(request: &FsRequest, resolved: &[(String, PathBuf)]) -> String {
    match resolved.iter().find(|(path, _)| *path == request.path) {
        Some((_, real)) if Path::new(&request.path) != real => {
            format!(", which is {}", real.display())
        }
        _ => String::new(),
    }
}

/// Each absolute folder a plugin was granted, as written, and the folder
/// it resolved to when the user agreed (the lockfile's `folders`).
pub type ConsentedFolders = std::collections::BTreeMap<String, String>;

/// Folders resolved for consent (see `Capabilities::resolve_folders`: each
/// path as written with the folder it is) as the lockfile records them.
pub fn consented_folders(resolved: &[(String, PathBuf)]) -> Result<ConsentedFolders, GrantError> {
    resolved
        .iter()
        .map(|(path, real)| {
            real.to_str()
                .map(|real| (path.clone(), real.to_string()))
                .ok_or_else(|| GrantError::NotUtf8 { path: real.clone() })
        })
        .collect()
}

/// One folder a plugin may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsGrant {
    host_path: PathBuf,
    guest_path: String,
    access: Access,
}

/// A grant could not be made.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    /// The folder does not exist or cannot be resolved.
    #[error("cannot grant access to {}: {}", path.display(), explain(source))]
    Unresolvable {
        /// The path asked for.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The path is not a folder.
    #[error("cannot grant access to {}: it is not a folder", path.display())]
    NotAFolder {
        /// The path asked for.
        path: PathBuf,
    },
    /// The path cannot be shown to a plugin as text.
    #[error("cannot grant access to {}: its path is not valid UTF-8", path.display())]
    NotUtf8 {
        /// The path asked for.
        path: PathBuf,
    },
    /// A requested path is not one a plugin may ask for.
    #[error("cannot grant access to `{path}`: {reason}")]
    InvalidRequest {
        /// The path as written.
        path: String,
        /// Why, and what to write instead.
        reason: String,
    },
    /// The plugin's data folder could not be created.
    #[error("cannot create the plugin data folder {}: {}", path.display(), explain(source))]
    CreateDataFolder {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The folder, once resolved, is the root of the file system.
    #[error(
        "cannot grant access to {}: it is the root of the file system{}; name the folder the plugin needs",
        path.display(),
        resolved_note(path, Path::new("/"))
    )]
    Root {
        /// The path asked for.
        path: PathBuf,
    },
    /// The folder encloses one of capstan's own folders.
    #[error(
        "cannot grant access to {}{}: it holds {what} ({}), which no plugin may reach, and a granted folder cannot leave a folder inside it out; run capstan in a project folder instead (cd into it, or pass --workspace DIR), or keep capstan's folders elsewhere (set CAPSTAN_HOME to a folder outside it)",
        path.display(),
        resolved_note(path, resolved),
        own.display()
    )]
    EnclosesOwnFolder {
        /// The path asked for.
        path: PathBuf,
        /// The folder it resolves to.
        resolved: PathBuf,
        /// capstan's folder inside it.
        own: PathBuf,
        /// What that folder is.
        what: &'static str,
    },
    /// The folder is inside one of capstan's own folders.
    #[error(
        "cannot grant access to {}{}: it is inside {what} ({}), which no plugin may reach; grant a folder outside it",
        path.display(),
        resolved_note(path, resolved),
        own.display()
    )]
    InsideOwnFolder {
        /// The path asked for.
        path: PathBuf,
        /// The folder it resolves to.
        resolved: PathBuf,
        /// capstan's folder around it.
        own: PathBuf,
        /// What that folder is.
        what: &'static str,
    },
    /// The folder resolves to another folder than the one the user agreed
    /// to: a symbolic link on its way was changed since.
    #[error(
        "cannot grant access to {path}: it now resolves to {}, but you agreed to {} (a symbolic link on its way was changed since), so it is not given to the plugin",
        now.display(),
        consented.display()
    )]
    Moved {
        /// The path as the manifest writes it.
        path: String,
        /// The folder it resolved to when the user agreed.
        consented: PathBuf,
        /// The folder it resolves to now.
        now: PathBuf,
    },
    /// An absolute folder has no recorded resolution to hold it to.
    #[error(
        "cannot grant access to {path}: the lockfile does not record which folder you agreed to"
    )]
    NotConsented {
        /// The path as the manifest writes it.
        path: String,
    },
    /// The sandbox could not open the folder.
    #[error("cannot open {} for the sandbox: {reason}", path.display())]
    Preopen {
        /// The folder.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// ` (which is R)` when `path` resolves to another path `resolved`.
fn resolved_note(path: &Path, resolved: &Path) -> String {
    if path == resolved {
        String::new()
    } else {
        format!(" (which is {})", resolved.display())
    }
}

/// capstan's own folders, which no grant may reach: a granted folder may
/// neither be inside one nor enclose one.
#[derive(Debug, Clone, Default)]
pub struct OwnFolders {
    folders: Vec<(PathBuf, &'static str)>,
}

impl OwnFolders {
    /// The folders of `home`: data, settings, cache and compilers.
    pub fn of(home: &crate::home::Home) -> Self {
        Self {
            folders: home.own_folders(),
        }
    }

    /// Checks that the resolved folder `resolved` (asked for as `path`)
    /// neither encloses nor lies inside one of capstan's folders; a folder
    /// inside `exception` (the plugin's own data folder) may lie inside
    /// capstan's data folder.
    pub fn check(
        &self,
        path: &Path,
        resolved: &Path,
        exception: Option<&Path>,
    ) -> Result<(), GrantError> {
        let exception = exception.map(resolve_existing);
        for (folder, what) in &self.folders {
            let own = resolve_existing(folder);
            if own.starts_with(resolved) {
                return Err(GrantError::EnclosesOwnFolder {
                    path: path.to_path_buf(),
                    resolved: resolved.to_path_buf(),
                    own,
                    what,
                });
            }
            let excepted = exception.as_ref().is_some_and(|e| resolved.starts_with(e));
            if resolved.starts_with(&own) && !excepted {
                return Err(GrantError::InsideOwnFolder {
                    path: path.to_path_buf(),
                    resolved: resolved.to_path_buf(),
                    own,
                    what,
                });
            }
        }
        Ok(())
    }
}

/// `path` with symbolic links resolved as far as it exists, the rest
/// appended: a folder not made yet is still compared where it will be.
fn resolve_existing(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut missing = Vec::new();
    let mut existing = absolute.as_path();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return missing
                .iter()
                .rev()
                .fold(real, |acc: PathBuf, part| acc.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

/// Says why a path could not be resolved, in words rather than an errno.
fn explain(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::NotFound => "no such folder".to_string(),
        std::io::ErrorKind::PermissionDenied => {
            "permission denied (capstan itself may not open it)".to_string()
        }
        _ => {
            let text = err.to_string();
            match text.find(" (os error") {
                Some(end) => text[..end].to_string(),
                None => text,
            }
        }
    }
}

/// The workspace, as a manifest writes it.
pub const WORKSPACE: &str = "$WORKSPACE";
/// The plugin's own data folder, as a manifest writes it.
pub const PLUGIN_DATA: &str = "$PLUGIN_DATA";

impl FsRequest {
    /// A request for `path` with `access`, checked.
    pub fn parse(path: &str, access: Access) -> Result<Self, GrantError> {
        let request = Self {
            path: path.to_string(),
            access,
        };
        request.validate()?;
        Ok(request)
    }

    /// Checks that the path is `$WORKSPACE`, `$PLUGIN_DATA` or an absolute
    /// path without `..`, and not the root of the file system.
    pub fn validate(&self) -> Result<(), GrantError> {
        check_path(&self.path).map_err(|reason| GrantError::InvalidRequest {
            path: self.path.clone(),
            reason,
        })
    }

    /// The request in plain words: `the workspace (read-only)`.
    pub fn describe(&self) -> String {
        let what = match self.path.as_str() {
            WORKSPACE => "the workspace".to_string(),
            PLUGIN_DATA => "its own data folder".to_string(),
            other => other.to_string(),
        };
        let access = match self.access {
            Access::Read => "read-only",
            Access::ReadWrite => "read-write",
        };
        format!("{what} ({access})")
    }

    /// Whether a grant of `granted` covers this request: the same folder
    /// (or, for absolute paths, a folder inside it) with enough access.
    pub fn is_within(&self, granted: &FsRequest) -> bool {
        let access_ok = self.access == Access::Read || granted.access == Access::ReadWrite;
        let inside = if self.path.starts_with('$') || granted.path.starts_with('$') {
            self.path == granted.path
        } else {
            Path::new(&self.path).starts_with(Path::new(&granted.path))
        };
        access_ok && inside
    }

    /// Resolves the request to a folder: `$WORKSPACE` is `workspace`,
    /// `$PLUGIN_DATA` is `plugin_data` (created if missing), and an absolute
    /// path is itself, which must exist. None may reach capstan's folders
    /// `own`, but the plugin's data folder may lie inside them.
    pub fn resolve(
        &self,
        workspace: &Path,
        plugin_data: &Path,
        own: &OwnFolders,
    ) -> Result<FsGrant, GrantError> {
        self.validate()?;
        match self.path.as_str() {
            WORKSPACE => FsGrant::new(workspace, self.access, own),
            PLUGIN_DATA => {
                std::fs::create_dir_all(plugin_data).map_err(|source| {
                    GrantError::CreateDataFolder {
                        path: plugin_data.to_path_buf(),
                        source,
                    }
                })?;
                FsGrant::checked(plugin_data, self.access, own, Some(plugin_data))
            }
            other => FsGrant::new(Path::new(other), self.access, own),
        }
    }

    /// [`FsRequest::resolve`], holding an absolute folder to the folder it
    /// resolved to when the user agreed (`consented`, by the path as
    /// written): one that resolves elsewhere now is refused
    /// ([`GrantError::Moved`]), and one with no recorded folder too.
    pub fn resolve_as_consented(
        &self,
        workspace: &Path,
        plugin_data: &Path,
        own: &OwnFolders,
        consented: &ConsentedFolders,
    ) -> Result<FsGrant, GrantError> {
        let grant = self.resolve(workspace, plugin_data, own)?;
        if self.path.starts_with('$') {
            return Ok(grant);
        }
        let Some(agreed) = consented.get(&self.path) else {
            return Err(GrantError::NotConsented {
                path: self.path.clone(),
            });
        };
        if grant.host_path != Path::new(agreed) {
            return Err(GrantError::Moved {
                path: self.path.clone(),
                consented: PathBuf::from(agreed),
                now: grant.host_path,
            });
        }
        Ok(grant)
    }

    /// The folder an absolute path resolves to now (symbolic links and
    /// `/proc` magic links followed), checked against the same refusals as
    /// a grant: for the consent text, so the user agrees to the folder
    /// itself. `None` for `$WORKSPACE` and `$PLUGIN_DATA`, which are
    /// resolved at each call.
    pub fn resolve_for_consent(&self, own: &OwnFolders) -> Result<Option<PathBuf>, GrantError> {
        self.validate()?;
        if self.path.starts_with('$') {
            return Ok(None);
        }
        FsGrant::new(Path::new(&self.path), self.access, own).map(|g| Some(g.host_path))
    }
}

/// Why `path` cannot be requested, if it cannot.
fn check_path(path: &str) -> Result<(), String> {
    if path == WORKSPACE || path == PLUGIN_DATA {
        return Ok(());
    }
    if path.starts_with('~') || path.starts_with("$HOME") {
        return Err(
            "the home folder cannot be granted; ask for `$WORKSPACE`, `$PLUGIN_DATA` (the plugin's own data folder) or a specific absolute folder".to_string(),
        );
    }
    if let Some(var) = path.strip_prefix('$') {
        return Err(format!(
            "`${var}` is not a known folder; use `$WORKSPACE`, `$PLUGIN_DATA` or an absolute path"
        ));
    }
    let as_path = Path::new(path);
    if !as_path.is_absolute() {
        return Err(
            "a relative path means something different wherever capstan runs; use `$WORKSPACE`, `$PLUGIN_DATA` or an absolute path".to_string(),
        );
    }
    if as_path
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err("the path must not contain `..`; write the folder it means".to_string());
    }
    if as_path.parent().is_none() {
        return Err(
            "the root of the file system cannot be granted; name the folder the plugin needs"
                .to_string(),
        );
    }
    if ["/proc", "/dev"].iter().any(|p| as_path.starts_with(p)) {
        return Err(
            "a path under /proc or /dev names a different folder for each process (/proc/self/root is the whole file system); name the folder the plugin needs"
                .to_string(),
        );
    }
    Ok(())
}

impl FsGrant {
    /// Grants `path` (resolved now, symbolic links included) with `access`.
    /// The plugin sees the folder at its real absolute path, so paths a user
    /// or the model writes mean the same inside and outside the sandbox.
    /// The resolved folder may not be the root of the file system, nor
    /// enclose or lie inside one of capstan's folders `own`.
    pub fn new(path: &Path, access: Access, own: &OwnFolders) -> Result<Self, GrantError> {
        Self::checked(path, access, own, None)
    }

    /// Read-only access to an installed plugin's own store folder `path`,
    /// which lies inside capstan's data folder: the second exception
    /// beside a plugin's data folder, for the files a skill's text names
    /// (`${CLAUDE_PLUGIN_ROOT}/...`). Never writable, and like every grant
    /// it may not enclose one of capstan's folders.
    pub fn installed_files(path: &Path, own: &OwnFolders) -> Result<Self, GrantError> {
        Self::checked(path, Access::Read, own, Some(path))
    }

    /// [`FsGrant::new`], letting a folder inside `exception` lie inside
    /// capstan's folders.
    fn checked(
        path: &Path,
        access: Access,
        own: &OwnFolders,
        exception: Option<&Path>,
    ) -> Result<Self, GrantError> {
        let host_path = path
            .canonicalize()
            .map_err(|source| GrantError::Unresolvable {
                path: path.to_path_buf(),
                source,
            })?;
        if host_path.parent().is_none() {
            return Err(GrantError::Root {
                path: path.to_path_buf(),
            });
        }
        own.check(path, &host_path, exception)?;
        if !host_path.is_dir() {
            return Err(GrantError::NotAFolder {
                path: path.to_path_buf(),
            });
        }
        let guest_path = host_path
            .to_str()
            .ok_or_else(|| GrantError::NotUtf8 {
                path: path.to_path_buf(),
            })?
            .to_string();
        Ok(Self {
            host_path,
            guest_path,
            access,
        })
    }

    /// The folder on the host.
    pub fn host_path(&self) -> &Path {
        &self.host_path
    }

    /// The folder as the plugin sees it.
    pub fn guest_path(&self) -> &str {
        &self.guest_path
    }

    /// How it may be used.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Whether a host path lies inside this grant and the access suffices.
    /// The sandbox enforces this by construction; the check lets the host
    /// explain a decision before running anything.
    pub fn permits(&self, path: &Path, access: Access) -> bool {
        let inside = path.starts_with(&self.host_path);
        inside && (access == Access::Read || self.access == Access::ReadWrite)
    }

    /// Adds the folder to a WASI context as a preopen. The folder is opened
    /// by its resolved path, which must still be itself: a link put in its
    /// place since it was resolved is refused, not followed.
    pub fn apply(&self, wasi: &mut WasiCtxBuilder) -> Result<(), GrantError> {
        match self.host_path.canonicalize() {
            Ok(now) if now == self.host_path => {}
            Ok(now) => {
                return Err(GrantError::Moved {
                    path: self.host_path.display().to_string(),
                    consented: self.host_path.clone(),
                    now,
                });
            }
            Err(source) => {
                return Err(GrantError::Unresolvable {
                    path: self.host_path.clone(),
                    source,
                });
            }
        }
        let perms = match self.access {
            Access::Read => FsPerms::ReadOnly,
            Access::ReadWrite => FsPerms::ReadWrite,
        };
        wasi.preopened_dir(&self.host_path, &self.guest_path, perms)
            .map(|_| ())
            .map_err(|e| GrantError::Preopen {
                path: self.host_path.clone(),
                reason: format!("{e:#}"),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_paths_are_found_through_dots_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::os::unix::fs::symlink(root.join(".git/hooks"), root.join("hooks-link")).unwrap();
        let roots = vec![root.clone()];
        let name = |p: &str| protected_path(&root.join(p), &roots).map(|(n, _)| n);
        assert_eq!(name(".git/hooks/pre-commit"), Some(".git"));
        assert_eq!(name(".git"), Some(".git"));
        assert_eq!(name("src/../.git/config"), Some(".git"));
        assert_eq!(name("hooks-link/pre-commit"), Some(".git"));
        std::os::unix::fs::symlink(".git/hooks/post-checkout", root.join("dangling")).unwrap();
        assert_eq!(
            name("dangling"),
            Some(".git"),
            "a link to a file not there yet"
        );
        assert_eq!(
            name(".vscode/tasks.json"),
            Some(".vscode"),
            "missing ones too"
        );
        assert_eq!(name(".envrc"), Some(".envrc"));
        assert_eq!(name("src/main.rs"), None);
        assert_eq!(name("src/.git/config"), Some(".git"), "at any depth");
        assert_eq!(name("a/b/c/.claude/settings.json"), Some(".claude"));
        assert_eq!(name("a/.envrc"), Some(".envrc"));
        assert_eq!(name(".github/workflows/ci.yml"), None);
        assert_eq!(protected_path(Path::new("/elsewhere/.git"), &roots), None);
    }

    #[test]
    fn folders_git_takes_for_repositories_are_protected() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        // What a `gitdir:` file points to, or a bare repository.
        std::fs::create_dir_all(root.join("vendor/store/objects")).unwrap();
        std::fs::create_dir_all(root.join("vendor/store/refs")).unwrap();
        std::fs::write(root.join("vendor/store/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::create_dir_all(root.join("wt")).unwrap();
        std::fs::write(root.join("wt/HEAD"), "x").unwrap();
        std::fs::write(root.join("wt/commondir"), "..").unwrap();
        std::fs::create_dir_all(root.join("notes/refs")).unwrap();
        std::fs::write(root.join("notes/HEAD"), "x").unwrap();
        let roots = vec![root.clone()];
        let found = |p: &str| protected_path(&root.join(p), &roots);
        assert_eq!(
            found("vendor/store/hooks/pre-commit"),
            Some((".git", root.join("vendor/store")))
        );
        assert_eq!(found("wt/config").map(|(n, _)| n), Some(".git"));
        assert_eq!(
            found("notes/HEAD"),
            None,
            "no objects folder: not a repository"
        );
        assert_eq!(found("vendor/other.txt"), None);
    }

    fn request(path: &str, access: Access) -> FsRequest {
        FsRequest {
            path: path.to_string(),
            access,
        }
    }

    #[test]
    fn requests_name_the_workspace_the_data_folder_or_an_absolute_path() {
        for path in [WORKSPACE, PLUGIN_DATA, "/srv/data", "/tmp"] {
            assert!(FsRequest::parse(path, Access::Read).is_ok(), "{path}");
        }
    }

    #[test]
    fn other_paths_are_refused_with_a_reason() {
        for (path, says) in [
            ("$HOME", "home folder"),
            ("$HOME/.ssh", "home folder"),
            ("~", "home folder"),
            ("~/notes", "home folder"),
            ("$TMPDIR", "not a known folder"),
            ("$workspace", "not a known folder"),
            ("data", "relative"),
            ("./data", "relative"),
            ("", "relative"),
            ("/srv/../etc", "`..`"),
            ("/", "root"),
            ("/proc/self/root", "/proc"),
            ("/proc/self/cwd", "/proc"),
            ("/dev/fd/3", "/proc or /dev"),
        ] {
            let err = FsRequest::parse(path, Access::Read).unwrap_err();
            assert!(matches!(err, GrantError::InvalidRequest { .. }), "{path}");
            assert!(err.to_string().contains(says), "{path}: {err}");
        }
    }

    #[test]
    fn requests_resolve_to_folders() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).unwrap();
        let data = dir.path().join("plugins").join("weather").join("data");
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap();

        let ws = request(WORKSPACE, Access::Read)
            .resolve(&workspace, &data, &OwnFolders::default())
            .unwrap();
        assert_eq!(ws.host_path(), workspace.canonicalize().unwrap());
        assert_eq!(ws.access(), Access::Read);
        assert!(!data.exists());

        let own = request(PLUGIN_DATA, Access::ReadWrite)
            .resolve(&workspace, &data, &OwnFolders::default())
            .unwrap();
        assert!(data.is_dir());
        assert_eq!(own.host_path(), data.canonicalize().unwrap());
        assert_eq!(own.access(), Access::ReadWrite);

        let abs = request(other.to_str().unwrap(), Access::Read)
            .resolve(&workspace, &data, &OwnFolders::default())
            .unwrap();
        assert_eq!(abs.host_path(), other.canonicalize().unwrap());

        assert!(matches!(
            request("~/x", Access::Read).resolve(&workspace, &data, &OwnFolders::default()),
            Err(GrantError::InvalidRequest { .. })
        ));
        assert!(matches!(
            request(dir.path().join("missing").to_str().unwrap(), Access::Read).resolve(
                &workspace,
                &data,
                &OwnFolders::default()
            ),
            Err(GrantError::Unresolvable { .. })
        ));
    }

    #[test]
    fn a_data_folder_that_cannot_be_created_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let err = request(PLUGIN_DATA, Access::Read)
            .resolve(dir.path(), &file.join("data"), &OwnFolders::default())
            .unwrap_err();
        assert!(matches!(err, GrantError::CreateDataFolder { .. }), "{err}");
    }

    #[test]
    fn requests_are_within_wider_grants_only() {
        let ws_read = request(WORKSPACE, Access::Read);
        let ws_write = request(WORKSPACE, Access::ReadWrite);
        assert!(ws_read.is_within(&ws_write));
        assert!(ws_read.is_within(&ws_read));
        assert!(!ws_write.is_within(&ws_read));
        assert!(!ws_read.is_within(&request(PLUGIN_DATA, Access::ReadWrite)));
        let srv = request("/srv", Access::ReadWrite);
        assert!(request("/srv/data", Access::Read).is_within(&srv));
        assert!(!request("/srvdata", Access::Read).is_within(&srv));
        assert!(!srv.is_within(&request("/srv/data", Access::ReadWrite)));
    }

    #[test]
    fn requests_are_described_in_words() {
        assert_eq!(
            request(WORKSPACE, Access::Read).describe(),
            "the workspace (read-only)"
        );
        assert_eq!(
            request(PLUGIN_DATA, Access::ReadWrite).describe(),
            "its own data folder (read-write)"
        );
        assert_eq!(request("/srv", Access::Read).describe(), "/srv (read-only)");
    }

    #[test]
    fn grants_are_canonical_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let grant = FsGrant::new(
            &sub.join("..").join("sub"),
            Access::Read,
            &OwnFolders::default(),
        )
        .unwrap();
        assert_eq!(grant.host_path(), sub.canonicalize().unwrap());
        assert!(grant.permits(&grant.host_path().join("a.txt"), Access::Read));
        assert!(!grant.permits(&grant.host_path().join("a.txt"), Access::ReadWrite));
        assert!(!grant.permits(dir.path(), Access::Read));
    }

    #[test]
    fn capstans_folders_and_folders_around_them_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = crate::home::Home::at(root.join("home/data"), root.join("home/cache"));
        let own = OwnFolders::of(&home);
        std::fs::create_dir_all(root.join("home/data/plugins/data/weather")).unwrap();
        std::fs::create_dir_all(root.join("project")).unwrap();
        let grant = |path: &Path| FsGrant::new(path, Access::ReadWrite, &own);

        // Enclosing: the parent of the data folder, and of the cache not
        // made yet.
        let err = grant(&root.join("home")).unwrap_err();
        assert!(matches!(err, GrantError::EnclosesOwnFolder { .. }), "{err}");
        assert!(err.to_string().contains("capstan's data folder"), "{err}");
        assert!(err.to_string().contains("--workspace DIR"), "{err}");
        let err = grant(&root).unwrap_err();
        assert!(matches!(err, GrantError::EnclosesOwnFolder { .. }), "{err}");
        // The folder itself and folders inside.
        assert!(grant(&root.join("home/data")).is_err());
        let err = grant(&root.join("home/data/plugins")).unwrap_err();
        assert!(matches!(err, GrantError::InsideOwnFolder { .. }), "{err}");
        // Through a symbolic link, the folder it is.
        std::os::unix::fs::symlink(root.join("home"), root.join("project/link")).unwrap();
        let err = grant(&root.join("project/link")).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("(which is {})", root.join("home").display())),
            "{err}"
        );
        // A folder beside them is fine, and so is the plugin's own data
        // folder when it is asked for as such.
        assert!(grant(&root.join("project")).is_ok());
        let data = root.join("home/data/plugins/data/weather");
        assert!(grant(&data).is_err());
        let own_data = FsRequest::parse(PLUGIN_DATA, Access::ReadWrite)
            .unwrap()
            .resolve(&root.join("project"), &data, &own)
            .unwrap();
        assert_eq!(own_data.host_path(), data);
    }

    #[test]
    fn the_root_reached_through_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("to-root");
        std::os::unix::fs::symlink("/", &link).unwrap();
        let err = FsGrant::new(&link, Access::Read, &OwnFolders::default()).unwrap_err();
        assert!(matches!(err, GrantError::Root { .. }), "{err}");
        assert!(err.to_string().contains("(which is /)"), "{err}");
        let request = FsRequest::parse(link.to_str().unwrap(), Access::Read).unwrap();
        assert!(request.resolve_for_consent(&OwnFolders::default()).is_err());
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let linked = dir.path().join("to-real");
        std::os::unix::fs::symlink(&real, &linked).unwrap();
        let request = FsRequest::parse(linked.to_str().unwrap(), Access::Read).unwrap();
        assert_eq!(
            request.resolve_for_consent(&OwnFolders::default()).unwrap(),
            Some(real.canonicalize().unwrap())
        );
    }

    #[test]
    fn a_folder_is_held_to_what_it_resolved_to_at_consent() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for name in ["agreed", "other"] {
            std::fs::create_dir(root.join(name)).unwrap();
        }
        let link = root.join("link");
        std::os::unix::fs::symlink(root.join("agreed"), &link).unwrap();
        let request = FsRequest::parse(link.to_str().unwrap(), Access::Read).unwrap();
        let own = OwnFolders::default();
        let resolved = vec![(
            request.path.clone(),
            request.resolve_for_consent(&own).unwrap().unwrap(),
        )];
        let consented = consented_folders(&resolved).unwrap();
        let grant = request
            .resolve_as_consented(&root, &root.join("data"), &own, &consented)
            .unwrap();
        assert_eq!(grant.host_path(), root.join("agreed"));

        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(root.join("other"), &link).unwrap();
        let err = request
            .resolve_as_consented(&root, &root.join("data"), &own, &consented)
            .unwrap_err();
        assert!(matches!(err, GrantError::Moved { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains(&format!("now resolves to {}", root.join("other").display()))
                && text.contains(&format!("you agreed to {}", root.join("agreed").display())),
            "{text}"
        );
        // No recorded folder: refused, never followed.
        let err = request
            .resolve_as_consented(&root, &root.join("data"), &own, &ConsentedFolders::new())
            .unwrap_err();
        assert!(matches!(err, GrantError::NotConsented { .. }), "{err}");
        // `$WORKSPACE` is the call's, whatever the lock holds.
        let ws = FsRequest::parse(WORKSPACE, Access::Read).unwrap();
        assert!(
            ws.resolve_as_consented(&root, &root.join("data"), &own, &ConsentedFolders::new())
                .is_ok()
        );
    }

    #[test]
    fn a_folder_replaced_by_a_link_after_it_was_resolved_is_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::fs::create_dir(root.join("elsewhere")).unwrap();
        let grant = FsGrant::new(&root.join("real"), Access::Read, &OwnFolders::default()).unwrap();
        std::fs::rename(root.join("real"), root.join("moved")).unwrap();
        std::os::unix::fs::symlink(root.join("elsewhere"), root.join("real")).unwrap();
        let err = grant.apply(&mut WasiCtxBuilder::new()).unwrap_err();
        assert!(matches!(err, GrantError::Moved { .. }), "{err}");
    }

    #[test]
    fn missing_folders_and_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            FsGrant::new(
                &dir.path().join("nope"),
                Access::Read,
                &OwnFolders::default()
            ),
            Err(GrantError::Unresolvable { .. })
        ));
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        assert!(matches!(
            FsGrant::new(&file, Access::Read, &OwnFolders::default()),
            Err(GrantError::NotAFolder { .. })
        ));
    }
}
