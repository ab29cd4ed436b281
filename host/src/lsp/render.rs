//! Language servers' answers as compact text for the model: locations as
//! `path:line:character` (1-based, relative to the workspace) with the
//! line's text, symbols as indented outlines, hover as its text; every
//! list capped.
//!
//! The line shown beside a location is read only from files inside the
//! workspace: a server naming `~/.ssh/id_rsa` gets its path printed,
//! never its content. A file the session's rules deny reading
//! ([`Files::denying`]) is not shown at all: its results are left out and
//! counted ([`Files::left_out_note`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::connection::path_of;
use super::servers::one_based;

/// The most entries a list shows.
pub const MAX_ENTRIES: usize = 200;

/// The longest hover text shown.
const MAX_HOVER: usize = 8 * 1024;

/// The longest line of code shown beside a location.
const MAX_SNIPPET: usize = 160;

/// Whether the model may not read a file (a deny rule covers it).
pub type DeniedFile<'a> = &'a dyn Fn(&Path) -> bool;

/// Files read while rendering one answer.
pub struct Files<'a> {
    workspace: &'a Path,
    texts: HashMap<PathBuf, Option<String>>,
    denied: Option<DeniedFile<'a>>,
    /// Results left out because their file may not be read.
    left_out: usize,
}

impl<'a> Files<'a> {
    /// Files of `workspace`; `known` is a text the caller already has.
    pub fn new(workspace: &'a Path, known: Option<(&Path, &str)>) -> Self {
        let mut texts = HashMap::new();
        if let Some((path, text)) = known {
            texts.insert(path.to_path_buf(), Some(text.to_string()));
        }
        Self {
            workspace,
            texts,
            denied: None,
            left_out: 0,
        }
    }

    /// The same, leaving out every result in a file `denied` says the
    /// model may not read (checked as the server names it and as it
    /// resolves, symbolic links followed).
    pub fn denying(mut self, denied: DeniedFile<'a>) -> Self {
        self.denied = Some(denied);
        self
    }

    /// Whether the file of `uri` may not be read.
    fn is_denied(&self, uri: &str) -> bool {
        let (Some(denied), Some(path)) = (self.denied, path_of(uri)) else {
            return false;
        };
        denied(&path) || path.canonicalize().is_ok_and(|real| denied(&real))
    }

    /// Whether a result in `uri` is left out, its file being one the model
    /// may not read; it is then counted.
    pub fn leave_out(&mut self, uri: &str) -> bool {
        let denied = self.is_denied(uri);
        if denied {
            self.left_out += 1;
        }
        denied
    }

    /// How many results were left out, as a line for the model; `None`
    /// when none was.
    pub fn left_out_note(&self) -> Option<String> {
        match self.left_out {
            0 => None,
            1 => Some("1 result in a file you may not read was left out.".to_string()),
            n => Some(format!(
                "{n} results in files you may not read were left out."
            )),
        }
    }

    /// The text of `path` if it is a file inside the workspace that the
    /// model may read.
    fn text(&mut self, path: &Path) -> Option<&str> {
        let workspace = self.workspace;
        let denied = self.denied;
        self.texts
            .entry(path.to_path_buf())
            .or_insert_with(|| {
                let real = path.canonicalize().ok()?;
                if !real.starts_with(workspace) || denied.is_some_and(|d| d(path) || d(&real)) {
                    return None;
                }
                let meta = std::fs::metadata(&real).ok()?;
                if !meta.is_file() || meta.len() > super::servers::MAX_DOCUMENT {
                    return None;
                }
                std::fs::read(&real)
                    .ok()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
            })
            .as_deref()
    }

    /// `uri` as shown: relative to the workspace when inside it.
    pub fn show_uri(&self, uri: &str) -> String {
        match path_of(uri) {
            Some(path) => match path.strip_prefix(self.workspace) {
                Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
                _ => path.display().to_string(),
            },
            None => uri.to_string(),
        }
    }

