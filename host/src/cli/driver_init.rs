//! The driver's `initialize` control request (the Agent SDKs send it
//! first): what capstan honours in it, and a loud error for the rest.
//!
//! Honoured, as Claude Code honours them:
//! - `hooks`: the driver's hook callbacks, each event's matchers with
//!   their `hookCallbackIds`, `timeout` and `onFailure`; capstan calls them
//!   back with `hook_callback` requests ([`crate::hooks::driver`]);
//! - `sdkMcpServers` (TypeScript), and the `{"type": "sdk"}` servers of
//!   `--mcp-config` (Python): servers in the driver, reached with
//!   `mcp_message` requests ([`crate::mcp::client::driver_link`]);
//!   `sdkMcpServerManifests`, their tool lists taken ahead, is accepted and
//!   not needed: capstan asks the servers itself;
//! - `systemPrompt` (a string or a list of strings; `[""]` when the
//!   program set none) replaces capstan's prompt as `--system-prompt`
//!   does, and `appendSystemPrompt` (a `claude_code` preset's `append`)
//!   follows capstan's own prompt or the replacement.
//!
//! `jsonSchema` is accepted when it is the schema `--json-schema` gave
//! (the TypeScript SDK sends its `outputFormat` both ways).
//!
//! Accepted as they change nothing capstan does: the driver's own
//! abilities (`supportedDialogKinds`, `perTaskStopAffordance`,
//! `offersBypassSwitchBack`, `keepsBypassHeld`), and switches that are
//! off (`false`). Any other field, or one of those switches on, makes the
//! answer an error naming it, so the SDK stops rather than run without it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::driver_questions::DriverQuestions;
use super::setup::Session;
use crate::hooks::driver::{DEFAULT_TIMEOUT, DriverCall, DriverHook};
use crate::hooks::{Hook, HookEvent};
use crate::mcp::client::config::{DEFAULT_CALL_TIMEOUT, ServerSpec, Transport, check_name};
use crate::mcp::client::driver_link::DriverChannel;
use crate::mcp::client::supervisor::{Launcher, START_TIMEOUT, ServerHandle, Status};

/// Fields about the driver itself; capstan asks for none of it.
const DRIVER_ABILITIES: [&str; 4] = [
    "supportedDialogKinds",
    "perTaskStopAffordance",
    "offersBypassSwitchBack",
    "keepsBypassHeld",
];

/// Switches capstan has not: accepted only when off.
const SWITCHES: [&str; 7] = [
    "excludeDynamicSections",
    "systemPromptSnapshot",
    "promptSuggestions",
    "agentProgressSummaries",
    "forwardSubagentText",
    "rapidFollowupPreempt",
    "forwardNestedSubagentToolCalls",
];

/// Fields capstan honours.
const HONOURED: [&str; 6] = [
    "subtype",
    "hooks",
    "sdkMcpServers",
    "sdkMcpServerManifests",
    "systemPrompt",
    "appendSystemPrompt",
];

/// What a field capstan does not honour needs instead, for the error.
fn instead(field: &str) -> &'static str {
    match field {
        "agents" => {
            "define the sub-agents as agent files (.claude/agents/NAME.md) in the workspace instead"
        }
        "mcpServers" => {
            "give the servers on the command line instead (TypeScript: mcpServersDelivery: 'argv')"
        }
        "settings" => "give the settings on the command line instead (settingsDelivery: 'argv')",
        "disallowedTools" => {
            "give the rules on the command line instead (disallowedToolsDelivery: 'argv')"
        }
        "managedSettings" => {
            "give the managed settings on the command line instead (managedSettingsDelivery: 'argv')"
        }
        "plugins" => "install the plugins with `capstan plugin install` instead",
        "jsonSchema" => "give the same schema with --json-schema (the TypeScript SDK does)",
        _ => "leave the option out",
    }
}

/// An `initialize` request, checked.
#[derive(Debug, Default, PartialEq)]
struct Request {
    hooks: Vec<HookSpec>,
    servers: Vec<String>,
    system_prompt: Option<String>,
    append: Option<String>,
}

/// One callback of the driver.
#[derive(Debug, PartialEq)]
struct HookSpec {
    event: HookEvent,
    matcher: Option<String>,
    callback_id: String,
    timeout: Duration,
    fail_open: bool,
}

