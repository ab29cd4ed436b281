//! Custom sub-agents, defined as Claude Code defines them: a markdown file
//! `agents/NAME.md` whose front matter gives `name`, `description`,
//! `tools`, `disallowedTools` and `model`, and whose body is the agent's
//! system prompt.
//!
//! They are found in the project's `.claude/agents/` (workspace, then the
//! repository root), the user's `~/.claude/agents/` and installed
//! plugins' `agents/` (read through the lock, so a changed file is
//! refused); between the project's and the user's, the first of a name
//! wins. A plugin's agent is also `plugin:name`, as in Claude Code, so two
//! plugins' agents of one name both stay reachable. The `task` tool starts
//! them by name.
//!
//! Unlike Claude Code, where the list is advisory, an agent runs with
//! exactly the tools it lists, and the sandbox of every call it makes holds
//! it to them ([`Reach`]): an agent that lists no tool that changes files
//! gets the workspace read-only in its components and its commands alike
//! (`Bash` alone runs commands read-only), and one that lists no network
//! tool gets no network. Everything stays within the session's own grants
//! and policy: an agent is offered a subset of the session's tools.

use std::path::Path;

use super::markdown_parts;
use super::profile::{AgentProfile, ToolAllowance};
use super::tool::{AgentTool, Reach};
use crate::front_matter::{self, AgentFile};
use crate::home::Home;
use crate::policy::claude_code;

/// The largest agent file read.
const MAX_AGENT_FILE: usize = 256 << 10;

/// One custom sub-agent and where it was defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomAgent {
    /// Its definition.
    pub file: AgentFile,
    /// Where it came from, for messages (`project`, `user`, `plugin NAME`).
    pub source: String,
    /// The plugin that brought it, if one did: it is also reachable as
    /// `plugin:name`, as Claude Code names plugins' agents.
    pub plugin: Option<String>,
}

impl CustomAgent {
    /// Its name qualified by its plugin (`plugin:name`), or its name.
    pub fn qualified_name(&self) -> String {
        match &self.plugin {
            Some(plugin) => format!("{plugin}:{}", self.file.name),
            None => self.file.name.clone(),
        }
    }
}

/// The custom agents of a session, and what the user should know about the
/// files that were skipped.
#[derive(Debug, Clone, Default)]
pub struct CustomAgents {
    /// The agents, by precedence; names are unique.
    pub agents: Vec<CustomAgent>,
    /// Files skipped and why.
    pub warnings: Vec<String>,
}

impl CustomAgents {
    /// Finds the agents of a session in `workspace`: the project's
    /// `.claude/agents/`, the user's `claude_home/agents/` (`~/.claude`),
    /// then installed plugins' `agents/`.
    pub fn discover(home: &Home, workspace: &Path, claude_home: Option<&Path>) -> Self {
        let mut found = Self::default();
        let mut roots = vec![workspace.to_path_buf()];
        if let Some(root) = workspace.ancestors().find(|f| f.join(".git").exists())
            && root != workspace
        {
            roots.push(root.to_path_buf());
        }
        for root in &roots {
            found.add_folder(root, Path::new(".claude/agents"), "project");
        }
        if let Some(claude) = claude_home {
            found.add_folder(claude, Path::new("agents"), "user");
        }
        found.add_installed_plugins(home);
        found
    }

    /// The agent `name` asks for: `plugin:name` for a plugin's agent, or
    /// a bare name, which finds the project's or the user's agent of that
    /// name, else the one plugin agent of that name (none when several
    /// plugins offer it: [`CustomAgents::call_name`] qualifies them).
    pub fn find(&self, name: &str) -> Option<&CustomAgent> {
        if let Some((plugin, bare)) = name.rsplit_once(':') {
            return self
                .agents
                .iter()
                .find(|a| a.plugin.as_deref() == Some(plugin) && a.file.name == bare);
        }
        let mut named = self.agents.iter().filter(|a| a.file.name == name);
        if let Some(own) = self
            .agents
            .iter()
            .find(|a| a.plugin.is_none() && a.file.name == name)
        {
            return Some(own);
        }
        match (named.next(), named.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        }
    }

    /// The name `agent` is called by: its own when that finds it, else
    /// `plugin:name`.
    pub fn call_name(&self, agent: &CustomAgent) -> String {
        match self.find(&agent.file.name) {
            Some(found) if std::ptr::eq(found, agent) => agent.file.name.clone(),
            _ => agent.qualified_name(),
        }
    }

    /// The names the agents are called by, in order.
    pub fn call_names(&self) -> Vec<String> {
        self.agents.iter().map(|a| self.call_name(a)).collect()
    }

