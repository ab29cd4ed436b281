//! Print mode (`capstan -p`): one task (or, with `--input-format
//! stream-json`, one task per input line), no questions, a result scripts
//! can read. A call that would need the user's permission is refused, and
//! the refusal says how to allow it — unless `--permission-prompt-tool`
//! names a tool that answers in the user's place. The JSON formats follow
//! Claude Code's headless shapes ([`super::headless`]).

use std::io::{IsTerminal, Read, Write};
use std::time::Instant;

use serde_json::json;

use super::Exit;
use super::driver_questions::DriverQuestions;
use super::escape;
use super::headless::{self, Ending, Headless, Summary};
use super::render::{StreamJsonFrontend, TerminalFrontend};
use super::setup::{self, InputFormat, OutputFormat, Session, SessionArgs};
use super::stream_input::{self, Line};
use crate::agent::{AgentError, Frontend, Interrupt, TurnEnd, prompt_tool};

/// Runs print mode.
pub async fn run(mut args: SessionArgs, verbose: bool) -> Exit {
    let format = args.output_format;
    let started = Instant::now();
    let fail = |exit: Exit, message: &str| {
        report_failure(format, exit, message, started);
        exit
    };
    if args.replay_user_messages
        && (args.input_format != InputFormat::StreamJson || format != OutputFormat::StreamJson)
    {
        return fail(
            Exit::Usage,
            "--replay-user-messages echoes stream-json input; it needs --input-format stream-json and --output-format stream-json",
        );
    }
    let first_prompt = match args.input_format {
        InputFormat::Text => match read_prompt(args.prompt.as_deref()) {
            Ok(prompt) => Some(prompt),
            Err(message) => {
                let message = if args.prompt.is_none()
                    && (!args.allowed_tools.is_empty() || !args.disallowed_tools.is_empty())
                {
                    format!(
                        "{message} (--allowedTools and --disallowedTools take every argument up to the next flag, as in Claude Code: put the prompt before them, or end their list with --)"
                    )
                } else {
                    message
                };
                return fail(Exit::Usage, &message);
            }
        },
        InputFormat::StreamJson => {
            if format != OutputFormat::StreamJson {
                return fail(
                    Exit::Usage,
                    "--input-format stream-json needs --output-format stream-json",
                );
            }
            if args.prompt.is_some() {
                return fail(
                    Exit::Usage,
                    "with --input-format stream-json the prompts come on stdin, one JSON user message a line; drop the PROMPT argument",
                );
            }
            None
        }
    };
    // The `{"type": "sdk"}` servers of --mcp-config live in the driver.
    let cwd = std::env::current_dir().unwrap_or_default();
    let sdk_servers = match super::driver_init::take_sdk_servers(&mut args.mcp_config, &cwd) {
        Ok(names) => names,
        Err(message) => return fail(Exit::Usage, &message),
    };
    if !sdk_servers.is_empty() && args.input_format != InputFormat::StreamJson {
        return fail(
            Exit::Usage,
            &format!(
                "--mcp-config names servers of type sdk ({}), which live in the program driving capstan; they need --input-format stream-json and --output-format stream-json",
                sdk_servers.join(", ")
            ),
        );
    }
    let mut session = match setup::build(&args).await {
        Ok(session) => session,
        Err(error) => return fail(error.exit, &error.message),
    };
    // As Claude Code does in print mode, the first request waits (a
    // bounded time) for MCP servers still starting, so it has their tools.
    let mcp = session.mcp.clone();
    for late in mcp.wait_for_starting().await {
        session.notices.push(late.notice);
        session.agent.add_user_context(late.for_model);
    }
    for notice in &session.notices {
        eprintln!("capstan: {}", escape::message(notice));
    }
    // Claude Code's SDKs pass --verbose with stream-json, whose stderr
    // stays quiet.
    let chatty = verbose && format != OutputFormat::StreamJson;
    if chatty || session.offline_model {
        eprintln!("capstan: using a {}", escape::line(&session.model_label));
    }
    if chatty {
        eprintln!("capstan: session ready in {:.1} ms", session.setup_ms);
    }
    let asks_driver = args.permission_prompt_tool.as_deref() == Some(prompt_tool::DRIVER);
    if asks_driver && args.input_format != InputFormat::StreamJson {
        let _ = session.agent.finish();
        return fail(
            Exit::Usage,
            "--permission-prompt-tool stdio asks the program driving capstan over stdin and stdout; it needs --input-format stream-json and --output-format stream-json",
        );
    }
    if let Some(name) = &args.permission_prompt_tool
        && !asks_driver
        && session.agent.toolbox().find(name).is_none()
    {
        let known: Vec<String> = session
            .agent
            .toolbox()
            .tools()
            .iter()
            .map(|t| t.model_name.clone())
            .collect();
        let _ = session.agent.finish();
        return fail(
            Exit::Usage,
            &format!(
                "--permission-prompt-tool {name}: this session has no such tool; it has {}",
                known.join(", ")
            ),
        );
    }
    let session_id = session.agent.session_id().unwrap_or_default().to_string();
    let model = session.agent.config().model.clone();
    // The tools offered (`--tools` may leave built-in ones out).
    let offered: std::collections::HashSet<String> = session
        .agent
        .offered_tools()
        .into_iter()
        .map(|tool| tool.name)
        .collect();
    let tools: Vec<(String, String)> = session
        .agent
        .toolbox()
        .tools()
        .iter()
        .filter(|t| offered.contains(&t.model_name))
        .map(|t| (t.name.clone(), t.model_name.clone()))
        .collect();
    let mut headless = Headless::new(
        &session_id,
        &model,
        format == OutputFormat::StreamJson,
        tools.iter().cloned(),
    );
    if args.include_partial_messages {
        headless.include_partial_messages();
    }
    if args.capstan_events {
        headless.include_capstan_events();
    }
    let questions = DriverQuestions::default();
    if asks_driver {
        headless.ask_driver_through(questions.clone());
    }
    if format == OutputFormat::StreamJson {
        headless.emit(init_message(&session, &tools));
    }
    let interrupt = Interrupt::new();
    super::watch_ctrl_c(interrupt.clone());
    let mut terminal = TerminalFrontend::answer_only(verbose);
    match format {
        // Stdout carries the answer alone: a command's output shows on
        // stderr (its last lines under the spinner on a terminal).
        OutputFormat::Text => {
            session.call_events.set(terminal.call_events());
            terminal.show_edits_in(session.workspace.clone());
        }
        OutputFormat::StreamJson if args.capstan_events => session
            .call_events
            .set(super::live::json_events(session_id.clone())),
        OutputFormat::StreamJson | OutputFormat::Json => {}
    }
    let mut run = Run {
        format,
        terminal,
        headless,
        interrupt,
        session_id,
        tools,
        user_messages: Vec::new(),
        init: super::driver_init::DriverInit::new(questions.clone(), sdk_servers),
        refused_init: None,
        results: 0,
    };
    let source = if session.resumed { "resume" } else { "startup" };
    if let Err(error) = session.agent.start_session(source, run.frontend()).await {
        let _ = session.agent.end_session("other", run.frontend()).await;
        let exit = exit_of(&error);
        run.report(&session, Ok(None), started, Some((exit, error.to_string())));
        return exit;
    }
    let exit = match first_prompt {
        Some(prompt) => run.prompt(&mut session, prompt, started).await,
        None => {
            let control = stream_input::Control {
                interrupt: run.interrupt.clone(),
                by_driver: Default::default(),
                questions,
                requests: Some(super::driver_requests::DriverRequests {
                    mcp: session.mcp.clone(),
                    runtime: tokio::runtime::Handle::current(),
                }),
            };
            run.stream_of_prompts(&mut session, control, args.replay_user_messages)
                .await
        }
    };
    let _ = session.agent.end_session("other", run.frontend()).await;
    exit
}