/// Reads `request`, or says which of its fields capstan cannot honour.
fn read(request: &Value) -> Result<Request, String> {
    let Some(fields) = request.as_object() else {
        return Err("the initialize request is not a JSON object".into());
    };
    let mut refused = Vec::new();
    for (name, value) in fields {
        if HONOURED.contains(&name.as_str()) || DRIVER_ABILITIES.contains(&name.as_str()) {
            continue;
        }
        let off = value.is_null() || value == &Value::Bool(false);
        if SWITCHES.contains(&name.as_str()) && off {
            continue;
        }
        if value.is_null() {
            continue;
        }
        refused.push(format!("`{name}` ({})", instead(name)));
    }
    if !refused.is_empty() {
        return Err(format!(
            "capstan cannot honour {} in initialize: {}",
            if refused.len() == 1 {
                "this option"
            } else {
                "these options"
            },
            refused.join("; ")
        ));
    }
    let text = |name: &str| -> Result<Option<String>, String> {
        match fields.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(Value::Array(parts)) if name == "systemPrompt" => parts
                .iter()
                .map(|p| p.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(|parts| Some(parts.join("\n\n")))
                .ok_or_else(|| "`systemPrompt` must be a string or a list of strings".to_string()),
            Some(_) => Err(format!("`{name}` must be a string")),
        }
    };
    let mut servers = Vec::new();
    match fields.get("sdkMcpServers") {
        None | Some(Value::Null) => {}
        Some(Value::Array(names)) => {
            for name in names {
                let name = name
                    .as_str()
                    .ok_or("`sdkMcpServers` must be a list of server names")?;
                check_name(name).map_err(|e| format!("in `sdkMcpServers`: {e}"))?;
                servers.push(name.to_string());
            }
        }
        Some(_) => return Err("`sdkMcpServers` must be a list of server names".into()),
    }
    Ok(Request {
        hooks: read_hooks(fields.get("hooks").unwrap_or(&Value::Null))?,
        servers,
        system_prompt: text("systemPrompt")?,
        append: text("appendSystemPrompt")?,
    })
}

/// The matcher fields Claude Code reads besides the ones capstan honours;
/// a matcher that sets one is refused.
const MATCHER_FIELDS_REFUSED: [&str; 4] = [
    "contextOnly",
    "replacedByFrame",
    "observesOnly",
    "whenUnanswered",
];

fn read_hooks(hooks: &Value) -> Result<Vec<HookSpec>, String> {
    let events = match hooks {
        Value::Null => return Ok(Vec::new()),
        Value::Object(events) => events,
        _ => return Err("`hooks` must map event names to lists of matchers".into()),
    };
    let mut specs = Vec::new();
    for (name, matchers) in events {
        let event = HookEvent::from_name(name).ok_or_else(|| {
            format!(
                "capstan has no hook event `{name}` (in `hooks`); it calls back {}",
                HookEvent::ALL.map(HookEvent::name).join(", ")
            )
        })?;
        let matchers = matchers
            .as_array()
            .ok_or_else(|| format!("`hooks.{name}` must be a list of matchers"))?;
        for matcher in matchers {
            let field = |key: &str| matcher.get(key).filter(|v| !v.is_null());
            for key in MATCHER_FIELDS_REFUSED {
                if field(key).is_some_and(|v| v != &Value::Bool(false)) {
                    return Err(format!(
                        "capstan cannot honour `{key}` on a hook matcher (`hooks.{name}`); leave it out"
                    ));
                }
            }
            let pattern = match field("matcher") {
                None => None,
                Some(Value::String(text)) => Some(text.clone()),
                Some(_) => return Err(format!("a matcher of `hooks.{name}` must be a string")),
            };
            crate::hooks::matcher::Matcher::parse(pattern.as_deref())
                .map_err(|why| format!("the matcher of `hooks.{name}` cannot be used: {why}"))?;
            let timeout = match field("timeout") {
                None => DEFAULT_TIMEOUT,
                Some(value) => value
                    .as_f64()
                    .filter(|secs| secs.is_finite() && *secs > 0.0)
                    .map(Duration::from_secs_f64)
                    .ok_or_else(|| {
                        format!("the timeout of a `hooks.{name}` matcher must be seconds above 0")
                    })?,
            };
            // Claude Code reads any other value as "block".
            let fail_open = field("onFailure").and_then(Value::as_str) == Some("continue");
            let ids = field("hookCallbackIds")
                .and_then(Value::as_array)
                .ok_or_else(|| format!("a matcher of `hooks.{name}` has no `hookCallbackIds`"))?;
            for id in ids {
                let id = id.as_str().ok_or_else(|| {
                    format!("`hookCallbackIds` of `hooks.{name}` must be strings")
                })?;
                specs.push(HookSpec {
                    event,
                    matcher: pattern.clone(),
                    callback_id: id.to_string(),
                    timeout,
                    fail_open,
                });
            }
        }
    }
    Ok(specs)
}

