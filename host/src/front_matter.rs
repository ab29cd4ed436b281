//! `SKILL.md`: YAML front matter between `---` lines, then the Markdown
//! body.
//!
//! The fields are those of the Agent Skills format (`name`,
//! `description`) and Claude Code's additions (`when_to_use`,
//! `allowed-tools`, `disallowed-tools`, `user-invocable`,
//! `disable-model-invocation`, `argument-hint`, `arguments`). A `name`
//! written for display ("Agent Development", `clean_gone`) is accepted, as
//! Claude Code accepts it: the skill is invoked by a name derived from it
//! ([`invocation_name`]: `agent-development`), and listings keep the name
//! as written. Other keys Claude Code or the format accept
//! (`license`, `metadata`, `version`, `model`, `compatibility`, ...) are
//! tolerated and ignored. A file without front matter is a skill named after
//! its folder, described by its first paragraph, as in Claude Code.
//!
//! A leaf: [`crate::skills`] reads skills with it, and the Claude Code plugin
//! import ([`crate::plugin::claude_import`]) checks the skills and commands
//! it copies with it, so neither depends on the other.

use std::collections::HashMap;

use yaml_rust2::parser::{MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;
use yaml_rust2::{Event, Yaml, YamlLoader};

/// The longest skill name (the Agent Skills limit).
pub const MAX_NAME: usize = 64;

/// The longest description kept (the Agent Skills limit).
pub const MAX_DESCRIPTION: usize = 1024;

/// What a `SKILL.md` (or a skill component) says about a skill.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SkillMeta {
    /// The name it is invoked by: lowercase letters, digits and `-`.
    pub name: String,
    /// The name as written, when it is not the invocation name
    /// (`Agent Development` for `agent-development`).
    pub display_name: Option<String>,
    /// What it is for.
    pub description: String,
    /// When the model should reach for it.
    pub when_to_use: Option<String>,
    /// A hint for arguments, shown to the user.
    pub argument_hint: Option<String>,
    /// Whether the user can run it as `/name`.
    pub user_invocable: bool,
    /// Whether the model may load it on its own.
    pub model_invocable: bool,
    /// Tools pre-approved while it is active (Claude Code's
    /// `allowed-tools`): they run without asking, within the permission
    /// mode, deny rules and grants. Other tools are not restricted.
    pub allowed_tools: Vec<String>,
    /// Tools that may not run while it is active.
    pub disallowed_tools: Vec<String>,
    /// Names for the positional arguments, in order: `$NAME` in the text
    /// stands for the argument at the same position.
    pub arguments: Vec<String>,
}

/// A parsed `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFile {
    /// Its front matter.
    pub meta: SkillMeta,
    /// The Markdown after the front matter.
    pub body: String,
}

/// Why a `SKILL.md` was not accepted: the line (1-based) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontMatterError {
    /// The line of the file the problem is on.
    pub line: usize,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl FrontMatterError {
    fn at(line: usize, message: impl Into<String>) -> Self {
        Self {
            line,
            message: message.into(),
        }
    }
}

/// Whether `name` is a valid skill name: 1 to 64 lowercase ASCII letters,
/// digits and hyphens, not starting or ending with a hyphen and without
/// `--`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// The invocation name for a name written for display: lowercase ASCII
/// letters and digits, every run of other characters (spaces, `_`, `.`,
/// ...) one `-`, without `-` at either end, at most [`MAX_NAME`]
/// characters. `None` when nothing is left. `Agent Development` becomes
/// `agent-development`, `clean_gone` becomes `clean-gone`; a valid name
/// stays as it is.
pub fn invocation_name(written: &str) -> Option<String> {
    let mut name = String::with_capacity(written.len());
    for c in written.chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c.to_ascii_lowercase());
        } else if !name.is_empty() && !name.ends_with('-') {
            name.push('-');
        }
    }
    name.truncate(MAX_NAME);
    let name = name.trim_end_matches('-').to_string();
    valid_name(&name).then_some(name)
}

