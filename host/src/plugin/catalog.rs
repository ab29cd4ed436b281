//! The plugins available to this process, by name.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::availability::{Unavailable, UnavailablePlugins};
use super::lock::{LockEntry, LockError, Lockfile};
use super::manifest::Manifest;
use super::readable::ReadablePluginFiles;
use super::store::PluginStore;
use crate::audit::{AuditError, AuditLog};
use crate::grants::secrets::SecretError;
use crate::grants::{
    Access, ConsentedFolders, GrantError, Grants, OwnFolders, PrepareError, SecretValues,
};
use crate::home::Home;
use crate::hooks::Subscription;
use crate::model::valid_tool_name;
use crate::sandbox::builtin::{BUILTIN_PLUGINS, BuiltinPlugin};
use crate::sandbox::engine::sha256_hex;
use crate::sandbox::{Limits, LoadError, LoadedComponent, Sandbox};

/// Where a plugin's component comes from.
#[derive(Debug, Clone)]
pub enum PluginSource {
    /// Embedded in the binary.
    Builtin(&'static BuiltinPlugin),
    /// A component file given on the command line.
    File(PathBuf),
    /// Installed with `capstan plugin install`, run under its grants.
    Installed(Arc<InstalledPlugin>),
}

/// A plugin could not be added or found.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// No plugin by that name.
    #[error("there is no plugin called `{name}`; available: {}", known.join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: Vec<String>,
    },
    /// Two plugins would share a name.
    #[error("a plugin called `{0}` is already loaded; give the file another name with NAME=PATH")]
    Duplicate(String),
    /// The name cannot be used.
    #[error(
        "`{0}` cannot be a plugin name: use lowercase letters, digits, `-` and `_`, starting with a letter (write NAME=PATH to choose one)"
    )]
    BadName(String),
    /// The component file is missing.
    #[error("cannot read the plugin file {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The component could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The lockfile could not be read.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// An installed plugin's files differ from what was installed.
    #[error("{0}")]
    Integrity(String),
    /// An installed plugin's manifest requests more than the user agreed to.
    #[error("{0}")]
    NeedsConsent(String),
    /// The plugin offers hooks but no tools.
    #[error(
        "plugin {0} offers hooks, not tools; it runs in agent sessions on the events it subscribes to (see `capstan plugin info {0}`)"
    )]
    NoTools(String),
}

/// A plugin installed in the store, as its lock entry records it.
#[derive(Debug)]
pub struct InstalledPlugin {
    /// Its name.
    pub name: String,
    /// Its lock entry.
    pub entry: LockEntry,
    /// Its store folder.
    pub dir: PathBuf,
    /// Its own data folder.
    pub data_dir: PathBuf,
    /// The audit log its calls' capability decisions go to.
    pub audit_log: PathBuf,
    /// The user config, where secret values may be kept.
    pub config_file: PathBuf,
    /// The lockfile, where what an older capstan did not record is
    /// completed at first use.
    lock_path: PathBuf,
    /// The verified components' bytes by path, or why the plugin was
    /// refused; checked once per process.
    checked: OnceLock<Result<Arc<ComponentBytes>, Refusal>>,
    /// The folders the user agreed to, completed once per process.
    folders: OnceLock<ConsentedFolders>,
}

/// The bytes of an installed plugin's components, by relative path.
type ComponentBytes = std::collections::BTreeMap<String, Arc<[u8]>>;

/// Why an installed plugin does not load.
#[derive(Debug, Clone)]
enum Refusal {
    Integrity(String),
    NeedsConsent(String),
}

impl From<Refusal> for CatalogError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Integrity(m) => Self::Integrity(m),
            Refusal::NeedsConsent(m) => Self::NeedsConsent(m),
        }
    }
}

impl InstalledPlugin {
    /// Plugin `name` of `home`'s store, as its lock entry records it.
    pub fn new(home: &Home, name: &str, entry: LockEntry) -> Self {
        let store = PluginStore::new(home.plugins_dir());
        Self {
            dir: entry.dir(store.root()),
            data_dir: store.data_dir(name),
            audit_log: home.audit_log(),
            config_file: home.config_file(),
            lock_path: store.lock_path(),
            name: name.to_string(),
            entry,
            checked: OnceLock::new(),
            folders: OnceLock::new(),
        }
    }

