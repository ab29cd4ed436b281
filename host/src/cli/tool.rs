//! `capstan tool list` and `capstan tool call`.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::Exit;
use super::escape;
use super::exit::Failure;
use crate::agent::component_tool::{ComponentTool, PluginRuntime};
use crate::agent::tool::{CallRecord, ToolHandler};
use crate::agent::{Interrupt, ToolCall};
use crate::audit::{AuditEvent, AuditLog, AuditScope};
use crate::home::Home;
use crate::plugin::{Catalog, CatalogError, Provision, ProvisionError, ToolRef, Writes};
use crate::quantity::{parse_duration, parse_size};
use crate::sandbox::{
    CacheOutcome, CallError, EventSink, Limits, LoadedComponent, LogLevel, PluginEvent, Sandbox,
    ToolSpec,
};

#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// List the tools every plugin offers.
    List(ListArgs),
    /// Call one tool in a fresh sandbox.
    ///
    /// The tool sees the workspace folder (the current folder unless
    /// --workspace says otherwise), read-only unless --allow-write is given,
    /// and nothing else: no other files, no environment, no network.
    #[command(after_help = concat!("Examples:
  capstan tool call fs.read '{\"path\":\"src/main.rs\",\"offset\":10,\"limit\":40}'
  capstan tool call fs.edit '{\"path\":\"a.txt\",\"old\":\"foo\",\"new\":\"bar\"}' --allow-write
  capstan tool call fs.grep '{\"pattern\":\"fn main\",\"glob\":\"**/*.rs\"}'
  echo '{\"path\":\".\"}' | capstan tool call fs.ls
  capstan tool call exec.run '{\"command\":\"python3 -m unittest\"}' --allow-write

", super::exit::exit_codes_help!()))]
    Call(CallArgs),
}

#[derive(Debug, Args)]
struct PluginArgs {
    /// Also load this component file, as PATH or NAME=PATH (repeatable).
    #[arg(long = "plugin", value_name = "[NAME=]PATH")]
    plugins: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    plugins: PluginArgs,

    /// Print the tools, with their input schemas, as JSON.
    #[arg(long)]
    json: bool,

    /// Leave out MCP servers' tools (listing them starts the allowed
    /// servers for the occasion).
    #[arg(long)]
    no_mcp: bool,
}

#[derive(Debug, Args)]
pub struct CallArgs {
    /// The tool, as PLUGIN.TOOL (for example fs.read).
    name: String,

    /// The input, a JSON object. Read from stdin when omitted or `-`.
    input: Option<String>,

    /// The folder the tool may see [default: the current folder].
    #[arg(long, short = 'w', value_name = "DIR")]
    workspace: Option<PathBuf>,

    /// Let the tool change files in the workspace (it is read-only otherwise).
    #[arg(long)]
    allow_write: bool,

    /// Stop the call after this long (e.g. 500ms, 30s, 2m) [default: the
    /// plugin's own limit if it is installed with one, otherwise 30s].
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    timeout: Option<Duration>,

    /// The most memory the plugin may use (e.g. 64MiB, 1GiB) [default: the
    /// plugin's own limit if it is installed with one, otherwise 256MiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_memory)]
    memory: Option<u64>,

    /// Print the result (or the error) as one JSON object on stdout.
    #[arg(long)]
    json: bool,

    /// For exec.run: let the command reach ORIGIN (e.g.
    /// https://index.crates.io) through capstan's proxy; repeatable. The
    /// same as listing it in the input's "net".
    #[arg(long = "allow-net", value_name = "ORIGIN")]
    allow_net: Vec<String>,

    #[command(flatten)]
    plugins: PluginArgs,
}

fn parse_memory(text: &str) -> Result<u64, String> {
    let bytes = parse_size(text)?;
    if bytes > Limits::MAX_MEMORY {
        return Err(format!("at most {} bytes (4GiB)", Limits::MAX_MEMORY));
    }
    Ok(bytes)
}

/// Runs a `tool` subcommand.
pub async fn run(command: ToolCommand, verbose: bool) -> Exit {
    let (result, json_errors) = match command {
        ToolCommand::List(args) => (list(args, verbose).await, None),
        ToolCommand::Call(args) => {
            let json = args.json.then(|| args.name.clone());
            (call(args, verbose).await, json)
        }
    };
    result.unwrap_or_else(|failure| match json_errors {
        Some(tool) => {
            println!(
                "{}",
                json!({
                    "ok": false,
                    "tool": tool,
                    "error": { "kind": failure.exit.kind(), "message": failure.message },
                })
            );
            failure.exit
        }
        None => failure.report(),
    })
}

