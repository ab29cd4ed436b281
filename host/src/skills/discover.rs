//! Where skills come from, and which one wins when two share a name.
//!
//! Sources, in order of precedence (the first to offer a name wins):
//!
//! 1. installed plugins, by plugin name: `skills/NAME/SKILL.md`, Claude
//!    Code `commands/NAME.md` (and `commands/SUB/NAME.md`, named
//!    `plugin:SUB:NAME`), and skill components — reviewed, consented
//!    to and hashed at install, so nothing in a cloned repository can
//!    replace them;
//! 2. the project's `.capstan/skills/NAME/SKILL.md` (in the workspace, then
//!    at the repository's root);
//! 3. the user's `skills/` config folder (`~/.config/capstan/skills/`);
//! 4. the project's `.claude/skills/`, then its `.claude/commands/`
//!    (workspace, then repository root);
//! 5. the user's `~/.claude/skills/`, then `~/.claude/commands/`.
//!
//! Claude Code commands (`NAME.md`) may sit in sub-folders of a commands
//! folder, as in Claude Code: `frontend/component.md` is `/component`, and
//! also `/frontend:component` (the sub-folder is its namespace).
//!
//! Names clash only where Claude Code's would: a plugin's skills are
//! reachable as `plugin:name` whatever else is offered, so two plugins'
//! skills of the same name are both kept, and the bare name then asks
//! which (see [`SkillSet::lookup`]). Within one plugin (or one folder) a
//! skill wins over a command of the same name. A plugin's skill wins over
//! a project's or the user's of the same bare name, so nothing in a
//! cloned repository can take the place of a skill the user installed;
//! between the other sources the earlier one wins. A skill that loses a
//! clash is not used, and the session and `capstan skill list` say which
//! one won. A `SKILL.md` that cannot be
//! parsed is skipped with a warning naming the file and line; the others
//! still load.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::names::{self, Wanted};
use super::{LockedFiles, Origin, Skill, Source};
use crate::front_matter::{self, SkillMeta};
use crate::home::Home;
use crate::plugin::lock::Lockfile;
use crate::plugin::package::skill_file_in_plugin;
use crate::plugin::store::PluginStore;
use crate::untrusted_folder::{Refused, UntrustedFolder};

/// The largest `SKILL.md` read.
pub const MAX_SKILL_FILE: u64 = 512 * 1024;

/// A skill that lost a name clash.
#[derive(Debug, Clone)]
pub struct Shadowed {
    /// The name both use.
    pub name: String,
    /// The source whose skill is used.
    pub winner: Source,
    /// The skill that is not used.
    pub loser: Skill,
}

impl Shadowed {
    /// The warning shown at session start and by `capstan skill list`.
    pub fn warning(&self) -> String {
        if self.winner == self.loser.source {
            return format!(
                "{} has both a skill and a command called `{}`; using the skill, not {}",
                self.winner.label(),
                self.name,
                self.loser.location()
            );
        }
        format!(
            "skill `{}` is offered by both {} and {} ({}); using the one from {}",
            self.name,
            self.winner.label(),
            self.loser.source.label(),
            self.loser.location(),
            self.winner.label()
        )
    }
}

/// Skills found so far, before clashes are settled.
#[derive(Debug, Default)]
pub struct Discovery {
    candidates: Vec<Skill>,
    /// Files skipped, plugins refused, and other things the user should
    /// know.
    pub warnings: Vec<String>,
}

/// The skills of a session, clashes settled.
#[derive(Debug, Clone, Default)]
pub struct SkillSet {
    skills: Vec<Skill>,
    shadowed: Vec<Shadowed>,
    warnings: Vec<String>,
}

