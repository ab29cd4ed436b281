//! Skills: `SKILL.md` folders (the Agent Skills format, with Claude Code's
//! extra fields) and skill components, discovered from installed plugins,
//! `.capstan/skills/`, the user's `skills/` config folder and
//! `.claude/skills/`, and Claude Code's `.claude/commands/`; listed to the model by name and description within a
//! budget, and loaded on demand through the `skill` tool.
//!
//! - [`crate::front_matter`] parses `SKILL.md`; it is a leaf the Claude Code
//!   plugin import ([`crate::plugin`]) uses too;
//! - [`discover`]: where skills come from, and which wins a name clash;
//! - [`text`]: argument substitution and the inline-shell note;
//! - [`inline_shell`]: inline shell commands run in the OS sandbox, their
//!   output in their place;
//! - [`prompt`]: the listing in the system prompt, within its budget;
//! - [`session`]: the `skill` tool, active skills and `allowed-tools`;

pub mod discover;
pub mod inline_shell;
pub mod names;
pub mod prompt;
pub mod session;
pub mod text;
pub mod tool_list;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

pub use crate::front_matter::SkillMeta;
pub use discover::{Discovery, Lookup, SkillSet};
pub use session::Skills;

/// Where a skill comes from. The order of the variants is the precedence:
/// when two sources offer the same name, the earlier one wins.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// An installed plugin (its `skills/` folder, its Claude Code
    /// `commands/`, or its skill component).
    Plugin(String),
    /// The project's `.capstan/skills/`.
    Project,
    /// The user's `skills/` config folder (`~/.config/capstan/skills/`).
    User,
    /// The project's `.claude/skills/`, for compatibility.
    ClaudeProject,
    /// The project's `.claude/commands/`, for compatibility.
    ClaudeProjectCommands,
    /// The user's `~/.claude/skills/`, for compatibility.
    ClaudeUser,
    /// The user's `~/.claude/commands/`, for compatibility.
    ClaudeUserCommands,
}

impl Source {
    /// How the source is named to the user.
    pub fn label(&self) -> String {
        match self {
            Self::Plugin(name) => format!("plugin {name}"),
            Self::Project => ".capstan/skills".to_string(),
            Self::User => "user skills".to_string(),
            Self::ClaudeProject => ".claude/skills".to_string(),
            Self::ClaudeProjectCommands => ".claude/commands".to_string(),
            Self::ClaudeUser => "~/.claude/skills".to_string(),
            Self::ClaudeUserCommands => "~/.claude/commands".to_string(),
        }
    }

    /// A short kind for `--json`: `plugin`, `project`, `user`,
    /// `claude-project`, `claude-project-commands`, `claude-user`,
    /// `claude-user-commands`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Plugin(_) => "plugin",
            Self::Project => "project",
            Self::User => "user",
            Self::ClaudeProject => "claude-project",
            Self::ClaudeProjectCommands => "claude-project-commands",
            Self::ClaudeUser => "claude-user",
            Self::ClaudeUserCommands => "claude-user-commands",
        }
    }

    /// Whether the skill is one of the user's own (their config folder,
    /// `~/.claude/skills` or `~/.claude/commands`): these are left out of
    /// the prompt's listing first when it is over its budget.
    pub fn is_users_own(&self) -> bool {
        matches!(
            self,
            Self::User | Self::ClaudeUser | Self::ClaudeUserCommands
        )
    }

    /// Whether the source is a project's folder (its files are someone
    /// else's and are read beneath the project's root).
    pub fn is_project(&self) -> bool {
        matches!(
            self,
            Self::Project | Self::ClaudeProject | Self::ClaudeProjectCommands
        )
    }
}

/// The files of an installed plugin as its lock entry records them: a
/// skill file is read only if its SHA-256 is still the recorded one.
#[derive(Debug, Clone)]
pub struct LockedFiles {
    /// The plugin.
    pub plugin: String,
    /// Its store folder.
    pub root: PathBuf,
    /// Relative path to SHA-256.
    pub files: BTreeMap<String, String>,
    /// Where it was installed from, for messages.
    pub source: String,
}

