//! The skills of an agent session: the `skill` tool the model calls to
//! load one, the user's `/name` invocations, and which skills are active.
//!
//! A skill is **active** from the moment it is loaded (by the model through
//! the `skill` tool, or by the user as `/name`) until the end of the user's
//! turn: the model's final answer to the prompt it was loaded in. Claude
//! Code scopes a skill's permissions the same way, to the turn it runs in.
//!
//! While a skill is active, as in Claude Code:
//!
//! - its `allowed-tools` are **pre-approved**: a call they cover runs
//!   without asking where the permission mode would have asked. They never
//!   go past a deny rule, an ask rule the user wrote, plan mode, or the
//!   tool's grants, and they do not give a command the network (a command
//!   that asks for an origin still asks). Tools left out are not
//!   restricted: they are decided as usual.
//! - its `disallowed-tools` are refused, with a message naming the skill.
//!
//! Entries are permission rules ([`crate::policy::Rule`]): capstan names
//! (`fs.read`, `fs.*`, or the model's `fs__read`) or Claude Code's, mapped
//! by [`crate::policy::claude_code`] (`Read`, `Edit`, `Write`, `Grep`,
//! `Glob`, `WebFetch(domain:...)`, `Bash(git add:*)` for `exec.run`
//! commands, `mcp__server__tool`); Claude Code's other tool names are
//! mapped or reported by [`super::tool_list`].

use std::path::{Component, Path};
use std::sync::Mutex;

use serde_json::{Value, json};

use super::discover::{Discovery, Lookup, SkillSet, claude_home};
use super::names;
use super::text::{self, Substitutions};
use super::{Origin, Skill, Source};
use crate::front_matter::{SkillMeta, clip, invocation_name, valid_name};
use crate::home::Home;
use crate::plugin::catalog::InstalledPlugin;
use crate::plugin::lock::Lockfile;
use crate::plugin::store::PluginStore;
use crate::plugin::{Provision, Writes};
use crate::policy::Rule;
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
    /// Its `allowed-tools`, as rules: pre-approved.
    allowed: Vec<Rule>,
    /// Its `disallowed-tools`, as rules: refused.
    disallowed: Vec<Rule>,
}

/// A skill's tool list as rules (a `disallowed-tools` list when
/// `refusing`), and notes for the model: entries left out and why, and
/// entries read more broadly than written ([`super::tool_list`]).
fn tool_rules(entries: &[String], refusing: bool) -> (Vec<Rule>, Vec<String>) {
    let mut rules = Vec::new();
    let mut notes = Vec::new();
    for entry in entries {
        let (rule, note) = match super::tool_list::entry(entry, refusing) {
            super::tool_list::Entry::Rule(rule, note) => (rule, note),
            super::tool_list::Entry::Ignored(why) => {
                notes.push(format!("Ignored from its front matter: {why}"));
                continue;
            }
        };
        match model_name_as_tool(&rule).parse::<Rule>() {
            Ok(rule) => {
                rules.push(rule);
                notes.extend(note.map(|n| format!("From its front matter: {n}")));
            }
            Err(e) => notes.push(format!("Ignored from its front matter: {e}")),
        }
    }
    (rules, notes)
}

/// `fs__read(...)`, the name the model calls a tool by, as `fs.read(...)`;
/// any other entry (MCP's `mcp__server__tool` included) as it is.
fn model_name_as_tool(entry: &str) -> String {
    let entry = entry.trim();
    let tool_end = entry.find('(').unwrap_or(entry.len());
    let (tool, rest) = entry.split_at(tool_end);
    if tool.starts_with("mcp__") {
        return entry.to_string();
    }
    match tool.split_once("__") {
        Some((plugin, name)) if !plugin.is_empty() && !name.is_empty() => {
            format!("{plugin}.{name}{rest}")
        }
        _ => entry.to_string(),
    }
}

/// The session's skills; see the [module documentation](self).
pub struct Skills {
    set: SkillSet,
    components: Vec<ComponentRuntime>,
    active: Mutex<Vec<Active>>,
    read_tool: String,
    /// What inline shell commands get, in a session that runs them.
    commands: Option<crate::exec::ExecGrants>,
    /// The secrets granted to each installed plugin's inline commands.
    command_secrets: std::collections::BTreeMap<String, crate::exec::SecretEnv>,
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
                            let Some(invocation) = invocation_name(&meta.name) else {
                                found.warnings.push(format!(
                                    "skipped skill `{}` of plugin {name}: its name has no letters or digits",
                                    meta.name
                                ));
                                continue;
                            };
                            let display_name = (!valid_name(&meta.name)).then(|| meta.name.clone());
                            found.push(Skill {
                                meta: SkillMeta {
                                    name: invocation,
                                    display_name,
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
                                    disallowed_tools: Vec::new(),
                                    arguments: Vec::new(),
                                },
                                source: Source::Plugin(name.clone()),
                                origin: Origin::Component { index },
                                folder: None,
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
            command_secrets: std::collections::BTreeMap::new(),
        }
    }