impl Discovery {
    /// Finds the `SKILL.md` skills of every source for a session in
    /// `workspace`; `claude_home` is `~/.claude` (see [`claude_home`]).
    /// Skill components are added by the session, which can run them.
    pub fn folders(home: &Home, workspace: &Path, claude_home: Option<&Path>) -> Self {
        let mut found = Self::default();
        found.add_installed_plugins(home);
        let project = project_roots(workspace);
        for root in &project {
            found.add_folder(root, ".capstan/skills", &Source::Project);
        }
        found.add_folder(home.config_dir(), "skills", &Source::User);
        for root in &project {
            found.add_folder(root, ".claude/skills", &Source::ClaudeProject);
            found.add_commands(root, ".claude/commands", &Source::ClaudeProjectCommands);
        }
        if let Some(claude) = claude_home {
            found.add_folder(claude, "skills", &Source::ClaudeUser);
            found.add_commands(claude, "commands", &Source::ClaudeUserCommands);
        }
        found
    }

    /// Adds a skill found elsewhere (a skill component's).
    pub fn push(&mut self, skill: Skill) {
        self.candidates.push(skill);
    }

    /// Settles name clashes (see the [module documentation](self)).
    pub fn finish(mut self) -> SkillSet {
        // A stable sort keeps discovery order within a source; a source's
        // skills come before its commands.
        self.candidates
            .sort_by(|a, b| (&a.source, a.is_command()).cmp(&(&b.source, b.is_command())));
        let mut skills: Vec<Skill> = Vec::new();
        let mut shadowed = Vec::new();
        for skill in self.candidates {
            match skills.iter().find(|kept| shadows(kept, &skill)) {
                Some(winner) => shadowed.push(Shadowed {
                    name: skill.meta.name.clone(),
                    winner: winner.source.clone(),
                    loser: skill,
                }),
                None => skills.push(skill),
            }
        }
        SkillSet {
            skills,
            shadowed,
            warnings: self.warnings,
        }
    }

    /// Every `NAME/SKILL.md` in the folder `rel` of `root`, sorted by
    /// folder name.
    ///
    /// A project's skills are someone else's files: the skills folder, each
    /// skill's folder and its `SKILL.md` are resolved beneath `root` (the
    /// workspace or the repository root; see [`UntrustedFolder`]), so a
    /// symbolic link leading out of it — or a skill folder leading out of
    /// the skills folder — is skipped with a warning, as is a `SKILL.md`
    /// that is a FIFO or a device. The user's own skill folders may be
    /// links to anywhere (dotfiles); their files are read beneath them.
    fn add_folder(&mut self, root: &Path, rel: &str, source: &Source) {
        let project = source.is_project();
        let dir = root.join(rel);
        let skills = if project {
            UntrustedFolder::open(root).and_then(|root_folder| match root_folder {
                Some(root_folder) => root_folder.subfolder(Path::new(rel)),
                None => Ok(None),
            })
        } else {
            UntrustedFolder::open(&dir)
        };
        let skills = match skills {
            Ok(Some(skills)) => skills,
            Ok(None) => return,
            Err(e) => {
                self.warnings
                    .push(format!("skipped the skills in {}: {e}", dir.display()));
                return;
            }
        };
        let names = match skills.entry_names() {
            Ok(names) => names,
            Err(e) => {
                self.warnings
                    .push(format!("skipped the skills in {}: {e}", dir.display()));
                return;
            }
        };
        for name in names {
            let folder = dir.join(&name);
            // A project's skill folder stays inside the skills folder; the
            // user's own may be a link to anywhere.
            let (skill_root, opened) = if project {
                (root.to_path_buf(), skills.subfolder(Path::new(&name)))
            } else {
                (folder.clone(), UntrustedFolder::open(&folder))
            };
            let skill_folder = match opened {
                Ok(Some(f)) => f,
                Ok(None) | Err(Refused::WrongKind { .. }) => continue,
                Err(e) => {
                    self.warnings
                        .push(format!("skipped the skill in {}: {e}", folder.display()));
                    continue;
                }
            };
            let file = folder.join(SKILL_FILE);
            let text = match read_skill_file(&skill_folder, &file) {
                Ok(Some(text)) => text,
                Ok(None) => continue,
                Err(message) => {
                    self.warnings.push(message);
                    continue;
                }
            };
            if let Some(skill) = self.parse(&text, &name, &file, source) {
                self.candidates.push(Skill {
                    meta: skill.0,
                    source: source.clone(),
                    origin: Origin::File {
                        root: skill_root,
                        dir: folder.clone(),
                        file,
                        body: skill.1,
                        locked: None,
                    },
                    folder: None,
                });
            }
        }
    }