    /// The folder each absolute path granted resolved to when the user
    /// agreed, as the lock records it. An entry written before capstan
    /// recorded them is completed with what they resolve to now, once, and
    /// the lockfile and the audit log say so: the user agreed to them as
    /// they were, and from then on they are held there.
    fn consented_folders(&self, own: &OwnFolders) -> ConsentedFolders {
        self.folders
            .get_or_init(|| {
                let mut folders = self.entry.folders.clone();
                let mut added = ConsentedFolders::new();
                for request in &self.entry.consented.fs {
                    if request.path.starts_with('$') || folders.contains_key(&request.path) {
                        continue;
                    }
                    if let Ok(Some(real)) = request.resolve_for_consent(own)
                        && let Some(real) = real.to_str()
                    {
                        added.insert(request.path.clone(), real.to_string());
                    }
                }
                if added.is_empty() {
                    return folders;
                }
                let recorded = Lockfile::complete(
                    &self.lock_path,
                    &self.name,
                    &self.entry.digest,
                    |entry| entry.folders.extend(added.clone()),
                );
                if matches!(recorded, Ok(true)) {
                    let list: Vec<String> = added
                        .iter()
                        .map(|(path, real)| format!("{path} is {real}"))
                        .collect();
                    AuditLog::record_change(
                        &self.audit_log,
                        &self.name,
                        "load",
                        &format!(
                            "recorded the folders its grants resolve to, which the lockfile did not hold yet: {}",
                            list.join(", ")
                        ),
                        &self.entry.source,
                    );
                }
                folders.extend(added);
                folders
            })
            .clone()
    }

    /// Checks that hook component `path` subscribes to what the user
    /// agreed to (`subscriptions`, asked of it now), as the lock records
    /// it; an entry written before capstan recorded them is completed with
    /// these (see [`InstalledPlugin::consented_folders`] for why).
    pub fn check_subscriptions(
        &self,
        path: &str,
        subscriptions: &[Subscription],
    ) -> Result<(), CatalogError> {
        let Some(component) = self.entry.components.iter().find(|c| c.path == path) else {
            return Err(CatalogError::Integrity(format!(
                "refusing to load plugin {}: the lockfile names no component {path}; {}",
                self.name,
                self.fix()
            )));
        };
        match &component.subscriptions {
            Some(agreed) if crate::hooks::same_subscriptions(agreed, subscriptions) => Ok(()),
            Some(agreed) => {
                let reason = format!(
                    "refusing to run the hooks of plugin {}: its component {path} now subscribes to other events than you agreed to:\n{}review and agree with `capstan plugin update {}`",
                    self.name,
                    crate::hooks::describe_subscription_change(agreed, subscriptions),
                    self.entry.source
                );
                AuditLog::record_refusal(&self.audit_log, &self.name, "load", &reason);
                Err(CatalogError::NeedsConsent(reason))
            }
            None => {
                let path = path.to_string();
                let subscriptions = subscriptions.to_vec();
                let recorded =
                    Lockfile::complete(&self.lock_path, &self.name, &self.entry.digest, |entry| {
                        for component in &mut entry.components {
                            if component.path == path && component.subscriptions.is_none() {
                                component.subscriptions = Some(subscriptions.clone());
                            }
                        }
                    });
                if matches!(recorded, Ok(true)) {
                    AuditLog::record_change(
                        &self.audit_log,
                        &self.name,
                        "load",
                        &format!(
                            "recorded the events its hook component {path} subscribes to, which the lockfile did not hold yet"
                        ),
                        &self.entry.source,
                    );
                }
                Ok(())
            }
        }
    }

    /// Whether its hooks guard something (see [`crate::hooks::guards`]),
    /// as the lock records its subscriptions; a hook component whose
    /// subscriptions the lock does not hold counts as a guard.
    pub fn has_guard_hooks(&self) -> bool {
        self.entry
            .hook_components()
            .any(|c| c.subscriptions.as_deref().is_none_or(crate::hooks::guards))
    }

    /// Checks, once per process, that every file is as installed and that
    /// the manifest asks for nothing beyond what the user agreed to, and
    /// returns its components' bytes.
    fn verified(&self) -> Result<Arc<ComponentBytes>, CatalogError> {
        self.checked
            .get_or_init(|| {
                self.check().inspect_err(|refusal| {
                    let (Refusal::Integrity(reason) | Refusal::NeedsConsent(reason)) = refusal;
                    AuditLog::record_refusal(&self.audit_log, &self.name, "load", reason);
                })
            })
            .clone()
            .map_err(CatalogError::from)
    }

