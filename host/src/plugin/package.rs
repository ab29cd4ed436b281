//! Which files of a plugin folder make its package: what install copies
//! into the store, hashes into the lockfile and a signature signs.
//!
//! A package holds only what the plugin needs:
//!
//! - `plugin.toml` and every component it lists, wherever they are (a Rust
//!   component is often under `target/`);
//! - its skills: everything under `skills/`, and Claude Code `commands/*.md`
//!   (plus the notes capstan writes when it imports a Claude Code plugin);
//! - the files its `[package] include` patterns name.
//!
//! Of the skills and included files, these are left out: hidden files and
//! folders (`.git/`, `.capstan/`, `.pytest_cache/`, `.venv/`, ...), the
//! folders `target/`, `node_modules/` and `__pycache__/` anywhere, Python
//! virtual environments (a folder holding `pyvenv.cfg`) whatever their
//! name, compiled Python files (`*.pyc`, `*.pyo`), whatever a `.gitignore`
//! in the folder (or a subfolder) ignores, and what `[package] exclude`
//! names.
//! Links and special files are refused only where they would be packaged;
//! elsewhere (cargo's `target/`, a virtual environment) they are passed by.

use std::path::{Component as PathPart, Path};

use globset::{Glob, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};

use super::manifest::{MANIFEST_FILE, Manifest, PackageFilter};
use super::store::{SIGNATURE_FILE, StoreError};
use crate::plugin::claude_import::IMPORT_NOTES;

/// Folders never packaged (unless they hold a listed component): build
/// outputs, dependencies and caches.
pub const SKIPPED_FOLDERS: [&str; 4] = ["target", "node_modules", "__pycache__", ".capstan"];

/// Endings of files never packaged: compiled Python, which the interpreter
/// rebuilds (and which differs between Python versions).
pub const SKIPPED_FILE_ENDINGS: [&str; 2] = [".pyc", ".pyo"];

/// The file that marks a folder as a Python virtual environment (`python3
/// -m venv`), which is never packaged whatever the folder is called.
const VIRTUALENV_MARKER: &str = "pyvenv.cfg";

/// Whether the folder `name` at `path` is never packaged: a build output,
/// dependencies, a cache or a virtual environment.
fn is_skipped_folder(name: &str, path: &Path) -> bool {
    SKIPPED_FOLDERS.contains(&name) || path.join(VIRTUALENV_MARKER).is_file()
}

/// Whether the file `name` is never packaged.
fn is_skipped_file(name: &str) -> bool {
    SKIPPED_FILE_ENDINGS
        .iter()
        .any(|ending| name.ends_with(ending))
}

/// Whether `rel` (a `/`-separated path inside a package) lies in a folder
/// that is never packaged.
pub fn in_skipped_folder(rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    parts[..parts.len().saturating_sub(1)]
        .iter()
        .any(|part| SKIPPED_FOLDERS.contains(part))
}

/// Checks one `[package]` pattern; the error says what is wrong with it.
pub fn check_pattern(pattern: &str) -> Result<(), String> {
    if pattern.trim().is_empty() {
        return Err("is empty".to_string());
    }
    if pattern.starts_with('/') || pattern.contains('\\') {
        return Err(
            "must be relative to the plugin folder, with `/` between folder names".to_string(),
        );
    }
    if pattern.split('/').any(|part| part == "..") {
        return Err("contains `..`; a package holds only files inside its folder".to_string());
    }
    glob(pattern)
        .map(|_| ())
        .map_err(|e| format!("is not a valid glob pattern: {e}"))
}

/// A glob where `*` stops at `/` and `**` crosses folders.
fn glob(pattern: &str) -> Result<Glob, globset::Error> {
    GlobBuilder::new(pattern).literal_separator(true).build()
}

fn glob_set(patterns: &[String]) -> Result<GlobSet, globset::Error> {
    let mut set = GlobSetBuilder::new();
    for pattern in patterns {
        set.add(glob(pattern.trim_end_matches('/'))?);
    }
    set.build()
}