impl LockedFiles {
    /// Reads `rel` (relative to the plugin's folder), checking its hash.
    pub fn read(&self, rel: &str) -> Result<Vec<u8>, String> {
        let Some(expected) = self.files.get(rel) else {
            return Err(format!(
                "plugin {} has no file {rel} among its installed files",
                self.plugin
            ));
        };
        let path = self.root.join(rel);
        let bytes = std::fs::read(&path).map_err(|e| {
            format!(
                "cannot read {} of plugin {}: {e}; reinstall it with `capstan plugin install {}`",
                path.display(),
                self.plugin,
                self.source
            )
        })?;
        if crate::sandbox::engine::sha256_hex(&bytes) != *expected {
            return Err(format!(
                "refusing {} of plugin {}: it has changed since it was installed; reinstall it with `capstan plugin install {}`, or remove it with `capstan plugin remove {}`",
                path.display(),
                self.plugin,
                self.source,
                self.plugin
            ));
        }
        Ok(bytes)
    }
}

/// Where a skill's text lives.
#[derive(Debug, Clone)]
pub enum Origin {
    /// A `SKILL.md` (or a Claude Code command file) in a folder.
    File {
        /// The folder the skill's folder must stay inside: the project root
        /// for a project's skill (its supporting files are read beneath it,
        /// then beneath the skill's folder), the skill's folder itself for
        /// the user's own, the plugin's store folder for a plugin's.
        root: PathBuf,
        /// The skill's folder: supporting files are relative to it.
        dir: PathBuf,
        /// The file itself.
        file: PathBuf,
        /// The body after the front matter.
        body: String,
        /// For an installed plugin: its locked files, and the folder's
        /// path relative to the plugin's root (supporting files are read
        /// through the lock).
        locked: Option<(Arc<LockedFiles>, String)>,
    },
    /// A skill component of an installed plugin.
    Component {
        /// Which of the session's skill components.
        index: usize,
    },
}

/// One skill.
#[derive(Debug, Clone)]
pub struct Skill {
    /// What it says about itself.
    pub meta: SkillMeta,
    /// Where it comes from.
    pub source: Source,
    /// Where its text lives.
    pub origin: Origin,
    /// For a command in a sub-folder of a commands folder (a project's,
    /// the user's or a plugin's): the folders, joined by `:` (`frontend`
    /// for `frontend/component.md`).
    pub folder: Option<String>,
}

impl Skill {
    /// Whether it is a Claude Code command (a `NAME.md` of a `commands/`
    /// folder) rather than a skill (a `SKILL.md` or a skill component): a
    /// skill wins over a command of the same name from the same place.
    pub fn is_command(&self) -> bool {
        match &self.origin {
            Origin::File { file, .. } => {
                file.file_name().and_then(|n| n.to_str()) != Some("SKILL.md")
            }
            Origin::Component { .. } => false,
        }
    }

    /// What qualifies its name: the plugin's name for a plugin's skill, the
    /// sub-folder for a command in one, both for a plugin's command in a
    /// sub-folder (`plugin:git` for `commands/git/sync.md`).
    pub fn namespace(&self) -> Option<String> {
        match (&self.source, &self.folder) {
            (Source::Plugin(plugin), Some(folder)) => Some(format!("{plugin}:{folder}")),
            (Source::Plugin(plugin), None) => Some(plugin.clone()),
            (_, folder) => folder.clone(),
        }
    }

    /// Its name qualified by its namespace: `plugin:name`,
    /// `folder:name`, or the name alone.
    pub fn qualified_name(&self) -> String {
        match self.namespace() {
            Some(namespace) => format!("{namespace}:{}", self.meta.name),
            None => self.meta.name.clone(),
        }
    }

    /// Where it is, for listings: the file, or the plugin's component.
    pub fn location(&self) -> String {
        match &self.origin {
            Origin::File { file, .. } => file.display().to_string(),
            Origin::Component { .. } => format!("{} (skill component)", self.source.label()),
        }
    }

    /// The folder supporting files are read from, if it is a folder.
    pub fn dir(&self) -> Option<&std::path::Path> {
        match &self.origin {
            Origin::File { dir, .. } => Some(dir),
            Origin::Component { .. } => None,
        }
    }
}
