//! `plugin.toml`: a plugin's name, version, components, requested
//! capabilities and limits, validated with errors that name the field and
//! line.
//!
//! ```toml
//! name = "weather"                       # required: a-z, 0-9, `-`, `_`; starts with a letter; <= 64
//! version = "0.2.0"                      # required: semver, MAJOR.MINOR.PATCH[-pre][+build]
//! description = "Forecasts from open-meteo.com"   # required: one line, <= 200 characters
//! authors = ["Ada <ada@example.com>"]    # optional
//! components = ["weather.wasm"]          # required: relative .wasm paths, no `..` ([] for skills only)
//!
//! [capabilities]                         # optional; nothing is granted by default
//! fs = [{ path = "$WORKSPACE", access = "read" }]    # or "$PLUGIN_DATA", or an absolute path; access "read" (default) or "read-write"
//! net = ["https://api.open-meteo.com"]   # scheme://host[:port], `*.suffix` wildcards
//! env = ["TZ"]                           # variable names
//! secrets = [{ name = "OPEN_METEO_KEY", header = "X-Api-Key", format = "{}", hosts = ["api.open-meteo.com"] }]
//!
//! [limits]                               # optional
//! memory = "128MiB"                      # bytes, or KiB / MiB / GiB; at most 4GiB
//! timeout = "20s"                        # ms, s or m; at most 10m
//!
//! [build]                                # optional; how `capstan plugin build` builds it (crate::scaffold)
//! lang = "python"
//!
//! [package]                              # optional; which files install copies (crate::plugin::package)
//! include = ["data/**", "LICENSE"]       # files to install besides the manifest, components and skills
//! exclude = ["skills/*/drafts/**"]       # files never to install (the manifest and components always are)
//! ```
//!
//! Unknown keys are errors anywhere, so a misspelt capability is never
//! silently dropped. Every host a secret is sent to must be covered by a
//! `net` origin, and a secret's name cannot also be an `env` grant (the
//! plugin would read the value).

use std::collections::HashSet;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::grants::{self, Access, Capabilities, EnvGrant, FsRequest, SecretGrant};
use crate::untrusted_folder::UntrustedFolder;

/// The manifest's file name, at the root of a plugin folder.
pub const MANIFEST_FILE: &str = "plugin.toml";

/// The largest `plugin.toml` read.
pub const MAX_MANIFEST: usize = 1 << 20;

/// A validated `plugin.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The plugin's name: lowercase letters, digits, `-` and `_`, starting
    /// with a letter. Its tools are called `NAME.TOOL`.
    pub name: String,
    /// Its version (semver).
    pub version: String,
    /// One line saying what it does.
    pub description: String,
    /// Who wrote it.
    pub authors: Vec<String>,
    /// Its component files, relative to the manifest's folder.
    pub components: Vec<String>,
    /// What it asks to be granted.
    pub capabilities: Capabilities,
    /// Its limits, where it asks for other than the defaults.
    pub limits: ManifestLimits,
    /// Which files, besides the manifest, components and skills, its
    /// package holds.
    pub package: PackageFilter,
}

/// The `[package]` table: glob patterns (relative to the plugin folder,
/// `/`-separated) naming files to install besides the manifest, its
/// components and its skills, and files never to install.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackageFilter {
    /// Files to install too; a pattern naming a folder takes all of it.
    pub include: Vec<String>,
    /// Files never to install, among the skills and included files; a
    /// pattern naming a folder leaves out all of it.
    pub exclude: Vec<String>,
}

/// Limits a manifest may set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ManifestLimits {
    /// Linear memory cap in bytes.
    pub memory: Option<u64>,
    /// Time limit per call.
    pub timeout: Option<Duration>,
}

/// A manifest could not be read or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("cannot read {}: {}; a plugin folder needs a {MANIFEST_FILE} at its root", path.display(), io_reason(source))]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file cannot be read safely (a link leading out of the package, a
    /// FIFO, a file too large).
    #[error("refusing {}: {reason}", path.display())]
    Refused {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The file is not valid: the message names the field and line.
    #[error("invalid {}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The line (1-based) the problem is on.
        line: usize,
        /// What is wrong and how to fix it.
        message: String,
    },
}

/// The largest memory limit a manifest may ask for.
pub const MAX_MEMORY: u64 = 4 << 30;
/// The longest time limit a manifest may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// The longest description.
pub const MAX_DESCRIPTION: usize = 200;
/// The longest plugin name.
pub const MAX_NAME: usize = 64;

const ROOT_KEYS: &[&str] = &[
    "name",
    "version",
    "description",
    "authors",
    "components",
    "capabilities",
    "limits",
    "build",
    "package",
];
const CAPABILITY_KEYS: &[&str] = &["fs", "net", "env", "secrets"];
const FS_KEYS: &[&str] = &["path", "access"];
const SECRET_KEYS: &[&str] = &["name", "header", "format", "hosts"];
const LIMIT_KEYS: &[&str] = &["memory", "timeout"];
const PACKAGE_KEYS: &[&str] = &["include", "exclude"];

/// An I/O error in words.
fn io_reason(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => {
            let text = err.to_string();
            match text.find(" (os error") {
                Some(end) => text[..end].to_string(),
                None => text,
            }
        }
    }
}

