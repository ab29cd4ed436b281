//! `capstan plugin build`: turns a project into its component.
//!
//! Python goes through componentize-py, JavaScript through componentize-js,
//! Rust through `cargo build --target wasm32-wasip2`. The world the
//! component is built for is written from the project's `[build]` table and
//! its manifest: it exports what `exports` lists, and imports `wasi:http`
//! only when the manifest requests network access, so a plugin that asks
//! for no network is built without it (and could not use it anyway).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::embedded::{self, WASI_VERSION};
use super::toolchain::{RUST_TARGET, Toolchains};
use super::{Kind, Lang, ProjectError};
use crate::plugin::manifest::{MANIFEST_FILE, Manifest};

/// The hidden folder a build writes its inputs and intermediate files to.
pub const WORK_DIR: &str = ".capstan";

/// How a project is built, from `[build]` in its `plugin.toml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildConfig {
    /// The language.
    pub lang: Lang,
    /// Python and JavaScript: the module that registers the tools, relative
    /// to the project.
    pub source: Option<String>,
    /// What the component exports.
    pub exports: Vec<Kind>,
}

const BUILD_KEYS: &[&str] = &["lang", "source", "exports"];

impl BuildConfig {
    /// Reads `[build]` from the `plugin.toml` of the project in `dir`.
    pub fn read(dir: &Path) -> Result<Self, ProjectError> {
        let path = dir.join(MANIFEST_FILE);
        Self::parse(&super::read(&path)?, &path)
    }

    /// Reads `[build]` from the manifest's text.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ProjectError> {
        let config = |message: String| ProjectError::Config {
            path: path.to_path_buf(),
            message,
        };
        let doc: toml::Table = toml::from_str(text).map_err(|e| config(e.to_string()))?;
        let Some(table) = doc.get("build") else {
            return Err(config(
                "no [build] table, so capstan does not know how to build this plugin; add one such as\n\n[build]\nlang = \"python\"   # or \"js\", \"rust\"\nsource = \"app.py\"\nexports = [\"tool\"]".to_string(),
            ));
        };
        let Some(table) = table.as_table() else {
            return Err(config("`build` must be a table: [build]".to_string()));
        };
        if let Some(key) = table.keys().find(|k| !BUILD_KEYS.contains(&k.as_str())) {
            return Err(config(format!(
                "unknown key `build.{key}`; [build] takes {}",
                BUILD_KEYS.join(", ")
            )));
        }
        let lang =
            match table.get("lang") {
                Some(toml::Value::String(s)) => s
                    .parse::<Lang>()
                    .map_err(|e| config(format!("`build.lang`: {e}")))?,
                Some(_) => {
                    return Err(config(
                        "`build.lang` must be a string: \"rust\", \"python\" or \"js\"".to_string(),
                    ));
                }
                None => return Err(config(
                    "missing `build.lang`; add lang = \"rust\", \"python\" or \"js\" under [build]"
                        .to_string(),
                )),
            };
        let source = match table.get("source") {
            Some(toml::Value::String(s)) => {
                let p = Path::new(s);
                if p.is_absolute()
                    || p.components()
                        .any(|c| matches!(c, std::path::Component::ParentDir))
                {
                    return Err(config(format!(
                        "`build.source` \"{s}\" must be a path inside the project"
                    )));
                }
                Some(s.clone())
            }
            Some(_) => {
                return Err(config(
                    "`build.source` must be a string such as \"app.py\"".to_string(),
                ));
            }
            None => match lang {
                Lang::Python => Some("app.py".to_string()),
                Lang::Js => Some("app.js".to_string()),
                Lang::Rust => None,
            },
        };
        let exports = match table.get("exports") {
            None => vec![Kind::Tool],
            Some(toml::Value::Array(items)) => {
                let mut kinds = Vec::new();
                for item in items {
                    let kind = item
                        .as_str()
                        .ok_or_else(|| {
                            config(
                                "`build.exports` lists strings: \"tool\", \"hook\", \"skill\""
                                    .to_string(),
                            )
                        })?
                        .parse::<Kind>()
                        .map_err(|e| config(format!("`build.exports`: {e}")))?;
                    if !kinds.contains(&kind) {
                        kinds.push(kind);
                    }
                }
                if kinds.is_empty() {
                    return Err(config("`build.exports` is empty; list at least one of \"tool\", \"hook\", \"skill\"".to_string()));
                }
                kinds
            }
            Some(_) => {
                return Err(config(
                    "`build.exports` must be a list such as [\"tool\"]".to_string(),
                ));
            }
        };
        Ok(Self {
            lang,
            source,
            exports,
        })
    }
}