    fn add(&mut self, file: AgentFile, source: String, plugin: Option<String>) {
        // A plugin's agent stays reachable as `plugin:name` whatever else
        // is called so; between the project's and the user's, the first
        // wins.
        let clash = self
            .agents
            .iter()
            .find(|a| a.file.name == file.name && (plugin.is_none() || a.plugin == plugin));
        if let Some(winner) = clash {
            self.warnings.push(format!(
                "the agent `{}` of {source} is hidden by the one of {}",
                file.name, winner.source
            ));
            return;
        }
        self.agents.push(CustomAgent {
            file,
            source,
            plugin,
        });
    }

    fn parse(&mut self, text: &str, path: &Path, stem: &str, source: String) {
        let plugin = source.strip_prefix("plugin ").map(str::to_string);
        match front_matter::parse_agent(text, stem) {
            Ok(file) => self.add(file, source, plugin),
            Err(e) => self.warnings.push(format!(
                "skipped the agent {}:{}: {}",
                path.display(),
                e.line,
                e.message
            )),
        }
    }

    /// Every `*.md` in `root/rel` ([`markdown_parts::in_folder`]).
    fn add_folder(&mut self, root: &Path, rel: &Path, source: &str) {
        let parts =
            markdown_parts::in_folder(root, rel, source, MAX_AGENT_FILE, ("agent", "agents"));
        self.add_parts(parts);
    }

    /// `agents/*.md` of every installed plugin, each file's hash checked
    /// against the lock.
    fn add_installed_plugins(&mut self, home: &Home) {
        self.add_parts(markdown_parts::in_installed_plugins(home, "agents/"));
    }

    fn add_parts(&mut self, parts: Vec<Result<markdown_parts::Part, String>>) {
        for part in parts {
            match part {
                Ok(part) => self.parse(&part.text, &part.path, &part.stem, part.source),
                Err(warning) => self.warnings.push(warning),
            }
        }
    }
}

/// The capstan tool names an agent's `tools` list stands for: Claude Code
/// names mapped (`Read` is `fs.read`, `Bash` is `exec.run`), capstan
/// names (`fs.read`, `git.*`) and MCP names kept; and the names that stand
/// for no tool capstan has.
pub fn tool_names(listed: &[String]) -> (Vec<String>, Vec<String>) {
    let mut names = Vec::new();
    let mut unknown = Vec::new();
    for entry in listed {
        // `Bash(git diff:*)` names the tool `Bash`.
        let base = entry.split('(').next().unwrap_or(entry).trim();
        let mapped: &[&str] = match base {
            "BashOutput" => &["exec.output"],
            "KillShell" | "KillBash" => &["exec.kill"],
            "NotebookEdit" => &["fs.edit"],
            "Task" => &[],
            _ => match claude_code::lookup(base) {
                Some(tool) => std::slice::from_ref(&tool.tool),
                None if base.contains('.') || base.starts_with("mcp__") => {
                    names.push(base.to_string());
                    continue;
                }
                None => {
                    unknown.push(base.to_string());
                    continue;
                }
            },
        };
        for name in mapped {
            if !names.iter().any(|n| n == name) {
                names.push((*name).to_string());
            }
        }
    }
    (names, unknown)
}

/// Whether `name` (a capstan name from [`tool_names`]: `fs.write`,
/// `git.*`, `mcp__server`, `mcp__server__tool`) names `tool`.
fn names_tool(name: &str, tool: &AgentTool) -> bool {
    if let Some(plugin) = name.strip_suffix(".*") {
        return tool.plugin() == Some(plugin);
    }
    if let Some(pattern) = crate::policy::claude_code::mcp_pattern(name) {
        return match pattern.strip_suffix('*') {
            Some(prefix) => tool.name.starts_with(prefix),
            None => tool.name == pattern,
        };
    }
    tool.name == name
}

/// Whether `tool` runs native commands, whose writing and network are
/// decided per call ([`Reach`]) rather than by their hints: `Bash` alone
/// gives neither.
fn runs_commands(tool: &AgentTool) -> bool {
    tool.name.starts_with("exec.")
}