/// Whether `name` can name a positional argument (`arguments:` in the
/// front matter, `$name` in the text): an ASCII letter or `_`, then
/// letters, digits, `_` and `-` (`$old-name`), not ending in `-`.
pub fn valid_argument_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !name.ends_with('-')
}

/// Parses `text`, the contents of a `SKILL.md` in a folder named
/// `folder_name` (the name when the front matter gives none).
pub fn parse(text: &str, folder_name: &str) -> Result<SkillFile, FrontMatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (yaml, body, body_line) = split(text)?;
    let mut meta = SkillMeta {
        user_invocable: true,
        model_invocable: true,
        ..SkillMeta::default()
    };
    let mut name = None;
    let mut description = None;
    if let Some(yaml) = yaml {
        check_alias_expansion(yaml)?;
        let docs = load_lenient(yaml).map_err(|e| {
            // The front matter starts on line 2, after the opening `---`.
            let line = e.marker().line().max(1) + 1;
            FrontMatterError::at(
                line,
                format!("invalid YAML in the front matter: {}", e.info()),
            )
        })?;
        let root = docs.into_iter().next().unwrap_or(Yaml::Null);
        let fields = match root {
            Yaml::Hash(fields) => fields,
            Yaml::Null => Default::default(),
            _ => {
                return Err(FrontMatterError::at(
                    2,
                    "the front matter must be a mapping of keys to values, such as `name: my-skill`",
                ));
            }
        };
        for (key, value) in fields {
            let Some(key) = key.as_str().map(str::to_string) else {
                continue;
            };
            let line = key_line(yaml, &key);
            match key.as_str() {
                "name" => name = Some(string(&key, value, line)?),
                "description" => description = Some(string(&key, value, line)?),
                "when_to_use" | "when-to-use" => {
                    meta.when_to_use = Some(string(&key, value, line)?).filter(|s| !s.is_empty());
                }
                "argument-hint" | "argument_hint" => {
                    meta.argument_hint =
                        Some(scalar_text(&key, value, line)?).filter(|s| !s.is_empty());
                }
                "user-invocable" | "user_invocable" => {
                    meta.user_invocable = boolean(&key, &value, line)?;
                }
                "disable-model-invocation" | "disable_model_invocation" => {
                    meta.model_invocable = !boolean(&key, &value, line)?;
                }
                "allowed-tools" | "allowed_tools" => {
                    meta.allowed_tools = tool_list(&key, value, line)?;
                }
                "disallowed-tools" | "disallowed_tools" | "disallowedTools" => {
                    meta.disallowed_tools = tool_list(&key, value, line)?;
                }
                "arguments" => meta.arguments = argument_names(&key, value, line)?,
                // Tolerated, as Claude Code does: license, metadata, version,
                // model, compatibility, context, agent, hooks, ...
                _ => {}
            }
        }
    }
    let written = match name.filter(|n| !n.is_empty()) {
        Some(name) => name,
        None => folder_name.to_string(),
    };
    let Some(name) = invocation_name(&written) else {
        return Err(FrontMatterError::at(
            1,
            format!(
                "`{written}` cannot be a skill name: it has no letters or digits (set `name:` in the front matter)"
            ),
        ));
    };
    meta.display_name = (name != written).then(|| collapse(&written));
    let description = match description.filter(|d| !d.trim().is_empty()) {
        Some(description) => description,
        None => first_paragraph(body).ok_or_else(|| {
            FrontMatterError::at(
                body_line,
                "the skill has no description: add `description:` to the front matter saying what it does and when to use it",
            )
        })?,
    };
    meta.name = name;
    meta.description = clip(collapse(&description), MAX_DESCRIPTION);
    Ok(SkillFile {
        meta,
        body: body.to_string(),
    })
}

/// How much YAML aliases may add to the front matter, counted as one per
/// node plus the bytes of each scalar they repeat. Each alias is a copy of
/// what its anchor names, so nested aliases multiply: 356 bytes can stand
/// for gigabytes. A real front matter has no use for more than a few small
/// repeats.
pub const MAX_ALIAS_EXPANSION: u64 = 64 << 10;