/// The sandbox and the plugins of this invocation.
struct Setup {
    home: Home,
    sandbox: Arc<Sandbox>,
    catalog: Catalog,
    verbose: bool,
}

impl Setup {
    fn new(plugins: &PluginArgs, verbose: bool) -> Result<Self, Failure> {
        let home = Home::from_env().map_err(|e| Failure::new(Exit::Error, e))?;
        // `tool list` and `tool call` describe each plugin once and make
        // at most one call: an instance made ahead would go unused, and
        // memory reset for a next instance would never be used.
        let sandbox = crate::startup::time("sandbox set-up", || Sandbox::for_one_call(&home))
            .map_err(|e| Failure::new(Exit::Error, e))?;
        let sandbox = Arc::new(sandbox);
        let listing = Instant::now();
        let mut catalog = Catalog::builtin();
        catalog
            .add_installed(&home)
            .map_err(|e| Failure::new(Exit::Error, e))?;
        crate::startup::record("plugin catalog", "", listing);
        for spec in &plugins.plugins {
            catalog
                .add_file(spec)
                .map_err(|e| Failure::new(Exit::Usage, e))?;
        }
        Ok(Self {
            home,
            sandbox,
            catalog,
            verbose,
        })
    }

    fn load(&self, name: &str) -> Result<LoadedComponent, Failure> {
        let started = Instant::now();
        let component = self
            .catalog
            .load(&self.sandbox, name)
            .map_err(|e| Failure::new(exit_for_catalog(&e), e))?;
        if component.cache_outcome() == CacheOutcome::Compiled || self.verbose {
            let how = match component.cache_outcome() {
                CacheOutcome::Precompiled => "loaded precompiled in the binary",
                CacheOutcome::Hit => "loaded from the compile cache",
                CacheOutcome::Compiled => "compiled (once; cached for next time)",
            };
            if let (true, Some(reason)) = (self.verbose, component.precompiled_fallback()) {
                eprintln!(
                    "capstan: plugin {name}: its code precompiled in the binary does not fit this machine ({reason}); compiling it instead"
                );
            }
            if self.verbose || started.elapsed() > Duration::from_millis(500) {
                eprintln!(
                    "capstan: plugin {name} {how} in {:.1} ms",
                    started.elapsed().as_secs_f64() * 1e3
                );
            }
        }
        Ok(component)
    }

    /// Plugin `name`'s tools, or `None` (with a warning on stderr) when it
    /// is an installed plugin that cannot be used: it fails its checks,
    /// cannot be given what it was granted in `workspace`, or cannot be
    /// loaded or describe its tools. Other plugins' failures are errors.
    async fn usable_tools(
        &self,
        name: &str,
        workspace: &std::path::Path,
    ) -> Result<Option<(LoadedComponent, Vec<ToolSpec>)>, Failure> {
        let warn = |catalog: &Catalog| {
            if let Some(unavailable) = catalog.unavailable().get(name) {
                eprintln!("warning: {}", escape::message(&unavailable.to_string()));
            }
        };
        if self
            .catalog
            .check_available(name, workspace, self.sandbox.own_folders())
            .is_err()
        {
            warn(&self.catalog);
            return Ok(None);
        }
        let Some(component) = self.catalog.unless_unavailable(name, self.load(name))? else {
            warn(&self.catalog);
            return Ok(None);
        };
        let described = self.describe(&component).await;
        let Some(specs) = self.catalog.unless_unavailable(name, described)? else {
            warn(&self.catalog);
            return Ok(None);
        };
        Ok(Some((component, specs)))
    }

    /// For plugin `name`'s tools, why one is not offered to the model
    /// (the built-in `web` plugin's search until `[web.search]` is set).
    /// Installed plugins offer every tool they describe.
    fn withheld(&self, name: &str, workspace: &std::path::Path) -> impl Fn(&str) -> Option<String> {
        let provision = self
            .catalog
            .is_builtin(name)
            .then(|| {
                Provision::for_plugin(
                    &self.catalog,
                    name,
                    workspace,
                    self.sandbox.own_folders(),
                    Limits::default(),
                    Writes::Never,
                )
                .ok()
            })
            .flatten();
        move |tool| {
            provision
                .as_ref()
                .and_then(|p| p.withheld(tool))
                .map(str::to_string)
        }
    }

