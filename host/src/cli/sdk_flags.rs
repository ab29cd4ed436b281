//! Flags the official Agent SDKs pass to Claude Code, taken as it takes
//! them: `--tools` (the built-in tools offered), `--setting-sources`
//! (which settings, instructions and skills are read), `--settings` (a
//! settings layer of Claude Code's JSON), `--max-budget-usd`,
//! `--json-schema` (structured output) and `--max-thinking-tokens`.

use std::path::Path;

use clap::Args;
use serde_json::Value;

use crate::agent::{AgentConfig, ToolAllowance, Toolbox};
use crate::config::{SettingSources, Settings};
use crate::policy::{Layer, Mode, Rule, RuleKind};
use crate::skills::tool_list::{self, Entry};

/// The flags; see the [module documentation](self).
#[derive(Debug, Clone, Default, Args)]
pub struct SdkFlags {
    /// The built-in tools offered to the model, as Claude Code names them
    /// or as capstan does, comma-separated ("Read,Edit,Bash" or
    /// "fs.read,exec.run"); "default" for all, "" for none. MCP servers'
    /// tools are not affected.
    #[arg(long = "tools", value_name = "TOOLS")]
    pub tools: Option<String>,

    /// Which settings sources are read, comma-separated: user (your
    /// config, ~/.claude), project (the workspace's .capstan/config.toml,
    /// .claude/ and CLAUDE.md/AGENTS.md), local (the project local
    /// config); "" for none.
    #[arg(long = "setting-sources", value_name = "SOURCES")]
    pub setting_sources: Option<String>,

    /// A settings layer in Claude Code's settings.json shape, as a file or
    /// JSON text: `permissions` (allow, deny, ask, defaultMode) and
    /// `model` are applied, over the settings files.
    #[arg(long = "settings", value_name = "FILE_OR_JSON")]
    pub settings: Option<String>,

    /// Stop a prompt once its model requests cost more than this, in US
    /// dollars (the result's subtype is then `error_max_budget_usd`).
    #[arg(long = "max-budget-usd", value_name = "USD")]
    pub max_budget_usd: Option<f64>,

    /// A JSON schema the answer must fit: the model returns it through a
    /// `StructuredOutput` tool, and the result carries it as
    /// `structured_output`.
    #[arg(long = "json-schema", value_name = "SCHEMA")]
    pub json_schema: Option<String>,

    /// Claude Code's extended-thinking budget. capstan does not ask the
    /// model to think: 0 is taken; more is refused.
    #[arg(long = "max-thinking-tokens", value_name = "N")]
    pub max_thinking_tokens: Option<u32>,
}

/// Why extended thinking is refused.
pub const NO_THINKING: &str = "capstan does not ask the model for extended thinking (it would have to send the model's thinking back with every tool result); leave the thinking budget unset or 0";

impl SdkFlags {
    /// The sources `--setting-sources` names (all when it is not given).
    pub fn sources(&self) -> Result<SettingSources, String> {
        match &self.setting_sources {
            Some(list) => SettingSources::parse(list),
            None => Ok(SettingSources::ALL),
        }
    }

    /// Checks the flags that need no session yet.
    pub fn check(&self) -> Result<(), String> {
        if let Some(budget) = self.max_budget_usd
            && !(budget.is_finite() && budget > 0.0)
        {
            return Err(format!(
                "--max-budget-usd {budget}: give a positive amount of US dollars, such as 0.50"
            ));
        }
        if self.max_thinking_tokens.is_some_and(|n| n > 0) {
            return Err(format!("--max-thinking-tokens: {NO_THINKING}"));
        }
        self.output_schema()?;
        self.sources()?;
        Ok(())
    }

    /// The schema of `--json-schema`, parsed and checked.
    pub fn output_schema(&self) -> Result<Option<Value>, String> {
        let Some(text) = &self.json_schema else {
            return Ok(None);
        };
        let schema: Value = serde_json::from_str(text)
            .map_err(|e| format!("--json-schema is not valid JSON ({e}); give a JSON schema such as {{\"type\":\"object\",\"properties\":{{...}}}}"))?;
        crate::agent::structured_output::check_schema(&schema)
            .map_err(|why| format!("--json-schema: {why}"))?;
        Ok(Some(schema))
    }

