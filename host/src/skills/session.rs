//! The skills of an agent session: the `skill` tool the model calls to
//! load one, the user's `/name` invocations, and which skills are active.
//!
//! A skill is **active** from the moment it is loaded (by the model through
//! the `skill` tool, or by the user as `/name`) until the end of the user's
//! turn. While a skill with `allowed-tools` is active, only those tools run
//! (and the `skill` tool itself); any other call is refused with a message
//! naming the skill. With several such skills active, a tool must be
//! allowed by each of them.
//!
//! `allowed-tools` entries name capstan tools (`fs.read`, `fs.*`, `*`, or
//! the model's `fs__read`) or Claude Code's (`Read`, `Write`, `Edit`,
//! `MultiEdit`, `Glob`, `Grep`, `LS` map to the `fs` tools). An argument
//! pattern such as `Read(src/**)` allows the tool as a whole; entries with
//! no capstan counterpart (`Bash(...)`, `WebFetch`) allow nothing.

use std::path::{Component, Path};
use std::sync::Mutex;

use serde_json::{Value, json};

use super::discover::{Discovery, SkillSet, claude_home};
use super::text::{self, Substitutions};
use super::{Origin, Skill, Source};
use crate::front_matter::{SkillMeta, clip, valid_name};
use crate::home::Home;
use crate::plugin::catalog::InstalledPlugin;
use crate::plugin::lock::Lockfile;
use crate::plugin::store::PluginStore;
use crate::plugin::{Provision, Writes};
use crate::sandbox::{CallError, CallOptions, Limits, Sandbox, SkillComponent, ToolSpec};
use crate::untrusted_folder::{Refused, UntrustedFolder};

/// The name of the tool, for the model and in permission rules.
pub const TOOL_NAME: &str = "skill";

/// The largest supporting file the `skill` tool returns.
pub const MAX_RESOURCE: usize = 256 * 1024;

/// A skill component of an installed plugin, with what its calls get.
struct ComponentRuntime {
    plugin: String,
    component: SkillComponent,
    options: CallOptions,
}

/// A skill that is active in the current turn.
#[derive(Debug, Clone)]
struct Active {
    name: String,
    allowed: Vec<String>,
}

/// The session's skills; see the [module documentation](self).
pub struct Skills {
    set: SkillSet,
    components: Vec<ComponentRuntime>,
    active: Mutex<Vec<Active>>,
    read_tool: String,
    /// What inline shell commands get, in a session that runs them.
    commands: Option<crate::exec::ExecGrants>,
}

impl std::fmt::Debug for Skills {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Skills")
            .field("skills", &self.set.skills().len())
            .finish_non_exhaustive()
    }
}

impl Skills {
    /// Finds every skill for a session in `workspace`: the `SKILL.md`
    /// folders of every source and the skills of installed skill
    /// components (each asked for its list in a fresh sandbox).
    pub async fn discover(
        sandbox: &Sandbox,
        home: &Home,
        workspace: &Path,
        limits: Limits,
    ) -> Self {
        let claude = claude_home();
        Self::discover_in(sandbox, home, workspace, limits, claude.as_deref()).await
    }

