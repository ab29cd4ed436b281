//! Builds the first-party plugins for wasm32-wasip2 and embeds them, so the
//! `capstan` binary carries its own `fs` tools; and compiles each with
//! wasmtime, configured by the same file as the runtime engine
//! (`src/sandbox/engine_config.rs`), embedding the artifacts page-aligned
//! so the built-ins load without compiling or copying
//! (`src/sandbox/precompiled.rs`).
//!
//! The plugins live in their own Cargo workspace (`plugins/`), built by a
//! nested `cargo build` into a separate target folder so it never contends
//! for the outer build's lock.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use sha2::{Digest, Sha256};

/// The runtime engine's configuration, compiled here too so the artifacts
/// cannot drift from the engine that loads them. (What becomes of a
/// finished instance's memory is the runtime's choice, unused here.)
#[path = "src/sandbox/engine_config.rs"]
#[allow(dead_code)]
mod engine_config;

/// First-party plugins: (plugin name, crate name).
const PLUGINS: &[(&str, &str)] = &[("fs", "capstan-plugin-fs"), ("web", "capstan-plugin-web")];

/// First-party plugins that are installed rather than embedded: (plugin
/// name, crate name, component file named in its plugin.toml). Each is
/// packaged as `<target>/plugins/NAME/` (plugin.toml and component), ready
/// for `capstan plugin install`.
const PACKAGED: &[(&str, &str, &str)] = &[
    ("git", "capstan-plugin-git", "git.wasm"),
    (
        "guard-secrets",
        "capstan-plugin-guard-secrets",
        "guard_secrets.wasm",
    ),
    (
        "protect-paths",
        "capstan-plugin-protect-paths",
        "protect_paths.wasm",
    ),
];

