//! Putting a session together from the flags: the workspace, the settings,
//! the model, the tools, the permission policy, the system prompt and the
//! transcript (new, or the one being resumed).

use std::path::PathBuf;

use clap::Args;

use super::Exit;
pub use super::claude_flags::RuleList;
use super::exit::Failure;
use super::provider::{self, ModelFlags};
use crate::agent::context::{self, Instructions, PromptInputs};
use crate::agent::output_styles::{OutputStyle, OutputStyles};
use crate::agent::{Agent, AgentConfig, Toolbox};
use crate::config::{self, Settings};
use crate::home::Home;
use crate::plugin::Catalog;
use crate::policy::{Layer, Mode, Policy, Rule, RuleKind};
use crate::sandbox::{Limits, Sandbox};
use crate::session::Sessions;
use crate::skills::{self, Skills};

/// The flags of an agent session.
#[derive(Debug, Clone, Args)]
pub struct SessionArgs {
    /// What to ask. With -p it is the whole task (read from stdin when
    /// omitted); otherwise the interactive session starts with it.
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,

    /// Run one task without asking anything and exit (print mode).
    #[arg(short = 'p', long = "print")]
    pub print: bool,

    /// How print mode reports: the answer's text, one JSON result, or JSON
    /// events as they happen.
    #[arg(long, value_enum, default_value = "text", value_name = "FORMAT")]
    pub output_format: OutputFormat,

    /// Which model, where.
    #[command(flatten)]
    pub model: ModelFlags,

    /// The permission mode: default (ask before anything that writes or
    /// reaches the network), accept-edits, plan (nothing that writes runs),
    /// bypass, dont-ask (Claude Code's dontAsk: what would ask is denied).
    #[arg(long, value_name = "MODE")]
    pub permission_mode: Option<Mode>,

    /// Claude Code's name for --permission-mode bypass: no permission
    /// questions (plugins' grants and the OS sandbox still hold).
    #[arg(long, conflicts_with = "permission_mode")]
    pub dangerously_skip_permissions: bool,

    /// Allow a tool without asking, e.g. fs.write, 'fs.edit(src/**)' or
    /// Claude Code's 'Edit(src/**)' (repeatable).
    #[arg(long = "allow", value_name = "RULE")]
    pub allow: Vec<Rule>,

    /// Ask before a tool runs, even where the mode would not, e.g.
    /// 'web.fetch' or 'Write(docs/**)' (repeatable).
    #[arg(long = "ask", value_name = "RULE")]
    pub ask: Vec<Rule>,

    /// Never run a tool, e.g. 'fs.write(.env)' or 'Read(.env)' (repeatable).
    #[arg(long = "deny", value_name = "RULE")]
    pub deny: Vec<Rule>,

