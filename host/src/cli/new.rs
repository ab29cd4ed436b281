//! `capstan new` and `capstan plugin build|toolchain`: plugin projects in
//! Rust, Python and JavaScript.

use std::path::{Path, PathBuf};

use super::Exit;
use crate::home::Home;
use crate::scaffold::toolchain::Toolchains;
use crate::scaffold::{Kind, Lang, ProjectError, build, new};

/// `capstan new KIND NAME --lang LANG`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  capstan new tool weather --lang python
  capstan new hook guard --lang js
  capstan new skill review                  # a SKILL.md: nothing to build
  capstan new skill changelog --lang rust   # a skill whose text is computed

Then: cd NAME && capstan plugin build && capstan plugin install . --yes")]
pub struct NewArgs {
    /// What the plugin offers: tool, hook or skill.
    #[arg(value_parser = parse_kind)]
    kind: Kind,
    /// The plugin's name: lowercase letters, digits, - and _.
    name: String,
    /// The language: rust, python or js. A skill without one is written
    /// in Markdown (a SKILL.md).
    #[arg(long, short = 'l', value_parser = parse_lang)]
    lang: Option<Lang>,
    /// The folder to create (default: ./NAME).
    #[arg(long)]
    dir: Option<PathBuf>,
}

fn parse_kind(s: &str) -> Result<Kind, String> {
    s.parse()
}

fn parse_lang(s: &str) -> Result<Lang, String> {
    s.parse()
}

/// Runs `capstan new`.
pub fn run_new(args: NewArgs) -> Exit {
    if let Err(message) = new::check_name(&args.name) {
        eprintln!("error: {message}");
        return Exit::Usage;
    }
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&args.name));
    let Some(lang) = args.lang else {
        if args.kind != Kind::Skill {
            eprintln!(
                "error: `capstan new {}` needs a language: --lang rust, python or js (only a skill can be written without one, as a SKILL.md)",
                args.kind.name()
            );
            return Exit::Usage;
        }
        return new_markdown_skill(&dir, &args.name);
    };
    match new::create(&dir, &args.name, args.kind, lang) {
        Ok(created) => {
            println!(
                "created {} {} `{}` in {}",
                lang,
                args.kind.name(),
                args.name,
                created.dir.display()
            );
            for file in &created.files {
                println!("  {file}");
            }
            let cd = shell_path(&created.dir);
            let test = format!("{:<21}# its own tests", created.test_command);
            // Rust's tests need the SDK the build writes into .capstan/.
            let steps = if lang == Lang::Rust {
                format!("capstan plugin build\n  {test}")
            } else {
                format!("{test}\n  capstan plugin build")
            };
            println!("\nNext:\n  cd {cd}\n  {steps}\n  capstan plugin install . --yes");
            if args.kind == Kind::Tool {
                println!(
                    "  capstan tool call {}.hello '{{\"name\":\"Ada\"}}'",
                    args.name
                );
            }
            Exit::Success
        }
        Err(err) => project_error(&err),
    }
}

/// `capstan new skill NAME` without a language.
fn new_markdown_skill(dir: &Path, name: &str) -> Exit {
    match new::create_markdown_skill(dir, name) {
        Ok(created) => {
            println!(
                "created skill `{name}` (Markdown) in {}",
                created.dir.display()
            );
            for file in &created.files {
                println!("  {file}");
            }
            let cd = shell_path(&created.dir);
            println!(
                "\nEdit skills/{name}/SKILL.md, then:\n  cd {cd}\n  capstan plugin install . --yes\n  capstan skill show {name}\n  capstan -p \"/{name} src/\""
            );
            Exit::Success
        }
        Err(err) => project_error(&err),
    }
}

/// Reports a project error: a usage error for a bad name or an existing
/// folder, any other a failure.
fn project_error(err: &ProjectError) -> Exit {
    eprintln!("error: {err}");
    match err {
        ProjectError::Exists(_) | ProjectError::Config { .. } => Exit::Usage,
        _ => Exit::Error,
    }
}

fn shell_path(path: &Path) -> String {
    let text = path.display().to_string();
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
    {
        text
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// The toolchains in capstan's data folder, or the error saying why that
/// folder is unknown.
fn toolchains() -> Result<Toolchains, Exit> {
    match Home::from_env() {
        Ok(home) => Ok(Toolchains::new(&home)),
        Err(err) => {
            eprintln!("error: {err}");
            Err(Exit::Error)
        }
    }
}

/// Runs `capstan plugin build [DIR]`.
pub fn run_build(dir: &Path) -> Exit {
    if build::is_markdown_only(dir) {
        println!(
            "nothing to build: {} holds skills written in Markdown only; install it with `capstan plugin install {} --yes`",
            dir.display(),
            shell_path(dir)
        );
        return Exit::Success;
    }
    let toolchains = match toolchains() {
        Ok(toolchains) => toolchains,
        Err(exit) => return exit,
    };
    eprintln!("building {}...", dir.display());
    match build::build(dir, &toolchains) {
        Ok(report) => {
            if let Some(sdk) = &report.sdk_refreshed {
                eprintln!("  wrote {} (the SDK of this capstan)", sdk.display());
            }
            println!(
                "built {} ({} component, {:.1} MB) in {:.1}s",
                report.component.display(),
                report.lang,
                report.size as f64 / 1e6,
                report.elapsed.as_secs_f64()
            );
            Exit::Success
        }
        Err(err) => {
            eprintln!("error: {err}");
            match err {
                ProjectError::Config { .. } => Exit::Usage,
                _ => Exit::Error,
            }
        }
    }
}

/// Runs `capstan plugin toolchain LANG`.
pub fn run_toolchain(lang: &str) -> Exit {
    let lang = match lang.parse::<Lang>() {
        Ok(lang) => lang,
        Err(message) => {
            eprintln!("error: {message}");
            return Exit::Usage;
        }
    };
    let toolchains = match toolchains() {
        Ok(toolchains) => toolchains,
        Err(exit) => return exit,
    };
    match toolchains.install(lang) {
        Ok(dir) => {
            println!("installed the {lang} toolchain in {}", dir.display());
            Exit::Success
        }
        Err(err) => {
            eprintln!("error: {err}");
            Exit::Error
        }
    }
}
