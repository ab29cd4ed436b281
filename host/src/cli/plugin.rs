//! `capstan plugin ...`: install, inspect, update, grant, revoke and remove
//! plugins.

use std::cell::Cell;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;

use super::Exit;
use super::escape;
use super::exit::Failure;
use crate::home::Home;
use crate::plugin::catalog::InstalledPlugin;
use crate::plugin::install::{
    ConsentRequest, InstallError, InstallProgress, Installer, NoProgress, Outcome,
    capabilities_in_one_line, describe_capabilities,
};
use crate::plugin::{Catalog, CatalogError};
use crate::progress::{Progress, Step};
use crate::sandbox::CacheOutcome;
use crate::sandbox::Sandbox;

/// The plugin commands.
#[derive(Debug, clap::Subcommand)]
pub enum PluginCommand {
    /// Install a plugin from a folder or a .tar.gz holding plugin.toml and
    /// its components, or a Claude Code plugin folder. Shows what it
    /// requests and asks before granting. On a Claude Code marketplace
    /// folder, lists its plugins; --plugin NAME (or NAME@PATH) installs one.
    #[command(after_help = "Examples:
  capstan plugin install ./weather
  capstan plugin install weather-0.2.0.tar.gz --yes
  capstan plugin install ./my-marketplace                  # lists its plugins
  capstan plugin install ./my-marketplace --plugin review
  capstan plugin install review@./my-marketplace
  capstan plugin install ./my-marketplace --all --yes
  capstan plugin install ./claude-plugin --hook-secret GITHUB_TOKEN")]
    Install {
        /// The plugin's folder or .tar.gz archive, a marketplace folder, or
        /// NAME@MARKETPLACE-FOLDER.
        source: PathBuf,
        /// Grant what it requests without asking (for scripts).
        #[arg(long, short = 'y')]
        yes: bool,
        /// The plugin to install from a Claude Code marketplace folder
        /// (may be given more than once).
        #[arg(long = "plugin", value_name = "NAME")]
        plugins: Vec<String>,
        /// Install every plugin of a Claude Code marketplace folder.
        #[arg(long, conflicts_with = "plugins")]
        all: bool,
        /// Give a Claude Code plugin's command hooks, their scripts and its
        /// inline commands the secret NAME as an environment variable when
        /// they run (its value from your environment or [secrets] in
        /// config.toml); may be given more than once.
        #[arg(long = "hook-secret", value_name = "NAME")]
        hook_secrets: Vec<String>,
    },
    /// List installed plugins, what they are granted, and whether they
    /// can be used here (and if not, why and how to fix it).
    List,
    /// Show an installed plugin: grants, component hashes, and the tools,
    /// hooks and skills it exports.
    Info {
        /// The plugin's name.
        name: String,
    },
    /// Replace an installed plugin with a new version. Shows what changed
    /// in its requests; asks again only if it requests more.
    Update {
        /// The new version's folder or .tar.gz archive, or
        /// NAME@MARKETPLACE-FOLDER.
        source: PathBuf,
        /// Grant wider requests without asking (for scripts).
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Give a plugin back a capability its manifest requests.
    #[command(
        after_help = "KIND is fs, net, env, secret or exec; VALUE as the manifest writes it (for exec, the program: `git`, or `git writing .git` for its entry with `writes`). For a Claude Code plugin, KIND hook-secret and a secret NAME set $NAME for its command hooks, scripts and inline commands.

Examples:
  capstan plugin grant weather net https://api.open-meteo.com
  capstan plugin grant notes fs '$PLUGIN_DATA'
  capstan plugin grant review-kit hook-secret GITHUB_TOKEN"
    )]
    Grant {
        /// The plugin's name.
        name: String,
        /// fs, net, env, secret or exec.
        kind: String,
        /// The folder, origin, variable, secret name or program.
        value: String,
    },
    /// Take a capability away from a plugin; its calls run without it.
    #[command(
        after_help = "KIND is fs, net, env, secret or exec; VALUE as the manifest writes it (for exec, the program: `git`, or `git writing .git` for its entry with `writes`). For a Claude Code plugin, KIND hook-secret and a secret NAME set $NAME for its command hooks, scripts and inline commands.