impl Manifest {
    /// Reads `plugin.toml` from a plugin folder, beneath it: a package is
    /// someone else's, so a manifest that is a symbolic link leading out of
    /// it, a FIFO or a device, or larger than [`MAX_MANIFEST`], is refused
    /// rather than read.
    pub fn load(dir: &Path) -> Result<Self, ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let refused = |reason: String| ManifestError::Refused {
            path: path.clone(),
            reason,
        };
        let folder = UntrustedFolder::open(dir)
            .map_err(|e| refused(e.to_string()))?
            .ok_or_else(|| ManifestError::Unreadable {
                path: path.clone(),
                source: std::io::ErrorKind::NotFound.into(),
            })?;
        let read = folder
            .read(Path::new(MANIFEST_FILE), MAX_MANIFEST)
            .map_err(|e| refused(e.to_string()))?
            .ok_or_else(|| ManifestError::Unreadable {
                path: path.clone(),
                source: std::io::ErrorKind::NotFound.into(),
            })?;
        if read.more {
            return Err(refused(format!(
                "it is larger than {} KiB",
                MAX_MANIFEST / 1024
            )));
        }
        let text = String::from_utf8(read.bytes).map_err(|_| ManifestError::Unreadable {
            path: path.clone(),
            source: std::io::ErrorKind::InvalidData.into(),
        })?;
        Self::parse(&text, &path)
    }

    /// Parses and validates a manifest's text; `path` is used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ManifestError> {
        let doc = Doc { text, path };
        let root = DeTable::parse(text).map_err(|e| {
            let line = doc.line(e.span().map_or(0, |s| s.start));
            doc.error(
                line,
                format!("TOML syntax error at line {line}: {}", e.message().trim()),
            )
        })?;
        doc.manifest(root.get_ref())
    }
}

/// The text being parsed, for turning positions into lines.
struct Doc<'a> {
    text: &'a str,
    path: &'a Path,
}

type Entry<'a, 'i> = (
    &'a Spanned<std::borrow::Cow<'i, str>>,
    &'a Spanned<DeValue<'i>>,
);

