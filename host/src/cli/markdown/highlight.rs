//! Syntax highlighting of code blocks, line by line as they stream, with
//! syntect's bundled grammars. Scopes map to the terminal's own palette
//! (no theme), so highlighting suits light and dark terminals alike.

use std::sync::OnceLock;

use syntect::parsing::{ParseState, Scope, ScopeStack, SyntaxSet};

use super::wrap::{Look, Piece};

fn syntaxes() -> &'static SyntaxSet {
    static SYNTAXES: OnceLock<SyntaxSet> = OnceLock::new();
    SYNTAXES.get_or_init(SyntaxSet::load_defaults_newlines)
}

/// Loads the grammars on a thread of their own, so the first code block
/// of a session does not wait for them (called when a fence is seen).
pub fn preload() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let _ = std::thread::Builder::new()
            .name("grammars".into())
            .spawn(|| {
                syntaxes();
            });
    });
}

/// Which colour a scope gets: the first prefix that matches, innermost
/// scope first.
fn palette() -> &'static [(Scope, Look)] {
    static PALETTE: OnceLock<Vec<(Scope, Look)>> = OnceLock::new();
    PALETTE.get_or_init(|| {
        let fg = |code| Look {
            fg: Some(code),
            ..Look::default()
        };
        let table: [(&str, Look); 14] = [
            (
                "comment",
                Look {
                    dim: true,
                    italic: true,
                    ..Look::default()
                },
            ),
            ("string", fg(32)),
            ("constant.character.escape", fg(36)),
            ("constant.numeric", fg(36)),
            ("constant.language", fg(36)),
            ("constant", fg(36)),
            ("keyword", fg(35)),
            ("storage.type", fg(33)),
            ("storage", fg(35)),
            ("entity.name.function", fg(34)),
            ("support.function", fg(34)),
            ("entity.name", fg(33)),
            ("support.type", fg(33)),
            ("meta.attribute", fg(90)),
        ];
        table
            .into_iter()
            .filter_map(|(name, look)| Scope::new(name).ok().map(|scope| (scope, look)))
            .collect()
    })
}

/// The look of text inside the scopes of `stack`.
fn look_of(stack: &ScopeStack) -> Look {
    for scope in stack.as_slice().iter().rev() {
        for (prefix, look) in palette() {
            if prefix.is_prefix_of(*scope) {
                return *look;
            }
        }
    }
    Look::default()
}

/// Highlights one code block's lines in order.
pub struct Highlighter {
    state: Option<(ParseState, ScopeStack)>,
}

impl Highlighter {
    /// A highlighter for the language a fence names (`rust`, `py`, `sh`…);
    /// unknown languages are shown plain.
    pub fn new(language: &str) -> Self {
        let token = language.split([' ', ',', '{']).next().unwrap_or_default();
        let state = if token.is_empty() {
            None
        } else {
            let set = syntaxes();
            set.find_syntax_by_token(token)
                .map(|syntax| (ParseState::new(syntax), ScopeStack::new()))
        };
        Self { state }
    }

    /// One line of the block (without its newline) as pieces.
    pub fn line(&mut self, line: &str) -> Vec<Piece> {
        let Some((parse, stack)) = &mut self.state else {
            return vec![Piece::new(Look::default(), line)];
        };
        let with_newline = format!("{line}\n");
        let Ok(ops) = parse.parse_line(&with_newline, syntaxes()) else {
            // The grammar failed on this line: the rest is shown plain.
            self.state = None;
            return vec![Piece::new(Look::default(), line)];
        };
        let mut pieces: Vec<Piece> = Vec::new();
        let mut at = 0;
        for (offset, op) in ops {
            let offset = offset.min(line.len());
            if offset > at {
                push(&mut pieces, look_of(stack), &line[at..offset]);
                at = offset;
            }
            if stack.apply(&op).is_err() {
                self.state = None;
                push(&mut pieces, Look::default(), &line[at..]);
                return pieces;
            }
        }
        if at < line.len() {
            push(&mut pieces, look_of(stack), &line[at..]);
        }
        pieces
    }
}

fn push(pieces: &mut Vec<Piece>, look: Look, text: &str) {
    match pieces.last_mut() {
        Some(last) if last.look == look => last.text.push_str(text),
        _ => pieces.push(Piece::new(look, text)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_strings_and_comments_get_colours() {
        let mut rust = Highlighter::new("rust");
        let pieces = rust.line("fn main() { let s = \"hi\"; } // done");
        let text: String = pieces.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(text, "fn main() { let s = \"hi\"; } // done");
        let look = |needle: &str| {
            pieces
                .iter()
                .find(|p| p.text.contains(needle))
                .map(|p| p.look)
                .unwrap_or_default()
        };
        assert!(look("fn").fg.is_some(), "{pieces:?}");
        assert_eq!(look("hi").fg, Some(32), "{pieces:?}");
        assert!(look("done").dim, "{pieces:?}");
        // State carries from line to line: a block comment opened above.
        let mut c = Highlighter::new("c");
        c.line("/* open");
        assert!(
            c.line("still comment */")
                .iter()
                .all(|p| p.look.dim || p.text.trim().is_empty())
        );
    }

    #[test]
    fn unknown_languages_are_plain() {
        let mut none = Highlighter::new("no-such-language");
        assert_eq!(
            none.line("let x = 1;"),
            vec![Piece::new(Look::default(), "let x = 1;")]
        );
    }
}
