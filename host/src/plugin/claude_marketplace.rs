//! Claude Code marketplaces: a folder whose `.claude-plugin/marketplace.json`
//! lists plugins, each by `name` with a `source` — a sub-folder of the
//! marketplace (`"./plugins/review"`, relative to `metadata.pluginRoot`
//! when it is set) or a remote one (`{"source": "github", ...}`, a git
//! or npm source) — and optionally the plugin's parts written in the entry
//! itself (`skills`, `commands`, `agents`, `hooks`, `mcpServers`,
//! `lspServers`; with `"strict": false` the entry is the whole definition
//! and the folder needs no `plugin.json`).
//!
//! `capstan plugin install PATH` on such a folder lists its plugins;
//! `--plugin NAME` (or `NAME@PATH`) installs one, `--all` every one. Each
//! picked plugin is imported like a plugin folder
//! ([`super::claude_import`]), with the entry's fields over its
//! `plugin.json`. Git sources (GitHub, a git URL, a folder of one) are
//! fetched in the OS sandbox ([`super::remote_source`]); npm and pip
//! sources are not, and the listing says so.

use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value};

use crate::untrusted_folder::UntrustedFolder;

/// The marketplace file, relative to the marketplace's root.
pub const MARKETPLACE_FILE: &str = ".claude-plugin/marketplace.json";

/// The largest marketplace file read.
const MAX_FILE: usize = 4 << 20;

/// A marketplace read from its folder.
#[derive(Debug, Clone)]
pub struct Marketplace {
    /// Its folder.
    pub root: PathBuf,
    /// Its name (the folder's name when the file gives none).
    pub name: String,
    /// Its plugins, in the file's order.
    pub plugins: Vec<Entry>,
}

/// One plugin of a marketplace.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The plugin's name.
    pub name: String,
    /// Its description, if the entry gives one.
    pub description: Option<String>,
    /// Where its files are.
    pub source: Source,
    /// Whether the plugin's own `plugin.json` counts (`strict`, the
    /// default) or the entry is the whole definition.
    pub strict: bool,
    /// The entry as written, for the fields it sets over `plugin.json`.
    pub fields: Map<String, Value>,
}

/// Where a marketplace plugin's files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A folder inside the marketplace.
    Folder(PathBuf),
    /// A git repository (GitHub, a git URL), fetched at install.
    Git(super::remote_source::GitSource),
    /// Somewhere capstan does not fetch from (npm, pip), in words.
    Remote(String),
    /// A source that is not valid, and why.
    Invalid(String),
}

/// Whether `root` is a marketplace folder.
pub fn is_marketplace(root: &Path) -> bool {
    root.join(MARKETPLACE_FILE).is_file()
}

/// Whether `root` is a marketplace and not a plugin itself: it has no
/// `plugin.toml` and no `.claude-plugin/plugin.json` (a folder with both
/// files is installed as the plugin, as Claude Code's `--plugin-dir` would
/// load it).
pub fn is_marketplace_only(root: &Path) -> bool {
    is_marketplace(root)
        && !root.join(crate::plugin::manifest::MANIFEST_FILE).exists()
        && !root.join(super::claude_import::CLAUDE_MANIFEST).is_file()
}

impl Marketplace {
    /// Reads the marketplace in `root`.
    pub fn load(root: &Path) -> Result<Self, String> {
        let path = root.join(MARKETPLACE_FILE);
        let folder = UntrustedFolder::open(root)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("cannot open {}", root.display()))?;
        let read = folder
            .read(Path::new(MARKETPLACE_FILE), MAX_FILE)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{} has no {MARKETPLACE_FILE}", root.display()))?;
        if read.more {
            return Err(format!(
                "{} is larger than {} MiB",
                path.display(),
                MAX_FILE >> 20
            ));
        }
        let value: Value = serde_json::from_str(&read.text()).map_err(|e| {
            format!(
                "invalid {}: line {}, column {}: {e}; fix the JSON",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
        let Some(object) = value.as_object() else {
            return Err(format!(
                "invalid {}: it must be a JSON object",
                path.display()
            ));
        };
        let Some(entries) = object.get("plugins").and_then(Value::as_array) else {
            return Err(format!(
                "invalid {}: it has no `plugins` list",
                path.display()
            ));
        };
        let plugin_root = object
            .get("metadata")
            .and_then(|m| m.get("pluginRoot"))
            .or_else(|| object.get("pluginRoot"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut plugins: Vec<Entry> = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            let Some(fields) = entry.as_object() else {
                return Err(format!(
                    "invalid {}: plugins[{index}] is not an object",
                    path.display()
                ));
            };
            let Some(name) = fields.get("name").and_then(Value::as_str) else {
                return Err(format!(
                    "invalid {}: plugins[{index}] has no `name`",
                    path.display()
                ));
            };
            if plugins.iter().any(|p| p.name == name) {
                return Err(format!(
                    "invalid {}: two plugins are called `{name}`",
                    path.display()
                ));
            }
            plugins.push(Entry {
                name: name.to_string(),
                description: fields
                    .get("description")
                    .and_then(Value::as_str)
                    .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" ")),
                source: source_of(fields.get("source"), plugin_root),
                strict: fields
                    .get("strict")
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
                fields: fields.clone(),
            });
        }
        let name = object
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| {
                root.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            });
        Ok(Self {
            root: root.to_path_buf(),
            name,
            plugins,
        })
    }