/// What print mode needs across prompts.
struct Run {
    format: OutputFormat,
    terminal: TerminalFrontend,
    headless: Headless,
    interrupt: Interrupt,
    session_id: String,
    tools: Vec<(String, String)>,
    /// The uuid of each user message echoed (`--replay-user-messages`)
    /// with its prompt's checkpoint, for `rewind_files`.
    user_messages: Vec<(String, u32)>,
    init: super::driver_init::DriverInit,
    /// Why the driver's `initialize` was refused: no prompt runs then
    /// (an SDK that goes on after the error gets it in each result).
    refused_init: Option<String>,
    /// How many results were printed.
    results: u64,
}

impl Run {
    fn frontend(&mut self) -> &mut dyn Frontend {
        match self.format {
            OutputFormat::Text => &mut self.terminal,
            OutputFormat::Json | OutputFormat::StreamJson => &mut self.headless,
        }
    }

    /// Runs the prompts of `--input-format stream-json` as they come: each
    /// gets its result message; a malformed line gets an `input_error`
    /// event and the next lines still run; control requests are answered
    /// by `control` (a driver's interrupt stops the running prompt, and the
    /// next lines still run); with `replay`, each user message is echoed
    /// first (`--replay-user-messages`). The exit code is the first failing
    /// prompt's, else a usage error if a line was malformed.
    async fn stream_of_prompts(
        &mut self,
        session: &mut Session,
        control: stream_input::Control,
        replay: bool,
    ) -> Exit {
        let by_driver = control.by_driver.clone();
        let driver_interrupted = || by_driver.swap(false, std::sync::atomic::Ordering::SeqCst);
        let mut lines = stream_input::read_stdin(control);
        let mut exit = Exit::Success;
        let mut malformed = false;
        loop {
            let line = tokio::select! {
                biased;
                () = self.interrupt.raised() => {
                    if driver_interrupted() {
                        // Nothing was running: there is nothing to stop.
                        self.interrupt.clear();
                        continue;
                    }
                    if exit == Exit::Success {
                        exit = Exit::Interrupted;
                    }
                    break;
                }
                line = lines.recv() => line,
            };
            match line {
                None => break,
                Some(Line::Prompt(prompt)) => {
                    let uuid = headless::new_uuid();
                    if replay {
                        StreamJsonFrontend::emit(&json!({
                            "type": "user",
                            "message": {
                                "role": "user",
                                "content": [{"type": "text", "text": prompt}],
                            },
                            "parent_tool_use_id": null,
                            "session_id": self.session_id,
                            "uuid": uuid,
                            "isReplay": true,
                        }));
                    }
                    let ended = match &self.refused_init {
                        Some(why) => {
                            let message = format!(
                                "capstan did not run this prompt: the driver's initialize was refused: {why}"
                            );
                            self.report(
                                session,
                                Ok(None),
                                Instant::now(),
                                Some((Exit::Usage, message)),
                            )
                        }
                        None => self.prompt(session, prompt, Instant::now()).await,
                    };
                    if replay
                        && let Some(number) = session
                            .agent
                            .checkpoints()
                            .and_then(|store| store.checkpoints().ok()?.last().map(|c| c.number))
                    {
                        self.user_messages.push((uuid, number));
                    }
                    if ended == Exit::Interrupted && driver_interrupted() {
                        // The driver stopped this prompt; it goes on.
                        self.interrupt.clear();
                        continue;
                    }
                    if exit == Exit::Success {
                        exit = ended;
                    }
                    if ended == Exit::Interrupted {
                        break;
                    }
                }
                Some(Line::Setting {
                    request_id,
                    request,
                }) => {
                    let initialize =
                        request.get("subtype").and_then(|s| s.as_str()) == Some("initialize");
                    let applied = if initialize {
                        self.init.initialize(session, &request).await.map(|extra| {
                            let mut body = initialize_answer(session);
                            if let Some(object) = body.as_object_mut() {
                                object.extend(extra);
                            }
                            body
                        })
                    } else {
                        self.apply_setting(session, &request)
                    };
                    let response = match applied {
                        Ok(body) => {
                            json!({"subtype": "success", "request_id": request_id, "response": body})
                        }
                        Err(error) => {
                            json!({"subtype": "error", "request_id": request_id, "error": error})
                        }
                    };
                    let succeeded = response["subtype"] == "success";
                    if initialize && !succeeded && !self.init.done() {
                        let why = response["error"].as_str().unwrap_or_default().to_string();
                        eprintln!("capstan: initialize refused: {}", escape::message(&why));
                        self.refused_init = Some(why);
                    }
                    let applied = succeeded
                        && matches!(
                            request["subtype"].as_str(),
                            Some("set_permission_mode" | "set_model")
                        );
                    StreamJsonFrontend::emit(
                        &json!({"type": "control_response", "response": response}),
                    );
                    // As Claude Code does, a new `init` tells the new state.
                    if applied && !initialize {
                        self.headless.emit(init_message(session, &self.tools));
                    }
                }
                Some(Line::Malformed { line, error }) => {
                    malformed = true;
                    if self.headless.capstan_events() {
                        self.headless.emit(json!({
                            "type": "input_error",
                            "line": line,
                            "error": error,
                        }));
                    } else {
                        eprintln!(
                            "capstan: input line {line} is skipped: {}",
                            escape::message(&error)
                        );
                    }
                }
            }
        }
        if exit == Exit::Success && malformed {
            Exit::Usage
        } else {
            exit
        }
    }