/// What a build produced.
#[derive(Debug, Clone)]
pub struct BuildReport {
    /// The component file.
    pub component: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// How long the build took.
    pub elapsed: Duration,
    /// The language.
    pub lang: Lang,
    /// The SDK file rewritten because it was missing or out of date.
    pub sdk_refreshed: Option<PathBuf>,
}

/// Whether the project in `dir` is skills written in Markdown only: no
/// components and no `[build]` table, so there is nothing to build.
pub fn is_markdown_only(dir: &Path) -> bool {
    let path = dir.join(MANIFEST_FILE);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return false;
    };
    let Ok(manifest) = Manifest::parse(&text, &path) else {
        return false;
    };
    let has_build = toml::from_str::<toml::Table>(&text).is_ok_and(|doc| doc.contains_key("build"));
    manifest.components.is_empty() && !has_build && dir.join("skills").is_dir()
}

/// Builds the project in `dir`.
pub fn build(dir: &Path, toolchains: &Toolchains) -> Result<BuildReport, ProjectError> {
    let started = Instant::now();
    let manifest_path = dir.join(MANIFEST_FILE);
    let text = super::read(&manifest_path)?;
    let manifest = Manifest::parse(&text, &manifest_path).map_err(|e| ProjectError::Config {
        path: manifest_path.clone(),
        message: e.to_string(),
    })?;
    let config = BuildConfig::parse(&text, &manifest_path)?;
    let [component] = manifest.components.as_slice() else {
        return Err(ProjectError::Config {
            path: manifest_path,
            message: format!(
                "`components` lists {} files; a built project has exactly one, the file the build writes (such as components = [\"{}.wasm\"])",
                manifest.components.len(),
                manifest.name
            ),
        });
    };
    let output = dir.join(component);
    let net = !manifest.capabilities.net.is_empty();
    // Find the toolchain before writing anything.
    let program = match config.lang {
        Lang::Python => Some(toolchains.componentize_py()?),
        Lang::Js => Some(toolchains.componentize_js()?),
        Lang::Rust => {
            toolchains.rust()?;
            None
        }
    };
    let work = dir.join(WORK_DIR);
    write_wit(&work.join("wit"), &config, net)?;
    let mut sdk_refreshed = None;
    if let Some(source) = &config.source {
        let source_path = dir.join(source);
        if !source_path.is_file() {
            return Err(ProjectError::Config {
                path: manifest_path,
                message: format!(
                    "`build.source` names {source}, which does not exist in {}",
                    dir.display()
                ),
            });
        }
        let (file, contents) = match config.lang {
            Lang::Python => ("capstan.py", embedded::PYTHON_SDK),
            _ => ("capstan.js", embedded::JS_SDK),
        };
        let sdk = source_path.parent().unwrap_or(dir).join(file);
        if super::refresh(&sdk, contents)? {
            sdk_refreshed = Some(sdk);
        }
    }
    let partial = work.join("component.wasm.partial");
    let _ = std::fs::remove_file(&partial);
    match (config.lang, program) {
        (Lang::Python, Some(program)) => build_python(dir, &work, &config, &program, &partial)?,
        (Lang::Js, Some(program)) => build_js(dir, &work, &config, &program, net, &partial)?,
        _ => build_rust(dir, &work, &partial)?,
    }
    if !net {
        drop_socket_imports(&partial)?;
    }
    if let Some(parent) = output.parent() {
        std::fs::create_dir_all(parent).map_err(|source| ProjectError::Io {
            action: "create",
            path: parent.to_path_buf(),
            source,
        })?;
    }
    std::fs::rename(&partial, &output).map_err(|source| ProjectError::Io {
        action: "write",
        path: output.clone(),
        source,
    })?;
    let size = std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
    Ok(BuildReport {
        component: output,
        size,
        elapsed: started.elapsed(),
        lang: config.lang,
        sdk_refreshed,
    })
}

/// Replaces the `wasi:sockets` imports a language runtime carries (every
/// componentize-py component has them) by trapping stubs, so a plugin that
/// requests no network imports nothing of the network and installs.
fn drop_socket_imports(component: &Path) -> Result<(), ProjectError> {
    let bytes = std::fs::read(component).map_err(|source| ProjectError::Io {
        action: "read",
        path: component.to_path_buf(),
        source,
    })?;
    let stubbed =
        super::socket_stubs::stub_socket_imports(&bytes).map_err(|e| ProjectError::StepFailed {
            step: "replacing the runtime's unused wasi:sockets imports".to_string(),
            status: None,
            output: e.to_string(),
        })?;
    if let Some(stubbed) = stubbed {
        std::fs::write(component, stubbed).map_err(|source| ProjectError::Io {
            action: "write",
            path: component.to_path_buf(),
            source,
        })?;
    }
    Ok(())
}

