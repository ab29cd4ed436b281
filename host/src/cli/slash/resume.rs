//! `/resume [ID]`: leaves this conversation (it stays saved) and takes up
//! another of the workspace's sessions, picked from a list when no id is
//! given; and the recap a resumed session shows.

use crate::cli::escape;
use crate::cli::render::TerminalFrontend;
use crate::cli::session_picker;
use crate::cli::setup::Session;
use crate::session::Sessions;
use crate::session::recap;

/// Runs `/resume [ID]`.
pub async fn run(session: &mut Session, frontend: &mut TerminalFrontend, argument: &str) {
    let sessions = match Sessions::for_workspace(&session.home, &session.workspace) {
        Ok(sessions) => sessions,
        Err(e) => {
            eprintln!("error: {}", escape::message(&e.to_string()));
            return;
        }
    };
    let current = session.agent.session_id().map(str::to_string);
    let id = if argument.is_empty() {
        match session_picker::pick(&sessions, current.as_deref()) {
            Ok(Some(id)) => id,
            Ok(None) => {
                eprintln!("(resume cancelled)");
                return;
            }
            Err(why) => {
                eprintln!("error: {}", escape::message(&why));
                return;
            }
        }
    } else {
        match sessions.find(argument) {
            Ok(id) => id,
            Err(e) => {
                eprintln!("error: {}", escape::message(&e.to_string()));
                return;
            }
        }
    };
    if current.as_deref() == Some(id.as_str()) {
        eprintln!("session {id} is the one in use");
        return;
    }
    let model = session.agent.config().model.clone();
    let provider = session.agent.provider_name().to_string();
    let (transcript, loaded) = match sessions.resume(&id, &model, &provider) {
        Ok(resumed) => resumed,
        Err(e) => {
            eprintln!("error: {}", escape::message(&e.to_string()));
            return;
        }
    };
    if let Err(e) = session.agent.fire_session_end("resume", frontend).await {
        eprintln!("error: {}", escape::message(&e.to_string()));
    }
    if let Err(e) = session.agent.clear(Some(transcript)) {
        eprintln!("error: {}", escape::message(&e.to_string()));
        return;
    }
    for warning in &loaded.warnings {
        eprintln!("session {id}: {}", escape::message(&warning.to_string()));
    }
    let recorded_model = loaded
        .model
        .clone()
        .filter(|m| loaded.provider.as_deref() == Some(provider.as_str()) && *m != model);
    session.agent.restore(loaded.messages, loaded.usage);
    if let Some(recorded) = recorded_model
        && let Err(e) = session
            .agent
            .set_model(&recorded, session.context_window_setting)
    {
        eprintln!("error: {}", escape::message(&e.to_string()));
    }
    if let Err(e) = session.agent.start_session("resume", frontend).await {
        eprintln!("error: {}", escape::message(&e.to_string()));
    }
    show_recap(session);
}

/// Shows what the resumed conversation was about: its id and size, the
/// last prompt, what was done, the files changed.
pub fn show_recap(session: &Session) {
    let agent = &session.agent;
    let toolbox = agent.toolbox();
    let recap = recap::recap(agent.messages(), |name| match toolbox.find(name) {
        Some(tool) => (tool.name.clone(), !tool.spec.read_only),
        None => (name.to_string(), false),
    });
    eprintln!(
        "resumed session {} ({} messages, model {})",
        agent.session_id().unwrap_or("-"),
        recap.messages,
        escape::line(&agent.config().model)
    );
    for line in recap.lines() {
        eprintln!("{}", escape::line(&line));
    }
}