    /// Allow rules as Claude Code takes them: comma- or space-separated
    /// lists, as one argument or several, e.g. "Read Edit(src/**)" or
    /// Read 'Bash(git log:*)' (same as --allow for each). As in Claude
    /// Code, it takes every argument up to the next flag: put the prompt
    /// before it, or end the list with --.
    #[arg(
        long = "allowedTools",
        visible_alias = "allowed-tools",
        value_name = "RULES",
        num_args = 1..
    )]
    pub allowed_tools: Vec<RuleList>,

    /// Deny rules as Claude Code takes them: comma- or space-separated
    /// lists, as one argument or several (same as --deny for each); like
    /// --allowedTools, it takes every argument up to the next flag.
    #[arg(
        long = "disallowedTools",
        visible_alias = "disallowed-tools",
        value_name = "RULES",
        num_args = 1..
    )]
    pub disallowed_tools: Vec<RuleList>,

    /// The most model requests one prompt may take; a prompt that needs
    /// more ends with `error_max_turns`.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub max_turns: u32,

    /// When the model is still overloaded (HTTP 529, overloaded_error)
    /// after the retries, switch to this model for the rest of the
    /// session.
    #[arg(long, value_name = "MODEL")]
    pub fallback_model: Option<String>,

    /// Replace capstan's system prompt with this text.
    #[arg(long, value_name = "TEXT", conflicts_with = "system_prompt_file")]
    pub system_prompt: Option<String>,

    /// Replace capstan's system prompt with this file's text.
    #[arg(long, value_name = "FILE")]
    pub system_prompt_file: Option<PathBuf>,

    /// Add this text at the end of the system prompt.
    #[arg(long, value_name = "TEXT")]
    pub append_system_prompt: Option<String>,

    /// Answer in this output style: the name of an output-styles/NAME.md
    /// of the project's .claude, your ~/.claude or a plugin ("default" for
    /// none); overrides `output_style` in the config.
    #[arg(long, value_name = "NAME")]
    pub output_style: Option<String>,

    /// In print mode, where a call would need the user's permission, call
    /// this tool instead (any tool of the session, e.g. PLUGIN.TOOL or an
    /// MCP server's mcp__server__tool) with {tool_name, input, tool_use_id};
    /// it answers {"behavior":"allow","updatedInput":{...}} or
    /// {"behavior":"deny","message":"..."}.
    #[arg(long, value_name = "TOOL")]
    pub permission_prompt_tool: Option<String>,

    /// With --output-format stream-json, also Claude Code's `stream_event`
    /// messages: the model's answer as it streams, in the Messages API's
    /// events.
    #[arg(long)]
    pub include_partial_messages: bool,

    /// With --output-format stream-json, also capstan's own events between
    /// Claude Code's messages: text_delta, permission, tool_started,
    /// tool_result, tool_output, tool_log, tool_progress, retry, notice,
    /// compact, input_error (Claude Code's SDKs do not know them).
    #[arg(long)]
    pub capstan_events: bool,

    /// How print mode reads its prompt: all of stdin as text, or
    /// Claude Code's stream-json, one user message per line (needs
    /// --output-format stream-json).
    #[arg(long, value_enum, default_value = "text", value_name = "FORMAT")]
    pub input_format: InputFormat,

    /// With --input-format and --output-format stream-json, echo each user
    /// message read on stdin back on stdout (marked `isReplay`), as Claude
    /// Code does, so a driver sees when a message was taken.
    #[arg(long)]
    pub replay_user_messages: bool,

    /// Trust the hooks of this folder's .claude/settings.json and
    /// .claude/settings.local.json as they are now (remembered until they
    /// change); without it they run only once trusted at an interactive
    /// question.
    #[arg(long)]
    pub trust_project_hooks: bool,

    /// Resume the most recent session in this folder.
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    pub continue_session: bool,

    /// Resume the session with this id (or a unique prefix of it); without
    /// an id, pick one from a list of this folder's sessions.
    #[arg(short = 'r', long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
    pub resume: Option<String>,

    /// Give the new session this id (a UUID not used by another session).
    #[arg(long, value_name = "UUID", conflicts_with_all = ["continue_session", "resume"])]
    pub session_id: Option<String>,

    /// The folder the tools may see [default: the current folder].
    #[arg(long, short = 'w', value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// Also load this component file, as PATH or NAME=PATH (repeatable).
    #[arg(long = "plugin", value_name = "[NAME=]PATH")]
    pub plugins: Vec<String>,

    /// Add MCP servers for this run from a JSON file or JSON text in
    /// Claude Code's {"mcpServers": {...}} shape (repeatable); they count
    /// as approved, since you typed them.
    #[arg(long = "mcp-config", value_name = "FILE_OR_JSON", num_args = 1..)]
    pub mcp_config: Vec<String>,

    /// Use only the MCP servers of --mcp-config, none from settings files
    /// or plugins.
    #[arg(long)]
    pub strict_mcp_config: bool,

    /// The flags the Agent SDKs pass (`--tools`, `--setting-sources`, ...).
    #[command(flatten)]
    pub sdk: super::sdk_flags::SdkFlags,
}

/// How print mode reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// The answer's text on stdout; tool lines on stderr.
    Text,
    /// One JSON object with the result, at the end.
    Json,
    /// One JSON object per line, per event, as they happen.
    StreamJson,
}

/// How print mode reads its prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// The argument, or all of stdin, as one prompt.
    Text,
    /// One JSON user message per line on stdin, each a prompt.
    StreamJson,
}