    /// Sets the budget and the output schema of `config`; a budget for a
    /// model whose prices capstan does not know is refused, since it could
    /// not be kept.
    pub fn apply(&self, config: &mut AgentConfig) -> Result<(), String> {
        if let Some(budget) = self.max_budget_usd {
            if crate::agent::cost::cost_usd(&config.model, &crate::model::Usage::default())
                .is_none()
            {
                return Err(format!(
                    "--max-budget-usd: capstan does not know the prices of model {}, so it cannot keep to a budget",
                    config.model
                ));
            }
            config.max_budget_usd = Some(budget);
        }
        config.output_schema = self.output_schema()?;
        Ok(())
    }

    /// Applies `--settings` to `settings`: its permission rules (at the
    /// command line's layer), its default mode and its model; the keys
    /// capstan does not apply come back as notices, so none is dropped
    /// silently.
    pub fn apply_settings(
        &self,
        settings: &mut Settings,
        cwd: &Path,
    ) -> Result<Vec<String>, String> {
        let Some(value) = &self.settings else {
            return Ok(Vec::new());
        };
        let (text, source) = if value.trim_start().starts_with('{') {
            (value.clone(), "--settings (JSON)".to_string())
        } else {
            let path = cwd.join(value);
            let text = std::fs::read_to_string(&path).map_err(|e| {
                format!(
                    "cannot read the --settings file {}: {e}; pass a settings.json file or its JSON",
                    path.display()
                )
            })?;
            (text, format!("--settings {}", path.display()))
        };
        let json: Value =
            serde_json::from_str(&text).map_err(|e| format!("{source} is not valid JSON: {e}"))?;
        let object = json
            .as_object()
            .ok_or_else(|| format!("{source} must be a JSON object, as settings.json is"))?;
        let mut notices = Vec::new();
        for (key, value) in object {
            match key.as_str() {
                "permissions" => apply_permissions(value, settings, &source, &mut notices)?,
                "model" => {
                    let model = value
                        .as_str()
                        .ok_or_else(|| format!("{source}: `model` must be a string"))?;
                    settings.model.name = Some(model.to_string());
                }
                "$schema" => {}
                other => notices.push(format!(
                    "warning: {source}: `{other}` is not applied by capstan (it applies `permissions` and `model`)"
                )),
            }
        }
        Ok(notices)
    }

    /// What `--tools` offers of `toolbox`'s tools: every tool but the
    /// built-in ones it leaves out (MCP servers' tools stay), with notices
    /// for names no capstan tool has. `None` offers everything.
    pub fn tool_allowance(
        &self,
        toolbox: &Toolbox,
    ) -> Result<(Option<ToolAllowance>, Vec<String>), String> {
        let Some(list) = &self.tools else {
            return Ok((None, Vec::new()));
        };
        let list = list.trim();
        if list == "default" {
            return Ok((None, Vec::new()));
        }
        let mut rules = Vec::new();
        let mut notices = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match tool_list::entry(name, false) {
                Entry::Rule(rule, _) => rules.push(
                    rule.parse::<Rule>()
                        .map_err(|e| format!("--tools: `{name}`: {e}"))?,
                ),
                Entry::Ignored(why) => {
                    notices.push(format!("warning: --tools: {why}; it is not offered"));
                }
            }
        }
        let left_out: Vec<String> = toolbox
            .tools()
            .iter()
            .filter(|tool| !tool.name.starts_with("mcp__"))
            .filter(|tool| !rules.iter().any(|rule| rule.names_tool(&tool.name)))
            .map(|tool| tool.name.clone())
            .collect();
        Ok((Some(ToolAllowance::AllBut(left_out)), notices))
    }
}

