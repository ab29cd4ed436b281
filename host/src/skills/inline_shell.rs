//! Inline shell commands in a skill's text — `` !`cmd` `` and fenced
//! blocks opened with ```` ```! ```` — run as Claude Code runs them, before
//! the text reaches the model, with their output in their place; but in
//! the OS sandbox of [`crate::exec`]: the workspace and the skill's folder
//! read-only, no network, no environment beyond `PATH`, `HOME`, `LANG`,
//! `TERM` and `TMPDIR`. A command that fails, or that the sandbox refused
//! something, says so where its output goes, naming what it lacked, and
//! the run is in the audit log.

use std::path::Path;
use std::time::Duration;

use crate::audit::AuditScope;
use crate::exec::{Cancel, CommandLine, ExecGrants, ExecOutcome, ExecRequest};

/// How long one inline command may run.
pub const INLINE_TIMEOUT: Duration = Duration::from_secs(30);

/// The most characters of one command's output put in the text.
const OUTPUT_CAP: usize = 16 << 10;

/// `body` with every inline command replaced by what `run` returns for it
/// (`` !`cmd` `` in a line, or a block opened with ```` ```! ````); it is
/// also how [`super::text::inline_shell`] finds them.
pub fn replace(body: &str, run: &mut dyn FnMut(&str) -> String) -> String {
    let mut out = String::with_capacity(body.len());
    let mut block: Option<String> = None;
    for line in body.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if let Some(text) = &mut block {
            if trimmed.starts_with("```") {
                let output = run(text.trim());
                out.push_str("```\n");
                out.push_str(output.trim_end());
                out.push_str("\n```\n");
                block = None;
            } else {
                text.push_str(line);
            }
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("```!") {
            block = Some(format!("{}\n", rest.trim()));
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("!`") {
            let after = &rest[at + 2..];
            match after.find('`') {
                Some(end) if end > 0 => {
                    out.push_str(&rest[..at]);
                    out.push_str(run(&after[..end]).trim_end());
                    rest = &after[end + 1..];
                }
                _ => break,
            }
        }
        out.push_str(rest);
    }
    if let Some(text) = block {
        out.push_str(run(text.trim()).trim_end());
        out.push('\n');
    }
    out
}

/// The grants an inline command of a skill in `skill_dir` gets: the
/// session's command grants (`session`), read-only, with no network, no
/// extra variables and the skill's folder readable; recorded as
/// `skill NAME` in the audit log.
pub fn grants_for(
    session: &ExecGrants,
    skill: &str,
    skill_dir: &Path,
    session_id: Option<&str>,
) -> ExecGrants {
    let mut grants = session.clone();
    grants.write.clear();
    grants.net.clear();
    grants.env.clear();
    grants.secrets = crate::exec::SecretEnv::default();
    grants.timeout = INLINE_TIMEOUT;
    grants.read.push(skill_dir.to_path_buf());
    if let Some(audit) = &mut grants.audit {
        *audit = AuditScope::new(
            audit.log.clone(),
            &format!("skill {skill}"),
            "inline",
            session_id,
        );
    }
    grants
}

/// Runs one inline command under `grants` and returns what goes in its
/// place: its output, then a line when it failed or hit the sandbox.
pub fn run(command: &str, grants: &ExecGrants) -> String {
    let mut request = ExecRequest::new(CommandLine::Shell(command.to_string()));
    request.call_id = "inline".to_string();
    request.timeout = Some(INLINE_TIMEOUT);
    match crate::exec::run(&request, grants, &Cancel::new(), &mut |_| {}) {
        Ok(outcome) => grants.secrets.redact(&describe(&outcome)),
        Err(e) => format!("[capstan could not run `{command}` in its sandbox: {e}]"),
    }
}

/// The text an outcome leaves in the skill.
fn describe(outcome: &ExecOutcome) -> String {
    let mut text: String = outcome.output.text().chars().take(OUTPUT_CAP).collect();
    if let Some(failure) = &outcome.audit_failure {
        return format!(
            "[the command ran but its audit record could not be written ({failure}); its output is withheld]"
        );
    }
    let code = outcome.exit_code();
    let mut notes = Vec::new();
    if code != 0 {
        notes.push(format!("exit code {code}"));
    }
    for refusal in &outcome.refusals {
        notes.push(format!(
            "the sandbox refused {}: {}",
            refusal.target, refusal.reason
        ));
    }
    if !outcome.needs.is_empty() {
        let needs: Vec<String> = outcome.needs.iter().map(ToString::to_string).collect();
        notes.push(format!("it lacked: {}", needs.join("; ")));
    }
    if !notes.is_empty() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!(
            "[{}; inline commands run in capstan's sandbox: workspace read-only, no network, no secrets]",
            notes.join("; ")
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_commands_and_blocks_are_replaced_by_their_output() {
        let body = "Branch: !`git branch --show-current`, status !`git status -s`.\n\
                    Text with a lone ! mark and `code` stays.\n\
                    ```!\necho one\necho two\n```\nEnd.\n";
        let mut ran = Vec::new();
        let out = replace(body, &mut |command| {
            ran.push(command.to_string());
            format!("<{}>\n", command.len())
        });
        assert_eq!(
            ran,
            [
                "git branch --show-current",
                "git status -s",
                "echo one\necho two"
            ]
        );
        assert_eq!(
            out,
            "Branch: <25>, status <13>.\nText with a lone ! mark and `code` stays.\n```\n<17>\n```\nEnd.\n"
        );
        assert_eq!(
            replace("no commands $1\n", &mut |_| unreachable!()),
            "no commands $1\n"
        );
    }
}