Example:
  capstan plugin revoke weather net https://api.open-meteo.com"
    )]
    Revoke {
        /// The plugin's name.
        name: String,
        /// fs, net, env, secret or exec.
        kind: String,
        /// The folder, origin, variable, secret name or program.
        value: String,
    },
    /// Build a plugin project (Rust, Python or JavaScript, as its
    /// plugin.toml's [build] says) into its component. The first build of
    /// a language installs its pinned compiler (see `plugin toolchain`).
    #[command(after_help = "Examples:
  capstan plugin build
  capstan plugin build plugins/weather
  capstan plugin build --no-install      # offline or CI: never install a toolchain")]
    Build {
        /// The project folder.
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Stop with an error instead of installing a missing toolchain
        /// (componentize-py, componentize-js or the Rust target).
        #[arg(long)]
        no_install: bool,
    },
    /// Install the pinned compiler for Python (componentize-py) or
    /// JavaScript (componentize-js) under capstan's data folder, or the
    /// Rust target wasm32-wasip2 with rustup. `plugin build` does this by
    /// itself on first use.
    Toolchain {
        /// python, js or rust.
        lang: String,
    },
    /// Uninstall a plugin: its files, lock entry and compiled components.
    Remove {
        /// The plugin's name.
        name: String,
        /// Also delete the plugin's own data folder.
        #[arg(long)]
        purge: bool,
    },
}

/// Runs a plugin command.
pub async fn run(command: PluginCommand, _verbose: bool) -> Exit {
    match execute(command).await {
        Ok(exit) => exit,
        Err(failure) => failure.report(),
    }
}

fn home() -> Result<Home, Failure> {
    Home::from_env().map_err(|e| Failure::new(Exit::Error, e))
}

fn sandbox(home: &Home) -> Result<Sandbox, Failure> {
    Sandbox::new(home).map_err(|e| Failure::new(Exit::Error, e))
}

/// The exit code for an installation error.
fn exit_for(err: &InstallError) -> Exit {
    match err {
        InstallError::ConsentRefused { .. } => Exit::Refused,
        InstallError::ChangedMeanwhile { .. } => Exit::Error,
        InstallError::Source { .. }
        | InstallError::NotInstalled { .. }
        | InstallError::Capability { .. }
        | InstallError::AlreadyInstalled { .. }
        | InstallError::BuiltinName { .. }
        | InstallError::HookSecret { .. } => Exit::Usage,
        _ => Exit::Error,
    }
}

fn failed(err: InstallError) -> Failure {
    Failure::new(exit_for(&err), err)
}