    fn check(&self) -> Result<Arc<ComponentBytes>, Refusal> {
        let name = &self.name;
        let source = &self.entry.source;
        let mut components = ComponentBytes::new();
        for (rel, expected) in &self.entry.files {
            let path = self.dir.join(rel);
            let problem = match std::fs::read(&path) {
                Ok(bytes) if sha256_hex(&bytes) == *expected => {
                    if self.entry.components.iter().any(|c| c.path == *rel) {
                        components.insert(rel.clone(), Arc::from(bytes));
                    }
                    continue;
                }
                Ok(_) => "has changed since it was installed",
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => "is missing",
                Err(_) => "cannot be read",
            };
            return Err(Refusal::Integrity(format!(
                "refusing to load plugin {name}: its file {rel} ({}) {problem}; reinstall it with `capstan plugin install {source}`, or remove it with `capstan plugin remove {name}`",
                path.display()
            )));
        }
        let manifest = Manifest::load(&self.dir).map_err(|e| {
            Refusal::Integrity(format!(
                "refusing to load plugin {name}: {e}; reinstall it with `capstan plugin install {source}`"
            ))
        })?;
        if !manifest.capabilities.is_within(&self.entry.consented) {
            let changes = self.entry.consented.diff(&manifest.capabilities);
            return Err(Refusal::NeedsConsent(format!(
                "refusing to run plugin {name}: its plugin.toml requests more than you agreed to:\n{changes}review and agree with `capstan plugin update {source}`"
            )));
        }
        let runnable = self
            .entry
            .components
            .iter()
            .filter(|c| c.exports.iter().any(|e| e == "tool" || e == "hook"))
            .all(|c| components.contains_key(&c.path));
        if components.is_empty() || !runnable {
            return Err(Refusal::Integrity(format!(
                "refusing to load plugin {name}: the lockfile names a component that is not among its files; reinstall it with `capstan plugin install {source}`"
            )));
        }
        Ok(Arc::new(components))
    }

    /// Checks (once per process) that every stored file is as installed
    /// and that the manifest asks for nothing beyond what the user agreed
    /// to: the one integrity rule for every use of an installed plugin.
    pub fn verify(&self) -> Result<(), CatalogError> {
        self.verified().map(drop)
    }

    /// The bytes of component `path`, from the verified files.
    pub fn component_bytes(&self, path: &str) -> Result<Arc<[u8]>, CatalogError> {
        self.verified()?.get(path).cloned().ok_or_else(|| {
            CatalogError::Integrity(format!(
                "refusing to load plugin {}: its component {path} is not among its verified files; reinstall it with `capstan plugin install {}`",
                self.name, self.entry.source
            ))
        })
    }

    /// Whether it can be used with `workspace`: its files are as installed,
    /// its manifest asks no more than was agreed to, and what it was
    /// granted can be given (every secret has a value, every granted
    /// folder exists). The reason names what is missing and the command
    /// that fixes it.
    pub fn availability(&self, workspace: &Path, own: &OwnFolders) -> Result<(), Unavailable> {
        if let Err(refused) = self.verified() {
            return Err(Unavailable::new(&self.name, refused, &self.fix()));
        }
        let Err(error) = self.grants(workspace, false, own) else {
            return Ok(());
        };
        let name = &self.name;
        let fix = match &error {
            PrepareError::Secret(SecretError::Missing { secret, .. }) => {
                format!("or let it run without: `capstan plugin revoke {name} secret {secret}`")
            }
            PrepareError::Secret(_) => self.fix(),
            PrepareError::Fs(GrantError::Moved { path, .. }) => format!(
                "put the link back, or review and agree to the folder it is now with `capstan plugin update {}` (it asks again), or let it run without: `capstan plugin revoke {name} fs '{path}'`",
                self.entry.source
            ),
            PrepareError::Fs(GrantError::NotConsented { path }) => format!(
                "review and agree to it with `capstan plugin update {}`, or let it run without: `capstan plugin revoke {name} fs '{path}'`",
                self.entry.source
            ),
            PrepareError::Fs(_) => {
                let gone = self
                    .entry
                    .granted
                    .fs
                    .iter()
                    .find(|request| request.resolve(workspace, &self.data_dir, own).is_err());
                match gone {
                    Some(request) => format!(
                        "create the folder again, or let it run without: `capstan plugin revoke {name} fs '{}'`",
                        request.path
                    ),
                    None => self.fix(),
                }
            }
        };
        Err(Unavailable::new(
            name,
            format!("it cannot be given what it was granted: {error}"),
            &fix,
        ))
    }

