//! `@path` mentions at the prompt: Tab completes workspace paths after an
//! `@`, and a prompt's mentioned files go to the model with it (their
//! text, within a size cap; a folder's entries), each shown to the user.
//! A path outside the workspace, one of the protected paths, or one a deny
//! rule keeps from `fs.read` is refused with a message and not attached.

use std::path::{Component, Path, PathBuf};

use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use serde_json::json;

use crate::grants::fs::PROTECTED;
use crate::policy::{Outcome, Policy, ToolFacts};
use crate::untrusted_folder::UntrustedFolder;

/// The most bytes of one mentioned file given to the model.
pub const FILE_CAP: usize = 100 * 1024;

/// The most entries of a mentioned folder given to the model.
const FOLDER_ENTRIES: usize = 200;

/// The most candidates Tab offers.
const MAX_CANDIDATES: usize = 100;

/// The most folder entries looked at when searching the workspace for a
/// name typed without a folder.
const SEARCH_BUDGET: usize = 5_000;

/// Folders the search for a bare name does not go into.
const SKIPPED_FOLDERS: &[&str] = &["node_modules", "target", "__pycache__", "dist", "build"];

/// The line editor's helper: completes `@path` mentions in `workspace`.
pub struct MentionHelper {
    workspace: PathBuf,
}

impl MentionHelper {
    /// Completes paths of `workspace` (canonical).
    pub fn new(workspace: PathBuf) -> Self {
        Self { workspace }
    }
}

impl rustyline::Helper for MentionHelper {}
impl Hinter for MentionHelper {
    type Hint = String;
}
impl Highlighter for MentionHelper {}
impl Validator for MentionHelper {}

impl Completer for MentionHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let Some((start, partial)) = mention_at(line, pos) else {
            return Ok((pos, Vec::new()));
        };
        let candidates = complete_path(&self.workspace, partial)
            .into_iter()
            .map(|path| Pair {
                display: path.clone(),
                replacement: path,
            })
            .collect();
        Ok((start, candidates))
    }
}

/// The mention being typed at `pos`: where its path starts (after the `@`)
/// and what of it is typed.
fn mention_at(line: &str, pos: usize) -> Option<(usize, &str)> {
    let before = line.get(..pos)?;
    let word_start = before.rfind(char::is_whitespace).map_or(0, |i| {
        i + before[i..].chars().next().map_or(1, char::len_utf8)
    });
    let word = &before[word_start..];
    let partial = word.strip_prefix('@')?;
    Some((word_start + 1, partial))
}

/// The workspace paths that complete `partial` (relative to the
/// workspace; folders end with `/`), sorted. A partial without a `/` also
/// matches files of that name further down the tree.
pub fn complete_path(workspace: &Path, partial: &str) -> Vec<String> {
    if !stays_inside(partial) {
        return Vec::new();
    }
    let (dir, prefix) = match partial.rfind('/') {
        Some(at) => (&partial[..=at], &partial[at + 1..]),
        None => ("", partial),
    };
    let Ok(Some(root)) = UntrustedFolder::open(workspace) else {
        return Vec::new();
    };
    let folder = if dir.is_empty() {
        Some(root)
    } else {
        root.subfolder(Path::new(dir.trim_end_matches('/')))
            .ok()
            .flatten()
    };
    let mut found = Vec::new();
    if let Some(folder) = folder {
        for name in folder.entry_names().unwrap_or_default() {
            if !name.starts_with(prefix) || (name.starts_with('.') && !prefix.starts_with('.')) {
                continue;
            }
            let rel = format!("{dir}{name}");
            let is_dir = workspace.join(&rel).is_dir();
            found.push(if is_dir { format!("{rel}/") } else { rel });
        }
    }
    if dir.is_empty() && !prefix.is_empty() {
        let mut budget = SEARCH_BUDGET;
        search(workspace, workspace, prefix, &mut budget, &mut found);
    }
    found.sort();
    found.dedup();
    found.truncate(MAX_CANDIDATES);
    found
}

/// Adds the files below `dir` (not directly in the workspace) whose names
/// start with `prefix`, looking at no more than `budget` entries.
fn search(workspace: &Path, dir: &Path, prefix: &str, budget: &mut usize, found: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if *budget == 0 || found.len() >= MAX_CANDIDATES {
            return;
        }
        *budget -= 1;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() {
            if !SKIPPED_FOLDERS.contains(&name.as_str()) {
                search(workspace, &path, prefix, budget, found);
            }
        } else if name.starts_with(prefix)
            && dir != workspace
            && let Ok(rel) = path.strip_prefix(workspace)
        {
            found.push(rel.to_string_lossy().into_owned());
        }
    }
}