/// The profile `agent` runs as in a session offering `tools`, with the
/// session's provider `provider` and model `session_model`: its body as
/// the system prompt (with the working folder `workspace`), exactly the
/// tools it lists (all of the session's but `task` and `skill` when it
/// lists none) less those its `disallowedTools` names (a whole tool, even
/// when written with parentheses), and the reach those tools need. Also returns notes for
/// the result: tools it names that capstan does not have, a model the
/// provider cannot serve.
pub fn profile(
    agent: &CustomAgent,
    tools: &[AgentTool],
    provider: &str,
    session_model: &str,
    workspace: &Path,
) -> (AgentProfile, Vec<String>) {
    let mut notes = Vec::new();
    let no_nesting = [
        super::subagent::TOOL_NAME.to_string(),
        crate::skills::session::TOOL_NAME.to_string(),
    ];
    let (taken_away, unknown_taken) = tool_names(&agent.file.disallowed_tools);
    if !unknown_taken.is_empty() {
        notes.push(format!(
            "the agent's disallowedTools names tools capstan does not have: {}",
            unknown_taken.join(", ")
        ));
    }
    let (allowance, reach) = match &agent.file.tools {
        None if taken_away.is_empty() => (ToolAllowance::AllBut(no_nesting.to_vec()), Reach::FULL),
        listed => {
            let base = match listed {
                None => ToolAllowance::AllBut(no_nesting.to_vec()),
                Some(listed) => {
                    let (names, unknown) = tool_names(listed);
                    if !unknown.is_empty() {
                        notes.push(format!(
                            "the agent lists tools capstan does not have, left out: {}",
                            unknown.join(", ")
                        ));
                    }
                    ToolAllowance::Named(
                        names
                            .into_iter()
                            .filter(|name| !no_nesting.contains(name))
                            .collect(),
                    )
                }
            };
            let offered: Vec<&AgentTool> = tools
                .iter()
                .filter(|t| base.allows(t))
                .filter(|t| !taken_away.iter().any(|name| names_tool(name, t)))
                .collect();
            let allowance = if taken_away.is_empty() {
                base
            } else {
                ToolAllowance::Named(offered.iter().map(|t| t.name.clone()).collect())
            };
            let reach = Reach {
                write: offered
                    .iter()
                    .any(|t| !t.spec.read_only && !runs_commands(t)),
                net: offered
                    .iter()
                    .any(|t| t.spec.open_world && !runs_commands(t)),
            };
            (allowance, reach)
        }
    };
    let (model, note) = pick_model(agent.file.model.as_deref(), provider, session_model);
    notes.extend(note);
    let mut system = agent.file.body.clone();
    system.push_str(&format!(
        "\n\n# Environment\nYou are the sub-agent `{}`. The working folder is {}. Another agent \
         gave you the task and reads only your final answer: work on your own (you cannot ask \
         the user anything) and end with a complete, self-contained answer.",
        agent.file.name,
        workspace.display()
    ));
    if !reach.write {
        system.push_str(" The workspace is read-only for you.");
    }
    if !reach.net {
        system.push_str(" You have no network.");
    }
    let profile = AgentProfile {
        name: agent.file.name.clone(),
        system: Some(system),
        model,
        tools: allowance,
        reach,
    };
    (profile, notes)
}

/// The Anthropic model each of Claude Code's aliases stands for.
const ALIASES: [(&str, &str); 3] = [
    ("sonnet", "claude-sonnet-4-5"),
    ("opus", "claude-opus-4-1"),
    ("haiku", "claude-haiku-4-5"),
];