    /// `uri` and `range`'s start as `path:line:character`, and the line's
    /// text when the file is in the workspace.
    pub fn location(&mut self, uri: &str, range: &Value) -> String {
        let start = range.get("start").cloned().unwrap_or(Value::Null);
        let shown = self.show_uri(uri);
        let path = path_of(uri);
        let text = path.as_deref().and_then(|p| self.text(p));
        let (line, character) = one_based(&start, text);
        let snippet = text
            .and_then(|t| t.lines().nth(line.saturating_sub(1) as usize))
            .map(|l| clip(l.trim(), MAX_SNIPPET));
        let mut out = format!("{}:{line}:{character}", crate::escape::line(&shown));
        if let Some(snippet) = snippet.filter(|s| !s.is_empty()) {
            out.push_str(": ");
            out.push_str(&crate::escape::line(&snippet));
        }
        out
    }
}

fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// `items` as lines, at most [`MAX_ENTRIES`], with a count of the rest.
fn capped(mut lines: Vec<String>) -> String {
    let total = lines.len();
    if total > MAX_ENTRIES {
        lines.truncate(MAX_ENTRIES);
        lines.push(format!("… and {} more", total - MAX_ENTRIES));
    }
    lines.join("\n")
}

/// The locations of a definition, implementation or references answer
/// (`Location`, `Location[]`, `LocationLink[]` or null).
pub fn locations(answer: &Value, files: &mut Files<'_>, what: &str) -> String {
    let items: Vec<&Value> = match answer {
        Value::Array(items) => items.iter().collect(),
        Value::Object(_) => vec![answer],
        _ => Vec::new(),
    };
    if items.is_empty() {
        return format!("No {what} found.");
    }
    let mut lines = Vec::new();
    let mut seen_files = std::collections::BTreeSet::new();
    for item in items {
        let (uri, range) = match (item.get("uri"), item.get("targetUri")) {
            (Some(uri), _) => (uri, item.get("range")),
            (None, Some(uri)) => (
                uri,
                item.get("targetSelectionRange")
                    .or_else(|| item.get("targetRange")),
            ),
            _ => continue,
        };
        let Some(uri) = uri.as_str() else { continue };
        if files.leave_out(uri) {
            continue;
        }
        seen_files.insert(uri.to_string());
        lines.push(files.location(uri, range.unwrap_or(&Value::Null)));
    }
    let count = lines.len();
    if count == 0 {
        return format!("No {what} found in files you may read.");
    }
    let head = format!(
        "{count} {what}{} in {} file{}:",
        if count == 1 { "" } else { "s" },
        seen_files.len(),
        if seen_files.len() == 1 { "" } else { "s" }
    );
    format!("{head}\n{}", capped(lines))
}

/// A hover answer's text.
pub fn hover(answer: &Value) -> String {
    fn piece(value: &Value) -> String {
        match value {
            Value::String(s) => s.clone(),
            Value::Object(o) => {
                let text = o.get("value").and_then(Value::as_str).unwrap_or_default();
                match o.get("language").and_then(Value::as_str) {
                    Some(language) => format!("```{language}\n{text}\n```"),
                    None => text.to_string(),
                }
            }
            Value::Array(items) => items.iter().map(piece).collect::<Vec<_>>().join("\n\n"),
            _ => String::new(),
        }
    }
    let text = answer.get("contents").map(piece).unwrap_or_default();
    let text = text.trim();
    if text.is_empty() {
        return "No hover information at this position.".to_string();
    }
    crate::escape::text(&clip(text, MAX_HOVER)).into_owned()
}

/// The name of LSP symbol kind `kind`.
fn kind_name(kind: Option<u64>) -> &'static str {
    const NAMES: [&str; 26] = [
        "symbol",
        "file",
        "module",
        "namespace",
        "package",
        "class",
        "method",
        "property",
        "field",
        "constructor",
        "enum",
        "interface",
        "function",
        "variable",
        "constant",
        "string",
        "number",
        "boolean",
        "array",
        "object",
        "key",
        "null",
        "enum member",
        "struct",
        "event",
        "operator",
    ];
    let index = kind.unwrap_or(0) as usize;
    NAMES.get(index).copied().unwrap_or(if index == 26 {
        "type parameter"
    } else {
        "symbol"
    })
}

