//! Styled text laid out in rows no wider than the terminal: words move to
//! the next row whole, rows after the first start with a prefix (a list
//! item's hanging indent, a quote's gutter), and every escape sequence is
//! written whole, between characters, never inside one.
//!
//! Text is shown as soon as it is given, even the start of a word whose end
//! has not arrived: if the word then outgrows the row, the part shown is
//! erased (the cursor moves back over it on the same row) and the word is
//! written again on the next row.

use unicode_width::UnicodeWidthChar;

/// How a piece of text looks: the SGR attributes it is drawn with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Look {
    /// Bold.
    pub bold: bool,
    /// Dim.
    pub dim: bool,
    /// Italic.
    pub italic: bool,
    /// Underlined.
    pub underline: bool,
    /// Struck through.
    pub strike: bool,
    /// A foreground colour of the terminal's palette (30–37, 90–97).
    pub fg: Option<u8>,
}

impl Look {
    /// The sequence that sets exactly this look, from any other.
    pub fn sgr(self) -> String {
        let mut codes = String::from("\x1b[0");
        for (on, code) in [
            (self.bold, "1"),
            (self.dim, "2"),
            (self.italic, "3"),
            (self.underline, "4"),
            (self.strike, "9"),
        ] {
            if on {
                codes.push(';');
                codes.push_str(code);
            }
        }
        if let Some(fg) = self.fg {
            codes.push(';');
            codes.push_str(&fg.to_string());
        }
        codes.push('m');
        codes
    }

    /// Whether this is the terminal's default look.
    pub fn is_plain(self) -> bool {
        self == Look::default()
    }
}

/// Text in one look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// The look.
    pub look: Look,
    /// The text (no control characters).
    pub text: String,
}

impl Piece {
    /// `text` in `look`.
    pub fn new(look: Look, text: impl Into<String>) -> Self {
        Self {
            look,
            text: text.into(),
        }
    }
}

/// `pieces` as one string with their looks, ending in the default look.
pub fn paint(pieces: &[Piece]) -> String {
    let mut out = String::new();
    let mut current = Look::default();
    for piece in pieces {
        if piece.look != current {
            out.push_str(&piece.look.sgr());
            current = piece.look;
        }
        out.push_str(&piece.text);
    }
    if !current.is_plain() {
        out.push_str("\x1b[0m");
    }
    out
}