/// A session ready to run.
pub struct Session {
    /// The agent.
    pub agent: Agent,
    /// The model, as shown to the user.
    pub model_label: String,
    /// Whether the model is an offline replay rather than a real model
    /// (print mode then names it even without `-v`).
    pub offline_model: bool,
    /// The workspace, canonical.
    pub workspace: PathBuf,
    /// The folders and files this process uses.
    pub home: Home,
    /// What the user should know before starting (settings narrowed,
    /// transcript repaired, ...).
    pub notices: Vec<String>,
    /// Whether an earlier session was taken up.
    pub resumed: bool,
    /// The settings files that were read.
    pub settings_files: Vec<String>,
    /// The instruction files in the system prompt.
    pub instruction_files: Vec<PathBuf>,
    /// Milliseconds from the process's start until the session was ready.
    pub setup_ms: f64,
    /// Where what calls report as they run goes (a command's output,
    /// plugins' log lines and progress): the front end sets it.
    pub call_events: super::live::EventRoute,
    /// The skills listing at the end of the system prompt.
    pub skills_prompt: String,
    /// The model's context window given in the settings, if one is.
    pub context_window_setting: Option<u64>,
    /// capstan's own system prompt and what a replaced one keeps, for a
    /// driver's `initialize` that replaces it.
    pub system_prompts: crate::agent::context::SystemPrompts,
    /// The servers of the program driving the session, added by its
    /// `initialize` request.
    pub driver_mcp: std::sync::Arc<crate::mcp::client::driver_link::DriverServers>,
    /// The session's MCP servers, starting or running in the background.
    pub mcp: std::sync::Arc<crate::mcp::client::McpClients>,
    /// The output styles there are (`/output-style`).
    pub output_styles: OutputStyles,
    /// The environment variable the model's API key came from, if any.
    pub api_key_source: Option<String>,
    /// The names of the custom sub-agents the Task tool may start.
    pub agent_names: Vec<String>,
    /// The installed Claude Code plugins: name and folder.
    pub claude_plugins: Vec<(String, PathBuf)>,
}