/// The world the component is built for.
fn world(config: &BuildConfig, net: bool) -> String {
    let mut world = String::from(
        "// Written by `capstan plugin build` from plugin.toml; changes are lost.\npackage capstan:plugin@0.1.0;\n\nworld build {\n    import host;\n",
    );
    // componentize-js reaches files only through bindings it is given.
    if config.lang == Lang::Js {
        world.push_str(&format!(
            "    import wasi:filesystem/preopens@{WASI_VERSION};\n    import wasi:cli/environment@{WASI_VERSION};\n"
        ));
    }
    // componentize-py's `capstan.fetch` needs wasi:http bindings; a plugin
    // without a network request is built without them.
    if config.lang == Lang::Python && net {
        world.push_str(&format!(
            "    import wasi:http/outgoing-handler@{WASI_VERSION};\n"
        ));
    }
    for kind in &config.exports {
        world.push_str(&format!("    export {};\n", kind.name()));
    }
    world.push_str("}\n");
    world
}

/// Writes the plugin WIT, the WASI packages and the build world.
fn write_wit(dir: &Path, config: &BuildConfig, net: bool) -> Result<(), ProjectError> {
    for (name, text) in embedded::PLUGIN_WIT {
        super::refresh(&dir.join(name), text)?;
    }
    for (name, text) in embedded::WASI_WIT {
        super::refresh(
            &dir.join("deps").join(name).join(format!("{name}.wit")),
            text,
        )?;
    }
    super::refresh(&dir.join("build.wit"), &world(config, net))?;
    Ok(())
}

/// The module name of a Python source file (`app.py` -> `app`).
fn module_name(source: &str) -> String {
    Path::new(source)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "app".to_string())
}

fn build_python(
    dir: &Path,
    work: &Path,
    config: &BuildConfig,
    program: &Path,
    output: &Path,
) -> Result<(), ProjectError> {
    let source = config.source.as_deref().unwrap_or("app.py");
    let source_dir = dir.join(source);
    let source_dir = source_dir.parent().unwrap_or(dir);
    let mut entry = format!(
        "# Written by `capstan plugin build`; changes are lost.\nimport {}  # registers the tools, hooks and skills\n",
        module_name(source)
    );
    for kind in &config.exports {
        let (export, class) = match kind {
            Kind::Tool => ("ToolExport", "Tool"),
            Kind::Hook => ("HookExport", "Hook"),
            Kind::Skill => ("SkillExport", "Skill"),
        };
        entry.push_str(&format!("from capstan import {export} as {class}\n"));
    }
    let entry_dir = work.join("python");
    super::refresh(&entry_dir.join("capstan_entry.py"), &entry)?;
    let mut command = Command::new(program);
    command
        .current_dir(dir)
        .arg("-d")
        .arg(work.join("wit"))
        .args(["-w", "build", "componentize", "capstan_entry", "-p"])
        .arg(&entry_dir)
        .arg("-p")
        .arg(source_dir)
        .arg("-o")
        .arg(output);
    run_step(&mut command, "componentize-py")
}

fn build_js(
    dir: &Path,
    work: &Path,
    config: &BuildConfig,
    program: &Path,
    net: bool,
    output: &Path,
) -> Result<(), ProjectError> {
    let source = config.source.as_deref().unwrap_or("app.js");
    let sdk = Path::new(source)
        .parent()
        .map(|p| p.join("capstan.js"))
        .unwrap_or_else(|| PathBuf::from("capstan.js"));
    let sdk = sdk.to_string_lossy().replace('\\', "/");
    let mut entry = format!(
        "// Written by `capstan plugin build`; changes are lost.\nimport * as host from \"capstan:plugin/host@0.1.0\";\nimport * as preopens from \"wasi:filesystem/preopens@{WASI_VERSION}\";\nimport * as environment from \"wasi:cli/environment@{WASI_VERSION}\";\nimport {{ bindHost, warmUp }} from \"../{sdk}\";\nimport \"../{source}\";\n\nbindHost({{ host, preopens, environment }});\n// Run once while the component is built, so every call starts warm.\nawait warmUp();\n"
    );
    for kind in &config.exports {
        entry.push_str(&format!(
            "export {{ {}Export as {} }} from \"../{sdk}\";\n",
            kind.name(),
            kind.name()
        ));
    }
    let entry_path = work.join("entry.js");
    super::refresh(&entry_path, &entry)?;
    let mut command = Command::new(program);
    command
        .current_dir(dir)
        .arg(&entry_path)
        .arg("-w")
        .arg(work.join("wit"))
        .args(["-n", "build", "-o"])
        .arg(output)
        // No incoming HTTP for a plugin; outgoing only with a network request.
        .args(["-d", "fetch-event"]);
    if !net {
        command.args(["-d", "http"]);
    }
    run_step(&mut command, "componentize-js")
}

