//! Capabilities a plugin may be granted, one module per kind.
//!
//! Each module owns its piece of the story: how the grant is written in a
//! manifest, how a request is checked against it, how it is wired into the
//! sandbox, and what it writes to the audit log:
//!
//! - [`fs`]: folders, read-only or read-write (WASI preopens);
//! - [`net`]: `scheme://host[:port]` patterns, checked on every outgoing
//!   `wasi:http` request; sockets are always off;
//! - [`env`]: environment variables by name, nothing else;
//! - [`secrets`]: values the host adds to requests as headers, which the
//!   plugin never sees;
//! - [`exec`]: native programs it may run, with the argument lists it may
//!   pass, in the OS sandbox of [`crate::exec`].
//!
//! Every kind has the same lifecycle ([`capability::Capability`]): parse
//! (its serde type is the schema of the manifest's and the lockfile's
//! entries), cover and diff, describe in plain words, wire into a call.
//! The set operations are written once, in [`capability`]; the kinds are
//! listed once, below.
//!
//! [`Capabilities`] is what a manifest requests and what the lockfile
//! records as granted; [`Grants`] is what one call actually gets.

pub mod capability;
pub mod env;
pub mod exec;
pub mod fs;
pub mod net;
pub mod secrets;

use std::sync::{Arc, OnceLock};

use wasmtime_wasi::filesystem::WasiFilesystemCtx;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder};

pub use env::{EnvError, EnvGrant};
pub use fs::{Access, ConsentedFolders, FsGrant, FsRequest, GrantError, OwnFolders};
pub use net::NetGrant;
pub use secrets::{ResolvedSecret, SecretError, SecretGrant, SecretValues};

use capability::{Capability, EntryError, capability_kinds};

capability_kinds! {
    /// Folders, read or read-write (`fs`).
    fs: FsRequest => Fs,
    /// Origins it may send HTTP requests to (`net`).
    net: NetGrant => Net,
    /// Environment variables it may read (`env`).
    env: EnvGrant => Env,
    /// Secrets the host adds to its requests (`secret`).
    secrets: SecretGrant => Secret,
    /// Native programs it may run, with argument patterns (`exec`).
    exec: exec::ExecGrant => Exec,
}

/// An entry of a manifest's request that is not valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidEntry {
    /// Its kind.
    pub kind: CapabilityKind,
    /// Its place in the kind's list.
    pub index: usize,
    /// What is wrong.
    pub error: EntryError,
}

/// Everything one call is granted.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    /// Folders the call can see, each read-only or read-write.
    pub fs: Vec<FsGrant>,
    /// The folder that counts as the workspace, if any: its guest path is
    /// passed to the plugin in the call context.
    pub workspace: Option<FsGrant>,
    /// Where outgoing HTTP requests may go; nowhere by default.
    pub net: Vec<NetGrant>,
    /// Asked, at the moment of access, about an origin `net` does not name
    /// (the built-in `web` plugin's pages); `None` refuses them.
    pub net_gate: Option<net::NetGate>,
    /// Environment variables set to fixed values by the host (the built-in
    /// `web` plugin's search settings), besides the granted ones.
    pub fixed_env: Vec<(String, String)>,
    /// Environment variables the plugin sees, by name; values are read
    /// from the host's environment at call time.
    pub env: Vec<EnvGrant>,
    /// Secrets added as headers to requests to their hosts.
    pub secrets: Vec<ResolvedSecret>,
    /// Everything the plugin was granted, as the lockfile records it: a
    /// kind whose entries need no preparing before a call (such as
    /// [`exec`]) reads them here when the call asks, so adding one needs
    /// no field of its own.
    pub capabilities: Capabilities,
    opened: OpenedFolders,
}

/// Why a plugin's grants could not be prepared for a call.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// A folder could not be granted.
    #[error(transparent)]
    Fs(#[from] GrantError),
    /// A secret has no usable value.
    #[error(transparent)]
    Secret(#[from] SecretError),
}

/// The granted folders, opened once and shared by every call made with
/// these grants (and their clones): a preopen is a handle to a folder, and
/// each call's instance gets its own reference to it, so opening the folder
/// again per call would only cost time.
#[derive(Clone, Default)]
struct OpenedFolders(Arc<OnceLock<(bool, WasiFilesystemCtx)>>);

impl std::fmt::Debug for OpenedFolders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let opened = self.0.get().is_some();
        f.debug_struct("OpenedFolders")
            .field("opened", &opened)
            .finish()
    }
}