impl Doc<'_> {
    /// The 1-based line of a byte offset.
    fn line(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    fn error(&self, line: usize, message: String) -> ManifestError {
        ManifestError::Invalid {
            path: self.path.to_path_buf(),
            line,
            message,
        }
    }

    /// An error about `field`, at the line `span` starts on.
    fn at<T>(
        &self,
        span: Range<usize>,
        field: &str,
        problem: impl std::fmt::Display,
    ) -> Result<T, ManifestError> {
        let line = self.line(span.start);
        Err(self.error(line, format!("`{field}` at line {line}: {problem}")))
    }

    /// A table's entries in source order, refusing keys not in `known`.
    fn entries<'a, 'i>(
        &self,
        table: &'a DeTable<'i>,
        section: &str,
        known: &[&str],
    ) -> Result<Vec<Entry<'a, 'i>>, ManifestError> {
        let mut entries: Vec<Entry<'a, 'i>> = table.iter().collect();
        entries.sort_by_key(|(k, _)| k.span().start);
        for (key, _) in &entries {
            let name: &str = key.get_ref();
            if !known.contains(&name) {
                let line = self.line(key.span().start);
                let hint = if section == "[capabilities]" && name == "limits" {
                    " (limits go in a [limits] table of their own)"
                } else {
                    ""
                };
                return Err(self.error(
                    line,
                    format!(
                        "unknown key `{name}` in {section} at line {line}; known keys: {}{hint}",
                        known.join(", ")
                    ),
                ));
            }
        }
        Ok(entries)
    }

    fn string(&self, field: &str, value: &Spanned<DeValue<'_>>) -> Result<String, ManifestError> {
        match value.get_ref() {
            DeValue::String(s) => Ok(s.to_string()),
            other => self.at(
                value.span(),
                field,
                format!("expected a string, found {}", other.type_str()),
            ),
        }
    }

    fn table<'a, 'i>(
        &self,
        field: &str,
        value: &'a Spanned<DeValue<'i>>,
    ) -> Result<&'a DeTable<'i>, ManifestError> {
        match value.get_ref() {
            DeValue::Table(t) => Ok(t),
            other => self.at(
                value.span(),
                field,
                format!("expected a table, found {}", other.type_str()),
            ),
        }
    }

    fn array<'a, 'i>(
        &self,
        field: &str,
        value: &'a Spanned<DeValue<'i>>,
    ) -> Result<&'a [Spanned<DeValue<'i>>], ManifestError> {
        match value.get_ref() {
            DeValue::Array(a) => Ok(a),
            other => self.at(
                value.span(),
                field,
                format!("expected an array, found {}", other.type_str()),
            ),
        }
    }

    /// An array of strings, each with its span.
    fn strings(
        &self,
        field: &str,
        value: &Spanned<DeValue<'_>>,
    ) -> Result<Vec<(String, Range<usize>)>, ManifestError> {
        self.array(field, value)?
            .iter()
            .map(|item| Ok((self.string(field, item)?, item.span())))
            .collect()
    }

    fn manifest(&self, root: &DeTable<'_>) -> Result<Manifest, ManifestError> {
        let mut name = None;
        let mut version = None;
        let mut description = None;
        let mut authors = Vec::new();
        let mut components = None;
        let mut capabilities = Capabilities::default();
        let mut limits = ManifestLimits::default();
        let mut package = PackageFilter::default();
        for (key, value) in self.entries(root, "the top level", ROOT_KEYS)? {
            match key.get_ref().as_ref() {
                "name" => name = Some(self.name(value)?),
                "version" => version = Some(self.version(value)?),
                "description" => description = Some(self.description(value)?),
                "authors" => authors = self.authors(value)?,
                "components" => components = Some(self.components(value)?),
                "capabilities" => capabilities = self.capabilities(value)?,
                // How to build the plugin from source: read by `capstan
                // plugin build` (crate::scaffold), not by install.
                "build" => {}
                "package" => package = self.package(value)?,
                _ => limits = self.limits(value)?,
            }
        }
        let missing = |field: &str, example: &str| {
            self.error(
                1,
                format!("missing required field `{field}`; add a line such as {example}"),
            )
        };
        Ok(Manifest {
            name: name.ok_or_else(|| missing("name", "name = \"my-plugin\""))?,
            version: version.ok_or_else(|| missing("version", "version = \"0.1.0\""))?,
            description: description.ok_or_else(|| {
                missing("description", "description = \"What it does, in one line\"")
            })?,
            authors,
            components: components
                .ok_or_else(|| missing("components", "components = [\"plugin.wasm\"]"))?,
            capabilities,
            limits,
            package,
        })
    }

    fn package(&self, value: &Spanned<DeValue<'_>>) -> Result<PackageFilter, ManifestError> {
        let table = self.table("package", value)?;
        let mut filter = PackageFilter::default();
        for (key, value) in self.entries(table, "[package]", PACKAGE_KEYS)? {
            let field = format!("package.{}", key.get_ref());
            let mut patterns = Vec::new();
            for (pattern, span) in self.strings(&field, value)? {
                if let Err(why) = super::package::check_pattern(&pattern) {
                    return self.at(span, &field, format!("\"{pattern}\" {why}"));
                }
                patterns.push(pattern);
            }
            if key.get_ref() == "include" {
                filter.include = patterns;
            } else {
                filter.exclude = patterns;
            }
        }
        Ok(filter)
    }

    fn name(&self, value: &Spanned<DeValue<'_>>) -> Result<String, ManifestError> {
        let name = self.string("name", value)?;
        let starts = name.chars().next().is_some_and(|c| c.is_ascii_lowercase());
        let chars = name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !starts || !chars {
            return self.at(value.span(), "name", format!("\"{name}\" is not a valid plugin name: use lowercase letters, digits, `-` and `_`, starting with a letter"));
        }
        if name.len() > MAX_NAME {
            return self.at(
                value.span(),
                "name",
                format!(
                    "the name is {} characters long; the most is {MAX_NAME}",
                    name.len()
                ),
            );
        }
        Ok(name)
    }

    fn version(&self, value: &Spanned<DeValue<'_>>) -> Result<String, ManifestError> {
        let version = self.string("version", value)?;
        match check_semver(&version) {
            Ok(()) => Ok(version),
            Err(why) => self.at(value.span(), "version", format!("\"{version}\" is not a semantic version ({why}); write MAJOR.MINOR.PATCH such as \"1.2.0\" or \"1.2.0-beta.1\"")),
        }
    }

    fn description(&self, value: &Spanned<DeValue<'_>>) -> Result<String, ManifestError> {
        let description = self.string("description", value)?;
        let chars = description.chars().count();
        if description.trim().is_empty() {
            self.at(
                value.span(),
                "description",
                "it is empty; say in one line what the plugin does",
            )
        } else if description.contains(['\n', '\r']) {
            self.at(value.span(), "description", "it must be one line")
        } else if chars > MAX_DESCRIPTION {
            self.at(
                value.span(),
                "description",
                format!("it is {chars} characters long; the most is {MAX_DESCRIPTION}"),
            )
        } else {
            Ok(description)
        }
    }

    fn authors(&self, value: &Spanned<DeValue<'_>>) -> Result<Vec<String>, ManifestError> {
        let mut authors = Vec::new();
        for (author, span) in self.strings("authors", value)? {
            if author.trim().is_empty() || author.contains(['\n', '\r']) {
                return self.at(
                    span,
                    "authors",
                    "each author is one non-empty line, such as \"Ada <ada@example.com>\"",
                );
            }
            authors.push(author);
        }
        Ok(authors)
    }

    fn components(&self, value: &Spanned<DeValue<'_>>) -> Result<Vec<String>, ManifestError> {
        // An empty list is a plugin of `SKILL.md` skills only; install
        // checks that the package has some.
        let items = self.strings("components", value)?;
        let mut seen = HashSet::new();
        let mut components = Vec::new();
        for (component, span) in items {
            if let Err(why) = check_component_path(&component) {
                return self.at(span, "components", format!("\"{component}\" {why}"));
            }
            let normal: Vec<&str> = component
                .split('/')
                .filter(|p| !p.is_empty() && *p != ".")
                .collect();
            if !seen.insert(normal.join("/")) {
                return self.at(
                    span,
                    "components",
                    format!("\"{component}\" is listed twice"),
                );
            }
            components.push(component);
        }
        Ok(components)
    }

    fn capabilities(&self, value: &Spanned<DeValue<'_>>) -> Result<Capabilities, ManifestError> {
        let table = self.table("capabilities", value)?;
        let mut caps = Capabilities::default();
        let mut secret_lines = Vec::new();
        let mut env_spans = Vec::new();
        for (key, value) in self.entries(table, "[capabilities]", CAPABILITY_KEYS)? {
            match key.get_ref().as_ref() {
                "fs" => caps.fs = self.fs(value)?,
                "net" => {
                    let mut seen = HashSet::new();
                    for (origin, span) in self.strings("capabilities.net", value)? {
                        let grant = match grants::NetGrant::parse(&origin) {
                            Ok(grant) => grant,
                            Err(why) => {
                                return self.at(
                                    span,
                                    "capabilities.net",
                                    format!("\"{origin}\" is not a valid origin: {why}"),
                                );
                            }
                        };
                        if !seen.insert(origin.to_ascii_lowercase()) {
                            return self.at(
                                span,
                                "capabilities.net",
                                format!("\"{origin}\" is listed twice"),
                            );
                        }
                        caps.net.push(grant);
                    }
                }
                "env" => {
                    for (name, span) in self.strings("capabilities.env", value)? {
                        let grant = match EnvGrant::parse(&name, &[]) {
                            Ok(grant) => grant,
                            Err(why) => return self.at(span, "capabilities.env", why),
                        };
                        if caps.env.contains(&grant) {
                            return self.at(
                                span,
                                "capabilities.env",
                                format!("`{name}` is listed twice"),
                            );
                        }
                        caps.env.push(grant);
                        env_spans.push(span);
                    }
                }
                _ => {
                    for item in self.array("capabilities.secrets", value)? {
                        let secret = self.secret(item)?;
                        if caps.secrets.iter().any(|s| s.name == secret.name) {
                            return self.at(
                                item.span(),
                                "capabilities.secrets",
                                format!("secret `{}` is declared twice", secret.name),
                            );
                        }
                        caps.secrets.push(secret);
                        secret_lines.push(item.span());
                    }
                }
            }
        }
        for (secret, span) in caps.secrets.iter().zip(&secret_lines) {
            if let Some(i) = caps.env.iter().position(|e| e.name() == secret.name) {
                return self.at(env_spans[i].clone(), "capabilities.env", format!("`{}` is also declared as a secret; a secret is never readable by the plugin, so remove it from `env`", secret.name));
            }
            if let Err(why) =
                grants::secrets::check_hosts_granted(std::slice::from_ref(secret), &caps.net)
            {
                return self.at(span.clone(), "capabilities.secrets", why);
            }
        }
        Ok(caps)
    }

    fn fs(&self, value: &Spanned<DeValue<'_>>) -> Result<Vec<FsRequest>, ManifestError> {
        let mut requests: Vec<FsRequest> = Vec::new();
        for item in self.array("capabilities.fs", value)? {
            let table = self.table("capabilities.fs", item)?;
            let mut path = None;
            let mut access = Access::Read;
            for (key, value) in self.entries(table, "an entry of capabilities.fs", FS_KEYS)? {
                if key.get_ref() == "path" {
                    path = Some((self.string("capabilities.fs.path", value)?, value.span()));
                } else {
                    access =
                        match self.string("capabilities.fs.access", value)?.as_str() {
                            "read" => Access::Read,
                            "read-write" => Access::ReadWrite,
                            other => return self.at(
                                value.span(),
                                "capabilities.fs.access",
                                format!(
                                    "\"{other}\" is not an access; use \"read\" or \"read-write\""
                                ),
                            ),
                        };
                }
            }
            let Some((path, span)) = path else {
                return self.at(
                    item.span(),
                    "capabilities.fs",
                    "missing `path`; write { path = \"$WORKSPACE\", access = \"read\" }",
                );
            };
            let request = FsRequest { path, access };
            if let Err(why) = request.validate() {
                return self.at(span, "capabilities.fs.path", why);
            }
            if requests.iter().any(|r| r.path == request.path) {
                return self.at(
                    span,
                    "capabilities.fs.path",
                    format!("\"{}\" is listed twice", request.path),
                );
            }
            requests.push(request);
        }
        Ok(requests)
    }

    fn secret(&self, item: &Spanned<DeValue<'_>>) -> Result<SecretGrant, ManifestError> {
        let field = "capabilities.secrets";
        let table = self.table(field, item)?;
        let mut name = None;
        let mut header = None;
        let mut format = "{}".to_string();
        let mut hosts = None;
        for (key, value) in self.entries(table, "an entry of capabilities.secrets", SECRET_KEYS)? {
            let check = |result: Result<(), String>, which: &str| match result {
                Ok(()) => Ok(()),
                Err(why) => self.at(value.span(), &format!("{field}.{which}"), why),
            };
            match key.get_ref().as_ref() {
                "name" => {
                    let text = self.string("capabilities.secrets.name", value)?;
                    check(grants::secrets::check_name(&text), "name")?;
                    name = Some(text);
                }
                "header" => {
                    let text = self.string("capabilities.secrets.header", value)?;
                    check(grants::secrets::check_header(&text), "header")?;
                    header = Some(text);
                }
                "format" => {
                    format = self.string("capabilities.secrets.format", value)?;
                    check(grants::secrets::check_format(&format), "format")?;
                }
                _ => {
                    let list = self.strings("capabilities.secrets.hosts", value)?;
                    if list.is_empty() {
                        return self.at(value.span(), "capabilities.secrets.hosts", "the list is empty; name the hosts the secret is sent to, such as [\"api.example.com\"]");
                    }
                    for (host, span) in &list {
                        if let Err(why) = grants::secrets::check_host(host) {
                            return self.at(span.clone(), "capabilities.secrets.hosts", why);
                        }
                    }
                    hosts = Some(list.into_iter().map(|(h, _)| h).collect());
                }
            }
        }
        let missing = |what: &str, example: &str| {
            self.at(
                item.span(),
                field,
                format!("a secret needs `{what}`, such as {example}"),
            )
        };
        let secret = SecretGrant {
            name: match name {
                Some(n) => n,
                None => return missing("name", "name = \"API_KEY\""),
            },
            header: match header {
                Some(h) => h,
                None => return missing("header", "header = \"Authorization\""),
            },
            format,
            hosts: match hosts {
                Some(h) => h,
                None => return missing("hosts", "hosts = [\"api.example.com\"]"),
            },
        };
        match secret.validate() {
            Ok(()) => Ok(secret),
            Err(why) => self.at(item.span(), field, why),
        }
    }

    fn limits(&self, value: &Spanned<DeValue<'_>>) -> Result<ManifestLimits, ManifestError> {
        let table = self.table("limits", value)?;
        let mut limits = ManifestLimits::default();
        for (key, value) in self.entries(table, "[limits]", LIMIT_KEYS)? {
            if key.get_ref() == "memory" {
                let parsed = match value.get_ref() {
                    DeValue::Integer(n) if n.radix() == 10 => {
                        parse_memory(&n.as_str().replace('_', ""))
                    }
                    DeValue::String(text) => parse_memory(text),
                    other => Err(format!(
                        "expected a size such as \"256MiB\", found {}",
                        other.type_str()
                    )),
                };
                match parsed {
                    Ok(bytes) => limits.memory = Some(bytes),
                    Err(why) => return self.at(value.span(), "limits.memory", why),
                }
            } else {
                let text = self.string("limits.timeout", value)?;
                match parse_timeout(&text) {
                    Ok(timeout) => limits.timeout = Some(timeout),
                    Err(why) => return self.at(value.span(), "limits.timeout", why),
                }
            }
        }
        Ok(limits)
    }
}