/// Whether `path` names something in the workspace: relative, no `..`.
fn stays_inside(path: &str) -> bool {
    Path::new(path)
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// A mentioned path, attached or refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mention {
    /// Its content goes to the model: the text for the model, and a line
    /// for the user.
    Attached {
        /// What the model is given.
        context: String,
        /// What the user is shown.
        shown: String,
    },
    /// It is not attached, and why.
    Refused(String),
}

/// The mentions of `prompt` that name something: `@` at the start of a
/// word, then a path (trailing punctuation dropped when the path without
/// it exists). Words that name nothing in the workspace and look like
/// e-mail addresses or handles are left alone.
pub fn mentions(prompt: &str, workspace: &Path, policy: &Policy) -> Vec<Mention> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for word in prompt.split_whitespace() {
        let Some(raw) = word.strip_prefix('@') else {
            continue;
        };
        let trimmed = raw.trim_end_matches(['.', ',', ';', ':', '!', '?', ')', '"', '\'']);
        let path = if !raw.is_empty() && exists_or_outside(workspace, raw) {
            raw
        } else {
            trimmed
        };
        if path.is_empty() || seen.contains(&path) {
            continue;
        }
        seen.push(path);
        if let Some(mention) = attach(path, workspace, policy) {
            out.push(mention);
        }
    }
    out
}

/// Whether `raw` names something, or points outside the workspace (which
/// is refused rather than ignored).
fn exists_or_outside(workspace: &Path, raw: &str) -> bool {
    !stays_inside(raw) || workspace.join(raw).symlink_metadata().is_ok()
}

