//! Where skills come from, and which one wins when two share a name.
//!
//! Sources, in order of precedence (the first to offer a name wins):
//!
//! 1. installed plugins, by plugin name: `skills/NAME/SKILL.md`, Claude
//!    Code `commands/NAME.md`, and skill components — reviewed, consented
//!    to and hashed at install, so nothing in a cloned repository can
//!    replace them;
//! 2. the project's `.capstan/skills/NAME/SKILL.md` (in the workspace, then
//!    at the repository's root);
//! 3. the user's `skills/` config folder (`~/.config/capstan/skills/`);
//! 4. the project's `.claude/skills/` (workspace, then repository root);
//! 5. the user's `~/.claude/skills/`.
//!
//! A skill that loses a clash is not used, and the session and
//! `capstan skill list` say which one won. A `SKILL.md` that cannot be
//! parsed is skipped with a warning naming the file and line; the others
//! still load.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::front_matter::{self, SkillMeta};
use super::{LockedFiles, Origin, Skill, Source};
use crate::home::Home;
use crate::plugin::lock::Lockfile;
use crate::plugin::store::PluginStore;

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
            found.add_folder(&root.join(".capstan/skills"), &Source::Project);
        }
        found.add_folder(&home.config_dir().join("skills"), &Source::User);
        for root in &project {
            found.add_folder(&root.join(".claude/skills"), &Source::ClaudeProject);
        }
        if let Some(claude) = claude_home {
            found.add_folder(&claude.join("skills"), &Source::ClaudeUser);
        }
        found
    }

    /// Adds a skill found elsewhere (a skill component's).
    pub fn push(&mut self, skill: Skill) {
        self.candidates.push(skill);
    }

    /// Settles name clashes: the first skill of the highest-precedence
    /// source keeps the name.
    pub fn finish(mut self) -> SkillSet {
        // A stable sort keeps discovery order within a source.
        self.candidates.sort_by(|a, b| a.source.cmp(&b.source));
        let mut skills: Vec<Skill> = Vec::new();
        let mut shadowed = Vec::new();
        for skill in self.candidates {
            match skills.iter().find(|s| s.meta.name == skill.meta.name) {
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

    /// Every `NAME/SKILL.md` in `dir`, sorted by folder name.
    fn add_folder(&mut self, dir: &Path, source: &Source) {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                self.warnings.push(format!(
                    "cannot read the skills folder {}: {e}; its skills were skipped",
                    dir.display()
                ));
                return;
            }
        };
        let mut folders: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("SKILL.md").is_file())
            .collect();
        folders.sort();
        // A repository's skill folder must really be inside it: a symbolic
        // link could otherwise make the skill tool serve files from
        // anywhere the link points.
        let project = matches!(source, Source::Project | Source::ClaudeProject);
        let root = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        for folder in folders {
            if project
                && !folder
                    .canonicalize()
                    .is_ok_and(|real| real.starts_with(&root) && real != root)
            {
                self.warnings.push(format!(
                    "skipped the skill in {}: it is a symbolic link leading outside {}; a project's skills must be inside the project",
                    folder.display(),
                    dir.display()
                ));
                continue;
            }
            let file = folder.join("SKILL.md");
            let folder_name = folder
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let text = match read_capped(&file) {
                Ok(text) => text,
                Err(message) => {
                    self.warnings.push(message);
                    continue;
                }
            };
            if let Some(skill) = self.parse(&text, &folder_name, &file, source) {
                self.candidates.push(Skill {
                    meta: skill.0,
                    source: source.clone(),
                    origin: Origin::File {
                        dir: folder.clone(),
                        file,
                        body: skill.1,
                        locked: None,
                    },
                });
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
                if let Some((meta, body)) = self.parse(&text, &fallback, &file, &source) {
                    self.candidates.push(Skill {
                        meta,
                        source: source.clone(),
                        origin: Origin::File {
                            dir: locked.root.join(&folder_rel),
                            file,
                            body,
                            locked: Some((locked.clone(), folder_rel)),
                        },
                    });
                }
            }
        }
    }
}

/// Whether `rel`, a file of a plugin, is a skill: `skills/NAME/SKILL.md`
/// or `commands/NAME.md`. Returns its folder (relative) and the name to use
/// when its front matter gives none.
pub fn skill_file_in_plugin(rel: &str) -> Option<(String, String)> {
    let parts: Vec<&str> = rel.split('/').collect();
    match parts.as_slice() {
        ["skills", folder, "SKILL.md"] => Some((format!("skills/{folder}"), (*folder).to_string())),
        ["commands", file] => {
            let stem = file.strip_suffix(".md")?;
            Some(("commands".to_string(), stem.to_string()))
        }
        _ => None,
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

/// `~/.claude`, from `$HOME`.
pub fn claude_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".claude"))
}

fn read_capped(file: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(file)
        .map_err(|e| format!("cannot read the skill {}: {e}; skipped it", file.display()))?;
    if meta.len() > MAX_SKILL_FILE {
        return Err(format!(
            "skipped the skill {}: it is {} KiB, more than the {} KiB a SKILL.md may have; move detail into supporting files",
            file.display(),
            meta.len() / 1024,
            MAX_SKILL_FILE / 1024
        ));
    }
    let bytes = std::fs::read(file)
        .map_err(|e| format!("cannot read the skill {}: {e}; skipped it", file.display()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

impl SkillSet {
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

    /// The skill called `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        let name = name.strip_prefix('/').unwrap_or(name);
        self.skills.iter().find(|s| s.meta.name == name)
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
            "---\nname: broken\ndescription: [oops\n---\n",
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
                .any(|w| w.contains("symbolic link leading outside")),
            "{:?}",
            set.warnings()
        );
    }

    #[test]
    fn plugin_skill_files_are_recognised() {
        assert_eq!(
            skill_file_in_plugin("skills/review/SKILL.md"),
            Some(("skills/review".into(), "review".into()))
        );
        assert_eq!(
            skill_file_in_plugin("commands/deploy.md"),
            Some(("commands".into(), "deploy".into()))
        );
        assert_eq!(skill_file_in_plugin("skills/review/ref.md"), None);
        assert_eq!(skill_file_in_plugin("commands/sub/x.md"), None);
    }
}
