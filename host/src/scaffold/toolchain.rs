//! The compilers a plugin project needs, and where capstan keeps them.
//!
//! componentize-py and componentize-js are installed, pinned, into
//! capstan's data folder (`<data>/toolchains`, or `$CAPSTAN_TOOLCHAINS`):
//! a virtualenv for Python, an npm prefix for JavaScript. Nothing is
//! installed into a project or system-wide. Rust uses the `cargo` on the
//! PATH with the `wasm32-wasip2` target, which rustup adds.
//!
//! [`Toolchains::missing`] says what a build needs that is not installed
//! yet, and [`Toolchains::install`] installs it: `capstan plugin build`
//! does so on first use unless told not to.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use super::{Lang, ProjectError};
use crate::home::Home;
use crate::progress::{Progress, Step};

/// The pinned componentize-py, as pip names it.
pub const COMPONENTIZE_PY: &str = "componentize-py==0.25.0";
/// The pinned componentize-js, as npm names it.
pub const COMPONENTIZE_JS: &str = "@bytecodealliance/componentize-js@0.23.0";
/// The Rust target plugins are built for.
pub const RUST_TARGET: &str = "wasm32-wasip2";

/// Written last by an install, so a half-finished one is not taken for a
/// working toolchain.
const INSTALLED_MARKER: &str = ".capstan-installed";

/// Where the toolchains live.
#[derive(Debug, Clone)]
pub struct Toolchains {
    dir: PathBuf,
}

impl Toolchains {
    /// `$CAPSTAN_TOOLCHAINS`, or `toolchains` under the data folder.
    pub fn new(home: &Home) -> Self {
        Self {
            dir: home.toolchains_dir().to_path_buf(),
        }
    }

