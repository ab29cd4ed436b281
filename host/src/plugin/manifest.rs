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
//! memory = "128MiB"                      # a size (crate::quantity): bytes, or KiB / MiB / GiB; at most 4GiB
//! timeout = "20s"                        # a duration (crate::quantity): ms, s or m; at most 10m
//!
//! [build]                                # optional; how `capstan plugin build` builds it (crate::scaffold)
//! lang = "python"
//!
//! [package]                              # optional; which files install copies (crate::plugin::package)
//! include = ["data/**", "LICENSE"]       # files to install besides the manifest, components and skills
//! exclude = ["skills/*/drafts/**"]       # files never to install (the manifest and components always are)
//! ```
//!
//! The file is read into serde types that keep each value's span
//! (`ManifestFile`; the `[capabilities]` entries are the same types the
//! lockfile records, [`crate::grants::Capabilities`]), then validated, each
//! capability entry by its kind. Unknown keys are errors anywhere, naming
//! the key, its line and the keys known there, so a misspelt capability is
//! never silently dropped. Every host a secret is sent to must be covered by a
//! `net` origin, and a secret's name cannot also be an `env` grant (the
//! plugin would read the value).

use std::collections::HashSet;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;

use crate::grants::{Capabilities, CapabilityKind, SpannedCapabilities};
use crate::quantity::{Size, TimeSpan, format_duration, format_size};
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
pub const MAX_MEMORY: u64 = crate::sandbox::limits::Limits::MAX_MEMORY;
/// The longest time limit a manifest may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// The longest description.
pub const MAX_DESCRIPTION: usize = 200;
/// The longest plugin name.
pub const MAX_NAME: usize = 64;

/// `plugin.toml` as written: its schema, each value with the bytes it
/// spans so that a value that is wrong is reported at its line. Unknown
/// keys are refused at every level.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, expecting = "a TOML document")]
struct ManifestFile {
    name: Option<Spanned<String>>,
    version: Option<Spanned<String>>,
    description: Option<Spanned<String>>,
    #[serde(default)]
    authors: Vec<Spanned<String>>,
    components: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    capabilities: SpannedCapabilities,
    #[serde(default)]
    limits: LimitsTable,
    /// How to build the plugin from source: any table here is read by
    /// `capstan plugin build` (crate::scaffold), not by install.
    #[serde(default)]
    #[expect(dead_code, reason = "only its presence is accepted here")]
    build: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    package: PackageTable,
}

/// The `[limits]` table as written.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table such as { memory = \"128MiB\" }"
)]
struct LimitsTable {
    memory: Option<Spanned<Size>>,
    timeout: Option<Spanned<TimeSpan>>,
}

/// The `[package]` table as written.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table such as { include = [\"data/**\"] }"
)]
struct PackageTable {
    #[serde(default)]
    include: Vec<Spanned<String>>,
    #[serde(default)]
    exclude: Vec<Spanned<String>>,
}

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
        let deserializer = toml::de::Deserializer::parse(text).map_err(|e| {
            let line = doc.line(e.span().map_or(0, |s| s.start));
            doc.error(
                line,
                format!("TOML syntax error at line {line}: {}", e.message().trim()),
            )
        })?;
        let file: ManifestFile =
            serde_path_to_error::deserialize(deserializer).map_err(|e| doc.schema_error(&e))?;
        doc.manifest(file)
    }
}