    /// Every `NAME.md` in the Claude Code commands folder `rel` of `root`
    /// and its sub-folders (at most [`MAX_COMMAND_DEPTH`] deep), as
    /// commands: the file's name is the command's, its sub-folders its
    /// namespace. A project's folder is read beneath the project's root,
    /// as its skills are; the user's own may be a link to anywhere.
    fn add_commands(&mut self, root: &Path, rel: &str, source: &Source) {
        let dir = root.join(rel);
        let opened = if source.is_project() {
            UntrustedFolder::open(root).and_then(|root_folder| match root_folder {
                Some(root_folder) => root_folder.subfolder(Path::new(rel)),
                None => Ok(None),
            })
        } else {
            UntrustedFolder::open(&dir)
        };
        let folder = match opened {
            Ok(Some(folder)) => folder,
            Ok(None) | Err(Refused::WrongKind { .. }) => return,
            Err(e) => {
                self.warnings
                    .push(format!("skipped the commands in {}: {e}", dir.display()));
                return;
            }
        };
        let skill_root = if source.is_project() {
            root.to_path_buf()
        } else {
            dir.clone()
        };
        let mut budget = MAX_COMMAND_FILES;
        self.add_command_folder(&folder, &skill_root, &[], source, &mut budget);
    }

    /// The commands in `folder`, reached through the sub-folders `path`.
    fn add_command_folder(
        &mut self,
        folder: &UntrustedFolder,
        skill_root: &Path,
        path: &[String],
        source: &Source,
        budget: &mut usize,
    ) {
        let entries = match folder.entry_names() {
            Ok(entries) => entries,
            Err(e) => {
                self.warnings.push(format!("skipped the commands in {e}"));
                return;
            }
        };
        for entry in entries {
            if entry.starts_with('.') {
                continue;
            }
            let at = folder.path().join(&entry);
            if let Some(stem) = entry.strip_suffix(".md") {
                if *budget == 0 {
                    self.warnings.push(format!(
                        "skipped the commands from {} on: more than {MAX_COMMAND_FILES} command files",
                        at.display()
                    ));
                    return;
                }
                let cap = usize::try_from(MAX_SKILL_FILE).unwrap_or(usize::MAX);
                let text = match folder.read(Path::new(&entry), cap) {
                    Ok(Some(read)) if read.more => {
                        self.warnings.push(format!(
                            "skipped the command {}: it is more than the {} KiB a command may have",
                            at.display(),
                            MAX_SKILL_FILE / 1024
                        ));
                        continue;
                    }
                    Ok(Some(read)) => read.text(),
                    Ok(None) | Err(Refused::WrongKind { .. }) => continue,
                    Err(e) => {
                        self.warnings
                            .push(format!("skipped the command {}: {e}", at.display()));
                        continue;
                    }
                };
                *budget -= 1;
                if let Some((meta, body)) = self.parse(&text, stem, &at, source) {
                    self.candidates.push(Skill {
                        meta,
                        source: source.clone(),
                        origin: Origin::File {
                            root: skill_root.to_path_buf(),
                            dir: folder.path().to_path_buf(),
                            file: at,
                            body,
                            locked: None,
                        },
                        folder: (!path.is_empty()).then(|| path.join(":")),
                    });
                }
                continue;
            }
            if path.len() >= MAX_COMMAND_DEPTH {
                continue;
            }
            match folder.subfolder(Path::new(&entry)) {
                Ok(Some(sub)) => {
                    let Some(part) = front_matter::invocation_name(&entry) else {
                        continue;
                    };
                    let mut deeper = path.to_vec();
                    deeper.push(part);
                    self.add_command_folder(&sub, skill_root, &deeper, source, budget);
                }
                Ok(None) | Err(Refused::WrongKind { .. }) => {}
                Err(e) => self
                    .warnings
                    .push(format!("skipped the commands in {}: {e}", at.display())),
            }
        }
    }

