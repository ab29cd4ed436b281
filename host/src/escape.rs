//! Text from plugins, hooks, skills, models and the audit log made safe to
//! print on a terminal.
//!
//! A terminal obeys the control characters in what it is given: ESC starts
//! sequences that clear the screen, retitle the window or write the
//! clipboard (OSC 52), BEL rings, CR returns to the start of the line so the
//! next text overwrites it, C1 controls (U+0080–U+009F) act like ESC
//! sequences on some terminals, and a newline in a field that should be one
//! line lets its author print a line of their own ("Grant these? [y/N]").
//! Everything printed for a person that someone else controls goes through
//! [`line`], [`text`] or [`message`] at the point where it is printed; what
//! is stored
//! (transcripts, the audit log, JSON output) keeps the original text, which
//! JSON escapes.
//!
//! Each control character becomes visible instead: `\e`-style escapes such
//! as `\x1b`, `\r`, `\n`, and `\u{9b}` for C1 controls and for the Unicode
//! direction overrides that reorder what a line appears to say.

use std::borrow::Cow;
use std::fmt::Write;

/// A field meant to be one line (a name, a log line, a reason, a path):
/// every control character is escaped, newlines and tabs included.
pub fn line(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// Text of several lines (a tool's output, the model's answer, an error
/// with a plugin's stderr): newlines and tabs are kept, every other control
/// character is escaped.
pub fn text(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// A message printed after a prefix such as `error: ` (an error that may
/// carry a plugin's text): as [`text`], and every line after the first is
/// indented by two spaces, so that nothing in it starts a line where
/// capstan's own lines and questions start.
pub fn message(message: &str) -> Cow<'_, str> {
    let escaped = text(message);
    if !escaped.contains('\n') {
        return escaped;
    }
    let mut lines = escaped.split('\n');
    let mut out = String::with_capacity(escaped.len() + 16);
    out.push_str(lines.next().unwrap_or_default());
    for line in lines {
        out.push('\n');
        if !line.is_empty() {
            out.push_str("  ");
        }
        out.push_str(line);
    }
    Cow::Owned(out)
}

fn escape(text: &str, keep_lines: bool) -> Cow<'_, str> {
    let needs = |c: char| unsafe_char(c) && !(keep_lines && (c == '\n' || c == '\t'));
    if !text.chars().any(needs) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !needs(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
        }
    }
    Cow::Owned(out)
}

/// Whether a terminal could act on `c` rather than show it.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            // Bidirectional embeddings, overrides and isolates, which can
            // make a line read differently from what it holds; line and
            // paragraph separators.
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        assert!(matches!(line("fs.read src/main.rs"), Cow::Borrowed(_)));
        assert!(matches!(text("a\n\tb\n"), Cow::Borrowed(_)));
        assert_eq!(line("naïve café ✓"), "naïve café ✓");
    }

    #[test]
    fn terminal_sequences_become_visible() {
        assert_eq!(
            line("\x1b[2J\x1b]0;pwned\x07"),
            "\\x1b[2J\\x1b]0;pwned\\x07"
        );
        assert_eq!(
            line("\x1b]52;c;ZWNobyBoaQ==\x1b\\"),
            "\\x1b]52;c;ZWNobyBoaQ==\\x1b\\"
        );
        assert_eq!(line("ok\rfake"), "ok\\rfake");
        assert_eq!(line("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(line("\x7f"), "\\x7f");
        assert_eq!(line("abc\u{202e}txt.exe"), "abc\\u{202e}txt.exe");
    }

    #[test]
    fn a_message_keeps_its_lines_off_the_first_column() {
        assert_eq!(message("one line"), "one line");
        assert_eq!(
            message("failed\nGrant these? [y/N]\n\n\x1b[2J"),
            "failed\n  Grant these? [y/N]\n\n  \\x1b[2J"
        );
    }

    #[test]
    fn newlines_are_escaped_in_a_line_and_kept_in_text() {
        assert_eq!(
            line("done\nGrant these? [y/N] "),
            "done\\nGrant these? [y/N] "
        );
        assert_eq!(text("a\n\tb\x1b[31m\r\n"), "a\n\tb\\x1b[31m\\r\n");
    }
}