/// Builds the session for `args`.
pub async fn build(args: &SessionArgs) -> Result<Session, Failure> {
    let mut clock = std::time::Instant::now();
    let lap = crate::startup::lap;
    let workspace = match &args.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(|e| {
            Failure::new(
                Exit::Error,
                format!("cannot tell the current folder ({e}); pass --workspace DIR"),
            )
        })?,
    };
    let workspace = std::fs::canonicalize(&workspace).map_err(|e| {
        Failure::new(
            Exit::Error,
            format!(
                "cannot use {} as the workspace: {e}; pass an existing folder with --workspace",
                workspace.display()
            ),
        )
    })?;
    let home = Home::from_env().map_err(|e| Failure::new(Exit::Error, e))?;
    args.sdk
        .check()
        .map_err(|message| Failure::new(Exit::Usage, message))?;
    let sources = args
        .sdk
        .sources()
        .map_err(|message| Failure::new(Exit::Usage, message))?;
    let mut settings =
        config::load_from(&home, &workspace, sources).map_err(|e| Failure::new(Exit::Usage, e))?;
    let mut notices = std::mem::take(&mut settings.warnings);
    notices.extend(
        args.sdk
            .apply_settings(
                &mut settings,
                &std::env::current_dir().unwrap_or_else(|_| workspace.clone()),
            )
            .map_err(|message| Failure::new(Exit::Usage, message))?,
    );
    lap("config", &mut clock);

    let choice = provider::choose(&args.model, &settings.model)
        .map_err(|message| Failure::new(Exit::Usage, message))?;
    lap("model provider", &mut clock);
    let offline_model = choice.model == "scripted";
    let api_key_source = choice.key_source.clone();

    let sandbox = Sandbox::new(&home).map_err(|e| Failure::new(Exit::Error, e))?;
    lap("sandbox set-up", &mut clock);
    let mut catalog = Catalog::builtin();
    catalog
        .add_installed(&home)
        .map_err(|e| Failure::new(Exit::Error, e))?;
    for spec in &args.plugins {
        catalog
            .add_file(spec)
            .map_err(|e| Failure::new(Exit::Usage, e))?;
    }
    lap("plugin catalog", &mut clock);
    let mut toolbox = Toolbox::load(sandbox, &catalog, &workspace, Limits::default())
        .await
        .map_err(|e| Failure::new(Exit::Error, e))?;
    lap("plugins' tools", &mut clock);
    // Calls of plugins with no audit log of their own (built-in plugins,
    // `--plugin` files) and their hooks are recorded in the home's.
    let session_audit = crate::audit::AuditLog::open(&home.audit_log());
    match &session_audit {
        Ok(log) => toolbox.set_audit(log.clone()),
        Err(error) => notices.push(format!(
            "warning: calls of built-in plugins and plugin files are not audited in this session: {error}"
        )),
    }
    lap("audit log", &mut clock);
    let mut found_skills =
        Skills::discover(toolbox.sandbox(), &home, &workspace, Limits::default()).await;
    found_skills.retain(|skill| super::sdk_flags::reads_skill(&skill.source, sources));
    let extension_grants = extension_grants(&settings, &workspace, &home);
    if let Ok(grants) = &extension_grants {
        found_skills.set_commands(grants.clone());
    }
    let secret_values = crate::grants::SecretValues::load(&home.config_file()).unwrap_or_default();
    found_skills.set_command_secrets(crate::plugin::command_hooks::granted_secrets(
        &home,
        &secret_values,
    ));
    notices.extend(found_skills.set().warnings());
    let context_window = settings
        .model
        .context_window
        .filter(|window| *window > 0)
        .unwrap_or_else(|| crate::agent::compact::context_window_for(&choice.model));
    let skill_listing = skills::prompt::listing(
        found_skills.set(),
        skills::prompt::budget_chars(usize::try_from(context_window).unwrap_or(usize::MAX)),
        skills::session::TOOL_NAME,
    );
    if !skill_listing.left_out.is_empty() {
        notices.push(format!(
            "{} skills were left out of the model's list to keep the prompt within its budget ({}); they can still be run as /name",
            skill_listing.left_out.len(),
            skill_listing.left_out.join(", ")
        ));
    }
    toolbox.set_skills(found_skills);
    lap("skills", &mut clock);
    let custom_agents = crate::agent::custom_agents::CustomAgents::discover(
        &home,
        &workspace,
        skills::discover::claude_home().as_deref(),
    );
    notices.extend(custom_agents.warnings.iter().cloned());
    let agent_names: Vec<String> = custom_agents
        .agents
        .iter()
        .map(|agent| agent.file.name.clone())
        .collect();
    let output_styles = OutputStyles::discover(
        &home,
        &workspace,
        skills::discover::claude_home().as_deref(),
    );
    notices.extend(output_styles.warnings.iter().cloned());
    let (output_style, style_notice) =
        choose_output_style(args, &settings, &output_styles, &workspace)
            .map_err(|message| Failure::new(Exit::Usage, message))?;
    notices.extend(style_notice);
    let output_style = output_style.cloned();
    toolbox
        .register(std::sync::Arc::new(crate::agent::subagent::TaskTool::new(
            custom_agents,
        )))
        .map_err(|e| Failure::new(Exit::Error, e))?;
    lap("agents and output styles", &mut clock);
    let call_events = super::live::EventRoute::new();
    toolbox.set_events(call_events.sink());
    let exec_tools = crate::agent::exec_tool::for_session(&settings, &workspace, &home);
    notices.extend(exec_tools.warning);
    for handler in exec_tools.handlers {
        toolbox
            .register(handler)
            .map_err(|e| Failure::new(Exit::Error, e))?;
    }

    lap("exec tools", &mut clock);
    let command_line_servers = crate::mcp::client::command_line::CommandLineServers::read(
        &args.mcp_config,
        args.strict_mcp_config,
        &std::env::current_dir().unwrap_or_else(|_| workspace.clone()),
    )
    .map_err(|e| Failure::new(Exit::Usage, e))?;
    let mcp = std::sync::Arc::new(start_mcp_servers(
        &settings,
        &workspace,
        &home,
        &command_line_servers,
    ));
    notices.extend(mcp.notices.iter().cloned());
    let mcp_audit = session_audit.as_ref().ok().cloned();
    let driver_mcp = std::sync::Arc::new(crate::mcp::client::driver_link::DriverServers::new(
        mcp_audit.clone(),
    ));
    toolbox.add_source(std::sync::Arc::new(mcp.tool_source(mcp_audit)));
    toolbox.add_source(driver_mcp.clone());
    lap("MCP servers", &mut clock);

    let policy = build_policy(&settings, args);
    notices.extend(start_language_servers(
        &mut toolbox,
        &home,
        &workspace,
        &extension_grants,
        &settings.lsp,
        &policy,
    ));

    lap("policy and language servers", &mut clock);
    let offered: Vec<&str> = toolbox.tools().iter().map(|t| t.name.as_str()).collect();
    // MCP servers' tools appear once each server is ready: rules naming
    // them are not reported as matching nothing.
    let servers: Vec<String> = mcp.servers().iter().map(|s| s.spec.name.clone()).collect();
    notices.extend(
        policy
            .unmatched_rule_warnings(&offered)
            .into_iter()
            .filter(|warning| {
                !servers.iter().any(|name| {
                    warning.contains(&format!("`mcp__{name}__"))
                        || warning.contains(&format!("`mcp__{name}`"))
                })
            }),
    );

    let mut instructions = context::discover_instructions(Some(home.config_dir()), &workspace);
    instructions
        .files
        .retain(|file| super::sdk_flags::reads_instruction_file(&file.path, &workspace, sources));
    notices.extend(instructions.warnings.iter().cloned());
    let system_prompts = {
        let mut own = system_prompt(&toolbox, &workspace, &policy, &instructions, &choice.model);
        own.push_str(&skill_listing.text);
        let mut context = session_context(&workspace, &policy, &instructions, &choice.model);
        context.push_str(&skill_listing.text);
        context::SystemPrompts { own, context }
    };
    // A replaced prompt keeps the environment and the project's
    // instructions, which Claude Code gives the model then too.
    let replacement = super::claude_flags::system_prompt_override(args)
        .map_err(|message| Failure::new(Exit::Usage, message))?;
    let system = system_prompts.with(replacement.as_deref(), args.append_system_prompt.as_deref());

    lap("instructions and system prompt", &mut clock);
    let mut config = AgentConfig::new(choice.model.clone(), system);
    config.max_tokens = choice.max_tokens;
    if args.fallback_model.as_deref() == Some(choice.model.as_str()) {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "--fallback-model {} is the main model; name another model to switch to when it is overloaded",
                choice.model
            ),
        ));
    }
    config.fallback_model = args.fallback_model.clone();
    config.max_turns = args.max_turns.max(1);
    config.permission_prompt_tool = args.permission_prompt_tool.clone();
    args.sdk
        .apply(&mut config)
        .map_err(|message| Failure::new(Exit::Usage, message))?;
    let (tool_allowance, tool_notices) = args
        .sdk
        .tool_allowance(&toolbox)
        .map_err(|message| Failure::new(Exit::Usage, message))?;
    notices.extend(tool_notices);
    if let Some(window) = settings.model.context_window {
        config.context_window = window;
    }
    let provider_name = choice.provider.name().to_string();
    let mut agent = Agent::new(
        choice.provider,
        toolbox,
        policy,
        config,
        workspace.clone(),
        Some(home.clone()),
    );
    agent.set_output_style(output_style);
    if let Some(allowance) = tool_allowance {
        agent.limit_tools(allowance);
    }

    let sessions =
        Sessions::for_workspace(&home, &workspace).map_err(|e| Failure::new(Exit::Error, e))?;
    // A rewind killed half-way is completed before any session reads the
    // workspace or a transcript it was cutting.
    notices.extend(crate::session::checkpoint::recover_all(
        sessions.dir(),
        sessions.workspace(),
    ));
    let resume_id = if args.continue_session {
        Some(
            sessions
                .most_recent()
                .map_err(|e| Failure::new(Exit::Usage, e))?
                .id,
        )
    } else if args
        .resume
        .as_deref()
        .is_some_and(|id| id.trim().is_empty())
    {
        return Err(Failure::new(Exit::Usage, resume_needs_an_id(&sessions)));
    } else if let Some(prefix) = &args.resume {
        Some(
            sessions
                .find(prefix)
                .map_err(|e| Failure::new(Exit::Usage, e))?,
        )
    } else {
        None
    };
    let resumed = resume_id.is_some();
    match resume_id {
        Some(id) => {
            let (transcript, loaded) = sessions
                .resume(&id, &choice.model, &provider_name)
                .map_err(|e| Failure::new(Exit::Error, e))?;
            for warning in &loaded.warnings {
                notices.push(format!("session {id}: {warning}"));
            }
            let recorded_model = loaded.model.clone().filter(|model| {
                args.model.model.is_none()
                    && loaded.provider.as_deref() == Some(provider_name.as_str())
                    && *model != choice.model
            });
            agent.restore(loaded.messages, loaded.usage);
            agent.set_transcript(transcript);
            // A model switched to with /model stays the session's.
            if let Some(model) = recorded_model {
                agent
                    .set_model(&model, settings.model.context_window)
                    .map_err(|e| Failure::new(Exit::Error, e.to_string()))?;
            }
        }
        None => {
            let transcript = match &args.session_id {
                Some(id) => sessions
                    .create_with_id(id, &choice.model, &provider_name)
                    .map_err(|e| {
                        let exit = match e {
                            crate::session::SessionError::Io { .. } => Exit::Error,
                            _ => Exit::Usage,
                        };
                        Failure::new(exit, e)
                    })?,
                None => sessions
                    .create(&choice.model, &provider_name)
                    .map_err(|e| Failure::new(Exit::Error, e))?,
            };
            agent.set_transcript(transcript);
        }
    }
    if let Some(id) = agent.session_id() {
        crate::logging::name_session(id);
    }
    lap("transcript", &mut clock);
    tracing::info!(
        session = agent.session_id().unwrap_or_default(),
        resumed,
        provider = provider_name.as_str(),
        model = choice.model.as_str(),
        workspace = %workspace.display(),
        "session ready"
    );

    // Hooks report (log lines, progress) where the session's tools do, and
    // their capability decisions are audited as the tools' are.
    let hook_events = call_events.sink();
    let hooks = crate::plugin::load_hooks(
        agent.toolbox().sandbox(),
        &catalog,
        &workspace,
        agent.session_id(),
        Some(hook_events),
        agent.toolbox().audit(),
    )
    .await
    .map_err(|e| Failure::new(Exit::Error, e))?;
    super::missing_guards::start_without(
        &crate::plugin::missing_guards(&catalog),
        args,
        &mut notices,
    )?;
    let mut hooks = hooks;
    let hook_context = crate::plugin::command_hooks::HookContext {
        grants: &extension_grants,
        model: if offline_model {
            Err("the session has no model provider".to_string())
        } else {
            Ok(crate::hooks::prompt::HookModel {
                provider: agent.shared_provider(),
                model: choice.model.clone(),
            })
        },
        secrets: secret_values,
        session_id: agent.session_id(),
    };
    let found = crate::plugin::command_hooks::load(
        &home,
        &workspace,
        skills::discover::claude_home().as_deref(),
        &hook_context,
    );
    notices.extend(found.notices);
    hooks.extend(found.hooks);
    if let Some(project) = found.project.filter(|_| sources.project)
        && super::hook_trust::trusted(&project, &workspace, &home, args, &mut notices)
    {
        notices.extend(project.descriptions);
        hooks.extend(project.hooks);
    }
    let hooks = crate::hooks::HookSet::new(hooks).map_err(|e| Failure::new(Exit::Error, e))?;
    let hook_audit = if hooks.is_empty() {
        None
    } else {
        Some(
            crate::audit::AuditLog::open(&home.audit_log())
                .map_err(|e| Failure::new(Exit::Error, e))?,
        )
    };
    agent.set_hooks(hooks, hook_audit);
    lap("hooks", &mut clock);
    for unavailable in catalog.unavailable().all() {
        notices.push(format!(
            "warning: {unavailable}; its tools and hooks are left out of this session"
        ));
    }

    let claude_plugins = installed_claude_plugins(&home);
    Ok(Session {
        agent,
        model_label: choice.label,
        offline_model,
        workspace,
        home,
        notices,
        resumed,
        settings_files: settings
            .files
            .iter()
            .map(|(layer, path)| format!("{layer}: {}", path.display()))
            .collect(),
        instruction_files: instructions.files.iter().map(|f| f.path.clone()).collect(),
        setup_ms: super::since_start().as_secs_f64() * 1e3,
        call_events,
        skills_prompt: skill_listing.text,
        context_window_setting: settings.model.context_window,
        system_prompts,
        driver_mcp,
        mcp,
        output_styles,
        claude_plugins,
        api_key_source,
        agent_names,
    })
}