    /// The commands that replace or remove it.
    pub fn fix(&self) -> String {
        format!(
            "reinstall it with `capstan plugin update {}`, or remove it with `capstan plugin remove {}`",
            self.entry.source, self.name
        )
    }

    /// The audit log for its calls.
    pub fn audit(&self) -> Result<AuditLog, AuditError> {
        AuditLog::open(&self.audit_log)
    }

    /// Whether its calls may reach the network.
    pub fn reaches_network(&self) -> bool {
        !self.entry.granted.net.is_empty()
    }

    /// The limits its calls run under: its manifest's where it set them,
    /// `base` otherwise.
    pub fn limits(&self, base: Limits) -> Limits {
        Limits {
            memory: self
                .entry
                .limits
                .memory
                .map_or(base.memory, |m| m.min(Limits::MAX_MEMORY)),
            timeout: self
                .entry
                .limits
                .timeout_ms
                .map_or(base.timeout, std::time::Duration::from_millis),
            ..base
        }
    }

    /// What one call gets: the granted capabilities, with `$WORKSPACE`
    /// resolved to `workspace` and `$PLUGIN_DATA` to the plugin's data
    /// folder. Unless `writable`, the workspace and other folders are
    /// read-only whatever was granted (the user, or the permission policy,
    /// has not allowed changes); the plugin's own data folder keeps its
    /// granted access. Secrets take their values from the environment
    /// variable of the same name, else the user config's `[secrets]`; one
    /// with no value is an error saying where to set it. No folder may
    /// reach capstan's folders `own`.
    pub fn grants(
        &self,
        workspace: &Path,
        writable: bool,
        own: &OwnFolders,
    ) -> Result<Grants, PrepareError> {
        let mut granted = self.entry.granted.clone();
        if !writable {
            for request in &mut granted.fs {
                if request.path != crate::grants::fs::PLUGIN_DATA {
                    request.access = Access::Read;
                }
            }
        }
        let secret_values = SecretValues::load(&self.config_file)?;
        let consented = self.consented_folders(own);
        Grants::for_plugin(
            &granted,
            workspace,
            &self.data_dir,
            &secret_values,
            own,
            &consented,
        )
    }
}

/// The plugins of this process: the built-in ones, then any added files,
/// and which installed ones turned out to be unavailable.
#[derive(Debug, Clone)]
pub struct Catalog {
    entries: Vec<(String, PluginSource)>,
    unavailable: UnavailablePlugins,
    readable: ReadablePluginFiles,
    /// The user config, where the built-in `web` plugin's search settings
    /// are; known once [`Catalog::add_installed`] was given the home.
    user_config: Option<PathBuf>,
    /// The home's audit log, where the built-in `web` plugin's requests
    /// are recorded; known likewise.
    audit_log: Option<PathBuf>,
}

impl Catalog {
    /// The built-in plugins only.
    pub fn builtin() -> Self {
        Self {
            entries: BUILTIN_PLUGINS
                .iter()
                .map(|p| (p.name.to_string(), PluginSource::Builtin(p)))
                .collect(),
            unavailable: UnavailablePlugins::default(),
            readable: ReadablePluginFiles::default(),
            user_config: None,
            audit_log: None,
        }
    }

    /// Leaves built-in plugin `name` out: `capstan mcp serve` does not
    /// serve the `web` plugin, whose hosts are allowed by questions and
    /// rules of a session that an MCP client does not have.
    pub fn leave_out_builtin(&mut self, name: &str) {
        self.entries
            .retain(|(n, source)| !(n == name && matches!(source, PluginSource::Builtin(_))));
    }

    /// The user config file, once known (see [`Catalog::add_installed`]).
    pub fn user_config(&self) -> Option<&Path> {
        self.user_config.as_deref()
    }

    /// The home's audit log, once known (see [`Catalog::add_installed`]).
    pub fn audit_log(&self) -> Option<&Path> {
        self.audit_log.as_deref()
    }

    /// Records that installed plugin `unavailable.plugin` cannot be used in
    /// this process; it is not loaded again.
    pub fn mark_unavailable(&self, unavailable: Unavailable) {
        self.unavailable.mark(unavailable);
    }

    /// The unavailable plugins found so far, shared: the list grows as
    /// more are found.
    pub fn unavailable(&self) -> &UnavailablePlugins {
        &self.unavailable
    }