    /// Toolchains kept in `dir`.
    pub fn at(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// The folder of one language's toolchain.
    pub fn dir(&self, lang: Lang) -> PathBuf {
        self.dir.join(lang.name())
    }

    /// The command that installs a language's toolchain by itself.
    pub fn install_command(lang: Lang) -> String {
        match lang {
            Lang::Rust => format!("rustup target add {RUST_TARGET}"),
            Lang::Python | Lang::Js => format!("capstan plugin toolchain {}", lang.name()),
        }
    }

    fn not_installed(lang: Lang, what: &str) -> ProjectError {
        ProjectError::MissingToolchain {
            lang,
            what: what.to_string(),
            install: Self::install_command(lang),
        }
    }

    fn installed(&self, lang: Lang, program: &Path, what: &str) -> Result<PathBuf, ProjectError> {
        if self.is_installed(lang, program) {
            Ok(program.to_path_buf())
        } else {
            Err(Self::not_installed(lang, what))
        }
    }

    fn is_installed(&self, lang: Lang, program: &Path) -> bool {
        self.dir(lang).join(INSTALLED_MARKER).is_file() && program.is_file()
    }

    fn componentize_py_path(&self) -> PathBuf {
        self.dir(Lang::Python).join("bin").join("componentize-py")
    }

    fn componentize_js_path(&self) -> PathBuf {
        self.dir(Lang::Js)
            .join("node_modules")
            .join(".bin")
            .join("componentize-js")
    }

    /// The componentize-py program.
    pub fn componentize_py(&self) -> Result<PathBuf, ProjectError> {
        self.installed(Lang::Python, &self.componentize_py_path(), COMPONENTIZE_PY)
    }

    /// The componentize-js program.
    pub fn componentize_js(&self) -> Result<PathBuf, ProjectError> {
        self.installed(Lang::Js, &self.componentize_js_path(), COMPONENTIZE_JS)
    }

    /// Checks that cargo and the wasm32-wasip2 target are there.
    pub fn rust(&self) -> Result<(), ProjectError> {
        if rust_target_missing()? {
            Err(Self::not_installed(Lang::Rust, &Self::what(Lang::Rust)))
        } else {
            Ok(())
        }
    }

    /// What [`Toolchains::install`] installs for `lang`, as its installer
    /// names it.
    pub fn what(lang: Lang) -> String {
        match lang {
            Lang::Rust => format!("the Rust target {RUST_TARGET}"),
            Lang::Python => COMPONENTIZE_PY.to_string(),
            Lang::Js => COMPONENTIZE_JS.to_string(),
        }
    }

    /// Where [`Toolchains::install`] puts `lang`'s toolchain, in words.
    pub fn location(&self, lang: Lang) -> String {
        match lang {
            Lang::Rust => "your active Rust toolchain (with rustup)".to_string(),
            Lang::Python | Lang::Js => self.dir(lang).display().to_string(),
        }
    }

    /// What building a `lang` plugin needs that is not installed yet and
    /// that [`Toolchains::install`] would put in place; `None` when all is
    /// there. An error when what is missing is not capstan's to install
    /// (cargo itself).
    pub fn missing(&self, lang: Lang) -> Result<Option<Missing>, ProjectError> {
        let is_missing = match lang {
            Lang::Python => !self.is_installed(lang, &self.componentize_py_path()),
            Lang::Js => !self.is_installed(lang, &self.componentize_js_path()),
            Lang::Rust => rust_target_missing()?,
        };
        Ok(is_missing.then(|| Missing {
            lang,
            what: Self::what(lang),
            into: self.location(lang),
        }))
    }

    /// Installs a language's toolchain: componentize-py or componentize-js
    /// into its folder here, or the Rust target with rustup. What the
    /// installers print is shown as `progress` says, and repeated in the
    /// error if they fail and it is no longer on the screen.
    pub fn install(&self, lang: Lang, progress: Progress) -> Result<(), ProjectError> {
        let dir = self.dir(lang);
        let marker = dir.join(INSTALLED_MARKER);
        let _ = std::fs::remove_file(&marker);
        let what = Self::what(lang);
        let shown = progress.start(&format!("installing {what}"));
        match lang {
            Lang::Rust => run(
                &shown,
                Command::new("rustup").args(["target", "add", RUST_TARGET]),
                "rustup target add",
                "rustup (https://rustup.rs)",
            )?,
            Lang::Python => {
                run(
                    &shown,
                    Command::new("python3").arg("-m").arg("venv").arg(&dir),
                    "python3 -m venv",
                    "Python 3.10 or later with its venv module (e.g. `apt-get install python3 python3-venv`)",
                )?;
                run(
                    &shown,
                    Command::new(dir.join("bin").join("pip")).args([
                        "install",
                        "--disable-pip-version-check",
                        COMPONENTIZE_PY,
                    ]),
                    "pip install",
                    "pip",
                )?;
            }
            Lang::Js => {
                std::fs::create_dir_all(&dir).map_err(|source| ProjectError::Io {
                    action: "create",
                    path: dir.clone(),
                    source,
                })?;
                run(
                    &shown,
                    Command::new("npm")
                        .arg("install")
                        .arg("--prefix")
                        .arg(&dir)
                        .args(["--no-audit", "--no-fund", COMPONENTIZE_JS]),
                    "npm install",
                    "Node.js 18 or later with npm (e.g. `apt-get install nodejs npm`)",
                )?;
            }
        }
        let program = match lang {
            Lang::Rust => None,
            Lang::Python => Some(self.componentize_py_path()),
            Lang::Js => Some(self.componentize_js_path()),
        };
        if let Some(program) = program {
            if !program.is_file() {
                return Err(ProjectError::StepFailed {
                    step: format!("installing {what}"),
                    status: None,
                    output: format!(
                        "the installer finished but {} is not there",
                        program.display()
                    ),
                });
            }
            super::write(&marker, b"")?;
        }
        Ok(())
    }
}

/// A toolchain part that is not installed yet and that
/// [`Toolchains::install`] puts in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The language it builds.
    pub lang: Lang,
    /// What is missing, as its installer names it
    /// (`componentize-py==0.25.0`).
    pub what: String,
    /// Where the install puts it.
    pub into: String,
}