/// The `{"type": "sdk"}` servers of the `--mcp-config` values, taken out
/// of them (they are the driver's; the rest are read as usual): their
/// names. A value that is a file is read relative to `cwd`; one that
/// cannot be read is left for the usual reading to report.
pub fn take_sdk_servers(
    values: &mut [String],
    cwd: &std::path::Path,
) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for value in values.iter_mut() {
        let text = if value.trim_start().starts_with('{') {
            value.clone()
        } else {
            match std::fs::read_to_string(cwd.join(&*value)) {
                Ok(text) => text,
                Err(_) => continue,
            }
        };
        let Ok(mut config) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let Some(servers) = config.get_mut("mcpServers").and_then(Value::as_object_mut) else {
            continue;
        };
        let sdk: Vec<String> = servers
            .iter()
            .filter(|(_, server)| server.get("type").and_then(Value::as_str) == Some("sdk"))
            .map(|(name, _)| name.clone())
            .collect();
        if sdk.is_empty() {
            continue;
        }
        for name in &sdk {
            check_name(name).map_err(|e| format!("--mcp-config: {e}"))?;
            servers.remove(name);
        }
        names.extend(sdk);
        *value = config.to_string();
    }
    Ok(names)
}

/// What honours a driver's `initialize`.
pub struct DriverInit {
    questions: DriverQuestions,
    flag_servers: Vec<String>,
    done: bool,
}

impl DriverInit {
    /// Callbacks and servers are reached through `questions`;
    /// `flag_servers` are the driver's servers named in `--mcp-config`.
    pub fn new(questions: DriverQuestions, flag_servers: Vec<String>) -> Self {
        Self {
            questions,
            flag_servers,
            done: false,
        }
    }

    /// Whether an `initialize` was applied.
    pub fn done(&self) -> bool {
        self.done
    }

    fn call(&self) -> DriverCall {
        let questions = self.questions.clone();
        Arc::new(move |request| {
            let questions = questions.clone();
            Box::pin(async move { questions.ask(request).await })
        })
    }