/// Applies a settings.json `permissions` object.
fn apply_permissions(
    value: &Value,
    settings: &mut Settings,
    source: &str,
    notices: &mut Vec<String>,
) -> Result<(), String> {
    let object = value
        .as_object()
        .ok_or_else(|| format!("{source}: `permissions` must be an object"))?;
    for (key, value) in object {
        let kind = match key.as_str() {
            "allow" => RuleKind::Allow,
            "deny" => RuleKind::Deny,
            "ask" => RuleKind::Ask,
            "defaultMode" => {
                let mode = value
                    .as_str()
                    .ok_or_else(|| format!("{source}: `permissions.defaultMode` must be a string"))?
                    .parse::<Mode>()
                    .map_err(|e| format!("{source}: `permissions.defaultMode`: {e}"))?;
                settings.mode = Some(mode);
                continue;
            }
            other => {
                notices.push(format!(
                    "warning: {source}: `permissions.{other}` is not applied by capstan"
                ));
                continue;
            }
        };
        let list = value
            .as_array()
            .ok_or_else(|| format!("{source}: `permissions.{key}` must be a list of rules"))?;
        for item in list {
            let text = item
                .as_str()
                .ok_or_else(|| format!("{source}: `permissions.{key}` must hold strings"))?;
            match tool_list::entry(text, kind == RuleKind::Deny) {
                Entry::Rule(rule, _) => {
                    let rule = rule
                        .parse::<Rule>()
                        .map_err(|e| format!("{source}: `{text}` in permissions.{key}: {e}"))?;
                    settings.rules.push((kind, rule, Layer::CommandLine));
                }
                Entry::Ignored(why) => notices.push(format!("warning: {source}: {why}")),
            }
        }
    }
    Ok(())
}

/// Whether an instruction file at `path` comes from a source `sources`
/// reads: the workspace's files are the project's, the others the user's.
pub fn reads_instruction_file(path: &Path, workspace: &Path, sources: SettingSources) -> bool {
    if path.starts_with(workspace) {
        sources.project
    } else {
        sources.user
    }
}

/// Whether a skill from `source` comes from a source `sources` reads:
/// the project's folders are the project's, the user's folders and
/// `~/.claude` the user's; plugins' skills are not settings and stay.
pub fn reads_skill(source: &crate::skills::Source, sources: SettingSources) -> bool {
    use crate::skills::Source;
    match source {
        Source::Plugin(_) => true,
        Source::Project | Source::ClaudeProject | Source::ClaudeProjectCommands => sources.project,
        Source::User | Source::ClaudeUser | Source::ClaudeUserCommands => sources.user,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setting_sources_are_read_from_claude_codes_list() {
        let sources = SettingSources::parse("user, local").unwrap();
        assert!(sources.user && sources.local && !sources.project);
        let none = SettingSources::parse("").unwrap();
        assert!(!none.user && !none.project && !none.local);
        assert!(SettingSources::parse("user,policy").is_err());
    }

    #[test]
    fn settings_json_gives_rules_mode_and_model_and_names_the_rest() {
        let flags = SdkFlags {
            settings: Some(
                r#"{"permissions":{"allow":["Read"],"deny":["Bash(rm:*)"],"defaultMode":"acceptEdits","additionalDirectories":[]},"model":"m1","env":{"A":"1"}}"#
                    .into(),
            ),
            ..Default::default()
        };
        let mut settings = Settings::default();
        let notices = flags.apply_settings(&mut settings, Path::new("/")).unwrap();
        assert_eq!(settings.rules.len(), 2);
        assert_eq!(settings.rules[0].0, RuleKind::Allow);
        assert_eq!(settings.rules[1].0, RuleKind::Deny);
        assert_eq!(settings.mode, Some(Mode::AcceptEdits));
        assert_eq!(settings.model.name.as_deref(), Some("m1"));
        assert_eq!(notices.len(), 2, "{notices:?}");
        assert!(notices.iter().any(|n| n.contains("`env`")));
        let bad = SdkFlags {
            settings: Some(r#"{"permissions":{"allow":"Read"}}"#.into()),
            ..Default::default()
        };
        assert!(
            bad.apply_settings(&mut Settings::default(), Path::new("/"))
                .is_err()
        );
    }

    #[test]
    fn bad_budgets_schemas_and_thinking_are_refused() {
        for flags in [
            SdkFlags {
                max_budget_usd: Some(0.0),
                ..Default::default()
            },
            SdkFlags {
                json_schema: Some("{nope".into()),
                ..Default::default()
            },
            SdkFlags {
                json_schema: Some(r#"{"type":"string"}"#.into()),
                ..Default::default()
            },
            SdkFlags {
                max_thinking_tokens: Some(1000),
                ..Default::default()
            },
        ] {
            assert!(flags.check().is_err(), "{flags:?}");
        }
        let fine = SdkFlags {
            max_budget_usd: Some(0.5),
            json_schema: Some(r#"{"type":"object"}"#.into()),
            max_thinking_tokens: Some(0),
            ..Default::default()
        };
        assert_eq!(fine.check(), Ok(()));
    }
}
