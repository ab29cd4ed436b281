//! `capstan doctor`: what a bug report needs, and what to fix. Versions,
//! folders, the model server, plugin toolchains, the kernel's sandbox, the
//! compile cache, installed plugins against the lockfile, MCP servers and
//! the log. It looks without changing anything (no key made, no server
//! started) and exits 0 unless it cannot run at all; a failing check says
//! what to do.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use super::Exit;
use super::provider::{self, ModelFlags};
use crate::escape;
use crate::home::Home;
use crate::model::probe::{Reach, probe};
use crate::plugin::lock::Lockfile;
use crate::sandbox::compile_cache::CacheKey;
use crate::scaffold::Lang;
use crate::scaffold::toolchain::Toolchains;

/// How long the model server may take to answer the probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a toolchain's `--version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

/// `capstan doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Do not contact the model server.
    #[arg(long)]
    offline: bool,
    /// The workspace whose settings and MCP servers to check [default:
    /// the current folder].
    #[arg(long, short = 'w', value_name = "DIR")]
    workspace: Option<PathBuf>,
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    /// As it should be.
    Ok,
    /// Works, with a caveat.
    Warning,
    /// Does not work; the fix says what to do.
    Problem,
    /// A fact for the report.
    Info,
}

/// One line of the report.
#[derive(Debug, Serialize)]
struct Check {
    name: String,
    status: Status,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

/// A part of the report.
#[derive(Debug, Serialize)]
struct Section {
    title: &'static str,
    checks: Vec<Check>,
}

impl Section {
    fn new(title: &'static str) -> Self {
        Self {
            title,
            checks: Vec::new(),
        }
    }

    fn add(&mut self, name: impl Into<String>, status: Status, detail: impl Into<String>) {
        self.checks.push(Check {
            name: name.into(),
            status,
            detail: detail.into(),
            fix: None,
        });
    }

    fn fail(
        &mut self,
        name: impl Into<String>,
        status: Status,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.checks.push(Check {
            name: name.into(),
            status,
            detail: detail.into(),
            fix: Some(fix.into()),
        });
    }
}

/// The whole report.
#[derive(Debug, Serialize)]
struct Report {
    sections: Vec<Section>,
    problems: usize,
    warnings: usize,
}

/// Runs the checks and prints the report.
pub async fn run(args: DoctorArgs) -> Exit {
    let home = match Home::from_env() {
        Ok(home) => home,
        Err(error) => {
            eprintln!("error: {error}");
            return Exit::Error;
        }
    };
    let workspace = match &args.workspace {
        Some(dir) => dir.clone(),
        None => match std::env::current_dir() {
            Ok(dir) => dir,
            Err(error) => {
                eprintln!("error: cannot tell the current folder ({error}); pass --workspace DIR");
                return Exit::Usage;
            }
        },
    };
    let workspace = workspace.canonicalize().unwrap_or(workspace);
    let settings = crate::config::load(&home, &workspace);
    let mut sections = vec![versions()];
    sections.push(folders(&home));
    let (settings_section, settings) = match settings {
        Ok(settings) => {
            let mut section = Section::new("settings");
            for (layer, path) in &settings.files {
                section.add(layer.to_string(), Status::Info, path.display().to_string());
            }
            for warning in &settings.warnings {
                section.fail(
                    "warning",
                    Status::Warning,
                    warning.clone(),
                    "edit the settings file it names",
                );
            }
            if section.checks.is_empty() {
                section.add("files", Status::Info, "none (defaults)");
            }
            (section, settings)
        }
        Err(error) => {
            let mut section = Section::new("settings");
            section.fail(
                "settings",
                Status::Problem,
                error.to_string(),
                "fix the settings file it names",
            );
            (section, crate::config::Settings::default())
        }
    };
    sections.push(settings_section);
    sections.push(model(&settings.model, args.offline).await);
    sections.push(toolchains(&home));
    sections.push(kernel_sandbox(&settings, &workspace, &home));
    sections.push(compile_cache(&home));
    sections.push(plugins(&home));
    sections.push(mcp_servers(&home, &workspace));
    sections.push(logs(&home));
    let count = |status: Status| {
        sections
            .iter()
            .flat_map(|s| &s.checks)
            .filter(|c| c.status == status)
            .count()
    };
    let report = Report {
        problems: count(Status::Problem),
        warnings: count(Status::Warning),
        sections,
    };
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(error) => {
                eprintln!("error: cannot write the report as JSON: {error}");
                return Exit::Error;
            }
        }
    } else {
        print_report(&report);
    }
    Exit::Success
}