    /// Applies a driver's `set_permission_mode` or `set_model` request;
    /// the body of the response, or what is wrong with the request.
    fn apply_setting(
        &mut self,
        session: &mut Session,
        request: &serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let field = |name: &str| request.get(name).and_then(serde_json::Value::as_str);
        match field("subtype") {
            Some("set_permission_mode") => {
                let mode = field("mode")
                    .ok_or("set_permission_mode needs a `mode`: default, acceptEdits, plan or bypassPermissions")?
                    .parse::<crate::policy::Mode>()
                    .map_err(|e| e.to_string())?;
                session.agent.set_mode(mode);
                Ok(json!({"mode": claude_mode(mode)}))
            }
            Some("set_model") => {
                let model = field("model")
                    .map(str::trim)
                    .filter(|m| !m.is_empty())
                    .ok_or(
                        "set_model needs a `model`, the name of a model of this session's provider",
                    )?;
                session
                    .agent
                    .set_model(model, session.context_window_setting)
                    .map_err(|e| e.to_string())?;
                self.headless.set_model(model);
                Ok(json!({}))
            }
            _ => super::driver_requests::between_prompts(session, request, &self.user_messages),
        }
    }

    /// Runs one prompt and reports its result; `started` is when its
    /// duration starts.
    async fn prompt(&mut self, session: &mut Session, prompt: String, started: Instant) -> Exit {
        let usage_before = session.agent.cost().usage;
        self.headless.take_denials();
        self.headless.take_api_time();
        // `/name arguments` runs a skill: its text becomes the prompt.
        let prompt = match crate::skills::session::parse_invocation(&prompt) {
            Some((name, arguments)) => {
                let loaded = session
                    .agent
                    .toolbox()
                    .invoke_skill(name, arguments, Some(self.session_id.as_str()))
                    .await;
                match loaded {
                    Ok(text) => text,
                    Err(message) => {
                        self.report(session, Ok(None), started, Some((Exit::Usage, message)));
                        return Exit::Usage;
                    }
                }
            }
            None => prompt,
        };
        let interrupt = self.interrupt.clone();
        let outcome = session
            .agent
            .run_turn(&prompt, self.frontend(), &interrupt)
            .await;
        let usage = headless::usage_since(&usage_before, &session.agent.cost().usage);
        let outcome = outcome.map(|report| Some((report, usage)));
        self.report(session, outcome, started, None)
    }

