//! Installing, updating and removing plugins: consent, copying into the
//! store, precompiling, and recording the lock entry.
//!
//! - **install** reads a folder or a `.tar.gz` and checks what is cheap
//!   first: `plugin.toml` (name, version), that the name is neither a
//!   built-in plugin's nor installed with other content, the environment it
//!   asks for, the package's files (only those [`super::package`] selects)
//!   and the signature if there is one. A component that exports the hook
//!   interface (read from its bytes) is compiled and asked, with no grants
//!   at all, which events it subscribes to, so the question can say what
//!   it will see and what it may do. It then shows what the plugin requests
//!   in plain words and asks for consent, and only then compiles the other
//!   components into the compile cache, decoding their imports and exports
//!   (see [`super::inspect`]), copies the package into the store and
//!   records the lock entry. Installing content that is already installed
//!   changes nothing (or repairs a damaged store folder).
//! - **update** does the same for a plugin already installed, showing what
//!   changed in its requests: equal or narrower requests proceed without
//!   asking, wider ones need consent again. Capabilities the user revoked
//!   stay revoked.
//! - **grant** and **revoke** adjust what calls get. The lock records what
//!   the manifest requested when the user agreed (`consented`) and what
//!   calls get (`granted`, never more than `consented`): a revoked
//!   capability is simply not given to the plugin's calls, which still run.
//!   `grant` can give back only what the manifest requests.
//! - **remove** deletes the plugin's store folders, lock entry and compiled
//!   components; its data folder is kept unless purged.
//!
//! Each change of the lockfile is a read-modify-write under its
//! cross-process lock ([`Lockfile::modify`]), so concurrent commands keep
//! every effect, and each is recorded in the audit log (who, what changed,
//! from where).

use std::io::{Read, Write};
use std::path::{Component as PathPart, Path, PathBuf};

use super::claude_marketplace::{self, Marketplace};
use super::inspect::{self, InspectError};
use super::lock::{LockComponent, LockEntry, LockError, LockLimits, LockedLockfile, Lockfile};
use super::manifest::{MANIFEST_FILE, Manifest, ManifestError};
use super::store::{
    FileHashes, MAX_PACKAGE_BYTES, MAX_PACKAGE_FILES, PluginStore, SIGNATURE_FILE, StoreError,
    copy_package, hash_files,
};
use super::{claude_import, package, signature};
use crate::audit::AuditLog;
use crate::grants::{Capabilities, CapabilityDiff, CapabilityRef, CapabilityRefError, OwnFolders};
use crate::home::Home;
use crate::hooks::Subscription;
use crate::sandbox::builtin::BUILTIN_PLUGINS;
use crate::sandbox::engine::sha256_hex;
use crate::sandbox::{CacheOutcome, Sandbox};
use crate::timestamp::now_rfc3339;

/// Installing or changing a plugin failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The source does not exist or is not a folder or `.tar.gz`.
    #[error("cannot install from {}: {reason}", path.display())]
    Source {
        /// The source as given.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The archive holds something that must not be unpacked.
    #[error("refusing the archive {}: entry `{entry}` {reason}", archive.display())]
    Archive {
        /// The archive.
        archive: PathBuf,
        /// The entry's path.
        entry: String,
        /// Why.
        reason: String,
    },
    /// `plugin.toml` is missing or invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// A component listed in the manifest is not in the package.
    #[error(
        "plugin.toml lists the component `{path}`, but the package has no such file; build it, or fix `components`"
    )]
    MissingComponent {
        /// The path as listed.
        path: String,
    },
    /// More than one component exports tools.
    #[error(
        "{first} and {second} both export capstan:plugin/tool; a plugin may have one tool component"
    )]
    TwoToolComponents {
        /// One component.
        first: String,
        /// The other.
        second: String,
    },
    /// A component cannot be installed.
    #[error(transparent)]
    Inspect(#[from] InspectError),
    /// A hook component could not say which events it wants.
    #[error(
        "the hook component {component} could not list its subscriptions: {source}; the plugin was not installed"
    )]
    Subscriptions {
        /// The component's path in the package.
        component: String,
        /// What went wrong.
        source: crate::sandbox::CallError,
    },
    /// A component exports the hook interface although its bytes did not
    /// say so before the question was asked.
    #[error(
        "{component} turned out to export the hook interface after consent was asked without it; the plugin was not installed"
    )]
    UndeclaredHook {
        /// The component's path in the package.
        component: String,
    },
    /// The package's files could not be read or stored.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The lockfile could not be read or written.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// What the plugin asks for cannot be fixed now: a program an `exec`
    /// grant names is not on this machine.
    #[error("refusing {name}: plugin.toml {field}: {reason}")]
    Unresolved {
        /// The plugin.
        name: String,
        /// The manifest's key at fault.
        field: String,
        /// Why.
        reason: String,
    },
    /// The plugin asks for a folder that cannot be granted: the root of
    /// the file system or one of capstan's own folders, once resolved.
    #[error("refusing {name}: {source}")]
    Folder {
        /// The plugin.
        name: String,
        /// Why.
        source: crate::grants::GrantError,
    },
    /// The plugin asks for an environment variable, or declares a secret,
    /// that the host keeps to itself.
    #[error("refusing {name}: {reason}")]
    ModelKey {
        /// The plugin.
        name: String,
        /// Which variable, and why.
        reason: String,
    },
    /// The signature is present and cannot be accepted.
    #[error("refusing {name}: its signature cannot be accepted: {reason}")]
    Signature {
        /// The plugin.
        name: String,
        /// Why.
        reason: String,
    },
    /// A `--hook-secret` cannot be granted.
    #[error("{name} was not installed: {reason}")]
    HookSecret {
        /// The plugin.
        name: String,
        /// Why, and what to do.
        reason: String,
    },
    /// The user did not agree.
    #[error("{name} was not installed: consent was not given")]
    ConsentRefused {
        /// The plugin.
        name: String,
    },
    /// The name belongs to a built-in plugin.
    #[error("`{name}` is the name of a built-in plugin; rename the plugin in its plugin.toml")]
    BuiltinName {
        /// The name.
        name: String,
    },
    /// Another version is installed; `install` does not replace it.
    #[error(
        "{name} {installed} is already installed (from {source_path}) with other content; run `capstan plugin update {given}` to replace it and review what changed"
    )]
    AlreadyInstalled {
        /// The plugin.
        name: String,
        /// The installed version.
        installed: String,
        /// Where it came from.
        source_path: String,
        /// The source given now.
        given: String,
    },
    /// Another capstan process changed the plugin while this one was
    /// installing or updating it.
    #[error(
        "{name} was changed by another capstan command while this one was working; nothing was changed by this one: see `capstan plugin info {name}` and run the command again"
    )]
    ChangedMeanwhile {
        /// The plugin.
        name: String,
    },
    /// The plugin is not installed.
    #[error("no plugin called `{name}` is installed{hint}")]
    NotInstalled {
        /// The name.
        name: String,
        /// What to do.
        hint: String,
    },
    /// `grant`/`revoke` named a capability wrongly, or one that is not
    /// there.
    #[error("{name}: {source}")]
    Capability {
        /// The plugin.
        name: String,
        /// What is wrong.
        source: CapabilityRefError,
    },
    /// A file operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// What the user is asked to agree to.
#[derive(Debug, Clone)]
pub struct ConsentRequest {
    /// The plugin.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The whole request in plain words, ready to print (several lines).
    pub text: String,
}

/// What an install or update did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Newly installed.
    Installed {
        /// The plugin.
        name: String,
        /// Its version.
        version: String,
        /// Who signed it, or `unsigned`.
        signer: String,
        /// What was copied into the store.
        size: PackageSize,
    },
    /// The same content was already installed: nothing changed (or the
    /// store folder was repaired).
    Unchanged {
        /// The plugin.
        name: String,
        /// Its version.
        version: String,
        /// Whether damaged or missing files were restored.
        repaired: bool,
    },
    /// Replaced by other content.
    Updated {
        /// The plugin.
        name: String,
        /// The old version.
        from: String,
        /// The new version.
        to: String,
        /// What changed in its requests.
        changes: CapabilityDiff,
        /// Whether consent was asked (the requests widened).
        asked: bool,
        /// What was copied into the store.
        size: PackageSize,
    },
}

/// How much a package holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackageSize {
    /// Its files.
    pub files: usize,
    /// Their bytes, all together.
    pub bytes: u64,
}

impl std::fmt::Display for PackageSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let files = if self.files == 1 { "file" } else { "files" };
        let bytes = self.bytes as f64;
        if self.bytes < 1 << 10 {
            write!(f, "{} {files}, {} bytes", self.files, self.bytes)
        } else if self.bytes < 1 << 20 {
            write!(f, "{} {files}, {:.1} KiB", self.files, bytes / 1024.0)
        } else {
            write!(f, "{} {files}, {:.1} MiB", self.files, bytes / 1048576.0)
        }
    }
}