fn build_rust(dir: &Path, work: &Path, output: &Path) -> Result<(), ProjectError> {
    let sdk = work.join("sdk").join("rust");
    for (path, text) in embedded::RUST_SDK {
        super::refresh(&sdk.join(path), text)?;
    }
    for (name, text) in embedded::PLUGIN_WIT {
        super::refresh(&sdk.join("wit").join(name), text)?;
    }
    super::refresh(&sdk.join("Cargo.toml"), &embedded::rust_sdk_manifest())?;
    let cargo_toml = dir.join("Cargo.toml");
    let crate_name =
        crate_name(&super::read(&cargo_toml)?).ok_or_else(|| ProjectError::Config {
            path: cargo_toml.clone(),
            message: "no `name` under [package]".to_string(),
        })?;
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| work.join("target"));
    let mut command = Command::new("cargo");
    command
        .current_dir(dir)
        .args([
            "build",
            "--release",
            "--target",
            RUST_TARGET,
            "--manifest-path",
        ])
        .arg(&cargo_toml)
        .arg("--target-dir")
        .arg(&target_dir);
    run_step(&mut command, "cargo build")?;
    let built = target_dir
        .join(RUST_TARGET)
        .join("release")
        .join(format!("{}.wasm", crate_name.replace('-', "_")));
    std::fs::copy(&built, output).map_err(|source| ProjectError::Io {
        action: "copy",
        path: built,
        source,
    })?;
    Ok(())
}

/// `[package] name` of a Cargo.toml.
fn crate_name(text: &str) -> Option<String> {
    let doc: toml::Table = toml::from_str(text).ok()?;
    Some(doc.get("package")?.get("name")?.as_str()?.to_string())
}

/// Runs a build step, keeping its output to show if it fails.
fn run_step(command: &mut Command, step: &str) -> Result<(), ProjectError> {
    let out = command.output().map_err(|e| ProjectError::StepFailed {
        step: step.to_string(),
        status: None,
        output: format!("cannot run it: {e}"),
    })?;
    if out.status.success() {
        return Ok(());
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(60)..].join("\n");
    Err(ProjectError::StepFailed {
        step: step.to_string(),
        status: out.status.code(),
        output: tail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<BuildConfig, String> {
        BuildConfig::parse(text, Path::new("plugin.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn build_tables_are_read_with_defaults() {
        let c = parse("[build]\nlang = \"python\"\n").unwrap();
        assert_eq!(c.lang, Lang::Python);
        assert_eq!(c.source.as_deref(), Some("app.py"));
        assert_eq!(c.exports, vec![Kind::Tool]);
        let c = parse(
            "[build]\nlang = \"js\"\nsource = \"src/main.js\"\nexports = [\"hook\", \"tool\"]\n",
        )
        .unwrap();
        assert_eq!(c.source.as_deref(), Some("src/main.js"));
        assert_eq!(c.exports, vec![Kind::Hook, Kind::Tool]);
        assert_eq!(parse("[build]\nlang = \"rust\"\n").unwrap().source, None);
    }

    #[test]
    fn bad_build_tables_say_what_to_write() {
        for (text, expect) in [
            ("name = \"x\"\n", "no [build] table"),
            ("[build]\n", "missing `build.lang`"),
            ("[build]\nlang = \"cobol\"\n", "unknown language `cobol`"),
            (
                "[build]\nlang = \"js\"\nexports = [\"widget\"]\n",
                "unknown export `widget`",
            ),
            ("[build]\nlang = \"js\"\nexports = []\n", "is empty"),
            (
                "[build]\nlang = \"js\"\nsorce = \"a.js\"\n",
                "unknown key `build.sorce`",
            ),
            (
                "[build]\nlang = \"js\"\nsource = \"../a.js\"\n",
                "inside the project",
            ),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expect), "{text}: {err}");
        }
    }

    #[test]
    fn the_world_imports_http_only_for_a_python_plugin_with_network() {
        let py = BuildConfig {
            lang: Lang::Python,
            source: Some("app.py".into()),
            exports: vec![Kind::Tool, Kind::Hook],
        };
        assert!(!world(&py, false).contains("wasi:http"));
        assert!(world(&py, true).contains("import wasi:http/outgoing-handler@0.2.12;"));
        assert!(world(&py, true).contains("export tool;\n    export hook;"));
        let js = BuildConfig {
            lang: Lang::Js,
            ..py
        };
        assert!(!world(&js, true).contains("wasi:http"));
        assert!(world(&js, false).contains("wasi:filesystem/preopens"));
    }
}