/// The text being parsed, for turning positions into lines.
struct Doc<'a> {
    text: &'a str,
    path: &'a Path,
}

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

    /// A value that does not fit the schema, in the manifest's words: an
    /// unknown key with the keys known there, a value of the wrong type, a
    /// missing field with an example, or what the value's own parser said.
    fn schema_error(&self, error: &serde_path_to_error::Error<toml::de::Error>) -> ManifestError {
        let inner = error.inner();
        let line = self.line(inner.span().map_or(0, |s| s.start));
        let message = inner.message().trim();
        // The keys leading to the value, `None` for an entry of a list
        // (the spans' own bookkeeping left out).
        let mut steps: Vec<Option<String>> = Vec::new();
        for segment in error.path().iter() {
            match segment {
                serde_path_to_error::Segment::Map { key } if !key.starts_with("$__") => {
                    steps.push(Some(key.clone()));
                }
                serde_path_to_error::Segment::Seq { .. } => steps.push(None),
                _ => {}
            }
        }
        if let Some(rest) = message.strip_prefix("unknown field `") {
            let (key, known) = rest.split_once('`').unwrap_or((rest, ""));
            if steps.last() == Some(&Some(key.to_string())) {
                steps.pop();
            }
            let in_list = steps.last() == Some(&None);
            let keys: Vec<String> = steps.into_iter().flatten().collect();
            let known: Vec<&str> = known.split('`').skip(1).step_by(2).collect();
            let section = if keys.is_empty() {
                "the top level".to_string()
            } else if in_list {
                format!("an entry of {}", keys.join("."))
            } else {
                format!("[{}]", keys.join("."))
            };
            let hint = if keys == ["capabilities"] && key == "limits" {
                " (limits go in a [limits] table of their own)"
            } else {
                ""
            };
            return self.error(
                line,
                format!(
                    "unknown key `{key}` in {section} at line {line}; known keys: {}{hint}",
                    known.join(", ")
                ),
            );
        }
        let keys: Vec<String> = steps.into_iter().flatten().collect();
        let field = keys.join(".");
        let problem = if let Some(rest) = message.strip_prefix("invalid type: ") {
            let (found, expected) = rest
                .split_once(", expected ")
                .unwrap_or((rest, "another type"));
            format!(
                "expected {}, found {}",
                toml_words(expected),
                value_kind(found)
            )
        } else if let Some(rest) = message.strip_prefix("missing field `") {
            let missing = rest.trim_end_matches('`');
            let example = CapabilityKind::ALL
                .iter()
                .find(|kind| {
                    keys.len() == 2 && keys[0] == "capabilities" && keys[1] == kind.field()
                })
                .map(|kind| format!("; write an entry such as {}", kind.example()))
                .unwrap_or_default();
            format!("missing `{missing}`{example}")
        } else {
            message.to_string()
        };
        self.error(line, format!("`{field}` at line {line}: {problem}"))
    }

    fn manifest(&self, file: ManifestFile) -> Result<Manifest, ManifestError> {
        let missing = |field: &str, example: &str| {
            self.error(
                1,
                format!("missing required field `{field}`; add a line such as {example}"),
            )
        };
        let name = file
            .name
            .ok_or_else(|| missing("name", "name = \"my-plugin\""))?;
        let version = file
            .version
            .ok_or_else(|| missing("version", "version = \"0.1.0\""))?;
        let description = file
            .description
            .ok_or_else(|| missing("description", "description = \"What it does, in one line\""))?;
        let components = file
            .components
            .ok_or_else(|| missing("components", "components = [\"plugin.wasm\"]"))?;
        Ok(Manifest {
            name: self.name(name)?,
            version: self.version(version)?,
            description: self.description(description)?,
            authors: self.authors(file.authors)?,
            components: self.components(components)?,
            capabilities: self.capabilities(&file.capabilities)?,
            limits: self.limits(file.limits)?,
            package: self.package(file.package)?,
        })
    }

    fn name(&self, value: Spanned<String>) -> Result<String, ManifestError> {
        let span = value.span();
        let name = value.into_inner();
        let starts = name.chars().next().is_some_and(|c| c.is_ascii_lowercase());
        let chars = name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !starts || !chars {
            return self.at(span, "name", format!("\"{name}\" is not a valid plugin name: use lowercase letters, digits, `-` and `_`, starting with a letter"));
        }
        if name.len() > MAX_NAME {
            return self.at(
                span,
                "name",
                format!(
                    "the name is {} characters long; the most is {MAX_NAME}",
                    name.len()
                ),
            );
        }
        Ok(name)
    }

    fn version(&self, value: Spanned<String>) -> Result<String, ManifestError> {
        let span = value.span();
        let version = value.into_inner();
        match check_semver(&version) {
            Ok(()) => Ok(version),
            Err(why) => self.at(span, "version", format!("\"{version}\" is not a semantic version ({why}); write MAJOR.MINOR.PATCH such as \"1.2.0\" or \"1.2.0-beta.1\"")),
        }
    }

    fn description(&self, value: Spanned<String>) -> Result<String, ManifestError> {
        let span = value.span();
        let description = value.into_inner();
        let chars = description.chars().count();
        if description.trim().is_empty() {
            self.at(
                span,
                "description",
                "it is empty; say in one line what the plugin does",
            )
        } else if description.contains(['\n', '\r']) {
            self.at(span, "description", "it must be one line")
        } else if chars > MAX_DESCRIPTION {
            self.at(
                span,
                "description",
                format!("it is {chars} characters long; the most is {MAX_DESCRIPTION}"),
            )
        } else {
            Ok(description)
        }
    }

    fn authors(&self, values: Vec<Spanned<String>>) -> Result<Vec<String>, ManifestError> {
        let mut authors = Vec::new();
        for value in values {
            let span = value.span();
            let author = value.into_inner();
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

    fn components(&self, values: Vec<Spanned<String>>) -> Result<Vec<String>, ManifestError> {
        // An empty list is a plugin of `SKILL.md` skills only; install
        // checks that the package has some.
        let mut seen = HashSet::new();
        let mut components = Vec::new();
        for value in values {
            let span = value.span();
            let component = value.into_inner();
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

    /// The request, each entry checked by its kind ([`Capabilities::validate`]).
    fn capabilities(&self, spanned: &SpannedCapabilities) -> Result<Capabilities, ManifestError> {
        let capabilities = spanned.unspanned();
        match capabilities.validate() {
            Ok(()) => Ok(capabilities),
            Err(bad) => {
                let mut field = format!("capabilities.{}", bad.kind.field());
                if let Some(part) = bad.error.field {
                    field = format!("{field}.{part}");
                }
                let span = spanned.span(bad.kind, bad.index).unwrap_or(0..0);
                self.at(span, &field, bad.error.message)
            }
        }
    }

    fn limits(&self, table: LimitsTable) -> Result<ManifestLimits, ManifestError> {
        let mut limits = ManifestLimits::default();
        if let Some(memory) = table.memory {
            let bytes = memory.get_ref().0;
            if let Err(why) = check_memory(bytes) {
                return self.at(memory.span(), "limits.memory", why);
            }
            limits.memory = Some(bytes);
        }
        if let Some(timeout) = table.timeout {
            let duration = timeout.get_ref().0;
            if let Err(why) = check_timeout(duration) {
                return self.at(timeout.span(), "limits.timeout", why);
            }
            limits.timeout = Some(duration);
        }
        Ok(limits)
    }

    fn package(&self, table: PackageTable) -> Result<PackageFilter, ManifestError> {
        let check = |field: &str, values: Vec<Spanned<String>>| {
            let mut patterns = Vec::new();
            for value in values {
                let span = value.span();
                let pattern = value.into_inner();
                if let Err(why) = super::package::check_pattern(&pattern) {
                    return self.at(span, field, format!("\"{pattern}\" {why}"));
                }
                patterns.push(pattern);
            }
            Ok(patterns)
        };
        Ok(PackageFilter {
            include: check("package.include", table.include)?,
            exclude: check("package.exclude", table.exclude)?,
        })
    }
}

/// What serde calls a type, as TOML calls it: `a sequence` is an array.
fn toml_words(expected: &str) -> String {
    expected
        .replace("a sequence", "an array")
        .replace("a map", "a table")
}

/// The kind of a value serde found (`integer `5``), in TOML's words.
fn value_kind(found: &str) -> &str {
    let word = found.split_whitespace().next().unwrap_or(found);
    match word {
        "sequence" => "array",
        "map" => "table",
        "floating" => "float",
        "boolean" | "integer" | "string" => word,
        _ => found,
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

/// Checks a memory limit: more than zero and at most [`MAX_MEMORY`].
fn check_memory(bytes: u64) -> Result<(), String> {
    if bytes == 0 {
        Err("the memory limit must be more than zero".to_string())
    } else if bytes > MAX_MEMORY {
        Err(format!(
            "\"{}\" is more than the most a plugin may have, {}",
            format_size(bytes),
            format_size(MAX_MEMORY)
        ))
    } else {
        Ok(())
    }
}

/// Checks a time limit: more than zero and at most [`MAX_TIMEOUT`].
fn check_timeout(timeout: Duration) -> Result<(), String> {
    if timeout.is_zero() {
        Err("the time limit must be more than zero".to_string())
    } else if timeout > MAX_TIMEOUT {
        Err(format!(
            "\"{}\" is more than the longest a call may take, {}",
            format_duration(timeout),
            format_duration(MAX_TIMEOUT)
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grants::{Access, EnvGrant};

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
            &[
                "unknown key `acess` in an entry of capabilities.fs at line 8",
                "known keys: path, access",
            ],
        );
        assert_fails(
            &edit("hosts = [\"api", "host = [\"api"),
            11,
            &[
                "unknown key `host` in an entry of capabilities.secrets",
                "known keys: name, header, format, hosts",
            ],
        );
        assert_fails(
            &edit("[limits]", "[package]\nincludes = []\n\n[limits]"),
            14,
            &["unknown key `includes` in [package]", "include, exclude"],
        );
        assert_fails(&edit("[limits]", "[limitz]"), 13, &["unknown key `limitz`"]);
        assert_fails(
            &edit("env = [\"TZ\"]", "limits = { memory = \"1MiB\" }"),
            10,
            &["[limits] table of their own"],
        );
    }

    /// A capability kind capstan does not know (yet) is never read as
    /// another kind: it is refused, named, at its line, wherever it is
    /// written.
    #[test]
    fn an_unknown_capability_kind_is_an_error_naming_it_and_its_line() {
        assert_fails(
            &edit(
                "env = [\"TZ\"]",
                "env = [\"TZ\"]\nsockets = [{ kind = \"tcp\", port = 22 }]",
            ),
            11,
            &[
                "unknown key `sockets` in [capabilities] at line 11; known keys: fs, net, env, secrets, exec",
            ],
        );
        let tables = "name = \"x\"\nversion = \"1.0.0\"\ndescription = \"d\"\ncomponents = [\"x.wasm\"]\n\n[capabilities]\nnet = [\"https://a.example.com\"]\n\n[[capabilities.secrets]]\nname = \"K\"\nheader = \"Authorization\"\nhosts = [\"a.example.com\"]\nsecret_store = \"vault\"\n";
        assert_fails(
            tables,
            13,
            &["unknown key `secret_store` in an entry of capabilities.secrets at line 13"],
        );
        assert_fails(
            &tables.replace("[[capabilities.secrets]]", "[[capabilities.secret]]"),
            9,
            &["unknown key `secret` in [capabilities] at line 9"],
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
            &["`capabilities.env`", "expected a string, found integer"],
        );
        assert_fails(
            &edit("fs = [{", "fs = [\"$WORKSPACE\", {"),
            8,
            &["`capabilities.fs`", "expected a table"],
        );
        assert_fails(
            &edit("timeout = \"20s\"", "timeout = 20"),
            15,
            &[
                "`limits.timeout`",
                "expected a duration such as \"30s\", found integer",
            ],
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
            &[
                "`capabilities.secrets`",
                "missing `header`",
                "such as { name = ",
            ],
        );
        assert_fails(
            &edit("path = \"$WORKSPACE\", ", ""),
            8,
            &["`capabilities.fs`", "missing `path`", "such as { path = "],
        );
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
        let limits = |memory: &str, timeout: &str| {
            let text = edit("memory = \"128MiB\"", &format!("memory = {memory}"))
                .replace("timeout = \"20s\"", &format!("timeout = {timeout}"));
            parse(&text).map(|m| m.limits)
        };
        for (memory, bytes) in [
            ("\"256MiB\"", 256 << 20),
            ("\"1GiB\"", 1 << 30),
            ("\"512KiB\"", 512 << 10),
            ("\"4096\"", 4096),
            ("4096", 4096),
            ("1_048_576", 1 << 20),
            ("\"4GiB\"", 4 << 30),
        ] {
            let got = limits(memory, "\"30s\"").unwrap();
            assert_eq!(got.memory, Some(bytes), "{memory}");
        }
        for (timeout, duration) in [
            ("\"30s\"", Duration::from_secs(30)),
            ("\"500ms\"", Duration::from_millis(500)),
            ("\"2m\"", Duration::from_secs(120)),
            ("\"10m\"", MAX_TIMEOUT),
        ] {
            let got = limits("\"1MiB\"", timeout).unwrap();
            assert_eq!(got.timeout, Some(duration), "{timeout}");
        }
        for (memory, says) in [
            ("\"5GiB\"", "4GiB"),
            ("\"0\"", "more than zero"),
            ("\"0MiB\"", "more than zero"),
            ("\"12MB\"", "write \"12MiB\""),
            ("\"1.5GiB\"", "KiB, MiB or GiB"),
            ("\"MiB\"", "not a size"),
            ("\"\"", "not a size"),
            ("-1", "not negative"),
            ("\"99999999999999999999GiB\"", "too large"),
        ] {
            let err = limits(memory, "\"30s\"").unwrap_err().to_string();
            assert!(
                err.contains("`limits.memory` at line 14"),
                "{memory}: {err}"
            );
            assert!(err.contains(says), "{memory}: {err}");
        }
        for (timeout, says) in [
            ("\"11m\"", "the longest a call may take, 10m"),
            ("\"601s\"", "10m"),
            ("\"0s\"", "more than zero"),
            ("\"1h\"", "ms, s or m"),
            ("\"30\"", "write \"30s\""),
            ("\"s\"", "not a duration"),
            ("\"1.5s\"", "ms, s or m"),
            ("\"\"", "not a duration"),
        ] {
            let err = limits("\"1MiB\"", timeout).unwrap_err().to_string();
            assert!(
                err.contains("`limits.timeout` at line 15"),
                "{timeout}: {err}"
            );
            assert!(err.contains(says), "{timeout}: {err}");
        }
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
            &[
                "`capabilities.net`",
                "bad network grant",
                "it has no scheme",
            ],
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
        assert_fails(&twice, 12, &["`OPEN_METEO_KEY` is listed twice"]);
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
