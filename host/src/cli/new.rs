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
  capstan new skill review --lang rust --dir plugins/review

Then: cd NAME && capstan plugin build && capstan plugin install . --yes")]
pub struct NewArgs {
    /// What the plugin offers: tool, hook or skill.
    #[arg(value_parser = parse_kind)]
    kind: Kind,
    /// The plugin's name: lowercase letters, digits, - and _.
    name: String,
    /// The language: rust, python or js.
    #[arg(long, short = 'l', value_parser = parse_lang)]
    lang: Lang,
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
    match new::create(&dir, &args.name, args.kind, args.lang) {
        Ok(created) => {
            println!(
                "created {} {} `{}` in {}",
                args.lang,
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
            let steps = if args.lang == Lang::Rust {
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
        Err(err @ ProjectError::Exists(_)) | Err(err @ ProjectError::Config { .. }) => {
            eprintln!("error: {err}");
            Exit::Usage
        }
        Err(err) => {
            eprintln!("error: {err}");
            Exit::Error
        }
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

/// Runs `capstan plugin build [DIR]`.
pub fn run_build(dir: &Path) -> Exit {
    let home = match Home::from_env() {
        Ok(home) => home,
        Err(err) => {
            eprintln!("error: {err}");
            return Exit::Error;
        }
    };
    let toolchains = Toolchains::new(&home);
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
    let home = match Home::from_env() {
        Ok(home) => home,
        Err(err) => {
            eprintln!("error: {err}");
            return Exit::Error;
        }
    };
    let toolchains = Toolchains::new(&home);
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