/// The installed plugins imported from Claude Code, by name, with their
/// folders (none when the lockfile cannot be read: the plugin catalog
/// reports that).
fn installed_claude_plugins(home: &Home) -> Vec<(String, PathBuf)> {
    let store = crate::plugin::store::PluginStore::new(home.plugins_dir());
    let Ok(lock) = crate::plugin::lock::Lockfile::load(&store.lock_path()) else {
        return Vec::new();
    };
    lock.plugins
        .iter()
        .filter(|(_, entry)| {
            entry
                .files
                .contains_key(crate::plugin::claude_import::IMPORT_NOTES)
        })
        .map(|(name, entry)| (name.clone(), entry.dir(store.root())))
        .collect()
}

/// The output style the session starts with: `--output-style`, else
/// `output_style` in the config, else `outputStyle` in Claude Code's
/// settings. An unknown name on the command line is an error naming the
/// styles there are; one in a settings file is a warning (returned beside
/// no style), so a stale setting does not stop every session.
fn choose_output_style<'a>(
    args: &SessionArgs,
    settings: &config::Settings,
    styles: &'a OutputStyles,
    workspace: &std::path::Path,
) -> Result<(Option<&'a OutputStyle>, Option<String>), String> {
    if let Some(name) = &args.output_style {
        return styles
            .pick(name)
            .map(|style| (style, None))
            .map_err(|why| format!("--output-style: {why}"));
    }
    let (name, from) = match &settings.output_style {
        Some(name) => (name.clone(), "`output_style` in the config".to_string()),
        None => match crate::agent::output_styles::claude_settings_choice(
            workspace,
            skills::discover::claude_home().as_deref(),
        ) {
            Some((name, file)) => (name, format!("`outputStyle` in {}", file.display())),
            None => return Ok((None, None)),
        },
    };
    Ok(match styles.pick(&name) {
        Ok(style) => (style, None),
        Err(why) => (
            None,
            Some(format!(
                "warning: {from}: {why}; the session uses the default style"
            )),
        ),
    })
}

