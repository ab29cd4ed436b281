//! Inline Markdown (emphasis, code spans, links, backslash escapes) turned
//! into styled pieces, as far as it can be told from the text so far.
//!
//! While a line streams, an opening delimiter whose closer has not arrived
//! yet (`**bold` so far) holds the text from it on; everything before it is
//! shown at once. Once the line is complete, an opener that was never
//! closed is shown as it was typed, as CommonMark does.

use super::wrap::{Look, Piece};

/// The most text held after an opener while waiting for its closer; past
/// it the opener is taken as literal text, so a stray `*` never holds a
/// long line back.
const HOLD_LIMIT: usize = 1024;

/// Inline code's colour.
const CODE: u8 = 36;
/// Links' colour.
const LINK: u8 = 34;

/// Renders the longest prefix of `text` that can be shown now; `complete`
/// says the line ends here (nothing more will come). Returns the pieces
/// and how many bytes of `text` they cover.
pub fn render(text: &str, complete: bool, base: Look) -> (Vec<Piece>, usize) {
    let mut out = Pieces::default();
    let mut i = 0;
    while let Some(c) = text[i..].chars().next() {
        match c {
            '\\' => match text[i + 1..].chars().next() {
                None if !complete => return (out.0, i),
                Some(next) if next.is_ascii_punctuation() => {
                    out.push(base, &text[i + 1..i + 1 + next.len_utf8()]);
                    i += 1 + next.len_utf8();
                }
                _ => {
                    out.push(base, "\\");
                    i += 1;
                }
            },
            '`' => {
                let after = i + run_length(&text[i..], '`');
                if after == text.len() && !complete {
                    return (out.0, i);
                }
                match code_span_end(text, after, after - i) {
                    Some(close) => {
                        let code = Look {
                            fg: Some(CODE),
                            ..base
                        };
                        out.push(code, code_text(&text[after..close]));
                        i = close + (after - i);
                    }
                    None if !complete && text.len() - after < HOLD_LIMIT => return (out.0, i),
                    None => {
                        out.push(base, &text[i..after]);
                        i = after;
                    }
                }
            }
            '*' | '_' | '~' => {
                let n = run_length(&text[i..], c);
                let after = i + n;
                let next = text[after..].chars().next();
                let prev = text[..i].chars().next_back();
                if next.is_none() && !complete {
                    return (out.0, i);
                }
                let opens = next.is_some_and(|n| !n.is_whitespace())
                    && !(c == '_' && prev.is_some_and(char::is_alphanumeric))
                    && if c == '~' { n == 2 } else { n <= 3 };
                let close = if opens {
                    emphasis_end(text, after, c, n)
                } else {
                    None
                };
                match close {
                    Some(close) => {
                        let look = emphasised(base, c, n);
                        let (inner, _) = render(&text[after..close], true, look);
                        out.extend(inner);
                        i = close + n;
                    }
                    None if opens && !complete && text.len() - after < HOLD_LIMIT => {
                        return (out.0, i);
                    }
                    None => {
                        out.push(base, &text[i..after]);
                        i = after;
                    }
                }
            }
            '[' => match link_at(text, i) {
                LinkAt::Found { label, url, end } => {
                    let look = Look {
                        underline: true,
                        fg: Some(LINK),
                        ..base
                    };
                    let (shown, _) = render(label, true, look);
                    out.extend(shown);
                    if !url.is_empty() && url != label {
                        out.push(Look { dim: true, ..base }, &format!(" ({url})"));
                    }
                    i = end;
                }
                LinkAt::Incomplete if !complete && text.len() - i < HOLD_LIMIT => {
                    return (out.0, i);
                }
                _ => {
                    out.push(base, "[");
                    i += 1;
                }
            },
            c => {
                out.push(base, &text[i..i + c.len_utf8()]);
                i += c.len_utf8();
            }
        }
    }
    (out.0, i)
}

/// Pieces, with neighbours of the same look joined.
#[derive(Default)]
struct Pieces(Vec<Piece>);

impl Pieces {
    fn push(&mut self, look: Look, text: &str) {
        if text.is_empty() {
            return;
        }
        match self.0.last_mut() {
            Some(last) if last.look == look => last.text.push_str(text),
            _ => self.0.push(Piece::new(look, text)),
        }
    }

    fn extend(&mut self, pieces: Vec<Piece>) {
        for piece in pieces {
            self.push(piece.look, &piece.text);
        }
    }
}

/// How many `c` start `text`.
fn run_length(text: &str, c: char) -> usize {
    text.chars().take_while(|x| *x == c).count() * c.len_utf8()
}

/// Where the code span whose opening run of `n` backticks ends at `from`
/// closes: the start of the next run of exactly `n` backticks.
fn code_span_end(text: &str, from: usize, n: usize) -> Option<usize> {
    let mut i = from;
    while let Some(at) = text[i..].find('`') {
        let start = i + at;
        let len = run_length(&text[start..], '`');
        if len == n {
            return Some(start);
        }
        i = start + len;
    }
    None
}

/// A code span's text: one space on each side is dropped when both are
/// there (so `` ` `` `` can show a backtick).
fn code_text(inner: &str) -> &str {
    if inner.len() >= 2
        && inner.starts_with(' ')
        && inner.ends_with(' ')
        && !inner.trim().is_empty()
    {
        &inner[1..inner.len() - 1]
    } else {
        inner
    }
}

