//! `/status`: the model and where it is, the permission mode, the
//! workspace, the session, what plugins and commands may touch, and the
//! cost so far.

use crate::cli::escape;
use crate::cli::setup::Session;
use crate::plugin::install::capabilities_in_one_line;
use crate::plugin::lock::Lockfile;
use crate::plugin::store::PluginStore;
use crate::policy::{Mode, RuleKind};

/// Shows the session's status.
pub fn show(session: &Session) {
    let agent = &session.agent;
    let mode = agent.policy().mode();
    let line = |label: &str, value: &str| eprintln!("  {label:<12} {value}");
    eprintln!("status");
    line("model", &escape::line(&agent.config().model));
    line("provider", agent.provider_name());
    line(
        "base URL",
        &escape::line(
            agent
                .provider()
                .base_url()
                .unwrap_or("(none: offline replay)"),
        ),
    );
    line("mode", &format!("{mode} ({})", mode.describe()));
    line("workspace", &session.workspace.display().to_string());
    line("session", agent.session_id().unwrap_or("(not saved)"));
    let (mut allow, mut ask, mut deny) = (0, 0, 0);
    for (kind, _, _) in agent.policy().rules() {
        match kind {
            RuleKind::Allow => allow += 1,
            RuleKind::Ask => ask += 1,
            RuleKind::Deny => deny += 1,
        }
    }
    line(
        "rules",
        &format!("{allow} allow, {ask} ask, {deny} deny (/permissions lists them)"),
    );
    let store = PluginStore::new(session.home.plugins_dir());
    let lock = Lockfile::load(&store.lock_path()).ok();
    eprintln!("  grants");
    for (plugin, _) in agent.toolbox().plugins() {
        let granted = lock
            .as_ref()
            .and_then(|lock| lock.plugins.get(plugin))
            .map_or_else(
                || {
                    "the workspace only: reads, and writes when allowed (built in or --plugin)"
                        .to_string()
                },
                |entry| capabilities_in_one_line(&entry.granted),
            );
        eprintln!(
            "    {:<10} {}",
            escape::line(plugin),
            escape::line(&granted)
        );
    }
    let commands = match mode {
        Mode::Plan => "workspace read-only, no network beyond [exec]",
        Mode::Default => {
            "workspace read-only unless a call asks to write (asked first), no network beyond [exec] unless asked"
        }
        Mode::AcceptEdits => "workspace writable when a call asks, network asked first",
        Mode::Bypass => "what each call asks for, without asking",
        Mode::DontAsk => "workspace read-only, no network beyond [exec], unless allowed by a rule",
    };
    eprintln!("    {:<10} {commands}", "commands");
    for hook in agent.hooks().names() {
        eprintln!("    {:<10} hooks", escape::line(hook));
    }
    for unavailable in agent.toolbox().unavailable().all() {
        eprintln!(
            "    {:<10} unavailable: {}",
            escape::line(&unavailable.plugin),
            escape::line(&unavailable.reason)
        );
    }
    let cost = agent.cost();
    let dollars = match cost.cost_usd() {
        Some(usd) => format!("${usd:.4}"),
        None => "unknown (no prices for this model)".to_string(),
    };
    line(
        "cost",
        &format!(
            "{dollars}; {} input, {} output tokens (/cost for more)",
            cost.usage.input_tokens, cost.usage.output_tokens
        ),
    );
}
