//! Remote sources of Claude Code marketplace plugins: a GitHub repository
//! (`{"source": "github", "repo": "owner/repo"}`), a git URL (`{"source":
//! "url" | "git", "url": "https://…/x.git"}`) or a folder of one
//! (`{"source": "git-subdir", "url": …, "path": "plugins/x"}`), each with
//! an optional `ref` (branch or tag) and `sha` (the commit to take).
//!
//! capstan fetches them with `git clone` run inside the OS sandbox of
//! [`crate::exec`]: its only writable folder is a new temporary folder,
//! its network reaches the repository's origin alone (through the
//! sandbox's proxy, which applies [`crate::grants::net`]), its environment
//! is scrubbed (no tokens, no credential helpers). The clone is then
//! installed as a local folder is: hashed, locked, and shown at consent
//! with where it came from.

use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value};

use crate::exec::{Cancel, CommandLine, Ending, ExecGrants, ExecRequest};
use crate::grants::net::NetGrant;

/// How long a clone may take.
const CLONE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// A git repository to fetch a plugin from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitSource {
    /// The repository's URL (`https://github.com/owner/repo.git`).
    pub url: String,
    /// The branch or tag to take, when not the default branch.
    pub reference: Option<String>,
    /// The commit to take, when pinned.
    pub sha: Option<String>,
    /// The plugin's folder inside the repository, when not its top.
    pub path: Option<PathBuf>,
}

impl GitSource {
    /// Reads a `source` object whose kind is `github`, `url`, `git` or
    /// `git-subdir`; `None` for other kinds (npm, pip), an error for a
    /// git source that cannot be used.
    pub fn from_object(object: &Map<String, Value>) -> Option<Result<Self, String>> {
        let kind = object.get("source").and_then(Value::as_str)?;
        let text = |key: &str| {
            object
                .get(key)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_string)
        };
        let url = match kind {
            "github" => {
                let Some(repo) = text("repo") else {
                    return Some(Err("a github source needs `repo` (owner/name)".into()));
                };
                let valid = repo.split('/').count() == 2
                    && repo.split('/').all(|part| {
                        !part.is_empty()
                            && part != "."
                            && part != ".."
                            && part
                                .chars()
                                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                    });
                if !valid {
                    return Some(Err(format!("the github source `{repo}` is not owner/name")));
                }
                format!("https://github.com/{}.git", repo.trim_end_matches(".git"))
            }
            "url" | "git" | "git-subdir" => match text("url") {
                Some(url) => url,
                None => return Some(Err(format!("a {kind} source needs `url`"))),
            },
            _ => return None,
        };
        Some(Self::checked(
            url,
            text("ref"),
            text("sha"),
            text("path").map(PathBuf::from),
        ))
    }

    fn checked(
        url: String,
        reference: Option<String>,
        sha: Option<String>,
        path: Option<PathBuf>,
    ) -> Result<Self, String> {
        let origin = origin_of(&url)?;
        NetGrant::parse(&origin).map_err(|e| format!("the source {url} cannot be reached: {e}"))?;
        if let Some(reference) = &reference
            && (reference.starts_with('-')
                || reference
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control() || "~^:?*[\\".contains(c)))
        {
            return Err(format!("`ref` {reference:?} is not a branch or tag name"));
        }
        if let Some(sha) = &sha
            && !(sha.len() >= 7 && sha.len() <= 64 && sha.chars().all(|c| c.is_ascii_hexdigit()))
        {
            return Err(format!("`sha` {sha:?} is not a commit id"));
        }
        if let Some(path) = &path
            && !path
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(format!(
                "`path` {} must be a folder inside the repository, without `..`",
                path.display()
            ));
        }
        Ok(Self {
            url,
            reference,
            sha,
            path,
        })
    }

    /// Where it comes from, in words: the URL, the ref or commit, the
    /// folder.
    pub fn describe(&self) -> String {
        let mut text = self.url.clone();
        if let Some(reference) = &self.reference {
            text.push_str(&format!(" (ref {reference})"));
        }
        if let Some(sha) = &self.sha {
            text.push_str(&format!(" (commit {sha})"));
        }
        if let Some(path) = &self.path {
            text.push_str(&format!(", folder {}", path.display()));
        }
        text
    }

    /// The origin the clone reaches (`https://github.com`).
    pub fn origin(&self) -> Result<String, String> {
        origin_of(&self.url)
    }
}

