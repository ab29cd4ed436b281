//! HTML to Markdown: the page's text with its structure (headings, links,
//! lists, code blocks, tables, quotes, emphasis), without what a reader
//! does not read (scripts, styles, navigation, forms, footers).
//!
//! The page is read by a WHATWG tokenizer (`html5gum`); the conversion
//! walks its tokens with a stack of open elements and writes Markdown as it
//! goes. Links and images are made absolute against the page's URL.

use html5gum::{DefaultEmitter, Token, Tokenizer};

use crate::url::Url;

/// A page converted: its title, if it has one, and its Markdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converted {
    /// The `<title>` text.
    pub title: Option<String>,
    /// The body as Markdown.
    pub markdown: String,
}

/// Elements whose whole content is dropped.
const DROPPED: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "math", "canvas", "iframe", "object", "nav",
    "footer", "aside", "form", "button", "select", "dialog", "head",
];

/// Elements that never have content or an end tag.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

/// Elements that start and end a block.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "figure",
    "figcaption",
    "address",
    "details",
    "summary",
    "dl",
    "dt",
    "dd",
    "center",
    "body",
    "html",
];

/// Converts `html`, fetched from `base`, to Markdown.
pub fn convert(html: &str, base: Option<&Url>) -> Converted {
    let mut emitter = DefaultEmitter::default();
    // Script, style and other raw-text elements are tokenized as text, as
    // a browser's tree builder would switch the tokenizer.
    emitter.naively_switch_states(true);
    let mut writer = Writer::new(base);
    for token in Tokenizer::new_with_emitter(html, emitter).flatten() {
        match token {
            Token::StartTag(tag) => {
                let name = String::from_utf8_lossy(&tag.name).to_ascii_lowercase();
                let attr = |key: &str| {
                    tag.attributes
                        .get(key.as_bytes())
                        .map(|v| String::from_utf8_lossy(&v.value).into_owned())
                };
                let attrs = Attrs {
                    href: attr("href"),
                    src: attr("src"),
                    alt: attr("alt"),
                    class: attr("class"),
                    role: attr("role"),
                    hidden: tag.attributes.contains_key(b"hidden".as_slice())
                        || attr("aria-hidden").as_deref() == Some("true"),
                };
                writer.start(&name, attrs, tag.self_closing);
            }
            Token::EndTag(tag) => {
                let name = String::from_utf8_lossy(&tag.name).to_ascii_lowercase();
                writer.end(&name);
            }
            Token::String(text) => writer.text(&String::from_utf8_lossy(&text.value)),
            _ => {}
        }
    }
    writer.finish()
}

/// The attributes the conversion reads.
#[derive(Debug, Default)]
struct Attrs {
    href: Option<String>,
    src: Option<String>,
    alt: Option<String>,
    class: Option<String>,
    role: Option<String>,
    hidden: bool,
}

/// What an open element means for the output.
#[derive(Debug)]
enum Open {
    /// Nothing special (inline, or a block already broken).
    Plain,
    /// A dropped element: nothing inside is written.
    Dropped,
    /// A heading of this level.
    Heading,
    /// A link; its text is captured, then written with the target.
    Link(Option<String>),
    /// `**` or `*` around the content.
    Emphasis(&'static str),
    /// Inline code.
    Code,
    /// A preformatted block, with the language its class names.
    Pre,
    /// A list, ordered or not, with the next item's number.
    List { ordered: bool, next: usize },
    /// A list item.
    Item,
    /// A quotation.
    Quote,
    /// A table being collected.
    Table,
    /// A table cell being captured.
    Cell,
    /// `<title>`.
    Title,
}

/// A table's rows of cell texts; the first row is its header.
struct Table {
    rows: Vec<Vec<String>>,
}

struct Writer<'a> {
    base: Option<&'a Url>,
    /// Output buffers: the page, then one per capture (link text, cell).
    buffers: Vec<String>,
    stack: Vec<(String, Open)>,
    dropped: usize,
    pre: usize,
    title: Option<String>,
    in_title: bool,
    tables: Vec<Table>,
}

impl<'a> Writer<'a> {
    fn new(base: Option<&'a Url>) -> Self {
        Self {
            base,
            buffers: vec![String::new()],
            stack: Vec::new(),
            dropped: 0,
            pre: 0,
            title: None,
            in_title: false,
            tables: Vec::new(),
        }
    }