    /// [`Skills::discover`] with `~/.claude` at `claude_home` (or none).
    pub async fn discover_in(
        sandbox: &Sandbox,
        home: &Home,
        workspace: &Path,
        limits: Limits,
        claude_home: Option<&Path>,
    ) -> Self {
        let mut found = Discovery::folders(home, workspace, claude_home);
        let mut components = Vec::new();
        let store = PluginStore::new(home.plugins_dir());
        match Lockfile::load(&store.lock_path()) {
            Ok(lock) => {
                for (name, entry) in lock.plugins {
                    let skill_components: Vec<_> = entry
                        .components
                        .iter()
                        .filter(|c| c.exports.iter().any(|e| e == "skill"))
                        .cloned()
                        .collect();
                    if skill_components.is_empty() {
                        continue;
                    }
                    // The same rule as every other call: every stored file
                    // re-hashed and the manifest within consent, then what
                    // the user granted (read-only), the manifest's limits
                    // and the plugin's audit log, which must open.
                    let installed = InstalledPlugin::new(home, &name, entry);
                    let provision = Provision::for_installed(
                        &installed,
                        workspace,
                        sandbox.own_folders(),
                        limits,
                        Writes::Never,
                    );
                    let options = match provision {
                        Ok(provision) => provision.options(false, None, None, None),
                        Err(e) => {
                            found
                                .warnings
                                .push(format!("the skills of plugin {name} were skipped: {e}"));
                            continue;
                        }
                    };
                    for listed in skill_components {
                        let loaded = installed
                            .component_bytes(&listed.path)
                            .map_err(|e| e.to_string())
                            .and_then(|bytes| {
                                let origin = format!(
                                    "{} (plugin {name})",
                                    installed.dir.join(&listed.path).display()
                                );
                                sandbox
                                    .load_skill_component(
                                        &name,
                                        &bytes,
                                        Some(&listed.sha256),
                                        &origin,
                                    )
                                    .map_err(|e| e.to_string())
                            });
                        let component = match loaded {
                            Ok(component) => component,
                            Err(message) => {
                                found.warnings.push(format!(
                                    "the skills of plugin {name} were skipped: {message}"
                                ));
                                continue;
                            }
                        };
                        let metas = match sandbox.list_skills(&component).await {
                            Ok(metas) => metas,
                            Err(e) => {
                                found.warnings.push(format!(
                                    "the skills of plugin {name} were skipped: listing them failed: {e}"
                                ));
                                continue;
                            }
                        };
                        let index = components.len();
                        for meta in metas {
                            if !valid_name(&meta.name) {
                                found.warnings.push(format!(
                                    "skipped skill `{}` of plugin {name}: not a valid skill name (lowercase letters, digits and `-`)",
                                    meta.name
                                ));
                                continue;
                            }
                            found.push(Skill {
                                meta: SkillMeta {
                                    name: meta.name,
                                    description: clip(
                                        meta.description
                                            .split_whitespace()
                                            .collect::<Vec<_>>()
                                            .join(" "),
                                        crate::front_matter::MAX_DESCRIPTION,
                                    ),
                                    when_to_use: meta.when_to_use,
                                    argument_hint: meta.argument_hint,
                                    user_invocable: meta.user_invocable,
                                    model_invocable: meta.model_invocable,
                                    allowed_tools: meta.allowed_tools,
                                },
                                source: Source::Plugin(name.clone()),
                                origin: Origin::Component { index },
                            });
                        }
                        components.push(ComponentRuntime {
                            plugin: name.clone(),
                            component,
                            options: options.clone(),
                        });
                    }
                }
            }
            Err(e) => found.warnings.push(format!(
                "installed plugins' skill components were skipped: {e}"
            )),
        }
        Self {
            set: found.finish(),
            components,
            active: Mutex::new(Vec::new()),
            read_tool: "fs__read".to_string(),
            commands: None,
        }
    }

    /// Runs the skills' inline shell commands (`` !`cmd` ``) in the OS
    /// sandbox under `grants` (the session's command grants, narrowed to
    /// read-only and no network) when a skill is loaded; without this they
    /// are not run and the model is told so.
    pub fn set_commands(&mut self, grants: crate::exec::ExecGrants) {
        self.commands = Some(grants);
    }

    /// The skills, clashes settled.
    pub fn set(&self) -> &SkillSet {
        &self.set
    }