/// The model an agent asking for `requested` gets from `provider`, in a
/// session on `session_model`: `None` keeps the session's. Claude Code's
/// aliases pick that family's model on Anthropic (the session's own when it
/// is of that family); Anthropic names on another provider, which has no
/// such model, keep the session's with a note; other names are used as
/// written.
pub fn pick_model(
    requested: Option<&str>,
    provider: &str,
    session_model: &str,
) -> (Option<String>, Option<String>) {
    let Some(requested) = requested.map(str::trim).filter(|m| !m.is_empty()) else {
        return (None, None);
    };
    if requested == "inherit" {
        return (None, None);
    }
    let anthropic = provider == "anthropic";
    if let Some((alias, model)) = ALIASES.iter().find(|(alias, _)| *alias == requested) {
        if session_model.contains(alias) {
            return (None, None);
        }
        if anthropic {
            return (Some((*model).to_string()), None);
        }
    } else if anthropic || !requested.starts_with("claude") {
        return (Some(requested.to_string()), None);
    }
    (
        None,
        Some(format!(
            "the agent asks for the model `{requested}`, which the {provider} provider does not serve; it used the session's model {session_model}"
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::ToolSpec;
    use std::path::PathBuf;

    #[test]
    fn claude_code_tool_names_map_onto_capstan_tools() {
        let listed: Vec<String> = ["Read", "Grep", "Glob", "Bash(git log:*)", "git.*", "Frob"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (names, unknown) = tool_names(&listed);
        assert_eq!(
            names,
            ["fs.read", "fs.grep", "fs.glob", "exec.run", "git.*"]
        );
        assert_eq!(unknown, ["Frob"]);
    }

    struct Fake(ToolSpec);

    impl crate::agent::tool::ToolHandler for Fake {
        fn name(&self) -> &str {
            &self.0.name
        }

        fn spec(&self) -> &ToolSpec {
            &self.0
        }

        fn call<'a>(
            &'a self,
            _call: crate::agent::tool::ToolCall<'a>,
        ) -> futures_util::future::LocalBoxFuture<'a, crate::agent::tool::ToolOutcome> {
            Box::pin(async { crate::agent::tool::ToolOutcome::from(Ok(String::new())) })
        }
    }

    fn tool(name: &str, read_only: bool, open_world: bool) -> AgentTool {
        AgentTool::new(std::sync::Arc::new(Fake(ToolSpec {
            name: name.to_string(),
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
            read_only,
            destructive: false,
            idempotent: false,
            open_world,
        })))
    }

    fn agent(tools: Option<&[&str]>) -> CustomAgent {
        CustomAgent {
            file: AgentFile {
                name: "a".into(),
                description: "d".into(),
                tools: tools.map(|t| t.iter().map(|s| s.to_string()).collect()),
                disallowed_tools: Vec::new(),
                model: None,
                body: "You are a.".into(),
            },
            source: "project".into(),
            plugin: None,
        }
    }

    #[test]
    fn an_agents_reach_follows_the_tools_it_lists() {
        let tools = [
            tool("fs.read", true, false),
            tool("fs.write", false, false),
            tool("exec.run", false, true),
            tool("web.fetch", true, true),
            tool("task", true, false),
        ];
        let reach = |listed: Option<&[&str]>| {
            profile(&agent(listed), &tools, "anthropic", "m", Path::new("/ws"))
                .0
                .reach
        };
        let none = Reach {
            write: false,
            net: false,
        };
        assert_eq!(reach(Some(&["Read", "Bash"])), none);
        assert_eq!(
            reach(Some(&["Read", "Write"])),
            Reach {
                write: true,
                net: false
            }
        );
        assert_eq!(
            reach(Some(&["WebFetch"])),
            Reach {
                write: false,
                net: true
            }
        );
        assert_eq!(reach(None), Reach::FULL);
        let (read_only, notes) = profile(
            &agent(Some(&["Read", "Task", "Frob"])),
            &tools,
            "anthropic",
            "m",
            Path::new("/ws"),
        );
        let offered: Vec<&str> = tools
            .iter()
            .filter(|t| read_only.tools.allows(t))
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(offered, ["fs.read"]);
        assert!(notes[0].contains("Frob"), "{notes:?}");
        let system = read_only.system.unwrap();
        assert!(system.starts_with("You are a."), "{system}");
        assert!(system.contains("The workspace is read-only for you. You have no network."));
        let (all, _) = profile(&agent(None), &tools, "anthropic", "m", Path::new("/ws"));
        assert!(!all.tools.allows(&tools[4]) && all.tools.allows(&tools[1]));
    }

    #[test]
    fn disallowed_tools_take_tools_away_and_the_reach_they_gave() {
        let tools = [
            tool("fs.read", true, false),
            tool("fs.write", false, false),
            tool("exec.run", false, true),
            tool("web.fetch", true, true),
            tool("mcp__gh__create_issue", false, true),
            tool("task", true, false),
        ];
        let run = |listed: Option<&[&str]>, taken: &[&str]| {
            let mut agent = agent(listed);
            agent.file.disallowed_tools = taken.iter().map(|s| s.to_string()).collect();
            let (profile, notes) = profile(&agent, &tools, "anthropic", "m", Path::new("/ws"));
            let offered: Vec<String> = tools
                .iter()
                .filter(|t| profile.tools.allows(t))
                .map(|t| t.name.clone())
                .collect();
            (offered, profile.reach, notes)
        };
        // Inheriting every tool but the writing and network ones: its
        // commands run read-only and without network.
        let (offered, reach, _) = run(None, &["Write", "Edit", "WebFetch", "mcp__gh"]);
        assert_eq!(offered, ["fs.read", "exec.run"]);
        assert_eq!(
            reach,
            Reach {
                write: false,
                net: false
            }
        );
        // A rule in parentheses takes the whole tool; a name capstan has
        // no tool for is noted.
        let (offered, reach, notes) =
            run(Some(&["Read", "Bash", "Write"]), &["Bash(rm:*)", "Frob"]);
        assert_eq!(offered, ["fs.read", "fs.write"]);
        assert!(reach.write && !reach.net);
        assert!(notes.iter().any(|n| n.contains("Frob")), "{notes:?}");
        // Nothing taken away: as before.
        let (offered, reach, _) = run(None, &[]);
        assert_eq!(offered.len(), 5);
        assert_eq!(reach, Reach::FULL);
    }

    #[test]
    fn plugins_agents_of_one_name_stay_reachable_by_qualified_names() {
        let file = |name: &str, description: &str| AgentFile {
            name: name.into(),
            description: description.into(),
            ..AgentFile::default()
        };
        let mut found = CustomAgents::default();
        found.add(file("planner", "mine"), "project".into(), None);
        found.add(
            file("code-reviewer", "one"),
            "plugin review-agents".into(),
            Some("review-agents".into()),
        );
        found.add(
            file("code-reviewer", "two"),
            "plugin pr-review-toolkit".into(),
            Some("pr-review-toolkit".into()),
        );
        found.add(
            file("planner", "theirs"),
            "plugin planning".into(),
            Some("planning".into()),
        );
        assert!(found.warnings.is_empty(), "{:?}", found.warnings);
        assert_eq!(
            found.call_names(),
            [
                "planner",
                "review-agents:code-reviewer",
                "pr-review-toolkit:code-reviewer",
                "planning:planner"
            ]
        );
        let description = |name: &str| found.find(name).map(|a| a.file.description.as_str());
        assert_eq!(description("planner"), Some("mine"));
        assert_eq!(description("planning:planner"), Some("theirs"));
        assert_eq!(description("pr-review-toolkit:code-reviewer"), Some("two"));
        assert_eq!(description("code-reviewer"), None);
        assert_eq!(description("other:planner"), None);
        // With one plugin offering it, the bare name finds it too.
        let mut one = CustomAgents::default();
        one.add(file("scout", "s"), "plugin p".into(), Some("p".into()));
        assert_eq!(one.call_names(), ["scout"]);
        assert!(one.find("p:scout").is_some());
    }

    #[test]
    fn aliases_pick_a_model_the_provider_has() {
        assert_eq!(
            pick_model(Some("haiku"), "anthropic", "claude-sonnet-4-5").0,
            Some("claude-haiku-4-5".to_string())
        );
        assert_eq!(
            pick_model(Some("sonnet"), "anthropic", "claude-sonnet-4-5"),
            (None, None)
        );
        assert_eq!(pick_model(Some("inherit"), "anthropic", "x"), (None, None));
        assert_eq!(pick_model(None, "anthropic", "x"), (None, None));
        let (model, note) = pick_model(Some("opus"), "openai-compatible", "qwen3");
        assert_eq!(model, None);
        assert!(note.unwrap().contains("`opus`"));
        assert_eq!(
            pick_model(Some("qwen3-coder"), "openai-compatible", "qwen3").0,
            Some("qwen3-coder".to_string())
        );
    }

    #[test]
    fn agents_are_found_in_project_and_user_folders_first_one_wins() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let user = dir.path().join("claude");
        let write = |path: PathBuf, text: &str| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(
            ws.join(".claude/agents/reviewer.md"),
            "---\nname: reviewer\ndescription: Reviews code.\ntools: Read, Grep\nmodel: haiku\n---\nYou review.\n",
        );
        write(
            user.join("agents/reviewer.md"),
            "---\ndescription: Another.\n---\nOther.\n",
        );
        write(
            user.join("agents/writer.md"),
            "---\ndescription: Writes.\n---\nYou write.\n",
        );
        write(user.join("agents/broken.md"), "---\nname: Bad Name\n---\n");
        let home = Home::at(dir.path().join("home"), dir.path().join("cache"));
        let found = CustomAgents::discover(&home, &ws, Some(&user));
        let names: Vec<&str> = found.agents.iter().map(|a| a.file.name.as_str()).collect();
        assert_eq!(names, ["reviewer", "writer"]);
        let reviewer = found.find("reviewer").unwrap();
        assert_eq!(reviewer.source, "project");
        assert_eq!(
            reviewer.file.tools.as_deref(),
            Some(&["Read".to_string(), "Grep".to_string()][..])
        );
        assert_eq!(reviewer.file.model.as_deref(), Some("haiku"));
        assert_eq!(reviewer.file.body, "You review.");
        let all = found.warnings.join("\n");
        assert!(all.contains("broken.md") && all.contains("hidden"), "{all}");
    }
}