    /// Reports how a prompt ended — its turn's report and the tokens it
    /// used, or the error that stopped it, or a failure before it ran —
    /// and returns the exit code it calls for.
    fn report(
        &mut self,
        session: &Session,
        outcome: Result<Option<(crate::agent::TurnReport, crate::model::Usage)>, AgentError>,
        started: Instant,
        failed_before: Option<(Exit, String)>,
    ) -> Exit {
        let json_output = self.format != OutputFormat::Text;
        let plain = |exit: Exit, subtype, result: String, error, reason| {
            (exit, subtype, result, error, Some(reason), None)
        };
        let (exit, subtype, result_text, error, terminal_reason, api_error) = match (
            &outcome,
            failed_before,
        ) {
            (_, Some((exit, message))) => plain(
                exit,
                "error_during_execution",
                String::new(),
                Some(message),
                "turn_setup_failed",
            ),
            (Ok(Some((report, _))), None) => match &report.end {
                TurnEnd::Finished(_) => (
                    Exit::Success,
                    "success",
                    report.text.clone(),
                    None,
                    Some("completed"),
                    None,
                ),
                TurnEnd::Interrupted => plain(
                    Exit::Interrupted,
                    "error_during_execution",
                    report.text.clone(),
                    Some("interrupted by the user".to_string()),
                    "aborted_streaming",
                ),
                TurnEnd::PromptBlocked { hook, reason } => plain(
                    Exit::Denied,
                    "error_during_execution",
                    String::new(),
                    Some(format!("hook {hook} blocked the prompt: {reason}")),
                    "hook_stopped",
                ),
                TurnEnd::MaxBudget => plain(
                    Exit::Error,
                    "error_max_budget_usd",
                    report.text.clone(),
                    Some(format!(
                        "Reached maximum budget (${})",
                        session.agent.config().max_budget_usd.unwrap_or_default()
                    )),
                    "budget_exhausted",
                ),
                TurnEnd::MaxTurns(n) => plain(
                    Exit::MaxTurns,
                    "error_max_turns",
                    report.text.clone(),
                    Some(format!(
                        "stopped after {n} model requests without finishing; raise --max-turns or split the task"
                    )),
                    "max_turns",
                ),
            },
            (Ok(None), None) => (
                Exit::Error,
                "error_during_execution",
                String::new(),
                None,
                None,
                None,
            ),
            // As Claude Code reports a failed model API: a `success`
            // result that is an error, its text the API's error, and
            // (in the JSON formats) exit code 1.
            (Err(AgentError::Model(model)), None) => {
                let api = headless::ApiError::of(model);
                let message = model.to_string();
                (
                    if json_output {
                        Exit::Error
                    } else {
                        Exit::Model
                    },
                    "success",
                    headless::ApiError::text(&message),
                    Some(message),
                    Some("api_error"),
                    Some(api),
                )
            }
            (Err(error), None) => (
                exit_of(error),
                "error_during_execution",
                String::new(),
                Some(error.to_string()),
                None,
                None,
            ),
        };
        let (requests, tool_calls, usage) = match &outcome {
            Ok(Some((report, usage))) => (report.requests, report.tool_calls, *usage),
            _ => (0, 0, crate::model::Usage::default()),
        };
        let stop_reason = match &outcome {
            Ok(Some((report, _))) => match &report.end {
                TurnEnd::Finished(reason) => Some(stop_reason_name(reason)),
                _ => None,
            },
            // Claude Code's: that of its `assistant` message saying the
            // API's error, which capstan sends too.
            Err(AgentError::Model(_)) => Some("stop_sequence".to_string()),
            _ => None,
        };
        match self.format {
            OutputFormat::Text => {
                // stdout carries the final answer and nothing else; an
                // answer cut short or never finished was narration, shown
                // on stderr.
                if exit == Exit::Success {
                    print_answer(&result_text);
                } else {
                    self.terminal.show_held_as_narration();
                }
                if let Some(error) = &error {
                    eprintln!("error: {}", escape::message(error));
                }
            }
            OutputFormat::Json | OutputFormat::StreamJson => {
                if let Some(api) = &api_error
                    && self.format == OutputFormat::StreamJson
                {
                    self.headless
                        .emit(headless::api_error_message(api, &result_text));
                }
                let config = session.agent.config();
                let model = &config.model;
                let index = self.results;
                self.results += 1;
                let value = headless::result_message(Summary {
                    ending: Ending {
                        subtype,
                        is_error: exit != Exit::Success,
                        stop_reason,
                        result: result_text,
                        error,
                        kind: if api_error.is_some() {
                            Exit::Model.kind()
                        } else {
                            exit.kind()
                        },
                        terminal_reason,
                        api_error,
                    },
                    session_id: &self.session_id,
                    model,
                    provider: session.agent.provider_name(),
                    duration: started.elapsed(),
                    api_duration: self.headless.take_api_time(),
                    timings: self.headless.take_timings(started),
                    num_turns: requests,
                    tool_calls,
                    usage,
                    cost_usd: crate::agent::cost::cost_usd(model, &usage),
                    denials: self.headless.take_denials(),
                    context_window: config.context_window,
                    max_output_tokens: u64::from(config.max_tokens),
                    index,
                    begun: self.headless.take_begun(),
                });
                let mut value = value;
                if let Ok(Some((report, _))) = &outcome
                    && let Some(output) = &report.structured_output
                {
                    value["structured_output"] = output.clone();
                }
                StreamJsonFrontend::emit(&value);
            }
        }
        exit
    }
}