/// What an install reports while it works, for the front end to show (a
/// bar on a terminal, lines in a log): the installer draws nothing itself.
pub trait InstallProgress: Send + Sync {
    /// Component `component` (a path in the package), number `index` (from
    /// 0) of `total`, starts compiling.
    fn compiling(&self, component: &str, index: usize, total: usize);
    /// The component last started is done: compiled, found already
    /// compiled in the cache, or refused (`None`).
    fn compiled(&self, outcome: Option<CacheOutcome>);
}

/// Reports nothing: for steps that compile nothing, and for tests.
pub struct NoProgress;

impl InstallProgress for NoProgress {
    fn compiling(&self, _component: &str, _index: usize, _total: usize) {}
    fn compiled(&self, _outcome: Option<CacheOutcome>) {}
}

/// Installs, updates and removes plugins in a home.
pub struct Installer<'a> {
    sandbox: &'a Sandbox,
    store: PluginStore,
    /// The user config: trusted publisher keys.
    config_file: PathBuf,
    /// Where refusals and changes are recorded.
    audit_log: PathBuf,
    /// The variable the user's config names for the model's API key, which
    /// no plugin may be granted.
    model_key: Option<String>,
    /// capstan's folders, which no folder granted may reach.
    own: OwnFolders,
    /// Where compile steps are reported.
    progress: &'a dyn InstallProgress,
    /// The plugin to take from a Claude Code marketplace folder.
    pick: Option<String>,
    /// The user's `[exec]` settings, for the sandbox a remote plugin is
    /// fetched in.
    exec_settings: crate::exec::ExecSettings,
    /// The secrets to grant a Claude Code plugin's command hooks, scripts
    /// and inline commands (`--hook-secret`).
    hook_secrets: Vec<String>,
}

/// The kind `plugin grant` and `plugin revoke` take for a secret of a
/// Claude Code plugin's commands.
pub const HOOK_SECRET_KIND: &str = "hook-secret";

/// A package read and checked, not yet compiled nor in the store.
struct Prepared {
    _unpacked: Option<tempfile::TempDir>,
    /// A Claude Code plugin converted to a capstan package, and what of it
    /// was refused.
    imported: Option<crate::plugin::claude_import::Imported>,
    /// The package's `SKILL.md` skills (and Claude Code commands), by path.
    skill_files: Vec<String>,
    root: PathBuf,
    source: String,
    manifest: Manifest,
    files: FileHashes,
    digest: String,
    signer: String,
    size: PackageSize,
    /// Each absolute folder requested, as written, and the folder it is.
    folders: Vec<(String, PathBuf)>,
    /// The remote source the package was fetched from, in words.
    fetched_from: Option<String>,
}

impl<'a> Installer<'a> {
    /// An installer for `home`'s plugins, compiling with `sandbox` and
    /// reporting each compile to `progress`.
    pub fn new(home: &Home, sandbox: &'a Sandbox, progress: &'a dyn InstallProgress) -> Self {
        let settings = std::env::current_dir()
            .ok()
            .and_then(|cwd| crate::config::load(home, &cwd).ok());
        Self {
            sandbox,
            store: PluginStore::new(home.plugins_dir()),
            config_file: home.config_file(),
            audit_log: home.audit_log(),
            model_key: settings
                .as_ref()
                .and_then(|settings| settings.model.api_key_env.clone()),
            exec_settings: settings.map(|settings| settings.exec).unwrap_or_default(),
            own: sandbox.own_folders().clone(),
            progress,
            pick: None,
            hook_secrets: Vec::new(),
        }
    }

    /// The same installer, granting secrets `names` to the command hooks,
    /// scripts and inline commands of the Claude Code plugin it installs.
    pub fn with_hook_secrets(mut self, names: Vec<String>) -> Self {
        self.hook_secrets = names;
        self
    }

    /// Checks the `--hook-secret` names for `prepared`: valid, not the
    /// host's own, and for a Claude Code plugin only; the consent line that
    /// names them.
    fn hook_secrets_consent(&self, prepared: &Prepared) -> Result<String, InstallError> {
        if self.hook_secrets.is_empty() {
            return Ok(String::new());
        }
        let refuse = |reason: String| InstallError::HookSecret {
            name: prepared.manifest.name.clone(),
            reason,
        };
        if prepared.imported.is_none() {
            return Err(refuse(
                "only a Claude Code plugin's command hooks, scripts and inline commands take secrets this way; a capstan plugin requests its secrets in plugin.toml's [capabilities]".to_string(),
            ));
        }
        let keys: Vec<&str> = self.model_key.as_deref().into_iter().collect();
        for name in &self.hook_secrets {
            crate::grants::secrets::check_hook_secret(name, &keys).map_err(refuse)?;
        }
        Ok(format!(
            "  secrets  {}: set as environment variables of its command hooks, their scripts and its inline commands when they run (values from your environment or [secrets] in config.toml, never written to the lock, transcripts or logs)\n",
            self.hook_secrets.join(", ")
        ))
    }

    /// The same installer, taking plugin `plugin` when the source is a
    /// Claude Code marketplace folder
    /// ([`crate::plugin::claude_marketplace`]).
    pub fn picking(mut self, plugin: Option<String>) -> Self {
        self.pick = plugin;
        self
    }

    /// The command grants `git` fetches a remote plugin into `folder`
    /// under: the user's `[exec]` settings (the fetch narrows them to that
    /// folder and the repository's origin), recorded in the audit log.
    fn fetch_grants(&self, folder: &Path) -> Result<crate::exec::ExecGrants, String> {
        let refused = |reason: String| reason;
        let user_home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let mut grants = crate::exec::ExecGrants::resolve(
            &self.exec_settings,
            folder,
            user_home.as_deref(),
            &self.own,
        )
        .map_err(|e| refused(format!("remote plugins cannot be fetched: {e}")))?;
        let log = crate::audit::AuditLog::open(&self.audit_log)
            .map_err(|e| refused(format!("the audit log cannot be opened: {e}")))?;
        grants.audit = Some(crate::audit::AuditScope::new(
            log,
            "plugin-fetch",
            "fetch",
            None,
        ));
        Ok(grants)
    }

    /// The store.
    pub fn store(&self) -> &PluginStore {
        &self.store
    }

    /// The lockfile as it is now.
    pub fn lockfile(&self) -> Result<Lockfile, InstallError> {
        Ok(Lockfile::load(&self.store.lock_path())?)
    }

    /// Installs the plugin at `source` (a folder or a `.tar.gz`): checks its
    /// name, version and conflicts with what is installed, asks `consent`,
    /// and only then compiles its components and records it.
    pub async fn install(
        &self,
        source: &Path,
        consent: &mut dyn FnMut(&ConsentRequest) -> bool,
    ) -> Result<Outcome, InstallError> {
        let prepared = self.prepare(source)?;
        let name = prepared.manifest.name.clone();
        if let Some(entry) = self.lockfile()?.plugins.get(&name) {
            if entry.digest == prepared.digest {
                self.agree_to_moved_folders(&prepared, entry, consent)?;
            }
            return self.already_installed(&prepared, entry, source);
        }
        let hooks = self.hook_subscriptions(&prepared).await?;
        let requested = prepared.manifest.capabilities.clone();
        let mut text = format!(
            "{} {} ({}){} wants:\n{}",
            name,
            prepared.manifest.version,
            prepared.signer,
            prepared
                .fetched_from
                .as_deref()
                .map(|from| format!(", fetched from {from},"))
                .unwrap_or_default(),
            describe_request(&prepared.manifest, &prepared.folders)
        );
        text.push_str(&describe_hooks(&hooks));
        text.push_str(&describe_skills(&prepared));
        text.push_str(&self.hook_secrets_consent(&prepared)?);
        let request = ConsentRequest {
            name: name.clone(),
            version: prepared.manifest.version.clone(),
            text,
        };
        if !consent(&request) {
            return Err(InstallError::ConsentRefused { name });
        }
        let mut components = self.compile(&prepared)?;
        undeclared_hook(&components, &hooks)?;
        hooks.record_in(&mut components);
        let mut locked = Lockfile::modify(&self.store.lock_path())?;
        // Another capstan may have installed it while this one compiled.
        if let Some(entry) = locked.lock.plugins.get(&name).cloned() {
            drop(locked);
            return self.already_installed(&prepared, &entry, source);
        }
        self.commit(&mut locked, &prepared, components, &requested, &requested)?;
        self.record_change(
            &name,
            "install",
            &format!(
                "installed {} ({}, {}); granted: {}",
                prepared.manifest.version,
                prepared.signer,
                prepared.size,
                capabilities_in_one_line(&requested)
            ),
            &prepared.source,
        );
        Ok(Outcome::Installed {
            name,
            version: prepared.manifest.version.clone(),
            signer: prepared.signer.clone(),
            size: prepared.size,
        })
    }