/// Where the emphasis opened by a run of `n` × `c` ending at `from`
/// closes: the next run of exactly `n` that follows a non-space (and, for
/// `_`, is not followed by a letter or digit). A run of another length
/// that opens emphasis of its own is skipped with what it encloses.
fn emphasis_end(text: &str, from: usize, c: char, n: usize) -> Option<usize> {
    let mut i = from;
    while let Some(at) = text[i..].find(c) {
        let start = i + at;
        let len = run_length(&text[start..], c);
        let prev = text[..start].chars().next_back();
        let next = text[start + len..].chars().next();
        let closes = start > from
            && prev.is_some_and(|p| !p.is_whitespace())
            && !(c == '_' && next.is_some_and(char::is_alphanumeric));
        if closes && len == n {
            return Some(start);
        }
        let opens = next.is_some_and(|x| !x.is_whitespace())
            && !(c == '_' && prev.is_some_and(char::is_alphanumeric));
        i = start + len;
        if opens
            && len != n
            && let Some(inner) = emphasis_end(text, start + len, c, len)
        {
            i = inner + len;
        }
    }
    None
}

/// The look of text emphasised by `n` × `c`.
fn emphasised(base: Look, c: char, n: usize) -> Look {
    match (c, n) {
        ('~', _) => Look {
            strike: true,
            ..base
        },
        (_, 1) => Look {
            italic: true,
            ..base
        },
        (_, 2) => Look { bold: true, ..base },
        _ => Look {
            bold: true,
            italic: true,
            ..base
        },
    }
}

enum LinkAt<'a> {
    Found {
        label: &'a str,
        url: &'a str,
        end: usize,
    },
    /// It may still become a link.
    Incomplete,
    NotALink,
}

/// A `[label](url)` link starting at `at`.
fn link_at(text: &str, at: usize) -> LinkAt<'_> {
    let rest = &text[at + 1..];
    let Some(close) = rest.find(']') else {
        return LinkAt::Incomplete;
    };
    let label = &rest[..close];
    let after = &rest[close + 1..];
    match after.chars().next() {
        None => return LinkAt::Incomplete,
        Some('(') => {}
        Some(_) => return LinkAt::NotALink,
    }
    let Some(end) = after.find(')') else {
        return LinkAt::Incomplete;
    };
    let target = after[1..end].trim();
    // A title after the destination is left out.
    let url = target.split_whitespace().next().unwrap_or_default();
    if label.is_empty() {
        return LinkAt::NotALink;
    }
    LinkAt::Found {
        label,
        url: url.trim_start_matches('<').trim_end_matches('>'),
        end: at + 1 + close + 1 + end + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain() -> Look {
        Look::default()
    }

    fn bold() -> Look {
        Look {
            bold: true,
            ..plain()
        }
    }

    fn shown(text: &str) -> Vec<(String, Look)> {
        let (pieces, used) = render(text, true, plain());
        assert_eq!(used, text.len());
        pieces.into_iter().map(|p| (p.text, p.look)).collect()
    }

    #[test]
    fn emphasis_code_strike_and_links() {
        assert_eq!(
            shown("a **b** c"),
            vec![
                ("a ".into(), plain()),
                ("b".into(), bold()),
                (" c".into(), plain())
            ]
        );
        let italic = Look {
            italic: true,
            ..plain()
        };
        assert_eq!(shown("*i* and _j_")[0], ("i".into(), italic));
        assert_eq!(shown("*i* and _j_")[2], ("j".into(), italic));
        let code = shown("run `cargo **test**` now");
        assert_eq!(
            code[1],
            (
                "cargo **test**".into(),
                Look {
                    fg: Some(CODE),
                    ..plain()
                }
            )
        );
        assert!(shown("~~old~~")[0].1.strike);
        let link = shown("see [the docs](https://example.com/x \"t\")");
        assert_eq!(link[1].0, "the docs");
        assert!(link[1].1.underline);
        assert_eq!(link[2].0, " (https://example.com/x)");
        let nested = shown("**bold *both* bold**");
        assert_eq!(nested[0], ("bold ".into(), bold()));
        assert!(nested[1].1.bold && nested[1].1.italic, "{nested:?}");
        let nested = shown("*a **b** c*");
        assert_eq!(nested.len(), 3, "{nested:?}");
        assert!(nested[1].1.bold && nested[1].1.italic, "{nested:?}");
    }

    #[test]
    fn what_is_not_markup_is_shown_as_typed() {
        assert_eq!(shown("2 * 3 * 4")[0].0, "2 * 3 * 4");
        assert_eq!(shown("snake_case_name")[0].0, "snake_case_name");
        assert_eq!(shown("a **b never closes")[0].0, "a **b never closes");
        assert_eq!(shown("\\*not italic\\*")[0].0, "*not italic*");
        assert_eq!(shown("[x] done")[0].0, "[x] done");
        assert_eq!(shown("one `tick")[0].0, "one `tick");
    }

    #[test]
    fn an_open_span_holds_the_text_from_its_opener() {
        let (pieces, used) = render("shown **held", false, plain());
        assert_eq!(used, "shown ".len());
        assert_eq!(pieces, vec![Piece::new(plain(), "shown ")]);
        // Until the line is complete, a trailing backslash, backtick or
        // star may still start something.
        assert_eq!(render("a\\", false, plain()).1, 1);
        assert_eq!(render("a `", false, plain()).1, 2);
        assert_eq!(render("a *", false, plain()).1, 2);
        assert_eq!(render("see [docs](http://x", false, plain()).1, 4);
        // Not an opener: a star before a space.
        assert_eq!(render("2 * 3", false, plain()).1, 5);
    }
}