/// Refuses front matter whose aliases would expand past
/// [`MAX_ALIAS_EXPANSION`], before any document is built: the parser's
/// events are counted (each node's size, with an alias counting as the size
/// of the node its anchor names), which takes time and memory in
/// proportion to the text, not to its expansion.
fn check_alias_expansion(yaml: &str) -> Result<(), FrontMatterError> {
    let mut counter = AliasExpansion::default();
    // A syntax error is reported by the loader that follows.
    if Parser::new_from_str(yaml)
        .load(&mut counter, false)
        .is_err()
    {
        return Ok(());
    }
    match counter.exceeded_at {
        None => Ok(()),
        // Lines count from the front matter's; it starts on line 2.
        Some(line) => Err(FrontMatterError::at(
            line.max(1) + 1,
            format!(
                "the front matter's YAML aliases (`*name`) expand to more than {} KiB; \
                 write the values out instead of repeating anchors",
                MAX_ALIAS_EXPANSION >> 10
            ),
        )),
    }
}

/// Sizes of YAML nodes as their events arrive; see
/// [`check_alias_expansion`].
#[derive(Default)]
struct AliasExpansion {
    /// The size of each anchored node, by anchor id.
    anchors: HashMap<usize, u64>,
    /// The open sequences and mappings: size so far and anchor id.
    open: Vec<(u64, usize)>,
    /// What aliases have added so far.
    expanded: u64,
    /// The line where the expansion passed the budget, if it did.
    exceeded_at: Option<usize>,
}

impl AliasExpansion {
    /// A node of `size` ended (its anchor `anchor`, 0 for none).
    fn node(&mut self, size: u64, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, size);
        }
        if let Some((open, _)) = self.open.last_mut() {
            *open = open.saturating_add(size);
        }
    }
}

impl MarkedEventReceiver for AliasExpansion {
    fn on_event(&mut self, event: Event, mark: Marker) {
        match event {
            Event::Scalar(value, _, anchor, _) => {
                let size = 1 + u64::try_from(value.len()).unwrap_or(u64::MAX);
                self.node(size, anchor);
            }
            Event::Alias(anchor) => {
                let size = self.anchors.get(&anchor).copied().unwrap_or(1);
                self.expanded = self.expanded.saturating_add(size);
                if self.expanded > MAX_ALIAS_EXPANSION && self.exceeded_at.is_none() {
                    self.exceeded_at = Some(mark.line());
                }
                self.node(size, 0);
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                self.open.push((1, anchor));
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((size, anchor)) = self.open.pop() {
                    self.node(size, anchor);
                }
            }
            _ => {}
        }
    }
}

/// Splits the front matter (without its `---` lines) from the body, and
/// says on which line the body starts.
fn split(text: &str) -> Result<(Option<&str>, &str, usize), FrontMatterError> {
    let first_end = text.find('\n').map_or(text.len(), |i| i + 1);
    if text[..first_end].trim_end() != "---" {
        return Ok((None, text, 1));
    }
    let mut offset = first_end;
    let mut line = 2;
    while offset < text.len() {
        let end = text[offset..]
            .find('\n')
            .map_or(text.len(), |i| offset + i + 1);
        let current = text[offset..end].trim_end();
        if current == "---" || current == "..." {
            return Ok((Some(&text[first_end..offset]), &text[end..], line + 1));
        }
        offset = end;
        line += 1;
    }
    Err(FrontMatterError::at(
        1,
        "the front matter opened with `---` on line 1 is never closed; end it with a line `---`",
    ))
}