    /// An install of a name that is installed: nothing to do for the same
    /// content, a refusal for other content.
    fn already_installed(
        &self,
        prepared: &Prepared,
        entry: &LockEntry,
        source: &Path,
    ) -> Result<Outcome, InstallError> {
        if entry.digest == prepared.digest {
            return self.unchanged(prepared);
        }
        Err(InstallError::AlreadyInstalled {
            name: prepared.manifest.name.clone(),
            installed: entry.version.clone(),
            source_path: entry.source.clone(),
            given: source.display().to_string(),
        })
    }

    /// What the package's hook components subscribe to: each component
    /// whose bytes say it exports the hook interface is compiled (into the
    /// compile cache, which the install then uses) and asked, with no
    /// grants, for its subscriptions.
    async fn hook_subscriptions(&self, prepared: &Prepared) -> Result<HookReach, InstallError> {
        let mut reach = HookReach::default();
        for listed in &prepared.manifest.components {
            let rel = package::component_path(listed);
            let Some(sha256) = prepared.files.0.get(&rel) else {
                return Err(InstallError::MissingComponent {
                    path: listed.clone(),
                });
            };
            let path = prepared.root.join(&rel);
            let wasm = std::fs::read(&path).map_err(|source| InstallError::Io {
                action: "read",
                path: path.clone(),
                source,
            })?;
            if sha256_hex(&wasm) != *sha256 {
                return Err(InstallError::Io {
                    action: "read",
                    path,
                    source: std::io::Error::other("the file changed while it was being installed"),
                });
            }
            if !inspect::exports_hook(&wasm) {
                continue;
            }
            let loaded = self
                .sandbox
                .load_plugin(&prepared.manifest.name, &wasm, Some(sha256), &rel)
                .map_err(InspectError::from)?;
            let subscriptions = crate::hooks::component::subscriptions(self.sandbox, &loaded)
                .await
                .map_err(|source| InstallError::Subscriptions {
                    component: rel.clone(),
                    source,
                })?;
            reach.components.push((rel, subscriptions));
        }
        Ok(reach)
    }

