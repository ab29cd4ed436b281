//! Print mode (`capstan -p`): one task, no questions, a result scripts can
//! read. A call that would need the user's permission is refused, and the
//! refusal says how to allow it.

use std::io::{IsTerminal, Read, Write};
use std::time::Instant;

use serde_json::json;

use super::Exit;
use super::escape;
use super::render::{SilentFrontend, StreamJsonFrontend, TerminalFrontend};
use super::setup::{self, OutputFormat, SessionArgs};
use crate::agent::{AgentError, Frontend, Interrupt, TurnEnd};

/// Runs print mode.
pub async fn run(args: SessionArgs, verbose: bool) -> Exit {
    let format = args.output_format;
    let fail = |exit: Exit, message: &str| {
        report_failure(format, exit, message);
        exit
    };
    let prompt = match read_prompt(args.prompt.as_deref()) {
        Ok(prompt) => prompt,
        Err(message) => return fail(Exit::Usage, &message),
    };
    let started = Instant::now();
    let mut session = match setup::build(&args).await {
        Ok(session) => session,
        Err(error) => return fail(error.exit, &error.message),
    };
    for notice in &session.notices {
        eprintln!("capstan: {}", escape::message(notice));
    }
    if verbose || session.offline_model {
        eprintln!("capstan: using a {}", escape::line(&session.model_label));
    }
    if verbose {
        eprintln!("capstan: session ready in {:.1} ms", session.setup_ms);
    }
    let session_id = session.agent.session_id().unwrap_or_default().to_string();
    if format == OutputFormat::StreamJson {
        let tools: Vec<&str> = session
            .agent
            .toolbox()
            .tools()
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        StreamJsonFrontend::emit(&json!({
            "type": "init",
            "session_id": session_id,
            "model": session.agent.config().model,
            "provider": session.agent.provider_name(),
            "workspace": session.workspace,
            "permission_mode": session.agent.policy().mode().to_string(),
            "tools": tools,
            "skills": session
                .agent
                .toolbox()
                .skills()
                .map(|skills| {
                    skills
                        .set()
                        .skills()
                        .iter()
                        .map(|s| s.meta.name.clone())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
            "hooks": session.agent.hooks().names().collect::<Vec<_>>(),
            "resumed": session.resumed,
        }));
    }
    let interrupt = Interrupt::new();
    super::watch_ctrl_c(interrupt.clone());
    let mut terminal = TerminalFrontend::answer_only(verbose);
    let mut stream;
    let mut silent;
    let frontend: &mut dyn Frontend = match format {
        OutputFormat::Text => {
            // Stdout carries the answer alone: a command's output shows on
            // stderr (its last lines under the spinner on a terminal).
            session.call_events.set(terminal.call_events());
            terminal.show_edits_in(session.workspace.clone());
            &mut terminal
        }
        OutputFormat::StreamJson => {
            session.call_events.set(super::live::json_events());
            stream = StreamJsonFrontend;
            &mut stream
        }
        OutputFormat::Json => {
            silent = SilentFrontend;
            &mut silent
        }
    };
    // `/name arguments` runs a skill: its text becomes the prompt.
    let prompt = match crate::skills::session::parse_invocation(&prompt) {
        Some((name, arguments)) => {
            let loaded = session
                .agent
                .toolbox()
                .invoke_skill(name, arguments, Some(session_id.as_str()))
                .await;
            match loaded {
                Ok(text) => text,
                Err(message) => {
                    let _ = session.agent.finish();
                    return fail(Exit::Usage, &message);
                }
            }
        }
        None => prompt,
    };
    let source = if session.resumed { "resume" } else { "startup" };
    let outcome = match session.agent.start_session(source, frontend).await {
        Ok(()) => session.agent.run_turn(&prompt, frontend, &interrupt).await,
        Err(error) => Err(error),
    };
    let _ = session.agent.end_session("other", frontend).await;
    let cost = session.agent.cost();
    let usage = cost.usage;
    let cost_usd = crate::agent::cost::cost_usd(&session.agent.config().model, &usage);
    let (exit, subtype, result_text, error) = match &outcome {
        Ok(report) => match &report.end {
            TurnEnd::Finished(_) => (Exit::Success, "success", report.text.clone(), None),
            TurnEnd::Interrupted => (
                Exit::Interrupted,
                "interrupted",
                report.text.clone(),
                Some("interrupted by the user".to_string()),
            ),
            TurnEnd::PromptBlocked { hook, reason } => (
                Exit::Denied,
                "error_prompt_blocked",
                String::new(),
                Some(format!("hook {hook} blocked the prompt: {reason}")),
            ),
            TurnEnd::MaxTurns(n) => (
                Exit::MaxTurns,
                "error_max_turns",
                report.text.clone(),
                Some(format!(
                    "stopped after {n} model requests without finishing; raise --max-turns or split the task"
                )),
            ),
        },
        Err(error) => {
            let exit = match error {
                AgentError::Model(_) => Exit::Model,
                AgentError::Session(_) | AgentError::Compact(_) => Exit::Error,
            };
            (exit, "error", String::new(), Some(error.to_string()))
        }
    };
    let (requests, tool_calls) = match &outcome {
        Ok(report) => (report.requests, report.tool_calls),
        Err(_) => (0, 0),
    };
    match format {
        OutputFormat::Text => {
            // stdout carries the final answer and nothing else; an answer
            // cut short or never finished was narration, shown on stderr.
            let answered =
                matches!(&outcome, Ok(report) if matches!(report.end, TurnEnd::Finished(_)));
            if answered {
                print_answer(&result_text);
            } else {
                terminal.show_held_as_narration();
            }
            if let Some(error) = &error {
                eprintln!("error: {}", escape::message(error));
            }
        }
        OutputFormat::Json | OutputFormat::StreamJson => {
            let value = json!({
                "type": "result",
                "subtype": subtype,
                "is_error": exit != Exit::Success,
                "result": result_text,
                "error": error,
                "session_id": session_id,
                "model": session.agent.config().model,
                "num_requests": requests,
                "num_tool_calls": tool_calls,
                "duration_ms": started.elapsed().as_secs_f64() * 1e3,
                "usage": usage,
                "total_cost_usd": cost_usd,
            });
            StreamJsonFrontend::emit(&value);
        }
    }
    exit
}

/// Prints the final answer on stdout, ending with a newline; an empty
/// answer prints nothing.
fn print_answer(text: &str) {
    if text.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

/// The task: the argument, or all of stdin.
fn read_prompt(arg: Option<&str>) -> Result<String, String> {
    let text = match arg {
        Some(text) if text != "-" => text.to_string(),
        _ => {
            if arg.is_none() && std::io::stdin().is_terminal() {
                return Err(
                    "-p needs a prompt: give it as an argument or on stdin, e.g. capstan -p \"summarise README.md\""
                        .to_string(),
                );
            }
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| format!("cannot read the prompt from stdin: {e}"))?;
            text
        }
    };
    if text.trim().is_empty() {
        return Err(
            "the prompt is empty; say what to do, e.g. capstan -p \"summarise README.md\""
                .to_string(),
        );
    }
    Ok(text)
}

/// Reports a failure before the turn ran, in the chosen format.
fn report_failure(format: OutputFormat, exit: Exit, message: &str) {
    match format {
        OutputFormat::Text => eprintln!("error: {}", escape::message(message)),
        OutputFormat::Json | OutputFormat::StreamJson => StreamJsonFrontend::emit(&json!({
            "type": "result",
            "subtype": "error",
            "is_error": true,
            "error": message,
            "error_kind": exit.kind(),
        })),
    }
}