/// The line (1-based, in the file) where top-level `key` is written.
fn key_line(yaml: &str, key: &str) -> usize {
    yaml.lines()
        .position(|l| {
            l.strip_prefix(key)
                .or_else(|| {
                    l.strip_prefix('"')
                        .and_then(|l| l.strip_prefix(key))
                        .and_then(|l| l.strip_prefix('"'))
                })
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
        .map_or(2, |i| i + 2)
}

fn string(key: &str, value: Yaml, line: usize) -> Result<String, FrontMatterError> {
    match value {
        Yaml::String(s) => Ok(s.trim().to_string()),
        Yaml::Null => Ok(String::new()),
        other => Err(FrontMatterError::at(
            line,
            format!("`{key}` must be text, found {}", kind(&other)),
        )),
    }
}

/// Text, or a number or boolean written as text (an argument hint such as
/// `[issue-number]` would otherwise be a list).
fn scalar_text(key: &str, value: Yaml, line: usize) -> Result<String, FrontMatterError> {
    match value {
        Yaml::String(s) | Yaml::Real(s) => Ok(s.trim().to_string()),
        Yaml::Integer(n) => Ok(n.to_string()),
        Yaml::Boolean(b) => Ok(b.to_string()),
        Yaml::Null => Ok(String::new()),
        Yaml::Array(items) => {
            let parts: Result<Vec<String>, _> = items
                .into_iter()
                .map(|item| scalar_text(key, item, line))
                .collect();
            Ok(format!("[{}]", parts?.join(", ")))
        }
        other => Err(FrontMatterError::at(
            line,
            format!("`{key}` must be text, found {}", kind(&other)),
        )),
    }
}

fn boolean(key: &str, value: &Yaml, line: usize) -> Result<bool, FrontMatterError> {
    match value {
        Yaml::Boolean(b) => Ok(*b),
        Yaml::String(s) if s == "true" || s == "false" => Ok(s == "true"),
        other => Err(FrontMatterError::at(
            line,
            format!("`{key}` must be true or false, found {}", kind(other)),
        )),
    }
}

/// `allowed-tools`: a list, or one string separated by commas or spaces
/// (`Read, Grep, Bash(git log:*)`), keeping parentheses together.
fn tool_list(key: &str, value: Yaml, line: usize) -> Result<Vec<String>, FrontMatterError> {
    let mut tools = Vec::new();
    match value {
        Yaml::Null => {}
        Yaml::String(s) => tools.extend(split_tools(&s)),
        Yaml::Array(items) => {
            for item in items {
                match item {
                    Yaml::String(s) => tools.extend(split_tools(&s)),
                    other => {
                        return Err(FrontMatterError::at(
                            line,
                            format!("`{key}` must list tool names, found {}", kind(&other)),
                        ));
                    }
                }
            }
        }
        other => {
            return Err(FrontMatterError::at(
                line,
                format!(
                    "`{key}` must be a list of tool names or one line of them, found {}",
                    kind(&other)
                ),
            ));
        }
    }
    Ok(tools)
}

/// Splits `Read, Grep Bash(git diff:*)` at commas and spaces outside
/// parentheses.
fn split_tools(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => {
                depth += 1;
                current.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            ',' | ' ' | '\t' | '\n' if depth == 0 => {
                if !current.trim().is_empty() {
                    out.push(current.trim().to_string());
                }
                current.clear();
            }
            _ => current.push(c),
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    out
}

/// `arguments`: names for the positional arguments, as a list or one line
/// separated by spaces or commas.
fn argument_names(key: &str, value: Yaml, line: usize) -> Result<Vec<String>, FrontMatterError> {
    let names = match value {
        Yaml::Null => Vec::new(),
        Yaml::String(s) => split_tools(&s),
        Yaml::Array(items) => {
            let mut names = Vec::new();
            for item in items {
                match item {
                    Yaml::String(s) => names.extend(split_tools(&s)),
                    other => {
                        return Err(FrontMatterError::at(
                            line,
                            format!("`{key}` must list argument names, found {}", kind(&other)),
                        ));
                    }
                }
            }
            names
        }
        other => {
            return Err(FrontMatterError::at(
                line,
                format!(
                    "`{key}` must be a list of argument names or one line of them, found {}",
                    kind(&other)
                ),
            ));
        }
    };
    if let Some(bad) = names.iter().find(|n| !valid_argument_name(n)) {
        return Err(FrontMatterError::at(
            line,
            format!(
                "`{bad}` in `{key}` cannot name an argument: use letters, digits, `_` and `-`, starting with a letter (it is written `${bad}` in the text)"
            ),
        ));
    }
    Ok(names)
}

fn kind(value: &Yaml) -> &'static str {
    match value {
        Yaml::Real(_) | Yaml::Integer(_) => "a number",
        Yaml::String(_) => "text",
        Yaml::Boolean(_) => "a boolean",
        Yaml::Array(_) => "a list",
        Yaml::Hash(_) => "a mapping",
        Yaml::Alias(_) => "an alias",
        Yaml::Null => "nothing",
        Yaml::BadValue => "an invalid value",
    }
}

/// The first paragraph of Markdown text that is not a heading.
fn first_paragraph(body: &str) -> Option<String> {
    let mut paragraph = Vec::new();
    for line in body.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            if !paragraph.is_empty() {
                break;
            }
            continue;
        }
        paragraph.push(line);
    }
    (!paragraph.is_empty()).then(|| paragraph.join(" "))
}