/// Whether `set` matches `rel` or one of the folders above it.
fn matches_or_under(set: &GlobSet, rel: &str) -> bool {
    let mut end = rel.len();
    loop {
        if set.is_match(&rel[..end]) {
            return true;
        }
        match rel[..end].rfind('/') {
            Some(slash) => end = slash,
            None => return false,
        }
    }
}

/// The `[package]` patterns, compiled.
struct Filter {
    include: GlobSet,
    exclude: GlobSet,
}

impl Filter {
    fn new(filter: &PackageFilter) -> Result<Self, StoreError> {
        let compile = |patterns: &[String]| {
            glob_set(patterns).map_err(|e| StoreError::Pattern {
                reason: e.to_string(),
            })
        };
        Ok(Self {
            include: compile(&filter.include)?,
            exclude: compile(&filter.exclude)?,
        })
    }
}

/// One rule of a `.gitignore` file.
struct IgnoreRule {
    matcher: GlobMatcher,
    negated: bool,
    folders_only: bool,
}

/// The rules of one `.gitignore`, for paths below `base` (`""` for the
/// package's root folder).
struct IgnoreFile {
    base: String,
    rules: Vec<IgnoreRule>,
}

impl IgnoreFile {
    /// Reads `dir/.gitignore` if there is one (a plain file; a link is
    /// passed by). Lines that are not valid patterns are skipped, as git
    /// does.
    fn read(dir: &Path, base: &str) -> Option<Self> {
        let path = dir.join(".gitignore");
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if !meta.is_file() || meta.len() > 1 << 20 {
            return None;
        }
        let text = std::fs::read_to_string(&path).ok()?;
        let rules: Vec<IgnoreRule> = text.lines().filter_map(IgnoreRule::parse).collect();
        (!rules.is_empty()).then(|| Self {
            base: base.to_string(),
            rules,
        })
    }

    /// Whether this file decides `rel`: `Some(true)` ignored, `Some(false)`
    /// re-included by a `!` rule, `None` no rule matches.
    fn decide(&self, rel: &str, is_dir: bool) -> Option<bool> {
        let local = if self.base.is_empty() {
            rel
        } else {
            rel.strip_prefix(&self.base)?.strip_prefix('/')?
        };
        self.rules
            .iter()
            .rev()
            .find(|rule| (is_dir || !rule.folders_only) && rule.matcher.is_match(local))
            .map(|rule| !rule.negated)
    }
}

impl IgnoreRule {
    /// One line of a `.gitignore`: blank lines and `#` comments give none.
    fn parse(line: &str) -> Option<Self> {
        let line = line.trim_end_matches([' ', '\t', '\r']);
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let (negated, line) = match line.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, line.strip_prefix('\\').unwrap_or(line)),
        };
        let (folders_only, line) = match line.strip_suffix('/') {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        if line.is_empty() {
            return None;
        }
        // A pattern with a `/` before its end is anchored to the folder of
        // the .gitignore; one without matches at any depth.
        let pattern = match line.strip_prefix('/') {
            Some(anchored) => anchored.to_string(),
            None if line.contains('/') => line.to_string(),
            None => format!("**/{line}"),
        };
        let matcher = glob(&pattern).ok()?.compile_matcher();
        Some(Self {
            matcher,
            negated,
            folders_only,
        })
    }
}

/// Whether `rel` is one of the files a plugin always brings: its skills.
fn is_skill_file(rel: &str) -> bool {
    rel.starts_with("skills/") || skill_file_in_plugin(rel).is_some() || rel == IMPORT_NOTES
}

