//! The model's context: the system prompt and the project's instructions.
//!
//! Instructions come from `AGENTS.md` and `CLAUDE.md` files: the user's own
//! (in capstan's config folder), then the repository's, from its root down
//! to the workspace, so the most specific come last.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::untrusted_folder::{CappedRead, Refused, UntrustedFolder};

/// The names of instruction files, in the order they are read in a folder.
const INSTRUCTION_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// The most bytes of one instruction file put into the prompt.
pub const FILE_CAP: usize = 32 * 1024;

/// The most bytes of all instruction files together.
pub const TOTAL_CAP: usize = 64 * 1024;

/// The project's instructions, as found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instructions {
    /// The files, in the order they go into the prompt.
    pub files: Vec<InstructionFile>,
    /// Whether anything was cut or left out to stay within the caps.
    pub truncated: bool,
    /// Files that could not be read, or were left out, and why.
    pub warnings: Vec<String>,
}

/// One instruction file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstructionFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its text, ending with a truncation note if it was cut.
    pub text: String,
    /// Whether it was cut.
    pub truncated: bool,
}

/// Finds `AGENTS.md` and `CLAUDE.md`: first in `user_dir` (the user's
/// capstan config folder), then in every folder from the repository root
/// down to `workspace`. The root is the nearest ancestor of `workspace`
/// (itself included) that holds a `.git` file or folder; without one, only
/// the workspace itself is searched.
///
/// In each folder `AGENTS.md` comes before `CLAUDE.md`; a file whose
/// contents equal an earlier one's, and an empty file, are left out. Each
/// file is cut to [`FILE_CAP`] bytes and all together to [`TOTAL_CAP`] (at a
/// character boundary, with a note saying how much more the file holds);
/// once the total is reached, later files are left out with a warning.
/// Files that are not UTF-8 are read lossily.
///
/// A repository is someone else's: its files are read beneath its root
/// ([`UntrustedFolder`]), so a symbolic link leading out of it (to
/// `/proc/self/environ`, to a file elsewhere), a FIFO or a device is
/// skipped with a warning, and no more than [`FILE_CAP`] bytes of a file
/// are read. The user's own folder may link to files anywhere (dotfiles),
/// with the same cap and the same refusal of anything but regular files.
pub fn discover_instructions(user_dir: Option<&Path>, workspace: &Path) -> Instructions {
    let workspace = std::path::absolute(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let mut found = Instructions::default();
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let mut total = 0;

    if let Some(user_dir) = user_dir {
        for name in INSTRUCTION_FILES {
            let path = user_dir.join(name);
            // The user's own file may be a link to their dotfiles: read it
            // where it really is, beneath the folder that holds it.
            let Ok(real) = path.canonicalize() else {
                continue;
            };
            let (Some(folder), Some(file)) = (real.parent(), real.file_name()) else {
                continue;
            };
            let read = UntrustedFolder::open(folder)
                .and_then(|f| f.map_or(Ok(None), |f| f.read(Path::new(file), FILE_CAP)));
            found.take(&path, read, &mut seen, &mut total);
        }
    }

    let (root, folders) = project_folders(&workspace);
    let root_folder = match UntrustedFolder::open(&root) {
        Ok(folder) => folder,
        Err(err) => {
            found
                .warnings
                .push(format!("skipped the project's instructions: {err}"));
            None
        }
    };
    let Some(root_folder) = root_folder else {
        return found;
    };
    for rel in &folders {
        for name in INSTRUCTION_FILES {
            let rel_file = rel.join(name);
            let read = root_folder.read(&rel_file, FILE_CAP);
            found.take(&root.join(&rel_file), read, &mut seen, &mut total);
        }
    }
    found
}

impl Instructions {
    /// Adds the file at `path` as read, within the caps, or the warning
    /// saying why it was skipped.
    fn take(
        &mut self,
        path: &Path,
        read: Result<Option<CappedRead>, Refused>,
        seen: &mut Vec<Vec<u8>>,
        total: &mut usize,
    ) {
        let read = match read {
            Ok(Some(read)) => read,
            Ok(None) => return,
            Err(err) => {
                self.warnings.push(format!(
                    "skipped the instructions in {}: {err}",
                    path.display()
                ));
                return;
            }
        };
        let text = read.text();
        if text.trim().is_empty() || seen.contains(&read.bytes) {
            return;
        }
        // How long the file is: what was read, or what its metadata says
        // when there is more than the cap.
        let whole = if read.more {
            usize::try_from(read.size)
                .unwrap_or(usize::MAX)
                .max(text.len() + 1)
        } else {
            text.len()
        };
        seen.push(read.bytes);

        let room = TOTAL_CAP - *total;
        if room == 0 {
            self.truncated = true;
            self.warnings.push(format!(
                "left out the instructions in {}: the instructions before it already fill {} KiB",
                path.display(),
                TOTAL_CAP / 1024
            ));
            return;
        }
        let (kept, _) = cut_at_char_boundary(&text, FILE_CAP.min(room));
        let cut = whole - kept.len();
        *total += kept.len();
        let mut kept = kept.to_string();
        if cut > 0 {
            self.truncated = true;
            if !kept.ends_with('\n') {
                kept.push('\n');
            }
            let _ = write!(kept, "[truncated: {cut} bytes more in {}]", path.display());
        }
        self.files.push(InstructionFile {
            path: path.to_path_buf(),
            text: kept,
            truncated: cut > 0,
        });
    }
}

/// The repository root (or the workspace, if it is in no repository) and
/// the folders from it down to `workspace`, relative to it.
fn project_folders(workspace: &Path) -> (PathBuf, Vec<PathBuf>) {
    let root = workspace
        .ancestors()
        .find(|folder| folder.join(".git").exists())
        .unwrap_or(workspace);
    let mut folders: Vec<PathBuf> = workspace
        .ancestors()
        .take_while(|folder| *folder != root)
        .filter_map(|folder| folder.strip_prefix(root).ok())
        .map(Path::to_path_buf)
        .collect();
    folders.push(PathBuf::new());
    folders.reverse();
    (root.to_path_buf(), folders)
}

/// The longest prefix of `text` of at most `limit` bytes that ends at a
/// character boundary, and how many bytes are left after it.
fn cut_at_char_boundary(text: &str, limit: usize) -> (&str, usize) {
    if text.len() <= limit {
        return (text, 0);
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], text.len() - end)
}