    /// Whether plugin `name` can be used with `workspace`. Built-in plugins
    /// and files given on the command line always can (their failures are
    /// errors); an installed plugin is checked once (see
    /// [`InstalledPlugin::availability`]) and, if it cannot, recorded as
    /// unavailable.
    pub fn check_available(
        &self,
        name: &str,
        workspace: &Path,
        own: &OwnFolders,
    ) -> Result<(), Unavailable> {
        if let Some(unavailable) = self.unavailable.get(name) {
            return Err(unavailable);
        }
        let Some(plugin) = self.installed(name) else {
            return Ok(());
        };
        plugin
            .availability(workspace, own)
            .inspect_err(|u| self.mark_unavailable(u.clone()))
    }

    /// For an installed plugin, a failure to load or run it makes it
    /// unavailable: the error is recorded (with `fix` when it names no
    /// command) and `Ok(None)` returned, so the caller goes on without it.
    /// For other plugins the error is passed on.
    pub fn unless_unavailable<T, E: std::fmt::Display>(
        &self,
        name: &str,
        result: Result<T, E>,
    ) -> Result<Option<T>, E> {
        match (result, self.installed(name)) {
            (Ok(value), _) => Ok(Some(value)),
            (Err(error), Some(plugin)) => {
                self.mark_unavailable(Unavailable::new(name, error, &plugin.fix()));
                Ok(None)
            }
            (Err(error), None) => Err(error),
        }
    }

