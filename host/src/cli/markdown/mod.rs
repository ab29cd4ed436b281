//! The model's Markdown rendered for a terminal as it streams: headings,
//! emphasis, lists, block quotes, rules, code blocks with syntax
//! highlighting, and tables, in rows that fit the terminal's width.
//!
//! Rendering never waits for more than it must. A line's kind is known
//! from its first characters (`# `, `- `, `> `, `1. `), and from then on
//! its text shows as it arrives; only an inline span whose closer has not
//! arrived yet (`**bold` so far) waits, for at most the rest of its line.
//! A code block's line waits for its end (highlighting needs the line), a
//! table for its last row (its columns need every cell). Everything held
//! shows at the end of the answer, whatever it is.
//!
//! A Markdown document parser (pulldown-cmark and the like) sees a whole
//! document; streaming needs output per delta, so the block structure is
//! read line by line here, with CommonMark's rules for the parts models
//! write.

mod highlight;
mod inline;
mod table;
mod wrap;

pub use wrap::width_of;

use super::escape;
use highlight::Highlighter;
use table::Table;
use wrap::{Look, Piece, Wrapper, paint};

/// Headings' colour, and the dim grey of rules, fences and gutters.
const HEADING: u8 = 35;

/// The kind of a line, told from its start.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Blank,
    /// `#`–`######`: the level and where the text starts.
    Heading(usize, usize),
    /// `-`, `*` or `+`: nesting depth and where the text starts.
    Bullet(usize, usize),
    /// `1.` or `1)`: depth, the number as written, where the text starts.
    Numbered(usize, String, usize),
    /// `>`: where the text starts.
    Quote(usize),
    /// `---`, `***`, `___`.
    Rule,
    /// ```` ``` ```` or `~~~`: the fence's character, length, indent and
    /// info string.
    Fence(char, usize, usize, String),
    /// A row of a table (or the start of one).
    TableRow,
    /// Text: where it starts.
    Text(usize),
}

/// What the current line is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineState {
    /// Too little of it has arrived to tell its kind.
    Undecided,
    /// Its text streams in this look; the bytes before `from` are shown.
    Streaming { from: usize, look: Look },
    /// It is shown once complete (a fence, a code line, a table row).
    Whole,
}

/// The block the last lines made, which the next line may continue.
enum Block {
    None,
    /// Paragraph or list-item text: a plain next line continues it.
    Text,
    /// Inside a fenced code block.
    Code {
        fence: char,
        length: usize,
        indent: usize,
        highlighter: Box<Highlighter>,
    },
    /// A table's rows so far.
    Table(Vec<String>),
}

/// A Markdown answer rendered as it streams.
pub struct MarkdownStream {
    wrap: Wrapper,
    line: String,
    state: LineState,
    block: Block,
    /// A blank line came after the last block: one empty row goes before
    /// the next.
    blank: bool,
    /// Something was shown (an empty row never comes first).
    shown: bool,
}

impl MarkdownStream {
    /// A renderer whose rows fit the width `width` reports (read again at
    /// each row, so it follows a resized terminal).
    pub fn new(width: Box<dyn Fn() -> usize + Send>) -> Self {
        Self {
            wrap: Wrapper::new(width),
            line: String::new(),
            state: LineState::Undecided,
            block: Block::None,
            blank: false,
            shown: false,
        }
    }

    /// A renderer for the terminal on stdout.
    pub fn for_stdout() -> Self {
        Self::new(Box::new(|| {
            terminal_size::terminal_size_of(std::io::stdout())
                .map_or(80, |(terminal_size::Width(w), _)| usize::from(w))
        }))
    }