    /// Replaces an installed plugin with the one at `source`, asking
    /// `consent` only if it requests more than the user agreed to before
    /// (wider capabilities, or hooks where it had none).
    pub async fn update(
        &self,
        source: &Path,
        consent: &mut dyn FnMut(&ConsentRequest) -> bool,
    ) -> Result<Outcome, InstallError> {
        let prepared = self.prepare(source)?;
        let name = prepared.manifest.name.clone();
        let Some(old) = self.lockfile()?.plugins.get(&name).cloned() else {
            return Err(InstallError::NotInstalled {
                name,
                hint: format!(
                    "; install it with `capstan plugin install {}`",
                    source.display()
                ),
            });
        };
        if old.digest == prepared.digest {
            self.agree_to_moved_folders(&prepared, &old, consent)?;
            return self.unchanged(&prepared);
        }
        let requested = prepared.manifest.capabilities.clone();
        let changes = old.consented.diff(&requested);
        let hooks = self.hook_subscriptions(&prepared).await?;
        let gains_hooks = !hooks.components.is_empty() && old.hook_components().next().is_none();
        // Hooks it had before that now subscribe to other events (or whose
        // subscriptions an older capstan did not record) ask again too.
        let old_hooks = old
            .hook_components()
            .map(|c| c.subscriptions.clone())
            .collect::<Option<Vec<_>>>()
            .map(|lists| lists.concat());
        let new_hooks = hooks.all();
        let resubscribes = !gains_hooks
            && old.hook_components().next().is_some()
            && old_hooks
                .as_deref()
                .is_none_or(|old| !crate::hooks::same_subscriptions(old, &new_hooks));
        let moved = moved_folders(&old, &prepared);
        // A Claude Code plugin's sub-agents, command hooks, MCP servers and
        // inline commands are not grants, but they act for the user: new
        // ones ask again.
        let new_parts: Vec<String> = if prepared.imported.is_some() {
            let before = crate::plugin::claude_import::runnable_parts(&old.dir(self.store.root()));
            crate::plugin::claude_import::runnable_parts(&prepared.root)
                .difference(&before)
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        let widened = !requested.is_within(&old.consented)
            || gains_hooks
            || resubscribes
            || !moved.is_empty()
            || !new_parts.is_empty();
        if widened {
            let mut text = format!(
                "{} {} -> {} ({}) asks for more than you granted:\n{changes}",
                name, old.version, prepared.manifest.version, prepared.signer,
            );
            if gains_hooks {
                text.push_str("  it now has hooks, which it did not have before:\n");
                text.push_str(&describe_hooks(&hooks));
            }
            if resubscribes {
                match &old_hooks {
                    Some(old_hooks) => {
                        text.push_str(
                            "  its hooks now subscribe to other events than you agreed to:\n",
                        );
                        text.push_str(&crate::hooks::describe_subscription_change(
                            old_hooks, &new_hooks,
                        ));
                    }
                    None => text.push_str(
                        "  its hooks' events were not recorded when you agreed; they are now:\n",
                    ),
                }
                text.push_str(&describe_hooks(&hooks));
            }
            text.push_str(&describe_moved_folders(&moved));
            if !new_parts.is_empty() {
                text.push_str(
                    "  it now has parts that act for you, which it did not have before:\n",
                );
                for part in &new_parts {
                    text.push_str(&format!("    {part}\n"));
                }
            }
            let request = ConsentRequest {
                name: name.clone(),
                version: prepared.manifest.version.clone(),
                text,
            };
            if !consent(&request) {
                return Err(InstallError::ConsentRefused { name });
            }
        }
        let mut components = self.compile(&prepared)?;
        undeclared_hook(&components, &hooks)?;
        hooks.record_in(&mut components);
        let mut locked = Lockfile::modify(&self.store.lock_path())?;
        // What was agreed to must still be what is installed.
        if locked.lock.plugins.get(&name) != Some(&old) {
            return Err(InstallError::ChangedMeanwhile { name });
        }
        // What the user revoked stays revoked.
        let revoked = old.consented.subtract(&old.granted);
        let granted = requested.subtract(&revoked);
        let new_folder = self.commit(&mut locked, &prepared, components, &requested, &granted)?;
        if old.folder != new_folder {
            let _ = std::fs::remove_dir_all(old.dir(self.store.root()));
        }
        self.forget_compiled(&old, &locked.lock);
        self.record_change(
            &name,
            "update",
            &format!(
                "updated {} -> {} ({}, {}); requests: {}; granted: {}",
                old.version,
                prepared.manifest.version,
                prepared.signer,
                prepared.size,
                diff_in_one_line(&changes),
                capabilities_in_one_line(&granted)
            ),
            &prepared.source,
        );
        drop(locked);
        Ok(Outcome::Updated {
            name,
            from: old.version.clone(),
            to: prepared.manifest.version.clone(),
            changes,
            asked: widened,
            size: prepared.size,
        })
    }

    /// Gives plugin `name` back a capability its manifest requests.
    /// Returns a sentence saying what happened.
    pub fn grant(&self, name: &str, kind: &str, value: &str) -> Result<String, InstallError> {
        if kind == HOOK_SECRET_KIND {
            return self.change_hook_secret(name, value, true);
        }
        let capability = |source| InstallError::Capability {
            name: name.to_string(),
            source,
        };
        let what = CapabilityRef::parse(kind, value).map_err(capability)?;
        let mut locked = Lockfile::modify(&self.store.lock_path())?;
        let entry = installed(&mut locked.lock, name)?;
        if entry.granted.without(&what).is_ok() {
            return Ok(format!("{name} is already granted {what}"));
        }
        entry.granted = entry
            .granted
            .with_requested(&entry.consented, &what)
            .map_err(capability)?;
        let source = entry.source.clone();
        locked.save()?;
        self.record_change(name, "grant", &format!("granted {what}"), &source);
        Ok(format!("granted {name} {what}"))
    }

    /// Takes a capability away from plugin `name`: its calls no longer get
    /// it. Returns a sentence saying what happened.
    pub fn revoke(&self, name: &str, kind: &str, value: &str) -> Result<String, InstallError> {
        if kind == HOOK_SECRET_KIND {
            return self.change_hook_secret(name, value, false);
        }
        let capability = |source| InstallError::Capability {
            name: name.to_string(),
            source,
        };
        let what = CapabilityRef::parse(kind, value).map_err(capability)?;
        let mut locked = Lockfile::modify(&self.store.lock_path())?;
        let entry = installed(&mut locked.lock, name)?;
        entry.granted = entry.granted.without(&what).map_err(capability)?;
        let source = entry.source.clone();
        locked.save()?;
        self.record_change(name, "revoke", &format!("revoked {what}"), &source);
        Ok(format!(
            "revoked {what} from {name}; its calls run without it (`capstan plugin grant {name} {what}` gives it back)"
        ))
    }

    /// Grants (`give`) or revokes secret `secret` to the command hooks,
    /// scripts and inline commands of the Claude Code plugin `name`.
    fn change_hook_secret(
        &self,
        name: &str,
        secret: &str,
        give: bool,
    ) -> Result<String, InstallError> {
        let refuse = |reason: String| InstallError::HookSecret {
            name: name.to_string(),
            reason,
        };
        let keys: Vec<&str> = self.model_key.as_deref().into_iter().collect();
        if give {
            crate::grants::secrets::check_hook_secret(secret, &keys).map_err(refuse)?;
        }
        let mut locked = Lockfile::modify(&self.store.lock_path())?;
        let entry = installed(&mut locked.lock, name)?;
        if give
            && !entry
                .files
                .contains_key(crate::plugin::claude_import::IMPORT_NOTES)
        {
            return Err(refuse(format!(
                "{name} is not a Claude Code plugin; a capstan plugin requests its secrets in plugin.toml, granted with `capstan plugin grant {name} secret NAME`"
            )));
        }
        let held = entry.hook_secrets.iter().any(|s| s == secret);
        let said = match (give, held) {
            (true, true) => return Ok(format!("{name} is already granted hook-secret {secret}")),
            (false, false) => {
                return Ok(format!("{name} is not granted hook-secret {secret}"));
            }
            (true, false) => {
                entry.hook_secrets.push(secret.to_string());
                format!(
                    "granted {name} hook-secret {secret}: set as ${secret} for its command hooks, scripts and inline commands"
                )
            }
            (false, true) => {
                entry.hook_secrets.retain(|s| s != secret);
                format!("revoked hook-secret {secret} from {name}; its commands run without it")
            }
        };
        let source = entry.source.clone();
        locked.save()?;
        let (action, change) = if give {
            ("grant", format!("granted hook-secret {secret}"))
        } else {
            ("revoke", format!("revoked hook-secret {secret}"))
        };
        self.record_change(name, action, &change, &source);
        Ok(said)
    }

    /// Uninstalls plugin `name`: its lock entry, store folders and compiled
    /// components; its data folder too when `purge`. Returns what was kept,
    /// if anything.
    pub fn remove(&self, name: &str, purge: bool) -> Result<Option<PathBuf>, InstallError> {
        let mut locked = Lockfile::modify(&self.store.lock_path())?;
        let Some(entry) = locked.lock.plugins.remove(name) else {
            return Err(InstallError::NotInstalled {
                name: name.to_string(),
                hint: String::new(),
            });
        };
        // The lock first: a failure below leaves stray files, never a lock
        // entry naming files that are gone.
        locked.save()?;
        let data = self.store.data_dir(name);
        let data_note = if purge {
            "its data folder deleted"
        } else {
            "its data folder kept"
        };
        self.record_change(
            name,
            "remove",
            &format!("removed {}; {data_note}", entry.version),
            &entry.source,
        );
        let dir = self.store.plugin_dir(name);
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(InstallError::Io {
                    action: "delete",
                    path: dir,
                    source: e,
                });
            }
            _ => {}
        }
        self.forget_compiled(&entry, &locked.lock);
        drop(locked);
        if purge {
            match std::fs::remove_dir_all(&data) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(InstallError::Io {
                    action: "delete",
                    path: data,
                    source: e,
                }),
                _ => Ok(None),
            }
        } else {
            Ok(data.is_dir().then_some(data))
        }
    }

    /// Removes the compiled forms of `entry`'s components that no other
    /// installed or built-in plugin uses.
    fn forget_compiled(&self, entry: &LockEntry, lock: &Lockfile) {
        for component in &entry.components {
            let in_use = BUILTIN_PLUGINS.iter().any(|p| p.sha256 == component.sha256)
                || lock
                    .plugins
                    .values()
                    .flat_map(|e| &e.components)
                    .any(|c| c.sha256 == component.sha256);
            if !in_use {
                let _ = self.sandbox.compile_cache().remove(&component.sha256);
            }
        }
    }

    /// The same content is installed, but folders it was granted resolve
    /// elsewhere now than when the user agreed: the user is asked about the
    /// folders they are now, and the lock records them if they agree.
    fn agree_to_moved_folders(
        &self,
        prepared: &Prepared,
        entry: &LockEntry,
        consent: &mut dyn FnMut(&ConsentRequest) -> bool,
    ) -> Result<(), InstallError> {
        let name = &prepared.manifest.name;
        let moved = moved_folders(entry, prepared);
        if moved.is_empty() {
            return Ok(());
        }
        let request = ConsentRequest {
            name: name.clone(),
            version: prepared.manifest.version.clone(),
            text: format!(
                "{} {} ({}) is installed, but folders it was granted resolve elsewhere now than when you agreed:\n{}",
                name,
                prepared.manifest.version,
                prepared.signer,
                describe_moved_folders(&moved)
            ),
        };
        if !consent(&request) {
            return Err(InstallError::ConsentRefused { name: name.clone() });
        }
        let folders =
            crate::grants::fs::consented_folders(&prepared.folders).map_err(|source| {
                InstallError::Folder {
                    name: name.clone(),
                    source,
                }
            })?;
        let recorded = Lockfile::complete(&self.store.lock_path(), name, &entry.digest, |e| {
            e.folders = folders;
        })?;
        if !recorded {
            return Err(InstallError::ChangedMeanwhile { name: name.clone() });
        }
        let list: Vec<String> = moved
            .iter()
            .map(|(path, was, now)| format!("{path} is now {} (was {was})", now.display()))
            .collect();
        self.record_change(
            name,
            "update",
            &format!("agreed to moved folders: {}", list.join(", ")),
            &prepared.source,
        );
        Ok(())
    }

    /// The same content is installed: repair its folder if needed.
    fn unchanged(&self, prepared: &Prepared) -> Result<Outcome, InstallError> {
        let name = &prepared.manifest.name;
        let locked = Lockfile::modify(&self.store.lock_path())?;
        let Some(entry) = locked.lock.plugins.get(name) else {
            return Err(InstallError::ChangedMeanwhile { name: name.clone() });
        };
        let dir = entry.dir(self.store.root());
        let listed: Vec<String> = entry.files.keys().cloned().collect();
        let intact = hash_files(&dir, &listed).is_ok_and(|found| found.0 == entry.files);
        if !intact {
            copy_package(&prepared.root, &prepared.files, &dir)?;
        }
        Ok(Outcome::Unchanged {
            name: name.clone(),
            version: entry.version.clone(),
            repaired: !intact,
        })
    }

    /// Copies a prepared package into the store and records it in the
    /// locked lockfile. Returns its folder (relative to the plugins folder).
    fn commit(
        &self,
        locked: &mut LockedLockfile,
        prepared: &Prepared,
        components: Vec<LockComponent>,
        consented: &Capabilities,
        granted: &Capabilities,
    ) -> Result<String, InstallError> {
        let manifest = &prepared.manifest;
        let folder =
            PluginStore::package_folder(&manifest.name, &manifest.version, &prepared.digest);
        let dir = self.store.root().join(&folder);
        copy_package(&prepared.root, &prepared.files, &dir)?;
        let data = self.store.data_dir(&manifest.name);
        std::fs::create_dir_all(&data).map_err(|source| InstallError::Io {
            action: "create the plugin's data folder",
            path: data,
            source,
        })?;
        // An update keeps the secrets granted before.
        let hook_secrets = if self.hook_secrets.is_empty() {
            locked
                .lock
                .plugins
                .get(&manifest.name)
                .map(|old| old.hook_secrets.clone())
                .unwrap_or_default()
        } else {
            self.hook_secrets.clone()
        };
        let folders =
            crate::grants::fs::consented_folders(&prepared.folders).map_err(|source| {
                InstallError::Folder {
                    name: manifest.name.clone(),
                    source,
                }
            })?;
        let entry = LockEntry {
            hook_secrets,
            folders,
            version: manifest.version.clone(),
            source: prepared.source.clone(),
            installed_at: now_rfc3339(),
            signer: prepared.signer.clone(),
            folder: folder.clone(),
            digest: prepared.digest.clone(),
            files: prepared.files.0.clone(),
            components,
            consented: consented.clone(),
            granted: granted.clone(),
            limits: LockLimits {
                memory: manifest.limits.memory,
                timeout_ms: manifest
                    .limits
                    .timeout
                    .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            },
        };
        locked.lock.plugins.insert(manifest.name.clone(), entry);
        locked.save()?;
        Ok(folder)
    }

    /// Reads and checks the package at `source`: its manifest (name and
    /// version), that the name is not a built-in plugin's, what it asks of
    /// the environment, its files and its signature. Nothing is compiled.
    fn prepare(&self, source: &Path) -> Result<Prepared, InstallError> {
        let canonical = source.canonicalize().map_err(|e| InstallError::Source {
            path: source.to_path_buf(),
            reason: match e.kind() {
                std::io::ErrorKind::NotFound => "no such file or folder".to_string(),
                _ => e.to_string(),
            },
        })?;
        let (unpacked, root) = if canonical.is_dir() {
            (None, canonical.clone())
        } else if is_tarball(&canonical) {
            let staging = self.store.staging_dir();
            std::fs::create_dir_all(&staging).map_err(|source| InstallError::Io {
                action: "create",
                path: staging.clone(),
                source,
            })?;
            let temp = tempfile::Builder::new()
                .prefix("unpack-")
                .tempdir_in(&staging)
                .map_err(|source| InstallError::Io {
                    action: "create a folder in",
                    path: staging,
                    source,
                })?;
            unpack(&canonical, temp.path())?;
            let root = package_root(temp.path()).ok_or_else(|| InstallError::Source {
                path: source.to_path_buf(),
                reason: format!(
                    "the archive has no {MANIFEST_FILE} at its top or in a single top folder"
                ),
            })?;
            (Some(temp), root)
        } else {
            return Err(InstallError::Source {
                path: source.to_path_buf(),
                reason: "it is neither a folder nor a .tar.gz archive".to_string(),
            });
        };
        let source_error = |reason| InstallError::Source {
            path: source.to_path_buf(),
            reason,
        };
        let mut shown_source = canonical.display().to_string();
        let mut unpacked = unpacked;
        let mut fetched_from = None;
        let imported = if let Some(plugin) = &self.pick {
            let market = Marketplace::load(&root).map_err(source_error)?;
            let entry = market.entry(plugin).map_err(source_error)?;
            shown_source = format!("{plugin}@{shown_source}");
            if let claude_marketplace::Source::Git(git) = &entry.source {
                let fetched =
                    crate::plugin::remote_source::fetch(git, |folder| self.fetch_grants(folder))
                        .map_err(source_error)?;
                shown_source = format!("{shown_source}, fetched from {}", git.describe());
                fetched_from = Some(git.describe());
                let imported =
                    claude_import::import_entry_at(entry, &fetched.root, &self.store.staging_dir())
                        .map_err(source_error)?;
                unpacked = Some(fetched.dir);
                Some(imported)
            } else {
                Some(
                    claude_import::import_from_marketplace(
                        &market,
                        entry,
                        &self.store.staging_dir(),
                    )
                    .map_err(source_error)?,
                )
            }
        } else if claude_marketplace::is_marketplace_only(&root) {
            let market = Marketplace::load(&root).map_err(source_error)?;
            return Err(source_error(format!(
                "it is a Claude Code marketplace with the plugins {}; pick one with `--plugin NAME` (or NAME@{}), or install them all with `--all`",
                market.names().join(", "),
                source.display()
            )));
        } else if claude_import::is_claude_plugin(&root) {
            Some(claude_import::import(&root, &self.store.staging_dir()).map_err(source_error)?)
        } else {
            None
        };
        let root = imported.as_ref().map_or(root, |i| i.root().to_path_buf());
        let mut manifest = Manifest::load(&root)?;
        if BUILTIN_PLUGINS.iter().any(|p| p.name == manifest.name) {
            return Err(InstallError::BuiltinName {
                name: manifest.name,
            });
        }
        let model_keys: Vec<&str> = self.model_key.iter().map(String::as_str).collect();
        manifest
            .capabilities
            .check_reserved(&model_keys)
            .map_err(|e| InstallError::ModelKey {
                name: manifest.name.clone(),
                reason: e.to_string(),
            })
            .inspect_err(|e| self.record_refusal(&manifest.name, e))?;
        let folders = manifest
            .capabilities
            .resolve_folders(&self.own)
            .map_err(|source| InstallError::Folder {
                name: manifest.name.clone(),
                source,
            })
            .inspect_err(|e| self.record_refusal(&manifest.name, e))?;
        // Fixed now, so the consent text shows them and the lockfile
        // records them: the programs an `exec` grant names, found in PATH.
        manifest.capabilities = manifest
            .capabilities
            .resolve_for_grant()
            .map_err(|bad| InstallError::Unresolved {
                name: manifest.name.clone(),
                field: format!(
                    "capabilities.{}{}",
                    bad.kind.field(),
                    bad.error.field.map(|f| format!(".{f}")).unwrap_or_default()
                ),
                reason: bad.error.message,
            })
            .inspect_err(|e| self.record_refusal(&manifest.name, e))?;
        let selected = package::select(&root, &manifest)?;
        let files = hash_files(&root, &selected)?;
        let skill_files: Vec<String> = files
            .0
            .keys()
            .filter(|rel| crate::plugin::package::skill_file_in_plugin(rel).is_some())
            .cloned()
            .collect();
        // A Claude Code plugin's import refused it already if it brought
        // nothing: its agents or command hooks alone are something.
        let claude_parts = files.0.keys().any(|rel| {
            rel.starts_with("agents/") || rel == crate::plugin::command_hooks::HOOKS_FILE
        }) || files
            .0
            .contains_key(crate::plugin::claude_import::IMPORT_NOTES);
        if manifest.components.is_empty() && skill_files.is_empty() && !claude_parts {
            return Err(InstallError::Source {
                path: source.to_path_buf(),
                reason: format!(
                    "{MANIFEST_FILE} lists no components and the package has no skills (skills/NAME/SKILL.md); list its .wasm files in `components`, or add skills"
                ),
            });
        }
        for listed in &manifest.components {
            if !files.0.contains_key(&package::component_path(listed)) {
                return Err(InstallError::MissingComponent {
                    path: listed.clone(),
                });
            }
        }
        let digest = files.digest();
        let signer =
            verify_package_signature(&root, &manifest.name, &files.listing(), &self.config_file)
                .inspect_err(|e| self.record_refusal(&manifest.name, e))?;
        let size = PackageSize {
            files: files.0.len(),
            bytes: files.total_bytes(&root),
        };
        Ok(Prepared {
            _unpacked: unpacked,
            imported,
            skill_files,
            root,
            source: shown_source,
            manifest,
            files,
            digest,
            signer,
            size,
            folders,
            fetched_from,
        })
    }

    /// Compiles a prepared package's components (refusals are audited).
    fn compile(&self, prepared: &Prepared) -> Result<Vec<LockComponent>, InstallError> {
        self.compile_components(&prepared.root, &prepared.manifest, &prepared.files)
            .inspect_err(|e| {
                if matches!(e, InstallError::Inspect(_)) {
                    self.record_refusal(&prepared.manifest.name, e);
                }
            })
    }

    /// Records in the audit log that `command` changed what `plugin` may
    /// touch.
    fn record_change(&self, plugin: &str, command: &str, change: &str, source: &str) {
        AuditLog::record_change(&self.audit_log, plugin, command, change, source);
    }

    /// Records in the audit log that `plugin` was refused at install.
    fn record_refusal(&self, plugin: &str, error: &InstallError) {
        AuditLog::record_refusal(&self.audit_log, plugin, "install", &error.to_string());
    }

    /// Inspects and compiles every component, reporting each step.
    fn compile_components(
        &self,
        root: &Path,
        manifest: &Manifest,
        files: &FileHashes,
    ) -> Result<Vec<LockComponent>, InstallError> {
        let total = manifest.components.len();
        let mut components: Vec<LockComponent> = Vec::new();
        for (index, listed) in manifest.components.iter().enumerate() {
            let rel = package::component_path(listed);
            let Some(sha256) = files.0.get(&rel).cloned() else {
                return Err(InstallError::MissingComponent {
                    path: listed.clone(),
                });
            };
            let path = root.join(&rel);
            let wasm = std::fs::read(&path).map_err(|source| InstallError::Io {
                action: "read",
                path: path.clone(),
                source,
            })?;
            if sha256_hex(&wasm) != sha256 {
                return Err(InstallError::Io {
                    action: "read",
                    path,
                    source: std::io::Error::other("the file changed while it was being installed"),
                });
            }
            self.progress.compiling(&rel, index, total);
            let info = inspect::inspect(self.sandbox, &wasm, &sha256, &rel, &manifest.capabilities);
            self.progress
                .compiled(info.as_ref().ok().map(|i| i.cache_outcome));
            let info = info?;
            if info.exports.tool {
                if let Some(first) = components
                    .iter()
                    .find(|c| c.exports.iter().any(|e| e == "tool"))
                {
                    return Err(InstallError::TwoToolComponents {
                        first: first.path.clone(),
                        second: rel,
                    });
                }
                // Linking checks every import against the host's linker.
                self.sandbox
                    .load(&manifest.name, &wasm, Some(&sha256), &rel)
                    .map_err(InspectError::from)?;
            } else if info.exports.hook {
                self.sandbox
                    .load_plugin(&manifest.name, &wasm, Some(&sha256), &rel)
                    .map_err(InspectError::from)?;
            }
            components.push(LockComponent {
                path: rel,
                sha256,
                exports: info.exports.names().into_iter().map(String::from).collect(),
                subscriptions: None,
            });
        }
        Ok(components)
    }
}