fn print_report(report: &Report) {
    for section in &report.sections {
        println!("{}", section.title);
        for check in &section.checks {
            let mark = match check.status {
                Status::Ok => "ok     ",
                Status::Warning => "warning",
                Status::Problem => "PROBLEM",
                Status::Info => "       ",
            };
            println!(
                "  {mark} {}: {}",
                escape::line(&check.name),
                escape::line(&check.detail)
            );
            if let Some(fix) = &check.fix {
                println!("          fix: {}", escape::line(fix));
            }
        }
        println!();
    }
    println!(
        "{} problem{}, {} warning{}",
        report.problems,
        if report.problems == 1 { "" } else { "s" },
        report.warnings,
        if report.warnings == 1 { "" } else { "s" }
    );
}

fn versions() -> Section {
    let mut section = Section::new("capstan");
    section.add("version", Status::Info, env!("CARGO_PKG_VERSION"));
    section.add("built with", Status::Info, env!("CAPSTAN_RUSTC_VERSION"));
    section.add("wasmtime", Status::Info, env!("CAPSTAN_WASMTIME_VERSION"));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|k| k.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    section.add(
        "os",
        Status::Info,
        format!(
            "{} ({}, {}), kernel {kernel}",
            os_name(),
            std::env::consts::OS,
            std::env::consts::ARCH
        ),
    );
    section
}

/// The distribution's name, from `/etc/os-release`.
fn os_name() -> String {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        })
        .unwrap_or_else(|| std::env::consts::OS.to_string())
}

fn folders(home: &Home) -> Section {
    let mut section = Section::new("folders");
    let cache = home.compile_cache_dir();
    for (name, path) in [
        ("data", home.data_dir().to_path_buf()),
        ("config", home.config_dir().to_path_buf()),
        ("compile cache", cache),
        ("logs", home.logs_dir()),
        ("toolchains", home.toolchains_dir().to_path_buf()),
    ] {
        match writable(&path) {
            Ok(note) => section.add(name, Status::Ok, format!("{} ({note})", path.display())),
            Err(why) => section.fail(
                name,
                Status::Problem,
                format!("{}: {why}", path.display()),
                "make it writable by you, or point CAPSTAN_HOME (or XDG_DATA_HOME, XDG_CACHE_HOME, XDG_CONFIG_HOME) elsewhere",
            ),
        }
    }
    section
}

/// Whether capstan can write in `dir` (or create it): tried with a
/// temporary file that is removed at once.
fn writable(dir: &Path) -> Result<&'static str, String> {
    if dir.is_dir() {
        return tempfile::tempfile_in(dir)
            .map(|_| "writable")
            .map_err(|e| format!("not writable ({e})"));
    }
    if dir.exists() {
        return Err("is not a folder".into());
    }
    let mut parent = dir.parent();
    while let Some(p) = parent {
        if p.is_dir() {
            return tempfile::tempfile_in(p)
                .map(|_| "not made yet; will be created")
                .map_err(|e| format!("cannot be created: {} is not writable ({e})", p.display()));
        }
        parent = p.parent();
    }
    Err("no existing parent folder".into())
}