    /// Takes the next piece of the answer; returns what to write now.
    pub fn push(&mut self, delta: &str) -> String {
        // The grammars (several megabytes) are loaded only for an answer
        // with a code block: on a thread of their own as soon as a fence
        // is seen, so the block's first line seldom waits for them.
        let fence = |text: &str| {
            let text = text.trim_start();
            text.starts_with("``") || text.starts_with("~~")
        };
        if delta.contains("```") || delta.contains("~~~") || fence(&self.line) {
            highlight::preload();
        }
        let text = escape::text(delta).replace('\t', "    ");
        let mut rest = text.as_str();
        while let Some(at) = rest.find('\n') {
            self.line.push_str(&rest[..at]);
            self.complete_line();
            rest = &rest[at + 1..];
        }
        if !rest.is_empty() {
            self.line.push_str(rest);
            self.partial_line();
        }
        self.wrap.take()
    }

    /// The answer is over: everything held is shown, and the last row
    /// ended. Returns what to write.
    pub fn finish(&mut self) -> String {
        if !self.line.is_empty() || self.state != LineState::Undecided {
            self.complete_line();
        }
        if let Block::Table(rows) = std::mem::replace(&mut self.block, Block::None) {
            self.table(&rows);
        }
        self.wrap.end_row();
        self.block = Block::None;
        self.blank = false;
        self.shown = false;
        self.wrap.take()
    }

    fn partial_line(&mut self) {
        if self.state == LineState::Undecided {
            if matches!(self.block, Block::Code { .. }) {
                self.state = LineState::Whole;
                return;
            }
            let Some(kind) = classify(&self.line, false) else {
                return;
            };
            self.begin(kind);
        }
        if let LineState::Streaming { from, look } = self.state {
            let (pieces, used) = inline::render(&self.line[from..], false, look);
            self.wrap.push_pieces(&pieces);
            self.state = LineState::Streaming {
                from: from + used,
                look,
            };
        }
    }