const WASM_TARGET: &str = "wasm32-wasip2";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// How the `capstan` binary is linked, for a small start-up footprint.
///
/// Relative relocations packed (`-z pack-relative-relocs`, DT_RELR): the
/// dynamic loader then reads a few kilobytes rather than about 1.7 MB of
/// `.rela.dyn` at every start, the binary is that much smaller, and the
/// binary stays position-independent (ASLR as before). Only where the C
/// library loading it supports them (glibc 2.36 or later, which the binary
/// then requires, as it requires the glibc it was linked against).
///
/// The code a start-up runs first, together (`hot-text.txt`, read by
/// lld's `--symbol-ordering-file`): the kernel maps a binary's pages 64 KB
/// around each one touched, so start-up code strewn over 34 MB of text
/// made most of it resident; gathered in one place it maps a few MB.
/// A name the list has and the build lacks is skipped, so a stale list
/// costs memory, never correctness (`just hot-text` makes it again).
fn link_args(manifest_dir: &Path) {
    let target = env::var("TARGET").unwrap_or_default();
    let host = env::var("HOST").unwrap_or_default();
    if target.ends_with("-linux-gnu") && target == host && glibc_has_relr() {
        println!("cargo:rustc-link-arg-bin=capstan=-Wl,-z,pack-relative-relocs");
    }
    if links_with_lld(&target) {
        let list = manifest_dir.join("hot-text.txt");
        println!("cargo:rerun-if-changed={}", list.display());
        println!(
            "cargo:rustc-link-arg-bin=capstan=-Wl,--symbol-ordering-file={}",
            list.display()
        );
        println!("cargo:rustc-link-arg-bin=capstan=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether the binary is linked by lld, which takes a symbol ordering
/// file: Rust's own for x86_64 Linux, unless the flags choose another.
fn links_with_lld(target: &str) -> bool {
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER");
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    target == "x86_64-unknown-linux-gnu"
        && env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_none()
        && !flags.contains("linker")
        && !flags.contains("fuse-ld")
}

/// Whether this machine's glibc (the one the binary is linked against)
/// loads packed relative relocations: 2.36 or later.
fn glibc_has_relr() -> bool {
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    // "glibc 2.36"
    let text = String::from_utf8_lossy(&out.stdout);
    let mut version = text
        .trim()
        .trim_start_matches("glibc ")
        .split('.')
        .map(|part| part.parse::<u32>().unwrap_or(0));
    let (major, minor) = (version.next().unwrap_or(0), version.next().unwrap_or(0));
    (major, minor) >= (2, 36)
}

/// The compiler's and wasmtime's versions, for `capstan doctor`.
fn tool_versions(root: &Path) {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc_version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=CAPSTAN_RUSTC_VERSION={rustc_version}");
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap_or_default();
    let wasmtime_version = lock
        .split("[[package]]")
        .find(|package| package.contains("\nname = \"wasmtime\"\n"))
        .and_then(|package| {
            package
                .lines()
                .find_map(|line| line.strip_prefix("version = \""))
                .map(|v| v.trim_end_matches('"').to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=CAPSTAN_WASMTIME_VERSION={wasmtime_version}");
}

fn run() -> Result<(), String> {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let root = manifest_dir
        .parent()
        .ok_or("the host crate has no parent folder")?
        .to_path_buf();
    let out_dir = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?);
    tool_versions(&root);

    for watched in [
        "Cargo.lock",
        "plugins/Cargo.toml",
        "plugins/Cargo.lock",
        "sdk/rust/Cargo.toml",
        "sdk/rust/src",
        "wit",
        "host/src/sandbox/engine_config.rs",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    let names = PLUGINS
        .iter()
        .map(|(name, _)| *name)
        .chain(PACKAGED.iter().map(|(name, _, _)| *name));
    for name in names {
        for file in ["src", "Cargo.toml", "plugin.toml"] {
            println!(
                "cargo:rerun-if-changed={}",
                root.join("plugins").join(name).join(file).display()
            );
        }
    }
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");
    link_args(&manifest_dir);

    check_wasm_target()?;

    let target_root = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let target_dir = target_root.join("wasm-plugins");
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut command = Command::new(cargo);
    command
        .args([
            "build",
            "--release",
            "--target",
            WASM_TARGET,
            "--manifest-path",
        ])
        .arg(root.join("plugins/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    for (_, krate) in PLUGINS {
        command.args(["-p", krate]);
    }
    for (_, krate, _) in PACKAGED {
        command.args(["-p", krate]);
    }
    // The outer build's flags and wrappers (clippy, coverage) are for the
    // host; the plugins build with their own profile.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
    ] {
        command.env_remove(var);
    }
    let status = command
        .status()
        .map_err(|e| format!("cannot run cargo to build the plugins: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building the first-party plugins for {WASM_TARGET} failed (see the output above)"
        ));
    }

    let precompiler = Precompiler::new()?;
    let mut list = String::from("&[\n");
    let mut artifacts = String::new();
    for (name, krate) in PLUGINS {
        let built = target_dir
            .join(WASM_TARGET)
            .join("release")
            .join(format!("{}.wasm", krate.replace('-', "_")));
        let bytes = std::fs::read(&built)
            .map_err(|e| format!("cannot read the built plugin {}: {e}", built.display()))?;
        let embedded = out_dir.join(format!("{name}.wasm"));
        std::fs::write(&embedded, &bytes)
            .map_err(|e| format!("cannot write {}: {e}", embedded.display()))?;
        let compiled = precompiler.compile(name, &bytes)?;
        let artifact = out_dir.join(format!("{name}.cwasm"));
        std::fs::write(&artifact, &compiled)
            .map_err(|e| format!("cannot write {}: {e}", artifact.display()))?;
        let statik = format!("PRECOMPILED_{}", name.to_uppercase().replace('-', "_"));
        artifacts.push_str(&precompiler.artifact_item(name, &statik, &artifact, compiled.len()));
        let digest = Sha256::digest(&bytes);
        let hex = digest.iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        });
        let _ = writeln!(
            list,
            "    BuiltinPlugin {{ name: {name:?}, wasm: include_bytes!({:?}), sha256: {hex:?}, precompiled: &{statik}.0 }},",
            embedded.display().to_string()
        );
    }
    list.push_str("]\n");
    std::fs::write(out_dir.join("builtin_plugins.rs"), list)
        .map_err(|e| format!("cannot write the plugin list: {e}"))?;
    std::fs::write(out_dir.join("builtin_artifacts.rs"), artifacts)
        .map_err(|e| format!("cannot write the plugin artifacts: {e}"))?;

    for (name, krate, component) in PACKAGED {
        let built = target_dir
            .join(WASM_TARGET)
            .join("release")
            .join(format!("{}.wasm", krate.replace('-', "_")));
        let package = target_root.join("plugins").join(name);
        std::fs::create_dir_all(&package)
            .map_err(|e| format!("cannot create {}: {e}", package.display()))?;
        for (from, to) in [
            (
                root.join("plugins").join(name).join("plugin.toml"),
                package.join("plugin.toml"),
            ),
            (built, package.join(component)),
        ] {
            std::fs::copy(&from, &to)
                .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))?;
        }
    }
    Ok(())
}

/// Compiles components with the runtime engine's configuration, for the
/// machine this build runs on (with its CPU features); a machine without
/// them refuses the artifacts at load and compiles the plugins itself.
struct Precompiler {
    /// No engine when building for another target: the binary then
    /// carries no precompiled code and compiles its built-ins at run time.
    engine: Option<wasmtime::Engine>,
    /// Whether the artifacts go in the executable text (x86_64 Linux),
    /// where wasmtime runs them in place.
    in_text: bool,
}

impl Precompiler {
    fn new() -> Result<Self, String> {
        let target = env::var("TARGET").map_err(|e| e.to_string())?;
        let host = env::var("HOST").map_err(|e| e.to_string())?;
        let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
        let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
        let engine = if target == host {
            let engine = wasmtime::Engine::new(&engine_config::config(
                engine_config::MemoryReuse::KeepResident,
            ))
            .map_err(|e| format!("cannot make a wasmtime engine to compile the plugins: {e:#}"))?;
            Some(engine)
        } else {
            None
        };
        Ok(Self {
            engine,
            in_text: os == "linux" && arch == "x86_64",
        })
    }

    /// The compiled form of plugin `name`'s component `wasm`; empty when
    /// building for another target.
    fn compile(&self, name: &str, wasm: &[u8]) -> Result<Vec<u8>, String> {
        match &self.engine {
            Some(engine) => engine
                .precompile_component(wasm)
                .map_err(|e| format!("cannot compile the built-in {name} plugin: {e:#}")),
            None => Ok(Vec::new()),
        }
    }

    /// The Rust item embedding the artifact at `path` (`len` bytes) as
    /// static `statik`, page-aligned.
    fn artifact_item(&self, name: &str, statik: &str, path: &Path, len: usize) -> String {
        let path = path.display().to_string();
        let placement = if self.in_text {
            format!(
                "// SAFETY: the artifact is placed in the executable text, where\n\
                 // wasmtime runs its code in place (sandbox::precompiled); the\n\
                 // section holds nothing else and is never written.\n\
                 #[allow(unsafe_code)]\n\
                 #[unsafe(link_section = \".text.capstan_builtin_{name}\")]\n"
            )
        } else {
            String::new()
        };
        format!(
            "/// The built-in {name} plugin, compiled at build time.\n\
             {placement}static {statik}: PageAligned<[u8; {len}]> = PageAligned(*include_bytes!({path:?}));\n"
        )
    }
}

/// Fails early, with the command that fixes it, when the Rust standard
/// library for wasm32-wasip2 is not installed.
fn check_wasm_target() -> Result<(), String> {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("cannot run rustc: {e}"))?;
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    let lib = Path::new(&sysroot).join("lib/rustlib").join(WASM_TARGET);
    if lib.is_dir() {
        Ok(())
    } else {
        Err(format!(
            "the Rust target {WASM_TARGET} is not installed, and capstan's built-in plugins need it; \
             install it with `rustup target add {WASM_TARGET}` (or run `just setup`)"
        ))
    }
}