/// A document symbols answer (`DocumentSymbol[]`, hierarchical, or
/// `SymbolInformation[]`) as an outline.
pub fn document_symbols(answer: &Value, files: &mut Files<'_>, uri: &str) -> String {
    let Some(items) = answer.as_array().filter(|a| !a.is_empty()) else {
        return "No symbols found in this file.".to_string();
    };
    let mut lines = Vec::new();
    fn walk(
        items: &[Value],
        depth: usize,
        lines: &mut Vec<String>,
        files: &mut Files<'_>,
        uri: &str,
    ) {
        for item in items {
            let name = item.get("name").and_then(Value::as_str).unwrap_or("?");
            let kind = kind_name(item.get("kind").and_then(Value::as_u64));
            let range = item
                .get("selectionRange")
                .or_else(|| item.get("range"))
                .or_else(|| item.pointer("/location/range"))
                .cloned()
                .unwrap_or(Value::Null);
            let item_uri = item
                .pointer("/location/uri")
                .and_then(Value::as_str)
                .unwrap_or(uri);
            if files.leave_out(item_uri) {
                continue;
            }
            let at = files.location(item_uri, &range);
            let line = at.split(':').nth(1).unwrap_or("?").to_string();
            let detail = item
                .get("detail")
                .and_then(Value::as_str)
                .filter(|d| !d.is_empty())
                .map(|d| format!(" {}", clip(d, 80)))
                .unwrap_or_default();
            lines.push(format!(
                "{}{kind} {}{} (line {line})",
                "  ".repeat(depth),
                crate::escape::line(name),
                crate::escape::line(&detail)
            ));
            if let Some(children) = item.get("children").and_then(Value::as_array)
                && depth < 8
            {
                walk(children, depth + 1, lines, files, uri);
            }
        }
    }
    walk(items, 0, &mut lines, files, uri);
    if lines.is_empty() {
        return "No symbols found in this file.".to_string();
    }
    capped(lines)
}