/// The files of the package in `root` for `manifest`, as sorted relative
/// `/`-separated paths (see the module docs for which). A link or special
/// file where a package file would be is refused; a listed component that
/// is not there is left for the caller to report.
pub fn select(root: &Path, manifest: &Manifest) -> Result<Vec<String>, StoreError> {
    let filter = Filter::new(&manifest.package)?;
    let mut selected = Vec::new();
    let mut ignores = Vec::new();
    walk(root, "", &filter, &mut ignores, &mut selected, &mut None)?;
    let mut named = vec![MANIFEST_FILE.to_string()];
    named.extend(manifest.components.iter().map(|c| component_path(c)));
    for rel in named {
        if !selected.contains(&rel) && plain_file_at(root, &rel)? {
            selected.push(rel);
        }
    }
    selected.sort();
    selected.dedup();
    Ok(selected)
}

/// Every file of the folder `root` that a package could hold — the same
/// rules as [`select`] with everything included: hidden files, build and
/// dependency folders, virtual environments, compiled Python and what a
/// `.gitignore` ignores are left out — as sorted relative paths, and
/// apart the links and special files passed by (never followed).
pub fn whole_folder(root: &Path) -> Result<(Vec<String>, Vec<String>), StoreError> {
    let filter = Filter::new(&PackageFilter {
        include: vec!["**".to_string()],
        exclude: Vec::new(),
    })?;
    let mut selected = Vec::new();
    let mut passed_by = Some(Vec::new());
    walk(
        root,
        "",
        &filter,
        &mut Vec::new(),
        &mut selected,
        &mut passed_by,
    )?;
    selected.sort();
    Ok((selected, passed_by.unwrap_or_default()))
}

/// Whether `root/rel` is a plain file reached through plain folders:
/// `false` when it does not exist, an error when a link or special file is
/// in the way.
fn plain_file_at(root: &Path, rel: &str) -> Result<bool, StoreError> {
    let mut path = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for (index, part) in parts.iter().enumerate() {
        path.push(part);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(source) => {
                return Err(StoreError::Io {
                    action: "inspect",
                    path,
                    source,
                });
            }
        };
        let kind = meta.file_type();
        if kind.is_symlink() || !(kind.is_file() || kind.is_dir()) {
            return Err(StoreError::NotAPlainFile {
                kind: kind_of(&kind),
                path,
            });
        }
        let last = index + 1 == parts.len();
        if (last && kind.is_dir()) || (!last && kind.is_file()) {
            return Ok(false);
        }
    }
    Ok(true)
}

fn kind_of(kind: &std::fs::FileType) -> &'static str {
    if kind.is_symlink() {
        "symbolic link"
    } else {
        "special file (device, socket or pipe)"
    }
}

/// Visits `dir` (`rel` inside the package), adding the files to package.
/// A link or special file where a package file would be is an error, or,
/// when `passed_by` is given, listed there and left out.
fn walk(
    dir: &Path,
    rel: &str,
    filter: &Filter,
    ignores: &mut Vec<IgnoreFile>,
    selected: &mut Vec<String>,
    passed_by: &mut Option<Vec<String>>,
) -> Result<(), StoreError> {
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| StoreError::Io {
            action,
            path,
            source,
        }
    };
    let pushed = match IgnoreFile::read(dir, rel) {
        Some(file) => {
            ignores.push(file);
            true
        }
        None => false,
    };
    let mut entries = std::fs::read_dir(dir)
        .map_err(io("list", dir))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io("list", dir))?;
    entries.sort_by_key(|e| e.file_name());
    let result = entries.iter().try_for_each(|entry| {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            // Not nameable in a package listing; never packaged.
            return Ok(());
        };
        if name.starts_with('.') || (rel.is_empty() && name == SIGNATURE_FILE) {
            return Ok(());
        }
        let path = entry.path();
        let kind = entry.file_type().map_err(io("inspect", &path))?;
        if kind.is_dir() && is_skipped_folder(&name, &path) {
            return Ok(());
        }
        if !kind.is_dir() && is_skipped_file(&name) {
            return Ok(());
        }
        let child = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let ignored = ignores
            .iter()
            .rev()
            .find_map(|file| file.decide(&child, kind.is_dir()))
            .unwrap_or(false);
        if ignored || matches_or_under(&filter.exclude, &child) {
            return Ok(());
        }
        if kind.is_dir() {
            return walk(&path, &child, filter, ignores, selected, passed_by);
        }
        let wanted = child == MANIFEST_FILE
            || is_skill_file(&child)
            || matches_or_under(&filter.include, &child);
        if !wanted {
            return Ok(());
        }
        if !kind.is_file() {
            if let Some(passed_by) = passed_by {
                passed_by.push(child);
                return Ok(());
            }
            return Err(StoreError::NotAPlainFile {
                path,
                kind: kind_of(&kind),
            });
        }
        selected.push(child);
        Ok(())
    });
    if pushed {
        ignores.pop();
    }
    result
}