    /// The `skill` tool as offered to the model.
    pub fn tool_spec() -> ToolSpec {
        ToolSpec {
            name: TOOL_NAME.to_string(),
            description: "Loads a skill: instructions for a particular kind of task, listed under \
                # Skills in the system prompt. Call it with the skill's `name` (and `arguments` \
                if it takes any) before doing a task a skill fits, then follow its text. With \
                `resource`, returns a supporting file from the skill's folder instead \
                (a path relative to that folder)."
                .to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The skill's name, as listed."},
                    "arguments": {"type": "string", "description": "Arguments for the skill, as the user would type them after /name."},
                    "resource": {"type": "string", "description": "A supporting file of the skill, relative to its folder (e.g. reference.md). Leave out to load the skill itself."}
                },
                "required": ["name"],
                "additionalProperties": false
            }),
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        }
    }

    /// Runs the `skill` tool for the model.
    pub async fn call(
        &self,
        sandbox: &Sandbox,
        input: &Value,
        session_id: Option<&str>,
    ) -> Result<String, CallError> {
        let field = |key: &str| string_field(input, key);
        if let Some(object) = input.as_object()
            && let Some(unknown) = object
                .keys()
                .find(|k| !["name", "arguments", "resource"].contains(&k.as_str()))
        {
            return Err(CallError::InvalidInput(format!(
                "unknown field `{unknown}`; the skill tool takes `name`, `arguments` and `resource`"
            )));
        }
        let Some(name) = field("name")? else {
            return Err(CallError::InvalidInput(
                "field `name` is missing: give the name of a skill listed under # Skills".into(),
            ));
        };
        let arguments = field("arguments")?.unwrap_or_default();
        let skill = self.find(name).map_err(CallError::Failed)?;
        if !skill.meta.model_invocable {
            return Err(CallError::Denied(format!(
                "skill `{}` has disable-model-invocation set: only the user can run it, as /{}. Do not try to load it; ask the user if it is needed.",
                skill.meta.name, skill.meta.name
            )));
        }
        if let Some(resource) = field("resource")? {
            return self.resource(sandbox, skill, resource).await;
        }
        self.load(sandbox, skill, arguments, session_id, false)
            .await
    }

    /// Runs skill `name` for the user (`/name arguments`): returns the text
    /// that becomes the user's message, and makes the skill active.
    pub async fn invoke(
        &self,
        sandbox: &Sandbox,
        name: &str,
        arguments: &str,
        session_id: Option<&str>,
    ) -> Result<String, String> {
        let skill = self.find(name)?;
        if !skill.meta.user_invocable {
            return Err(format!(
                "skill `{}` has user-invocable: false: it is for the model to load when it fits the task, not to run as /{}",
                skill.meta.name, skill.meta.name
            ));
        }
        self.load(sandbox, skill, arguments, session_id, true)
            .await
            .map_err(|e| format!("skill `{}` could not be loaded: {e}", skill.meta.name))
    }

    fn find(&self, name: &str) -> Result<&Skill, String> {
        self.set.get(name).ok_or_else(|| {
            let known: Vec<&str> = self
                .set
                .skills()
                .iter()
                .map(|s| s.meta.name.as_str())
                .collect();
            if known.is_empty() {
                format!("there is no skill called `{name}`; no skills are installed")
            } else {
                format!(
                    "there is no skill called `{name}`; the skills are: {}",
                    known.join(", ")
                )
            }
        })
    }

    /// The skill's text with a header, and the skill made active.
    async fn load(
        &self,
        sandbox: &Sandbox,
        skill: &Skill,
        arguments: &str,
        session_id: Option<&str>,
        by_user: bool,
    ) -> Result<String, CallError> {
        let name = &skill.meta.name;
        let body = match &skill.origin {
            Origin::File {
                dir, body, locked, ..
            } => {
                let dir_text = dir.display().to_string();
                let plugin_root = locked.as_ref().map(|(l, _)| l.root.display().to_string());
                text::substitute(
                    body,
                    &Substitutions {
                        arguments,
                        skill_dir: Some(&dir_text),
                        plugin_root: plugin_root.as_deref(),
                        session_id,
                    },
                )
            }
            Origin::Component { index } => {
                let runtime = self.component(*index)?;
                let mut options = runtime.options.clone();
                options.session_id = session_id.map(str::to_string);
                sandbox
                    .load_skill(&runtime.component, name, arguments, &options)
                    .await?
            }
        };
        let mut out = String::new();
        if by_user {
            out.push_str(&format!(
                "The user ran the skill /{name}{}. Follow its instructions below.\n",
                if arguments.trim().is_empty() {
                    String::new()
                } else {
                    format!(" with arguments: {}", arguments.trim())
                }
            ));
        } else {
            out.push_str(&format!(
                "Skill `{name}` ({}) is loaded. Follow its instructions below.\n",
                skill.source.label()
            ));
        }
        match &skill.origin {
            Origin::File { dir, .. } => out.push_str(&format!(
                "Its folder is {}: files it mentions are relative to that folder. Read them on demand, with `{}` if they are inside the workspace, or with this tool: {{\"name\": \"{name}\", \"resource\": \"RELATIVE/PATH\"}} (read-only).\n",
                dir.display(),
                self.read_tool
            )),
            Origin::Component { .. } => out.push_str(&format!(
                "Files it mentions can be fetched with this tool: {{\"name\": \"{name}\", \"resource\": \"RELATIVE/PATH\"}} (read-only).\n"
            )),
        }
        if !skill.meta.allowed_tools.is_empty() {
            out.push_str(&format!(
                "While it is active (until the end of the user's turn) only these tools run: {} (and `{TOOL_NAME}`).\n",
                skill.meta.allowed_tools.join(", ")
            ));
        }
        let shell = text::inline_shell(&body);
        let body = match (&self.commands, &skill.origin) {
            (Some(grants), Origin::File { dir, .. }) if !shell.is_empty() => {
                let grants = super::inline_shell::grants_for(grants, name, dir, session_id);
                let text = body.clone();
                tokio::task::spawn_blocking(move || {
                    super::inline_shell::replace(&text, &mut |command| {
                        super::inline_shell::run(command, &grants)
                    })
                })
                .await
                .map_err(|e| {
                    CallError::Failed(format!("the skill's inline commands failed: {e}"))
                })?
            }
            _ => body,
        };
        if !shell.is_empty() && self.commands.is_none() {
            out.push('\n');
            out.push_str(&text::inline_shell_note(&shell, &self.read_tool));
        }
        out.push_str("\n---\n\n");
        out.push_str(&body);
        self.activate(skill);
        Ok(out)
    }

    async fn resource(
        &self,
        sandbox: &Sandbox,
        skill: &Skill,
        resource: &str,
    ) -> Result<String, CallError> {
        let rel = clean_relative(resource).ok_or_else(|| {
            CallError::Denied(format!(
                "field `resource`: {resource} is not a path inside the skill's folder; give a relative path without `..`"
            ))
        })?;
        let bytes = match &skill.origin {
            Origin::File {
                dir,
                locked: Some((locked, folder)),
                ..
            } => {
                let full = format!("{folder}/{rel}");
                if !locked.files.contains_key(&full) {
                    return Err(CallError::Failed(format!(
                        "skill `{}` has no file {rel} (in {})",
                        skill.meta.name,
                        dir.display()
                    )));
                }
                locked.read(&full).map_err(CallError::Failed)?
            }
            Origin::File { root, dir, .. } => read_inside(root, dir, &rel)?,
            Origin::Component { index } => {
                let runtime = self.component(*index)?;
                sandbox
                    .skill_resource(&runtime.component, &skill.meta.name, &rel, &runtime.options)
                    .await?
            }
        };
        if bytes.len() > MAX_RESOURCE {
            return Err(CallError::Failed(format!(
                "{rel} is more than {} KiB, the most the skill tool returns",
                MAX_RESOURCE / 1024
            )));
        }
        if bytes.contains(&0) {
            return Err(CallError::Failed(format!(
                "{rel} is a binary file of {} bytes; the skill tool returns text files only",
                bytes.len()
            )));
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn component(&self, index: usize) -> Result<&ComponentRuntime, CallError> {
        self.components.get(index).ok_or_else(|| {
            CallError::Failed("the skill's component is not loaded in this session".into())
        })
    }

    fn activate(&self, skill: &Skill) {
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        active.retain(|a| a.name != skill.meta.name);
        active.push(Active {
            name: skill.meta.name.clone(),
            allowed: skill.meta.allowed_tools.clone(),
        });
    }

    /// The names of the active skills.
    pub fn active(&self) -> Vec<String> {
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        active.iter().map(|a| a.name.clone()).collect()
    }

    /// Ends the user's turn: no skill is active any more.
    pub fn end_turn(&self) {
        self.active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Why the tool called `name` (`PLUGIN.TOOL`; `model_name` as the model
    /// calls it) may not run now, if an active skill's `allowed-tools`
    /// leaves it out.
    pub fn refusal(&self, name: &str, model_name: &str) -> Option<String> {
        if name == TOOL_NAME {
            return None;
        }
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        let narrowing = active
            .iter()
            .filter(|a| !a.allowed.is_empty())
            .find(|a| !a.allowed.iter().any(|p| allows(p, name, model_name)))?;
        Some(format!(
            "Refused: the skill `{}` is active and allows only these tools until the end of the user's turn: {}. {name} is not among them. Do the task with the allowed tools, or tell the user what else you would need.",
            narrowing.name,
            narrowing.allowed.join(", ")
        ))
    }

    /// The skills the user can run as `/name`, with their argument hints.
    pub fn user_invocable(&self) -> Vec<(&str, Option<&str>, &str)> {
        self.set
            .skills()
            .iter()
            .filter(|s| s.meta.user_invocable)
            .map(|s| {
                (
                    s.meta.name.as_str(),
                    s.meta.argument_hint.as_deref(),
                    s.meta.description.as_str(),
                )
            })
            .collect()
    }

    /// The plugin a component skill belongs to.
    pub fn component_plugin(&self, index: usize) -> Option<&str> {
        self.components.get(index).map(|c| c.plugin.as_str())
    }
}

/// The string field `key` of the tool's input, if given.
fn string_field<'a>(input: &'a Value, key: &str) -> Result<Option<&'a str>, CallError> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(CallError::InvalidInput(format!(
            "field `{key}` must be a string"
        ))),
    }
}