/// Checks a semantic version: MAJOR.MINOR.PATCH, numbers without leading
/// zeros, then an optional `-pre.release` and `+build` of dot-separated
/// identifiers.
pub fn check_semver(version: &str) -> Result<(), String> {
    let (rest, build) = match version.split_once('+') {
        Some((rest, build)) => (rest, Some(build)),
        None => (version, None),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (rest, None),
    };
    let number = |part: &str| {
        !part.is_empty()
            && part.chars().all(|c| c.is_ascii_digit())
            && (part == "0" || !part.starts_with('0'))
            && part.parse::<u64>().is_ok()
    };
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() != 3 {
        return Err("it needs three numbers separated by dots".to_string());
    }
    if !parts.iter().all(|p| number(p)) {
        return Err("MAJOR, MINOR and PATCH must be numbers without leading zeros".to_string());
    }
    let identifier =
        |id: &&str| !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if let Some(pre) = pre {
        let ids: Vec<&str> = pre.split('.').collect();
        let numeric_ok = |id: &&str| !id.chars().all(|c| c.is_ascii_digit()) || number(id);
        if !ids.iter().all(identifier) || !ids.iter().all(numeric_ok) {
            return Err("the pre-release after `-` must be dot-separated letters, digits and `-`, numbers without leading zeros".to_string());
        }
    }
    if let Some(build) = build
        && !build.split('.').collect::<Vec<_>>().iter().all(identifier)
    {
        return Err(
            "the build after `+` must be dot-separated letters, digits and `-`".to_string(),
        );
    }
    Ok(())
}