    /// The plugin called `name`, or an error listing the ones there are.
    pub fn entry(&self, name: &str) -> Result<&Entry, String> {
        self.plugins.iter().find(|p| p.name == name).ok_or_else(|| {
            format!(
                "marketplace {} ({}) has no plugin `{name}`; it has: {}",
                self.name,
                self.root.display(),
                self.names().join(", ")
            )
        })
    }

    /// The plugins' names.
    pub fn names(&self) -> Vec<&str> {
        self.plugins.iter().map(|p| p.name.as_str()).collect()
    }

    /// The folder of `entry`'s files, checked to lie inside the
    /// marketplace (no `..`, no symbolic link leading out).
    pub fn folder_of(&self, entry: &Entry) -> Result<PathBuf, String> {
        let rel = match &entry.source {
            Source::Folder(rel) => rel,
            Source::Git(git) => {
                return Err(format!(
                    "plugin {} comes from {}, which is fetched at install, not read from the marketplace folder",
                    entry.name,
                    git.describe()
                ));
            }
            Source::Remote(what) => {
                return Err(format!(
                    "plugin {} comes from {what}, which capstan does not fetch; get it on this machine (npm pack) and install its folder",
                    entry.name
                ));
            }
            Source::Invalid(why) => {
                return Err(format!("plugin {}: {why}", entry.name));
            }
        };
        let root = self
            .root
            .canonicalize()
            .map_err(|e| format!("cannot open {}: {e}", self.root.display()))?;
        let folder = root.join(rel);
        let resolved = folder.canonicalize().map_err(|e| {
            format!(
                "plugin {}: its source {} cannot be opened: {}",
                entry.name,
                folder.display(),
                match e.kind() {
                    std::io::ErrorKind::NotFound => "no such folder".to_string(),
                    _ => e.to_string(),
                }
            )
        })?;
        if !resolved.starts_with(&root) {
            return Err(format!(
                "plugin {}: its source {} leads outside the marketplace folder {}",
                entry.name,
                folder.display(),
                root.display()
            ));
        }
        if !resolved.is_dir() {
            return Err(format!(
                "plugin {}: its source {} is not a folder",
                entry.name,
                folder.display()
            ));
        }
        Ok(resolved)
    }

    /// The marketplace's plugins, one line each, for the user to pick.
    pub fn listing(&self) -> String {
        let mut text = format!(
            "{} is the Claude Code marketplace {} with {} plugin{}:\n",
            self.root.display(),
            self.name,
            self.plugins.len(),
            if self.plugins.len() == 1 { "" } else { "s" }
        );
        let width = self.plugins.iter().map(|p| p.name.len()).max().unwrap_or(0);
        for plugin in &self.plugins {
            let note = match &plugin.source {
                Source::Folder(_) => String::new(),
                Source::Git(git) => format!(" (from {}; fetched at install)", git.describe()),
                Source::Remote(what) => format!(" (from {what}; not fetched)"),
                Source::Invalid(why) => format!(" ({why})"),
            };
            text.push_str(&format!(
                "  {:width$}  {}{note}\n",
                plugin.name,
                plugin.description.as_deref().unwrap_or("")
            ));
        }
        text
    }
}

impl Entry {
    /// The entry's fields over the plugin's own `plugin.json` (`own`, an
    /// object or null): what the plugin is, as Claude Code merges it. A
    /// non-strict entry is the whole definition.
    pub fn merged_over(&self, own: &Value) -> Value {
        let mut merged = match own {
            Value::Object(o) if self.strict => o.clone(),
            _ => Map::new(),
        };
        for (key, value) in &self.fields {
            if matches!(key.as_str(), "source" | "strict") {
                continue;
            }
            merged.insert(key.clone(), value.clone());
        }
        Value::Object(merged)
    }
}

