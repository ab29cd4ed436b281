//! Permissions at run time: before every tool call the agent asks the
//! [`Policy`] whether the call may run.
//!
//! A call is described by [`ToolFacts`]: the tool's name (`PLUGIN.TOOL`), its
//! hints (read-only, destructive, open-world) and its JSON input. The
//! [`Decision`] is reached in this order; the first step that applies wins:
//!
//! 1. A matching **deny** rule denies, in every mode, bypass included.
//! 2. In **plan** mode a tool that is not read-only is denied, and so is a
//!    command (`exec.run`) that asks for a writable workspace or an origin.
//! 3. A matching **ask** rule asks — except in bypass mode, where it allows.
//! 4. A matching **allow** rule (settings, command line, or "allow for this
//!    session") allows.
//! 5. Otherwise the mode decides. A read-only tool that stays inside the
//!    workspace (not open-world) runs in every mode. For the rest:
//!    - default: ask;
//!    - accept-edits: allow unless open-world, ask if open-world;
//!    - plan: ask (only read-only open-world tools get this far);
//!    - bypass: allow.
//!
//!    A tool whose capabilities depend on the call ([`ToolFacts::capabilities`],
//!    `exec.run`) is judged by what the call asks for: one that asks for
//!    nothing runs; asking to write the workspace is an edit, asking for an
//!    origin reaches outside; the question names exactly what it asks for.
//!
//! Paths outside the workspace get no special treatment here: the sandbox
//! refuses them whatever the policy says, and relative path rules never
//! match them (see [`rule`]).
//!
//! Rules come from the settings files ([`crate::config`]), the command line and
//! the session; [`Rule`] describes their syntax.

pub mod claude_code;
pub mod folder_trust;
pub mod mode;
pub mod rule;
pub mod web_hosts;

use std::fmt;
use std::path::Path;

pub use mode::{Mode, ModeError};
pub use rule::{Rule, RuleError, RuleKind};

/// Where a rule came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// The user's config file.
    User,
    /// The project's `.capstan/config.toml` (may only narrow).
    Project,
    /// The project local config, kept outside the workspace.
    ProjectLocal,
    /// `--allow`/`--ask`/`--deny` on the command line.
    CommandLine,
    /// Allowed for this session by the user.
    Session,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::User => "user config",
            Layer::Project => "project config (.capstan/config.toml)",
            Layer::ProjectLocal => "project local config",
            Layer::CommandLine => "command line",
            Layer::Session => "this session",
        })
    }
}

/// What the policy needs to know about one tool call.
#[derive(Debug, Clone, Copy)]
pub struct ToolFacts<'a> {
    /// The tool's name, `PLUGIN.TOOL`.
    pub tool: &'a str,
    /// The tool only reads.
    pub read_only: bool,
    /// The tool may destroy data.
    pub destructive: bool,
    /// The tool reaches outside the workspace, such as the network.
    pub open_world: bool,
    /// The call's input, a JSON object.
    pub input: &'a serde_json::Value,
    /// The workspace folder, against which relative paths are resolved.
    pub workspace: &'a Path,
    /// For a tool whose capabilities depend on the call (`exec.run`): what
    /// this call asks for, in plain words ("write the workspace", "reach
    /// https://example.com"), empty when it only reads; `read_only` and
    /// `open_world` then describe the call, not the tool.
    pub capabilities: Option<&'a [String]>,
}

/// Whether a call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// It runs.
    Allow,
    /// The user is asked first.
    Ask,
    /// It does not run.
    Deny,
}

/// What settled a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionSource {
    /// The permission mode's default.
    Mode(Mode),
    /// A rule, as written, and where it came from.
    Rule {
        /// The rule's text.
        rule: String,
        /// Its layer.
        layer: Layer,
    },
    /// The user allowed it for this session.
    Session,
    /// The user answered a prompt.
    User,
    /// The run cannot prompt, so a call that needed asking was denied.
    NonInteractive,
    /// A hook decided (never over a deny rule, plan mode or a grant).
    Hook(String),
    /// An active skill's `allowed-tools` pre-approved a call the mode
    /// would have asked about.
    Skill {
        /// The skill.
        skill: String,
        /// The entry of its `allowed-tools` that covers the call.
        rule: String,
    },
    /// The tool named by `--permission-prompt-tool` answered in the
    /// user's place.
    PromptTool(String),
}