    async fn describe(&self, component: &LoadedComponent) -> Result<Vec<ToolSpec>, Failure> {
        let started = Instant::now();
        let described = self.sandbox.describe(component).await;
        crate::startup::record("describe", component.name(), started);
        described.map_err(|e| Failure::new(Exit::Error, e))
    }

    fn events(&self) -> EventSink {
        let verbose = self.verbose;
        Arc::new(move |plugin: &str, event: PluginEvent| match event {
            PluginEvent::Log { level, message } => {
                let label = match level {
                    LogLevel::Error => "error",
                    LogLevel::Warn => "warning",
                    LogLevel::Info => "info",
                    LogLevel::Debug => "debug",
                    LogLevel::Trace => "trace",
                };
                if verbose || level >= LogLevel::Warn {
                    eprintln!(
                        "[{}] {label}: {}",
                        escape::line(plugin),
                        escape::line(&message)
                    );
                }
            }
            PluginEvent::Progress {
                message,
                done,
                total,
            } => {
                if verbose {
                    let (plugin, message) = (escape::line(plugin), escape::line(&message));
                    match total {
                        Some(total) => eprintln!("[{plugin}] {message} ({done}/{total})"),
                        None => eprintln!("[{plugin}] {message} ({done})"),
                    }
                }
            }
            // Components run no commands; exec.run's output is its result.
            PluginEvent::CommandOutput { .. } => {}
        })
    }
}

async fn list(args: ListArgs, verbose: bool) -> Result<Exit, Failure> {
    let setup = Setup::new(&args.plugins, verbose)?;
    let workspace = current_dir()?;
    let mut rows = Vec::new();
    for plugin in setup.catalog.names() {
        if !setup.catalog.offers_tools(plugin) {
            continue;
        }
        // An installed plugin that cannot be used is left out of the list,
        // with the reason, rather than hiding every other tool.
        let Some((_, specs)) = setup.usable_tools(plugin, &workspace).await? else {
            continue;
        };
        let withheld = setup.withheld(plugin, &workspace);
        for spec in specs {
            let why = withheld(&spec.name);
            rows.push((plugin.to_string(), spec, why));
        }
    }
    let width = rows
        .iter()
        .map(|(p, s, _)| p.len() + 1 + s.name.len())
        .max()
        .unwrap_or(0);
    let mcp_rows = if args.no_mcp {
        Vec::new()
    } else {
        let home = Home::from_env().map_err(|e| Failure::new(Exit::Error, e))?;
        let workspace = workspace
            .canonicalize()
            .unwrap_or_else(|_| workspace.clone());
        super::tool_mcp::rows(&home, &workspace).await
    };
    if args.json {
        let mut tools: Vec<_> = rows
            .iter()
            .map(|(plugin, spec, withheld)| {
                let mut value = json!(spec);
                value["name"] = json!(format!("{plugin}.{}", spec.name));
                value["offered"] = json!(withheld.is_none());
                if let Some(why) = withheld {
                    value["not_offered"] = json!(why);
                }
                value
            })
            .collect();
        tools.extend(mcp_rows.iter().map(super::tool_mcp::row_json));
        println!(
            "{}",
            serde_json::to_string_pretty(&tools).unwrap_or_default()
        );
        return Ok(Exit::Success);
    }
    let mcp_text: Vec<_> = mcp_rows.iter().map(super::tool_mcp::row_text).collect();
    let width = width.max(mcp_text.iter().map(|(n, _, _)| n.len()).max().unwrap_or(0));
    for (plugin, spec, withheld) in &rows {
        let name = format!("{plugin}.{}", spec.name);
        let mode = if spec.read_only {
            "read-only"
        } else {
            "writes"
        };
        let name = escape::line(&name);
        // A tool the model is not offered says so, and how to change that,
        // in place of its summary.
        let text = withheld
            .as_deref()
            .unwrap_or(first_sentence(&spec.description));
        println!("{name:width$}  {mode:9}  {}", escape::line(text));
    }
    for (name, mode, text) in &mcp_text {
        let name = escape::line(name);
        println!(
            "{name:width$}  {mode:9}  {}",
            escape::line(first_sentence(text))
        );
    }
    Ok(Exit::Success)
}