/// Reads an entry's `source` (relative to `plugin_root`).
fn source_of(source: Option<&Value>, plugin_root: &str) -> Source {
    match source {
        None => Source::Invalid("it has no `source`".to_string()),
        Some(Value::String(path)) => folder_source(path, plugin_root),
        Some(Value::Object(o)) => {
            match super::remote_source::GitSource::from_object(o) {
                Some(Ok(git)) => return Source::Git(git),
                Some(Err(why)) => return Source::Invalid(why),
                None => {}
            }
            let kind = o.get("source").and_then(Value::as_str).unwrap_or("?");
            let place = ["repo", "url", "package", "path"]
                .iter()
                .find_map(|k| o.get(*k).and_then(Value::as_str))
                .unwrap_or("");
            match kind {
                "local" | "directory" | "path" if !place.is_empty() => {
                    folder_source(place, plugin_root)
                }
                _ => Source::Remote(format!("{kind} {place}").trim().to_string()),
            }
        }
        Some(_) => Source::Invalid("`source` is neither a path nor an object".to_string()),
    }
}

/// A relative folder source: `./x` (under `plugin_root` if the marketplace
/// sets one, as Claude Code does for bare names), never `..` nor absolute.
fn folder_source(path: &str, plugin_root: &str) -> Source {
    if path.contains("://") || path.starts_with("git@") {
        return Source::Remote(path.to_string());
    }
    let joined = if path.starts_with("./") || path == "." || plugin_root.is_empty() {
        PathBuf::from(path)
    } else {
        Path::new(plugin_root).join(path)
    };
    let mut clean = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::Normal(p) => clean.push(p),
            Component::CurDir => {}
            _ => {
                return Source::Invalid(format!(
                    "source `{path}` must be a folder inside the marketplace, without `..`"
                ));
            }
        }
    }
    Source::Folder(clean)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn entries_are_read_with_their_sources() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            MARKETPLACE_FILE,
            r#"{"name":"tools","metadata":{"pluginRoot":"./plugins"},"plugins":[
              {"name":"a","source":"./plugins/a","description":"  The   A "},
              {"name":"b","source":"b"},
              {"name":"docs","source":"./","strict":false,"skills":["./skills/x"]},
              {"name":"gh","source":{"source":"github","repo":"o/r"}},
              {"name":"up","source":"../elsewhere"}]}"#,
        );
        std::fs::create_dir_all(root.join("plugins/a")).unwrap();
        std::fs::create_dir_all(root.join("plugins/b")).unwrap();
        let market = Marketplace::load(root).unwrap();
        assert_eq!(market.name, "tools");
        assert_eq!(market.names(), ["a", "b", "docs", "gh", "up"]);
        let a = market.entry("a").unwrap();
        assert_eq!(a.description.as_deref(), Some("The A"));
        assert!(market.folder_of(a).unwrap().ends_with("plugins/a"));
        let b = market.entry("b").unwrap();
        assert_eq!(b.source, Source::Folder(PathBuf::from("plugins/b")));
        let docs = market.entry("docs").unwrap();
        assert!(!docs.strict);
        assert_eq!(
            market.folder_of(docs).unwrap(),
            root.canonicalize().unwrap()
        );
        let merged = docs.merged_over(&serde_json::json!({"name": "other", "version": "1.0.0"}));
        assert_eq!(merged["name"], "docs");
        assert!(merged.get("version").is_none());
        assert!(merged.get("source").is_none());
        let gh = market.entry("gh").unwrap();
        assert!(
            matches!(&gh.source, Source::Git(git) if git.url == "https://github.com/o/r.git"),
            "{gh:?}"
        );
        let up = market.folder_of(market.entry("up").unwrap()).unwrap_err();
        assert!(up.contains("without `..`"), "{up}");
        let missing = market.entry("zzz").unwrap_err();
        assert!(missing.contains("it has: a, b, docs, gh, up"), "{missing}");
        let listing = market.listing();
        assert!(
            listing.contains("5 plugins") && listing.contains("fetched at install"),
            "{listing}"
        );
    }

    #[test]
    fn a_source_leading_out_through_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("m");
        write(
            &root,
            MARKETPLACE_FILE,
            r#"{"name":"m","plugins":[{"name":"x","source":"./x"}]}"#,
        );
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.path(), root.join("x")).unwrap();
            let market = Marketplace::load(&root).unwrap();
            let err = market.folder_of(&market.plugins[0]).unwrap_err();
            assert!(err.contains("leads outside"), "{err}");
        }
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            MARKETPLACE_FILE,
            r#"{"plugins":[{"source":"./a"}]}"#,
        );
        let err = Marketplace::load(dir.path()).unwrap_err();
        assert!(err.contains("plugins[0] has no `name`"), "{err}");
        write(dir.path(), MARKETPLACE_FILE, "{nope");
        let err = Marketplace::load(dir.path()).unwrap_err();
        assert!(err.contains("fix the JSON"), "{err}");
    }
}