/// Whitespace runs (newlines included) as single spaces.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most `limit` characters, with `…` when cut.
pub fn clip(text: String, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text;
    }
    let mut cut: String = text.chars().take(limit.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A sub-agent definition (Claude Code's `agents/NAME.md`): its front
/// matter's `name`, `description`, `tools`, `disallowedTools` and
/// `model`, and its body, the agent's system prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentFile {
    /// `name`, or the file's name without `.md`.
    pub name: String,
    /// `description`: when to use the agent.
    pub description: String,
    /// `tools`, as written (Claude Code names such as `Read, Grep`);
    /// `None` when absent (the agent inherits the session's tools).
    pub tools: Option<Vec<String>>,
    /// `disallowedTools`, as written: tools taken away from those `tools`
    /// gives or the agent inherits.
    pub disallowed_tools: Vec<String>,
    /// `model`: an alias (`sonnet`, `opus`, `haiku`, `inherit`) or a name.
    pub model: Option<String>,
    /// The system prompt.
    pub body: String,
}

/// Loads front matter as YAML; when that fails, loads it again with the
/// values of top-level `key: value` lines that YAML cannot read as written
/// taken as plain text, as Claude Code does: `argument-hint: [issue]
/// [priority]` is a hint, not a broken list. The first error stands when
/// the second reading fails too.
fn load_lenient(yaml: &str) -> Result<Vec<Yaml>, yaml_rust2::ScanError> {
    let first = match YamlLoader::load_from_str(yaml) {
        Ok(docs) => return Ok(docs),
        Err(e) => e,
    };
    let mut changed = false;
    let quoted: Vec<String> = yaml
        .lines()
        .map(|line| {
            let Some((key, value)) = line.split_once(':') else {
                return line.to_string();
            };
            let value = value.trim();
            let simple_key = !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !simple_key
                || value.is_empty()
                || value.starts_with(['"', '\'', '|', '>', '&', '*'])
                || YamlLoader::load_from_str(&format!("k: {value}")).is_ok()
            {
                return line.to_string();
            }
            changed = true;
            format!("{key}: '{}'", value.replace('\'', "''"))
        })
        .collect();
    if !changed {
        return Err(first);
    }
    YamlLoader::load_from_str(&quoted.join("\n")).map_err(|_| first)
}

/// A front matter field: its key, its value and the line it is on.
type Field = (String, Yaml, usize);

/// A markdown file's body (trimmed) and its front matter's fields, each
/// with the line it is on: where agent and output style files start.
fn fields_and_body(text: &str) -> Result<(String, Vec<Field>), FrontMatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (yaml, body, _) = split(text)?;
    let yaml = yaml.unwrap_or_default();
    check_alias_expansion(yaml)?;
    let docs = load_lenient(yaml).map_err(|e| {
        FrontMatterError::at(
            e.marker().line().max(1) + 1,
            format!("invalid YAML in the front matter: {}", e.info()),
        )
    })?;
    let mut found = Vec::new();
    if let Some(Yaml::Hash(fields)) = docs.into_iter().next() {
        for (key, value) in fields {
            let Some(key) = key.as_str().map(str::to_string) else {
                continue;
            };
            let line = key_line(yaml, &key);
            found.push((key, value, line));
        }
    }
    Ok((body.trim().to_string(), found))
}