async fn execute(command: PluginCommand) -> Result<Exit, Failure> {
    let home = home()?;
    match command {
        PluginCommand::Build { dir, no_install } => Ok(super::new::run_build(&dir, !no_install)),
        PluginCommand::Toolchain { lang } => Ok(super::new::run_toolchain(&lang)),
        PluginCommand::Install {
            source,
            yes,
            plugins,
            all,
            hook_secrets,
        } => {
            let sandbox = sandbox(&home)?;
            let (source, picks) = super::plugin_marketplace::picks(source, plugins, all)?;
            let shown = CompileProgress::new(Progress::for_stderr());
            let asker = Asker::new(yes);
            if picks.is_empty() {
                let installer =
                    Installer::new(&home, &sandbox, &shown).with_hook_secrets(hook_secrets);
                let outcome = installer
                    .install(&source, &mut |request| asker.ask(request))
                    .await
                    .map_err(|e| asker.explain(e))?;
                report(&outcome);
                return Ok(Exit::Success);
            }
            let mut failures = Vec::new();
            for pick in &picks {
                let installer = Installer::new(&home, &sandbox, &shown)
                    .picking(Some(pick.clone()))
                    .with_hook_secrets(hook_secrets.clone());
                match installer
                    .install(&source, &mut |request| asker.ask(request))
                    .await
                {
                    Ok(outcome) => report(&outcome),
                    Err(e) if picks.len() == 1 => return Err(asker.explain(e)),
                    Err(e) => {
                        eprintln!(
                            "warning: {pick} was not installed: {}",
                            escape::message(&e.to_string())
                        );
                        failures.push(pick.clone());
                    }
                }
            }
            super::plugin_marketplace::summary(picks.len(), &failures)
        }
        PluginCommand::Update { source, yes } => {
            let sandbox = sandbox(&home)?;
            let (source, picks) = super::plugin_marketplace::picks(source, Vec::new(), false)?;
            let shown = CompileProgress::new(Progress::for_stderr());
            let installer =
                Installer::new(&home, &sandbox, &shown).picking(picks.into_iter().next());
            let asker = Asker::new(yes);
            let outcome = installer
                .update(&source, &mut |request| asker.ask(request))
                .await
                .map_err(|e| asker.explain(e))?;
            report(&outcome);
            Ok(Exit::Success)
        }
        PluginCommand::List => list(&home),
        PluginCommand::Info { name } => info(&home, &name).await,
        PluginCommand::Grant { name, kind, value } => {
            let sandbox = sandbox(&home)?;
            let installer = Installer::new(&home, &sandbox, &NoProgress);
            println!("{}", installer.grant(&name, &kind, &value).map_err(failed)?);
            Ok(Exit::Success)
        }
        PluginCommand::Revoke { name, kind, value } => {
            let sandbox = sandbox(&home)?;
            let installer = Installer::new(&home, &sandbox, &NoProgress);
            println!(
                "{}",
                installer.revoke(&name, &kind, &value).map_err(failed)?
            );
            Ok(Exit::Success)
        }
        PluginCommand::Remove { name, purge } => {
            let sandbox = sandbox(&home)?;
            let installer = Installer::new(&home, &sandbox, &NoProgress);
            let kept = installer.remove(&name, purge).map_err(failed)?;
            println!("removed {name}");
            if let Some(data) = kept {
                println!(
                    "kept its data folder {} (`capstan plugin remove {name} --purge` deletes it)",
                    data.display()
                );
            }
            Ok(Exit::Success)
        }
    }
}

/// Asks for consent on the terminal, or takes `--yes` for an answer.
struct Asker {
    yes: bool,
    could_not_ask: Cell<bool>,
}

impl Asker {
    fn new(yes: bool) -> Self {
        Self {
            yes,
            could_not_ask: Cell::new(false),
        }
    }

    fn ask(&self, request: &ConsentRequest) -> bool {
        eprint!("{}", escape::text(&request.text));
        if self.yes {
            eprintln!("Granted (--yes).");
            return true;
        }
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            self.could_not_ask.set(true);
            return false;
        }
        eprint!("Grant these? [y/N] ");
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        if std::io::stdin().lock().read_line(&mut answer).is_err() {
            return false;
        }
        matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
    }

    fn explain(&self, err: InstallError) -> Failure {
        match err {
            InstallError::ConsentRefused { name } if self.could_not_ask.get() => Failure::new(
                Exit::Refused,
                format!(
                    "{name} was not installed: there is no terminal to ask for consent; pass --yes to grant what it requests"
                ),
            ),
            other => failed(other),
        }
    }
}

/// Compile progress on stderr: a bar with the elapsed time while a
/// component compiles (on a terminal), then one line saying how it went.
struct CompileProgress {
    mode: Progress,
    /// The component compiling: its label and its step on the screen.
    current: Mutex<Option<(String, Step)>>,
}

impl CompileProgress {
    fn new(mode: Progress) -> Self {
        Self {
            mode,
            current: Mutex::new(None),
        }
    }

