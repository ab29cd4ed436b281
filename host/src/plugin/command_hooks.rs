//! The Claude Code command hooks of a session: those of installed plugins
//! (`hooks/hooks.json`, and the `hooks` of `.claude-plugin/plugin.json`,
//! which the import keeps in [`MANIFEST_HOOKS_FILE`]; read through the lock
//! so a changed file is refused) and those of Claude
//! Code's settings files (`.claude/settings.json` and
//! `.claude/settings.local.json` of the project, `~/.claude/settings.json`).
//! A command hook runs in the OS sandbox as [`crate::hooks::command`]
//! describes; a prompt hook asks the session's model
//! ([`crate::hooks::prompt`]); an http hook posts to its URL
//! ([`crate::hooks::http`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::exec::{ExecGrants, SecretEnv};
use crate::grants::SecretValues;
use crate::home::Home;
use crate::hooks::Hook;
use crate::hooks::agent::AgentHook;
use crate::hooks::command::{Action, CommandHook, parse_hooks};
use crate::hooks::http::HttpHook;
use crate::hooks::prompt::{HookModel, PromptHook};
use crate::plugin::lock::{LockEntry, Lockfile};
use crate::plugin::store::PluginStore;
use crate::untrusted_folder::UntrustedFolder;

/// The file of a Claude Code plugin that holds its hooks.
pub const HOOKS_FILE: &str = "hooks/hooks.json";

/// The file of an imported Claude Code plugin that holds the hooks its
/// `plugin.json` defined (the manifest itself is not packaged).
pub const MANIFEST_HOOKS_FILE: &str = "hooks/from-plugin-json.json";

/// The largest settings or hooks file read.
const MAX_FILE: usize = 1 << 20;

/// The command hooks found, and what the user should know: which hooks
/// run, and which could not be used.
#[derive(Default)]
pub struct CommandHooks {
    /// The hooks of plugins and of the user's own settings.
    pub hooks: Vec<Arc<dyn Hook>>,
    /// One line per hook loaded and per problem.
    pub notices: Vec<String>,
    /// The hooks of the project's settings files, which run only once the
    /// user trusts them ([`crate::policy::folder_trust`]).
    pub project: Option<ProjectHooks>,
}

/// The hooks a project's `.claude/settings.json` and
/// `.claude/settings.local.json` define.
#[derive(Default)]
pub struct ProjectHooks {
    /// The hooks.
    pub hooks: Vec<Arc<dyn Hook>>,
    /// What each does and reaches, one line each, for the question.
    pub descriptions: Vec<String>,
    /// The sha256 of the hook set as written
    /// ([`crate::policy::folder_trust::hook_set_digest`]).
    pub digest: String,
    /// The settings files that define them.
    pub files: Vec<String>,
}

/// What the hooks of a session run with: the session's command grants
/// (which each command hook narrows to read-only, no network), the model
/// prompt hooks ask, and the user's `[secrets]` for http hooks' headers.
pub struct HookContext<'a> {
    /// The session's command grants, or why commands cannot run.
    pub grants: &'a Result<ExecGrants, String>,
    /// The session's model, or why there is none.
    pub model: Result<HookModel, String>,
    /// The user config's `[secrets]`.
    pub secrets: SecretValues,
    /// The session.
    pub session_id: Option<&'a str>,
}