/// `scheme://host[:port]` of an http(s) URL; other URLs are refused,
/// since the sandbox's network is an HTTP proxy.
fn origin_of(url: &str) -> Result<String, String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!(
            "the source {url} is not an http(s) URL; capstan fetches git repositories over HTTPS only (clone it yourself and install its folder)"
        ));
    };
    if !matches!(scheme, "https" | "http") {
        return Err(format!(
            "the source {url} uses {scheme}://; capstan fetches git repositories over HTTPS only (clone it yourself and install its folder)"
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.is_empty() || authority.contains('@') {
        return Err(format!(
            "the source {url} must name a host, without a user name or password"
        ));
    }
    Ok(format!("{scheme}://{authority}"))
}

/// A plugin fetched into a temporary folder, removed when dropped.
#[derive(Debug)]
pub struct Fetched {
    /// The temporary folder.
    pub dir: tempfile::TempDir,
    /// The plugin's folder inside it.
    pub root: PathBuf,
}

/// Clones `source` into a new temporary folder with `git` run in the OS
/// sandbox under the grants `grants_for` makes for that folder as the
/// workspace (the fetch keeps nothing writable beside it and no network
/// beside the origin).
pub fn fetch(
    source: &GitSource,
    grants_for: impl FnOnce(&Path) -> Result<ExecGrants, String>,
) -> Result<Fetched, String> {
    let dir = tempfile::Builder::new()
        .prefix("capstan-fetch-")
        .tempdir()
        .map_err(|e| format!("cannot create a temporary folder to fetch into: {e}"))?;
    let workspace = dir.path().canonicalize().map_err(|e| {
        format!(
            "cannot use the temporary folder {}: {e}",
            dir.path().display()
        )
    })?;
    let grants = grants_for(&workspace)?;
    if !grants.sandboxed {
        return Err(format!(
            "{} was not fetched: remote plugins are fetched only inside the OS sandbox, which `[exec] sandbox = \"off\"` turns off; clone it yourself and install its folder",
            source.url
        ));
    }
    let origin = source.origin()?;
    let grant = NetGrant::parse(&origin).map_err(|e| format!("{}: {e}", source.url))?;
    let mut grants = grants;
    grants.workspace = workspace.clone();
    grants.write.clear();
    grants.net.clear();
    grants.env.clear();
    grants.timeout = CLONE_TIMEOUT;

    let mut clone = git_argv(&["clone", "--quiet"]);
    // A pinned commit may be older than the tip: the whole history is
    // fetched then, so it can be checked out.
    if source.sha.is_some() {
        clone.push("--no-checkout".into());
    } else {
        clone.extend(["--depth".into(), "1".into()]);
    }
    if let Some(reference) = &source.reference {
        clone.extend(["--branch".into(), reference.clone()]);
    }
    clone.extend(["--".into(), source.url.clone(), "repo".into()]);
    run_git(clone, &grants, vec![grant], &source.url)?;
    let repo = workspace.join("repo");
    if let Some(sha) = &source.sha {
        let mut checkout = git_argv(&["-C", "repo", "checkout", "--quiet", "--detach"]);
        checkout.push(sha.clone());
        run_git(checkout, &grants, Vec::new(), &source.url)
            .map_err(|e| format!("{e} (the marketplace pins commit {sha})"))?;
    }
    // The history is not part of the plugin.
    let _ = std::fs::remove_dir_all(repo.join(".git"));
    let root = match &source.path {
        None => repo.clone(),
        Some(path) => repo.join(path),
    };
    let resolved = root.canonicalize().map_err(|_| {
        format!(
            "{} has no folder {}",
            source.url,
            source.path.as_deref().unwrap_or(Path::new(".")).display()
        )
    })?;
    if !resolved.starts_with(&repo) || !resolved.is_dir() {
        return Err(format!(
            "{}: the folder {} is not a folder inside the repository",
            source.url,
            source.path.as_deref().unwrap_or(Path::new(".")).display()
        ));
    }
    Ok(Fetched {
        dir,
        root: resolved,
    })
}

/// `git` with settings that keep it from running anything of the
/// repository's or asking for credentials.
fn git_argv(args: &[&str]) -> Vec<String> {
    let mut argv: Vec<String> = [
        "git",
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "credential.helper=",
        "-c",
        "core.askPass=true",
        "-c",
        "protocol.allow=never",
        "-c",
        "protocol.https.allow=always",
        "-c",
        "protocol.http.allow=always",
        "-c",
        "submodule.recurse=false",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    argv.extend(args.iter().map(|s| s.to_string()));
    argv
}

/// Runs one git command in the fetch folder, writable, reaching `net`.
fn run_git(
    argv: Vec<String>,
    grants: &ExecGrants,
    net: Vec<NetGrant>,
    url: &str,
) -> Result<(), String> {
    let request = ExecRequest {
        write: true,
        net,
        separate_errors: true,
        call_id: "fetch".to_string(),
        // The clone's own repository, in a folder of capstan's that only
        // these git commands use (its hooks are off): not a plant.
        writable_protected: vec!["repo/.git".to_string()],
        ..ExecRequest::new(CommandLine::Argv(argv))
    };
    let outcome = crate::exec::run(&request, grants, &Cancel::new(), &mut |_| {})
        .map_err(|e| format!("cannot fetch {url}: {e}"))?;
    let refused = outcome
        .refusals
        .iter()
        .map(|r| format!("{}: {}", r.target, r.reason))
        .collect::<Vec<_>>()
        .join("; ");
    match outcome.ending {
        Ending::Exited(0) => Ok(()),
        Ending::Exited(code) => {
            let errors = outcome.errors.text();
            let errors = crate::escape::line(errors.trim());
            Err(format!(
                "cannot fetch {url}: git ended with exit code {code}{}{}",
                if errors.is_empty() {
                    String::new()
                } else {
                    format!(": {errors}")
                },
                if refused.is_empty() {
                    String::new()
                } else {
                    format!(" (refused: {refused})")
                }
            ))
        }
        Ending::TimedOut => Err(format!(
            "cannot fetch {url}: git took longer than {} s",
            CLONE_TIMEOUT.as_secs()
        )),
        Ending::Cancelled => Err(format!("fetching {url} was cancelled")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(json: &str) -> Option<Result<GitSource, String>> {
        let value: Value = serde_json::from_str(json).unwrap();
        GitSource::from_object(value.as_object().unwrap())
    }

    #[test]
    fn github_url_and_subfolder_sources_are_read() {
        let gh = source(r#"{"source":"github","repo":"o/r","ref":"v2","sha":"abcdef1"}"#)
            .unwrap()
            .unwrap();
        assert_eq!(gh.url, "https://github.com/o/r.git");
        assert_eq!(gh.reference.as_deref(), Some("v2"));
        assert_eq!(gh.sha.as_deref(), Some("abcdef1"));
        assert_eq!(gh.origin().unwrap(), "https://github.com");
        assert_eq!(
            gh.describe(),
            "https://github.com/o/r.git (ref v2) (commit abcdef1)"
        );
        let url = source(r#"{"source":"url","url":"http://127.0.0.1:9/x.git"}"#)
            .unwrap()
            .unwrap();
        assert_eq!(url.origin().unwrap(), "http://127.0.0.1:9");
        let sub = source(r#"{"source":"git-subdir","url":"https://h.example/m.git","path":"p/x"}"#)
            .unwrap()
            .unwrap();
        assert_eq!(sub.path, Some(PathBuf::from("p/x")));
        assert!(source(r#"{"source":"npm","package":"x"}"#).is_none());
    }

    #[test]
    fn unusable_git_sources_say_why() {
        let err = |json: &str| source(json).unwrap().unwrap_err();
        assert!(err(r#"{"source":"github"}"#).contains("needs `repo`"));
        assert!(err(r#"{"source":"github","repo":"../x"}"#).contains("not owner/name"));
        assert!(err(r#"{"source":"url","url":"git@github.com:o/r.git"}"#).contains("HTTPS only"));
        assert!(err(r#"{"source":"url","url":"ssh://h/r.git"}"#).contains("HTTPS only"));
        assert!(err(r#"{"source":"url","url":"https://u:p@h/r.git"}"#).contains("user name"));
        assert!(
            err(r#"{"source":"git","url":"https://h/r.git","ref":"--upload-pack=x"}"#)
                .contains("not a branch")
        );
        assert!(
            err(r#"{"source":"git","url":"https://h/r.git","sha":"zz"}"#).contains("not a commit")
        );
        assert!(
            err(r#"{"source":"git-subdir","url":"https://h/r.git","path":"../up"}"#)
                .contains("without `..`")
        );
    }
}