/// Why `--resume` without an id cannot pick here (nobody to ask), with the
/// ids to choose from.
fn resume_needs_an_id(sessions: &Sessions) -> String {
    const SHOWN: usize = 10;
    let listing = match sessions.list() {
        Ok(listing) => listing,
        Err(e) => return format!("--resume needs a session id here: {e}"),
    };
    if listing.sessions.is_empty() {
        return format!(
            "--resume needs a session id, and {} has no saved sessions",
            sessions.workspace().display()
        );
    }
    let mut text = String::from(
        "--resume without an id picks a session in an interactive terminal; here, give the id (or a prefix of it). Recent sessions:",
    );
    for session in listing
        .sessions
        .iter()
        .filter(|s| s.message_count > 0)
        .take(SHOWN)
    {
        text.push_str(&format!(
            "\n  {}  {:>4} msgs  {}",
            session.id,
            session.message_count,
            crate::escape::line(session.first_prompt.as_deref().unwrap_or("(no prompt)"))
        ));
    }
    text
}

/// Starts the MCP servers allowed for `workspace` in the background: local
/// ones get the `[exec]` sandbox's base, remote ones the user's secrets.
fn start_mcp_servers(
    settings: &Settings,
    workspace: &std::path::Path,
    home: &Home,
    command_line: &crate::mcp::client::command_line::CommandLineServers,
) -> crate::mcp::client::McpClients {
    let user_home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let exec = crate::exec::ExecGrants::resolve(
        &settings.exec,
        workspace,
        user_home.as_deref(),
        &crate::grants::OwnFolders::of(home),
    )
    .map_err(|e| e.to_string());
    let secrets = crate::grants::SecretValues::load(&home.config_file()).unwrap_or_default();
    let launcher = crate::mcp::client::supervisor::Launcher {
        exec,
        secrets,
        audit: crate::audit::AuditLog::open(&home.audit_log()).ok(),
        workspace: workspace.to_path_buf(),
    };
    crate::mcp::client::McpClients::start_with(home, launcher, command_line)
}

