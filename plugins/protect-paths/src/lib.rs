//! protect-paths: a PreToolUse hook that denies writes and edits under
//! `.git/`, to `.env` files (`.env`, `.env.local`, ...), and to paths
//! matching globs you list:
//!
//! - in the workspace, `.capstan/protected-paths`: one glob per line, `#`
//!   starts a comment (this file is itself protected, so the model cannot
//!   lift a protection);
//! - in the environment, `PROTECT_PATHS`: globs separated by commas.
//!
//! A glob without `/` matches a file name anywhere (`*.pem`); one with `/`
//! matches the path from the workspace root (`deploy/**`). Paths are
//! compared as written in the tool input, after folding `.` and `..`;
//! `.git` and `.env` are matched whatever their case.

use std::path::{Component, Path, PathBuf};

use capstan_sdk::prelude::*;
use capstan_sdk::serde_json::Value;
use globset::{Glob, GlobSet, GlobSetBuilder};

/// The workspace file listing extra globs.
pub const CONFIG_FILE: &str = ".capstan/protected-paths";

/// The environment variable listing extra globs.
pub const ENV_VAR: &str = "PROTECT_PATHS";

/// Input fields that name a path a tool writes.
const PATH_FIELDS: &[&str] = &["path", "file_path", "destination", "target", "to", "paths"];

/// The user's globs, compiled, with where each came from.
pub struct UserGlobs {
    set: GlobSet,
    sources: Vec<String>,
}

impl UserGlobs {
    /// Compiles `(glob, source)` pairs; an invalid glob is an error naming
    /// its source.
    pub fn new(globs: &[(String, String)]) -> Result<Self, String> {
        let mut builder = GlobSetBuilder::new();
        let mut sources = Vec::new();
        for (glob, source) in globs {
            let pattern = if glob.contains('/') {
                glob.trim_start_matches('/').to_string()
            } else {
                format!("**/{glob}")
            };
            let compiled = Glob::new(&pattern)
                .map_err(|e| format!("the glob `{glob}` ({source}) is not valid: {e}"))?;
            builder.add(compiled);
            sources.push(format!("`{glob}` ({source})"));
        }
        let set = builder
            .build()
            .map_err(|e| format!("the protected-path globs cannot be used: {e}"))?;
        Ok(Self { set, sources })
    }

    /// The first glob matching `rel`, described.
    fn matching(&self, rel: &str) -> Option<&str> {
        self.set
            .matches(rel)
            .first()
            .map(|&i| self.sources[i].as_str())
    }
}