    fn out(&mut self) -> &mut String {
        // There is always the page's buffer.
        let last = self.buffers.len() - 1;
        &mut self.buffers[last]
    }

    /// The prefix of every line at this depth: `> ` per quote, spaces per
    /// list item.
    fn prefix(&self) -> String {
        let mut prefix = String::new();
        for (_, open) in &self.stack {
            match open {
                Open::Quote => prefix.push_str("> "),
                Open::Item => prefix.push_str("  "),
                _ => {}
            }
        }
        prefix
    }

    fn capturing(&self) -> bool {
        self.buffers.len() > 1
    }

    /// Ends the current line, if something is on it.
    fn line_break(&mut self) {
        if self.capturing() {
            let out = self.out();
            if !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
            return;
        }
        let out = self.out();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
    }

    /// Leaves a blank line before what comes next.
    fn block_break(&mut self) {
        if self.capturing() {
            self.line_break();
            return;
        }
        self.line_break();
        let marker = self.prefix().trim_end().to_string();
        let out = self.out();
        if out.is_empty() {
            return;
        }
        let body = &out[..out.len() - 1];
        let last_start = body.rfind('\n').map_or(0, |i| i + 1);
        let last = &body[last_start..];
        if last.is_empty() || last == marker {
            return;
        }
        if last.chars().all(|c| c == '>' || c == ' ') {
            // A quote's blank line, left as the quote closed: a plain one.
            out.truncate(last_start);
        }
        out.push_str(&marker);
        out.push('\n');
    }

    /// Writes `text` as it is, starting lines with the prefix.
    fn write(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let prefix = if self.capturing() {
            String::new()
        } else {
            self.prefix()
        };
        let out = self.out();
        if out.is_empty() || out.ends_with('\n') {
            out.push_str(&prefix);
        }
        out.push_str(text);
    }