    fn current(&self) -> std::sync::MutexGuard<'_, Option<(String, Step)>> {
        self.current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl InstallProgress for CompileProgress {
    fn compiling(&self, component: &str, index: usize, total: usize) {
        let label = format!("[{}/{total}] {component}", index + 1);
        let step = self
            .mode
            .start_counted(&format!("compiling {component}"), index, total);
        *self.current() = Some((label, step));
    }

    fn compiled(&self, outcome: Option<CacheOutcome>) {
        let Some((label, step)) = self.current().take() else {
            return;
        };
        let elapsed = step.finish();
        if !self.mode.prints_lines() {
            return;
        }
        let how = match outcome {
            Some(CacheOutcome::Compiled) => {
                format!("compiled in {:.1}s", elapsed.as_secs_f64())
            }
            Some(CacheOutcome::Hit | CacheOutcome::Precompiled) => "already compiled".to_string(),
            None => "refused".to_string(),
        };
        eprintln!("  component {label}: {how}");
    }
}

fn report(outcome: &Outcome) {
    match outcome {
        Outcome::Installed {
            name,
            version,
            signer,
            size,
        } => println!("installed {name} {version} ({signer}): {size}"),
        Outcome::Unchanged {
            name,
            version,
            repaired,
        } => {
            if *repaired {
                println!(
                    "{name} {version} is already installed with the same content; its damaged or missing files were restored"
                );
            } else {
                println!(
                    "{name} {version} is already installed with the same content; nothing to do"
                );
            }
        }
        Outcome::Updated {
            name,
            from,
            to,
            changes,
            asked,
            size,
        } => {
            println!("updated {name} {from} -> {to}: {size}");
            print!("{changes}");
            if !asked && !changes.is_empty() {
                println!("  it asks for no more than before, so it was updated without asking");
            }
        }
    }
}

fn list(home: &Home) -> Result<Exit, Failure> {
    let lock = crate::plugin::lock::Lockfile::load(
        &crate::plugin::store::PluginStore::new(home.plugins_dir()).lock_path(),
    )
    .map_err(|e| Failure::new(Exit::Error, e))?;
    if lock.plugins.is_empty() {
        println!("no plugins installed; install one with `capstan plugin install SOURCE`");
        return Ok(Exit::Success);
    }
    let width = lock.plugins.keys().map(String::len).max().unwrap_or(0);
    let workspace = std::env::current_dir().map_err(|e| {
        Failure::new(
            Exit::Error,
            format!("cannot tell the current folder ({e}); run capstan from an existing folder"),
        )
    })?;
    for (name, entry) in &lock.plugins {
        println!(
            "{name:width$}  {:10}  {:10}  {}",
            entry.version,
            entry.signer,
            capabilities_in_one_line(&entry.granted)
        );
        let plugin = InstalledPlugin::new(home, name, entry.clone());
        if let Err(unavailable) =
            plugin.availability(&workspace, &crate::grants::OwnFolders::of(home))
        {
            println!(
                "{:width$}  unavailable: {}",
                "",
                escape::line(&unavailable.reason)
            );
        }
    }
    Ok(Exit::Success)
}

/// The skills plugin `name` brings, and what was not installed from a
/// Claude Code plugin.
async fn print_skills(home: &Home, sandbox: &Sandbox, name: &str, dir: &std::path::Path) {
    let workspace = std::env::current_dir().unwrap_or_else(|_| dir.to_path_buf());
    let skills = crate::skills::Skills::discover(
        sandbox,
        home,
        &workspace,
        crate::sandbox::Limits::default(),
    )
    .await;
    let source = crate::skills::Source::Plugin(name.to_string());
    let set = skills.set();
    let ours: Vec<&crate::skills::Skill> = set
        .skills()
        .iter()
        .chain(set.shadowed().iter().map(|s| &s.loser))
        .filter(|s| s.source == source)
        .collect();
    if !ours.is_empty() {
        println!("skills:");
        for skill in ours {
            let used = if set.shadowed().iter().any(|s| std::ptr::eq(&s.loser, skill)) {
                "  (not used: another source offers this name)"
            } else {
                ""
            };
            let line: String = skill.meta.description.chars().take(80).collect();
            println!(
                "  {}  {}{used}",
                escape::line(&skill.meta.name),
                escape::line(&line)
            );
        }
    }
    for warning in set
        .warnings()
        .iter()
        .filter(|w| w.contains(&format!("plugin {name}")))
    {
        println!("  warning: {}", escape::message(warning));
    }
    let notes = dir.join(crate::plugin::claude_import::IMPORT_NOTES);
    if let Ok(text) = std::fs::read_to_string(&notes) {
        let after = text
            .split_once("\nNot installed:\n")
            .map_or("", |(_, after)| after);
        let refused: Vec<&str> = after.lines().filter(|l| l.starts_with("- ")).collect();
        if !refused.is_empty() {
            println!("not installed from the Claude Code plugin:");
            for line in refused {
                println!("  {}", escape::line(&line[2..]));
            }
        }
    }
}

async fn info(home: &Home, name: &str) -> Result<Exit, Failure> {
    let store = crate::plugin::store::PluginStore::new(home.plugins_dir());
    let lock = crate::plugin::lock::Lockfile::load(&store.lock_path())
        .map_err(|e| Failure::new(Exit::Error, e))?;
    let Some(entry) = lock.plugins.get(name) else {
        return Err(Failure::new(
            Exit::Usage,
            format!("no plugin called `{name}` is installed; see `capstan plugin list`"),
        ));
    };
    println!("{name} {} ({})", entry.version, entry.signer);
    println!("  source     {}", entry.source);
    println!("  installed  {}", entry.installed_at);
    println!("  folder     {}", entry.dir(store.root()).display());
    println!("  data       {}", store.data_dir(name).display());
    println!("  digest     {}", entry.digest);
    if let Some(memory) = entry.limits.memory {
        println!("  memory     {}", crate::quantity::format_size(memory));
    }
    if let Some(ms) = entry.limits.timeout_ms {
        let timeout = std::time::Duration::from_millis(ms);
        println!("  timeout    {}", crate::quantity::format_duration(timeout));
    }
    println!("granted:");
    print!("{}", describe_capabilities(&entry.granted));
    if entry.granted != entry.consented {
        println!("requested but revoked (see `capstan plugin grant`):");
        let revoked = describe_capabilities(&entry.consented.subtract(&entry.granted));
        for line in revoked.lines().filter(|l| !l.trim_end().ends_with(" none")) {
            println!("{line}");
        }
    }
    println!("components:");
    for component in &entry.components {
        println!(
            "  {}  sha256 {}  exports {}",
            component.path,
            component.sha256,
            component.exports.join(", ")
        );
    }
    println!("files:");
    for (path, hash) in &entry.files {
        println!("  {hash}  {path}");
    }
    let sandbox = std::sync::Arc::new(sandbox(home)?);
    print_skills(home, &sandbox, name, &entry.dir(store.root())).await;
    if entry.tool_component().is_none() && entry.hook_components().next().is_none() {
        return Ok(Exit::Success);
    }
    let mut catalog = Catalog::builtin();
    catalog
        .add_installed(home)
        .map_err(|e| Failure::new(Exit::Error, e))?;
    let refused = |err: CatalogError, what: &str| {
        let exit = match err {
            CatalogError::Integrity(_) | CatalogError::NeedsConsent(_) => Exit::Integrity,
            _ => Exit::Error,
        };
        println!("{what}: unavailable");
        Failure::new(exit, err)
    };
    if entry.tool_component().is_some() {
        let component = catalog
            .load(&sandbox, name)
            .map_err(|err| refused(err, "tools"))?;
        let specs = sandbox.describe(&component).await.map_err(|e| {
            Failure::new(Exit::Error, format!("{name} could not list its tools: {e}"))
        })?;
        println!("tools:");
        for spec in specs {
            let mode = if spec.read_only {
                "read-only"
            } else {
                "writes"
            };
            let line = spec.description.lines().next().unwrap_or_default();
            println!(
                "  {name}.{}  {mode}  {}",
                escape::line(&spec.name),
                escape::line(line)
            );
        }
    }
    if entry.hook_components().next().is_some() {
        let components = catalog
            .load_hooks(&sandbox, name)
            .map_err(|err| refused(err, "hooks"))?;
        println!("hooks:");
        for component in components {
            let subscriptions = crate::hooks::component::subscriptions(&sandbox, &component)
                .await
                .map_err(|e| {
                    Failure::new(
                        Exit::Error,
                        format!("{name} could not list its subscriptions: {e}"),
                    )
                })?;
            for sub in subscriptions {
                let matcher = sub.matcher.as_deref().map(str::trim).unwrap_or_default();
                let matcher = match crate::hooks::matcher::Matcher::parse(Some(matcher)) {
                    Err(why) => format!("  (invalid matcher: {})", escape::line(&why.to_string())),
                    Ok(_) if matcher.is_empty() || matcher == "*" => String::new(),
                    Ok(_) => format!("  matching {}", escape::line(matcher)),
                };
                println!("  {}{matcher}", sub.event.name());
            }
        }
    }
    Ok(Exit::Success)
}