async fn model(settings: &crate::config::ModelSettings, offline: bool) -> Section {
    let mut section = Section::new("model");
    let flags = ModelFlags {
        model: None,
        provider: None,
        base_url: None,
        api_key_env: None,
        max_tokens: None,
    };
    let choice = match provider::choose(&flags, settings) {
        Ok(choice) => choice,
        Err(why) => {
            section.fail(
                "provider",
                Status::Problem,
                why,
                "set ANTHROPIC_API_KEY, or OPENAI_BASE_URL for an OpenAI-compatible server, or [model] in config.toml",
            );
            return section;
        }
    };
    section.add("provider", Status::Info, choice.provider.name().to_string());
    section.add("model", Status::Info, choice.model.clone());
    let Some(url) = choice.provider.base_url().map(str::to_string) else {
        return section;
    };
    section.add("base url", Status::Info, url.clone());
    if offline {
        section.add("reachable", Status::Info, "not checked (--offline)");
        return section;
    }
    match probe(&url, PROBE_TIMEOUT).await {
        Reach::Answered { status, elapsed } => section.add(
            "reachable",
            Status::Ok,
            format!("HTTP {status} in {} ms", elapsed.as_millis()),
        ),
        Reach::Unreachable(why) => section.fail(
            "reachable",
            Status::Problem,
            why,
            "check the base URL (--base-url, ANTHROPIC_BASE_URL, OPENAI_BASE_URL or [model] base_url), that the server runs, and your network or proxy",
        ),
    }
    section
}

fn toolchains(home: &Home) -> Section {
    let mut section = Section::new("plugin toolchains");
    let toolchains = Toolchains::new(home);
    for lang in [Lang::Rust, Lang::Python, Lang::Js] {
        let what = Toolchains::what(lang);
        match toolchains.missing(lang) {
            Ok(None) => section.add(
                lang.name(),
                Status::Ok,
                format!("{what} ({})", toolchains.location(lang)),
            ),
            Ok(Some(_)) => section.fail(
                lang.name(),
                Status::Warning,
                format!(
                    "{what} is not installed (needed only to build {} plugins)",
                    lang.name()
                ),
                Toolchains::install_command(lang),
            ),
            Err(error) => section.fail(
                lang.name(),
                Status::Warning,
                error.to_string(),
                "install it to build plugins in this language",
            ),
        }
    }
    for (name, program, args) in [
        ("rustc", "rustc", &["--version"][..]),
        ("node", "node", &["--version"][..]),
        ("python", "python3", &["--version"][..]),
    ] {
        match version_of(program, args) {
            Some(version) => section.add(name, Status::Info, version),
            None => section.add(name, Status::Info, format!("{program} not found on PATH")),
        }
    }
    section
}

/// The first line a program prints for `args`, if it runs in time.
fn version_of(program: &str, args: &[&str]) -> Option<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + VERSION_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let output = child.wait_with_output().ok()?;
    let text = if output.stdout.is_empty() {
        output.stderr
    } else {
        output.stdout
    };
    String::from_utf8_lossy(&text)
        .lines()
        .next()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
}