/// The system prompt's section on how to work on code, which an output
/// style replaces unless it keeps coding instructions
/// ([`super::output_styles`]).
pub const CODING_INSTRUCTIONS: &str = "\n# How to work\n\
    - Read a file before you edit it, and look at the code around a change before making it.\n\
    - Make the smallest change that does the task; do not reformat or refactor what the task does not need.\n\
    - Keep answers short: say what you did and what the user needs to know, without repeating file contents.\n\
    - Write paths relative to the workspace.\n\
    - If the request is unclear, ask before making large changes.\n";

/// What the system prompt is made from.
#[derive(Debug, Clone, Copy)]
pub struct PromptInputs<'a> {
    /// The workspace folder.
    pub workspace: &'a Path,
    /// The tools: the name the model sees, and the first line of its
    /// description.
    pub tools: &'a [(String, String)],
    /// The permission mode, as the user names it.
    pub mode: &'a str,
    /// The project's instructions.
    pub instructions: &'a Instructions,
    /// The model's id.
    pub model: &'a str,
    /// Today's date, if it should be said.
    pub date: Option<&'a str>,
}

/// Who capstan is, in one line: what a prompt the driver replaced with
/// nothing starts with, as Claude Code keeps its one identity line then.
pub const IDENTITY: &str = "You are capstan, a coding agent working in the user's terminal.";