    /// Applies `request` to `session`: the driver's servers started (and
    /// waited for), its hooks added, its system prompt set. The fields to
    /// add to the answer, or why nothing was applied.
    pub async fn initialize(
        &mut self,
        session: &mut Session,
        request: &Value,
    ) -> Result<Map<String, Value>, String> {
        if self.done {
            return Err("the session is already initialized; send initialize once".into());
        }
        // The TypeScript SDK sends its `outputFormat` schema both as
        // `--json-schema` and here: the same schema is honoured already.
        let mut request = request.clone();
        if let Some(fields) = request.as_object_mut()
            && let Some(schema) = fields.get("jsonSchema").filter(|v| !v.is_null())
            && session.agent.config().output_schema.as_ref() == Some(schema)
        {
            fields.remove("jsonSchema");
        }
        let request = read(&request)?;
        let mut names = self.flag_servers.clone();
        for name in request.servers {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        let servers = self.start_servers(session, &names).await?;
        let hooks: Vec<Arc<dyn Hook>> = request
            .hooks
            .into_iter()
            .map(|spec| {
                Arc::new(DriverHook::new(
                    &spec.callback_id,
                    spec.event,
                    spec.matcher,
                    spec.timeout,
                    spec.fail_open,
                    self.call(),
                )) as Arc<dyn Hook>
            })
            .collect();
        if let Err(e) = session.agent.add_hooks(hooks) {
            crate::mcp::client::stop_servers(&servers).await;
            return Err(e.to_string());
        }
        session.driver_mcp.add(servers);
        if request.system_prompt.is_some() || request.append.is_some() {
            let prompt = session
                .system_prompts
                .with(request.system_prompt.as_deref(), request.append.as_deref());
            session.agent.set_system_prompt(prompt);
        }
        self.done = true;
        let mut extra = Map::new();
        extra.insert("hooks_applied".into(), json!(true));
        extra.insert("hook_on_failure_supported".into(), json!(true));
        Ok(extra)
    }

    /// Starts the driver's servers `names` and waits until each is ready;
    /// if one is not, all are stopped and the error says why.
    async fn start_servers(
        &self,
        session: &Session,
        names: &[String],
    ) -> Result<Vec<Arc<ServerHandle>>, String> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let channel = DriverChannel(self.call());
        let launcher = Launcher {
            exec: Err("a server of the driver runs no command".into()),
            secrets: Default::default(),
            audit: session.driver_mcp.audit(),
            workspace: session.workspace.clone(),
        };
        let mut servers = Vec::new();
        for name in names {
            let spec = ServerSpec {
                name: name.clone(),
                source: "the driving program (sdk)".into(),
                transport: Transport::Driver {
                    channel: channel.clone(),
                },
                read: Vec::new(),
                write: Vec::new(),
                write_workspace: false,
                net: Vec::new(),
                timeout: DEFAULT_CALL_TIMEOUT,
                locked_files: None,
            };
            let handle = ServerHandle::new(spec, Status::Starting(1));
            tokio::spawn(handle.clone().supervise(launcher.clone()));
            servers.push(handle);
        }
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let states: Vec<Status> = servers.iter().map(|s| s.view().status).collect();
            if states.iter().all(|s| *s == Status::Ready) {
                return Ok(servers);
            }
            let failed = servers
                .iter()
                .zip(&states)
                .find(|(_, s)| matches!(s, Status::Restarting { .. } | Status::Refused(_)));
            let timed_out = Instant::now() >= deadline;
            if failed.is_some() || timed_out {
                let why = match failed {
                    Some((server, status)) => {
                        format!(
                            "the driver's MCP server {} did not start: {status}",
                            server.spec.name
                        )
                    }
                    None => format!(
                        "the driver's MCP servers did not answer within {}",
                        crate::quantity::TimeSpan(START_TIMEOUT)
                    ),
                };
                crate::mcp::client::stop_servers(&servers).await;
                return Err(why);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_sdks_send_by_default_is_read() {
        let ts = json!({
            "subtype": "initialize",
            "hooks": {"PreToolUse": [{"matcher": "Read", "hookCallbackIds": ["hook_0", "hook_1"], "timeout": 5}]},
            "sdkMcpServers": ["calc"],
            "sdkMcpServerManifests": {"calc": {}},
            "systemPrompt": [""],
        });
        let request = read(&ts).unwrap();
        assert_eq!(request.hooks.len(), 2);
        assert_eq!(request.hooks[1].callback_id, "hook_1");
        assert_eq!(request.hooks[0].timeout, Duration::from_secs(5));
        assert!(!request.hooks[0].fail_open);
        assert_eq!(request.servers, ["calc"]);
        assert_eq!(request.system_prompt.as_deref(), Some(""));
        let python = json!({
            "subtype": "initialize",
            "hooks": {"Stop": [{"matcher": null, "hookCallbackIds": ["hook_0"], "onFailure": "continue"}]},
        });
        let request = read(&python).unwrap();
        assert_eq!(request.hooks[0].timeout, DEFAULT_TIMEOUT);
        assert!(request.hooks[0].fail_open);
        let preset = json!({"subtype": "initialize", "hooks": null, "appendSystemPrompt": "A", "excludeDynamicSections": false, "supportedDialogKinds": ["x"]});
        let request = read(&preset).unwrap();
        assert_eq!(request.append.as_deref(), Some("A"));
        assert_eq!(request.system_prompt, None);
    }

    #[test]
    fn what_capstan_cannot_honour_is_named() {
        for (request, needle) in [
            (json!({"agents": {"a": {}}}), "`agents`"),
            (json!({"jsonSchema": {"type": "object"}}), "`jsonSchema`"),
            (
                json!({"excludeDynamicSections": true}),
                "`excludeDynamicSections`",
            ),
            (json!({"mcpServers": {}}), "mcpServersDelivery"),
            (json!({"frobnicate": 1}), "`frobnicate`"),
            (json!({"hooks": {"TeammateIdle": []}}), "`TeammateIdle`"),
            (
                json!({"hooks": {"PreToolUse": [{"hookCallbackIds": ["h"], "observesOnly": true}]}}),
                "observesOnly",
            ),
            (
                json!({"hooks": {"PreToolUse": [{"matcher": "(", "hookCallbackIds": ["h"]}]}}),
                "cannot be used",
            ),
            (json!({"systemPrompt": 3}), "systemPrompt"),
            (
                json!({"sdkMcpServers": ["a__b"]}),
                "not a valid server name",
            ),
        ] {
            let error = read(&request).unwrap_err();
            assert!(error.contains(needle), "{request}: {error}");
        }
    }

    #[test]
    fn sdk_servers_are_taken_out_of_mcp_config() {
        let dir = tempfile::tempdir().unwrap();
        let mut values = vec![
            r#"{"mcpServers": {"calc": {"type": "sdk", "name": "calc"}, "other": {"command": "x"}}}"#
                .to_string(),
            "missing.json".to_string(),
        ];
        let names = take_sdk_servers(&mut values, dir.path()).unwrap();
        assert_eq!(names, ["calc"]);
        let rest: Value = serde_json::from_str(&values[0]).unwrap();
        assert_eq!(rest, json!({"mcpServers": {"other": {"command": "x"}}}));
        assert_eq!(values[1], "missing.json");
    }
}