/// Why a component path is not acceptable, if it is not.
fn check_component_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("is empty; name a .wasm file".to_string());
    }
    if path.contains('\\') {
        return Err("uses `\\`; separate folders with `/`".to_string());
    }
    let bytes = path.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if path.starts_with('/') || drive {
        return Err("is absolute; write it relative to the folder holding plugin.toml".to_string());
    }
    if path.split('/').any(|part| part == "..") {
        return Err("contains `..`; components must be inside the plugin folder".to_string());
    }
    if !path.ends_with(".wasm") || path.ends_with("/.wasm") || path == ".wasm" {
        return Err("is not a .wasm file; a component's file name ends in .wasm".to_string());
    }
    Ok(())
}

/// Parses a memory size: bytes (`1048576`) or a number with `KiB`, `MiB`
/// or `GiB`; more than zero and at most 4 GiB.
pub fn parse_memory(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits_end);
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => {
            return Err(format!(
                "\"{text}\" has unit `{other}`; write bytes or a whole number with KiB, MiB or GiB, such as \"256MiB\""
            ));
        }
    };
    let Ok(number) = number.parse::<u64>() else {
        return Err(format!(
            "\"{text}\" is not a size; write a whole number with KiB, MiB or GiB, such as \"256MiB\""
        ));
    };
    let bytes = number.saturating_mul(scale);
    if bytes == 0 {
        Err("the memory limit must be more than zero".to_string())
    } else if bytes > MAX_MEMORY {
        Err(format!(
            "\"{text}\" is more than the most a plugin may have, 4GiB"
        ))
    } else {
        Ok(bytes)
    }
}