    /// Parses one skill file, or records why it was skipped.
    fn parse(
        &mut self,
        text: &str,
        fallback_name: &str,
        file: &Path,
        source: &Source,
    ) -> Option<(SkillMeta, String)> {
        match front_matter::parse(text, fallback_name) {
            Ok(parsed) => Some((parsed.meta, parsed.body)),
            Err(error) => {
                self.warnings.push(format!(
                    "skipped the skill in {}:{} ({}): {}",
                    file.display(),
                    error.line,
                    source.label(),
                    error.message
                ));
                None
            }
        }
    }

    /// The skills inside installed plugins: `skills/NAME/SKILL.md` and
    /// Claude Code `commands/NAME.md`, read through the lock so a changed
    /// file is refused.
    fn add_installed_plugins(&mut self, home: &Home) {
        let store = PluginStore::new(home.plugins_dir());
        let lock = match Lockfile::load(&store.lock_path()) {
            Ok(lock) => lock,
            Err(e) => {
                self.warnings
                    .push(format!("installed plugins' skills were skipped: {e}"));
                return;
            }
        };
        for (name, entry) in &lock.plugins {
            let locked = Arc::new(LockedFiles {
                plugin: name.clone(),
                root: entry.dir(store.root()),
                files: entry.files.clone(),
                source: entry.source.clone(),
            });
            let source = Source::Plugin(name.clone());
            for rel in entry.files.keys() {
                let Some((folder_rel, fallback)) = skill_file_in_plugin(rel) else {
                    continue;
                };
                let text = match locked.read(rel) {
                    Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                    Err(message) => {
                        self.warnings.push(message);
                        continue;
                    }
                };
                let file = locked.root.join(rel);
                // A command in sub-folders of `commands/`: they are its
                // namespace within the plugin's.
                let folder = folder_rel.strip_prefix("commands/").map(|sub| {
                    sub.split('/')
                        .map(|part| {
                            front_matter::invocation_name(part).unwrap_or_else(|| part.to_string())
                        })
                        .collect::<Vec<_>>()
                        .join(":")
                });
                if let Some((meta, body)) = self.parse(&text, &fallback, &file, &source) {
                    self.candidates.push(Skill {
                        meta,
                        source: source.clone(),
                        origin: Origin::File {
                            root: locked.root.clone(),
                            dir: locked.root.join(&folder_rel),
                            file,
                            body,
                            locked: Some((locked.clone(), folder_rel)),
                        },
                        folder,
                    });
                }
            }
        }
    }
}

/// The workspace, then the repository root above it if there is one.
fn project_roots(workspace: &Path) -> Vec<PathBuf> {
    let mut roots = vec![workspace.to_path_buf()];
    if let Some(root) = workspace.ancestors().find(|f| f.join(".git").exists())
        && root != workspace
    {
        roots.push(root.to_path_buf());
    }
    roots
}

/// How deep sub-folders of a commands folder are read.
pub const MAX_COMMAND_DEPTH: usize = 4;

/// The most command files read from one commands folder.
pub const MAX_COMMAND_FILES: usize = 2000;

/// Whether `kept`, settled earlier, keeps `later` from being used.
fn shadows(kept: &Skill, later: &Skill) -> bool {
    if kept.meta.name != later.meta.name {
        return false;
    }
    match (&kept.source, &later.source) {
        (Source::Plugin(a), Source::Plugin(b)) => a == b && kept.folder == later.folder,
        (Source::Plugin(_), _) => true,
        (_, Source::Plugin(_)) => false,
        _ => kept.folder == later.folder,
    }
}

/// `~/.claude`, from `$HOME`.
pub fn claude_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".claude"))
}

/// The name of a skill's file in its folder.
const SKILL_FILE: &str = "SKILL.md";