    fn start(&mut self, name: &str, attrs: Attrs, self_closing: bool) {
        if name == "title" && self.title.is_none() && !self_closing {
            self.in_title = true;
            self.title = Some(String::new());
            self.stack.push((name.to_string(), Open::Title));
            return;
        }
        let drop = self.dropped > 0
            || DROPPED.contains(&name)
            || attrs.hidden
            || matches!(
                attrs.role.as_deref(),
                Some("navigation" | "banner" | "contentinfo" | "search" | "dialog")
            );
        if VOID.contains(&name) || self_closing {
            if drop {
                return;
            }
            match name {
                "br" => {
                    if self.pre > 0 {
                        self.write("\n");
                    } else if self.capturing() {
                        self.write(" ");
                    } else {
                        self.write("  \n");
                    }
                }
                "hr" => {
                    self.block_break();
                    self.write("---");
                    self.block_break();
                }
                "img" => {
                    let alt = attrs.alt.unwrap_or_default();
                    let alt = collapse(&alt);
                    if let (false, Some(src)) = (alt.trim().is_empty(), attrs.src) {
                        let src = self.absolute(&src);
                        self.write(&format!("![{}]({src})", alt.trim()));
                    }
                }
                _ => {}
            }
            return;
        }
        if drop {
            self.dropped += 1;
            self.stack.push((name.to_string(), Open::Dropped));
            return;
        }
        let open = match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.block_break();
                let level = usize::from(name.as_bytes()[1] - b'0');
                self.write(&format!("{} ", "#".repeat(level)));
                Open::Heading
            }
            "a" => {
                self.buffers.push(String::new());
                Open::Link(attrs.href)
            }
            "strong" | "b" => {
                self.write("**");
                Open::Emphasis("**")
            }
            "em" | "i" => {
                self.write("*");
                Open::Emphasis("*")
            }
            "code" | "kbd" | "samp" | "tt" if self.pre == 0 => {
                self.write("`");
                Open::Code
            }
            "pre" => {
                self.block_break();
                let language = attrs
                    .class
                    .as_deref()
                    .and_then(language_of)
                    .unwrap_or_default();
                self.write(&format!("```{language}\n"));
                self.pre += 1;
                Open::Pre
            }
            "code" => {
                // Inside <pre>: a class may name the language; the fence
                // is already open, so only an empty language is filled.
                if let Some(language) = attrs.class.as_deref().and_then(language_of) {
                    let out = self.out();
                    if out.ends_with("```\n") {
                        out.truncate(out.len() - 1);
                        out.push_str(&language);
                        out.push('\n');
                    }
                }
                Open::Plain
            }
            "ul" | "ol" => {
                if self.stack.iter().any(|(_, o)| matches!(o, Open::Item)) {
                    self.line_break();
                } else {
                    self.block_break();
                }
                Open::List {
                    ordered: name == "ol",
                    next: 1,
                }
            }
            "li" => {
                self.line_break();
                let marker = match self.stack.iter_mut().rev().find_map(|(_, o)| match o {
                    Open::List { ordered, next } => Some((ordered, next)),
                    _ => None,
                }) {
                    Some((true, next)) => {
                        let marker = format!("{next}. ");
                        *next += 1;
                        marker
                    }
                    _ => "- ".to_string(),
                };
                self.write(&marker);
                Open::Item
            }
            "blockquote" => {
                self.block_break();
                self.stack.push((name.to_string(), Open::Quote));
                return;
            }
            "table" => {
                self.block_break();
                self.tables.push(Table { rows: Vec::new() });
                Open::Table
            }
            "tr" => {
                if let Some(table) = self.tables.last_mut() {
                    table.rows.push(Vec::new());
                }
                Open::Plain
            }
            "td" | "th" if !self.tables.is_empty() => {
                self.buffers.push(String::new());
                Open::Cell
            }
            name if BLOCKS.contains(&name) => {
                if self.stack.iter().any(|(_, o)| matches!(o, Open::Item)) {
                    // A paragraph opening a list item stays on its line.
                    let out = self.out();
                    if !(out.ends_with(". ") || out.ends_with("- ")) {
                        self.line_break();
                    }
                } else {
                    self.block_break();
                }
                Open::Plain
            }
            _ => Open::Plain,
        };
        self.stack.push((name.to_string(), open));
    }

    fn end(&mut self, name: &str) {
        // Close up to the matching open element; a stray end tag is ignored.
        let Some(position) = self.stack.iter().rposition(|(n, _)| n == name) else {
            return;
        };
        while self.stack.len() > position {
            let Some((closed, open)) = self.stack.pop() else {
                break;
            };
            self.close(&closed, open);
        }
    }

    fn close(&mut self, name: &str, open: Open) {
        match open {
            Open::Dropped => self.dropped = self.dropped.saturating_sub(1),
            Open::Title => self.in_title = false,
            Open::Heading => self.block_break(),
            Open::Link(href) => {
                let text = self.buffers.pop().unwrap_or_default();
                let text = collapse(&text);
                let text = text.trim();
                match href {
                    Some(href)
                        if !text.is_empty()
                            && !href.trim().is_empty()
                            && !href.trim_start().starts_with("javascript:") =>
                    {
                        let href = self.absolute(&href);
                        self.write(&format!("[{text}]({href})"));
                    }
                    _ => {
                        self.write(text);
                    }
                }
            }
            Open::Emphasis(mark) => {
                let out = self.out();
                let trimmed = out.trim_end_matches(' ').len();
                out.truncate(trimmed);
                if out.ends_with(mark) {
                    // Empty emphasis: take the opening mark back.
                    out.truncate(out.len() - mark.len());
                } else {
                    out.push_str(mark);
                }
            }
            Open::Code => {
                let out = self.out();
                if out.ends_with('`') {
                    out.pop();
                } else {
                    out.push('`');
                }
            }
            Open::Pre => {
                self.pre = self.pre.saturating_sub(1);
                let out = self.out();
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str("```");
                self.block_break();
            }
            Open::List { .. } => {
                if self.stack.iter().any(|(_, o)| matches!(o, Open::Item)) {
                    self.line_break();
                } else {
                    self.block_break();
                }
            }
            Open::Item => self.line_break(),
            Open::Quote => self.block_break(),
            Open::Cell => {
                let text = self.buffers.pop().unwrap_or_default();
                let text = collapse(&text).trim().replace('|', "\\|");
                if let Some(row) = self.tables.last_mut().and_then(|t| t.rows.last_mut()) {
                    row.push(text);
                }
            }
            Open::Table => {
                if let Some(table) = self.tables.pop() {
                    let text = render_table(&table);
                    self.block_break();
                    for line in text.lines() {
                        self.write(line);
                        self.write("\n");
                    }
                    self.block_break();
                }
            }
            Open::Plain => match name {
                name if BLOCKS.contains(&name) => {
                    if self.stack.iter().any(|(_, o)| matches!(o, Open::Item)) {
                        self.line_break();
                    } else {
                        self.block_break();
                    }
                }
                _ => {}
            },
        }
    }

    fn text(&mut self, text: &str) {
        if self.in_title {
            if let Some(title) = &mut self.title {
                title.push_str(text);
            }
            return;
        }
        if self.dropped > 0 {
            return;
        }
        if self.pre > 0 {
            let prefix = if self.capturing() {
                String::new()
            } else {
                self.prefix()
            };
            let mut first = true;
            for line in text.split('\n') {
                if !first {
                    self.out().push('\n');
                    if !prefix.is_empty() {
                        self.out().push_str(&prefix);
                    }
                }
                self.out().push_str(line);
                first = false;
            }
            return;
        }
        let collapsed = collapse(text);
        if collapsed.is_empty() {
            return;
        }
        let out = self.out();
        let at_start = out.is_empty()
            || out.ends_with('\n')
            || out.ends_with(' ')
            || out.ends_with("# ")
            || out.ends_with("> ");
        let collapsed = if at_start {
            collapsed.trim_start()
        } else {
            &collapsed
        };
        let in_code = self.stack.iter().any(|(_, o)| matches!(o, Open::Code));
        if in_code {
            self.write(collapsed);
        } else {
            self.write(&escape_text(collapsed));
        }
    }

    fn absolute(&self, link: &str) -> String {
        let link = link.trim();
        if link.starts_with('#') || link.starts_with("mailto:") {
            return link.to_string();
        }
        match self.base {
            Some(base) => base
                .join(link)
                .map_or_else(|_| link.to_string(), |url| url.to_string()),
            None => link.to_string(),
        }
        .replace(' ', "%20")
        .replace(')', "%29")
    }

    fn finish(mut self) -> Converted {
        while let Some((name, open)) = self.stack.pop() {
            self.close(&name, open);
        }
        while self.buffers.len() > 1 {
            let text = self.buffers.pop().unwrap_or_default();
            self.write(&text);
        }
        let page = self.buffers.pop().unwrap_or_default();
        let title = self
            .title
            .map(|t| collapse(&t).trim().to_string())
            .filter(|t| !t.is_empty());
        Converted {
            title,
            markdown: tidy(&page),
        }
    }
}

