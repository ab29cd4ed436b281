//! Installed plugins that cannot be used in this process, and why.
//!
//! One broken plugin never takes a session down: an installed plugin whose
//! files fail their integrity check, whose manifest asks for more than was
//! agreed to, which cannot be given what it was granted (a secret with no
//! value, a granted folder that is gone), or which cannot be loaded or
//! describe its tools, is *unavailable*. Sessions, `tool list` and skills
//! go on without it; the model is not offered its tools nor are its hooks
//! run; `/plugins` and `plugin list` show it, with what is wrong and the
//! command that fixes it. Every place that finds a plugin unusable records
//! it here, through [`super::Catalog::mark_unavailable`].

use std::sync::{Arc, Mutex};

/// An installed plugin that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// The plugin.
    pub plugin: String,
    /// What is wrong, ending with the command that fixes it.
    pub reason: String,
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "plugin {} is unavailable: {}", self.plugin, self.reason)
    }
}

impl Unavailable {
    /// Plugin `plugin` is unavailable because of `problem`; `fix` is added
    /// unless the problem already names a `capstan plugin` command.
    pub fn new(plugin: &str, problem: impl std::fmt::Display, fix: &str) -> Self {
        let problem = problem.to_string();
        let reason = if problem.contains("capstan plugin ") {
            problem
        } else {
            format!("{problem}; {fix}")
        };
        Self {
            plugin: plugin.to_string(),
            reason,
        }
    }
}

/// The unavailable plugins of a process, shared by every holder of a clone
/// (the catalog, the session's toolbox).
#[derive(Debug, Clone, Default)]
pub struct UnavailablePlugins(Arc<Mutex<Vec<Unavailable>>>);

impl UnavailablePlugins {
    /// Records `unavailable`; the first reason found for a plugin is kept.
    pub fn mark(&self, unavailable: Unavailable) {
        if let Ok(mut all) = self.0.lock()
            && !all.iter().any(|u| u.plugin == unavailable.plugin)
        {
            all.push(unavailable);
        }
    }

    /// Why plugin `name` is unavailable, if it is.
    pub fn get(&self, name: &str) -> Option<Unavailable> {
        self.0
            .lock()
            .ok()?
            .iter()
            .find(|u| u.plugin == name)
            .cloned()
    }

    /// Every unavailable plugin, in the order they were found.
    pub fn all(&self) -> Vec<Unavailable> {
        self.0.lock().map(|all| all.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_reason_is_kept_and_a_fix_added_when_missing() {
        let plugins = UnavailablePlugins::default();
        let shared = plugins.clone();
        plugins.mark(Unavailable::new(
            "weather",
            "secret `KEY` has no value",
            "or `capstan plugin revoke weather secret KEY`",
        ));
        shared.mark(Unavailable::new("weather", "other", "fix"));
        let found = plugins.get("weather").unwrap();
        assert_eq!(
            found.to_string(),
            "plugin weather is unavailable: secret `KEY` has no value; or `capstan plugin revoke weather secret KEY`"
        );
        assert_eq!(shared.all().len(), 1);
        let named = Unavailable::new("x", "run `capstan plugin remove x`", "ignored");
        assert!(!named.reason.contains("ignored"));
        assert!(plugins.get("other").is_none());
    }
}