/// The call site for package signatures: `plugin.minisig` at the package's
/// root signs the package listing. Returns who signed it, or `unsigned`
/// when there is no signature. This build cannot check signatures yet, so
/// a signed package is refused rather than shown as signed or unsigned.
fn verify_package_signature(
    root: &Path,
    name: &str,
    listing: &str,
    config_file: &Path,
) -> Result<String, InstallError> {
    let refuse = |reason: String| InstallError::Signature {
        name: name.to_string(),
        reason,
    };
    if !root.join(SIGNATURE_FILE).exists() {
        return Ok("unsigned".to_string());
    }
    let trusted = signature::load_trusted(config_file).map_err(|e| refuse(e.to_string()))?;
    match signature::check_package(root, listing.as_bytes(), &trusted) {
        Ok(Some(signed)) => Ok(format!("signed by {}", signed.publisher)),
        Ok(None) => Ok("unsigned".to_string()),
        Err(e) => Err(refuse(e.to_string())),
    }
}

fn installed<'l>(lock: &'l mut Lockfile, name: &str) -> Result<&'l mut LockEntry, InstallError> {
    lock.plugins
        .get_mut(name)
        .ok_or_else(|| InstallError::NotInstalled {
            name: name.to_string(),
            hint: "; see `capstan plugin list`".to_string(),
        })
}