#[cfg(target_os = "linux")]
fn kernel_sandbox(settings: &crate::config::Settings, workspace: &Path, home: &Home) -> Section {
    let mut section = Section::new("kernel sandbox (for native commands)");
    let support = crate::exec::kernel_support();
    if support.landlock_abi > 0 {
        section.add(
            "landlock",
            Status::Ok,
            format!("ABI {}", support.landlock_abi),
        );
    } else {
        section.fail(
            "landlock",
            Status::Problem,
            "not available: native commands (exec.run, command hooks, local MCP servers) cannot run",
            "use a kernel of 5.13 or later with Landlock enabled (lsm=landlock,... on the kernel command line)",
        );
    }
    if support.seccomp_filter {
        section.add("seccomp", Status::Ok, "filters available");
    } else {
        section.fail(
            "seccomp",
            Status::Problem,
            "seccomp filters are not available",
            "use a kernel built with CONFIG_SECCOMP_FILTER",
        );
    }
    match &support.namespaces {
        Ok(()) => section.add("user and network namespaces", Status::Ok, "available"),
        Err(why) => section.fail(
            "user and network namespaces",
            Status::Warning,
            format!("cannot be made ({why}): commands get no network of their own"),
            "allow unprivileged user namespaces: sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone, kernel.apparmor_restrict_unprivileged_userns",
        ),
    }
    let user_home = std::env::var_os("HOME").map(PathBuf::from);
    match crate::exec::ExecGrants::resolve(
        &settings.exec,
        workspace,
        user_home.as_deref(),
        &crate::grants::OwnFolders::of(home),
    ) {
        Ok(grants) => match crate::exec::sandbox_gap(&grants) {
            None => section.add("commands", Status::Ok, "run in the full sandbox"),
            Some(gap) => section.fail(
                "commands",
                Status::Warning,
                gap,
                "see the lines above, or [exec] in config.toml",
            ),
        },
        Err(error) => section.fail(
            "commands",
            Status::Problem,
            error.to_string(),
            "fix [exec] in config.toml",
        ),
    }
    section
}

#[cfg(not(target_os = "linux"))]
fn kernel_sandbox(_: &crate::config::Settings, _: &Path, _: &Home) -> Section {
    let mut section = Section::new("kernel sandbox (for native commands)");
    section.fail(
        "support",
        Status::Warning,
        format!(
            "native commands need Linux; this is {}",
            std::env::consts::OS
        ),
        "run capstan on Linux to use exec tools, command hooks and local MCP servers",
    );
    section
}

fn compile_cache(home: &Home) -> Section {
    let mut section = Section::new("compile cache");
    let dir = home.compile_cache_dir();
    let key_path = home.compile_cache_key();
    let key = match CacheKey::existing(&key_path) {
        Ok(Some(key)) => {
            section.add(
                "key",
                Status::Ok,
                format!("{} (id {})", key_path.display(), key.id()),
            );
            Some(key)
        }
        Ok(None) => {
            section.add(
                "key",
                Status::Info,
                format!("{} not made yet (made on first use)", key_path.display()),
            );
            None
        }
        Err(error) => {
            section.fail(
                "key",
                Status::Problem,
                error.to_string(),
                format!(
                    "delete {}: capstan makes a new key and compiles components again",
                    key_path.display()
                ),
            );
            None
        }
    };
    let engine = crate::sandbox::engine::build_engine()
        .ok()
        .map(|engine| crate::sandbox::engine::fingerprint(&engine));
    let (mut entries, mut usable, mut bytes) = (0usize, 0usize, 0u64);
    if let Ok(listing) = std::fs::read_dir(&dir) {
        for entry in listing.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".cwasm") else {
                continue;
            };
            entries += 1;
            bytes += entry.metadata().map(|m| m.len()).unwrap_or(0);
            if let (Some(engine), Some(key)) = (&engine, &key)
                && stem.ends_with(&format!("-{engine}-{}", key.id()))
            {
                usable += 1;
            }
        }
    }
    section.add(
        "entries",
        Status::Info,
        format!(
            "{entries} compiled components, {} in {} ({usable} usable by this build and key)",
            approximate_size(bytes),
            dir.display()
        ),
    );
    section
}