/// The `system`/`init` message that starts a stream: Claude Code's fields,
/// then capstan's own (`provider`, `skills`, `hooks`, `resumed`).
fn init_message(session: &Session, tools: &[(String, String)]) -> serde_json::Value {
    let agent = &session.agent;
    let skills: Vec<String> = agent
        .toolbox()
        .skills()
        .map(|skills| {
            skills
                .set()
                .skills()
                .iter()
                .map(|s| s.meta.name.clone())
                .collect()
        })
        .unwrap_or_default();
    json!({
        "type": "system",
        "subtype": "init",
        "cwd": session.workspace,
        "tools": tools.iter().map(|(_, model_name)| model_name).collect::<Vec<_>>(),
        "mcp_servers": session
            .mcp
            .states()
            .into_iter()
            .map(|server| match server.error {
                Some(error) => json!({"name": server.name, "status": server.state, "error": error}),
                None => json!({"name": server.name, "status": server.state}),
            })
            .collect::<Vec<_>>(),
        "model": agent.config().model,
        "permissionMode": claude_mode(agent.policy().mode()),
        "slash_commands": skills,
        "apiKeySource": session.api_key_source.as_deref().unwrap_or("none"),
        "claude_code_version": env!("CARGO_PKG_VERSION"),
        "output_style": output_style_name(session),
        "agents": session.agent_names,
        "plugins": session
            .claude_plugins
            .iter()
            .map(|(name, path)| json!({"name": name, "path": path}))
            .collect::<Vec<_>>(),
        // Claude Code's session facts, true of capstan: no slash command
        // only a terminal offers, no protocol extensions, no analytics or
        // feedback sent, no fast mode, effort or ultrathink, no folders
        // beside the workspace.
        "terminal_slash_commands": [],
        "capabilities": [],
        "analytics_disabled": true,
        "product_feedback_disabled": true,
        "served_by_anthropic": served_by_anthropic(agent.provider()),
        "original_cwd": session.workspace,
        "additional_directories": [],
        "fast_mode_state": "off",
        "per_turn_effort_active": false,
        "ultrathink_available": false,
        "ultrathink_typed_raises": false,
        "view_mode": "default",
        "uuid": headless::new_uuid(),
        "provider": agent.provider_name(),
        "skills": skills,
        "hooks": agent.hooks().names().collect::<Vec<_>>(),
        "resumed": session.resumed,
    })
}