fn is_tarball(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    name.ends_with(".tar.gz") || name.ends_with(".tgz")
}

/// The folder holding `plugin.toml` (or a Claude Code plugin's manifest):
/// `dir` itself or its single subfolder.
pub fn package_root(dir: &Path) -> Option<PathBuf> {
    let is_package = |d: &Path| {
        d.join(MANIFEST_FILE).is_file()
            || d.join(crate::plugin::claude_import::CLAUDE_MANIFEST)
                .is_file()
    };
    if is_package(dir) {
        return Some(dir.to_path_buf());
    }
    let entries: Vec<_> = std::fs::read_dir(dir).ok()?.flatten().collect();
    match entries.as_slice() {
        [only] if is_package(&only.path()) => Some(only.path()),
        _ => None,
    }
}

/// What a package's hook components subscribe to, read before consent.
#[derive(Debug, Default)]
struct HookReach {
    /// Each hook component's path in the package, with its subscriptions.
    components: Vec<(String, Vec<Subscription>)>,
}

impl HookReach {
    /// Whether the component at `path` was asked for its subscriptions.
    fn described(&self, path: &str) -> bool {
        self.components.iter().any(|(p, _)| p == path)
    }

    /// Every subscription of every hook component.
    fn all(&self) -> Vec<Subscription> {
        self.components
            .iter()
            .flat_map(|(_, subscriptions)| subscriptions.iter().cloned())
            .collect()
    }

    /// Records in each hook component of `components` what it subscribes
    /// to, as the user was shown.
    fn record_in(&self, components: &mut [LockComponent]) {
        for component in components {
            if let Some((_, subscriptions)) =
                self.components.iter().find(|(p, _)| *p == component.path)
            {
                component.subscriptions = Some(subscriptions.clone());
            }
        }
    }
}

/// The absolute folders granted to `entry` whose path, as written, resolves
/// now (as `prepared` found) to another folder than the lock records:
/// (path, folder agreed to, folder it is now).
fn moved_folders(entry: &LockEntry, prepared: &Prepared) -> Vec<(String, String, PathBuf)> {
    prepared
        .folders
        .iter()
        .filter_map(|(path, now)| {
            let was = entry.folders.get(path)?;
            (Path::new(was) != now).then(|| (path.clone(), was.clone(), now.clone()))
        })
        .collect()
}

/// The consent lines about moved folders (see [`moved_folders`]).
fn describe_moved_folders(moved: &[(String, String, PathBuf)]) -> String {
    moved
        .iter()
        .map(|(path, was, now)| {
            format!(
                "  ~ files    {path} is now {}   (when you agreed it was {was})\n",
                now.display()
            )
        })
        .collect()
}

/// Refuses components that export hooks the question did not describe.
fn undeclared_hook(components: &[LockComponent], hooks: &HookReach) -> Result<(), InstallError> {
    match components
        .iter()
        .find(|c| c.exports.iter().any(|e| e == "hook") && !hooks.described(&c.path))
    {
        Some(component) => Err(InstallError::UndeclaredHook {
            component: component.path.clone(),
        }),
        None => Ok(()),
    }
}

/// The consent lines about hooks: that the plugin sees every event it
/// subscribes to, as it happens, and what it may do with each — deny or
/// change tool calls, answer permission questions, block prompts.
fn describe_hooks(reach: &HookReach) -> String {
    if reach.components.is_empty() {
        return String::new();
    }
    let subscriptions: Vec<&Subscription> = reach
        .components
        .iter()
        .flat_map(|(_, subscriptions)| subscriptions)
        .collect();
    if subscriptions.is_empty() {
        return "  hooks    none: its hook component subscribes to no event\n".to_string();
    }
    let mut text = String::from(
        "  hooks    runs on every matching event of every session, and sees what it carries:\n",
    );
    for subscription in subscriptions {
        text.push_str(&format!("             {}\n", subscription.describe()));
    }
    text
}

/// The consent lines about skills: which the package brings, and for a
/// Claude Code plugin what was not installed and why.
fn describe_skills(prepared: &Prepared) -> String {
    let mut text = String::new();
    if !prepared.skill_files.is_empty() {
        let inline: Vec<&str> = prepared
            .skill_files
            .iter()
            .filter(|rel| {
                std::fs::read_to_string(prepared.root.join(rel))
                    .is_ok_and(|text| crate::plugin::claude_import::has_inline_commands(&text))
            })
            .map(String::as_str)
            .collect();
        text.push_str(&format!(
            "  skills   {} (instructions for the model{}; the model may read the plugin's files, read-only)\n",
            prepared.skill_files.join(", "),
            if inline.is_empty() {
                "; they run no code"
            } else {
                ""
            }
        ));
        if !inline.is_empty() {
            text.push_str(&format!(
                "  inline commands in {} run when the skill loads, in the OS sandbox: they read the workspace and the skill's folder (read-only), no network, no secrets or environment variables beyond PATH, HOME, LANG, TERM, TMPDIR\n",
                inline.join(", ")
            ));
        }
    }
    if let Some(imported) = &prepared.imported {
        if !imported.skills.is_empty() {
            text.push_str(&format!(
                "  imported from a Claude Code plugin: {}\n",
                imported.skills.join(", ")
            ));
        }
        for line in &imported.agents {
            text.push_str(&format!("  agent    {line}\n"));
        }
        for line in &imported.output_styles {
            text.push_str(&format!("  output style  {line}\n"));
        }
        for (kind, line) in &imported.hooks {
            text.push_str(&format!("  {kind} hook  {line}\n"));
        }
        if !imported.files.is_empty() {
            let runs_own = imported
                .mcp_servers
                .iter()
                .any(|line| line.contains(crate::plugin::claude_import::PLUGIN_ROOT_VAR));
            text.push_str(match (imported.hooks.is_empty(), runs_own) {
                (true, false) => "  files    kept in the plugin's folder, which the model may read (read-only); none is run:\n",
                (false, false) => "  files    kept in the plugin's folder, which the model may read (read-only); none is run but by the command hooks above:\n",
                (true, true) => "  files    kept in the plugin's folder, which the model may read (read-only); none is run but by the MCP servers above:\n",
                (false, true) => "  files    kept in the plugin's folder, which the model may read (read-only); none is run but by the command hooks and MCP servers above:\n",
            });
            for line in &imported.files {
                text.push_str(&format!("    {line}\n"));
            }
        }
        if !imported.mcp_servers.is_empty() {
            text.push_str("  MCP servers (their tools become mcp__PLUGIN-SERVER__TOOL):\n");
            for line in &imported.mcp_servers {
                text.push_str(&format!("    {line}\n"));
            }
        }
        if !imported.lsp_servers.is_empty() {
            text.push_str("  LSP servers (code intelligence through the `lsp` tool and diagnostics after edits; each started when a file it serves is first used; the program is expected on PATH, as in Claude Code):\n");
            for line in &imported.lsp_servers {
                text.push_str(&format!("    {line}\n"));
            }
        }
        if !imported.warnings.is_empty() {
            text.push_str("  skipped  not imported:\n");
            for line in &imported.warnings {
                text.push_str(&format!("    {line}\n"));
            }
        }
        if !imported.refused.is_empty() {
            text.push_str("  not installed:\n");
            for line in &imported.refused {
                text.push_str(&format!("    {line}\n"));
            }
        }
    }
    text
}

