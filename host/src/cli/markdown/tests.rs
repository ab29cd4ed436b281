use super::wrap::{screen, width_of};
use super::*;

/// The rows a terminal of `width` columns shows after the answer
/// arrives in `deltas`.
fn shown(deltas: &[&str], width: usize) -> Vec<String> {
    let mut md = MarkdownStream::new(Box::new(move || width));
    let mut out = String::new();
    for delta in deltas {
        out.push_str(&md.push(delta));
    }
    out.push_str(&md.finish());
    let rows = screen::rows(&out);
    // Code lines are never wrapped: the terminal folds a long one.
    if !deltas.concat().contains("```") && !deltas.concat().contains("~~~") {
        for row in &rows {
            assert!(width_of(row) < width, "{row:?} is wider than {width}");
        }
    }
    rows
}

/// The rows after the answer arrives whole, then one character at a time,
/// then cut at every third byte boundary: all the same.
fn shown_however_split(text: &str, width: usize) -> Vec<String> {
    let whole = shown(&[text], width);
    let chars: Vec<String> = text.chars().map(String::from).collect();
    let one_by_one: Vec<&str> = chars.iter().map(String::as_str).collect();
    assert_eq!(shown(&one_by_one, width), whole, "one character at a time");
    let mut pieces = Vec::new();
    let mut start = 0;
    for (n, (at, _)) in text.char_indices().enumerate() {
        if n % 3 == 2 {
            pieces.push(&text[start..at]);
            start = at;
        }
    }
    pieces.push(&text[start..]);
    assert_eq!(shown(&pieces, width), whole, "three characters at a time");
    whole
}

#[test]
fn headings_paragraphs_and_emphasis() {
    let rows = shown_however_split(
        "# Title\n\nSome **bold** and *italic* text with `code`.\n\n## Next\nMore.\n",
        80,
    );
    assert_eq!(
        rows,
        [
            "Title",
            "",
            "Some bold and italic text with code.",
            "",
            "Next",
            "More."
        ]
    );
}

#[test]
fn heading_text_is_styled_and_markers_hidden() {
    let mut md = MarkdownStream::new(Box::new(|| 80));
    let out = md.push("## Plan\n");
    assert!(out.contains("\x1b[0;1;35mPlan"), "{out:?}");
    assert!(!out.contains('#'), "{out:?}");
    let out = md.push("a **b** c\n");
    assert!(out.contains("\x1b[0;1mb"), "{out:?}");
}

#[test]
fn lists_nest_and_wrap_under_their_text() {
    let rows = shown_however_split(
        "Steps:\n- first item that is long enough to wrap\n  - nested\n1. one\n2. two\n",
        24,
    );
    assert_eq!(
        rows,
        [
            "Steps:",
            "• first item that is",
            "  long enough to wrap",
            "  ◦ nested",
            "1. one",
            "2. two"
        ]
    );
}

#[test]
fn block_quotes_and_rules() {
    let rows = shown_however_split("> quoted words here\n\n---\nafter\n", 15);
    assert_eq!(rows[0], "│ quoted words");
    assert_eq!(rows[1], "│ here");
    assert!(rows[3].starts_with("────"), "{rows:?}");
    assert_eq!(rows.last().map(String::as_str), Some("after"));
}

#[test]
fn code_blocks_are_highlighted_and_never_wrapped() {
    let text = "Run:\n```rust\nfn main() { println!(\"a very long line of code\"); }\n```\nDone.\n";
    let rows = shown_however_split(text, 20);
    assert_eq!(
        rows,
        [
            "Run:",
            "```rust",
            "fn main() { println!(\"a very long line of code\"); }",
            "```",
            "Done."
        ]
    );
    let mut md = MarkdownStream::new(Box::new(|| 80));
    let out = md.push(text);
    assert!(out.contains("\x1b[0;32m\"a very long"), "{out:?}");
    // Markdown inside a code block is code.
    let rows = shown(&["```\n**not bold** # no heading\n```\n"], 80);
    assert_eq!(rows[1], "**not bold** # no heading");
}

