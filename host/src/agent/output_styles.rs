//! Output styles, defined as Claude Code defines them: a markdown file
//! `output-styles/NAME.md` whose front matter gives `name`, `description`
//! and `keep-coding-instructions`, and whose body is added to the end of
//! the system prompt while the style is chosen.
//!
//! They are found in the project's `.claude/output-styles/` (workspace,
//! then the repository root), the user's `~/.claude/output-styles/` and
//! installed plugins' `output-styles/` (read through the lock, so a changed
//! file is refused); on a name clash the first of that order wins. A style
//! is chosen with `--output-style NAME`, `/output-style NAME` in a session,
//! `output_style` in capstan's config or `outputStyle` in Claude Code's
//! settings; `default` is capstan's own prompt. As in Claude Code, a style
//! replaces the prompt's instructions on how to work on code unless it sets
//! `keep-coding-instructions: true`, and it applies to the session's own
//! conversation, not to sub-agents.

use std::path::{Path, PathBuf};

use super::context::CODING_INSTRUCTIONS;
use super::markdown_parts;
use crate::front_matter::{self, OutputStyleFile};
use crate::home::Home;
use crate::untrusted_folder::UntrustedFolder;

/// The name that stands for no style: capstan's own prompt.
pub const DEFAULT_STYLE: &str = "default";

/// The largest output style file read.
const MAX_STYLE_FILE: usize = 256 << 10;

/// One output style and where it was defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputStyle {
    /// Its definition.
    pub file: OutputStyleFile,
    /// Where it came from, for messages (`project`, `user`, `plugin NAME`).
    pub source: String,
}

/// The output styles of a session, and what the user should know about the
/// files that were skipped.
#[derive(Debug, Clone, Default)]
pub struct OutputStyles {
    /// The styles, by precedence; names are unique (in any case).
    pub styles: Vec<OutputStyle>,
    /// Files skipped and why.
    pub warnings: Vec<String>,
}

impl OutputStyles {
    /// Finds the output styles of a session in `workspace`: the project's
    /// `.claude/output-styles/`, the user's `claude_home/output-styles/`
    /// (`~/.claude`), then installed plugins' `output-styles/`.
    pub fn discover(home: &Home, workspace: &Path, claude_home: Option<&Path>) -> Self {
        let mut found = Self::default();
        let mut roots = vec![workspace.to_path_buf()];
        if let Some(root) = workspace.ancestors().find(|f| f.join(".git").exists())
            && root != workspace
        {
            roots.push(root.to_path_buf());
        }
        for root in &roots {
            found.add_folder(root, Path::new(".claude/output-styles"), "project");
        }
        if let Some(claude) = claude_home {
            found.add_folder(claude, Path::new("output-styles"), "user");
        }
        found.add_installed_plugins(home);
        found
    }

    /// The style called `name` (in any case); `default` is none. An
    /// unknown name is an error naming the styles there are.
    pub fn pick(&self, name: &str) -> Result<Option<&OutputStyle>, String> {
        let name = name.trim();
        if name.eq_ignore_ascii_case(DEFAULT_STYLE) {
            return Ok(None);
        }
        self.styles
            .iter()
            .find(|style| style.file.name.to_lowercase() == name.to_lowercase())
            .map(Some)
            .ok_or_else(|| {
                format!(
                    "there is no output style `{}`; the output styles are: {}",
                    crate::escape::line(name),
                    self.names().join(", ")
                )
            })
    }

    /// `default`, then every style's name.
    pub fn names(&self) -> Vec<String> {
        let mut names = vec![DEFAULT_STYLE.to_string()];
        names.extend(self.styles.iter().map(|s| s.file.name.clone()));
        names
    }

    fn add(&mut self, file: OutputStyleFile, source: String) {
        if let Some(winner) = self
            .styles
            .iter()
            .find(|s| s.file.name.to_lowercase() == file.name.to_lowercase())
        {
            self.warnings.push(format!(
                "the output style `{}` of {source} is hidden by the one of {}",
                file.name, winner.source
            ));
            return;
        }
        if file.name.eq_ignore_ascii_case(DEFAULT_STYLE) {
            self.warnings.push(format!(
                "the output style `{}` of {source} cannot be chosen: `default` is capstan's own prompt; rename it",
                file.name
            ));
            return;
        }
        self.styles.push(OutputStyle { file, source });
    }

    fn parse(&mut self, text: &str, path: &Path, stem: &str, source: String) {
        match front_matter::parse_output_style(text, stem) {
            Ok(file) => self.add(file, source),
            Err(e) => self.warnings.push(format!(
                "skipped the output style {}:{}: {}",
                path.display(),
                e.line,
                e.message
            )),
        }
    }