/// Parses a time limit: a whole number with `ms`, `s` or `m`; more than
/// zero and at most 10 minutes.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits_end);
    let Ok(number) = number.parse::<u64>() else {
        return Err(format!(
            "\"{text}\" is not a duration; write a whole number with ms, s or m, such as \"30s\""
        ));
    };
    let duration = match unit.trim() {
        "ms" => Duration::from_millis(number),
        "s" => Duration::from_secs(number),
        "m" => Duration::from_secs(number.saturating_mul(60)),
        other => {
            return Err(format!(
                "\"{text}\" has unit `{other}`; use ms, s or m, such as \"30s\""
            ));
        }
    };
    if duration.is_zero() {
        Err("the time limit must be more than zero".to_string())
    } else if duration > MAX_TIMEOUT {
        Err(format!(
            "\"{text}\" is more than the longest a call may take, 10m"
        ))
    } else {
        Ok(duration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WEATHER: &str = r#"name = "weather"
version = "0.2.0"
description = "Forecasts from open-meteo.com"
authors = ["Ada <ada@example.com>"]
components = ["weather.wasm", "lib/extra.wasm"]

[capabilities]
fs = [{ path = "$WORKSPACE", access = "read" }, { path = "$PLUGIN_DATA", access = "read-write" }]
net = ["https://api.open-meteo.com"]
env = ["TZ"]
secrets = [{ name = "OPEN_METEO_KEY", header = "X-Api-Key", hosts = ["api.open-meteo.com"] }]

[limits]
memory = "128MiB"
timeout = "20s"
"#;

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        Manifest::parse(text, Path::new("/p/plugin.toml"))
    }

    /// The error's line and message.
    fn fails(text: &str) -> (usize, String) {
        match parse(text) {
            Err(ManifestError::Invalid { line, message, .. }) => (line, message),
            other => panic!("expected an invalid manifest, got {other:?}"),
        }
    }

    /// WEATHER with `from` replaced by `to`; `from` must be there.
    fn edit(from: &str, to: &str) -> String {
        assert!(WEATHER.contains(from), "{from}");
        WEATHER.replacen(from, to, 1)
    }

    fn assert_fails(text: &str, line: usize, says: &[&str]) {
        let (got_line, message) = fails(text);
        assert_eq!(got_line, line, "{message}");
        assert!(message.contains(&format!("line {line}")), "{message}");
        for s in says {
            assert!(message.contains(s), "wanted {s:?} in: {message}");
        }
    }

    #[test]
    fn a_full_manifest_parses() {
        let m = parse(WEATHER).unwrap();
        assert_eq!(m.name, "weather");
        assert_eq!(m.version, "0.2.0");
        assert_eq!(m.description, "Forecasts from open-meteo.com");
        assert_eq!(m.authors, ["Ada <ada@example.com>"]);
        assert_eq!(m.components, ["weather.wasm", "lib/extra.wasm"]);
        assert_eq!(m.capabilities.fs.len(), 2);
        assert_eq!(m.capabilities.fs[1].access, Access::ReadWrite);
        assert_eq!(m.capabilities.env, [EnvGrant::new("TZ")]);
        assert_eq!(m.capabilities.secrets[0].format, "{}");
        assert_eq!(
            m.capabilities.describe()[0],
            "network  https://api.open-meteo.com"
        );
        assert_eq!(m.limits.memory, Some(128 << 20));
        assert_eq!(m.limits.timeout, Some(Duration::from_secs(20)));
    }

    #[test]
    fn a_minimal_manifest_asks_for_nothing() {
        let m = parse(
            "name = \"x\"\nversion = \"1.0.0\"\ndescription = \"d\"\ncomponents = [\"x.wasm\"]\n",
        )
        .unwrap();
        assert!(m.capabilities.is_empty());
        assert!(m.authors.is_empty());
        assert_eq!(m.limits, ManifestLimits::default());
    }

    #[test]
    fn tables_of_arrays_parse_too() {
        let text = "name = \"x\"\nversion = \"1.0.0\"\ndescription = \"d\"\ncomponents = [\"x.wasm\"]\n\n[[capabilities.fs]]\npath = \"/srv\"\n\n[[capabilities.secrets]]\nname = \"K\"\nheader = \"Authorization\"\nformat = \"Bearer {}\"\nhosts = [\"a.example.com\"]\n\n[capabilities]\nnet = [\"https://*.example.com\"]\n";
        let m = parse(text).unwrap();
        assert_eq!(m.capabilities.fs[0].access, Access::Read);
        assert_eq!(m.capabilities.secrets[0].format, "Bearer {}");
    }

    #[test]
    fn unknown_keys_are_errors_everywhere() {
        assert_fails(
            &edit("net = [", "netw = ["),
            9,
            &["unknown key `netw` in [capabilities] at line 9; known keys: fs, net, env, secrets"],
        );
        assert_fails(
            &edit("authors", "author"),
            4,
            &["unknown key `author`", "known keys: name, version"],
        );
        assert_fails(
            &edit("timeout", "timout"),
            15,
            &["unknown key `timout` in [limits]", "memory, timeout"],
        );
        assert_fails(
            &edit("access = \"read\" }", "acess = \"read\" }"),
            8,
            &["unknown key `acess`", "path, access"],
        );
        assert_fails(
            &edit("hosts = [\"api", "host = [\"api"),
            11,
            &["unknown key `host`", "name, header, format, hosts"],
        );
        assert_fails(&edit("[limits]", "[limitz]"), 13, &["unknown key `limitz`"]);
        assert_fails(
            &edit("env = [\"TZ\"]", "limits = { memory = \"1MiB\" }"),
            10,
            &["[limits] table of their own"],
        );
    }

    #[test]
    fn syntax_errors_show_the_line() {
        assert_fails(
            &edit("env = [\"TZ\"]", "env = [\"TZ\",,]"),
            10,
            &["TOML syntax error"],
        );
        assert_fails(
            &edit("version = \"0.2.0\"", "version = 0.2.0"),
            2,
            &["TOML syntax error"],
        );
    }

    #[test]
    fn wrong_types_name_the_field() {
        assert_fails(
            &edit("name = \"weather\"", "name = 5"),
            1,
            &["`name`", "expected a string, found integer"],
        );
        assert_fails(
            &edit(
                "components = [\"weather.wasm\", \"lib/extra.wasm\"]",
                "components = \"weather.wasm\"",
            ),
            5,
            &["`components`", "expected an array, found string"],
        );
        assert_fails(
            &edit("env = [\"TZ\"]", "env = [1]"),
            10,
            &["`capabilities.env`", "found integer"],
        );
        assert_fails(
            &edit("fs = [{", "fs = [\"$WORKSPACE\", {"),
            8,
            &["`capabilities.fs`", "expected a table"],
        );
        assert_fails(
            &edit("timeout = \"20s\"", "timeout = 20"),
            15,
            &["`limits.timeout`", "expected a string"],
        );
        assert_fails(
            &edit("memory = \"128MiB\"", "memory = true"),
            14,
            &["`limits.memory`", "found boolean"],
        );
    }

    #[test]
    fn required_fields_are_named() {
        for (line, field) in [
            ("name = \"weather\"\n", "name"),
            ("version = \"0.2.0\"\n", "version"),
            (
                "description = \"Forecasts from open-meteo.com\"\n",
                "description",
            ),
            (
                "components = [\"weather.wasm\", \"lib/extra.wasm\"]\n",
                "components",
            ),
        ] {
            let (_, message) = fails(&edit(line, ""));
            assert!(
                message.contains(&format!("missing required field `{field}`")),
                "{message}"
            );
        }
        assert_fails(
            &edit(", header = \"X-Api-Key\"", ""),
            11,
            &["a secret needs `header`"],
        );
        assert_fails(&edit("path = \"$WORKSPACE\", ", ""), 8, &["missing `path`"]);
    }

    #[test]
    fn names_are_checked() {
        for bad in ["Weather", "9lives", "-x", "we ather", "wéather", ""] {
            assert_fails(&edit("\"weather\"", &format!("{bad:?}")), 1, &["`name`"]);
        }
        assert_fails(
            &edit("\"weather\"", &format!("\"{}\"", "a".repeat(65))),
            1,
            &["most is 64"],
        );
        parse(&edit("\"weather\"", &format!("\"{}\"", "a".repeat(64)))).unwrap();
        parse(&edit("\"weather\"", "\"my_tool-2\"")).unwrap();
    }

    #[test]
    fn versions_are_semver() {
        for ok in [
            "0.0.0",
            "1.2.3",
            "10.20.30",
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-0.3.7",
            "1.0.0+build.5",
            "1.0.0-rc.1+sha.abc",
        ] {
            assert!(check_semver(ok).is_ok(), "{ok}");
        }
        for bad in [
            "1",
            "1.2",
            "1.2.3.4",
            "01.2.3",
            "1.02.3",
            "v1.2.3",
            "1.2.x",
            "1.2.3-",
            "1.2.3-01",
            "1.2.3+",
            "1.2.3-a..b",
            "1.2.3-a_b",
            "",
        ] {
            assert!(check_semver(bad).is_err(), "{bad}");
        }
        assert_fails(
            &edit("\"0.2.0\"", "\"0.2\""),
            2,
            &["`version`", "semantic version"],
        );
    }

    #[test]
    fn descriptions_are_one_short_line() {
        assert_fails(
            &edit("\"Forecasts from open-meteo.com\"", "\"\""),
            3,
            &["empty"],
        );
        assert_fails(
            &edit("\"Forecasts from open-meteo.com\"", "\"a\\nb\""),
            3,
            &["one line"],
        );
        assert_fails(
            &edit(
                "\"Forecasts from open-meteo.com\"",
                &format!("\"{}\"", "é".repeat(201)),
            ),
            3,
            &["201 characters", "200"],
        );
        parse(&edit(
            "\"Forecasts from open-meteo.com\"",
            &format!("\"{}\"", "é".repeat(200)),
        ))
        .unwrap();
    }

    #[test]
    fn components_are_relative_wasm_files_listed_once() {
        let set = |list: &str| edit("[\"weather.wasm\", \"lib/extra.wasm\"]", list);
        // A plugin of SKILL.md skills only has no components.
        let text = set("[]");
        let skills_only = Manifest::parse(&text, Path::new("plugin.toml")).unwrap();
        assert!(skills_only.components.is_empty());
        assert_fails(&set("[\"/abs/x.wasm\"]"), 5, &["absolute"]);
        assert_fails(&set("[\"C:/x.wasm\"]"), 5, &["absolute"]);
        assert_fails(&set("[\"../x.wasm\"]"), 5, &["`..`"]);
        assert_fails(&set("[\"a/../../x.wasm\"]"), 5, &["`..`"]);
        assert_fails(&set("[\"x.wat\"]"), 5, &[".wasm"]);
        assert_fails(&set("[\"a\\\\x.wasm\"]"), 5, &["`/`"]);
        assert_fails(&set("[\"\"]"), 5, &["empty"]);
        assert_fails(&set("[\"x.wasm\", \"./x.wasm\"]"), 5, &["listed twice"]);
        assert_fails(&set("[\"x.wasm\",\n  \"x.wasm\"]"), 6, &["listed twice"]);
    }

    #[test]
    fn limits_are_parsed_and_capped() {
        assert_eq!(parse_memory("256MiB"), Ok(256 << 20));
        assert_eq!(parse_memory("1GiB"), Ok(1 << 30));
        assert_eq!(parse_memory("512KiB"), Ok(512 << 10));
        assert_eq!(parse_memory("4096"), Ok(4096));
        assert_eq!(parse_memory("4GiB"), Ok(4 << 30));
        for bad in [
            "5GiB",
            "0",
            "0MiB",
            "12MB",
            "1.5GiB",
            "MiB",
            "",
            "-1",
            "99999999999999999999GiB",
        ] {
            assert!(parse_memory(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_timeout("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_timeout("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_timeout("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_timeout("10m"), Ok(MAX_TIMEOUT));
        for bad in ["11m", "601s", "0s", "1h", "30", "s", "1.5s", ""] {
            assert!(parse_timeout(bad).is_err(), "{bad}");
        }
        let m = parse(&edit("memory = \"128MiB\"", "memory = 1_048_576")).unwrap();
        assert_eq!(m.limits.memory, Some(1 << 20));
        assert_fails(
            &edit("\"128MiB\"", "\"8GiB\""),
            14,
            &["`limits.memory`", "4GiB"],
        );
        assert_fails(
            &edit("memory = \"128MiB\"", "memory = 0"),
            14,
            &["more than zero"],
        );
        assert_fails(
            &edit("\"20s\"", "\"1h\""),
            15,
            &["`limits.timeout`", "ms, s or m"],
        );
    }

    #[test]
    fn capability_entries_are_checked_by_their_grants() {
        assert_fails(
            &edit("\"$WORKSPACE\"", "\"~/notes\""),
            8,
            &["`capabilities.fs.path`", "home folder"],
        );
        assert_fails(
            &edit("\"$WORKSPACE\"", "\"$PLUGIN_DATA\""),
            8,
            &["listed twice"],
        );
        assert_fails(
            &edit("access = \"read\"", "access = \"write\""),
            8,
            &["\"read\" or \"read-write\""],
        );
        assert_fails(
            &edit("\"https://api.open-meteo.com\"", "\"api.open-meteo.com\""),
            9,
            &["`capabilities.net`", "not a valid origin"],
        );
        assert_fails(
            &edit(
                "\"https://api.open-meteo.com\"",
                "\"https://api.open-meteo.com\", \"HTTPS://api.open-meteo.com\"",
            ),
            9,
            &["listed twice"],
        );
        assert_fails(
            &edit("[\"TZ\"]", "[\"ANTHROPIC_API_KEY\"]"),
            10,
            &["`capabilities.env`", "API key"],
        );
        assert_fails(&edit("[\"TZ\"]", "[\"TZ\", \"TZ\"]"), 10, &["listed twice"]);
        assert_fails(
            &edit("[\"TZ\"]", "[\"A-B\"]"),
            10,
            &["not a valid environment variable name"],
        );
    }

    #[test]
    fn secrets_are_checked_field_by_field() {
        assert_fails(
            &edit("\"X-Api-Key\"", "\"Host\""),
            11,
            &["`capabilities.secrets.header`", "HTTP client sets it"],
        );
        assert_fails(
            &edit("\"OPEN_METEO_KEY\"", "\"OPEN-METEO\""),
            11,
            &["`capabilities.secrets.name`"],
        );
        assert_fails(
            &edit(
                "hosts = [\"api.open-meteo.com\"]",
                "format = \"Bearer\", hosts = [\"api.open-meteo.com\"]",
            ),
            11,
            &["`capabilities.secrets.format`", "exactly once"],
        );
        assert_fails(
            &edit("hosts = [\"api.open-meteo.com\"]", "hosts = []"),
            11,
            &["`capabilities.secrets.hosts`", "empty"],
        );
        assert_fails(
            &edit(
                "hosts = [\"api.open-meteo.com\"]",
                "hosts = [\"https://x\"]",
            ),
            11,
            &["not a host pattern"],
        );
        assert_fails(
            &edit(
                "hosts = [\"api.open-meteo.com\"]",
                "hosts = [\"evil.example.com\"]",
            ),
            11,
            &[
                "secret `OPEN_METEO_KEY` is sent to `evil.example.com`",
                "no https network grant covers",
            ],
        );
        assert_fails(
            &edit("[\"TZ\"]", "[\"OPEN_METEO_KEY\"]"),
            10,
            &["also declared as a secret"],
        );
        let twice = edit(
            "hosts = [\"api.open-meteo.com\"] }]",
            "hosts = [\"api.open-meteo.com\"] },\n  { name = \"OPEN_METEO_KEY\", header = \"X-Other\", hosts = [\"api.open-meteo.com\"] }]",
        );
        assert_fails(&twice, 12, &["declared twice"]);
    }

    #[test]
    fn load_reads_the_folder_and_explains_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = Manifest::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("no such file"), "{err}");
        assert!(!err.contains("os error"), "{err}");
        std::fs::write(dir.path().join(MANIFEST_FILE), WEATHER).unwrap();
        assert_eq!(Manifest::load(dir.path()).unwrap().name, "weather");
        let err = parse(&edit("net = [", "netw = [")).unwrap_err().to_string();
        assert!(
            err.starts_with("invalid /p/plugin.toml: unknown key `netw`"),
            "{err}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_manifest_leading_out_of_its_package_or_a_fifo_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let package = dir.path().join("pkg");
        std::fs::create_dir(&package).unwrap();
        std::fs::write(dir.path().join("elsewhere.toml"), WEATHER).unwrap();
        std::os::unix::fs::symlink("../elsewhere.toml", package.join(MANIFEST_FILE)).unwrap();
        let err = Manifest::load(&package).unwrap_err();
        assert!(matches!(err, ManifestError::Refused { .. }), "{err}");
        assert!(err.to_string().contains("leads outside"), "{err}");
        std::fs::remove_file(package.join(MANIFEST_FILE)).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(package.join(MANIFEST_FILE))
            .status()
            .unwrap();
        assert!(made.success());
        let err = Manifest::load(&package).unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
    }
}