impl Grants {
    /// Grants access to `workspace` only, writable or not; it may not reach
    /// capstan's folders `own`.
    pub fn workspace(
        dir: &std::path::Path,
        writable: bool,
        own: &OwnFolders,
    ) -> Result<Self, GrantError> {
        let access = if writable {
            Access::ReadWrite
        } else {
            Access::Read
        };
        Ok(Self {
            workspace: Some(FsGrant::new(dir, access, own)?),
            ..Self::default()
        })
    }

    /// What a call to an installed plugin gets from its `granted`
    /// capabilities: `$WORKSPACE` becomes the call's workspace, other
    /// folders are resolved (the plugin's data folder `plugin_data` is
    /// created if needed), and secrets get their values from the host's
    /// environment or `secret_values`. Environment values are read later,
    /// at each call. No folder may reach capstan's folders `own` (the
    /// plugin's data folder, inside them, excepted), and an absolute folder
    /// must still resolve to the folder `consented` records for it.
    pub fn for_plugin(
        granted: &Capabilities,
        workspace: &std::path::Path,
        plugin_data: &std::path::Path,
        secret_values: &SecretValues,
        own: &OwnFolders,
        consented: &ConsentedFolders,
    ) -> Result<Self, PrepareError> {
        let mut grants = Self {
            capabilities: granted.clone(),
            ..Self::default()
        };
        for request in &granted.fs {
            let grant = request.resolve_as_consented(workspace, plugin_data, own, consented)?;
            if request.path == fs::WORKSPACE {
                grants.workspace = Some(grant);
            } else {
                grants.fs.push(grant);
            }
        }
        grants.net = granted.net.clone();
        grants.env = granted.env.clone();
        grants.secrets = secrets::resolve(
            &granted.secrets,
            |name| std::env::var(name).ok(),
            secret_values,
        )?;
        Ok(grants)
    }

    /// No access to anything.
    pub fn none() -> Self {
        Self::default()
    }

    /// The environment the plugin sees: each granted variable that is set
    /// in the host's environment now, and nothing else.
    /// A variable named like one of the call's secrets is never passed, so
    /// the secret's value cannot reach the plugin that way.
    pub fn env_values(&self) -> Vec<(String, String)> {
        let secret = |name: &str| self.secrets.iter().any(|s| s.grant.name == name);
        env::granted_values(&self.env, |name| {
            if secret(name) {
                None
            } else {
                std::env::var(name).ok()
            }
        })
    }

    /// The workspace path as the plugin sees it.
    pub fn workspace_guest_path(&self) -> Option<&str> {
        self.workspace.as_ref().map(FsGrant::guest_path)
    }

    /// Wires every grant into the WASI context of one call, built from
    /// `builder` (which holds the call's own plumbing, such as its output
    /// pipes): the granted variables set now ([`env`]), sockets off
    /// ([`net::wire_sockets`]), the granted folders ([`fs`]). What is
    /// decided here is recorded in the call's `audit` scope.
    /// `blocking_file_io` says whether file operations may be served on
    /// the calling thread. Outgoing HTTP is wired separately, through
    /// [`Grants::net_hooks`].
    pub fn wire(
        &self,
        mut builder: WasiCtxBuilder,
        audit: Option<&crate::audit::AuditScope>,
        blocking_file_io: bool,
    ) -> Result<WasiCtx, GrantError> {
        // Exactly the granted variables that are set now; nothing else.
        let mut env = self.env_values();
        env.extend(self.fixed_env.iter().cloned());
        builder.envs(&env);
        net::wire_sockets(&mut builder, audit);
        let mut wasi = builder.build();
        self.apply(&mut wasi, blocking_file_io)?;
        env::record_read(&env, audit);
        Ok(wasi)
    }

    /// What a call's outgoing HTTP requests pass through: its origins,
    /// checked on every request, and its secrets, added to requests to
    /// their hosts.
    pub fn net_hooks(&self) -> net::NetHooks {
        net::NetHooks::new(&self.net, &self.secrets).with_gate(self.net_gate.clone())
    }

