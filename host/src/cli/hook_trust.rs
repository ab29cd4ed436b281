//! The question "Do you trust the hooks in this folder?", asked at
//! session start when the project's Claude Code settings define hooks that
//! the user has not trusted yet, or that changed since
//! ([`crate::policy::folder_trust`]).

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use super::escape;
use super::setup::SessionArgs;
use crate::home::Home;
use crate::plugin::command_hooks::ProjectHooks;
use crate::policy::folder_trust::FolderTrust;

/// Whether the project hooks `project` of `workspace` may run in this
/// session: trusted before with the same content, trusted now by
/// `--trust-project-hooks`, or by the user's answer at an interactive
/// start. Print mode and a start without a terminal never ask; what was
/// left out and how to trust it goes to `notices`.
pub fn trusted(
    project: &ProjectHooks,
    workspace: &Path,
    home: &Home,
    args: &SessionArgs,
    notices: &mut Vec<String>,
) -> bool {
    let trust = FolderTrust::new(home.data_dir());
    if trust.is_trusted(workspace, &project.digest) {
        return true;
    }
    let files = project.files.join(" and ");
    let record = |notices: &mut Vec<String>| {
        if let Err(e) = trust.trust(workspace, &project.digest) {
            notices.push(format!(
                "warning: the trust in this folder's hooks could not be recorded ({e}); you will be asked again"
            ));
        }
    };
    if args.trust_project_hooks {
        record(notices);
        return true;
    }
    let interactive =
        !args.print && std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if interactive {
        eprintln!(
            "The Claude Code settings of {} ({files}) define hooks that run commands on this session's events:",
            escape::line(&workspace.display().to_string())
        );
        for line in &project.descriptions {
            eprintln!("  - {}", escape::line(line));
        }
        eprint!("Do you trust the hooks in this folder? [y/N] ");
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
            record(notices);
            return true;
        }
        notices.push(format!(
            "the hooks of {files} were not run: you did not trust them; you will be asked again at the next session here"
        ));
        return false;
    }
    notices.push(format!(
        "warning: the {} hook{} of {files} in {} {} not run: this folder's hooks are not trusted (new, or changed since they were trusted); start capstan here in a terminal to be asked, or pass --trust-project-hooks",
        project.hooks.len(),
        if project.hooks.len() == 1 { "" } else { "s" },
        workspace.display(),
        if project.hooks.len() == 1 { "was" } else { "were" },
    ));
    false
}