/// The system prompt: who capstan is and how its tools behave, the
/// environment (workspace, platform, permission mode, model, date), the
/// tools with a line each, how to work, then each instruction file under a
/// heading naming its path.
pub fn system_prompt(inputs: &PromptInputs) -> String {
    let mut prompt = String::from(
        "You are capstan, a coding agent working in the user's terminal. You help with \
         software tasks in the user's project by reading and changing its files with your tools.\n\
         \n\
         Your tools run as WebAssembly components in a sandbox that sees only the workspace \
         folder; nothing outside it exists for them. Some calls, writes especially, may need \
         the user's permission first. If a tool call is denied, do not retry the same call: \
         adapt your approach, or ask the user how to go on.\n",
    );
    prompt.push_str(&environment(inputs));

    prompt.push_str("\n# Tools\n");
    if inputs.tools.is_empty() {
        prompt.push_str("No tools are available in this session.\n");
    }
    for (name, description) in inputs.tools {
        let description = description.trim();
        if description.is_empty() {
            let _ = writeln!(prompt, "- {name}");
        } else {
            let _ = writeln!(prompt, "- {name}: {description}");
        }
    }

    prompt.push_str(CODING_INSTRUCTIONS);
    prompt.push_str(&project_instructions(inputs.instructions));
    prompt
}

/// What the model is told of the session whatever the system prompt: the
/// environment and the project's instructions (Claude Code gives them in
/// the first message when a driver replaces its prompt; capstan keeps
/// them in the system prompt).
pub fn session_context(inputs: &PromptInputs) -> String {
    let mut context = environment(inputs);
    context.push_str(&project_instructions(inputs.instructions));
    context
}

/// The system prompt when the user or the driver replaces capstan's own
/// with `replacement`: the replacement (capstan's [`IDENTITY`] line when
/// it is empty), then the session's `context` ([`session_context`]) — no
/// tool guidance, as Claude Code sends none then.
pub fn replaced_system_prompt(replacement: &str, context: &str) -> String {
    let mut prompt = if replacement.trim().is_empty() {
        IDENTITY.to_string()
    } else {
        replacement.trim_end().to_string()
    };
    prompt.push('\n');
    prompt.push_str(context);
    prompt
}

/// The session's prompts: capstan's own, and the context a replacement
/// keeps ([`replaced_system_prompt`]).
#[derive(Debug, Clone, Default)]
pub struct SystemPrompts {
    /// capstan's own prompt.
    pub own: String,
    /// What a replaced prompt keeps.
    pub context: String,
}

impl SystemPrompts {
    /// The prompt `replacement` makes (`None`: capstan's own), with
    /// `append` after it.
    pub fn with(&self, replacement: Option<&str>, append: Option<&str>) -> String {
        let mut prompt = match replacement {
            Some(text) => replaced_system_prompt(text, &self.context),
            None => self.own.clone(),
        };
        if let Some(extra) = append {
            prompt.push_str("\n\n");
            prompt.push_str(extra);
        }
        prompt
    }
}

fn environment(inputs: &PromptInputs) -> String {
    let mut prompt = String::from("\n# Environment\n");
    let _ = writeln!(
        prompt,
        "- Workspace (working folder): {}",
        inputs.workspace.display()
    );
    let _ = writeln!(prompt, "- Platform: {}", std::env::consts::OS);
    let _ = writeln!(prompt, "- Permission mode: {}", inputs.mode);
    let _ = writeln!(prompt, "- Model: {}", inputs.model);
    if let Some(date) = inputs.date {
        let _ = writeln!(prompt, "- Date: {date}");
    }
    prompt
}