/// A workspace symbols answer, or the items of a call hierarchy, as one
/// line each: kind, name, where.
pub fn symbols(items: &[Value], files: &mut Files<'_>, empty: &str) -> String {
    let lines: Vec<String> = items
        .iter()
        .filter_map(|item| {
            let name = item.get("name").and_then(Value::as_str).unwrap_or("?");
            let kind = kind_name(item.get("kind").and_then(Value::as_u64));
            let uri = item
                .get("uri")
                .or_else(|| item.pointer("/location/uri"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if files.leave_out(uri) {
                return None;
            }
            let range = item
                .get("selectionRange")
                .or_else(|| item.pointer("/location/range"))
                .or_else(|| item.get("range"))
                .cloned()
                .unwrap_or(Value::Null);
            let container = item
                .get("containerName")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .map(|c| format!(" in {}", crate::escape::line(c)))
                .unwrap_or_default();
            Some(format!(
                "{kind} {}{container} — {}",
                crate::escape::line(name),
                files.location(uri, &range)
            ))
        })
        .collect();
    if lines.is_empty() {
        return empty.to_string();
    }
    capped(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn locations_are_relative_with_their_line_and_outside_files_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::write(ws.join("a.py"), "x = 1\ndef f():\n    pass\n").unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret.txt");
        std::fs::write(&secret, "TOP SECRET\n").unwrap();
        let mut files = Files::new(&ws, None);
        let answer = json!([
            {"uri": super::super::connection::uri_of(&ws.join("a.py")),
             "range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 5}}},
            {"uri": super::super::connection::uri_of(&secret),
             "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}}
        ]);
        let text = locations(&answer, &mut files, "reference");
        assert!(text.starts_with("2 references in 2 files:"), "{text}");
        assert!(text.contains("a.py:2:5: def f():"), "{text}");
        assert!(text.contains("secret.txt:1:1"), "{text}");
        assert!(!text.contains("TOP SECRET"), "{text}");
        assert_eq!(
            locations(&Value::Null, &mut files, "definition"),
            "No definition found."
        );
    }

    #[test]
    fn results_in_files_the_model_may_not_read_are_counted_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir(ws.join("secrets")).unwrap();
        std::fs::write(
            ws.join("secrets/key.fk"),
            "def hidden():\n    SECRET_LINE\n",
        )
        .unwrap();
        std::fs::write(ws.join("a.fk"), "hidden()\n").unwrap();
        // A link to the denied file is denied too.
        std::os::unix::fs::symlink(ws.join("secrets/key.fk"), ws.join("link.fk")).unwrap();
        let secrets = ws.join("secrets");
        let denied = |path: &Path| path.starts_with(&secrets);
        let uri = |name: &str| super::super::connection::uri_of(&ws.join(name));
        let at = |line: u64| json!({"start": {"line": line, "character": 0}});

        let mut files = Files::new(&ws, None).denying(&denied);
        let answer = json!([
            {"uri": uri("a.fk"), "range": at(0)},
            {"uri": uri("secrets/key.fk"), "range": at(1)},
            {"uri": uri("link.fk"), "range": at(1)},
        ]);
        let text = locations(&answer, &mut files, "reference");
        assert_eq!(text, "1 reference in 1 file:\na.fk:1:1: hidden()");
        assert_eq!(
            files.left_out_note().unwrap(),
            "2 results in files you may not read were left out."
        );

        let mut files = Files::new(&ws, None).denying(&denied);
        let answer = json!({"uri": uri("secrets/key.fk"), "range": at(0)});
        assert_eq!(
            locations(&answer, &mut files, "definition"),
            "No definition found in files you may read."
        );
        assert_eq!(
            files.left_out_note().unwrap(),
            "1 result in a file you may not read was left out."
        );

        let mut files = Files::new(&ws, None).denying(&denied);
        let found = [json!({"name": "hidden", "kind": 12,
                   "location": {"uri": uri("secrets/key.fk"), "range": at(0)}})];
        assert_eq!(
            symbols(&found, &mut files, "No symbols found."),
            "No symbols found."
        );
        let outline = document_symbols(&json!(found), &mut files, &uri("a.fk"));
        assert_eq!(outline, "No symbols found in this file.");
        assert_eq!(
            files.left_out_note().unwrap(),
            "2 results in files you may not read were left out."
        );

        // Without a rule, nothing is left out.
        let mut files = Files::new(&ws, None);
        let text = locations(&answer, &mut files, "definition");
        assert!(text.contains("secrets/key.fk:1:1: def hidden():"), "{text}");
        assert!(files.left_out_note().is_none());
    }

    #[test]
    fn hover_and_symbols_render_compactly() {
        assert_eq!(
            hover(&json!({"contents": {"kind": "markdown", "value": "def f() -> int"}})),
            "def f() -> int"
        );
        assert_eq!(
            hover(&json!({"contents": [{"language": "python", "value": "x: int"}, "doc"]})),
            "```python\nx: int\n```\n\ndoc"
        );
        let dir = tempfile::tempdir().unwrap();
        let mut files = Files::new(dir.path(), None);
        let outline = document_symbols(
            &json!([{"name": "C", "kind": 5, "range": {"start": {"line": 0, "character": 0}},
                     "selectionRange": {"start": {"line": 0, "character": 6}},
                     "children": [{"name": "m", "kind": 6,
                                   "selectionRange": {"start": {"line": 1, "character": 8}}}]}]),
            &mut files,
            "file:///nowhere/a.py",
        );
        assert_eq!(outline, "class C (line 1)\n  method m (line 2)");
    }
}