    /// Runs the skills' inline shell commands (`` !`cmd` ``) in the OS
    /// sandbox under `grants` (the session's command grants, narrowed to
    /// read-only and no network) when a skill is loaded; without this they
    /// are not run and the model is told so.
    pub fn set_commands(&mut self, grants: crate::exec::ExecGrants) {
        self.commands = Some(grants);
    }

    /// Gives the inline commands of each plugin's skills the secrets the
    /// user granted it at install, as environment variables, by plugin.
    pub fn set_command_secrets(
        &mut self,
        secrets: std::collections::BTreeMap<String, crate::exec::SecretEnv>,
    ) {
        self.command_secrets = secrets;
    }

    /// The skills, clashes settled.
    pub fn set(&self) -> &SkillSet {
        &self.set
    }

    /// Keeps only the skills `keep` accepts (`--setting-sources`).
    pub fn retain(&mut self, keep: impl Fn(&super::Skill) -> bool) {
        self.set.retain(keep);
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
        let skill = self
            .find(name, |s| s.meta.model_invocable)
            .map_err(CallError::Failed)?;
        // A skill only the user may run still has supporting files the
        // model reads once the user ran it (`${CLAUDE_SKILL_DIR}/...`).
        if let Some(resource) = field("resource")? {
            return self.resource(sandbox, skill, resource).await;
        }
        if !skill.meta.model_invocable {
            let call_name = self.set.call_name(skill);
            return Err(CallError::Denied(format!(
                "skill `{call_name}` has disable-model-invocation set: only the user can run it, as /{call_name}. Do not try to load it; ask the user if it is needed."
            )));
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
        let skill = self.find(name, |s| s.meta.user_invocable)?;
        let call_name = self.set.call_name(skill);
        if !skill.meta.user_invocable {
            return Err(format!(
                "skill `{call_name}` has user-invocable: false: it is for the model to load when it fits the task, not to run as /{call_name}"
            ));
        }
        self.load(sandbox, skill, arguments, session_id, true)
            .await
            .map_err(|e| format!("skill `{call_name}` could not be loaded: {e}"))
    }

    /// The skill `name` asks for; for a name no skill answers to, the
    /// closest few of those `suggest` accepts.
    fn find(&self, name: &str, suggest: impl Fn(&Skill) -> bool) -> Result<&Skill, String> {
        match self.set.lookup(name) {
            Lookup::Missing => Err(self.set.unknown(name, suggest)),
            _ => self.set.resolve(name),
        }
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
        let name = &self.set.call_name(skill);
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
                        names: &skill.meta.arguments,
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
                    .load_skill(
                        &runtime.component,
                        component_name(skill),
                        arguments,
                        &options,
                    )
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
        let (allowed, allowed_notes) = tool_rules(&skill.meta.allowed_tools, false);
        let (disallowed, disallowed_notes) = tool_rules(&skill.meta.disallowed_tools, true);
        if !allowed.is_empty() {
            out.push_str(&format!(
                "While it is active (until the end of the user's turn) these run without asking, within the permission mode and deny rules: {}. Other tools are available as usual.\n",
                join_rules(&allowed)
            ));
        }
        if !disallowed.is_empty() {
            out.push_str(&format!(
                "While it is active these tools are refused: {}.\n",
                join_rules(&disallowed)
            ));
        }
        for note in allowed_notes.iter().chain(&disallowed_notes) {
            out.push_str(&format!("({note}.)\n"));
        }
        let shell = text::inline_shell(&body);
        let body = match (&self.commands, &skill.origin) {
            (Some(grants), Origin::File { dir, locked, .. }) if !shell.is_empty() => {
                let mut grants = super::inline_shell::grants_for(grants, name, dir, session_id);
                if let Some((files, _)) = locked
                    && let Some(secrets) = self.command_secrets.get(&files.plugin)
                {
                    grants.secrets = secrets.clone();
                }
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
        self.activate(name, allowed, disallowed);
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
                    .skill_resource(
                        &runtime.component,
                        component_name(skill),
                        &rel,
                        &runtime.options,
                    )
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

    fn activate(&self, name: &str, allowed: Vec<Rule>, disallowed: Vec<Rule>) {
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        active.retain(|a| a.name != name);
        active.push(Active {
            name: name.to_string(),
            allowed,
            disallowed,
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

    /// Why the call of tool `name` (`PLUGIN.TOOL`) with `input` may not
    /// run now, if an active skill's `disallowed-tools` covers it.
    pub fn refusal(&self, name: &str, input: &Value, workspace: &Path) -> Option<String> {
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        active.iter().find_map(|skill| {
            let rule = skill
                .disallowed
                .iter()
                .find(|rule| rule.matches(name, input, workspace))?;
            Some(format!(
                "Refused: the skill `{}` is active and its disallowed-tools `{rule}` covers this call of {name} until the end of the user's turn. Do the task another way, or tell the user what you would need.",
                skill.name
            ))
        })
    }

    /// The active skill whose `allowed-tools` pre-approve the call of tool
    /// `name` with `input`, and the entry that does: `(skill, rule)`.
    pub fn pre_approval(
        &self,
        name: &str,
        input: &Value,
        workspace: &Path,
    ) -> Option<(String, String)> {
        if input
            .get("command")
            .and_then(Value::as_str)
            .is_some_and(|command| !single_command(command))
        {
            return None;
        }
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        active.iter().find_map(|skill| {
            let rule = skill
                .allowed
                .iter()
                .find(|rule| rule.allows(name, input, workspace))?;
            Some((skill.name.clone(), rule.to_string()))
        })
    }

    /// The skills the user can run as `/name`: the name to type, the
    /// argument hint and the description.
    pub fn user_invocable(&self) -> Vec<(String, Option<&str>, &str)> {
        self.set
            .skills()
            .iter()
            .filter(|s| s.meta.user_invocable)
            .map(|s| {
                (
                    self.set.call_name(s),
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

/// Splits `/name arguments` into the skill's name (`name`,
/// `plugin:name`, `clean_gone`) and its arguments, if the text starts with
/// `/` followed by something that can name a skill.
pub fn parse_invocation(text: &str) -> Option<(&str, &str)> {
    let rest = text.trim_start().strip_prefix('/')?;
    let (name, arguments) = match rest.find(char::is_whitespace) {
        Some(at) => (&rest[..at], rest[at..].trim()),
        None => (rest.trim_end(), ""),
    };
    (names::looks_like_invocation(name) && names::wanted(name).is_some())
        .then_some((name, arguments))
}

/// Whether a shell command line is one command, with none of the shell's
/// ways of running more (`;`, `&`, `|`, `` ` ``, `$(`, redirections, new
/// lines): a skill's `Bash(git add:*)` pre-approves `git add .`, not
/// `git add . && rm -rf src`. Claude Code checks each part of a compound
/// command against its rules; capstan asks instead.
fn single_command(command: &str) -> bool {
    !command.contains([';', '&', '|', '`', '>', '<', '\n', '\r']) && !command.contains("$(")
}

/// The name a skill component knows its skill by (as its `list` gave it).
fn component_name(skill: &Skill) -> &str {
    skill
        .meta
        .display_name
        .as_deref()
        .unwrap_or(&skill.meta.name)
}

/// Rules as written, for the model.
fn join_rules(rules: &[Rule]) -> String {
    rules
        .iter()
        .map(|r| format!("`{r}`"))
        .collect::<Vec<_>>()
        .join(", ")
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

    fn active(name: &str, allowed: &[&str], disallowed: &[&str]) -> Active {
        let owned = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (allowed, bad) = tool_rules(&owned(allowed), false);
        assert!(bad.is_empty(), "{bad:?}");
        let (disallowed, bad) = tool_rules(&owned(disallowed), true);
        assert!(bad.is_empty(), "{bad:?}");
        Active {
            name: name.into(),
            allowed,
            disallowed,
        }
    }

    fn skills_with(active: Vec<Active>) -> Skills {
        Skills {
            set: SkillSet::default(),
            components: Vec::new(),
            active: Mutex::new(active),
            read_tool: "fs__read".to_string(),
            commands: None,
            command_secrets: std::collections::BTreeMap::new(),
        }
    }

    #[test]
    fn allowed_tools_pre_approve_capstan_and_claude_names() {
        let ws = Path::new("/ws");
        let skills = skills_with(vec![active(
            "commit",
            &[
                "Bash(git add:*)",
                "Bash(git status)",
                "Edit(src/**)",
                "fs__grep",
                "WebFetch(domain:docs.rs)",
                "mcp__github__list_issues",
            ],
            &[],
        )]);
        let command = |c: &str| json!({"command": c});
        let approved = |tool: &str, input: Value| skills.pre_approval(tool, &input, ws);
        assert_eq!(
            approved("exec.run", command("git add src/a.rs")),
            Some(("commit".to_string(), "Bash(git add:*)".to_string()))
        );
        assert!(approved("exec.run", command("git status")).is_some());
        assert!(approved("exec.run", command("git push")).is_none());
        for compound in [
            "git add . && rm -rf src",
            "git add .; curl x",
            "git add $(rm x)",
            "git add `rm x`",
            "git add . | sh",
            "git add . > out",
            "git add .\nrm x",
        ] {
            assert!(
                approved("exec.run", command(compound)).is_none(),
                "{compound}"
            );
        }
        assert!(approved("fs.edit", json!({"path": "src/x.rs"})).is_some());
        assert!(approved("fs.write", json!({"path": "src/x.rs"})).is_some());
        assert!(approved("fs.edit", json!({"path": "other/x.rs"})).is_none());
        assert!(approved("fs.grep", json!({"pattern": "x"})).is_some());
        assert!(approved("web.fetch", json!({"url": "https://docs.rs/x"})).is_some());
        assert!(approved("web.fetch", json!({"url": "https://evil.example"})).is_none());
        assert!(approved("mcp__github__list_issues", json!({})).is_some());
        assert!(approved("mcp__github__delete_repo", json!({})).is_none());
        // Nothing is refused: allowed-tools does not restrict.
        assert_eq!(skills.refusal("fs.write", &json!({"path": "a"}), ws), None);
        skills.end_turn();
        assert!(approved("exec.run", command("git add a")).is_none());
        assert!(skills.active().is_empty());
    }

    #[test]
    fn disallowed_tools_refuse_while_active() {
        let ws = Path::new("/ws");
        let skills = skills_with(vec![active("careful", &["Read"], &["Write", "Bash(rm:*)"])]);
        let refusal = skills
            .refusal("fs.write", &json!({"path": "a"}), ws)
            .unwrap();
        assert!(
            refusal.contains("`careful`") && refusal.contains("fs.write"),
            "{refusal}"
        );
        assert!(
            skills
                .refusal("exec.run", &json!({"command": "rm -rf x"}), ws)
                .is_some()
        );
        assert_eq!(
            skills.refusal("exec.run", &json!({"command": "ls"}), ws),
            None
        );
        assert_eq!(skills.refusal("fs.read", &json!({"path": "a"}), ws), None);
        skills.end_turn();
        assert_eq!(skills.refusal("fs.write", &json!({"path": "a"}), ws), None);
    }

    #[test]
    fn tool_lists_become_rules() {
        assert_eq!(model_name_as_tool("fs__read"), "fs.read");
        assert_eq!(model_name_as_tool("fs__edit(src/**)"), "fs.edit(src/**)");
        assert_eq!(model_name_as_tool("mcp__gh__x"), "mcp__gh__x");
        assert_eq!(model_name_as_tool("Bash(a__b)"), "Bash(a__b)");
        let (rules, bad) = tool_rules(
            &[
                "Read".into(),
                "Bash(unclosed".into(),
                "TodoWrite".into(),
                "Task".into(),
                "mcp__github__*".into(),
            ],
            false,
        );
        assert_eq!(rules.len(), 3);
        assert_eq!(rules[1].covered_tools(), ["task"]);
        assert_eq!(rules[2].covered_tools(), ["mcp__github__*"]);
        assert!(bad[0].contains("Bash(unclosed"), "{bad:?}");
        assert!(bad[1].contains("`TodoWrite`"), "{bad:?}");
        let (rules, notes) = tool_rules(&["Agent(reviewer)".into()], true);
        assert_eq!(rules[0].covered_tools(), ["task"]);
        assert!(notes[0].contains("every call of `task`"), "{notes:?}");
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
        assert_eq!(
            parse_invocation("/commit-commands:clean_gone now"),
            Some(("commit-commands:clean_gone", "now"))
        );
        assert_eq!(parse_invocation("/a::b"), None);
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