/// Splits `/name arguments` into the skill's name and its arguments, if
/// the text starts with `/` followed by something that can be a skill name.
pub fn parse_invocation(text: &str) -> Option<(&str, &str)> {
    let rest = text.trim_start().strip_prefix('/')?;
    let (name, arguments) = match rest.find(char::is_whitespace) {
        Some(at) => (&rest[..at], rest[at..].trim()),
        None => (rest.trim_end(), ""),
    };
    valid_name(name).then_some((name, arguments))
}

/// The capstan tool a Claude Code tool name stands for.
fn claude_equivalent(name: &str) -> Option<&'static str> {
    Some(match name {
        "Read" => "fs.read",
        "Write" => "fs.write",
        "Edit" | "MultiEdit" => "fs.edit",
        "Glob" => "fs.glob",
        "Grep" => "fs.grep",
        "LS" => "fs.ls",
        _ => return None,
    })
}

/// Whether `allowed-tools` entry `pattern` allows tool `name`.
pub fn allows(pattern: &str, name: &str, model_name: &str) -> bool {
    let pattern = pattern.trim();
    let base = pattern.split('(').next().unwrap_or(pattern).trim();
    let base = claude_equivalent(base).unwrap_or(base);
    if base == "*" || base == name || base == model_name {
        return true;
    }
    if let Some(prefix) = base.strip_suffix(".*") {
        return name
            .split_once('.')
            .is_some_and(|(plugin, _)| plugin == prefix);
    }
    if let Some(prefix) = base.strip_suffix("__*") {
        return model_name
            .split_once("__")
            .is_some_and(|(plugin, _)| plugin == prefix);
    }
    false
}