/// Registers the `lsp` tool over the language servers of installed
/// plugins (none is started before a file it serves is used), and the
/// notices the user should see: definitions left out, programs missing.
fn start_language_servers(
    toolbox: &mut Toolbox,
    home: &Home,
    workspace: &std::path::Path,
    grants: &Result<crate::exec::ExecGrants, String>,
    settings: &crate::config::LspSettings,
    policy: &Policy,
) -> Vec<String> {
    let (specs, mut notices) = crate::plugin::claude_lsp::installed(home);
    if specs.is_empty() {
        return notices;
    }
    for spec in &specs {
        if let Some(missing) = spec.missing_program() {
            notices.push(format!("LSP server {}: {missing}", spec.name));
        }
    }
    let mut servers = crate::lsp::LspServers::new(specs, workspace, grants.clone());
    if let Some(wait) = settings.diagnostics_wait {
        servers = servers.with_diagnostics_wait(wait.0);
    }
    // No server runs over files the session's rules deny reading: its text
    // could quote them (see `crate::lsp::servers`).
    if policy.denies_any_reading() {
        let policy = policy.clone();
        let workspace = workspace.to_path_buf();
        let real = workspace
            .canonicalize()
            .unwrap_or_else(|_| workspace.clone());
        servers = servers.with_read_denials(std::sync::Arc::new(move |file: &std::path::Path| {
            policy.denies_reading(file, &workspace) || policy.denies_reading(file, &real)
        }));
    }
    let servers = std::sync::Arc::new(servers);
    let tool = crate::agent::lsp_tool::LspTool::new(servers.clone());
    if let Err(e) = toolbox.register(std::sync::Arc::new(tool)) {
        notices.push(format!("warning: the lsp tool is not available: {e}"));
        return notices;
    }
    toolbox.set_file_watch(std::sync::Arc::new(
        crate::agent::lsp_tool::LspFileWatch::new(servers),
    ));
    notices
}