fn project_instructions(instructions: &Instructions) -> String {
    let mut prompt = String::new();
    if !instructions.files.is_empty() {
        prompt.push_str(
            "\n# Project instructions\n\
             The user and the project give these instructions; follow them. Later files are \
             more specific and take precedence over earlier ones.\n",
        );
        for file in &instructions.files {
            let _ = write!(prompt, "\n## {}\n\n{}", file.path.display(), file.text);
            if !file.text.ends_with('\n') {
                prompt.push('\n');
            }
        }
    }
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn paths(found: &Instructions) -> Vec<PathBuf> {
        found.files.iter().map(|file| file.path.clone()).collect()
    }

    #[test]
    fn reads_from_the_repository_root_down_to_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        let workspace = root.join("crates/sub");
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::create_dir_all(&workspace).unwrap();
        write(&dir.path().join("AGENTS.md"), "above the repository");
        write(&root.join("AGENTS.md"), "root rules");
        write(&root.join("crates/CLAUDE.md"), "crates rules");
        write(&workspace.join("AGENTS.md"), "sub rules");

        let found = discover_instructions(None, &workspace);
        assert_eq!(
            paths(&found),
            vec![
                root.join("AGENTS.md"),
                root.join("crates/CLAUDE.md"),
                workspace.join("AGENTS.md"),
            ]
        );
        assert_eq!(found.files[0].text, "root rules");
        assert!(!found.truncated);
        assert!(found.warnings.is_empty());
    }

    #[test]
    fn a_git_file_marks_the_root_too() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("worktree");
        let workspace = root.join("sub");
        fs::create_dir_all(&workspace).unwrap();
        write(&root.join(".git"), "gitdir: /elsewhere");
        write(&root.join("AGENTS.md"), "root rules");
        write(&dir.path().join("AGENTS.md"), "above");

        let found = discover_instructions(None, &workspace);
        assert_eq!(paths(&found), vec![root.join("AGENTS.md")]);
    }

    #[test]
    fn without_a_repository_only_the_workspace_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("project");
        write(&dir.path().join("AGENTS.md"), "parent rules");
        write(&workspace.join("CLAUDE.md"), "project rules");

        let found = discover_instructions(None, &workspace);
        assert_eq!(paths(&found), vec![workspace.join("CLAUDE.md")]);
    }

    #[test]
    fn agents_comes_before_claude_and_duplicates_are_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let workspace = root.join("sub");
        fs::create_dir_all(root.join(".git")).unwrap();
        write(&root.join("CLAUDE.md"), "shared rules");
        write(&root.join("AGENTS.md"), "agents rules");
        write(&workspace.join("AGENTS.md"), "shared rules");
        write(&workspace.join("CLAUDE.md"), "sub rules");
        write(&workspace.join("empty/AGENTS.md"), " \n");

        let found = discover_instructions(None, &workspace);
        assert_eq!(
            paths(&found),
            vec![
                root.join("AGENTS.md"),
                root.join("CLAUDE.md"),
                workspace.join("CLAUDE.md"),
            ]
        );
        let found = discover_instructions(None, &workspace.join("empty"));
        assert_eq!(found.files.len(), 3);
    }

    #[test]
    fn the_user_folder_comes_first() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("config");
        let workspace = dir.path().join("project");
        write(&user.join("AGENTS.md"), "user rules");
        write(&workspace.join("AGENTS.md"), "project rules");

        let found = discover_instructions(Some(&user), &workspace);
        assert_eq!(
            paths(&found),
            vec![user.join("AGENTS.md"), workspace.join("AGENTS.md")]
        );
        let found = discover_instructions(Some(&dir.path().join("missing")), &workspace);
        assert_eq!(paths(&found), vec![workspace.join("AGENTS.md")]);
        assert!(found.warnings.is_empty());
    }

    #[test]
    fn files_are_capped_at_a_character_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path();
        // 'é' is two bytes, so the cap falls inside a character.
        let text = format!("a{}", "é".repeat(FILE_CAP));
        write(&workspace.join("AGENTS.md"), &text);

        let found = discover_instructions(None, workspace);
        let file = &found.files[0];
        assert!(file.truncated);
        assert!(found.truncated);
        let kept = FILE_CAP - 1;
        let note = format!(
            "\n[truncated: {} bytes more in {}]",
            text.len() - kept,
            workspace.join("AGENTS.md").display()
        );
        assert!(file.text.ends_with(&note), "{}", &file.text[kept - 10..]);
        assert_eq!(file.text.len(), kept + note.len());
    }

    #[test]
    fn all_files_together_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let workspace = root.join("a/b");
        fs::create_dir_all(root.join(".git")).unwrap();
        write(&root.join("AGENTS.md"), &"x".repeat(FILE_CAP));
        write(&root.join("a/AGENTS.md"), &"y".repeat(FILE_CAP - 10));
        write(&root.join("a/CLAUDE.md"), &"z".repeat(100));
        write(&workspace.join("AGENTS.md"), "left out");

        let found = discover_instructions(None, &workspace);
        assert!(found.truncated);
        assert_eq!(found.files.len(), 3);
        assert!(!found.files[0].truncated);
        assert!(!found.files[1].truncated);
        assert!(found.files[2].truncated);
        assert!(found.files[2].text.starts_with(&"z".repeat(10)));
        assert!(found.files[2].text.contains("[truncated: 90 bytes more in"));
        assert_eq!(found.warnings.len(), 1);
        assert!(
            found.warnings[0].contains("b/AGENTS.md"),
            "{:?}",
            found.warnings
        );
    }

    #[test]
    fn unreadable_files_are_skipped_with_a_warning_and_bad_utf8_read_lossily() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path();
        // A folder where a file is expected cannot be read.
        fs::create_dir_all(workspace.join("AGENTS.md")).unwrap();
        fs::write(workspace.join("CLAUDE.md"), b"caf\xe9 rules").unwrap();

        let found = discover_instructions(None, workspace);
        assert_eq!(found.warnings.len(), 1);
        assert!(
            found.warnings[0].contains("AGENTS.md"),
            "{:?}",
            found.warnings
        );
        assert_eq!(paths(&found), vec![workspace.join("CLAUDE.md")]);
        assert_eq!(found.files[0].text, "caf\u{fffd} rules");
    }

    #[test]
    fn the_prompt_names_workspace_tools_mode_and_instructions() {
        let instructions = Instructions {
            files: vec![InstructionFile {
                path: PathBuf::from("/repo/AGENTS.md"),
                text: "Run just test before committing.".to_string(),
                truncated: false,
            }],
            truncated: false,
            warnings: Vec::new(),
        };
        let tools = vec![
            ("fs__read".to_string(), "Reads a file.".to_string()),
            (
                "fs__edit".to_string(),
                "Replaces text in a file.".to_string(),
            ),
        ];
        let prompt = system_prompt(&PromptInputs {
            workspace: Path::new("/repo/sub"),
            tools: &tools,
            mode: "accept-edits",
            instructions: &instructions,
            model: "claude-sonnet-4-5",
            date: Some("2025-06-01"),
        });
        for expected in [
            "capstan",
            "WebAssembly",
            "denied",
            "/repo/sub",
            std::env::consts::OS,
            "Permission mode: accept-edits",
            "- fs__read: Reads a file.\n",
            "- fs__edit: Replaces text in a file.\n",
            "claude-sonnet-4-5",
            "2025-06-01",
            "Read a file before you edit it",
            "## /repo/AGENTS.md\n\nRun just test before committing.\n",
        ] {
            assert!(
                prompt.contains(expected),
                "missing {expected:?} in:\n{prompt}"
            );
        }
    }

    #[test]
    fn the_prompt_without_tools_or_instructions_says_so() {
        let prompt = system_prompt(&PromptInputs {
            workspace: Path::new("/w"),
            tools: &[],
            mode: "default",
            instructions: &Instructions::default(),
            model: "scripted",
            date: None,
        });
        assert!(prompt.contains("No tools are available"));
        assert!(!prompt.contains("# Project instructions"));
        assert!(!prompt.contains("Date:"));
    }
}