    /// Wires the granted folders into a fresh WASI context.
    /// `blocking_file_io` says whether file operations may be served on
    /// the calling thread.
    pub fn apply(&self, wasi: &mut WasiCtx, blocking_file_io: bool) -> Result<(), GrantError> {
        *wasi.filesystem() = match self.opened.0.get() {
            Some((mode, folders)) if *mode == blocking_file_io => folders.clone(),
            _ => {
                let folders = self.open_folders(blocking_file_io)?;
                // The first mode asked for is kept; calls in another mode
                // (only benchmarks switch) open their folders each time.
                let _ = self.opened.0.set((blocking_file_io, folders.clone()));
                folders
            }
        };
        Ok(())
    }

    fn open_folders(&self, blocking_file_io: bool) -> Result<WasiFilesystemCtx, GrantError> {
        let mut builder = WasiCtxBuilder::new();
        builder.allow_blocking_current_thread(blocking_file_io);
        for grant in self.workspace.iter().chain(&self.fs) {
            grant.apply(&mut builder)?;
        }
        Ok(builder.build().filesystem().clone())
    }
}

/// A capability names something the host keeps for itself.
#[derive(Debug, thiserror::Error)]
pub enum ReservedName {
    /// An environment variable.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// A secret.
    #[error(transparent)]
    Secret(#[from] SecretError),
}

impl std::fmt::Display for CapabilityKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for CapabilityKind {
    type Err = CapabilityRefError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::from_word(&text.to_ascii_lowercase()).ok_or_else(|| {
            let words: Vec<&str> = Self::ALL.iter().map(|kind| kind.as_str()).collect();
            let known = match words.split_last() {
                Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
                _ => words.join(""),
            };
            CapabilityRefError::UnknownKind {
                kind: text.to_string(),
                known,
            }
        })
    }
}

/// One capability named on the command line, as `KIND VALUE`: `fs PATH`,
/// `net ORIGIN`, `env NAME` or `secret NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilityRef {
    /// Which kind.
    pub kind: CapabilityKind,
    /// The folder, origin pattern or name, checked for its kind.
    pub value: String,
}

/// A `KIND VALUE` pair that is wrong, or names nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapabilityRefError {
    /// The kind is not one capstan knows.
    #[error("unknown capability kind `{kind}`; use {known}")]
    UnknownKind {
        /// The kind as written.
        kind: String,
        /// The kinds there are: `fs, net, env, secret or exec`.
        known: String,
    },
    /// The text is not `KIND VALUE`.
    #[error("expected KIND VALUE (such as `net https://api.example.com`), got `{text}`")]
    Malformed {
        /// The text as written.
        text: String,
    },
    /// The value is not valid for its kind.
    #[error("invalid {kind} value `{value}`: {message}")]
    InvalidValue {
        /// The kind.
        kind: CapabilityKind,
        /// The value as written.
        value: String,
        /// Why.
        message: String,
    },
    /// Nothing of that kind and value is there.
    #[error("{kind} `{value}` is not {where_}; {listed}")]
    NotFound {
        /// The kind.
        kind: CapabilityKind,
        /// The value.
        value: String,
        /// `granted` or `requested by the manifest`.
        where_: &'static str,
        /// What there is of that kind.
        listed: String,
    },
}

impl CapabilityRef {
    /// A capability from its kind and value, checking the value's syntax.
    pub fn parse(kind: &str, value: &str) -> Result<Self, CapabilityRefError> {
        let kind: CapabilityKind = kind.parse()?;
        let value = value.trim();
        let invalid = |message: String| CapabilityRefError::InvalidValue {
            kind,
            value: value.to_string(),
            message,
        };
        kind.check_value(value).map_err(invalid)?;
        Ok(Self {
            kind,
            value: value.to_string(),
        })
    }

    /// A capability from one `KIND VALUE` string.
    pub fn parse_pair(text: &str) -> Result<Self, CapabilityRefError> {
        match text.trim().split_once(char::is_whitespace) {
            Some((kind, value)) if !value.trim().is_empty() => Self::parse(kind, value),
            _ => Err(CapabilityRefError::Malformed {
                text: text.to_string(),
            }),
        }
    }
}

impl std::fmt::Display for CapabilityRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.value)
    }
}

impl CapabilityEntry {
    /// The entry as a consent line: `network  https://api.example.com`.
    pub fn describe(&self) -> String {
        format!("{:<8} {}", self.kind().label(), self.words())
    }
}

impl std::fmt::Display for CapabilityEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// How a newer capability set differs from an older one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapabilityDiff {
    /// Entries only the newer set has.
    pub added: Vec<CapabilityEntry>,
    /// Entries only the older set has.
    pub removed: Vec<CapabilityEntry>,
    /// Entries the newer set widens: (older, newer).
    pub widened: Vec<(CapabilityEntry, CapabilityEntry)>,
    /// Entries the newer set narrows or changes without widening: (older, newer).
    pub narrowed: Vec<(CapabilityEntry, CapabilityEntry)>,
}