/// `path` as a clean relative path (`/`-separated), or `None` if it is
/// empty, absolute or climbs out with `..`.
fn clean_relative(path: &str) -> Option<String> {
    let mut parts = Vec::new();
    for part in Path::new(path).components() {
        match part {
            Component::Normal(p) => parts.push(p.to_str()?.to_string()),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Reads `rel` inside the skill folder `dir`, which must be inside `root`:
/// both are resolved beneath their folder ([`UntrustedFolder`]), so no
/// symbolic link can lead out of the skill's folder, and no more than
/// [`MAX_RESOURCE`] bytes (and one more, to tell a file that is too large)
/// of a regular file are read.
fn read_inside(root: &Path, dir: &Path, rel: &str) -> Result<Vec<u8>, CallError> {
    let refused = |e: Refused| match e {
        Refused::LeadsOutside { .. } => CallError::Denied(format!(
            "{e}; only files inside the skill's folder can be read"
        )),
        other => CallError::Failed(other.to_string()),
    };
    let missing = || {
        CallError::Failed(format!(
            "the skill has no file {rel} (in {})",
            dir.display()
        ))
    };
    let root_folder = UntrustedFolder::open(root)
        .map_err(refused)?
        .ok_or_else(missing)?;
    let folder = match dir.strip_prefix(root) {
        Ok(inner) if inner.as_os_str().is_empty() => root_folder,
        Ok(inner) => root_folder
            .subfolder(inner)
            .map_err(refused)?
            .ok_or_else(missing)?,
        Err(_) => {
            return Err(CallError::Denied(format!(
                "the skill's folder {} is not inside {}",
                dir.display(),
                root.display()
            )));
        }
    };
    let read = folder
        .read(Path::new(rel), MAX_RESOURCE)
        .map_err(refused)?
        .ok_or_else(missing)?;
    let mut bytes = read.bytes;
    if read.more {
        // One byte over the cap: the caller reports the file as too large.
        bytes.push(0);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_tools_match_capstan_and_claude_names() {
        assert!(allows("fs.read", "fs.read", "fs__read"));
        assert!(allows("fs__read", "fs.read", "fs__read"));
        assert!(allows("Read", "fs.read", "fs__read"));
        assert!(allows("Read(src/**)", "fs.read", "fs__read"));
        assert!(allows("fs.*", "fs.write", "fs__write"));
        assert!(allows("*", "web.fetch", "web__fetch"));
        assert!(!allows("fs.read", "fs.write", "fs__write"));
        assert!(!allows("Bash(git diff:*)", "fs.write", "fs__write"));
        assert!(!allows("fs.*", "fsx.read", "fsx__read"));
    }

    fn skills_with(active: Vec<Active>) -> Skills {
        Skills {
            set: SkillSet::default(),
            components: Vec::new(),
            active: Mutex::new(active),
            read_tool: "fs__read".to_string(),
            commands: None,
        }
    }

    #[test]
    fn an_active_skill_narrows_until_the_turn_ends() {
        let skills = skills_with(vec![Active {
            name: "careful".into(),
            allowed: vec!["Read".into(), "fs.grep".into()],
        }]);
        assert_eq!(skills.refusal("fs.read", "fs__read"), None);
        assert_eq!(skills.refusal(TOOL_NAME, TOOL_NAME), None);
        let refusal = skills.refusal("fs.write", "fs__write").unwrap();
        assert!(
            refusal.contains("`careful`") && refusal.contains("fs.write"),
            "{refusal}"
        );
        skills.end_turn();
        assert_eq!(skills.refusal("fs.write", "fs__write"), None);
        assert!(skills.active().is_empty());
    }

    #[test]
    fn every_active_narrowing_skill_must_allow_a_tool() {
        let skills = skills_with(vec![
            Active {
                name: "open".into(),
                allowed: Vec::new(),
            },
            Active {
                name: "a".into(),
                allowed: vec!["fs.*".into()],
            },
            Active {
                name: "b".into(),
                allowed: vec!["fs.read".into()],
            },
        ]);
        assert_eq!(skills.refusal("fs.read", "fs__read"), None);
        assert!(skills.refusal("fs.ls", "fs__ls").unwrap().contains("`b`"));
    }

    #[test]
    fn invocations_are_split() {
        assert_eq!(
            parse_invocation("/review-pr 123 now"),
            Some(("review-pr", "123 now"))
        );
        assert_eq!(parse_invocation("  /deploy\n"), Some(("deploy", "")));
        assert_eq!(parse_invocation("/etc/passwd is odd"), None);
        assert_eq!(parse_invocation("review"), None);
    }

    #[test]
    fn resource_paths_stay_inside() {
        assert_eq!(clean_relative("ref/a.md").as_deref(), Some("ref/a.md"));
        assert_eq!(clean_relative("./a.md").as_deref(), Some("a.md"));
        assert_eq!(clean_relative("../a.md"), None);
        assert_eq!(clean_relative("/etc/passwd"), None);
        assert_eq!(clean_relative(""), None);
    }

    #[test]
    fn symbolic_links_cannot_lead_out_of_a_skill_folder() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("skill");
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(dir.path().join("secret.txt"), "secret").unwrap();
        std::fs::write(skill.join("ok.md"), "fine").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), skill.join("link.md")).unwrap();
        assert_eq!(read_inside(&skill, &skill, "ok.md").unwrap(), b"fine");
        assert_eq!(read_inside(dir.path(), &skill, "ok.md").unwrap(), b"fine");
        #[cfg(unix)]
        assert!(matches!(
            read_inside(&skill, &skill, "link.md"),
            Err(CallError::Denied(_))
        ));
    }
}