fn plugins(home: &Home) -> Section {
    let mut section = Section::new("installed plugins");
    let plugins_dir = home.plugins_dir();
    let lock_path = crate::plugin::store::PluginStore::new(home.plugins_dir()).lock_path();
    if !lock_path.exists() {
        section.add("plugins", Status::Info, "none installed");
        return section;
    }
    let lock = match Lockfile::load(&lock_path) {
        Ok(lock) => lock,
        Err(error) => {
            section.fail(
                "lockfile",
                Status::Problem,
                error.to_string(),
                format!(
                    "restore {} from a backup, or reinstall your plugins",
                    lock_path.display()
                ),
            );
            return section;
        }
    };
    if lock.plugins.is_empty() {
        section.add("plugins", Status::Info, "none installed");
    }
    for (name, entry) in &lock.plugins {
        let dir = entry.dir(&plugins_dir);
        let mut modified = Vec::new();
        let mut missing = Vec::new();
        for (rel, expected) in &entry.files {
            match std::fs::read(dir.join(rel)) {
                Ok(bytes) if crate::sandbox::engine::sha256_hex(&bytes) == *expected => {}
                Ok(_) => modified.push(rel.as_str()),
                Err(_) => missing.push(rel.as_str()),
            }
        }
        let label = format!("{name} {}", entry.version);
        if modified.is_empty() && missing.is_empty() {
            section.add(
                label,
                Status::Ok,
                format!(
                    "ok: {} files as installed ({})",
                    entry.files.len(),
                    entry.signer
                ),
            );
            continue;
        }
        let mut what = Vec::new();
        if !modified.is_empty() {
            what.push(format!("modified: {}", modified.join(", ")));
        }
        if !missing.is_empty() {
            what.push(format!("missing: {}", missing.join(", ")));
        }
        section.fail(
            label,
            Status::Problem,
            format!("{} (it will not load)", what.join("; ")),
            format!(
                "reinstall it with `capstan plugin install {}`, or remove it with `capstan plugin remove {name}`",
                entry.source
            ),
        );
    }
    section
}

fn mcp_servers(home: &Home, workspace: &Path) -> Section {
    let mut section = Section::new("MCP servers");
    let defined = crate::mcp::client::servers_for(home, workspace);
    for problem in &defined.problems {
        section.fail(
            "definition",
            Status::Problem,
            problem.clone(),
            "fix the file it names",
        );
    }
    if defined.specs.is_empty() && defined.problems.is_empty() {
        section.add("servers", Status::Info, "none configured");
    }
    for (spec, allowed) in &defined.specs {
        let kind = if spec.is_local() { "local" } else { "remote" };
        if *allowed {
            section.add(
                spec.name.clone(),
                Status::Ok,
                format!("{kind}, approved ({})", spec.source),
            );
        } else {
            section.fail(
                spec.name.clone(),
                Status::Warning,
                format!("{kind}, not approved: it does not start ({})", spec.source),
                format!("capstan mcp approve {}", spec.name),
            );
        }
    }
    section
}

fn logs(home: &Home) -> Section {
    let mut section = Section::new("logs");
    let dir = home.logs_dir();
    let (mut files, mut bytes) = (0usize, 0u64);
    if let Ok(listing) = std::fs::read_dir(&dir) {
        for entry in listing.flatten() {
            files += 1;
            bytes += entry.metadata().map(|m| m.len()).unwrap_or(0);
        }
    }
    section.add(
        "files",
        Status::Info,
        format!(
            "{files} in {} ({}), one per session",
            dir.display(),
            approximate_size(bytes)
        ),
    );
    let filter = ["CAPSTAN_LOG", "RUST_LOG"]
        .iter()
        .find_map(|var| {
            std::env::var(var)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .map(|v| format!("{var}={v}"))
        })
        .unwrap_or_else(|| {
            format!(
                "{} (the default; -v and -vv raise it)",
                crate::logging::default_filter(0)
            )
        });
    section.add("filter", Status::Info, filter);
    section
}

/// A size rounded for reading: `3.5 MiB`, `12 KiB`, `512 B`.
fn approximate_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = UNITS[0];
    for next in &UNITS[1..] {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = next;
    }
    if value < 10.0 {
        format!("{value:.1} {unit}")
    } else {
        format!("{value:.0} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_rounded_for_reading() {
        assert_eq!(approximate_size(512), "512 B");
        assert_eq!(approximate_size(12_104), "12 KiB");
        assert_eq!(approximate_size(3_634_200), "3.5 MiB");
        assert_eq!(approximate_size(5 << 30), "5.0 GiB");
    }
}