impl CapabilityDiff {
    /// Whether the newer set asks for anything the older one did not grant.
    pub fn is_wider(&self) -> bool {
        !self.added.is_empty() || !self.widened.is_empty()
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.widened.is_empty()
            && self.narrowed.is_empty()
    }
}

impl std::fmt::Display for CapabilityDiff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_empty() {
            return writeln!(f, "  no change in what it may access");
        }
        for entry in &self.added {
            writeln!(f, "  + {entry}   (new)")?;
        }
        for (old, new) in &self.widened {
            writeln!(f, "  ^ {new}   (wider: was {})", old.words())?;
        }
        for (old, new) in &self.narrowed {
            writeln!(f, "  v {new}   (narrower: was {})", old.words())?;
        }
        for entry in &self.removed {
            writeln!(f, "  - {entry}   (no longer asked for)")?;
        }
        Ok(())
    }
}

impl Capabilities {
    /// The capabilities in plain words, one line each, for the consent
    /// prompt: network origins (or `network  none`), secrets, folders (or
    /// `files    none`), environment variables.
    pub fn describe(&self) -> Vec<String> {
        self.describe_resolved(&[])
    }

    /// [`Capabilities::describe`], saying for each folder of `resolved`
    /// (see [`Capabilities::resolve_folders`]) that reaches elsewhere what
    /// it really is: `/srv/link (read-only), which is /srv/real`.
    pub fn describe_resolved(&self, resolved: &[(String, std::path::PathBuf)]) -> Vec<String> {
        let line = |entry: &CapabilityEntry| {
            let mut text = entry.describe();
            if let CapabilityEntry::Fs(fs) = entry {
                text.push_str(&fs::resolved_note_for_consent(fs, resolved));
            }
            text
        };
        let mut kinds = CapabilityKind::ALL.to_vec();
        kinds.sort_by_key(|kind| kind.consent_rank());
        let mut lines = Vec::new();
        for kind in kinds {
            let entries = self.entries_of(kind);
            if entries.is_empty() && kind.says_none() {
                lines.push(format!("{:<8} none", kind.label()));
            }
            lines.extend(entries.iter().map(line));
        }
        lines
    }

    /// Resolves every absolute folder requested, now (symbolic links and
    /// `/proc` magic links followed), with the refusals of a grant: not the
    /// root of the file system, not capstan's folders `own` nor a folder
    /// enclosing one. Run before consent, so the user is shown — and agrees
    /// to — the folder itself. Returns each path as written with the folder
    /// it is; `$WORKSPACE` and `$PLUGIN_DATA` are resolved at each call.
    pub fn resolve_folders(
        &self,
        own: &OwnFolders,
    ) -> Result<Vec<(String, std::path::PathBuf)>, GrantError> {
        let mut resolved = Vec::new();
        for request in &self.fs {
            if let Some(real) = request.resolve_for_consent(own)? {
                resolved.push((request.path.clone(), real));
            }
        }
        Ok(resolved)
    }

    /// A copy without the entry `what` names (for `revoke`): the entry
    /// whose key ([`Capability::key`]) is the value — a folder by its path,
    /// whatever its access; an origin by its exact pattern; a variable or
    /// secret by its name.
    pub fn without(&self, what: &CapabilityRef) -> Result<Capabilities, CapabilityRefError> {
        let mut out = self.clone();
        if out.remove(what.kind, &what.value) {
            Ok(out)
        } else {
            Err(self.not_found(what, "granted"))
        }
    }

    /// A copy with the entry `what` names taken from `requested` (the
    /// manifest's request) added back (for `grant`). Only what the manifest
    /// requests can be granted; granting what is already granted changes
    /// nothing.
    pub fn with_requested(
        &self,
        requested: &Capabilities,
        what: &CapabilityRef,
    ) -> Result<Capabilities, CapabilityRefError> {
        let mut out = self.clone();
        if out.add_requested(requested, what.kind, &what.value) {
            Ok(out)
        } else {
            Err(requested.not_found(what, "requested by the plugin's manifest"))
        }
    }