/// Whether the model is Anthropic's own API (not a gateway or another
/// provider's server).
fn served_by_anthropic(provider: &dyn crate::model::Provider) -> bool {
    provider.name() == "anthropic"
        && provider
            .base_url()
            .is_some_and(|url| url.trim_end_matches('/') == "https://api.anthropic.com")
}

/// The answer to a driver's `initialize` control request: the session's
/// commands (its skills), output style and model, in the shape Claude
/// Code's SDK reads.
fn initialize_answer(session: &Session) -> serde_json::Value {
    let agent = &session.agent;
    let commands: Vec<serde_json::Value> = agent
        .toolbox()
        .skills()
        .map(|skills| {
            skills
                .set()
                .skills()
                .iter()
                .map(|s| {
                    json!({
                        "name": s.meta.name,
                        "description": s.meta.description,
                        "argumentHint": "",
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let model = &agent.config().model;
    json!({
        "commands": commands,
        "output_style": output_style_name(session),
        "available_output_styles": session.output_styles.names(),
        "models": [{"value": model, "displayName": model, "description": agent.provider_name()}],
    })
}

/// The output style the session answers in (`default` for none).
fn output_style_name(session: &Session) -> String {
    session
        .agent
        .output_style()
        .map_or(crate::agent::output_styles::DEFAULT_STYLE, |s| {
            s.file.name.as_str()
        })
        .to_string()
}

/// A permission mode under Claude Code's name for it.
fn claude_mode(mode: crate::policy::Mode) -> &'static str {
    use crate::policy::Mode;
    match mode {
        Mode::Default => "default",
        Mode::AcceptEdits => "acceptEdits",
        Mode::Plan => "plan",
        Mode::Bypass => "bypassPermissions",
        Mode::DontAsk => "dontAsk",
    }
}

/// Why the model stopped, under the Messages API's name.
fn stop_reason_name(reason: &crate::model::StopReason) -> String {
    use crate::model::StopReason;
    match reason {
        StopReason::EndTurn => "end_turn".into(),
        StopReason::ToolUse => "tool_use".into(),
        StopReason::MaxTokens => "max_tokens".into(),
        StopReason::StopSequence => "stop_sequence".into(),
        StopReason::Other(other) => other.clone(),
    }
}

fn exit_of(error: &AgentError) -> Exit {
    match error {
        AgentError::Model(_) => Exit::Model,
        AgentError::Session(_) | AgentError::Compact(_) => Exit::Error,
    }
}

/// Prints the final answer on stdout, ending with a newline; an empty
/// answer prints nothing. On a terminal its control characters are shown
/// escaped, as in the interactive session (the answer may quote what a
/// command printed); a pipe gets it as it is.
fn print_answer(text: &str) {
    if text.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    let text = if out.is_terminal() {
        escape::text(text)
    } else {
        std::borrow::Cow::Borrowed(text)
    };
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

/// Reports a failure before the session was ready, in the chosen format.
fn report_failure(format: OutputFormat, exit: Exit, message: &str, started: Instant) {
    match format {
        OutputFormat::Text => eprintln!("error: {}", escape::message(message)),
        OutputFormat::Json | OutputFormat::StreamJson => {
            StreamJsonFrontend::emit(&headless::result_message(Summary {
                ending: Ending {
                    subtype: "error_during_execution",
                    is_error: true,
                    stop_reason: None,
                    result: String::new(),
                    error: Some(message.to_string()),
                    kind: exit.kind(),
                    terminal_reason: Some("turn_setup_failed"),
                    api_error: None,
                },
                session_id: "",
                model: "",
                provider: "",
                duration: started.elapsed(),
                api_duration: std::time::Duration::ZERO,
                timings: headless::Timings::default(),
                num_turns: 0,
                tool_calls: 0,
                usage: crate::model::Usage::default(),
                cost_usd: None,
                denials: Vec::new(),
                context_window: 0,
                max_output_tokens: 0,
                index: 0,
                begun: None,
            }))
        }
    }
}
