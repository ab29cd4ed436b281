//! `/context`: what fills the model's context window, part by part.

use crate::agent::context_use;
use crate::cli::setup::Session;

/// Shows what the context holds.
pub fn show(session: &Session) {
    let agent = &session.agent;
    let config = agent.config();
    let window = if config.context_window > 0 {
        config.context_window
    } else {
        crate::agent::compact::context_window_for(&config.model)
    };
    let used = context_use::breakdown(
        &config.system,
        &session.skills_prompt,
        &agent.offered_tools(),
        agent.messages(),
        agent.pending_user_context(),
        window,
    );
    eprintln!("{}", used.report(&config.model, agent.context_tokens()));
}