/// Parses an agent definition named `file_name` (the name when the front
/// matter gives none). The name follows the skill rule (lowercase letters,
/// digits, `-`); a description is required, as in Claude Code.
pub fn parse_agent(text: &str, file_name: &str) -> Result<AgentFile, FrontMatterError> {
    let (body, fields) = fields_and_body(text)?;
    let mut agent = AgentFile {
        name: file_name.to_string(),
        body,
        ..AgentFile::default()
    };
    for (key, value, line) in fields {
        match key.as_str() {
            "name" => agent.name = string(&key, value, line)?,
            "description" => agent.description = collapse(&string(&key, value, line)?),
            "tools" => agent.tools = Some(tool_list(&key, value, line)?),
            "disallowedTools" | "disallowed-tools" | "disallowed_tools" => {
                agent.disallowed_tools = tool_list(&key, value, line)?;
            }
            "model" => {
                agent.model = Some(scalar_text(&key, value, line)?).filter(|m| !m.is_empty());
            }
            _ => {}
        }
    }
    if !valid_name(&agent.name) {
        return Err(FrontMatterError::at(
            1,
            format!(
                "`{}` cannot be an agent name: use 1 to {MAX_NAME} lowercase letters, digits and `-` (set `name:` in the front matter)",
                agent.name
            ),
        ));
    }
    if agent.description.is_empty() {
        return Err(FrontMatterError::at(
            1,
            "the agent has no description: add `description:` saying when to use it",
        ));
    }
    agent.description = clip(agent.description, MAX_DESCRIPTION);
    Ok(agent)
}

/// An output style (Claude Code's `output-styles/NAME.md`): its front
/// matter's `name`, `description` and `keep-coding-instructions`, and its
/// body, the text added to the system prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputStyleFile {
    /// `name`, or the file's name without `.md`; shown as written
    /// (`Explanatory`), chosen by it in any case.
    pub name: String,
    /// `description`: what the style does, for the list.
    pub description: String,
    /// `keep-coding-instructions`: whether the system prompt keeps its
    /// instructions on how to work on code (by default a style replaces
    /// them, as in Claude Code).
    pub keep_coding_instructions: bool,
    /// The text added to the system prompt.
    pub body: String,
}

/// The longest output style name.
const MAX_STYLE_NAME: usize = 64;