/// The policy's answer for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the call runs.
    pub outcome: Outcome,
    /// What settled it.
    pub source: DecisionSource,
    /// Why, as a sentence for the transcript and, on deny, for the model.
    pub reason: String,
}

impl Decision {
    /// For runs that cannot prompt (`-p`, no terminal): an `Ask` becomes a
    /// `Deny` whose reason says how to grant the permission for `tool`;
    /// `Allow` and `Deny` are unchanged.
    pub fn without_prompt(self, tool: &str) -> Decision {
        if self.outcome != Outcome::Ask {
            return self;
        }
        Decision {
            outcome: Outcome::Deny,
            source: DecisionSource::NonInteractive,
            reason: format!(
                "{} — but this run cannot ask for permission, so the call was denied. \
                 To let it run, pass `--permission-mode accept-edits` (edits inside the workspace) \
                 or an allow rule such as `--allow '{tool}'`, \
                 or add the rule to `allow` under [permissions] in the config",
                self.reason
            ),
        }
    }
}

/// The permission mode and rules of a session.
#[derive(Debug, Clone)]
pub struct Policy {
    mode: Mode,
    rules: Vec<(RuleKind, Rule, Layer)>,
}

impl Policy {
    /// A policy with `mode` and `rules`.
    pub fn new(mode: Mode, rules: Vec<(RuleKind, Rule, Layer)>) -> Self {
        Self { mode, rules }
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Switches mode, as `/mode` does.
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    /// Adds a rule the user allowed for the rest of this session.
    pub fn allow_for_session(&mut self, rule: Rule) {
        self.add_rule(RuleKind::Allow, rule, Layer::Session);
    }

    /// Adds a rule of `layer` (one just saved to its file), unless it is
    /// there already.
    pub fn add_rule(&mut self, kind: RuleKind, rule: Rule, layer: Layer) {
        let exists = self
            .rules
            .iter()
            .any(|(k, r, l)| *k == kind && *l == layer && *r == rule);
        if !exists {
            self.rules.push((kind, rule, layer));
        }
    }

    /// Removes a rule of `kind` from `layer`; whether it was there.
    pub fn remove_rule(&mut self, kind: RuleKind, rule: &Rule, layer: Layer) -> bool {
        let before = self.rules.len();
        self.rules
            .retain(|(k, r, l)| !(*k == kind && r == rule && *l == layer));
        self.rules.len() != before
    }

    /// Every rule, with its kind and layer, in the order they were given.
    pub fn rules(&self) -> impl Iterator<Item = (&RuleKind, &Rule, &Layer)> {
        self.rules
            .iter()
            .map(|(kind, rule, layer)| (kind, rule, layer))
    }

    /// Whether a deny rule keeps the model from reading `path` (absolute,
    /// or relative to `workspace`): one that would deny `fs.read` of it, or
    /// `lsp` on it (Claude Code's `Read(…)` covers both). Tools that show
    /// other files' lines (the `lsp` tool's locations) leave those out.
    pub fn denies_reading(&self, path: &Path, workspace: &Path) -> bool {
        let input = serde_json::json!({ "path": path.to_string_lossy() });
        self.rules.iter().any(|(kind, rule, _)| {
            *kind == RuleKind::Deny
                && ["fs.read", "lsp"]
                    .iter()
                    .any(|tool| rule.matches(tool, &input, workspace))
        })
    }

    /// Whether some deny rule may keep the model from reading some file
    /// (see [`Policy::denies_reading`]).
    pub fn denies_any_reading(&self) -> bool {
        self.rules.iter().any(|(kind, rule, _)| {
            *kind == RuleKind::Deny && (rule.names_tool("fs.read") || rule.names_tool("lsp"))
        })
    }

    /// A warning for each rule that can never match a tool of this session
    /// (`offered` holds their names), suggesting the closest tool name. A
    /// rule for `exec.run` (Claude Code's `Bash`) gets a note instead: it is
    /// kept for the sessions that offer that tool.
    pub fn unmatched_rule_warnings(&self, offered: &[&str]) -> Vec<String> {
        let mut warnings = Vec::new();
        for (kind, rule, layer) in &self.rules {
            if offered.iter().any(|tool| rule.names_tool(tool)) {
                continue;
            }
            let covered = rule.covered_tools();
            if covered.iter().all(|tool| tool == claude_code::EXEC_TOOL) {
                warnings.push(format!(
                    "note: the {kind} rule `{rule}` in the {layer} is for {}, which is not offered here; it is kept and applies where it is",
                    claude_code::EXEC_TOOL
                ));
                continue;
            }
            let stands_for = if covered.len() == 1 && covered[0] == rule.tool_pattern() {
                String::new()
            } else {
                format!(" (it stands for {})", covered.join(", "))
            };
            let hint = match closest_tool(rule.tool_pattern(), covered, offered) {
                Some(name) => format!("; did you mean `{name}`?"),
                None => "; `capstan tool list` shows the tools".to_string(),
            };
            warnings.push(format!(
                "warning: the {kind} rule `{rule}` in the {layer} matches no tool in this session{stands_for}{hint}"
            ));
        }
        warnings
    }

    /// Whether the call described by `facts` may run; see the module docs
    /// for the order of the checks. In dont-ask mode, a call that would
    /// ask is denied instead.
    pub fn decide(&self, facts: &ToolFacts) -> Decision {
        let decision = self.decide_asking(facts);
        if self.mode == Mode::DontAsk && decision.outcome == Outcome::Ask {
            return Decision {
                outcome: Outcome::Deny,
                reason: format!(
                    "dont-ask mode denies what is not pre-approved: {}; allow it with --allowedTools or an allow rule",
                    decision.reason
                ),
                source: decision.source,
            };
        }
        decision
    }

    /// [`Self::decide`], asking where the mode or a rule says to.
    fn decide_asking(&self, facts: &ToolFacts) -> Decision {
        let tool = facts.tool;
        let matching = |wanted: RuleKind| {
            self.rules.iter().find(|(kind, rule, _)| {
                *kind == wanted
                    && if wanted == RuleKind::Allow {
                        rule.allows(tool, facts.input, facts.workspace)
                    } else {
                        rule.matches(tool, facts.input, facts.workspace)
                    }
            })
        };
        let by_rule = |outcome: Outcome, rule: &Rule, layer: Layer, reason: String| Decision {
            outcome,
            source: if layer == Layer::Session {
                DecisionSource::Session
            } else {
                DecisionSource::Rule {
                    rule: rule.to_string(),
                    layer,
                }
            },
            reason,
        };
        let by_mode = |outcome: Outcome, reason: String| Decision {
            outcome,
            source: DecisionSource::Mode(self.mode),
            reason,
        };

        if let Some((_, rule, layer)) = matching(RuleKind::Deny) {
            return by_rule(
                Outcome::Deny,
                rule,
                *layer,
                format!("`{tool}` is denied by the rule `{rule}` in the {layer}"),
            );
        }
        let wants = facts.capabilities.filter(|wants| !wants.is_empty());
        if let (Mode::Plan, Some(wants)) = (self.mode, wants) {
            return by_mode(
                Outcome::Deny,
                format!(
                    "plan mode: commands get a read-only workspace and no network, and `{tool}` wants: {}; switch with /mode",
                    wants.join("; ")
                ),
            );
        }
        if self.mode == Mode::Plan && !facts.read_only {
            return by_mode(
                Outcome::Deny,
                format!(
                    "plan mode: nothing that changes files runs, so `{tool}` was not run; switch with /mode"
                ),
            );
        }
        if let Some((_, rule, layer)) = matching(RuleKind::Ask) {
            if self.mode == Mode::Bypass {
                return by_mode(
                    Outcome::Allow,
                    format!(
                        "bypass mode: `{tool}` runs without asking, although the rule `{rule}` in the {layer} asks"
                    ),
                );
            }
            return by_rule(
                Outcome::Ask,
                rule,
                *layer,
                format!("`{tool}` needs permission: the rule `{rule}` in the {layer} asks first"),
            );
        }
        if let Some((_, rule, layer)) = matching(RuleKind::Allow) {
            let reason = if *layer == Layer::Session {
                format!("`{tool}` is allowed for this session by `{rule}`")
            } else {
                format!("`{tool}` is allowed by the rule `{rule}` in the {layer}")
            };
            return by_rule(Outcome::Allow, rule, *layer, reason);
        }

        let mode = self.mode;
        if facts.read_only && !facts.open_world {
            let what = if facts.capabilities.is_some() {
                "runs with a read-only workspace and no network"
            } else {
                "only reads inside the workspace"
            };
            return by_mode(Outcome::Allow, format!("{mode} mode: `{tool}` {what}"));
        }
        if let Some(wants) = wants {
            let wants = wants.join("; ");
            return match mode {
                Mode::Bypass => by_mode(
                    Outcome::Allow,
                    format!("bypass mode: `{tool}` wants: {wants}; it runs without asking"),
                ),
                Mode::AcceptEdits if !facts.open_world => by_mode(
                    Outcome::Allow,
                    format!("accept-edits mode: `{tool}` wants: {wants}; it runs without asking"),
                ),
                Mode::Default | Mode::AcceptEdits | Mode::Plan | Mode::DontAsk => by_mode(
                    Outcome::Ask,
                    format!("{tool} wants: {wants} ({mode} mode asks first)"),
                ),
            };
        }
        let what = if facts.open_world {
            "reaches outside the workspace"
        } else if facts.destructive && !creates_a_file(facts) {
            "may destroy data"
        } else if facts.destructive {
            "creates a file"
        } else {
            "changes files"
        };
        match mode {
            Mode::Bypass => by_mode(
                Outcome::Allow,
                format!("bypass mode: `{tool}` {what} and runs without asking"),
            ),
            Mode::AcceptEdits if !facts.open_world => by_mode(
                Outcome::Allow,
                format!(
                    "accept-edits mode: `{tool}` {what} inside the workspace and runs without asking"
                ),
            ),
            Mode::Default | Mode::AcceptEdits | Mode::Plan | Mode::DontAsk => by_mode(
                Outcome::Ask,
                format!("`{tool}` needs permission: it {what}, and {mode} mode asks first"),
            ),
        }
    }
}

/// Whether the call names, in `path`, a file that does not exist yet, so
/// that even a tool that may overwrite only creates one.
fn creates_a_file(facts: &ToolFacts) -> bool {
    let Some(path) = facts.input.get("path").and_then(serde_json::Value::as_str) else {
        return false;
    };
    let full = rule::normalize(&facts.workspace.join(path));
    matches!(std::fs::symlink_metadata(full), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// The offered tool (or `plugin.*` pattern) closest to what a rule names
/// (as `written`, or the tools it `covers`), if one is close enough to be a
/// likely typo.
fn closest_tool(written: &str, covers: &[String], offered: &[&str]) -> Option<String> {
    let mut candidates: Vec<String> = offered.iter().map(|tool| tool.to_string()).collect();
    for tool in offered {
        if let Some((plugin, _)) = tool.split_once('.') {
            let pattern = format!("{plugin}.*");
            if !candidates.contains(&pattern) {
                candidates.push(pattern);
            }
        }
    }
    let wanted: Vec<String> = std::iter::once(written.to_ascii_lowercase())
        .chain(covers.iter().map(|tool| tool.to_ascii_lowercase()))
        .collect();
    let distance = |candidate: &str| {
        let lower = candidate.to_ascii_lowercase();
        let short = lower
            .split_once('.')
            .map_or(lower.as_str(), |(_, tool)| tool);
        wanted
            .iter()
            .map(|want| strsim::levenshtein(want, &lower).min(strsim::levenshtein(want, short)))
            .min()
            .unwrap_or(usize::MAX)
    };
    let (best, score) = candidates
        .iter()
        .map(|candidate| (candidate, distance(candidate)))
        .min_by_key(|(_, score)| *score)?;
    let allowed = (written.chars().count() / 3).max(2);
    (score <= allowed).then(|| best.clone())
}

#[cfg(test)]
mod tests;
