//! `!command` at the prompt: the user runs a command in the same OS
//! sandbox as `capstan exec` and the model's `exec.run` — the workspace
//! writable only in the accept-edits and bypass modes, no network beyond
//! the `[exec]` settings, a scrubbed environment — with its output shown
//! as it comes (escaped: its escape sequences are not obeyed) and its exit
//! code after. The command and its output go to the model with the next
//! prompt, as Claude Code's `!` does.

use std::io::Write;
use std::path::PathBuf;

use super::escape;
use super::setup::Session;
use crate::agent::Interrupt;
use crate::audit::{AuditLog, AuditScope};
use crate::exec::output::TextStream;
use crate::exec::{Cancel, CommandLine, Ending, ExecGrants, ExecRequest};
use crate::grants::fs::OwnFolders;
use crate::policy::Mode;

/// The most bytes of a command's output given to the model (head and
/// tail are kept, as for `exec.run`).
const MODEL_OUTPUT_CAP: usize = 30 * 1024;

/// Runs `command` for the user; Ctrl-C (`interrupt`) kills it.
pub async fn run(session: &mut Session, command: &str, interrupt: &Interrupt) {
    let command = command.trim();
    if command.is_empty() {
        eprintln!(
            "usage: !COMMAND runs COMMAND in the sandbox (e.g. !cargo test); its output goes to the model with your next prompt"
        );
        return;
    }
    let mode = session.agent.policy().mode();
    let write = matches!(mode, Mode::AcceptEdits | Mode::Bypass);
    let grants = match grants(session) {
        Ok(grants) => grants,
        Err(why) => {
            eprintln!("error: cannot run the command: {why}");
            return;
        }
    };
    let request = ExecRequest {
        write,
        call_id: "user-command".to_string(),
        ..ExecRequest::new(CommandLine::Shell(command.to_string()))
    };
    let cancel = Cancel::new();
    let runner = {
        let cancel = cancel.clone();
        tokio::task::spawn_blocking(move || {
            let mut text = TextStream::default();
            let mut stdout = std::io::stdout();
            let mut show = |chunk: &[u8]| {
                let piece = if chunk.is_empty() {
                    text.finish()
                } else {
                    text.push(chunk)
                };
                // The output is the workspace's text, not the user's:
                // shown escaped, as a model's command's is.
                let _ = stdout.write_all(escape::text(&piece).as_bytes());
                let _ = stdout.flush();
            };
            let outcome = crate::exec::run(&request, &grants, &cancel, &mut show);
            show(&[]);
            outcome
        })
    };
    tokio::pin!(runner);
    let joined = tokio::select! {
        joined = &mut runner => joined,
        () = interrupt.raised() => {
            cancel.cancel();
            runner.await
        }
    };
    let outcome = match joined {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(e)) => {
            eprintln!("error: cannot run the command: {e}");
            return;
        }
        Err(e) => {
            eprintln!("error: the command's runner failed: {e}");
            return;
        }
    };
    let output = outcome.output.text();
    if !output.is_empty() && !output.ends_with('\n') {
        println!();
    }
    let code = outcome.exit_code();
    let ending = match outcome.ending {
        Ending::Exited(_) => format!("exit code {code}"),
        Ending::TimedOut => format!("timed out and killed (exit code {code})"),
        Ending::Cancelled => format!("interrupted and killed (exit code {code})"),
    };
    let workspace = if write { "read-write" } else { "read-only" };
    eprintln!("[{ending} · workspace {workspace} in mode {mode}]");
    for refusal in &outcome.refusals {
        eprintln!("refused {}: {}", refusal.target, refusal.reason);
    }
    for put_aside in &outcome.quarantined {
        eprintln!("{}", put_aside.describe());
    }
    if !outcome.needs.is_empty() {
        let needs: Vec<String> = outcome.needs.iter().map(ToString::to_string).collect();
        eprintln!("the sandbox stopped it; it needs: {}", needs.join("; "));
        if !write {
            eprintln!("(/mode accept-edits lets ! commands write the workspace)");
        }
    }
    if let Some(failure) = &outcome.audit_failure {
        eprintln!(
            "error: the command ran but its audit record could not be written ({failure}); its output is not given to the model"
        );
        return;
    }
    session.agent.add_user_context(for_model(
        command,
        &ending,
        &with_notices(&output, &outcome),
    ));
}

/// What the model is told of a command the user ran.
/// The command's output, then what the sandbox did after it (protected
/// entries it created, renamed aside).
fn with_notices(output: &str, outcome: &crate::exec::ExecOutcome) -> String {
    let mut text = output.to_string();
    for put_aside in &outcome.quarantined {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[sandbox] {}\n", put_aside.describe()));
    }
    text
}

fn for_model(command: &str, ending: &str, output: &str) -> String {
    let output = if output.len() > MODEL_OUTPUT_CAP {
        let mut head = MODEL_OUTPUT_CAP / 2;
        while !output.is_char_boundary(head) {
            head -= 1;
        }
        let mut tail = output.len() - MODEL_OUTPUT_CAP / 2;
        while !output.is_char_boundary(tail) {
            tail += 1;
        }
        format!(
            "{}\n[… {} bytes left out …]\n{}",
            &output[..head],
            tail - head,
            &output[tail..]
        )
    } else {
        output.to_string()
    };
    format!(
        "The user ran this command in the terminal (with `!`, in capstan's sandbox); you did not run it:\n<command>{command}</command>\n<result>{ending}</result>\n<output>\n{}{}</output>",
        output,
        if output.ends_with('\n') || output.is_empty() {
            ""
        } else {
            "\n"
        }
    )
}

/// What the user's commands get: the `[exec]` settings, read now.
fn grants(session: &Session) -> Result<ExecGrants, String> {
    let settings =
        crate::config::load(&session.home, &session.workspace).map_err(|e| e.to_string())?;
    let user_home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let mut grants = ExecGrants::resolve(
        &settings.exec,
        &session.workspace,
        user_home.as_deref(),
        &OwnFolders::of(&session.home),
    )
    .map_err(|e| e.to_string())?;
    if !grants.sandboxed {
        eprintln!(
            "WARNING: [exec] sandbox = \"off\": this command runs UNSANDBOXED, with your full access to files, network and processes"
        );
    }
    let log = AuditLog::open(&session.home.audit_log())
        .map_err(|e| format!("the audit log cannot be opened: {e}"))?;
    grants.audit = Some(AuditScope::new(
        log,
        "exec",
        "user-command",
        session.agent.session_id(),
    ));
    Ok(grants)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_told_the_command_and_its_output_capped() {
        let text = for_model("ls", "exit code 0", "a\nb\n");
        assert!(text.contains("<command>ls</command>"));
        assert!(text.contains("<output>\na\nb\n</output>"));
        let long = "é".repeat(MODEL_OUTPUT_CAP);
        let text = for_model("x", "exit code 1", &long);
        assert!(text.len() < MODEL_OUTPUT_CAP + 500);
        assert!(text.contains("bytes left out"));
    }
}
