//! `capstan skill ...`: the skills a session here would have, where each
//! comes from, which won a name clash, and one skill in full.

use std::path::PathBuf;

use serde_json::json;

use super::Exit;
use super::escape;
use super::exit::Failure;
use crate::home::Home;
use crate::sandbox::{Limits, Sandbox};
use crate::skills::{Origin, Skill, Skills};

/// The skill commands.
#[derive(Debug, clap::Subcommand)]
pub enum SkillCommand {
    /// List the skills: name, source, who may run them, description; and
    /// which source won where two offer the same name.
    List {
        /// One JSON object with every skill, the clashes and the warnings.
        #[arg(long)]
        json: bool,
        /// The workspace whose project skills count [default: the current folder].
        #[arg(long, short = 'w', value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Show one skill: its fields, where it is, and its text.
    Show {
        /// The skill's name.
        name: String,
        /// The workspace whose project skills count [default: the current folder].
        #[arg(long, short = 'w', value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
}

/// Runs a skill command.
pub async fn run(command: SkillCommand) -> Exit {
    match execute(command).await {
        Ok(exit) => exit,
        Err(failure) => failure.report(),
    }
}

async fn load(workspace: Option<PathBuf>) -> Result<Skills, Failure> {
    let workspace = match workspace {
        Some(dir) => dir,
        None => std::env::current_dir().map_err(|e| {
            Failure::new(
                Exit::Error,
                format!("cannot tell the current folder ({e}); pass --workspace DIR"),
            )
        })?,
    };
    let workspace = std::fs::canonicalize(&workspace).map_err(|e| {
        Failure::new(
            Exit::Usage,
            format!("cannot use {} as the workspace: {e}", workspace.display()),
        )
    })?;
    let home = Home::from_env().map_err(|e| Failure::new(Exit::Error, e))?;
    let sandbox = Sandbox::new(&home).map_err(|e| Failure::new(Exit::Error, e))?;
    Ok(Skills::discover(&sandbox, &home, &workspace, Limits::default()).await)
}

/// Who may run a skill, in words.
fn invocation(skill: &Skill) -> &'static str {
    match (skill.meta.user_invocable, skill.meta.model_invocable) {
        (true, true) => "user+model",
        (true, false) => "user only",
        (false, true) => "model only",
        (false, false) => "nobody",
    }
}

fn skill_json(skill: &Skill, call_name: &str) -> serde_json::Value {
    json!({
        "name": skill.meta.name,
        "display_name": skill.meta.display_name,
        "qualified_name": skill.qualified_name(),
        "call_name": call_name,
        "kind": if skill.is_command() { "command" } else { "skill" },
        "arguments": skill.meta.arguments,
        "disallowed_tools": skill.meta.disallowed_tools,
        "description": skill.meta.description,
        "when_to_use": skill.meta.when_to_use,
        "argument_hint": skill.meta.argument_hint,
        "user_invocable": skill.meta.user_invocable,
        "model_invocable": skill.meta.model_invocable,
        "allowed_tools": skill.meta.allowed_tools,
        "source": skill.source.kind(),
        "source_label": skill.source.label(),
        "plugin": match &skill.source {
            crate::skills::Source::Plugin(name) => Some(name.as_str()),
            _ => None,
        },
        "location": skill.location(),
    })
}

async fn execute(command: SkillCommand) -> Result<Exit, Failure> {
    match command {
        SkillCommand::List { json, workspace } => {
            let skills = load(workspace).await?;
            let set = skills.set();
            if json {
                let value = json!({
                    "skills": set.skills().iter().map(|s| skill_json(s, &set.call_name(s))).collect::<Vec<_>>(),
                    "shadowed": set.shadowed().iter().map(|s| json!({
                        "name": s.name,
                        "winner": s.winner.label(),
                        "loser": skill_json(&s.loser, &s.loser.qualified_name()),
                    })).collect::<Vec<_>>(),
                    "warnings": set.warnings(),
                });
                println!("{value}");
                return Ok(Exit::Success);
            }
            for warning in set.warnings() {
                eprintln!("warning: {}", escape::message(&warning));
            }
            if set.skills().is_empty() {
                println!(
                    "no skills found; add one as .capstan/skills/NAME/SKILL.md, or install a plugin that has some"
                );
                return Ok(Exit::Success);
            }
            let names: Vec<String> = set
                .skills()
                .iter()
                .map(|s| match &s.meta.display_name {
                    Some(display) => format!("{} ({display})", set.call_name(s)),
                    None => set.call_name(s),
                })
                .collect();
            let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
            let source_width = set
                .skills()
                .iter()
                .map(|s| s.source.label().len())
                .max()
                .unwrap_or(0);
            for (skill, name) in set.skills().iter().zip(&names) {
                let description: String = skill.meta.description.chars().take(80).collect();
                println!(
                    "{:width$}  {:source_width$}  {:10}  {}",
                    escape::line(name),
                    escape::line(&skill.source.label()),
                    invocation(skill),
                    escape::line(&description),
                );
            }
            for shadowed in set.shadowed() {
                println!(
                    "{:width$}  {:source_width$}  not used: {} wins",
                    escape::line(&shadowed.name),
                    escape::line(&shadowed.loser.source.label()),
                    escape::line(&shadowed.winner.label())
                );
            }
            Ok(Exit::Success)
        }
        SkillCommand::Show { name, workspace } => {
            let skills = load(workspace).await?;
            let skill = skills
                .set()
                .resolve(&name)
                .map_err(|message| Failure::new(Exit::Usage, message))?;
            let meta = &skill.meta;
            println!("{}", escape::line(&skills.set().call_name(skill)));
            if let Some(display) = &meta.display_name {
                println!("  name as written {}", escape::line(display));
            }
            if skill.namespace().is_some() {
                println!("  qualified name {}", escape::line(&skill.qualified_name()));
            }
            println!("  description    {}", escape::line(&meta.description));
            if let Some(when) = &meta.when_to_use {
                println!("  when to use    {}", escape::line(when));
            }
            if let Some(hint) = &meta.argument_hint {
                println!("  arguments      {}", escape::line(hint));
            }
            println!("  source         {}", escape::line(&skill.source.label()));
            println!("  location       {}", escape::line(&skill.location()));
            println!("  run by         {}", invocation(skill));
            if !meta.arguments.is_empty() {
                println!(
                    "  named args     {}",
                    escape::line(&meta.arguments.join(", "))
                );
            }
            if !meta.allowed_tools.is_empty() {
                println!(
                    "  pre-approved   {}",
                    escape::line(&meta.allowed_tools.join(", "))
                );
            }
            if !meta.disallowed_tools.is_empty() {
                println!(
                    "  disallowed     {}",
                    escape::line(&meta.disallowed_tools.join(", "))
                );
            }
            for shadowed in skills
                .set()
                .shadowed()
                .iter()
                .filter(|s| s.name == meta.name)
            {
                println!(
                    "  also offered by {} ({}), not used",
                    escape::line(&shadowed.loser.source.label()),
                    escape::line(&shadowed.loser.location())
                );
            }
            match &skill.origin {
                Origin::File { body, .. } => {
                    if !crate::skills::text::inline_shell(body).is_empty() {
                        println!(
                            "  note           holds inline shell commands, which capstan never runs"
                        );
                    }
                    println!();
                    let body = escape::text(body);
                    print!("{body}");
                    if !body.ends_with('\n') {
                        println!();
                    }
                }
                Origin::Component { .. } => {
                    println!();
                    println!("(its text is computed by the plugin's component when loaded)");
                }
            }
            Ok(Exit::Success)
        }
    }
}