async fn call(args: CallArgs, verbose: bool) -> Result<Exit, Failure> {
    let input = read_input(args.input.as_deref())?;
    if args.name == crate::agent::exec_tool::TOOL_NAME {
        return call_exec_run(&args, &input).await;
    }
    if args.name.starts_with(super::tool_mcp::PREFIX) {
        let workspace = match &args.workspace {
            Some(dir) => dir.clone(),
            None => current_dir()?,
        };
        let workspace = workspace.canonicalize().map_err(|e| {
            Failure::new(
                Exit::Usage,
                format!("cannot use {} as the workspace: {e}", workspace.display()),
            )
        })?;
        return super::tool_mcp::call(&args.name, &input, &workspace, args.allow_write, args.json)
            .await;
    }
    if !args.allow_net.is_empty() {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "--allow-net is for exec.run's commands; {} reaches what its plugin was granted",
                args.name
            ),
        ));
    }
    let workspace = match &args.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(|e| {
            Failure::new(
                Exit::Error,
                format!("cannot tell the current folder ({e}); pass --workspace DIR"),
            )
        })?,
    };
    let setup = Setup::new(&args.plugins, verbose)?;

    let (plugin, tool) = resolve_tool(&setup, &args.name).await?;
    let component = setup.load(&plugin)?;
    let specs = setup.describe(&component).await?;
    let Some(spec) = specs.iter().find(|s| s.name == tool) else {
        let known = specs
            .iter()
            .map(|s| format!("{plugin}.{}", s.name))
            .collect();
        let err = CallError::UnknownTool {
            name: args.name.clone(),
            known,
        };
        return Ok(report_error(&args, &err));
    };

    // What the call gets is decided where the agent's calls are decided:
    // an installed plugin runs under what the user granted it (the
    // workspace writable only with --allow-write), with its own limits, and
    // its capability decisions go to its audit log, which must open.
    // Built-in plugins and --plugin files see the workspace only; theirs
    // go to the home's audit log, as in a session, with the call itself.
    let writes = if args.allow_write {
        Writes::WhenAllowed
    } else {
        Writes::Never
    };
    let provision = Provision::for_plugin(
        &setup.catalog,
        &plugin,
        &workspace,
        setup.sandbox.own_folders(),
        Limits::default(),
        writes,
    )
    .map_err(|e| {
        let exit = match &e {
            ProvisionError::Refused(refused) => exit_for_catalog(refused),
            _ => Exit::Error,
        };
        Failure::new(exit, e)
    })?;
    let limits = provision.limits();
    let provision = provision.with_limits(Limits {
        memory: args.memory.unwrap_or(limits.memory),
        timeout: args.timeout.unwrap_or(limits.timeout),
        ..limits
    });
    if let Some(why) = provision.withheld(&spec.name) {
        return Err(Failure::new(Exit::Usage, format!("{}: {why}", args.name)));
    }
    let runtime = Arc::new(PluginRuntime::new(
        setup.sandbox.clone(),
        component,
        provision,
    ));
    let tool = ComponentTool::new(runtime, spec.clone());
    let input: Value = serde_json::from_str(&input).map_err(|e| {
        Failure::new(
            Exit::InvalidInput,
            format!("invalid input: the input is not valid JSON: {e}"),
        )
    })?;
    let events = setup.events();
    let interrupt = Interrupt::new();
    let audit = crate::startup::time("audit log", || home_audit(&setup.home));
    let call_id = crate::sandbox::new_call_id();
    let record = audit
        .as_ref()
        .map(|log| CallRecord::start(log, &plugin, ToolHandler::name(&tool), &call_id, None));
    let started = Instant::now();
    let result = tool
        .run(&ToolCall {
            input: &input,
            call_id: &call_id,
            session_id: None,
            interrupt: &interrupt,
            events: Some(&events),
            audit: audit.as_ref(),
            session: None,
            reach: crate::agent::tool::Reach::FULL,
        })
        .await;
    if let Some(record) = record {
        record.finish(&result);
    }
    crate::startup::record("tool call", args.name.clone(), started);
    if verbose {
        eprintln!(
            "capstan: {} ran in {:.2} ms",
            args.name,
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    match result {
        Ok(output) => {
            if args.json {
                let value = json!({ "ok": true, "tool": args.name, "content": output.content });
                println!("{value}");
            } else {
                // Without --json the output is for reading: its control
                // characters are shown, not obeyed (--json keeps them, escaped
                // as JSON).
                let text = output.to_text();
                let text = escape::text(&text);
                if text.ends_with('\n') {
                    print!("{text}");
                } else {
                    println!("{text}");
                }
            }
            Ok(Exit::Success)
        }
        Err(err) => {
            let exit = report_error(&args, &err);
            if matches!(err, CallError::Denied(_)) && !args.allow_write && !spec.read_only {
                eprintln!(
                    "hint: the workspace is read-only for this call; pass --allow-write to let {} change files",
                    args.name
                );
            }
            Ok(exit)
        }
    }
}

/// `capstan tool call exec.run INPUT`: the model's command tool, run as
/// the model's calls are, with the workspace writable only with
/// `--allow-write` (an input asking for `write` without it is refused) and
/// the origins the input lists or `--allow-net` names.
async fn call_exec_run(args: &CallArgs, input: &str) -> Result<Exit, Failure> {
    let workspace = match &args.workspace {
        Some(dir) => dir.clone(),
        None => current_dir()?,
    };
    let mut input: Value = serde_json::from_str(input).map_err(|e| {
        Failure::new(
            Exit::InvalidInput,
            format!("invalid input: the input is not valid JSON: {e}"),
        )
    })?;
    let Some(fields) = input.as_object_mut() else {
        return Ok(report_error(
            args,
            &CallError::InvalidInput("the input must be a JSON object".to_string()),
        ));
    };
    let home = Home::from_env().map_err(|e| Failure::new(Exit::Error, e))?;
    let audit = home_audit(&home);
    let call_id = crate::sandbox::new_call_id();
    if fields.get("write") == Some(&Value::Bool(true)) && !args.allow_write {
        let reason = "the input asks to write the workspace; pass --allow-write to let the command change files";
        if let Some(log) = &audit {
            AuditScope::new(log.clone(), "exec", &call_id, None).record(AuditEvent::CallDenied {
                tool: crate::agent::exec_tool::TOOL_NAME.to_string(),
                by: "command line (no --allow-write)".to_string(),
                reason: reason.to_string(),
            });
        }
        return Ok(report_error(args, &CallError::Denied(reason.to_string())));
    }
    if args.allow_write {
        fields.insert("write".to_string(), Value::Bool(true));
    }
    if !args.allow_net.is_empty() {
        let mut net = match fields.remove("net") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(origins)) => origins,
            Some(_) => {
                return Ok(report_error(
                    args,
                    &CallError::InvalidInput(
                        "`net` must be a list of origins such as [\"https://example.com\"]"
                            .to_string(),
                    ),
                ));
            }
        };
        net.extend(args.allow_net.iter().cloned().map(Value::String));
        fields.insert("net".to_string(), Value::Array(net));
    }
    if let Some(timeout) = args.timeout {
        fields.insert("timeout".to_string(), json!(timeout.as_secs().max(1)));
    }
    let settings =
        crate::config::load(&home, &workspace).map_err(|e| Failure::new(Exit::Usage, e))?;
    for warning in &settings.warnings {
        eprintln!("warning: {warning}");
    }
    let tools = crate::agent::exec_tool::for_session(&settings, &workspace, &home);
    if let Some(warning) = &tools.warning {
        eprintln!("{warning}");
    }
    let Some(tool) = tools
        .handlers
        .iter()
        .find(|tool| tool.name() == crate::agent::exec_tool::TOOL_NAME)
    else {
        return Err(Failure::new(Exit::Error, "exec.run is missing"));
    };
    let interrupt = Interrupt::new();
    let record = audit.as_ref().map(|log| {
        CallRecord::start(
            log,
            "exec",
            crate::agent::exec_tool::TOOL_NAME,
            &call_id,
            None,
        )
    });
    let outcome = tool
        .call(ToolCall {
            input: &input,
            call_id: &call_id,
            session_id: None,
            interrupt: &interrupt,
            events: None,
            audit: audit.as_ref(),
            session: None,
            reach: crate::agent::tool::Reach::FULL,
        })
        .await;
    if let Some(record) = record {
        record.finish(&outcome.result);
    }
    match outcome.result {
        Ok(text) => {
            if args.json {
                let value = json!({ "ok": true, "tool": args.name, "content": [{"type": "text", "text": text}] });
                println!("{value}");
            } else {
                print!("{}", escape::text(&text));
            }
            Ok(Exit::Success)
        }
        Err(err) => Ok(report_error(args, &err)),
    }
}