/// The mention of `path`; `None` when it names nothing, does not look
/// like a path and is not outside the workspace (`@someone`).
fn attach(path: &str, workspace: &Path, policy: &Policy) -> Option<Mention> {
    let refused = |why: String| Some(Mention::Refused(format!("@{path} not attached: {why}")));
    let rel = path.trim_end_matches('/');
    if !stays_inside(rel) {
        return refused(
            "it is outside the workspace; mention files of the workspace only".to_string(),
        );
    }
    let rel = Path::new(rel);
    let first = rel.components().find_map(|c| match c {
        Component::Normal(name) => name.to_str(),
        _ => None,
    });
    if let Some(name) = first.filter(|f| PROTECTED.contains(f)) {
        return refused(format!(
            "{name} is one of the protected paths (settings, hooks, version control) that are not given to the model this way"
        ));
    }
    let decision = policy.decide(&ToolFacts {
        tool: "fs.read",
        read_only: true,
        destructive: false,
        open_world: false,
        input: &json!({ "path": rel.to_string_lossy() }),
        workspace,
        capabilities: None,
    });
    if decision.outcome == Outcome::Deny {
        return refused(decision.reason);
    }
    let root = match UntrustedFolder::open(workspace) {
        Ok(Some(root)) => root,
        Ok(None) => return None,
        Err(e) => return refused(e.to_string()),
    };
    let shown_path = rel.to_string_lossy();
    if workspace.join(rel).is_dir() {
        let folder = match root.subfolder(rel) {
            Ok(Some(folder)) => folder,
            Ok(None) => return None,
            Err(e) => return refused(e.to_string()),
        };
        let mut names = match folder.entry_names() {
            Ok(names) => names,
            Err(e) => return refused(e.to_string()),
        };
        names.sort();
        let total = names.len();
        names.truncate(FOLDER_ENTRIES);
        let mut listing = String::new();
        for name in &names {
            let slash = if workspace.join(rel).join(name).is_dir() {
                "/"
            } else {
                ""
            };
            listing.push_str(&format!("{name}{slash}\n"));
        }
        if total > FOLDER_ENTRIES {
            listing.push_str(&format!("… and {} more\n", total - FOLDER_ENTRIES));
        }
        return Some(Mention::Attached {
            context: format!(
                "The user mentioned the folder @{shown_path}; its entries:\n<folder path=\"{shown_path}\">\n{listing}</folder>"
            ),
            shown: format!("attached @{shown_path}/ ({total} entries)"),
        });
    }
    let read = match root.read(rel, FILE_CAP) {
        Ok(Some(read)) => read,
        // A path-like word naming nothing is a typo worth a word; a bare
        // one (`@someone`) is not a mention at all.
        Ok(None) if path.contains(['/', '.']) => {
            return refused(
                "there is no such file in the workspace (Tab completes paths after @)".to_string(),
            );
        }
        Ok(None) => return None,
        Err(e) => return refused(e.to_string()),
    };
    if read.bytes.contains(&0) {
        return refused("it is a binary file".to_string());
    }
    let text = read.text();
    let lines = text.lines().count();
    let cut = if read.more {
        format!(
            "\n[only the first {} KiB of {} bytes are attached]",
            FILE_CAP / 1024,
            read.size
        )
    } else {
        String::new()
    };
    Some(Mention::Attached {
        context: format!(
            "The user mentioned the file @{shown_path}; its contents:\n<file path=\"{shown_path}\">\n{text}{}</file>{cut}",
            if text.ends_with('\n') || text.is_empty() {
                ""
            } else {
                "\n"
            }
        ),
        shown: format!(
            "attached @{shown_path} ({lines} lines{})",
            if read.more {
                ", cut to the first 100 KiB"
            } else {
                ""
            }
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Layer, Mode, Rule, RuleKind};

    fn workspace() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/deep")).unwrap();
        std::fs::write(dir.path().join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(dir.path().join("src/deep/mainline.txt"), "x").unwrap();
        std::fs::write(dir.path().join("README.md"), "# hi\n").unwrap();
        std::fs::write(dir.path().join(".env"), "SECRET=1\n").unwrap();
        std::fs::write(dir.path().join("blob.bin"), [0u8, 1, 2]).unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/config"), "[core]\n").unwrap();
        dir
    }

    #[test]
    fn tab_completes_paths_of_the_workspace() {
        let dir = workspace();
        let ws = dir.path().canonicalize().unwrap();
        assert_eq!(complete_path(&ws, "REA"), ["README.md"]);
        assert_eq!(complete_path(&ws, "src/m"), ["src/main.rs"]);
        assert_eq!(complete_path(&ws, "sr"), ["src/"]);
        // A bare name finds files further down too.
        assert_eq!(complete_path(&ws, "mainl"), ["src/deep/mainline.txt"]);
        // Hidden entries only when asked for, nothing outside.
        assert!(!complete_path(&ws, "").iter().any(|p| p.starts_with('.')));
        assert_eq!(complete_path(&ws, ".en"), [".env"]);
        assert!(complete_path(&ws, "../").is_empty());
        assert!(complete_path(&ws, "/etc/pa").is_empty());
        assert_eq!(mention_at("see @src/m", 10), Some((5, "src/m")));
        assert_eq!(mention_at("no mention", 10), None);
    }

    #[test]
    fn mentioned_files_are_attached_and_bad_ones_refused() {
        let dir = workspace();
        let ws = dir.path().canonicalize().unwrap();
        let policy = Policy::new(
            Mode::Default,
            vec![(
                RuleKind::Deny,
                "fs.read(.env)".parse::<Rule>().unwrap(),
                Layer::User,
            )],
        );
        let found = mentions(
            "look at @src/main.rs, @README.md. @src and @someone @../x @.env @.git/config @blob.bin @src/typo.rs",
            &ws,
            &policy,
        );
        let text = |m: &Mention| match m {
            Mention::Attached { context, shown } => format!("{shown}|{context}"),
            Mention::Refused(why) => why.clone(),
        };
        let all: Vec<String> = found.iter().map(text).collect();
        assert_eq!(all.len(), 8, "{all:#?}");
        assert!(
            all[0].contains("attached @src/main.rs (1 lines)"),
            "{}",
            all[0]
        );
        assert!(all[0].contains("<file path=\"src/main.rs\">\nfn main() {}\n</file>"));
        assert!(all[1].starts_with("attached @README.md"), "{}", all[1]);
        assert!(all[2].contains("deep/\nmain.rs\n"), "{}", all[2]);
        assert!(all[3].contains("outside the workspace"), "{}", all[3]);
        assert!(all[4].contains("denied by the rule"), "{}", all[4]);
        assert!(all[5].contains("protected"), "{}", all[5]);
        assert!(all[6].contains("binary"), "{}", all[6]);
        assert!(all[7].contains("no such file"), "{}", all[7]);
    }

    #[test]
    fn a_link_leading_out_of_the_workspace_is_refused() {
        let dir = workspace();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "outside\n").unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), ws.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.join("dirlink")).unwrap();
        let policy = Policy::new(Mode::Default, Vec::new());
        for found in [
            mentions("@link", &ws, &policy),
            mentions("@dirlink", &ws, &policy),
        ] {
            match found.as_slice() {
                [Mention::Refused(why)] => assert!(why.contains("leads outside"), "{why}"),
                other => panic!("not refused: {other:?}"),
            }
        }
    }
}