#[test]
fn tables_are_drawn_when_complete() {
    let text = "| file | lines |\n|---|--:|\n| a.rs | 12 |\n| 日本.rs | 3 |\n\nafter\n";
    let rows = shown_however_split(text, 80);
    assert_eq!(
        rows,
        [
            "┌─────────┬───────┐",
            "│ file    │ lines │",
            "├─────────┼───────┤",
            "│ a.rs    │    12 │",
            "│ 日本.rs │     3 │",
            "└─────────┴───────┘",
            "",
            "after"
        ]
    );
    // Too narrow for the grid: one record per row.
    let rows = shown(&[text], 12);
    assert_eq!(rows[0], "file: a.rs");
    assert_eq!(rows[1], "lines: 12");
    // A table at the very end of the answer is drawn too.
    let rows = shown(&["| a |\n|---|\n| b |"], 80);
    assert_eq!(rows.len(), 5, "{rows:?}");
}

#[test]
fn text_streams_at_once_and_only_an_open_span_waits() {
    let mut md = MarkdownStream::new(Box::new(|| 80));
    assert_eq!(screen::rows(&md.push("Hello wor")), ["Hello wor"]);
    assert_eq!(screen::rows(&md.push("ld **bo")), ["ld"]);
    let out = md.push("ld** end");
    assert_eq!(screen::rows(&out), [" bold end"]);
    // A line's kind waits for its first characters only.
    let mut md = MarkdownStream::new(Box::new(|| 80));
    assert_eq!(md.push("-"), "");
    assert_eq!(screen::rows(&md.push(" item")), ["• item"]);
}

#[test]
fn wide_characters_wrap_by_their_columns() {
    let rows = shown_however_split("これは 日本語の 文章です とても 長い\n", 13);
    assert_eq!(rows, ["これは", "日本語の", "文章です", "とても 長い"]);
}

#[test]
fn control_characters_from_the_model_are_escaped() {
    let mut md = MarkdownStream::new(Box::new(|| 80));
    let out = md.push("a \x1b]52;c;x\x07 b\n") + &md.finish();
    assert_eq!(out.matches('\x1b').count(), out.matches("\x1b[").count());
    assert!(!out.contains('\x07'), "{out:?}");
    assert!(out.contains("\\x1b]52"), "{out:?}");
}

#[test]
fn links_show_their_address() {
    let rows = shown_however_split("See [the guide](https://example.com/g).\n", 80);
    assert_eq!(rows, ["See the guide (https://example.com/g)."]);
}

#[test]
fn any_split_of_any_answer_shows_the_same() {
    let answer = "## Über *alles*\n\nText with **bold _and_ italic**, `code`, [a link](u) and \\*stars\\*.\nA second line ~~gone~~ 日本語のテキスト.\n\n1. one\n2) two\n   - deep **nested** item\n> quote *with* emphasis\n\n***\n~~~python\ndef f(x):\n    return \"s\"  # c\n~~~\n| a | b |\n|:-:|---|\n| 1 | `|` |\nlast * star and **unclosed\n";
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |below: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        usize::try_from(seed % below as u64).unwrap_or(0)
    };
    let boundaries: Vec<usize> = answer.char_indices().map(|(at, _)| at).collect();
    for width in [12, 30, 80] {
        let whole = shown(&[answer], width);
        for _ in 0..40 {
            let mut cuts: Vec<usize> = (0..next(12) + 1)
                .map(|_| boundaries[next(boundaries.len())])
                .collect();
            cuts.sort_unstable();
            cuts.dedup();
            let mut pieces = Vec::new();
            let mut start = 0;
            for cut in cuts {
                pieces.push(&answer[start..cut]);
                start = cut;
            }
            pieces.push(&answer[start..]);
            assert_eq!(shown(&pieces, width), whole, "split as {pieces:?}");
        }
    }
}