/// Reads the globs of the workspace file and the environment.
fn load_globs(workspace: Option<&Path>) -> Result<UserGlobs, String> {
    let mut globs = Vec::new();
    if let Some(ws) = workspace {
        let file = ws.join(CONFIG_FILE);
        match std::fs::read_to_string(&file) {
            Ok(text) => {
                for (n, line) in text.lines().enumerate() {
                    let line = line.split('#').next().unwrap_or_default().trim();
                    if !line.is_empty() {
                        globs.push((line.to_string(), format!("{CONFIG_FILE} line {}", n + 1)));
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot read {CONFIG_FILE}: {e}")),
        }
    }
    if let Ok(list) = std::env::var(ENV_VAR) {
        for glob in list.split(',').map(str::trim).filter(|g| !g.is_empty()) {
            globs.push((glob.to_string(), ENV_VAR.to_string()));
        }
    }
    UserGlobs::new(&globs)
}

/// `path` relative to the workspace, with `.` and `..` folded and `/`
/// separators; absolute paths outside the workspace stay absolute.
pub fn relative(path: &str, workspace: Option<&Path>) -> String {
    let mut folded = PathBuf::new();
    let joined = match workspace {
        Some(ws) => ws.join(path),
        None => PathBuf::from(path),
    };
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                folded.pop();
            }
            Component::CurDir => {}
            other => folded.push(other),
        }
    }
    let rel = match workspace {
        Some(ws) => folded
            .strip_prefix(ws)
            .map(Path::to_path_buf)
            .unwrap_or(folded),
        None => folded,
    };
    rel.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            Component::RootDir => Some(String::new()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Why writing `rel` is refused, if it is.
pub fn protection(rel: &str, globs: &UserGlobs) -> Option<String> {
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    if parts.iter().any(|p| p.eq_ignore_ascii_case(".git")) {
        return Some(
            "it is inside .git/, which holds the repository's history and configuration".into(),
        );
    }
    let name = parts.last().copied().unwrap_or_default();
    if name.to_ascii_lowercase().starts_with(".env") {
        return Some("it is a .env file, which usually holds secrets".into());
    }
    if rel == CONFIG_FILE {
        return Some(format!("{CONFIG_FILE} lists the protected paths"));
    }
    globs
        .matching(rel)
        .map(|glob| format!("it matches the protected glob {glob}"))
}

/// The paths a tool input names for writing.
fn paths(input: &Value) -> Vec<&str> {
    let mut found = Vec::new();
    for field in PATH_FIELDS {
        match input.get(*field) {
            Some(Value::String(p)) => found.push(p.as_str()),
            Some(Value::Array(items)) => found.extend(items.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    found
}

fn protect(event: &Event, ctx: &Context) -> Result<Decision, String> {
    let (Some(tool), Some(input)) = (event.tool_name(), event.tool_input()) else {
        return Ok(Decision::Proceed);
    };
    let targets = paths(input);
    if targets.is_empty() {
        return Ok(Decision::Proceed);
    }
    let workspace = ctx
        .workspace
        .clone()
        .or_else(|| event.str("cwd").map(PathBuf::from));
    let globs = load_globs(ctx.workspace.as_deref())?;
    for path in targets {
        let rel = relative(path, workspace.as_deref());
        if let Some(why) = protection(&rel, &globs) {
            return Ok(Decision::deny(format!(
                "protect-paths blocked this {tool} call: {path} is protected because {why}. Leave it unchanged, or ask the user to change it themselves."
            )));
        }
    }
    Ok(Decision::Proceed)
}

/// The tools protect-paths checks: the file tools' writes and edits, and
/// any tool whose name says it writes.
pub const MATCHER: &str = r"fs\.(?:write|edit)|.*\.[a-z0-9_\-]*(?:write|edit|create|delete|remove|move|rename|patch|append)[a-z0-9_\-]*";

fn hooks() -> Vec<Hook> {
    vec![Hook::on(HookEvent::PreToolUse, protect).matching(MATCHER)]
}

capstan_sdk::export_hooks!(hooks);

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn none() -> UserGlobs {
        UserGlobs::new(&[]).unwrap()
    }

    #[test]
    fn git_and_env_files_are_protected() {
        let ws = Path::new("/ws");
        for path in [
            ".git/config",
            "./.git/hooks/pre-commit",
            "sub/.git/HEAD",
            "/ws/.git/config",
            "src/../.git/config",
            ".GIT/config",
            ".env",
            ".env.local",
            "app/.env.production",
            ".capstan/protected-paths",
        ] {
            let rel = relative(path, Some(ws));
            assert!(protection(&rel, &none()).is_some(), "{path} -> {rel}");
        }
        for path in [
            "src/main.rs",
            ".github/workflows/ci.yml",
            ".gitignore",
            "docs/env.md",
            "environment.py",
            ".capstan/config.toml",
        ] {
            let rel = relative(path, Some(ws));
            assert!(protection(&rel, &none()).is_none(), "{path} -> {rel}");
        }
    }

    #[test]
    fn user_globs_match_names_anywhere_or_paths_from_the_root() {
        let globs = UserGlobs::new(&[
            ("*.pem".into(), "test".into()),
            ("deploy/**".into(), "test".into()),
        ])
        .unwrap();
        let why = protection("certs/server.pem", &globs).unwrap();
        assert!(why.contains("`*.pem` (test)"), "{why}");
        assert!(protection("deploy/prod/values.yaml", &globs).is_some());
        assert!(protection("src/deploy/notes.md", &globs).is_none());
        assert!(protection("src/lib.rs", &globs).is_none());
        let err = UserGlobs::new(&[("a[".into(), "line 3".into())])
            .err()
            .unwrap();
        assert!(err.contains("`a[` (line 3)"), "{err}");
    }

    #[test]
    fn the_matcher_covers_writing_tools_only() {
        let hook = Hook::on(HookEvent::PreToolUse, |_, _| Ok(Decision::Proceed)).matching(MATCHER);
        let wants = |name: &str| {
            hook.wants(&Event {
                kind: HookEvent::PreToolUse,
                payload: capstan_sdk::serde_json::json!({ "tool_name": name }),
            })
        };
        for tool in [
            "fs.write",
            "fs.edit",
            "notes.create_note",
            "files.delete",
            "x.apply_patch",
        ] {
            assert!(wants(tool), "{tool}");
        }
        for tool in ["fs.read", "fs.grep", "web.fetch", "fs.ls"] {
            assert!(!wants(tool), "{tool}");
        }
    }
}