    /// Every `*.md` in `root/rel` ([`markdown_parts::in_folder`]).
    fn add_folder(&mut self, root: &Path, rel: &Path, source: &str) {
        let parts = markdown_parts::in_folder(
            root,
            rel,
            source,
            MAX_STYLE_FILE,
            ("output style", "output styles"),
        );
        self.add_parts(parts);
    }

    /// `output-styles/*.md` of every installed plugin, each file's hash checked
    /// against the lock.
    fn add_installed_plugins(&mut self, home: &Home) {
        self.add_parts(markdown_parts::in_installed_plugins(home, "output-styles/"));
    }

    fn add_parts(&mut self, parts: Vec<Result<markdown_parts::Part, String>>) {
        for part in parts {
            match part {
                Ok(part) => self.parse(&part.text, &part.path, &part.stem, part.source),
                Err(warning) => self.warnings.push(warning),
            }
        }
    }
}

/// The largest Claude Code settings file read for `outputStyle`.
const MAX_SETTINGS_FILE: usize = 1 << 20;

/// The output style Claude Code's settings choose (`outputStyle`), and the
/// file that says so: the project's `.claude/settings.local.json`, then its
/// `.claude/settings.json`, then the user's `claude_home/settings.json`.
pub fn claude_settings_choice(
    workspace: &Path,
    claude_home: Option<&Path>,
) -> Option<(String, PathBuf)> {
    let project = [".claude/settings.local.json", ".claude/settings.json"]
        .into_iter()
        .map(|rel| (workspace, rel));
    let user = claude_home.map(|home| (home, "settings.json"));
    project.chain(user).find_map(|(root, rel)| {
        let folder = UntrustedFolder::open(root).ok()??;
        let read = folder.read(Path::new(rel), MAX_SETTINGS_FILE).ok()??;
        let value: serde_json::Value = serde_json::from_str(&read.text()).ok()?;
        let name = value.get("outputStyle")?.as_str()?.trim().to_string();
        (!name.is_empty()).then(|| (name, root.join(rel)))
    })
}

/// The system prompt `system` under `style`: without the instructions on
/// how to work on code unless the style keeps them, and with the style's
/// text at the end, under a heading naming it.
pub fn apply(system: &str, style: &OutputStyle) -> String {
    let mut prompt = if style.file.keep_coding_instructions {
        system.to_string()
    } else {
        system.replacen(CODING_INSTRUCTIONS, "\n", 1)
    };
    if !prompt.ends_with('\n') {
        prompt.push('\n');
    }
    prompt.push_str(&format!(
        "\n# Output style: {}\nThe user chose this output style; follow it in every answer.\n\n{}\n",
        style.file.name, style.file.body
    ));
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    fn style(name: &str, keep: bool) -> OutputStyle {
        OutputStyle {
            file: OutputStyleFile {
                name: name.to_string(),
                description: String::new(),
                keep_coding_instructions: keep,
                body: "Explain each step.".to_string(),
            },
            source: "project".to_string(),
        }
    }

    #[test]
    fn a_style_replaces_the_coding_instructions_unless_it_keeps_them() {
        let system = format!("You are capstan.\n{CODING_INSTRUCTIONS}\n# Skills\n- x\n");
        let replaced = apply(&system, &style("Explanatory", false));
        assert!(!replaced.contains("# How to work"), "{replaced}");
        assert!(replaced.contains("# Skills"));
        assert!(
            replaced.ends_with("# Output style: Explanatory\nThe user chose this output style; follow it in every answer.\n\nExplain each step.\n"),
            "{replaced}"
        );
        let kept = apply(&system, &style("Explanatory", true));
        assert!(kept.contains(CODING_INSTRUCTIONS) && kept.contains("Explain each step."));
    }

    #[test]
    fn names_are_picked_in_any_case_and_unknown_ones_are_named() {
        let mut styles = OutputStyles::default();
        styles.add(style("Explanatory", false).file, "plugin a".into());
        styles.add(style("explanatory", false).file, "plugin b".into());
        styles.add(style("Default", false).file, "user".into());
        assert_eq!(styles.styles.len(), 1);
        assert_eq!(styles.warnings.len(), 2, "{:?}", styles.warnings);
        assert_eq!(
            styles.pick("EXPLANATORY").unwrap().unwrap().source,
            "plugin a"
        );
        assert!(styles.pick("default").unwrap().is_none());
        assert_eq!(
            styles.pick("Learning").unwrap_err(),
            "there is no output style `Learning`; the output styles are: default, Explanatory"
        );
    }
}