/// The home's audit log, where `capstan tool call` records the call (and
/// a built-in plugin's capability decisions); a log that cannot be opened
/// is said, and the call runs unrecorded.
fn home_audit(home: &Home) -> Option<AuditLog> {
    match AuditLog::open(&home.audit_log()) {
        Ok(log) => Some(log),
        Err(error) => {
            eprintln!("warning: this call is not recorded in the audit log: {error}");
            None
        }
    }
}

/// The exit code of a plugin that cannot be found or used.
fn exit_for_catalog(error: &CatalogError) -> Exit {
    match error {
        CatalogError::Unknown { .. } => Exit::Usage,
        CatalogError::Integrity(_) | CatalogError::NeedsConsent(_) => Exit::Integrity,
        _ => Exit::Error,
    }
}

/// The first sentence of a description, for one-line listings.
fn first_sentence(text: &str) -> &str {
    let line = text.lines().next().unwrap_or_default();
    match line.find(". ") {
        Some(end) => &line[..=end],
        None => line,
    }
}

/// Prints a call error (as text on stderr, or JSON on stdout) and returns
/// its exit code.
fn report_error(args: &CallArgs, err: &CallError) -> Exit {
    let exit = Exit::for_call_error(err);
    if args.json {
        let value = json!({
            "ok": false,
            "tool": args.name,
            "error": { "kind": exit.kind(), "message": err.to_string() },
        });
        println!("{value}");
    } else {
        eprintln!(
            "error: {}: {}",
            escape::line(&args.name),
            escape::message(&err.to_string())
        );
    }
    exit
}