    fn not_found(&self, what: &CapabilityRef, where_: &'static str) -> CapabilityRefError {
        let values = self.keys_of(what.kind);
        let listed = if values.is_empty() {
            format!("there is no {} entry", what.kind)
        } else {
            format!("there is: {}", values.join(", "))
        };
        CapabilityRefError::NotFound {
            kind: what.kind,
            value: what.value.clone(),
            where_,
            listed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(p: &str) -> NetGrant {
        NetGrant::parse(p).unwrap()
    }

    fn fs(path: &str, access: Access) -> FsRequest {
        FsRequest {
            path: path.to_string(),
            access,
        }
    }

    fn secret(name: &str, hosts: &[&str]) -> SecretGrant {
        SecretGrant {
            name: name.to_string(),
            header: "X-Api-Key".to_string(),
            format: "{}".to_string(),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
        }
    }

    fn program(name: &str, args: &[&str]) -> exec::ExecGrant {
        exec::ExecGrant {
            program: name.to_string(),
            path: None,
            args: args.iter().map(|a| a.to_string()).collect(),
            writes: Vec::new(),
        }
    }

    fn weather() -> Capabilities {
        Capabilities {
            fs: vec![],
            net: vec![net("https://api.open-meteo.com")],
            env: vec![],
            secrets: vec![secret("OPEN_METEO_KEY", &["api.open-meteo.com"])],
            exec: vec![],
        }
    }

    #[test]
    fn describe_speaks_plain_words() {
        assert_eq!(
            weather().describe(),
            [
                "network  https://api.open-meteo.com",
                "secret   OPEN_METEO_KEY -> sent as header X-Api-Key to api.open-meteo.com only",
                "files    none",
            ]
        );
        let tools = Capabilities {
            fs: vec![fs("$WORKSPACE", Access::Read)],
            env: vec![EnvGrant::new("TZ")],
            ..Capabilities::default()
        };
        assert_eq!(
            tools.describe(),
            [
                "network  none",
                "files    the workspace (read-only)",
                "env      TZ"
            ]
        );
    }

    #[test]
    fn equal_sets_have_an_empty_diff() {
        let diff = weather().diff(&weather());
        assert!(diff.is_empty() && !diff.is_wider());
        assert!(diff.to_string().contains("no change"));
        assert!(weather().is_within(&weather()));
    }

    #[test]
    fn added_and_removed_entries_are_found() {
        let old = weather();
        let mut new = weather();
        new.env.push(EnvGrant::new("TZ"));
        new.net.push(net("https://geo.example.com"));
        new.secrets.clear();
        let diff = old.diff(&new);
        assert_eq!(
            diff.added,
            [
                CapabilityEntry::Net(net("https://geo.example.com")),
                CapabilityEntry::Env(EnvGrant::new("TZ"))
            ]
        );
        assert_eq!(
            diff.removed,
            [CapabilityEntry::Secret(secret(
                "OPEN_METEO_KEY",
                &["api.open-meteo.com"]
            ))]
        );
        assert!(diff.is_wider());
        assert!(!new.is_within(&old));
        let text = diff.to_string();
        assert!(
            text.contains("+ network  https://geo.example.com"),
            "{text}"
        );
        assert!(text.contains("- secret   OPEN_METEO_KEY"), "{text}");

        // Going back drops two entries and asks for the secret again.
        let back = new.diff(&old);
        assert_eq!(back.removed.len(), 2, "{back}");
        assert_eq!(back.added.len(), 1, "{back}");
        assert!(back.is_wider(), "{back}");
        assert!(!old.is_within(&new));
        let mut fewer = new.clone();
        fewer.env.clear();
        assert!(!new.diff(&fewer).is_wider());
        assert!(fewer.is_within(&new));
    }

    #[test]
    fn widened_entries_are_found() {
        let old = Capabilities {
            fs: vec![fs("$WORKSPACE", Access::Read)],
            net: vec![net("https://api.example.com")],
            env: vec![],
            secrets: vec![secret("K", &["api.example.com"])],
            exec: vec![],
        };
        let new = Capabilities {
            fs: vec![fs("$WORKSPACE", Access::ReadWrite)],
            net: vec![net("https://*.example.com")],
            env: vec![],
            secrets: vec![secret("K", &["api.example.com", "upload.example.com"])],
            exec: vec![],
        };
        let diff = old.diff(&new);
        assert!(diff.added.is_empty() && diff.removed.is_empty(), "{diff}");
        assert_eq!(diff.widened.len(), 3, "{diff}");
        assert!(diff.is_wider());
        assert!(!new.is_within(&old));
        assert!(old.is_within(&new));
        let text = diff.to_string();
        assert!(
            text.contains("wider: was the workspace (read-only)"),
            "{text}"
        );
        assert!(
            text.contains("wider: was https://api.example.com"),
            "{text}"
        );

        let back = new.diff(&old);
        assert_eq!(back.narrowed.len(), 3, "{back}");
        assert!(!back.is_wider(), "{back}");
    }

    /// Each kind on its own: consent words, and an update that adds,
    /// widens, narrows and drops entries of that kind only.
    #[test]
    fn each_kind_describes_and_diffs_itself() {
        let only = |entries: Vec<CapabilityEntry>| {
            let mut caps = Capabilities::default();
            for entry in entries {
                match entry {
                    CapabilityEntry::Fs(e) => caps.fs.push(e),
                    CapabilityEntry::Net(e) => caps.net.push(e),
                    CapabilityEntry::Env(e) => caps.env.push(e),
                    CapabilityEntry::Secret(e) => caps.secrets.push(e),
                    CapabilityEntry::Exec(e) => caps.exec.push(e),
                }
            }
            caps
        };
        // The kind, an older and a newer set of it, a line the older one is
        // described with, and how many entries are added, removed, widened
        // and narrowed.
        type Case = (
            CapabilityKind,
            Vec<CapabilityEntry>,
            Vec<CapabilityEntry>,
            &'static str,
            [usize; 4],
        );
        let cases: Vec<Case> = vec![
            (
                CapabilityKind::Fs,
                vec![
                    CapabilityEntry::Fs(fs("$WORKSPACE", Access::Read)),
                    CapabilityEntry::Fs(fs("/srv", Access::ReadWrite)),
                    CapabilityEntry::Fs(fs("/opt", Access::Read)),
                ],
                vec![
                    CapabilityEntry::Fs(fs("$WORKSPACE", Access::ReadWrite)),
                    CapabilityEntry::Fs(fs("/srv", Access::Read)),
                    CapabilityEntry::Fs(fs("$PLUGIN_DATA", Access::ReadWrite)),
                ],
                "files    the workspace (read-only)",
                [1, 1, 1, 1],
            ),
            (
                CapabilityKind::Net,
                vec![
                    CapabilityEntry::Net(net("https://api.example.com")),
                    CapabilityEntry::Net(net("https://*.cdn.example.net")),
                    CapabilityEntry::Net(net("http://127.0.0.1:8080")),
                ],
                vec![
                    CapabilityEntry::Net(net("https://*.example.com")),
                    CapabilityEntry::Net(net("https://img.cdn.example.net")),
                    CapabilityEntry::Net(net("https://other.example.org")),
                ],
                "network  https://api.example.com",
                [1, 1, 1, 1],
            ),
            (
                CapabilityKind::Env,
                vec![
                    CapabilityEntry::Env(EnvGrant::new("TZ")),
                    CapabilityEntry::Env(EnvGrant::new("LANG")),
                ],
                vec![
                    CapabilityEntry::Env(EnvGrant::new("TZ")),
                    CapabilityEntry::Env(EnvGrant::new("GIT_AUTHOR_NAME")),
                ],
                "env      TZ",
                [1, 1, 0, 0],
            ),
            (
                CapabilityKind::Secret,
                vec![
                    CapabilityEntry::Secret(secret("A", &["a.example.com"])),
                    CapabilityEntry::Secret(secret("B", &["b.example.com", "c.example.com"])),
                    CapabilityEntry::Secret(secret("C", &["c.example.com"])),
                ],
                vec![
                    CapabilityEntry::Secret(secret("A", &["a.example.com", "x.example.com"])),
                    CapabilityEntry::Secret(secret("B", &["b.example.com"])),
                    CapabilityEntry::Secret(secret("D", &["d.example.com"])),
                ],
                "secret   A -> sent as header X-Api-Key to a.example.com only",
                [1, 1, 1, 1],
            ),
            (
                CapabilityKind::Exec,
                vec![
                    CapabilityEntry::Exec(program("git", &["status", "log **"])),
                    CapabilityEntry::Exec(program("cargo", &["test **"])),
                    CapabilityEntry::Exec(program("make", &["check"])),
                ],
                vec![
                    CapabilityEntry::Exec(program("git", &["status **", "log **"])),
                    CapabilityEntry::Exec(program("cargo", &["test --lib **"])),
                    CapabilityEntry::Exec(program("rustc", &["--version"])),
                ],
                "programs run git with `status`, `log **`",
                [1, 1, 1, 1],
            ),
        ];
        for (kind, old, new, first_line, [added, removed, widened, narrowed]) in cases {
            let (old, new) = (only(old), only(new));
            let described = old.describe();
            assert!(
                described.iter().any(|l| l == first_line),
                "{kind}: {described:?}"
            );
            let diff = old.diff(&new);
            assert!(
                diff.added
                    .iter()
                    .chain(&diff.removed)
                    .all(|e| e.kind() == kind),
                "{kind}: {diff}"
            );
            assert_eq!(
                [
                    diff.added.len(),
                    diff.removed.len(),
                    diff.widened.len(),
                    diff.narrowed.len()
                ],
                [added, removed, widened, narrowed],
                "{kind}:\n{diff}"
            );
            assert!(diff.is_wider(), "{kind}: {diff}");
            assert!(!new.is_within(&old), "{kind}");
            let text = diff.to_string();
            for (sign, count) in [
                ("+ ", added),
                ("- ", removed),
                ("^ ", widened),
                ("v ", narrowed),
            ] {
                assert_eq!(
                    text.lines()
                        .filter(|l| l.trim_start().starts_with(sign))
                        .count(),
                    count,
                    "{kind} {sign}:\n{text}"
                );
            }
            // Back again: what was added is removed, what widened narrows.
            let back = new.diff(&old);
            assert_eq!(back.added.len(), removed, "{kind}:\n{back}");
            assert_eq!(back.removed.len(), added, "{kind}:\n{back}");
            assert_eq!(back.narrowed.len(), widened, "{kind}:\n{back}");
            assert_eq!(back.widened.len(), narrowed, "{kind}:\n{back}");
            // Nothing of the kind: files and network say so, the rest are silent.
            let none = Capabilities::default().describe();
            let says_none = none.iter().any(|l| l.starts_with(kind.label()));
            assert_eq!(
                says_none,
                matches!(kind, CapabilityKind::Fs | CapabilityKind::Net),
                "{kind}: {none:?}"
            );
        }
    }

    #[test]
    fn a_secret_sent_as_another_header_is_wider() {
        let old = weather();
        let mut new = weather();
        new.secrets[0].header = "Authorization".to_string();
        assert!(old.diff(&new).is_wider());
        assert!(!new.is_within(&old));
    }

    #[test]
    fn revoke_and_grant_by_kind_and_value() {
        let requested = weather();
        let what = CapabilityRef::parse_pair("net https://api.open-meteo.com").unwrap();
        let revoked = requested.without(&what).unwrap();
        assert!(revoked.net.is_empty());
        assert!(revoked.is_within(&requested));
        let err = revoked.without(&what).unwrap_err();
        assert!(err.to_string().contains("there is no net entry"), "{err}");
        let again = revoked.with_requested(&requested, &what).unwrap();
        assert_eq!(again.diff(&requested), CapabilityDiff::default());
        // Granting twice changes nothing.
        assert_eq!(again.with_requested(&requested, &what).unwrap(), again);

        let other = CapabilityRef::parse("env", "HOME").unwrap();
        let err = revoked.with_requested(&requested, &other).unwrap_err();
        assert!(
            err.to_string()
                .contains("requested by the plugin's manifest"),
            "{err}"
        );

        let secret = CapabilityRef::parse("secret", "OPEN_METEO_KEY").unwrap();
        assert!(requested.without(&secret).unwrap().secrets.is_empty());
        let files = Capabilities {
            fs: vec![fs("$WORKSPACE", Access::ReadWrite)],
            ..Capabilities::default()
        };
        let ws = CapabilityRef::parse("fs", "$WORKSPACE").unwrap();
        assert!(files.without(&ws).unwrap().fs.is_empty());
        let listed = files
            .without(&CapabilityRef::parse("fs", "/srv").unwrap())
            .unwrap_err();
        assert!(
            listed.to_string().contains("there is: $WORKSPACE"),
            "{listed}"
        );
    }

    #[test]
    fn kind_value_pairs_are_checked() {
        for (text, says) in [
            ("net", "expected KIND VALUE"),
            ("", "expected KIND VALUE"),
            (
                "disk /tmp",
                "unknown capability kind `disk`; use fs, net, env, secret or exec",
            ),
            ("net api.example.com", "invalid net value"),
            ("fs ~/x", "home folder"),
            ("env 9X", "invalid env value"),
            ("secret A-B", "invalid secret value"),
        ] {
            let err = CapabilityRef::parse_pair(text).unwrap_err();
            assert!(err.to_string().contains(says), "{text}: {err}");
        }
        let ok = CapabilityRef::parse_pair("  network   https://x.example.com ").unwrap();
        assert_eq!(ok.kind, CapabilityKind::Net);
        assert_eq!(ok.to_string(), "net https://x.example.com");
    }

    #[test]
    fn plugin_grants_are_prepared_from_capabilities() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).unwrap();
        let data = dir.path().join("data");
        let caps = Capabilities {
            fs: vec![
                fs("$WORKSPACE", Access::Read),
                fs("$PLUGIN_DATA", Access::ReadWrite),
            ],
            net: vec![net("https://api.example.com")],
            env: vec![EnvGrant::new("TZ")],
            secrets: vec![secret("PLUGIN_TEST_UNSET_SECRET_Q", &["api.example.com"])],
            exec: vec![],
        };
        let config = dir.path().join("config.toml");
        let values = SecretValues::from_pairs(&config, [("PLUGIN_TEST_UNSET_SECRET_Q", "v")]);
        let none = ConsentedFolders::new();
        let grants = Grants::for_plugin(
            &caps,
            &workspace,
            &data,
            &values,
            &OwnFolders::default(),
            &none,
        )
        .unwrap();
        assert_eq!(
            grants.workspace.as_ref().map(FsGrant::access),
            Some(Access::Read)
        );
        assert_eq!(grants.fs.len(), 1);
        assert!(data.is_dir());
        assert_eq!(grants.net, caps.net);
        assert_eq!(grants.env, caps.env);
        assert_eq!(grants.secrets[0].header_value(), "v");

        let empty = SecretValues::from_pairs(&config, []);
        let err = Grants::for_plugin(
            &caps,
            &workspace,
            &data,
            &empty,
            &OwnFolders::default(),
            &none,
        )
        .unwrap_err();
        assert!(matches!(err, PrepareError::Secret(_)), "{err}");
        let mut bad = caps.clone();
        bad.fs.push(fs("/nonexistent-capstan-folder", Access::Read));
        let err = Grants::for_plugin(
            &bad,
            &workspace,
            &data,
            &values,
            &OwnFolders::default(),
            &none,
        )
        .unwrap_err();
        assert!(matches!(err, PrepareError::Fs(_)), "{err}");
    }