/// Reads a skill folder's `SKILL.md` (at most [`MAX_SKILL_FILE`] bytes),
/// `None` when the folder has none; `file` names it in messages.
fn read_skill_file(folder: &UntrustedFolder, file: &Path) -> Result<Option<String>, String> {
    let cap = usize::try_from(MAX_SKILL_FILE).unwrap_or(usize::MAX);
    let read = folder
        .read(Path::new(SKILL_FILE), cap)
        .map_err(|e| format!("skipped the skill {}: {e}", file.display()))?;
    let Some(read) = read else {
        return Ok(None);
    };
    if read.more {
        return Err(format!(
            "skipped the skill {}: it is more than the {} KiB a SKILL.md may have; move detail into supporting files",
            file.display(),
            MAX_SKILL_FILE / 1024
        ));
    }
    Ok(Some(read.text()))
}

impl SkillSet {
    /// Keeps only the skills `keep` accepts.
    pub fn retain(&mut self, keep: impl Fn(&Skill) -> bool) {
        self.skills.retain(|skill| keep(skill));
    }

    /// The skills in use, by precedence then discovery order.
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// The skills that lost a name clash.
    pub fn shadowed(&self) -> &[Shadowed] {
        &self.shadowed
    }

    /// Warnings: skipped files and clashes.
    pub fn warnings(&self) -> Vec<String> {
        let mut all = self.warnings.clone();
        all.extend(self.shadowed.iter().map(Shadowed::warning));
        all
    }

    /// The skill `name` asks for, if exactly one answers to it (see
    /// [`SkillSet::lookup`]).
    pub fn get(&self, name: &str) -> Option<&Skill> {
        match self.lookup(name) {
            Lookup::Found(skill) => Some(skill),
            Lookup::Ambiguous(_) | Lookup::Missing => None,
        }
    }

