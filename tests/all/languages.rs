//! Plugins in Python, JavaScript and Rust, from source to a call: every
//! `capstan new` template and every example in `plugins/examples` is built
//! with `capstan plugin build`, installed, described and called (success,
//! invalid input, a denied capability) through the real binary. Hooks and
//! skills, which no command calls yet, are called through a small host
//! built here on the installed, compiled component.
//!
//! The toolchains come from `.toolchains/` at the repository root, which
//! `just setup` fills (componentize-py and componentize-js, pinned); the
//! tests of installing a toolchain on first use run stub installers
//! instead, offline. Each
//! project is built once per test process; compiled components are shared
//! through the tests' compile cache.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Output};
use std::sync::{Arc, Mutex, OnceLock};

use support::{Env, fs_component, repo_root, shared_home, stderr, stdout, target_dir};

/// Where `just setup` installs componentize-py and componentize-js.
fn toolchains() -> PathBuf {
    repo_root().join(".toolchains")
}

/// `capstan ARGS` in `env`, with the repository's toolchains.
fn capstan(env: &Env, args: &[&str]) -> Output {
    let mut cmd = env.capstan_std();
    cmd.env("CAPSTAN_TOOLCHAINS", toolchains())
        .env(
            "CARGO_TARGET_DIR",
            target_dir().join("language-tests-cargo"),
        )
        .args(args);
    cmd.output().unwrap()
}