/// Parses an output style named `file_name` (the name when the front
/// matter gives none). A name is one line of at most 64 characters; the
/// body must not be empty.
pub fn parse_output_style(
    text: &str,
    file_name: &str,
) -> Result<OutputStyleFile, FrontMatterError> {
    let (body, fields) = fields_and_body(text)?;
    let mut style = OutputStyleFile {
        name: file_name.to_string(),
        body,
        ..OutputStyleFile::default()
    };
    for (key, value, line) in fields {
        match key.as_str() {
            "name" => style.name = collapse(&scalar_text(&key, value, line)?),
            "description" => style.description = collapse(&string(&key, value, line)?),
            "keep-coding-instructions" => {
                style.keep_coding_instructions = boolean(&key, &value, line)?;
            }
            _ => {}
        }
    }
    let name = style.name.trim();
    if name.is_empty()
        || name.chars().count() > MAX_STYLE_NAME
        || name.chars().any(char::is_control)
    {
        return Err(FrontMatterError::at(
            1,
            format!(
                "`{}` cannot be an output style name: use 1 to {MAX_STYLE_NAME} characters on one line (set `name:` in the front matter)",
                style.name
            ),
        ));
    }
    style.name = name.to_string();
    if style.body.is_empty() {
        return Err(FrontMatterError::at(
            1,
            "the output style has no text: write the instructions for the model after the front matter",
        ));
    }
    style.description = clip(style.description, MAX_DESCRIPTION);
    Ok(style)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The classic alias bomb: each level repeats the one before nine times.
    fn alias_bomb(levels: usize) -> String {
        let mut yaml = String::from(
            "---\nname: bomb\ndescription: boom\na0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for level in 1..levels {
            let prev = format!("*a{}", level - 1);
            let items = [prev.as_str(); 9].join(",");
            yaml.push_str(&format!("a{level}: &a{level} [{items}]\n"));
        }
        yaml.push_str("---\nbody\n");
        yaml
    }

    #[test]
    fn an_alias_bomb_is_refused_before_it_expands() {
        let err = parse(&alias_bomb(10), "bomb").unwrap_err();
        assert!(err.message.contains("aliases"), "{err:?}");
        assert!(err.line >= 4, "{err:?}");
        // A few small repeats are fine.
        let parsed = parse(&alias_bomb(3), "bomb").unwrap();
        assert_eq!(parsed.meta.name, "bomb");
    }

    #[test]
    fn reads_the_agent_skills_and_claude_code_fields() {
        let text = "---\nname: review-pr\ndescription: >\n  Reviews a pull request\n  carefully.\nwhen_to_use: When the user asks for a review.\nargument-hint: [pr-number]\nallowed-tools: Read, Grep, Bash(git diff:*)\nuser-invocable: true\ndisable-model-invocation: false\nlicense: MIT\nmetadata:\n  author: someone\nversion: 1.2\nmodel: sonnet\n---\n# Review\n\nLook at $ARGUMENTS.\n";
        let file = parse(text, "folder").unwrap();
        assert_eq!(file.meta.name, "review-pr");
        assert_eq!(file.meta.description, "Reviews a pull request carefully.");
        assert_eq!(
            file.meta.when_to_use.as_deref(),
            Some("When the user asks for a review.")
        );
        assert_eq!(file.meta.argument_hint.as_deref(), Some("[pr-number]"));
        assert_eq!(
            file.meta.allowed_tools,
            ["Read", "Grep", "Bash(git diff:*)"]
        );
        assert!(file.meta.user_invocable && file.meta.model_invocable);
        assert_eq!(file.body, "# Review\n\nLook at $ARGUMENTS.\n");
    }

    #[test]
    fn without_front_matter_the_folder_names_it_and_the_first_paragraph_describes_it() {
        let file = parse("# Title\n\nDoes a thing\nwell.\n\nMore.\n", "my-skill").unwrap();
        assert_eq!(file.meta.name, "my-skill");
        assert_eq!(file.meta.description, "Does a thing well.");
        let file = parse("---\ndescription: d\n---\nbody", "from-folder").unwrap();
        assert_eq!(file.meta.name, "from-folder");
    }

    #[test]
    fn flags_and_lists() {
        let text = "---\nname: x\ndescription: d\nuser-invocable: false\ndisable-model-invocation: true\nallowed-tools:\n  - fs.read\n  - fs.grep\n---\n";
        let meta = parse(text, "x").unwrap().meta;
        assert!(!meta.user_invocable);
        assert!(!meta.model_invocable);
        assert_eq!(meta.allowed_tools, ["fs.read", "fs.grep"]);
    }

    #[test]
    fn values_yaml_cannot_read_are_taken_as_text_as_claude_code_does() {
        let file = parse(
            "---\nargument-hint: [issue-number] [priority]\ndescription: Fix it: now\n---\nBody",
            "fix-issue",
        )
        .unwrap();
        assert_eq!(
            file.meta.argument_hint.as_deref(),
            Some("[issue-number] [priority]")
        );
        assert_eq!(file.meta.description, "Fix it: now");
    }

    #[test]
    fn malformed_front_matter_names_the_line() {
        let err = parse("---\nname: x\n\tdescription: [unclosed\n---\nbody", "x").unwrap_err();
        assert!(err.line >= 2, "{err:?}");
        assert!(err.message.contains("invalid YAML"), "{err:?}");

        let err = parse(
            "---\nname: x\ndescription: d\nuser-invocable: maybe\n---\n",
            "x",
        )
        .unwrap_err();
        assert_eq!(err.line, 4);
        assert!(
            err.message
                .contains("`user-invocable` must be true or false")
        );

        let err = parse("---\nname: x\ndescription: d\n", "x").unwrap_err();
        assert!(err.message.contains("never closed"), "{err:?}");

        let err = parse("---\nname: \"***\"\ndescription: d\n---\n", "x").unwrap_err();
        assert!(err.message.contains("cannot be a skill name"), "{err:?}");

        let err = parse(
            "---\nname: x\ndescription: d\narguments: [ok, 2bad]\n---\n",
            "x",
        )
        .unwrap_err();
        assert_eq!(err.line, 4);
        assert!(err.message.contains("`2bad`"), "{err:?}");

        let err = parse("---\nname: x\n---\n\n", "x").unwrap_err();
        assert!(err.message.contains("no description"), "{err:?}");

        let err = parse("---\n- a\n- b\n---\n", "x").unwrap_err();
        assert!(err.message.contains("mapping"), "{err:?}");
    }

    #[test]
    fn names_follow_the_agent_skills_rules() {
        for good in ["a", "review-pr", "x2", &"a".repeat(64)] {
            assert!(valid_name(good), "{good}");
        }
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", "a.b", &"a".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn display_names_and_underscores_get_an_invocation_name() {
        let file = parse("---\nname: Agent Development\ndescription: d\n---\n", "x").unwrap();
        assert_eq!(file.meta.name, "agent-development");
        assert_eq!(file.meta.display_name.as_deref(), Some("Agent Development"));
        let file = parse("---\ndescription: d\n---\n", "clean_gone").unwrap();
        assert_eq!(file.meta.name, "clean-gone");
        assert_eq!(file.meta.display_name.as_deref(), Some("clean_gone"));
        let file = parse("---\nname: review-pr\ndescription: d\n---\n", "x").unwrap();
        assert_eq!(file.meta.display_name, None);
        assert_eq!(
            invocation_name("  Hello,   World! v2 ").as_deref(),
            Some("hello-world-v2")
        );
        assert_eq!(invocation_name("--a__b--").as_deref(), Some("a-b"));
        assert_eq!(invocation_name("Déjà vu").as_deref(), Some("d-j-vu"));
        assert_eq!(invocation_name("!!!"), None);
        let long = format!("{}-b", "a".repeat(63));
        assert_eq!(
            invocation_name(&long).as_deref(),
            Some("a".repeat(63).as_str())
        );
    }

    #[test]
    fn named_arguments_and_disallowed_tools_are_read() {
        let text = "---\nname: x\ndescription: d\narguments: component source_framework\ndisallowed-tools: Bash(rm:*), Write\n---\n";
        let meta = parse(text, "x").unwrap().meta;
        assert_eq!(meta.arguments, ["component", "source_framework"]);
        assert_eq!(meta.disallowed_tools, ["Bash(rm:*)", "Write"]);
        let meta = parse(
            "---\ndescription: d\narguments:\n  - a\n  - b_2\n  - old-name\n---\n",
            "x",
        )
        .unwrap()
        .meta;
        assert_eq!(meta.arguments, ["a", "b_2", "old-name"]);
    }

    #[test]
    fn tool_lists_split_outside_parentheses() {
        assert_eq!(
            split_tools("Read,Grep  Bash(git log:*), fs.*"),
            ["Read", "Grep", "Bash(git log:*)", "fs.*"]
        );
    }

    #[test]
    fn output_styles_read_name_description_and_keep_coding_instructions() {
        let style = parse_output_style(
            "---\nname: Teaching Mode\ndescription: Explains as it goes.\nkeep-coding-instructions: true\n---\nExplain each step.\n",
            "teaching",
        )
        .unwrap();
        assert_eq!(style.name, "Teaching Mode");
        assert_eq!(style.description, "Explains as it goes.");
        assert!(style.keep_coding_instructions);
        assert_eq!(style.body, "Explain each step.");
        let plain = parse_output_style("Be terse.\n", "terse").unwrap();
        assert_eq!(
            (plain.name.as_str(), plain.keep_coding_instructions),
            ("terse", false)
        );
        assert!(
            parse_output_style("---\nname: x\n---\n", "x")
                .unwrap_err()
                .message
                .contains("has no text")
        );
        assert!(
            parse_output_style("---\nkeep-coding-instructions: maybe\n---\nhi\n", "x")
                .unwrap_err()
                .message
                .contains("true or false")
        );
    }
}