/// The columns `text` takes on a terminal.
pub fn width_of(text: &str) -> usize {
    text.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// Lays out text in rows of the terminal's width.
pub struct Wrapper {
    out: String,
    /// The columns a row may use.
    width: usize,
    /// Where the terminal's width is read, at each new row (so a resized
    /// terminal gets rows of its new width).
    width_source: Box<dyn Fn() -> usize + Send>,
    /// The cursor's column; `None` when no row is open.
    col: Option<usize>,
    /// What starts each row after the first one of this block.
    prefix: Vec<Piece>,
    prefix_width: usize,
    /// The look the terminal has now.
    drawn: Look,
    /// The word at the end of the row, as shown (it may still grow).
    word: Vec<(Look, char)>,
    word_width: usize,
    /// Spaces given since the last word, not written yet (a row never
    /// starts or ends with them).
    spaces: usize,
    space_look: Look,
}

impl Wrapper {
    /// A wrapper for rows as wide as `width_source` says, less one column
    /// (a row that fills the last column leaves the cursor in a state
    /// where moving it back is off by one on some terminals).
    pub fn new(width_source: Box<dyn Fn() -> usize + Send>) -> Self {
        Self {
            out: String::new(),
            width: 80,
            width_source,
            col: None,
            prefix: Vec::new(),
            prefix_width: 0,
            drawn: Look::default(),
            word: Vec::new(),
            word_width: 0,
            spaces: 0,
            space_look: Look::default(),
        }
    }

    /// The columns rows have (read again when each row starts).
    pub fn width(&mut self) -> usize {
        self.width = (self.width_source)().saturating_sub(1).max(4);
        self.width
    }

    /// Whether a row is open (text was written since the last row ended).
    pub fn in_row(&self) -> bool {
        self.col.is_some()
    }

    /// Starts a row with `first` in front of it; rows it wraps into start
    /// with `rest`.
    pub fn start_row(&mut self, first: Vec<Piece>, rest: Vec<Piece>) {
        self.end_row();
        self.width();
        let first_width: usize = first.iter().map(|p| width_of(&p.text)).sum();
        self.write_pieces(&first);
        self.col = Some(first_width);
        self.prefix_width = rest.iter().map(|p| width_of(&p.text)).sum();
        self.prefix = rest;
    }

    /// Writes `text` in `look` on the open row (starting one without a
    /// prefix if none is open), wrapping at word boundaries; a newline in
    /// it counts as a space.
    pub fn push(&mut self, look: Look, text: &str) {
        if self.col.is_none() {
            self.start_row(Vec::new(), Vec::new());
        }
        for c in text.chars() {
            if c == ' ' || c == '\n' {
                self.word.clear();
                self.word_width = 0;
                self.spaces += 1;
                self.space_look = look;
                continue;
            }
            self.char(look, c);
        }
    }

    /// Writes pieces of text with [`Wrapper::push`].
    pub fn push_pieces(&mut self, pieces: &[Piece]) {
        for piece in pieces {
            self.push(piece.look, &piece.text);
        }
    }

    fn char(&mut self, look: Look, c: char) {
        let w = c.width().unwrap_or(0);
        if self.spaces > 0 {
            let col = self.col.unwrap_or(0);
            if col + self.spaces + w > self.width {
                self.new_row();
            } else {
                let spaces = " ".repeat(self.spaces);
                self.set_look(self.space_look);
                self.out.push_str(&spaces);
                self.col = Some(col + self.spaces);
            }
            self.spaces = 0;
        }
        let col = self.col.unwrap_or(0);
        if col + w > self.width {
            let word_starts_row = col.saturating_sub(self.word_width) <= self.prefix_width;
            if self.word_width > 0 && !word_starts_row {
                // Take the word shown so far back, and write it again on
                // the next row.
                self.out
                    .push_str(&format!("\x1b[{}D\x1b[K", self.word_width));
                let word = std::mem::take(&mut self.word);
                self.new_row();
                for (look, c) in &word {
                    self.set_look(*look);
                    self.out.push(*c);
                }
                self.col = Some(self.prefix_width + self.word_width);
                self.word = word;
            } else {
                // A word wider than the row is cut.
                self.new_row();
                self.word.clear();
                self.word_width = 0;
            }
        }
        self.set_look(look);
        self.out.push(c);
        self.col = Some(self.col.unwrap_or(0) + w);
        self.word.push((look, c));
        self.word_width += w;
    }

    /// Ends the row and starts the next one with the prefix.
    fn new_row(&mut self) {
        self.set_look(Look::default());
        self.out.push('\n');
        self.width();
        let prefix = self.prefix.clone();
        self.write_pieces(&prefix);
        self.col = Some(self.prefix_width);
        self.spaces = 0;
    }

    fn write_pieces(&mut self, pieces: &[Piece]) {
        for piece in pieces {
            self.set_look(piece.look);
            self.out.push_str(&piece.text);
        }
    }

    fn set_look(&mut self, look: Look) {
        if look != self.drawn {
            self.out.push_str(&look.sgr());
            self.drawn = look;
        }
    }

    /// Ends the open row, if any.
    pub fn end_row(&mut self) {
        if self.col.is_some() {
            self.set_look(Look::default());
            self.out.push('\n');
            self.col = None;
        }
        self.word.clear();
        self.word_width = 0;
        self.spaces = 0;
        self.prefix.clear();
        self.prefix_width = 0;
    }

    /// Writes a whole row already laid out (a code line, a table's row).
    pub fn row(&mut self, text: &str) {
        self.end_row();
        self.out.push_str(text);
        self.out.push('\n');
    }

    /// An empty row.
    pub fn blank_row(&mut self) {
        self.end_row();
        self.out.push('\n');
    }

    /// What was written since the last call.
    pub fn take(&mut self) -> String {
        std::mem::take(&mut self.out)
    }
}

#[cfg(test)]
pub(crate) mod screen {
    //! A small terminal for tests: what a row-by-row screen shows after
    //! the output, with looks dropped and cursor moves applied.

    use unicode_width::UnicodeWidthChar;

    /// The rows shown after `output`, trailing spaces trimmed.
    pub fn rows(output: &str) -> Vec<String> {
        let mut rows: Vec<Vec<char>> = vec![Vec::new()];
        let mut col = 0usize;
        let mut chars = output.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\x1b' => {
                    assert_eq!(chars.next(), Some('['), "only CSI sequences: {output:?}");
                    let mut params = String::new();
                    let end = loop {
                        let Some(c) = chars.next() else {
                            panic!("a sequence cut short in {output:?}")
                        };
                        if c.is_ascii_alphabetic() {
                            break c;
                        }
                        params.push(c);
                    };
                    let row = rows.last_mut().unwrap_or_else(|| unreachable!());
                    match end {
                        'm' => {}
                        'D' => col = col.saturating_sub(params.parse().unwrap_or(1)),
                        'K' => row.truncate(col),
                        other => panic!("unexpected sequence {other} in {output:?}"),
                    }
                }
                '\n' => {
                    rows.push(Vec::new());
                    col = 0;
                }
                c => {
                    let row = rows.last_mut().unwrap_or_else(|| unreachable!());
                    while row.len() < col {
                        row.push(' ');
                    }
                    let w = c.width().unwrap_or(0);
                    if col < row.len() {
                        row[col] = c;
                    } else {
                        row.push(c);
                    }
                    // A wide character takes two cells: the second is a
                    // placeholder the row's text leaves out.
                    for _ in 1..w {
                        col += 1;
                        if col < row.len() {
                            row[col] = '\0';
                        } else {
                            row.push('\0');
                        }
                    }
                    col += 1;
                }
            }
        }
        let mut rows: Vec<String> = rows
            .into_iter()
            .map(|row| {
                let text: String = row.into_iter().filter(|c| *c != '\0').collect();
                text.trim_end().to_string()
            })
            .collect();
        if rows.last().is_some_and(String::is_empty) {
            rows.pop();
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrapper(width: usize) -> Wrapper {
        Wrapper::new(Box::new(move || width + 1))
    }

    #[test]
    fn words_move_to_the_next_row_whole() {
        let mut w = wrapper(10);
        w.push(Look::default(), "one two three four");
        w.end_row();
        assert_eq!(screen::rows(&w.take()), ["one two", "three four"]);
    }

    #[test]
    fn a_word_that_grows_past_the_edge_is_written_again_below() {
        let mut w = wrapper(10);
        w.push(Look::default(), "one two th");
        let shown = w.take();
        assert_eq!(screen::rows(&shown), ["one two th"]);
        w.push(Look::default(), "ree");
        w.end_row();
        let all = format!("{shown}{}", w.take());
        assert_eq!(screen::rows(&all), ["one two", "three"]);
    }

    #[test]
    fn rows_after_the_first_start_with_the_prefix() {
        let mut w = wrapper(12);
        w.start_row(
            vec![Piece::new(Look::default(), "• ")],
            vec![Piece::new(Look::default(), "  ")],
        );
        w.push(Look::default(), "alpha beta gamma delta");
        w.end_row();
        assert_eq!(
            screen::rows(&w.take()),
            ["• alpha beta", "  gamma", "  delta"]
        );
    }

    #[test]
    fn wide_characters_count_twice_and_are_never_split() {
        let mut w = wrapper(9);
        w.push(Look::default(), "日本語 テキスト");
        w.end_row();
        let out = w.take();
        assert_eq!(screen::rows(&out), ["日本語", "テキスト"]);
        for row in screen::rows(&out) {
            assert!(width_of(&row) <= 9, "{row}");
        }
    }

    #[test]
    fn a_word_longer_than_a_row_is_cut_and_sequences_stay_whole() {
        let bold = Look {
            bold: true,
            ..Look::default()
        };
        let mut w = wrapper(5);
        w.push(bold, "abcdefghij");
        w.end_row();
        let out = w.take();
        assert_eq!(screen::rows(&out), ["abcde", "fghij"]);
        // Every ESC starts a complete sequence.
        for part in out.split('\x1b').skip(1) {
            assert!(part.starts_with('['), "{out:?}");
            assert!(part.contains('m'), "{out:?}");
        }
    }

    #[test]
    fn the_width_is_read_again_for_each_row() {
        let width = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(11));
        let source = width.clone();
        let mut w = Wrapper::new(Box::new(move || {
            source.load(std::sync::atomic::Ordering::Relaxed)
        }));
        w.push(Look::default(), "aaaa bbbb ");
        width.store(6, std::sync::atomic::Ordering::Relaxed);
        w.push(Look::default(), "cccc dddd");
        w.end_row();
        assert_eq!(screen::rows(&w.take()), ["aaaa bbbb", "cccc", "dddd"]);
    }
}