/// A project built once per process: created by `make` in a fresh folder,
/// then built with `capstan plugin build`.
fn built(key: &str, make: impl FnOnce(&Path)) -> PathBuf {
    static LOCKS: OnceLock<Mutex<HashMap<String, Arc<OnceLock<PathBuf>>>>> = OnceLock::new();
    let cell = {
        let mut locks = LOCKS.get_or_init(Default::default).lock().unwrap();
        locks.entry(key.to_string()).or_default().clone()
    };
    cell.get_or_init(|| {
        let root = target_dir().join("language-tests");
        // Projects of earlier runs (other process ids) are not needed again.
        static CLEANED: OnceLock<()> = OnceLock::new();
        CLEANED.get_or_init(|| {
            let suffix = format!("-{}", std::process::id());
            for entry in std::fs::read_dir(&root).into_iter().flatten().flatten() {
                if !entry.file_name().to_string_lossy().ends_with(&suffix) {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        });
        let dir = root.join(format!("{key}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
        make(&dir);
        let env = Env::new();
        let out = capstan(&env, &["plugin", "build", dir.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "building {key} failed:\n{}\n{}",
            stdout(&out),
            stderr(&out)
        );
        assert!(stdout(&out).contains("built "), "{}", stdout(&out));
        dir
    })
    .clone()
}

/// A project from `capstan new KIND NAME --lang LANG`.
fn template(kind: &str, lang: &str) -> PathBuf {
    let name = format!("my-{kind}-{lang}");
    built(&name.clone(), |dir| {
        let env = Env::new();
        let out = capstan(
            &env,
            &[
                "new",
                kind,
                &name,
                "--lang",
                lang,
                "--dir",
                dir.to_str().unwrap(),
            ],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stdout(&out).contains("capstan plugin build"),
            "{}",
            stdout(&out)
        );
    })
}

/// An example from `plugins/examples`, copied, with its network grant
/// pointed at `net` when given.
fn example(folder: &str, key: &str, net: Option<(&str, &str)>) -> PathBuf {
    built(key, |dir| {
        copy_dir(&repo_root().join("plugins/examples").join(folder), dir);
        if let Some((from, to)) = net {
            let manifest = dir.join("plugin.toml");
            let text = std::fs::read_to_string(&manifest).unwrap();
            assert!(text.contains(from), "{text}");
            std::fs::write(&manifest, text.replace(from, to)).unwrap();
        }
    })
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == ".capstan" || name == "__pycache__" {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(&name));
        } else {
            std::fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}

fn install(env: &Env, dir: &Path) {
    let out = capstan(env, &["plugin", "install", dir.to_str().unwrap(), "--yes"]);
    assert!(
        out.status.success(),
        "install failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
}

/// Runs the project's own unit tests with `program args`.
fn own_tests(dir: &Path, program: &str, args: &[&str]) {
    let out = StdCommand::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?} failed in {}:\n{}\n{}",
        dir.display(),
        stdout(&out),
        stderr(&out)
    );
}

/// Checks a tool template end to end: listed, described, called with good
/// and bad input.
fn check_tool_template(lang: &str) {
    let dir = template("tool", lang);
    let name = format!("my-tool-{lang}");
    let env = Env::new();
    install(&env, &dir);

    let out = capstan(&env, &["tool", "list"]);
    assert!(
        stdout(&out).contains(&format!("{name}.hello")),
        "{}",
        stdout(&out)
    );
    let out = capstan(&env, &["plugin", "info", &name]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("tool"), "{}", stdout(&out));

    let tool = format!("{name}.hello");
    let out = capstan(
        &env,
        &["tool", "call", &tool, r#"{"name":"Ada","excitement":2}"#],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "Hello, Ada!!");

    // The schema is checked before the function runs, naming the field.
    let out = capstan(&env, &["tool", "call", &tool, r#"{"name":3}"#]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("name"), "{}", stderr(&out));
    // The tool's own check.
    let out = capstan(
        &env,
        &["tool", "call", &tool, r#"{"name":"Ada","excitement":11}"#],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("excitement"), "{}", stderr(&out));
}

#[test]
fn the_python_tool_template_passes_its_tests_builds_installs_and_answers() {
    let _load = support::load::loads_the_machine();
    let dir = template("tool", "python");
    own_tests(&dir, "python3", &["-m", "unittest", "-q"]);
    check_tool_template("python");
}

#[test]
fn the_js_tool_template_passes_its_tests_builds_installs_and_answers() {
    let _load = support::load::loads_the_machine();
    let dir = template("tool", "js");
    own_tests(&dir, "node", &["--test"]);
    check_tool_template("js");
}

#[test]
fn the_rust_tool_template_builds_installs_and_answers() {
    let _load = support::load::loads_the_machine();
    check_tool_template("rust");
}

// --- toolchains installed on first use ---------------------------------------

/// One script standing in for every installer and compiler a build runs
/// (python3, pip, npm, rustup, cargo, componentize-py, componentize-js),
/// chosen by the name it is called by. Each call is logged; the compilers
/// copy a real component to where they are told to write one. Nothing
/// reaches the network.
const STUB: &str = r#"#!/bin/sh
name=$(basename "$0")
echo "$name $*" >> "$STUB_LOG"
case "$name" in
python3)
  [ "$1 $2" = "-m venv" ] || exit 64
  mkdir -p "$3/bin" && cp "$STUB_DIR/pip" "$3/bin/pip" ;;
pip)
  echo "Collecting componentize-py==0.25.0 (stub)"
  if [ -n "$STUB_INSTALL_FAILS" ]; then
    echo "ERROR: No matching distribution found for componentize-py==0.25.0 (stub)" >&2
    exit 1
  fi
  cp "$STUB_DIR/componentize-py" "$(dirname "$0")/componentize-py" ;;
npm)
  [ "$1 $2" = "install --prefix" ] || exit 64
  echo "added 1 package (stub)"
  mkdir -p "$3/node_modules/.bin" && cp "$STUB_DIR/componentize-js" "$3/node_modules/.bin/" ;;
rustup)
  case "$1 $2" in
  "target list") [ -f "$STUB_DIR/rust-target-added" ] && echo wasm32-wasip2; exit 0 ;;
  "target add") touch "$STUB_DIR/rust-target-added"; echo "info: installing rust-std for $3 (stub)" ;;
  *) exit 64 ;;
  esac ;;
cargo)
  [ "$1" = "--version" ] && { echo "cargo 1.95.0 (stub)"; exit 0; }
  target=""
  while [ $# -gt 0 ]; do [ "$1" = "--target-dir" ] && target=$2; shift; done
  mkdir -p "$target/wasm32-wasip2/release"
  cp "$STUB_COMPONENT" "$target/wasm32-wasip2/release/$STUB_CRATE.wasm" ;;
componentize-py|componentize-js)
  out=""
  while [ $# -gt 0 ]; do [ "$1" = "-o" ] && out=$2; shift; done
  cp "$STUB_COMPONENT" "$out" ;;
*) exit 64 ;;
esac
"#;

/// Installers and compilers that are stubs, and an empty toolchains folder.
struct StubToolchains {
    dir: tempfile::TempDir,
    toolchains: tempfile::TempDir,
}

impl StubToolchains {
    fn new() -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "python3",
            "pip",
            "npm",
            "rustup",
            "cargo",
            "componentize-py",
            "componentize-js",
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, STUB).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Self {
            dir,
            toolchains: tempfile::tempdir().unwrap(),
        }
    }

    /// `capstan plugin build DIR ARGS` with the stubs first on the PATH.
    fn build(&self, env: &Env, project: &Path, crate_name: &str, args: &[&str]) -> Output {
        let path = format!(
            "{}:{}",
            self.dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        env.capstan_std()
            .env("PATH", path)
            .env("CAPSTAN_TOOLCHAINS", self.toolchains.path())
            .env("STUB_DIR", self.dir.path())
            .env("STUB_LOG", self.log_path())
            .env("STUB_COMPONENT", fs_component())
            .env("STUB_CRATE", crate_name)
            // Should a real installer run after all, it stays offline.
            .env("PIP_NO_INDEX", "1")
            .env("npm_config_offline", "true")
            .env_remove("CARGO_TARGET_DIR")
            .args(["plugin", "build"])
            .arg(project)
            .args(args)
            .output()
            .unwrap()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("calls.log")
    }

    /// The programs called so far, each with its arguments.
    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.log_path())
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// A new tool project `name` in `lang`, written by `capstan new`.
fn new_project(env: &Env, name: &str, lang: &str) -> PathBuf {
    let dir = env.outside.path().join(name);
    let out = env
        .capstan_std()
        .args(["new", "tool", name, "--lang", lang, "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    dir
}

#[test]
fn the_first_build_installs_the_pinned_toolchain_and_says_what_and_where() {
    let env = Env::new();
    for (lang, what, into, installer) in [
        (
            "python",
            "componentize-py==0.25.0",
            "/python",
            "pip install --disable-pip-version-check componentize-py==0.25.0",
        ),
        (
            "js",
            "@bytecodealliance/componentize-js@0.23.0",
            "/js",
            "npm install --prefix",
        ),
        (
            "rust",
            "the Rust target wasm32-wasip2",
            "your active Rust toolchain (with rustup)",
            "rustup target add wasm32-wasip2",
        ),
    ] {
        let stubs = StubToolchains::new();
        let name = format!("first{lang}");
        let dir = new_project(&env, &name, lang);
        let into = if into.starts_with('/') {
            format!("{}{into}", stubs.toolchains.path().display())
        } else {
            into.to_string()
        };

        let out = stubs.build(&env, &dir, &name, &[]);
        let err = stderr(&out);
        assert!(out.status.success(), "{lang}: {err}");
        assert!(
            err.contains(&format!(
                "{what} is not installed yet; installing it into {into} (once"
            )),
            "{lang}: {err}"
        );
        assert!(err.contains(&format!("installed {what} in ")), "{err}");
        // The installer's output is shown, as plain lines without a terminal.
        assert!(err.contains("(stub)"), "{err}");
        assert!(!err.contains('\r') && !err.contains('\x1b'), "{err:?}");
        assert!(
            stdout(&out).contains(&format!(
                "built {}",
                dir.join(format!("{name}.wasm")).display()
            )),
            "{}",
            stdout(&out)
        );
        let calls = stubs.calls();
        assert!(
            calls.iter().any(|call| call.starts_with(installer)),
            "{lang}: {calls:?}"
        );
        if lang == "python" {
            assert_eq!(
                calls[0],
                format!(
                    "python3 -m venv {}",
                    stubs.toolchains.path().join("python").display()
                )
            );
        }

        // Built again: the toolchain is there, nothing is installed.
        let before = stubs.calls().len();
        let out = stubs.build(&env, &dir, &name, &[]);
        let err = stderr(&out);
        assert!(out.status.success(), "{lang}: {err}");
        assert!(!err.contains("install"), "{lang}: {err}");
        let again = stubs.calls()[before..].to_vec();
        assert!(
            again.iter().all(|call| !call.starts_with("python3")
                && !call.starts_with("pip")
                && !call.starts_with("npm")
                && !call.starts_with("rustup target add")),
            "{lang}: {again:?}"
        );
    }
}

#[test]
fn a_failed_toolchain_install_says_why_builds_nothing_and_is_retried() {
    let env = Env::new();
    let stubs = StubToolchains::new();
    let dir = new_project(&env, "p", "python");
    let out = {
        let path = format!(
            "{}:{}",
            stubs.dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        env.capstan_std()
            .env("PATH", path)
            .env("CAPSTAN_TOOLCHAINS", stubs.toolchains.path())
            .env("STUB_DIR", stubs.dir.path())
            .env("STUB_LOG", stubs.log_path())
            .env("STUB_INSTALL_FAILS", "1")
            .env("PIP_NO_INDEX", "1")
            .args(["plugin", "build"])
            .arg(&dir)
            .output()
            .unwrap()
    };
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "error: could not install componentize-py==0.25.0 into {}",
            stubs.toolchains.path().join("python").display()
        )),
        "{err}"
    );
    assert!(err.contains("pip install failed (exit code 1)"), "{err}");
    assert!(err.contains("No matching distribution found"), "{err}");
    assert!(err.contains("capstan plugin toolchain python"), "{err}");
    assert!(!dir.join("p.wasm").exists());
    assert!(
        !stubs
            .calls()
            .iter()
            .any(|c| c.starts_with("componentize-py")),
        "{:?}",
        stubs.calls()
    );

    // The half-made install is not taken for a toolchain: the next build
    // installs again, and builds.
    let out = stubs.build(&env, &dir, "p", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let venvs = stubs
        .calls()
        .iter()
        .filter(|c| c.starts_with("python3 -m venv"))
        .count();
    assert_eq!(venvs, 2, "{:?}", stubs.calls());
    assert!(dir.join("p.wasm").is_file());
}

#[test]
fn with_no_install_a_missing_toolchain_stops_the_build_and_names_the_command() {
    let env = Env::new();
    let stubs = StubToolchains::new();
    let dir = new_project(&env, "p", "python");
    let out = stubs.build(&env, &dir, "p", &["--no-install"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(
            "componentize-py==0.25.0 is not installed, so this python plugin cannot be built"
        ),
        "{err}"
    );
    assert!(err.contains("capstan plugin toolchain python"), "{err}");
    assert!(err.contains("without --no-install"), "{err}");
    assert!(stubs.calls().is_empty(), "{:?}", stubs.calls());
    assert!(!dir.join("p.wasm").exists());
    assert_eq!(
        std::fs::read_dir(stubs.toolchains.path()).unwrap().count(),
        0
    );
}

#[test]
fn new_writes_files_anyone_may_read_and_only_the_owner_write() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    for (kind, lang) in [
        ("tool", Some("python")),
        ("hook", Some("js")),
        ("tool", Some("rust")),
        ("skill", None),
    ] {
        let dir = env
            .outside
            .path()
            .join(format!("{kind}-{}", lang.unwrap_or("md")));
        // Under the usual umask, as a user's shell has it.
        let template = env.capstan_std();
        let mut cmd = StdCommand::new("sh");
        cmd.args(["-c", "umask 022 && exec \"$0\" \"$@\""])
            .arg(template.get_program())
            .args(["new", kind, "demo", "--dir"])
            .arg(&dir)
            .current_dir(env.ws.path());
        if let Some(lang) = lang {
            cmd.args(["--lang", lang]);
        }
        for (key, value) in template.get_envs() {
            match value {
                Some(value) => cmd.env(key, value),
                None => cmd.env_remove(key),
            };
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let mut stack = vec![dir.clone()];
        let mut files = 0;
        while let Some(at) = stack.pop() {
            for entry in std::fs::read_dir(&at).unwrap().flatten() {
                let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
                if entry.file_type().unwrap().is_dir() {
                    assert_eq!(mode, 0o755, "{}", entry.path().display());
                    stack.push(entry.path());
                } else {
                    assert_eq!(mode, 0o644, "{}: {mode:o}", entry.path().display());
                    files += 1;
                }
            }
        }
        assert!(files >= 2, "{}", dir.display());
    }
}

#[test]
fn new_refuses_a_bad_name_and_a_folder_in_use() {
    let env = Env::new();
    let out = capstan(&env, &["new", "tool", "Bad Name", "--lang", "js"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not a valid plugin name"),
        "{}",
        stderr(&out)
    );
    let out = capstan(&env, &["new", "tool", "ok", "--lang", "cobol"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("rust, python or js"),
        "{}",
        stderr(&out)
    );
    env.write("taken/keep.txt", "mine");
    let out = capstan(
        &env,
        &[
            "new",
            "hook",
            "taken",
            "--lang",
            "python",
            "--dir",
            env.ws.path().join("taken").to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(env.read("taken/keep.txt"), "mine");
}

// --- a host for hooks and skills --------------------------------------------

mod hook_world {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "hook-plugin",
        exports: { default: async },
    });
}

mod skill_world {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "skill-plugin",
        exports: { default: async },
    });
}

struct State {
    wasi: wasmtime_wasi::WasiCtx,
    table: wasmtime::component::ResourceTable,
}

impl wasmtime_wasi::WasiView for State {
    fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
        wasmtime_wasi::WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl hook_world::capstan::plugin::host::Host for State {
    fn log(&mut self, _: hook_world::capstan::plugin::host::LogLevel, _: String) {}
    fn progress(&mut self, _: String, _: u64, _: Option<u64>) {}
}
impl hook_world::capstan::plugin::types::Host for State {}
impl skill_world::capstan::plugin::host::Host for State {
    fn log(&mut self, _: skill_world::capstan::plugin::host::LogLevel, _: String) {}
    fn progress(&mut self, _: String, _: u64, _: Option<u64>) {}
}

/// The installed component of plugin `name`, compiled (from the compile
/// cache the install filled), with a store to run it in: no grants at all.
fn installed_component(
    env: &Env,
    name: &str,
) -> (
    capstan::sandbox::Sandbox,
    wasmtime::component::Component,
    wasmtime::Store<State>,
) {
    let store_dir = env.home.path().join("plugins/store").join(name);
    let folder = std::fs::read_dir(&store_dir)
        .unwrap_or_else(|e| panic!("{name} is not installed in {}: {e}", store_dir.display()))
        .map(|e| e.unwrap().path())
        .next()
        .unwrap_or_else(|| panic!("{name} is not installed in {}", store_dir.display()));
    let wasm = std::fs::read(folder.join(format!("{name}.wasm"))).unwrap();
    let sandbox = capstan::sandbox::Sandbox::new(&shared_home()).unwrap();
    let sha = capstan::sandbox::engine::sha256_hex(&wasm);
    let (component, outcome) = sandbox
        .compile_cache()
        .load(sandbox.engine(), &wasm, &sha, name)
        .unwrap();
    assert_eq!(
        outcome,
        capstan::sandbox::CacheOutcome::Hit,
        "install compiles the component"
    );
    let mut store = wasmtime::Store::new(
        sandbox.engine(),
        State {
            wasi: wasmtime_wasi::WasiCtxBuilder::new().build(),
            table: wasmtime::component::ResourceTable::new(),
        },
    );
    store.set_epoch_deadline(1_000_000);
    (sandbox, component, store)
}

fn ctx() -> hook_world::capstan::plugin::types::CallContext {
    hook_world::capstan::plugin::types::CallContext {
        call_id: "test".into(),
        workspace: None,
        session_id: None,
    }
}

/// Calls an installed hook plugin: its subscriptions, then each event.
async fn run_hook(
    env: &Env,
    name: &str,
    events: &[(hook_world::exports::capstan::plugin::hook::Event, &str)],
) -> (
    Vec<hook_world::exports::capstan::plugin::hook::Subscription>,
    Vec<Result<hook_world::exports::capstan::plugin::hook::HookOutput, String>>,
) {
    let (sandbox, component, mut store) = installed_component(env, name);
    let mut linker = wasmtime::component::Linker::<State>::new(sandbox.engine());
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
    hook_world::HookPlugin::add_to_linker::<_, wasmtime::component::HasSelf<_>>(&mut linker, |s| s)
        .unwrap();
    let plugin = hook_world::HookPlugin::instantiate_async(&mut store, &component, &linker)
        .await
        .unwrap();
    let hook = plugin.capstan_plugin_hook();
    let subscriptions = hook.call_subscriptions(&mut store).await.unwrap();
    let mut outputs = Vec::new();
    for (event, payload) in events {
        let input = hook_world::exports::capstan::plugin::hook::EventInput {
            event: *event,
            payload: payload.to_string(),
        };
        outputs.push(hook.call_handle(&mut store, &input, &ctx()).await.unwrap());
    }
    (subscriptions, outputs)
}

fn check_hook_template(lang: &str) {
    use hook_world::exports::capstan::plugin::hook::{Decision, Event};
    let dir = template("hook", lang);
    let name = format!("my-hook-{lang}");
    let env = Env::new();
    install(&env, &dir);
    let out = capstan(&env, &["plugin", "info", &name]);
    assert!(stdout(&out).contains("hook"), "{}", stdout(&out));

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (subscriptions, outputs) = runtime.block_on(run_hook(
        &env,
        &name,
        &[
            (
                Event::PreToolUse,
                r#"{"tool_name":"fs.write","tool_input":{"path":"app/.env","content":"x"}}"#,
            ),
            (
                Event::PreToolUse,
                r#"{"tool_name":"fs.write","tool_input":{"path":"a.txt","content":"x"}}"#,
            ),
        ],
    ));
    assert_eq!(subscriptions.len(), 1);
    assert_eq!(subscriptions[0].event, Event::PreToolUse);
    assert_eq!(
        subscriptions[0].matcher.as_deref(),
        Some("fs.write|fs.edit")
    );
    match &outputs[0] {
        Ok(out) => assert!(
            matches!(&out.decision, Decision::Deny(reason) if reason.contains(".env")),
            "{:?}",
            out.decision
        ),
        Err(e) => panic!("{e}"),
    }
    assert!(matches!(
        outputs[1].as_ref().map(|o| &o.decision),
        Ok(Decision::Proceed)
    ));
}

#[test]
fn the_hook_templates_build_install_and_decide() {
    let _load = support::load::loads_the_machine();
    own_tests(
        &template("hook", "python"),
        "python3",
        &["-m", "unittest", "-q"],
    );
    own_tests(&template("hook", "js"), "node", &["--test"]);
    for lang in ["python", "js", "rust"] {
        check_hook_template(lang);
    }
}

#[test]
fn the_skill_templates_build_install_and_load() {
    let _load = support::load::loads_the_machine();
    own_tests(
        &template("skill", "python"),
        "python3",
        &["-m", "unittest", "-q"],
    );
    own_tests(&template("skill", "js"), "node", &["--test"]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for lang in ["python", "js", "rust"] {
        let dir = template("skill", lang);
        let name = format!("my-skill-{lang}");
        let env = Env::new();
        install(&env, &dir);
        let out = capstan(&env, &["plugin", "info", &name]);
        assert!(stdout(&out).contains("skill"), "{}", stdout(&out));
        let (list, text, resource, missing) = runtime.block_on(async {
            let (sandbox, component, mut store) = installed_component(&env, &name);
            let mut linker = wasmtime::component::Linker::<State>::new(sandbox.engine());
            wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
            skill_world::SkillPlugin::add_to_linker::<_, wasmtime::component::HasSelf<_>>(
                &mut linker,
                |s| s,
            )
            .unwrap();
            let plugin =
                skill_world::SkillPlugin::instantiate_async(&mut store, &component, &linker)
                    .await
                    .unwrap();
            let skill = plugin.capstan_plugin_skill();
            let list = skill.call_list(&mut store).await.unwrap();
            let text = skill
                .call_load(&mut store, &name, "the parser")
                .await
                .unwrap();
            let resource = skill
                .call_resource(&mut store, &name, "checklist.md")
                .await
                .unwrap();
            let missing = skill
                .call_resource(&mut store, &name, "nope.md")
                .await
                .unwrap();
            (list, text, resource, missing)
        });
        assert_eq!(list.len(), 1, "{lang}");
        assert_eq!(list[0].name, name);
        assert_eq!(list[0].argument_hint.as_deref(), Some("[topic]"));
        assert!(text.unwrap().contains("the parser"), "{lang}");
        assert_eq!(resource.unwrap(), b"- [ ] tests pass\n");
        assert!(missing.unwrap_err().contains("nope.md"), "{lang}");
    }
}

// --- the examples ----------------------------------------------------------------

/// A local HTTP server answering every request with `body` as JSON, and
/// recording the request lines.
struct Server {
    origin: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(body: impl Fn(&str) -> (u16, String) + Send + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let mut length = 0usize;
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut discard = vec![0; length];
                let _ = reader.read_exact(&mut discard);
                let target = line.split_whitespace().nth(1).unwrap_or("").to_string();
                seen.lock().unwrap().push(target.clone());
                let (status, text) = body(&target);
                let reply = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                );
                let _ = stream.write_all(reply.as_bytes());
            }
        });
        Self { origin, requests }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

const FORECAST: &str = r#"{"daily":{"time":["2026-01-01","2026-01-02"],"temperature_2m_min":[-3.0,-5.5],"temperature_2m_max":[1.5,0.2]}}"#;

#[test]
fn the_python_weather_example_uses_the_network_and_files_only_as_granted() {
    let _load = support::load::loads_the_machine();
    let server = Server::start(|_| (200, FORECAST.to_string()));
    let dir = example(
        "weather-py",
        "weather-py",
        Some(("https://api.open-meteo.com", &server.origin)),
    );
    own_tests(&dir, "python3", &["-m", "unittest", "-q"]);
    let env = Env::new();
    install(&env, &dir);
    let run = |args: &[&str]| {
        let mut cmd = env.capstan_std();
        cmd.env("OPEN_METEO_URL", &server.origin).args(args);
        cmd.output().unwrap()
    };

    let out = run(&[
        "tool",
        "call",
        "weather.forecast",
        r#"{"latitude":59.91,"longitude":10.75,"days":2}"#,
        "--json",
    ]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("2026-01-02") && text.contains("-5.5"),
        "{text}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert!(
        requests[0].starts_with("/v1/forecast?latitude=59.91&longitude=10.75"),
        "{requests:?}"
    );

    // Invalid input never reaches the network.
    let out = run(&[
        "tool",
        "call",
        "weather.forecast",
        r#"{"latitude":"north","longitude":0}"#,
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("latitude"), "{}", stderr(&out));
    let out = run(&[
        "tool",
        "call",
        "weather.forecast",
        r#"{"latitude":95,"longitude":0}"#,
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(server.requests().len(), 1);

    // Files: the report reads and writes the workspace, and only with
    // --allow-write may it write.
    env.write(
        "places.txt",
        "# name, lat, lon\nOslo, 59.91, 10.75\nBergen, 60.39, 5.32\n",
    );
    let out = run(&[
        "tool",
        "call",
        "weather.report",
        r#"{"places":"places.txt"}"#,
    ]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(!env.ws.path().join("weather.md").exists());
    let out = run(&[
        "tool",
        "call",
        "weather.report",
        r#"{"places":"places.txt"}"#,
        "--allow-write",
    ]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("2 places"), "{}", stdout(&out));
    let report = env.read("weather.md");
    assert!(
        report.contains("## Bergen") && report.contains("| 2026-01-01 | -3.0 | 1.5 |"),
        "{report}"
    );
    // Nothing outside the workspace exists for it.
    let outside = env.write_outside("places.txt", "Oslo, 59.91, 10.75\n");
    let out = run(&[
        "tool",
        "call",
        "weather.report",
        &format!(r#"{{"places":"{}"}}"#, env.dotdot_outside("places.txt")),
        "--allow-write",
    ]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(outside.exists());

    // Without the network grant, no request leaves.
    let before = server.requests().len();
    let out = capstan(
        &env,
        &["plugin", "revoke", "weather", "net", &server.origin],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(&[
        "tool",
        "call",
        "weather.forecast",
        r#"{"latitude":59.91,"longitude":10.75}"#,
    ]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stderr(&out).contains("not granted"), "{}", stderr(&out));
    assert_eq!(server.requests().len(), before);
}

#[test]
fn the_js_npm_example_uses_the_network_and_files_only_as_granted() {
    let _load = support::load::loads_the_machine();
    let server = Server::start(|target| match target {
        "/left-pad/latest" => (200, r#"{"name":"left-pad","version":"1.3.0"}"#.to_string()),
        "/is-odd/latest" => (200, r#"{"name":"is-odd","version":"3.0.1"}"#.to_string()),
        _ => (404, r#"{"error":"Not found"}"#.to_string()),
    });
    let dir = example(
        "npm-js",
        "npm-js",
        Some(("https://registry.npmjs.org", &server.origin)),
    );
    own_tests(&dir, "node", &["--test"]);
    let env = Env::new();
    install(&env, &dir);
    let run = |args: &[&str]| {
        let mut cmd = env.capstan_std();
        cmd.env("npm_config_registry", &server.origin).args(args);
        cmd.output().unwrap()
    };

    let out = run(&["tool", "call", "npm.latest", r#"{"name":"left-pad"}"#]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("1.3.0"), "{}", stdout(&out));
    let out = run(&["tool", "call", "npm.latest", r#"{"name":"no-such-thing"}"#]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no package called no-such-thing"),
        "{}",
        stderr(&out)
    );

    let out = run(&["tool", "call", "npm.latest", r#"{"name":"Not A Name"}"#]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let out = run(&["tool", "call", "npm.latest", r#"{}"#]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("name"), "{}", stderr(&out));

    env.write(
        "package.json",
        r#"{"dependencies":{"left-pad":"^1.1.0","is-odd":"^2.0.0"}}"#,
    );
    let out = run(&["tool", "call", "npm.outdated", "{}", "--json"]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("is-odd") && text.contains("3.0.1"), "{text}");
    assert!(!text.contains("left-pad"), "{text}");
    let out = run(&["tool", "call", "npm.outdated", r#"{"path":"missing.json"}"#]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));

    // Files outside the workspace do not exist for it.
    env.write_outside("package.json", "{}");
    let path = format!(r#"{{"path":"{}"}}"#, env.dotdot_outside("package.json"));
    let out = run(&["tool", "call", "npm.outdated", &path]);
    assert!(!out.status.success(), "{}", stdout(&out));

    // Revoked network: fetch is refused by the host, no request leaves.
    let before = server.requests().len();
    let out = capstan(&env, &["plugin", "revoke", "npm", "net", &server.origin]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(&["tool", "call", "npm.latest", r#"{"name":"left-pad"}"#]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert_eq!(server.requests().len(), before);
    // JavaScript's fetch says only "NetworkError"; the host adds why, as
    // the Python SDK says it.
    let err = stderr(&out);
    assert!(err.contains("NetworkError"), "{err}");
    assert!(
        err.contains("[the sandbox refused a network request: GET "),
        "{err}"
    );
    assert!(err.contains("not granted"), "{err}");
}

#[test]
fn the_python_guard_hook_example_denies_asks_and_adds_context() {
    let _load = support::load::loads_the_machine();
    use hook_world::exports::capstan::plugin::hook::{Decision, Event};
    let dir = example("guard-py", "guard-py", None);
    own_tests(&dir, "python3", &["-m", "unittest", "-q"]);
    let env = Env::new();
    install(&env, &dir);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (subscriptions, outputs) = runtime.block_on(run_hook(
        &env,
        "guard",
        &[
            (
                Event::PreToolUse,
                r#"{"tool_name":"fs.write","tool_input":{"path":"k.py","content":"K='AKIAABCDEFGHIJKLMNOP'"}}"#,
            ),
            (
                Event::PreToolUse,
                r#"{"tool_name":"fs.edit","tool_input":{"path":"Cargo.lock","old":"a","new":"b"}}"#,
            ),
            (Event::UserPromptSubmit, r#"{"prompt":"make the tests pass"}"#),
            (Event::PreToolUse, "not json"),
        ],
    ));
    assert_eq!(subscriptions.len(), 3);
    let decisions: Vec<_> = outputs
        .iter()
        .map(|o| o.as_ref().map(|o| &o.decision))
        .collect();
    assert!(
        matches!(decisions[0], Ok(Decision::Deny(r)) if r.contains("AWS")),
        "{decisions:?}"
    );
    assert!(
        matches!(decisions[1], Ok(Decision::Ask(r)) if r.contains("Cargo.lock")),
        "{decisions:?}"
    );
    assert!(
        matches!(decisions[2], Ok(Decision::AddContext(t)) if t.contains("./dev test")),
        "{decisions:?}"
    );
    // A hook that fails says why (and the host fails closed).
    assert!(decisions[3].is_err(), "{decisions:?}");
}

#[test]
fn a_python_tool_without_a_network_grant_cannot_open_sockets() {
    let _load = support::load::loads_the_machine();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = built("py-sockets", |dir| {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("plugin.toml"),
            "name = \"sock\"\nversion = \"0.1.0\"\ndescription = \"Tries the network\"\ncomponents = [\"sock.wasm\"]\n\n[build]\nlang = \"python\"\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("app.py"),
            r#"import socket
import urllib.request
from capstan import tool, fetch

@tool
def connect(port: int) -> str:
    """Opens a TCP connection to 127.0.0.1."""
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    return "connected"

@tool
def lookup(name: str) -> str:
    """Resolves a name."""
    return str(socket.getaddrinfo(name, 80))

@tool
def http(url: str) -> str:
    """Fetches a URL through the SDK."""
    return fetch(url).text
"#,
        )
        .unwrap();
    });
    let env = Env::new();
    install(&env, &dir);
    let out = capstan(
        &env,
        &[
            "tool",
            "call",
            "sock.connect",
            &format!(r#"{{"port":{port}}}"#),
        ],
    );
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(!stdout(&out).contains("connected"));
    assert!(
        listener.accept().is_err(),
        "the plugin reached the listener"
    );
    let out = capstan(
        &env,
        &["tool", "call", "sock.lookup", r#"{"name":"localhost"}"#],
    );
    assert!(!out.status.success(), "{}", stdout(&out));
    // Built without wasi:http, the SDK's fetch says what to add.
    let out = capstan(
        &env,
        &[
            "tool",
            "call",
            "sock.http",
            &format!(r#"{{"url":"http://127.0.0.1:{port}/"}}"#),
        ],
    );
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("add the hosts it needs to `net`"),
        "{}",
        stderr(&out)
    );
    assert!(
        listener.accept().is_err(),
        "the plugin reached the listener"
    );
}