/// The language a `language-rust` / `lang-rust` class names.
fn language_of(class: &str) -> Option<String> {
    class.split_whitespace().find_map(|c| {
        c.strip_prefix("language-")
            .or_else(|| c.strip_prefix("lang-"))
            .filter(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|ch| ch.is_ascii_alphanumeric() || "+-#_".contains(ch))
            })
            .map(str::to_string)
    })
}

/// Runs of white space as one space.
fn collapse(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            if !space {
                out.push(' ');
            }
            space = true;
        } else {
            out.push(c);
            space = false;
        }
    }
    out
}

/// Escapes what Markdown would read as markup in running text.
fn escape_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '_' | '`' | '[' | ']' | '<' | '>') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A collected table as a Markdown table; the first row is the header.
fn render_table(table: &Table) -> String {
    let rows: Vec<&Vec<String>> = table.rows.iter().filter(|r| !r.is_empty()).collect();
    let Some(columns) = rows.iter().map(|r| r.len()).max() else {
        return String::new();
    };
    let line = |row: &Vec<String>| {
        let mut cells: Vec<String> = row.clone();
        cells.resize(columns, String::new());
        format!("| {} |", cells.join(" | "))
    };
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        out.push_str(&line(row));
        out.push('\n');
        if i == 0 {
            out.push_str(&format!("|{}\n", " --- |".repeat(columns)));
        }
    }
    out
}

/// Trailing spaces cut (a hard break's two are kept), runs of blank lines
/// made one, and the ends trimmed.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    let mut in_fence = false;
    for line in text.lines() {
        if line
            .trim_start_matches("> ")
            .trim_start()
            .starts_with("```")
        {
            in_fence = !in_fence;
        }
        let line = if in_fence || line.ends_with("  ") && !line.trim().is_empty() {
            line.trim_end_matches(|c: char| c != ' ' && c.is_whitespace())
        } else {
            line.trim_end()
        };
        if line.trim().is_empty() && !in_fence {
            blank += 1;
            if blank > 1 {
                continue;
            }
            out.push('\n');
            continue;
        }
        blank = 0;
        out.push_str(line);
        out.push('\n');
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests;