/// Finds the plugin and tool for a name: `PLUGIN.TOOL`, or a bare tool name
/// that exactly one plugin offers.
async fn resolve_tool(setup: &Setup, name: &str) -> Result<(String, String), Failure> {
    if let Some(r) = ToolRef::parse(name) {
        return Ok((r.plugin.to_string(), r.tool.to_string()));
    }
    let workspace = current_dir()?;
    let mut owners = Vec::new();
    for plugin in setup.catalog.names() {
        if !setup.catalog.offers_tools(plugin) {
            continue;
        }
        let Some((_, specs)) = setup.usable_tools(plugin, &workspace).await? else {
            continue;
        };
        if specs.iter().any(|s| s.name == name) {
            owners.push(plugin.to_string());
        }
    }
    match owners.as_slice() {
        [only] => Ok((only.clone(), name.to_string())),
        [] => Err(Failure::new(
            Exit::Usage,
            format!("unknown tool `{name}`; name tools as PLUGIN.TOOL (see `capstan tool list`)"),
        )),
        many => Err(Failure::new(
            Exit::Usage,
            format!(
                "`{name}` is offered by several plugins ({}); name it as PLUGIN.TOOL",
                many.join(", ")
            ),
        )),
    }
}

/// The current folder, where an installed plugin's `$WORKSPACE` grant
/// points when no workspace is given.
fn current_dir() -> Result<PathBuf, Failure> {
    std::env::current_dir().map_err(|e| {
        Failure::new(
            Exit::Error,
            format!("cannot tell the current folder ({e}); run capstan from an existing folder"),
        )
    })
}

/// The call's input: the argument, or stdin when it is `-` or missing (an
/// empty object when stdin is a terminal). It must be a JSON object.
fn read_input(arg: Option<&str>) -> Result<String, Failure> {
    let text = match arg {
        Some(text) if text != "-" => text.to_string(),
        _ if arg.is_none() && std::io::stdin().is_terminal() => "{}".to_string(),
        _ => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).map_err(|e| {
                Failure::new(
                    Exit::Error,
                    format!("cannot read the input from stdin: {e}"),
                )
            })?;
            if text.trim().is_empty() {
                "{}".to_string()
            } else {
                text
            }
        }
    };
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(value) if value.is_object() => Ok(text),
        Ok(_) => Err(Failure::new(
            Exit::InvalidInput,
            "invalid input: the input must be a JSON object, like '{\"path\":\"README.md\"}'",
        )),
        Err(e) => Err(Failure::new(
            Exit::InvalidInput,
            format!("invalid input: the input is not valid JSON: {e}"),
        )),
    }
}
