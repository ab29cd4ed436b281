//! `capstan new` and `capstan plugin build|toolchain`: plugin projects in
//! Rust, Python and JavaScript.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::Exit;
use crate::home::Home;
use crate::progress::Progress;
use crate::scaffold::build::BuildConfig;
use crate::scaffold::toolchain::{Missing, Toolchains};
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

/// Runs `capstan plugin build [DIR]`, first installing the toolchain the
/// project's language needs if it is missing and `install_missing`.
pub fn run_build(dir: &Path, install_missing: bool) -> Exit {
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
    let progress = Progress::for_stderr();
    if install_missing && let Err(exit) = install_missing_toolchain(dir, &toolchains, progress) {
        return exit;
    }
    let label = format!("building {}", project_name(dir));
    let shown = progress.start(&label);
    if !shown.is_drawn() {
        eprintln!("{label}...");
    }
    let built = build::build(dir, &toolchains);
    shown.finish();
    match built {
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
            if matches!(err, ProjectError::MissingToolchain { .. }) && !install_missing {
                eprintln!("(without --no-install, `capstan plugin build` installs it by itself)");
            }
            match err {
                ProjectError::Config { .. } => Exit::Usage,
                _ => Exit::Error,
            }
        }
    }
}

/// How a project folder is named in progress: its own name, also when it
/// is given as `.`.
fn project_name(dir: &Path) -> String {
    dir.canonicalize()
        .ok()
        .and_then(|full| full.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| dir.display().to_string())
}

/// Installs what the project in `dir` needs to build and is missing,
/// saying what and where; nothing when all is there.
fn install_missing_toolchain(
    dir: &Path,
    toolchains: &Toolchains,
    progress: Progress,
) -> Result<(), Exit> {
    let needed = BuildConfig::read(dir).and_then(|config| toolchains.missing(config.lang));
    let missing = match needed {
        Ok(Some(missing)) => missing,
        Ok(None) => return Ok(()),
        // The build reports a bad project and a missing cargo in full.
        Err(_) => return Ok(()),
    };
    eprintln!(
        "{} is not installed yet; installing it into {} (once: later builds reuse it; --no-install stops instead)",
        missing.what, missing.into
    );
    match install(toolchains, &missing, progress) {
        Exit::Success => Ok(()),
        exit => Err(exit),
    }
}

/// Installs a missing toolchain, saying how long it took or why it failed.
fn install(toolchains: &Toolchains, missing: &Missing, progress: Progress) -> Exit {
    let started = Instant::now();
    match toolchains.install(missing.lang, progress) {
        Ok(()) => {
            eprintln!(
                "installed {} in {:.1}s",
                missing.what,
                started.elapsed().as_secs_f64()
            );
            Exit::Success
        }
        Err(err) => {
            eprintln!(
                "error: could not install {} into {}: {err}
Nothing was built. Fix what the installer reports and run the command again; or install it yourself with `{}`.",
                missing.what,
                missing.into,
                Toolchains::install_command(missing.lang)
            );
            Exit::Error
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
    let missing = match toolchains.missing(lang) {
        Ok(Some(missing)) => missing,
        // Installing again repairs a toolchain that was changed by hand.
        Ok(None) => Missing {
            lang,
            what: Toolchains::what(lang),
            into: toolchains.location(lang),
        },
        Err(err) => {
            eprintln!("error: {err}");
            return Exit::Error;
        }
    };
    eprintln!("installing {} into {}", missing.what, missing.into);
    let exit = install(&toolchains, &missing, Progress::for_stderr());
    if exit == Exit::Success {
        println!(
            "installed the {lang} toolchain in {}",
            toolchains.location(lang)
        );
    }
    exit
}