/// Whether rustup reports the wasm32-wasip2 target missing; an error when
/// there is no cargo at all. Without rustup (a distribution's Rust) the
/// target counts as there, and cargo says what is wrong.
fn rust_target_missing() -> Result<bool, ProjectError> {
    if Command::new("cargo").arg("--version").output().is_err() {
        return Err(ProjectError::MissingToolchain {
            lang: Lang::Rust,
            what: "cargo".to_string(),
            install:
                "curl --proto '=https' -sSf https://sh.rustup.rs | sh   (see https://rustup.rs)"
                    .to_string(),
        });
    }
    Ok(Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .is_ok_and(|out| {
            out.status.success()
                && !String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .any(|l| l.trim() == RUST_TARGET)
        }))
}

/// The most lines of an installer's output an error repeats.
const TAIL_LINES: usize = 30;

/// Runs an installer step, showing what it prints as `shown` says.
fn run(shown: &Step, command: &mut Command, step: &str, needs: &str) -> Result<(), ProjectError> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|e| ProjectError::StepFailed {
        step: step.to_string(),
        status: None,
        output: format!("cannot run it ({e}); this needs {needs}"),
    })?;
    let tail = Mutex::new(VecDeque::new());
    let streams: [Option<Box<dyn Read + Send>>; 2] = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ];
    std::thread::scope(|scope| {
        for stream in streams.into_iter().flatten() {
            let tail = &tail;
            scope.spawn(move || relay(stream, shown, tail));
        }
    });
    let status = child.wait().map_err(|e| ProjectError::StepFailed {
        step: step.to_string(),
        status: None,
        output: format!("cannot wait for it: {e}"),
    })?;
    if status.success() {
        return Ok(());
    }
    let output = if shown.keeps_output() {
        "its output is above".to_string()
    } else {
        let tail = tail.into_inner().unwrap_or_else(|e| e.into_inner());
        Vec::from(tail).join("\n")
    };
    Err(ProjectError::StepFailed {
        step: step.to_string(),
        status: status.code(),
        output,
    })
}

/// Passes the lines a program prints to the progress shown, keeping the
/// last ones for an error.
fn relay(stream: impl Read, shown: &Step, tail: &Mutex<VecDeque<String>>) {
    for line in BufReader::new(stream).split(b'\n').map_while(Result::ok) {
        let text = String::from_utf8_lossy(&line);
        // A line redrawn with carriage returns: its last state.
        let Some(text) = text
            .split('\r')
            .map(str::trim_end)
            .rfind(|part| !part.is_empty())
        else {
            continue;
        };
        shown.output(text);
        let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
        if tail.len() == TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(text.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_toolchain_names_the_command_that_installs_it() {
        let dir = tempfile::tempdir().unwrap();
        let tc = Toolchains::at(dir.path().to_path_buf());
        let err = tc.componentize_py().unwrap_err().to_string();
        assert!(err.contains("componentize-py==0.25.0"), "{err}");
        assert!(err.contains("capstan plugin toolchain python"), "{err}");
        let err = tc.componentize_js().unwrap_err().to_string();
        assert!(err.contains("capstan plugin toolchain js"), "{err}");
    }

    #[test]
    fn a_half_installed_toolchain_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let tc = Toolchains::at(dir.path().to_path_buf());
        let bin = tc.dir(Lang::Python).join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("componentize-py"), "").unwrap();
        assert!(tc.componentize_py().is_err());
        let missing = tc.missing(Lang::Python).unwrap().unwrap();
        assert_eq!(missing.what, COMPONENTIZE_PY);
        assert_eq!(missing.into, tc.dir(Lang::Python).display().to_string());
        std::fs::write(tc.dir(Lang::Python).join(INSTALLED_MARKER), "").unwrap();
        assert!(tc.componentize_py().is_ok());
        assert_eq!(tc.missing(Lang::Python).unwrap(), None);
    }
}