    #[test]
    fn configured_model_keys_are_checked() {
        let caps = Capabilities {
            env: vec![EnvGrant::new("TZ"), EnvGrant::new("MY_LLM_KEY")],
            ..Capabilities::default()
        };
        assert!(caps.check_reserved(&[]).is_ok());
        let err = caps.check_reserved(&["MY_LLM_KEY"]).unwrap_err();
        assert!(err.to_string().contains("MY_LLM_KEY"), "{err}");
        let secret = Capabilities {
            secrets: vec![secret("MY_LLM_KEY", &["api.example.com"])],
            ..Capabilities::default()
        };
        assert!(secret.check_reserved(&[]).is_ok());
        let err = secret.check_reserved(&["MY_LLM_KEY"]).unwrap_err();
        assert!(matches!(err, ReservedName::Secret(_)), "{err}");
        assert!(err.to_string().contains("secret `MY_LLM_KEY`"), "{err}");
    }

    #[test]
    fn calls_see_only_granted_variables() {
        let grants = Grants {
            env: vec![EnvGrant::new("PATH"), EnvGrant::new("ANTHROPIC_API_KEY")],
            ..Grants::default()
        };
        let values = grants.env_values();
        assert!(values.iter().all(|(name, _)| name == "PATH"), "{values:?}");
        assert_eq!(
            values.first().map(|(_, v)| v.clone()),
            std::env::var("PATH").ok()
        );
        assert!(Grants::none().env_values().is_empty());

        let secret = SecretGrant {
            name: "PATH".to_string(),
            header: "X-Key".to_string(),
            format: "{}".to_string(),
            hosts: vec!["a.example.com".to_string()],
        };
        let with_secret = Grants {
            env: vec![EnvGrant::new("PATH")],
            secrets: vec![ResolvedSecret::new(secret, "v".to_string())],
            ..Grants::default()
        };
        assert!(with_secret.env_values().is_empty());
    }
}