/// The Claude Code hooks of installed plugins, and of the settings files of
/// `workspace` and `claude_home` (`~/.claude`), each run with `context`.
pub fn load(
    home: &Home,
    workspace: &Path,
    claude_home: Option<&Path>,
    context: &HookContext<'_>,
) -> CommandHooks {
    let mut found = CommandHooks::default();
    let store = PluginStore::new(home.plugins_dir());
    if let Ok(lock) = Lockfile::load(&store.lock_path()) {
        for (plugin, entry) in &lock.plugins {
            let root = entry.dir(store.root());
            for rel in [HOOKS_FILE, MANIFEST_HOOKS_FILE] {
                let Some(expected) = entry.files.get(rel) else {
                    continue;
                };
                let value = match std::fs::read(root.join(rel)) {
                    Ok(bytes) if crate::sandbox::engine::sha256_hex(&bytes) == *expected => {
                        serde_json::from_slice::<Value>(&bytes).ok()
                    }
                    Ok(_) => {
                        found.notices.push(format!(
                            "warning: the hooks of plugin {plugin} were left out: {rel} has changed since it was installed; reinstall it with `capstan plugin install {}`",
                            entry.source
                        ));
                        continue;
                    }
                    Err(e) => {
                        found.notices.push(format!(
                            "warning: the hooks of plugin {plugin} were left out: cannot read {rel}: {e}"
                        ));
                        continue;
                    }
                };
                let Some(hooks) = value else {
                    found.notices.push(format!(
                        "warning: the hooks of plugin {plugin} were left out: {rel} is not valid JSON"
                    ));
                    continue;
                };
                let label = format!("{plugin}/{rel}");
                let secrets = plugin_secrets(entry, &context.secrets);
                found.add(&label, &hooks, context, Some((&root, &secrets)), plugin);
            }
        }
    }
    let mut settings = vec![
        (workspace.to_path_buf(), ".claude/settings.json", true),
        (workspace.to_path_buf(), ".claude/settings.local.json", true),
    ];
    if let Some(claude) = claude_home {
        settings.push((claude.to_path_buf(), "settings.json", false));
    }
    let mut project_sets: Vec<(String, Value)> = Vec::new();
    let mut project = CommandHooks::default();
    for (root, rel, in_project) in settings {
        let path = root.join(rel);
        let read = UntrustedFolder::open(&root).and_then(|folder| match folder {
            Some(folder) => folder.read(Path::new(rel), MAX_FILE),
            None => Ok(None),
        });
        let text = match read {
            Ok(Some(read)) if !read.more => read.text(),
            Ok(Some(_)) => {
                found.notices.push(format!(
                    "warning: the hooks of {} were left out: the file is larger than 1 MiB",
                    path.display()
                ));
                continue;
            }
            Ok(None) => continue,
            Err(e) => {
                found.notices.push(format!(
                    "warning: the hooks of {} were left out: {e}",
                    path.display()
                ));
                continue;
            }
        };
        let value = match serde_json::from_str::<Value>(&text) {
            Ok(value) => value,
            Err(e) => {
                found.notices.push(format!(
                    "warning: the hooks of {} were left out: it is not valid JSON ({e})",
                    path.display()
                ));
                continue;
            }
        };
        let Some(hooks @ Value::Object(_)) = value.get("hooks") else {
            continue;
        };
        let label = path.display().to_string();
        if in_project {
            project_sets.push((rel.to_string(), hooks.clone()));
            project.add(&label, hooks, context, None, "settings-hooks");
        } else {
            found.add(&label, hooks, context, None, "settings-hooks");
        }
    }
    if project.hooks.is_empty() {
        found.notices.extend(project.notices);
    } else {
        let parts: Vec<(&str, &Value)> =
            project_sets.iter().map(|(f, h)| (f.as_str(), h)).collect();
        found.project = Some(ProjectHooks {
            digest: crate::policy::folder_trust::hook_set_digest(&parts),
            files: project_sets.iter().map(|(f, _)| f.clone()).collect(),
            hooks: project.hooks,
            descriptions: project.notices,
        });
    }
    found
}

/// The secrets the user granted plugin `entry`'s command hooks, scripts
/// and inline commands, with their values (the environment's, else the
/// user config's `[secrets]`).
pub fn plugin_secrets(entry: &LockEntry, config: &SecretValues) -> SecretEnv {
    SecretEnv(crate::grants::secrets::hook_secret_values(
        &entry.hook_secrets,
        |name| std::env::var(name).ok(),
        config,
    ))
}

/// The secrets each installed plugin's commands were granted, with their
/// values, for plugins granted any.
pub fn granted_secrets(home: &Home, config: &SecretValues) -> BTreeMap<String, SecretEnv> {
    let store = PluginStore::new(home.plugins_dir());
    let Ok(lock) = Lockfile::load(&store.lock_path()) else {
        return BTreeMap::new();
    };
    lock.plugins
        .iter()
        .filter(|(_, entry)| !entry.hook_secrets.is_empty())
        .map(|(name, entry)| (name.clone(), plugin_secrets(entry, config)))
        .collect()
}

impl CommandHooks {
    /// Adds the hooks of `hooks`; `plugin` is the plugin's folder and the
    /// secrets granted to its commands, for a plugin's hooks.
    fn add(
        &mut self,
        label: &str,
        hooks: &Value,
        context: &HookContext<'_>,
        plugin: Option<(&Path, &SecretEnv)>,
        audit_name: &str,
    ) {
        let plugin_root = plugin.map(|(root, _)| root);
        let (specs, problems) = parse_hooks(hooks);
        for problem in problems {
            self.notices.push(format!("warning: {label}: {problem}"));
        }
        for (index, spec) in specs.into_iter().enumerate() {
            let name = format!("{label}#{}", index + 1);
            // A plugin's hooks were shown when it was installed; a settings
            // file's are said at each session start.
            if plugin_root.is_none() {
                self.notices
                    .push(format!("{} hook {name}: {}", spec.kind(), spec.describe()));
            }
            let hook: Arc<dyn Hook> = match &spec.action {
                Action::Command(_) => Arc::new(
                    CommandHook::new(
                        name,
                        spec,
                        context.grants,
                        plugin_root,
                        audit_name,
                        context.session_id,
                    )
                    .with_secrets(plugin.map(|(_, s)| s.clone()).unwrap_or_default()),
                ),
                Action::Prompt { .. } => {
                    Arc::new(PromptHook::new(name, &spec, context.model.clone()))
                }
                Action::Agent { .. } => Arc::new(AgentHook::new(name, &spec)),
                Action::Http { .. } => {
                    Arc::new(HttpHook::new(name, &spec, context.secrets.clone()))
                }
            };
            self.hooks.push(hook);
        }
    }
}