/// The policy from the settings plus the command line's mode and rules.
fn build_policy(settings: &Settings, args: &SessionArgs) -> Policy {
    let mut settings = settings.clone();
    let listed = |lists: &[RuleList]| -> Vec<Rule> {
        lists
            .iter()
            .flat_map(|list| list.0.iter().cloned())
            .collect()
    };
    for rule in args
        .allow
        .iter()
        .cloned()
        .chain(listed(&args.allowed_tools))
    {
        settings
            .rules
            .push((RuleKind::Allow, rule, Layer::CommandLine));
    }
    for rule in &args.ask {
        settings
            .rules
            .push((RuleKind::Ask, rule.clone(), Layer::CommandLine));
    }
    for rule in args
        .deny
        .iter()
        .cloned()
        .chain(listed(&args.disallowed_tools))
    {
        settings
            .rules
            .push((RuleKind::Deny, rule, Layer::CommandLine));
    }
    settings.policy(
        args.permission_mode
            .or(args.dangerously_skip_permissions.then_some(Mode::Bypass)),
    )
}

/// What a replaced system prompt keeps ([`context::session_context`]).
fn session_context(
    workspace: &std::path::Path,
    policy: &Policy,
    instructions: &Instructions,
    model: &str,
) -> String {
    let mode = policy.mode().to_string();
    context::session_context(&PromptInputs {
        workspace,
        tools: &[],
        mode: &mode,
        instructions,
        model,
        date: None,
    })
}

/// The system prompt for this session.
pub fn system_prompt(
    toolbox: &Toolbox,
    workspace: &std::path::Path,
    policy: &Policy,
    instructions: &Instructions,
    model: &str,
) -> String {
    let tools: Vec<(String, String)> = toolbox
        .tools()
        .iter()
        .map(|tool| {
            let first = tool
                .spec
                .description
                .lines()
                .next()
                .unwrap_or_default()
                .to_string();
            (tool.model_name.clone(), first)
        })
        .collect();
    let mode = policy.mode().to_string();
    context::system_prompt(&PromptInputs {
        workspace,
        tools: &tools,
        mode: &mode,
        instructions,
        model,
        date: None,
    })
}

/// What the commands of extensions — Claude Code command hooks and skills'
/// inline shell commands — start from: the session's command grants, which
/// each narrows to read-only and no network. When they cannot be made the
/// hooks are loaded all the same and fail at each event (so blocking events
/// stay closed), and inline commands are not run.
fn extension_grants(
    settings: &config::Settings,
    workspace: &std::path::Path,
    home: &Home,
) -> Result<crate::exec::ExecGrants, String> {
    let user_home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(std::path::PathBuf::from);
    let mut grants = crate::exec::ExecGrants::resolve(
        &settings.exec,
        workspace,
        user_home.as_deref(),
        &crate::grants::fs::OwnFolders::of(home),
    )
    .map_err(|e| e.to_string())?;
    let log = crate::audit::AuditLog::open(&home.audit_log())
        .map_err(|e| format!("the audit log cannot be opened: {e}"))?;
    grants.audit = Some(crate::audit::AuditScope::new(log, "hooks", "", None));
    Ok(grants)
}