/// The components an archive's `plugin.toml` lists (at its top or in a
/// single top folder), as paths inside the archive; none when it has no
/// readable manifest (unpacking then reports what is wrong).
fn archive_components(archive: &Path) -> Vec<String> {
    let Ok(file) = std::fs::File::open(archive) else {
        return Vec::new();
    };
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let Ok(entries) = tar.entries() else {
        return Vec::new();
    };
    let mut found: Vec<(String, Vec<String>)> = Vec::new();
    // Raw, as `unpack` reads it: long-name records are not read here at
    // all (a manifest's path is short), so none can make this hold much.
    for entry in entries.raw(true) {
        let Ok(mut entry) = entry else {
            break;
        };
        let kind = entry.header().entry_type();
        if ArchiveExtension::of(kind).is_some() {
            continue;
        }
        let Some(rel) = entry.path().ok().and_then(|p| package::relative(&p)) else {
            continue;
        };
        let prefix = match rel.rsplit_once('/') {
            None if rel == MANIFEST_FILE => String::new(),
            Some((top, MANIFEST_FILE)) if !top.contains('/') => format!("{top}/"),
            _ => continue,
        };
        if !(kind.is_file() || kind.is_contiguous()) || entry.size() > 1 << 20 {
            continue;
        }
        let mut text = String::new();
        if (&mut entry)
            .take(1 << 20)
            .read_to_string(&mut text)
            .is_err()
        {
            continue;
        }
        if let Ok(manifest) = Manifest::parse(&text, Path::new(MANIFEST_FILE)) {
            let components = manifest
                .components
                .iter()
                .map(|c| format!("{prefix}{}", package::component_path(c)))
                .collect();
            found.push((prefix, components));
        }
    }
    // The top-level manifest is the package's, if there is one.
    found.sort_by_key(|(prefix, _)| !prefix.is_empty());
    found.into_iter().next().map(|(_, c)| c).unwrap_or_default()
}

/// Unpacks a `.tar.gz` into `into`, refusing absolute paths, `..`, links,
/// device files and anything past the size cap. What is inside `target/`,
/// `node_modules/` or `__pycache__/` is passed by (links included) unless
/// it is a component the archive's `plugin.toml` lists. An install then
/// finds the package in `into` with [`package_root`].
pub fn unpack(archive: &Path, into: &Path) -> Result<(), InstallError> {
    let components = archive_components(archive);
    let refuse = |entry: &str, reason: &str| InstallError::Archive {
        archive: archive.to_path_buf(),
        entry: entry.to_string(),
        reason: reason.to_string(),
    };
    let file = std::fs::File::open(archive).map_err(|source| InstallError::Io {
        action: "open",
        path: archive.to_path_buf(),
        source,
    })?;
    let unreadable = |e: std::io::Error| InstallError::Source {
        path: archive.to_path_buf(),
        reason: format!("it is not a readable .tar.gz archive ({e})"),
    };
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut total = 0u64;
    let mut count = 0usize;
    // The archive is read raw: long names (GNU `L` entries, PAX `path`
    // records) are read here, each checked against its cap before a byte
    // of it is held, instead of by the tar crate, which reads them whole.
    let mut long_name: Option<Vec<u8>> = None;
    for entry in tar.entries().map_err(unreadable)?.raw(true) {
        let mut entry = entry.map_err(unreadable)?;
        let kind = entry.header().entry_type();
        if let Some(extension) = ArchiveExtension::of(kind) {
            let header_name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            let size = entry.header().entry_size().map_err(unreadable)?;
            let cap = extension.cap();
            if size > cap {
                return Err(refuse(
                    &header_name,
                    &format!(
                        "is a {} of {size} bytes; at most {cap} are read, so the archive was refused",
                        extension.name()
                    ),
                ));
            }
            let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            (&mut entry)
                .take(cap)
                .read_to_end(&mut data)
                .map_err(unreadable)?;
            match extension {
                ArchiveExtension::GnuLongName => {
                    while data.last() == Some(&0) {
                        data.pop();
                    }
                    long_name = Some(data);
                }
                ArchiveExtension::GnuLongLink => {
                    return Err(refuse(
                        &header_name,
                        "names a link target; packages may hold only plain files and folders",
                    ));
                }
                ArchiveExtension::PaxLocal => {
                    for record in tar::PaxExtensions::new(&data) {
                        let record = record.map_err(unreadable)?;
                        match record.key_bytes() {
                            b"path" => long_name = Some(record.value_bytes().to_vec()),
                            b"linkpath" => {
                                return Err(refuse(
                                    &header_name,
                                    "names a link target; packages may hold only plain files and folders",
                                ));
                            }
                            b"size" => {
                                return Err(refuse(
                                    &header_name,
                                    "sets an entry's size in a PAX record, which a plugin package never needs",
                                ));
                            }
                            _ => {}
                        }
                    }
                }
                ArchiveExtension::PaxGlobal => {}
            }
            continue;
        }
        let name = long_name
            .take()
            .unwrap_or_else(|| entry.path_bytes().into_owned());
        let Ok(name) = String::from_utf8(name) else {
            return Err(refuse(
                &String::from_utf8_lossy(&entry.path_bytes()),
                "has a name that is not UTF-8",
            ));
        };
        let raw = PathBuf::from(&name);
        let shown = name;
        let mut rel = PathBuf::new();
        for part in raw.components() {
            match part {
                PathPart::Normal(p) => rel.push(p),
                PathPart::CurDir => {}
                PathPart::ParentDir => {
                    return Err(refuse(&shown, "leads out of the package with `..`"));
                }
                PathPart::RootDir | PathPart::Prefix(_) => {
                    return Err(refuse(&shown, "has an absolute path"));
                }
            }
        }
        if !package::unpack_wanted(&package::relative(&rel).unwrap_or_default(), &components) {
            continue;
        }
        if rel.as_os_str().is_empty() {
            if kind.is_dir() {
                continue;
            }
            return Err(refuse(&shown, "has no name"));
        }
        let target = into.join(&rel);
        if kind.is_dir() {
            std::fs::create_dir_all(&target).map_err(|source| InstallError::Io {
                action: "create",
                path: target,
                source,
            })?;
            continue;
        }
        if !(kind.is_file() || kind.is_contiguous()) {
            let what = if kind.is_symlink() || kind.is_hard_link() {
                "is a link; packages may hold only plain files and folders"
            } else {
                "is a device, pipe or other special file; packages may hold only plain files and folders"
            };
            return Err(refuse(&shown, what));
        }
        count += 1;
        if count > MAX_PACKAGE_FILES {
            return Err(refuse(&shown, "is one file too many for a plugin package"));
        }
        let budget = MAX_PACKAGE_BYTES.saturating_sub(total);
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir).map_err(|source| InstallError::Io {
                action: "create",
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => refuse(&shown, "appears twice in the archive"),
                _ => InstallError::Io {
                    action: "write",
                    path: target.clone(),
                    source: e,
                },
            })?;
        let written =
            std::io::copy(&mut (&mut entry).take(budget + 1), &mut out).map_err(unreadable)?;
        total += written;
        if total > MAX_PACKAGE_BYTES {
            return Err(refuse(
                &shown,
                &format!(
                    "takes the package past {} MiB, the most a plugin may hold",
                    MAX_PACKAGE_BYTES >> 20
                ),
            ));
        }
        out.flush().map_err(|source| InstallError::Io {
            action: "write",
            path: target,
            source,
        })?;
    }
    Ok(())
}

/// The most bytes of an entry's name read from an archive (a GNU long-name
/// entry); real names are far shorter.
const MAX_ARCHIVE_NAME: u64 = 4096;

/// The most bytes of a PAX record block read from an archive.
const MAX_ARCHIVE_PAX: u64 = 64 << 10;

/// An archive entry that describes the next one rather than holding a file.
#[derive(Debug, Clone, Copy)]
enum ArchiveExtension {
    /// GNU `L`: the next entry's name.
    GnuLongName,
    /// GNU `K`: the next entry's link target.
    GnuLongLink,
    /// PAX `x`: records for the next entry.
    PaxLocal,
    /// PAX `g`: records for every later entry.
    PaxGlobal,
}

impl ArchiveExtension {
    fn of(kind: tar::EntryType) -> Option<Self> {
        if kind.is_gnu_longname() {
            Some(Self::GnuLongName)
        } else if kind.is_gnu_longlink() {
            Some(Self::GnuLongLink)
        } else if kind.is_pax_local_extensions() {
            Some(Self::PaxLocal)
        } else if kind.is_pax_global_extensions() {
            Some(Self::PaxGlobal)
        } else {
            None
        }
    }