    fn complete_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        let state = std::mem::replace(&mut self.state, LineState::Undecided);
        if let LineState::Streaming { from, look } = state {
            let (pieces, _) = inline::render(&line[from..], true, look);
            self.wrap.push_pieces(&pieces);
            self.end_of_text_line();
            return;
        }
        if let Block::Code {
            fence,
            length,
            indent,
            highlighter,
        } = &mut self.block
        {
            let trimmed = line.trim_start();
            let closing = trimmed.chars().take_while(|c| c == fence).count();
            if closing >= *length && trimmed[closing..].trim().is_empty() {
                self.wrap.row(&dim(trimmed));
                self.block = Block::None;
            } else {
                let code = strip_indent(&line, *indent);
                let pieces = highlighter.line(code);
                self.wrap.row(&paint(&pieces));
            }
            return;
        }
        if let Block::Table(rows) = &mut self.block {
            if table::is_row(&line) {
                rows.push(line);
                return;
            }
            let rows = std::mem::take(rows);
            self.block = Block::None;
            self.table(&rows);
        }
        let Some(kind) = classify(&line, true) else {
            return;
        };
        match kind {
            Kind::Blank => {
                self.wrap.end_row();
                self.block = Block::None;
                self.blank = self.shown;
            }
            Kind::Rule => {
                self.separate();
                let width = self.wrap.width().min(60);
                self.wrap.row(&dim(&"─".repeat(width)));
                self.block = Block::None;
            }
            Kind::Fence(fence, length, indent, info) => {
                self.separate();
                self.wrap.row(&dim(line.trim_start()));
                self.block = Block::Code {
                    fence,
                    length,
                    indent,
                    highlighter: Box::new(Highlighter::new(&info)),
                };
            }
            Kind::TableRow => {
                self.separate();
                self.block = Block::Table(vec![line]);
            }
            kind => {
                self.begin(kind);
                if let LineState::Streaming { from, look } = self.state {
                    let (pieces, _) = inline::render(&line[from.min(line.len())..], true, look);
                    self.wrap.push_pieces(&pieces);
                    self.state = LineState::Undecided;
                    self.end_of_text_line();
                }
            }
        }
    }

    /// The end of a line whose text streamed: headings and quotes end
    /// their row; paragraph and list text may go on on the next line.
    fn end_of_text_line(&mut self) {
        if !matches!(self.block, Block::Text) {
            self.wrap.end_row();
        }
    }

    /// Starts showing a line of `kind` (its start is in `self.line`).
    fn begin(&mut self, kind: Kind) {
        // A line that is not a row ends the table before it.
        if kind != Kind::TableRow
            && matches!(self.block, Block::Table(_))
            && let Block::Table(rows) = std::mem::replace(&mut self.block, Block::None)
        {
            self.table(&rows);
        }
        let plain = Look::default();
        let (look, from) = match kind {
            Kind::Heading(level, from) => {
                self.separate();
                self.block = Block::None;
                let look = Look {
                    bold: true,
                    underline: level == 1,
                    fg: (level <= 2).then_some(HEADING),
                    ..plain
                };
                self.wrap.start_row(Vec::new(), Vec::new());
                (look, from)
            }
            Kind::Bullet(depth, from) => {
                self.separate();
                self.block = Block::Text;
                let indent = "  ".repeat(depth);
                let mark = ["• ", "◦ ", "▪ "][depth % 3];
                self.wrap.start_row(
                    vec![Piece::new(plain, format!("{indent}{mark}"))],
                    vec![Piece::new(plain, format!("{indent}  "))],
                );
                (plain, from)
            }
            Kind::Numbered(depth, number, from) => {
                self.separate();
                self.block = Block::Text;
                let indent = "  ".repeat(depth);
                let hang = " ".repeat(width_of(&number) + 1);
                self.wrap.start_row(
                    vec![Piece::new(plain, format!("{indent}{number} "))],
                    vec![Piece::new(plain, format!("{indent}{hang}"))],
                );
                (plain, from)
            }
            Kind::Quote(from) => {
                self.separate();
                self.block = Block::None;
                let gutter = Piece::new(Look { dim: true, ..plain }, "│ ");
                self.wrap.start_row(vec![gutter.clone()], vec![gutter]);
                (
                    Look {
                        italic: true,
                        ..plain
                    },
                    from,
                )
            }
            Kind::Text(from) => {
                if matches!(self.block, Block::Text) && self.wrap.in_row() {
                    // A soft line break: the paragraph goes on.
                    self.wrap.push(plain, " ");
                } else {
                    self.separate();
                    self.block = Block::Text;
                    self.wrap.start_row(Vec::new(), Vec::new());
                }
                (plain, from)
            }
            Kind::Blank | Kind::Rule | Kind::Fence(..) | Kind::TableRow => {
                self.state = LineState::Whole;
                return;
            }
        };
        self.state = LineState::Streaming { from, look };
        self.shown = true;
    }

    /// Ends the open row, with an empty row first if a blank line came
    /// before this block.
    fn separate(&mut self) {
        self.wrap.end_row();
        if self.blank && self.shown {
            self.wrap.blank_row();
        }
        self.blank = false;
        self.shown = true;
    }

    /// Shows a table's rows: a grid when it fits, records when it does
    /// not, the lines as text when they are not a table after all.
    fn table(&mut self, rows: &[String]) {
        let Some(table) = Table::parse(rows) else {
            for row in rows {
                self.wrap.start_row(Vec::new(), Vec::new());
                let (pieces, _) = inline::render(row.trim(), true, Look::default());
                self.wrap.push_pieces(&pieces);
                self.wrap.end_row();
            }
            return;
        };
        let width = self.wrap.width();
        match table.draw(width) {
            Some(lines) => {
                for line in lines {
                    self.wrap.row(&line);
                }
            }
            None => {
                for (n, record) in table.records().into_iter().enumerate() {
                    if n > 0 {
                        self.wrap.blank_row();
                    }
                    for (mut name, value) in record {
                        name.push(Piece::new(
                            Look {
                                bold: true,
                                ..Look::default()
                            },
                            ": ",
                        ));
                        self.wrap
                            .start_row(name, vec![Piece::new(Look::default(), "  ")]);
                        self.wrap.push_pieces(&value);
                        self.wrap.end_row();
                    }
                }
            }
        }
    }
}