/// Whether an archive entry at `rel` (inside the package) is worth
/// unpacking: not inside a folder that is never packaged, unless it is one
/// of `components`.
pub fn unpack_wanted(rel: &str, components: &[String]) -> bool {
    !in_skipped_folder(rel) || components.iter().any(|c| component_path(c) == rel)
}

/// A component path as written in plugin.toml, as the package lists it
/// (`./` and empty parts dropped).
pub fn component_path(path: &str) -> String {
    path.split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// A relative path of an archive entry as a `/`-separated string, if it is
/// plain (no `..`, not absolute).
pub fn relative(path: &Path) -> Option<String> {
    let mut parts = Vec::new();
    for part in path.components() {
        match part {
            PathPart::Normal(p) => parts.push(p.to_str()?.to_string()),
            PathPart::CurDir => {}
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

/// The most sub-folders of `commands/` a plugin's command may sit in, as
/// for a project's `.claude/commands/`.
pub const MAX_COMMAND_SUBFOLDERS: usize = 4;

/// Whether `rel`, a file of a plugin, is a skill: `skills/NAME/SKILL.md`
/// or `commands/NAME.md`, or a command in sub-folders of `commands/`
/// (`commands/git/sync.md`, which Claude Code names `plugin:git:sync`).
/// Returns its folder (relative) and the name to use when its front matter
/// gives none.
pub fn skill_file_in_plugin(rel: &str) -> Option<(String, String)> {
    let parts: Vec<&str> = rel.split('/').collect();
    match parts.as_slice() {
        ["skills", folder, "SKILL.md"] => Some((format!("skills/{folder}"), (*folder).to_string())),
        ["commands", folders @ .., file] if folders.len() <= MAX_COMMAND_SUBFOLDERS => {
            let stem = file.strip_suffix(".md")?;
            if folders.iter().any(|f| f.is_empty() || f.starts_with('.')) {
                return None;
            }
            let mut folder = String::from("commands");
            for part in folders {
                folder.push('/');
                folder.push_str(part);
            }
            Some((folder, stem.to_string()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_skill_files_are_recognised() {
        assert_eq!(
            skill_file_in_plugin("skills/review/SKILL.md"),
            Some(("skills/review".into(), "review".into()))
        );
        assert_eq!(
            skill_file_in_plugin("commands/deploy.md"),
            Some(("commands".into(), "deploy".into()))
        );
        assert_eq!(skill_file_in_plugin("skills/review/ref.md"), None);
        assert_eq!(
            skill_file_in_plugin("commands/git/sync.md"),
            Some(("commands/git".into(), "sync".into()))
        );
        assert_eq!(skill_file_in_plugin("commands/a/b/c/d/e/x.md"), None);
        assert_eq!(skill_file_in_plugin("commands/git/notes.txt"), None);
    }

    fn manifest(extra: &str) -> Manifest {
        let text = format!(
            "name = \"demo\"\nversion = \"0.1.0\"\ndescription = \"Demo\"\ncomponents = [\"target/wasm32-wasip2/release/demo.wasm\"]\n{extra}"
        );
        Manifest::parse(&text, Path::new("plugin.toml")).unwrap()
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn only_what_the_plugin_needs_is_selected() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "plugin.toml", "");
        write(root, "target/wasm32-wasip2/release/demo.wasm", "wasm");
        write(root, "target/debug/build/out.txt", "build output");
        std::os::unix::fs::symlink("/etc", root.join("target/debug/link")).unwrap();
        write(root, "src/lib.rs", "code");
        write(root, "Cargo.toml", "[package]");
        write(root, "skills/tidy/SKILL.md", "skill");
        write(root, "skills/tidy/__pycache__/x.pyc", "cache");
        write(root, "skills/tidy/old.pyc", "python 2 cache");
        write(root, "skills/tidy/.pytest_cache/v/cache/lastfailed", "{}");
        write(root, "skills/tidy/scratch.tmp", "ignored");
        write(root, "skills/tidy/notes/keep.tmp", "re-included");
        write(root, ".gitignore", "*.tmp\n!notes/keep.tmp\n");
        write(root, "commands/go.md", "command");
        write(root, "node_modules/x/index.js", "dependency");
        write(root, "data/table.csv", "a,b");
        write(root, "data/drafts/old.csv", "old");
        write(root, "data/env/pyvenv.cfg", "home = /usr/bin");
        write(root, "data/env/lib/site.py", "a virtual environment");
        write(root, "LICENSE", "license");
        let files = select(
            root,
            &manifest(
                "[package]\ninclude = [\"data\", \"LICENSE\"]\nexclude = [\"data/drafts\"]\n",
            ),
        )
        .unwrap();
        assert_eq!(
            files,
            [
                "LICENSE",
                "commands/go.md",
                "data/table.csv",
                "plugin.toml",
                "skills/tidy/SKILL.md",
                "target/wasm32-wasip2/release/demo.wasm",
            ]
        );
    }

    #[test]
    fn nested_gitignores_apply_below_their_folder() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "plugin.toml", "");
        write(root, "skills/a/SKILL.md", "a");
        write(root, "skills/a/out/x.txt", "x");
        write(root, "skills/a/.gitignore", "/out/\n");
        write(root, "skills/b/SKILL.md", "b");
        write(root, "skills/b/out/y.txt", "y");
        let files = select(root, &manifest("")).unwrap();
        assert_eq!(
            files,
            [
                "plugin.toml",
                "skills/a/SKILL.md",
                "skills/b/SKILL.md",
                "skills/b/out/y.txt",
            ]
        );
    }

    #[test]
    fn links_are_refused_only_where_they_would_be_packaged() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "plugin.toml", "");
        write(root, "skills/a/SKILL.md", "a");
        std::os::unix::fs::symlink("/etc/passwd", root.join("skills/a/passwd")).unwrap();
        let err = select(root, &manifest("")).unwrap_err().to_string();
        assert!(
            err.contains("symbolic link") && err.contains("passwd"),
            "{err}"
        );

        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "plugin.toml", "");
        std::fs::create_dir_all(root.join("elsewhere")).unwrap();
        write(root, "elsewhere/demo.wasm", "wasm");
        std::os::unix::fs::symlink(root.join("elsewhere"), root.join("target")).unwrap();
        let err = select(root, &manifest("")).unwrap_err().to_string();
        assert!(
            err.contains("symbolic link") && err.contains("target"),
            "{err}"
        );
    }

    #[test]
    fn patterns_are_checked() {
        assert!(check_pattern("data/**").is_ok());
        assert!(check_pattern("/etc/x").is_err());
        assert!(check_pattern("../x").is_err());
        assert!(check_pattern("a[").is_err());
        assert!(check_pattern(" ").is_err());
    }

    #[test]
    fn archives_skip_build_folders_but_not_components() {
        let components = vec!["./target/wasm32-wasip2/release/demo.wasm".to_string()];
        assert!(unpack_wanted(
            "target/wasm32-wasip2/release/demo.wasm",
            &components
        ));
        assert!(!unpack_wanted("target/debug/demo", &components));
        assert!(!unpack_wanted("x/node_modules/a.js", &components));
        assert!(unpack_wanted("skills/a/SKILL.md", &components));
        assert!(unpack_wanted("target", &components));
    }
}