    /// The most bytes of it that are read.
    fn cap(self) -> u64 {
        match self {
            Self::GnuLongName | Self::GnuLongLink => MAX_ARCHIVE_NAME,
            Self::PaxLocal | Self::PaxGlobal => MAX_ARCHIVE_PAX,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::GnuLongName => "GNU long-name entry",
            Self::GnuLongLink => "GNU long-link entry",
            Self::PaxLocal | Self::PaxGlobal => "PAX header",
        }
    }
}

/// A request in plain words, one capability per line, indented; each
/// absolute folder of `folders` that is another folder is named too.
pub fn describe_request(manifest: &Manifest, folders: &[(String, PathBuf)]) -> String {
    let mut text: String = manifest
        .capabilities
        .describe_resolved(folders)
        .iter()
        .map(|line| format!("  {line}\n"))
        .collect();
    let mut limits = Vec::new();
    if let Some(memory) = manifest.limits.memory {
        limits.push(format!("memory up to {} MiB", memory >> 20));
    }
    if let Some(timeout) = manifest.limits.timeout {
        limits.push(format!("{:.1}s per call", timeout.as_secs_f64()));
    }
    if !limits.is_empty() {
        text.push_str(&format!("  limits   {}\n", limits.join(", ")));
    }
    text
}

/// Capabilities in plain words, one per line, indented; `files none` and
/// so on for kinds not requested, so the user sees what is *not* asked.
pub fn describe_capabilities(caps: &Capabilities) -> String {
    caps.describe()
        .iter()
        .map(|line| format!("  {line}\n"))
        .collect()
}

/// Capabilities on one line: the kinds granted, `; `-separated, or `no
/// capabilities`.
pub fn capabilities_in_one_line(caps: &Capabilities) -> String {
    let parts: Vec<String> = caps
        .describe()
        .iter()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|line| !line.ends_with(" none"))
        .collect();
    if parts.is_empty() {
        "no capabilities".to_string()
    } else {
        parts.join("; ")
    }
}

/// A change of requests on one line, `; `-separated.
fn diff_in_one_line(diff: &CapabilityDiff) -> String {
    diff.to_string()
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grants::{Access, EnvGrant, FsRequest, NetGrant};

    fn net(url: &str) -> NetGrant {
        serde_json::from_value(serde_json::Value::String(url.into())).unwrap()
    }

    fn caps(fs: &[(&str, Access)], nets: &[&str], env: &[&str]) -> Capabilities {
        Capabilities {
            fs: fs
                .iter()
                .map(|(p, a)| FsRequest {
                    path: p.to_string(),
                    access: *a,
                })
                .collect(),
            net: nets.iter().map(|n| net(n)).collect(),
            env: env.iter().map(|e| EnvGrant::new(e)).collect(),
            secrets: Vec::new(),
            exec: Vec::new(),
        }
    }

    #[test]
    fn requests_read_in_plain_words() {
        let text = describe_capabilities(&caps(&[], &["https://api.example"], &[]));
        assert!(text.contains("network  https://api.example"), "{text}");
        assert!(text.contains("files    none"), "{text}");
    }

    #[test]
    fn revoked_items_stay_revoked_through_subtract() {
        let all = caps(&[], &["https://a.example", "https://b.example"], &["TZ"]);
        let granted = caps(&[], &["https://a.example"], &["TZ"]);
        let revoked = all.subtract(&granted);
        assert_eq!(revoked.net, vec![net("https://b.example")]);
        assert!(revoked.env.is_empty());
    }

    fn tarball(entries: &[(&str, &[u8], tar::EntryType)]) -> tempfile::NamedTempFile {
        let file = tempfile::Builder::new()
            .suffix(".tar.gz")
            .tempfile()
            .unwrap();
        let gz = flate2::write::GzEncoder::new(file.reopen().unwrap(), flate2::Compression::fast());
        let mut builder = tar::Builder::new(gz);
        for (path, data, kind) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(*kind);
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            // Written raw so that hostile names reach the reader unchanged.
            let name = &mut header.as_old_mut().name;
            name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_cksum();
            builder.append(&header, *data).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap();
        file
    }

    #[test]
    fn long_names_are_read_up_to_their_cap() {
        // A long name the tar crate writes as a GNU long-name entry.
        let long = format!("pkg/{}a.wasm", format!("{}/", "d".repeat(50)).repeat(5));
        let file = tempfile::Builder::new()
            .suffix(".tar.gz")
            .tempfile()
            .unwrap();
        let gz = flate2::write::GzEncoder::new(file.reopen().unwrap(), flate2::Compression::fast());
        let mut builder = tar::Builder::new(gz);
        let mut header = tar::Header::new_gnu();
        header.set_size(1);
        header.set_mode(0o644);
        builder.append_data(&mut header, &long, &b"y"[..]).unwrap();
        builder.into_inner().unwrap().finish().unwrap();
        let into = tempfile::tempdir().unwrap();
        unpack(file.path(), into.path()).unwrap();
        assert_eq!(std::fs::read(into.path().join(&long)).unwrap(), b"y");

        // One past the cap is refused before it is read.
        let bomb = tarball(&[(
            "././@LongLink",
            &vec![b'a'; MAX_ARCHIVE_NAME as usize + 1],
            tar::EntryType::GNULongName,
        )]);
        let into = tempfile::tempdir().unwrap();
        let err = unpack(bomb.path(), into.path()).unwrap_err().to_string();
        assert!(
            err.contains("GNU long-name entry of 4097 bytes") && err.contains("at most 4096"),
            "{err}"
        );
        let pax = tarball(&[(
            "pax",
            &vec![b'a'; MAX_ARCHIVE_PAX as usize + 1],
            tar::EntryType::XHeader,
        )]);
        let err = unpack(pax.path(), into.path()).unwrap_err().to_string();
        assert!(err.contains("PAX header of 65537 bytes"), "{err}");
    }

    #[test]
    fn archives_unpack_plain_files_only() {
        let good = tarball(&[
            ("pkg/plugin.toml", b"x", tar::EntryType::Regular),
            ("pkg/sub/a.wasm", b"y", tar::EntryType::Regular),
        ]);
        let into = tempfile::tempdir().unwrap();
        unpack(good.path(), into.path()).unwrap();
        assert_eq!(package_root(into.path()).unwrap(), into.path().join("pkg"));
        assert_eq!(
            std::fs::read(into.path().join("pkg/sub/a.wasm")).unwrap(),
            b"y"
        );

        for (name, kind, expected) in [
            ("../evil", tar::EntryType::Regular, "`..`"),
            ("/etc/evil", tar::EntryType::Regular, "absolute"),
            ("link", tar::EntryType::Symlink, "link"),
            ("dev", tar::EntryType::Char, "device"),
        ] {
            let bad = tarball(&[(name, b"", kind)]);
            let into = tempfile::tempdir().unwrap();
            let err = unpack(bad.path(), into.path()).unwrap_err().to_string();
            assert!(err.contains(expected) && err.contains(name), "{err}");
        }
    }

    /// What an install reported, one line per step.
    #[derive(Default)]
    struct Recorded(std::sync::Mutex<Vec<String>>);

    impl InstallProgress for Recorded {
        fn compiling(&self, component: &str, index: usize, total: usize) {
            let line = format!("compiling {component} {}/{total}", index + 1);
            self.0.lock().unwrap().push(line);
        }

        fn compiled(&self, outcome: Option<CacheOutcome>) {
            self.0.lock().unwrap().push(format!("compiled {outcome:?}"));
        }
    }

    #[tokio::test]
    async fn an_install_reports_each_compile_through_its_progress() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().join("home"), dir.path().join("cache"));
        let sandbox = Sandbox::new(&home).unwrap();
        let fs = crate::sandbox::builtin::find("fs").unwrap();
        let package = |name: &str| {
            let root = dir.path().join(name);
            std::fs::create_dir_all(&root).unwrap();
            std::fs::write(root.join("tool.wasm"), fs.wasm).unwrap();
            std::fs::write(
                root.join("plugin.toml"),
                format!(
                    "name = \"{name}\"\nversion = \"1.0.0\"\ndescription = \"Files\"\ncomponents = [\"tool.wasm\"]\n"
                ),
            )
            .unwrap();
            root
        };
        let recorded = Recorded::default();
        let installer = Installer::new(&home, &sandbox, &recorded);
        for name in ["files", "more-files"] {
            installer
                .install(&package(name), &mut |_| true)
                .await
                .unwrap();
        }
        // The second package holds the same component, already compiled.
        assert_eq!(
            *recorded.0.lock().unwrap(),
            [
                "compiling tool.wasm 1/1",
                "compiled Some(Compiled)",
                "compiling tool.wasm 1/1",
                "compiled Some(Hit)",
            ]
        );
    }
}