    /// Adds a component file, written `PATH` (named after the file, with
    /// `_` turned into `-`) or `NAME=PATH`.
    pub fn add_file(&mut self, spec: &str) -> Result<(), CatalogError> {
        let (name, path) = match spec.split_once('=') {
            Some((name, path)) if !name.contains('/') => (name.to_string(), PathBuf::from(path)),
            _ => {
                let path = PathBuf::from(spec);
                let stem = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().replace('_', "-"))
                    .unwrap_or_default();
                (stem, path)
            }
        };
        if !valid_tool_name(&name) {
            return Err(CatalogError::BadName(name));
        }
        if self.entries.iter().any(|(n, _)| *n == name) {
            return Err(CatalogError::Duplicate(name));
        }
        if let Err(source) = std::fs::metadata(&path) {
            return Err(CatalogError::Unreadable { path, source });
        }
        self.entries.push((name, PluginSource::File(path)));
        Ok(())
    }

    /// Adds the plugins installed in `home` that offer tools or hooks.
    /// Their files are checked against the lockfile when first loaded.
    /// The home's user config is where built-in plugins read their
    /// settings from, too.
    pub fn add_installed(&mut self, home: &Home) -> Result<(), CatalogError> {
        self.user_config = Some(home.config_file());
        self.audit_log = Some(home.audit_log());
        let store = PluginStore::new(home.plugins_dir());
        let lock = Lockfile::load(&store.lock_path())?;
        self.readable = ReadablePluginFiles::of(home.plugins_dir());
        for (name, entry) in lock.plugins {
            if entry.tool_component().is_none() && entry.hook_components().next().is_none() {
                continue;
            }
            if self.entries.iter().any(|(n, _)| *n == name) {
                return Err(CatalogError::Duplicate(name));
            }
            let plugin = InstalledPlugin::new(home, &name, entry);
            self.entries
                .push((name, PluginSource::Installed(Arc::new(plugin))));
        }
        Ok(())
    }

    /// The store folders of installed plugins whose files the model may
    /// read (see [`ReadablePluginFiles`]); none until
    /// [`Catalog::add_installed`].
    pub fn readable_plugin_folders(&self) -> &[PathBuf] {
        self.readable.folders()
    }

    /// Whether plugin `name` is a built-in one.
    pub fn is_builtin(&self, name: &str) -> bool {
        matches!(self.source(name), Ok(PluginSource::Builtin(_)))
    }

    /// The installed plugin called `name`, if it is one.
    pub fn installed(&self, name: &str) -> Option<&Arc<InstalledPlugin>> {
        match self.source(name) {
            Ok(PluginSource::Installed(plugin)) => Some(plugin),
            _ => None,
        }
    }

    /// Whether plugin `name` may offer tools: false only for an installed
    /// plugin whose components export hooks alone.
    pub fn offers_tools(&self, name: &str) -> bool {
        !matches!(self.source(name), Ok(PluginSource::Installed(p)) if p.entry.tool_component().is_none())
    }

    /// Plugin names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// Where plugin `name` comes from.
    pub fn source(&self, name: &str) -> Result<&PluginSource, CatalogError> {
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s)
            .ok_or_else(|| CatalogError::Unknown {
                name: name.to_string(),
                known: self.names().map(str::to_string).collect(),
            })
    }

    /// Loads plugin `name` into the sandbox.
    pub fn load(&self, sandbox: &Sandbox, name: &str) -> Result<LoadedComponent, CatalogError> {
        match self.source(name)? {
            PluginSource::Builtin(p) => Ok(sandbox.load_builtin(p)?),
            PluginSource::File(path) => {
                let bytes = read(path)?;
                Ok(sandbox.load(name, &bytes, None, &path.display().to_string())?)
            }
            PluginSource::Installed(plugin) => {
                let Some(component) = plugin.entry.tool_component() else {
                    return Err(CatalogError::NoTools(name.to_string()));
                };
                let bytes = plugin.component_bytes(&component.path)?;
                let origin = format!(
                    "{} (plugin {name})",
                    plugin.dir.join(&component.path).display()
                );
                Ok(sandbox.load(name, &bytes, Some(&component.sha256), &origin)?)
            }
        }
    }

    /// Loads plugin `name`'s tool component, or `None` when it offers no
    /// tools (a plugin of hooks only).
    pub fn load_tools(
        &self,
        sandbox: &Sandbox,
        name: &str,
    ) -> Result<Option<LoadedComponent>, CatalogError> {
        match self.source(name)? {
            PluginSource::File(path) => {
                let bytes = read(path)?;
                let loaded =
                    sandbox.load_plugin(name, &bytes, None, &path.display().to_string())?;
                Ok(loaded.offers_tools().then_some(loaded))
            }
            PluginSource::Installed(plugin) if plugin.entry.tool_component().is_none() => Ok(None),
            _ => self.load(sandbox, name).map(Some),
        }
    }

    /// Loads plugin `name`'s hook components (none for most plugins).
    pub fn load_hooks(
        &self,
        sandbox: &Sandbox,
        name: &str,
    ) -> Result<Vec<LoadedComponent>, CatalogError> {
        match self.source(name)? {
            PluginSource::Builtin(_) => Ok(Vec::new()),
            PluginSource::File(path) => {
                let bytes = read(path)?;
                let loaded =
                    sandbox.load_plugin(name, &bytes, None, &path.display().to_string())?;
                Ok(if loaded.offers_hooks() {
                    vec![loaded]
                } else {
                    Vec::new()
                })
            }
            PluginSource::Installed(plugin) => {
                let mut loaded = Vec::new();
                for component in plugin.entry.hook_components() {
                    let bytes = plugin.component_bytes(&component.path)?;
                    let origin = format!(
                        "{} (plugin {name})",
                        plugin.dir.join(&component.path).display()
                    );
                    let hook =
                        sandbox.load_plugin(name, &bytes, Some(&component.sha256), &origin)?;
                    if !hook.offers_hooks() {
                        return Err(CatalogError::Integrity(format!(
                            "refusing to load plugin {name}: {origin} was installed as a hook component but exports no hooks; reinstall it with `capstan plugin install {}`",
                            plugin.entry.source
                        )));
                    }
                    loaded.push(hook);
                }
                Ok(loaded)
            }
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, CatalogError> {
    std::fs::read(path).map_err(|source| CatalogError::Unreadable {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_named_after_their_stem_or_explicitly() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("my_tool.wasm");
        std::fs::write(&file, b"x").unwrap();
        let mut catalog = Catalog::builtin();
        catalog.add_file(file.to_str().unwrap()).unwrap();
        catalog
            .add_file(&format!("other={}", file.display()))
            .unwrap();
        let names: Vec<&str> = catalog.names().collect();
        assert!(names.contains(&"my-tool") && names.contains(&"other") && names.contains(&"fs"));
        assert!(matches!(
            catalog.add_file(&format!("other={}", file.display())),
            Err(CatalogError::Duplicate(_))
        ));
        assert!(matches!(
            catalog.add_file(&format!("Bad={}", file.display())),
            Err(CatalogError::BadName(_))
        ));
        assert!(matches!(
            catalog.add_file("/nonexistent/x.wasm"),
            Err(CatalogError::Unreadable { .. })
        ));
        assert!(matches!(
            catalog.source("nope"),
            Err(CatalogError::Unknown { .. })
        ));
    }
}
