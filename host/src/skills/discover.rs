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
        }
        if let Some(claude) = claude_home {
            found.add_folder(claude, "skills", &Source::ClaudeUser);
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
        let project = matches!(source, Source::Project | Source::ClaudeProject);
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
                            root: locked.root.clone(),
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
                .any(|w| w.contains("outside") && w.contains("leads outside")),
            "{:?}",
            set.warnings()
        );
    }
}
