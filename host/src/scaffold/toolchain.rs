//! The compilers a plugin project needs, and where capstan keeps them.
//!
//! componentize-py and componentize-js are installed, pinned, into
//! capstan's data folder (`<data>/toolchains`, or `$CAPSTAN_TOOLCHAINS`):
//! a virtualenv for Python, an npm prefix for JavaScript. Nothing is
//! installed into a project or system-wide. Rust uses the `cargo` on the
//! PATH with the `wasm32-wasip2` target.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Lang, ProjectError};
use crate::home::Home;

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

    /// The command that installs a language's toolchain.
    pub fn install_command(lang: Lang) -> String {
        match lang {
            Lang::Rust => format!("rustup target add {RUST_TARGET}"),
            Lang::Python | Lang::Js => format!("capstan plugin toolchain {}", lang.name()),
        }
    }

    fn missing(lang: Lang, what: &str) -> ProjectError {
        ProjectError::MissingToolchain {
            lang,
            what: what.to_string(),
            install: Self::install_command(lang),
        }
    }

    fn installed(&self, lang: Lang, program: &Path, what: &str) -> Result<PathBuf, ProjectError> {
        if self.dir(lang).join(INSTALLED_MARKER).is_file() && program.is_file() {
            Ok(program.to_path_buf())
        } else {
            Err(Self::missing(lang, what))
        }
    }

    /// The componentize-py program.
    pub fn componentize_py(&self) -> Result<PathBuf, ProjectError> {
        let program = self.dir(Lang::Python).join("bin").join("componentize-py");
        self.installed(Lang::Python, &program, COMPONENTIZE_PY)
    }

    /// The componentize-js program.
    pub fn componentize_js(&self) -> Result<PathBuf, ProjectError> {
        let program = self
            .dir(Lang::Js)
            .join("node_modules")
            .join(".bin")
            .join("componentize-js");
        self.installed(Lang::Js, &program, COMPONENTIZE_JS)
    }

    /// Checks that cargo and the wasm32-wasip2 target are there.
    pub fn rust(&self) -> Result<(), ProjectError> {
        if Command::new("cargo").arg("--version").output().is_err() {
            return Err(ProjectError::MissingToolchain {
                lang: Lang::Rust,
                what: "cargo".to_string(),
                install:
                    "curl --proto '=https' -sSf https://sh.rustup.rs | sh   (see https://rustup.rs)"
                        .to_string(),
            });
        }
        // Without rustup (a distribution's Rust), let cargo say what is wrong.
        if let Ok(out) = Command::new("rustup")
            .args(["target", "list", "--installed"])
            .output()
            && out.status.success()
            && !String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l.trim() == RUST_TARGET)
        {
            return Err(Self::missing(
                Lang::Rust,
                &format!("the Rust target {RUST_TARGET}"),
            ));
        }
        Ok(())
    }

    /// Installs a language's toolchain, showing the installer's output.
    pub fn install(&self, lang: Lang) -> Result<PathBuf, ProjectError> {
        let dir = self.dir(lang);
        let marker = dir.join(INSTALLED_MARKER);
        let _ = std::fs::remove_file(&marker);
        let result = match lang {
            Lang::Rust => run(
                Command::new("rustup").args(["target", "add", RUST_TARGET]),
                "rustup target add",
                "rustup (https://rustup.rs)",
            ),
            Lang::Python => {
                let venv = run(
                    Command::new("python3").arg("-m").arg("venv").arg(&dir),
                    "python3 -m venv",
                    "Python 3.10 or later with its venv module (e.g. `apt-get install python3 python3-venv`)",
                );
                venv.and_then(|()| {
                    run(
                        Command::new(dir.join("bin").join("pip")).args([
                            "install",
                            "--disable-pip-version-check",
                            COMPONENTIZE_PY,
                        ]),
                        "pip install",
                        "pip",
                    )
                })
            }
            Lang::Js => {
                let created = std::fs::create_dir_all(&dir).map_err(|source| ProjectError::Io {
                    action: "create",
                    path: dir.clone(),
                    source,
                });
                created.and_then(|()| {
                    run(
                        Command::new("npm")
                            .arg("install")
                            .arg("--prefix")
                            .arg(&dir)
                            .args(["--no-audit", "--no-fund", COMPONENTIZE_JS]),
                        "npm install",
                        "Node.js 18 or later with npm (e.g. `apt-get install nodejs npm`)",
                    )
                })
            }
        };
        result?;
        if lang != Lang::Rust {
            super::write(&marker, b"")?;
        }
        Ok(dir)
    }
}

/// Runs an installer step with its output shown.
fn run(command: &mut Command, step: &str, needs: &str) -> Result<(), ProjectError> {
    let status = command.status().map_err(|e| ProjectError::StepFailed {
        step: step.to_string(),
        status: None,
        output: format!("cannot run it ({e}); this needs {needs}"),
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(ProjectError::StepFailed {
            step: step.to_string(),
            status: status.code(),
            output: "its output is above".to_string(),
        })
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
        std::fs::write(tc.dir(Lang::Python).join(INSTALLED_MARKER), "").unwrap();
        assert!(tc.componentize_py().is_ok());
    }
}