fn dim(text: &str) -> String {
    paint(&[Piece::new(
        Look {
            dim: true,
            ..Look::default()
        },
        text,
    )])
}

/// `line` with up to `indent` leading spaces removed.
fn strip_indent(line: &str, indent: usize) -> &str {
    let spaces = line.len() - line.trim_start_matches(' ').len();
    &line[spaces.min(indent)..]
}

/// The kind of `line` (all of it, when `complete`; else its start), or
/// `None` while its start could still become more than one kind.
fn classify(line: &str, complete: bool) -> Option<Kind> {
    let rest = line.trim_start_matches(' ');
    let indent = line.len() - rest.len();
    let depth = indent / 2;
    let Some(first) = rest.chars().next() else {
        return complete.then_some(Kind::Blank);
    };
    let undecided = || (!complete).then_some(None);
    match first {
        '`' | '~' => {
            let run = rest.chars().take_while(|c| *c == first).count();
            if run >= 3 {
                if !complete {
                    return Some(Kind::Fence(first, run, indent, String::new()));
                }
                let info = rest[run..].trim().to_string();
                // A backtick fence's info string has no backtick.
                if first == '`' && info.contains('`') {
                    return Some(Kind::Text(indent));
                }
                return Some(Kind::Fence(first, run, indent, info));
            }
            if run == rest.len()
                && let Some(wait) = undecided()
            {
                return wait;
            }
            Some(Kind::Text(indent))
        }
        '|' => Some(Kind::TableRow),
        '#' => {
            let hashes = rest.chars().take_while(|c| *c == '#').count();
            match rest[hashes..].chars().next() {
                None if !complete => None,
                None if hashes <= 6 => Some(Kind::Heading(hashes, line.len())),
                Some(' ') if hashes <= 6 => Some(Kind::Heading(hashes, indent + hashes + 1)),
                _ => Some(Kind::Text(indent)),
            }
        }
        '>' => {
            if rest.len() == 1 && !complete {
                return None;
            }
            let from = indent + 1;
            let from = if line[from..].starts_with(' ') {
                from + 1
            } else {
                from
            };
            Some(Kind::Quote(from))
        }
        '-' | '*' | '+' | '_' => {
            let only_marks = rest.chars().all(|c| c == first || c == ' ');
            if only_marks {
                if !complete {
                    return None;
                }
                let marks = rest.chars().filter(|c| *c == first).count();
                if marks >= 3 && first != '+' {
                    return Some(Kind::Rule);
                }
            }
            if first != '_' && rest[1..].starts_with(' ') {
                let text = rest[1..].trim_start_matches(' ');
                if text.is_empty() && !complete {
                    return None;
                }
                return Some(Kind::Bullet(depth, line.len() - text.len()));
            }
            Some(Kind::Text(indent))
        }
        '0'..='9' => {
            let digits = rest.chars().take_while(char::is_ascii_digit).count();
            let after = &rest[digits..];
            match after.chars().next() {
                None if !complete && digits <= 9 => None,
                Some('.' | ')') if digits <= 9 => match after[1..].chars().next() {
                    None if !complete => None,
                    Some(' ') => {
                        let text = after[1..].trim_start_matches(' ');
                        Some(Kind::Numbered(
                            depth,
                            rest[..digits + 1].to_string(),
                            line.len() - text.len(),
                        ))
                    }
                    _ => Some(Kind::Text(indent)),
                },
                _ => Some(Kind::Text(indent)),
            }
        }
        _ => Some(Kind::Text(indent)),
    }
}

#[cfg(test)]
mod tests;