    /// The skill `name` asks for: `name`, `/name`, `namespace:name`, or
    /// the name as written for display. A bare name that several skills
    /// answer to (two plugins' skills, or commands in two sub-folders)
    /// picks none of them, unless exactly one of them is not namespaced.
    pub fn lookup(&self, name: &str) -> Lookup<'_> {
        let Some(wanted) = names::wanted(name) else {
            return Lookup::Missing;
        };
        let found: Vec<&Skill> = self
            .skills
            .iter()
            .filter(|skill| answers(skill, &wanted))
            .collect();
        match found.as_slice() {
            [] => Lookup::Missing,
            [one] => Lookup::Found(one),
            several => {
                let plain: Vec<&&Skill> =
                    several.iter().filter(|s| s.namespace().is_none()).collect();
                match plain.as_slice() {
                    [one] => Lookup::Found(one),
                    _ => Lookup::Ambiguous(several.iter().map(|s| s.qualified_name()).collect()),
                }
            }
        }
    }

    /// The skill `name` asks for, or what to tell whoever asked: which
    /// qualified names to choose from, or the closest few names.
    pub fn resolve(&self, name: &str) -> Result<&Skill, String> {
        match self.lookup(name) {
            Lookup::Found(skill) => Ok(skill),
            Lookup::Ambiguous(choices) => Err(format!(
                "`{name}` is the name of more than one skill: {}; use one of these names",
                choices.join(", ")
            )),
            Lookup::Missing => Err(self.unknown(name, |_| true)),
        }
    }

    /// The message for a name no skill answers to: the closest few of the
    /// skills `include` accepts, never the whole list.
    pub fn unknown(&self, name: &str, include: impl Fn(&Skill) -> bool) -> String {
        let call_names: Vec<String> = self
            .skills
            .iter()
            .filter(|s| include(s))
            .map(|s| self.call_name(s))
            .collect();
        if call_names.is_empty() {
            return format!("there is no skill called `{name}`; no skills are installed");
        }
        let close = names::closest(name, call_names.iter().map(String::as_str));
        if close.is_empty() {
            format!(
                "there is no skill called `{name}`; `capstan skill list` shows the {} skill{}",
                call_names.len(),
                if call_names.len() == 1 { "" } else { "s" }
            )
        } else {
            format!(
                "there is no skill called `{name}`; did you mean {}?",
                close
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    }

    /// The name `skill` is called by in listings: its own name when that
    /// finds it, else its qualified name (`plugin:name`).
    pub fn call_name(&self, skill: &Skill) -> String {
        match self.lookup(&skill.meta.name) {
            Lookup::Found(found) if std::ptr::eq(found, skill) => skill.meta.name.clone(),
            _ => skill.qualified_name(),
        }
    }
}

/// What a name asks for.
#[derive(Debug)]
pub enum Lookup<'a> {
    /// Exactly this skill.
    Found(&'a Skill),
    /// Several skills; their qualified names.
    Ambiguous(Vec<String>),
    /// None.
    Missing,
}

/// Whether `skill` answers to `wanted`.
fn answers(skill: &Skill, wanted: &Wanted) -> bool {
    if skill.meta.name != wanted.name {
        return false;
    }
    match &wanted.namespace {
        None => true,
        Some(namespace) => skill
            .namespace()
            .is_some_and(|own| names::namespace_key(&own) == *namespace),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn skill(root: &Path, name: &str, description: &str) {
        let dir = root.join(name);
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: {description}\n---\nBody of {name}.\n"),
        )
        .unwrap();
    }

    #[test]
    fn every_source_is_read_and_clashes_go_to_the_higher_precedence() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().join("home"), dir.path().join("cache"));
        let ws = dir.path().join("ws");
        skill(&ws.join(".capstan/skills"), "shared", "from the project");
        skill(&ws.join(".capstan/skills"), "project-only", "p");
        skill(&home.config_dir().join("skills"), "shared", "from the user");
        skill(&home.config_dir().join("skills"), "user-only", "u");
        skill(&ws.join(".claude/skills"), "claude-only", "c");
        fs::create_dir_all(ws.join(".claude/skills/broken")).unwrap();
        fs::write(
            ws.join(".claude/skills/broken/SKILL.md"),
            "---\nname: broken\n\tdescription: [oops\n---\n",
        )
        .unwrap();

        let found = Discovery::folders(&home, &ws, None);
        let set = found.finish();
        let names: Vec<&str> = set.skills().iter().map(|s| s.meta.name.as_str()).collect();
        assert_eq!(
            names,
            ["project-only", "shared", "user-only", "claude-only"]
        );
        assert_eq!(set.get("shared").unwrap().source, Source::Project);
        assert_eq!(set.shadowed().len(), 1);
        let warnings = set.warnings();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("broken/SKILL.md:") && w.contains("invalid YAML")),
            "{warnings:?}"
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("`shared`") && w.contains("using the one from .capstan/skills")),
            "{warnings:?}"
        );
    }

    fn command(root: &Path, rel: &str, text: &str) {
        let file = root.join(rel);
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(file, text).unwrap();
    }

    fn plugin_skill(name: &str, plugin: &str, command: bool) -> Skill {
        let file = if command {
            format!("/p/{plugin}/commands/{name}.md")
        } else {
            format!("/p/{plugin}/skills/{name}/SKILL.md")
        };
        Skill {
            meta: SkillMeta {
                name: name.to_string(),
                description: format!("{name} of {plugin}"),
                user_invocable: true,
                model_invocable: true,
                ..SkillMeta::default()
            },
            source: Source::Plugin(plugin.to_string()),
            origin: Origin::File {
                root: PathBuf::from("/p"),
                dir: PathBuf::from("/p"),
                file: PathBuf::from(file),
                body: String::new(),
                locked: None,
            },
            folder: None,
        }
    }

    #[test]
    fn claude_code_command_folders_are_read_with_their_sub_folders() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().join("home"), dir.path().join("cache"));
        let ws = dir.path().join("ws");
        let claude = dir.path().join("user/.claude");
        command(
            &ws,
            ".claude/commands/clean_gone.md",
            "Remove [gone] branches.\n",
        );
        command(
            &ws,
            ".claude/commands/frontend/component.md",
            "Make a component: $0\n",
        );
        command(
            &ws,
            ".claude/commands/backend/component.md",
            "A backend one.\n",
        );
        command(&ws, ".claude/commands/notes.txt", "not a command");
        command(
            &claude,
            "commands/mine.md",
            "---\ndescription: my own\n---\nDo it.\n",
        );
        command(&claude, "commands/clean_gone.md", "The user's, shadowed.\n");
        skill(&ws.join(".claude/skills"), "deploy", "the skill");
        command(&ws, ".claude/commands/deploy.md", "the command, shadowed\n");

        let set = Discovery::folders(&home, &ws, Some(&claude)).finish();
        let clean = set.get("/clean_gone").unwrap();
        assert_eq!(clean.meta.name, "clean-gone");
        assert_eq!(clean.meta.display_name.as_deref(), Some("clean_gone"));
        assert_eq!(clean.source, Source::ClaudeProjectCommands);
        assert!(clean.is_command());
        assert_eq!(set.get("clean-gone").unwrap().meta.name, "clean-gone");
        assert_eq!(set.get("mine").unwrap().source, Source::ClaudeUserCommands);
        assert_eq!(set.get("mine").unwrap().meta.description, "my own");
        let deploy = set.get("deploy").unwrap();
        assert!(!deploy.is_command(), "a skill wins over a command");

        // Same name in two sub-folders: both kept, each by its folder.
        let front = set.get("frontend:component").unwrap();
        assert_eq!(front.folder.as_deref(), Some("frontend"));
        assert_eq!(front.qualified_name(), "frontend:component");
        assert!(set.get("backend:component").is_some());
        let err = set.resolve("component").unwrap_err();
        assert!(
            err.contains("backend:component") && err.contains("frontend:component"),
            "{err}"
        );
        assert!(set.get("notes").is_none());
        let shadowed: Vec<String> = set.shadowed().iter().map(|s| s.warning()).collect();
        assert_eq!(shadowed.len(), 2, "{shadowed:?}");
        assert!(
            shadowed
                .iter()
                .any(|w| w
                    .contains("`deploy` is offered by both .claude/skills and .claude/commands")),
            "{shadowed:?}"
        );
    }

    #[test]
    fn two_plugins_skills_of_one_name_both_stay_reachable() {
        let mut found = Discovery::default();
        found.push(plugin_skill("review", "one", false));
        found.push(plugin_skill("review", "two", false));
        found.push(plugin_skill("tidy", "one", true));
        found.push(plugin_skill("tidy", "one", false));
        found.push(plugin_skill("only", "two", true));
        let set = found.finish();
        assert_eq!(
            set.resolve("one:review").unwrap().meta.description,
            "review of one"
        );
        assert_eq!(
            set.resolve("/two:review").unwrap().meta.description,
            "review of two"
        );
        let err = set.resolve("review").unwrap_err();
        assert!(err.contains("one:review, two:review"), "{err}");
        assert!(set.resolve("three:review").is_err());
        // Within one plugin the skill wins over the command.
        let tidy = set.resolve("tidy").unwrap();
        assert!(!tidy.is_command());
        assert_eq!(set.call_name(tidy), "tidy");
        assert_eq!(
            set.call_name(set.resolve("two:review").unwrap()),
            "two:review"
        );
        assert_eq!(set.resolve("only").unwrap().meta.name, "only");
        let unknown = set.resolve("reveiw").unwrap_err();
        assert!(
            unknown.contains("did you mean `one:review`, `two:review`"),
            "{unknown}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_project_skill_folder_linking_outside_the_project_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().join("home"), dir.path().join("cache"));
        let ws = dir.path().join("ws");
        let elsewhere = dir.path().join("elsewhere");
        skill(&elsewhere, "outside", "d");
        fs::create_dir_all(ws.join(".capstan/skills")).unwrap();
        std::os::unix::fs::symlink(
            elsewhere.join("outside"),
            ws.join(".capstan/skills/outside"),
        )
        .unwrap();
        // The user's own folders may link wherever they like.
        fs::create_dir_all(home.config_dir().join("skills")).unwrap();
        std::os::unix::fs::symlink(
            elsewhere.join("outside"),
            home.config_dir().join("skills/outside"),
        )
        .unwrap();
        let set = Discovery::folders(&home, &ws, None).finish();
        assert_eq!(set.get("outside").unwrap().source, Source::User);
        assert!(
            set.warnings()
                .iter()
                .any(|w| w.contains("outside") && w.contains("leads outside")),
            "{:?}",
            set.warnings()
        );
    }
}
