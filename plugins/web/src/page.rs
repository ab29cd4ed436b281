//! What a fetched response becomes for the model: Markdown for HTML, the
//! text itself for text, Markdown and JSON, a refusal for anything else;
//! decoded from its charset, capped in size, and focused on the caller's
//! prompt when one is given.

use crate::markdown;
use crate::url::Url;

/// The most characters of page text a result carries.
pub const MAX_CHARS: usize = 100_000;

/// How a response body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Converted to Markdown.
    Html,
    /// Passed through as text (text/*, Markdown, JSON, XML, JavaScript).
    Text,
}

/// The kind of a body of `content_type` (the header, if any), or why it
/// cannot be shown.
pub fn kind(content_type: Option<&str>, body: &[u8]) -> Result<Kind, String> {
    let essence = content_type
        .map(|t| {
            t.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|t| !t.is_empty());
    match essence.as_deref() {
        Some("text/html" | "application/xhtml+xml") => Ok(Kind::Html),
        Some(t)
            if t.starts_with("text/")
                || t == "application/json"
                || t.ends_with("+json")
                || t == "application/xml"
                || t.ends_with("+xml")
                || t == "application/javascript"
                || t == "application/x-javascript"
                || t == "application/ecmascript"
                || t == "application/toml"
                || t == "application/yaml"
                || t == "application/x-yaml"
                || t == "application/x-sh"
                || t == "application/sql"
                || t == "application/graphql" =>
        {
            Ok(Kind::Text)
        }
        Some(t) if t != "application/octet-stream" => Err(format!(
            "it is `{t}`, which is not text; web.fetch shows web pages and text (HTML, Markdown, JSON, plain text)"
        )),
        _ => sniff(body),
    }
}

/// The kind of a body whose type was not said (or said as octet-stream).
fn sniff(body: &[u8]) -> Result<Kind, String> {
    let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    let head = head.trim_start_matches('\u{feff}').trim_start();
    if head.starts_with("<!doctype html") || head.starts_with("<html") {
        return Ok(Kind::Html);
    }
    let sample = &body[..body.len().min(8192)];
    let binary =
        sample.contains(&0) || std::str::from_utf8(sample).is_err_and(|e| e.error_len().is_some());
    if binary {
        return Err(
            "it is binary data, not text; web.fetch shows web pages and text (HTML, Markdown, JSON, plain text)"
                .to_string(),
        );
    }
    Ok(Kind::Text)
}

/// Decodes `body` from the charset the header names, else (for HTML) the
/// one a `<meta>` names, else a byte-order mark, else UTF-8; bytes that do
/// not decode become U+FFFD.
pub fn decode(content_type: Option<&str>, body: &[u8], kind: Kind) -> String {
    let declared = content_type
        .and_then(charset_param)
        .or_else(|| (kind == Kind::Html).then(|| meta_charset(body)).flatten());
    let encoding = declared
        .and_then(|label| encoding_rs::Encoding::for_label(label.as_bytes()))
        .unwrap_or(encoding_rs::UTF_8);
    // `decode` honours a byte-order mark over the declared charset.
    let (text, _, _) = encoding.decode(body);
    text.into_owned()
}

fn charset_param(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (key, value) = param.split_once('=')?;
        (key.trim().eq_ignore_ascii_case("charset"))
            .then(|| value.trim().trim_matches(['"', '\'']).to_string())
    })
}

/// The charset a `<meta charset>` or `<meta http-equiv content>` in the
/// first 2 KiB names.
fn meta_charset(body: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(&body[..body.len().min(2048)]).to_ascii_lowercase();
    let at = head.find("charset=")?;
    let rest = head[at + "charset=".len()..].trim_start_matches(['"', '\'']);
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .unwrap_or(rest.len());
    let label = &rest[..end];
    (!label.is_empty()).then(|| label.to_string())
}

/// The page as the model gets it: a header naming the URL (and title),
/// then the text, focused on `prompt` and capped at [`MAX_CHARS`].
pub fn render(url: &Url, body_text: &str, kind: Kind, prompt: Option<&str>) -> String {
    let (title, text) = match kind {
        Kind::Html => {
            let converted = markdown::convert(body_text, Some(url));
            (converted.title, converted.markdown)
        }
        Kind::Text => (None, body_text.trim().to_string()),
    };
    let mut out = format!("URL: {url}\n");
    if let Some(title) = title {
        out.push_str(&format!("Title: {title}\n"));
    }
    let text = match prompt.map(str::trim).filter(|p| !p.is_empty()) {
        Some(prompt) => {
            out.push_str(&format!("Prompt: {prompt}\n"));
            let (focused, moved) = focus(&text, prompt);
            if moved {
                out.push_str(
                    "(The sections most relevant to the prompt come first; the rest follow in page order.)\n",
                );
            }
            focused
        }
        None => text,
    };
    out.push('\n');
    if text.is_empty() {
        out.push_str("(The page has no readable text.)");
        return out;
    }
    out.push_str(&cap(&text, MAX_CHARS));
    out
}

/// `text` cut at `max` characters (at a line end when one is near), with a
/// marker saying how much was left out.
pub fn cap(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_string();
    }
    let cut = text.char_indices().nth(max).map_or(text.len(), |(i, _)| i);
    let mut kept = &text[..cut];
    if let Some(line_end) = kept.rfind('\n').filter(|i| *i > cut.saturating_sub(2000)) {
        kept = &kept[..line_end];
    }
    format!(
        "{kept}\n\n[… truncated: the text is {total} characters and only the first {} are shown; fetch a more specific page, or pass a prompt to bring the relevant sections first]",
        kept.chars().count()
    )
}

/// The Markdown's sections (split at headings) ordered by how many of the
/// prompt's words they contain, the most relevant first, ties in page
/// order; whether the order changed. Text before the first heading stays
/// first when it is relevant at all.
pub fn focus(markdown: &str, prompt: &str) -> (String, bool) {
    let words: Vec<String> = prompt
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() > 2)
        .map(str::to_lowercase)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .collect();
    if words.is_empty() {
        return (markdown.to_string(), false);
    }
    let sections = split_sections(markdown);
    let mut scored: Vec<(usize, usize, &str)> = sections
        .iter()
        .enumerate()
        .map(|(i, section)| {
            let lower = section.to_lowercase();
            let score = words
                .iter()
                .map(|w| lower.matches(w.as_str()).count())
                .sum();
            (score, i, *section)
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let moved = scored.iter().enumerate().any(|(i, (_, j, _))| i != *j);
    let text: Vec<&str> = scored.iter().map(|(_, _, s)| s.trim()).collect();
    (text.join("\n\n"), moved)
}

const STOP_WORDS: &[&str] = &[
    "the", "and", "for", "what", "how", "does", "this", "that", "with", "from", "are", "is",
    "about", "which", "when", "where", "who", "why", "can", "you", "page", "tell", "give", "list",
    "show", "find", "all", "any", "its", "into", "use", "used", "using",
];

/// The text split before each heading line (outside code fences).
fn split_sections(markdown: &str) -> Vec<&str> {
    let mut sections = Vec::new();
    let mut start = 0;
    let mut offset = 0;
    let mut fenced = false;
    for line in markdown.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if !fenced && line.starts_with('#') && offset > start {
            sections.push(&markdown[start..offset]);
            start = offset;
        }
        offset += line.len();
    }
    if start < markdown.len() {
        sections.push(&markdown[start..]);
    }
    sections
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_decide_how_a_body_is_read() {
        assert_eq!(kind(Some("text/html; charset=utf-8"), b""), Ok(Kind::Html));
        assert_eq!(kind(Some("text/markdown"), b"# x"), Ok(Kind::Text));
        assert_eq!(kind(Some("application/json"), b"{}"), Ok(Kind::Text));
        assert_eq!(kind(Some("application/ld+json"), b"{}"), Ok(Kind::Text));
        let refused = kind(Some("image/png"), b"\x89PNG").unwrap_err();
        assert!(
            refused.contains("image/png") && refused.contains("not text"),
            "{refused}"
        );
        assert!(kind(Some("application/pdf"), b"%PDF").is_err());
        assert_eq!(kind(None, b"<!DOCTYPE html><p>x"), Ok(Kind::Html));
        assert_eq!(
            kind(Some("application/octet-stream"), b"plain words"),
            Ok(Kind::Text)
        );
        assert!(
            kind(None, b"\x00\x01\x02binary")
                .unwrap_err()
                .contains("binary")
        );
    }

    #[test]
    fn charsets_are_decoded_from_the_header_the_meta_tag_or_a_bom() {
        let latin1 = b"caf\xe9";
        assert_eq!(
            decode(Some("text/plain; charset=ISO-8859-1"), latin1, Kind::Text),
            "café"
        );
        let html = b"<html><head><meta charset=\"windows-1252\"></head><body>\x93hi\x94</body>";
        assert!(decode(Some("text/html"), html, Kind::Html).contains("\u{201c}hi\u{201d}"));
        let sjis =
            b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=Shift_JIS\">\x82\xa0";
        assert!(decode(None, sjis, Kind::Html).contains('あ'));
        let bom = b"\xef\xbb\xbfplain";
        assert_eq!(
            decode(Some("text/plain; charset=latin1"), bom, Kind::Text),
            "plain"
        );
        assert_eq!(
            decode(None, b"bad \xff byte", Kind::Text),
            "bad \u{fffd} byte"
        );
    }

    #[test]
    fn long_text_is_cut_with_a_marker() {
        let text = "line\n".repeat(50);
        let capped = cap(&text, 42);
        assert!(capped.starts_with("line\nline"));
        assert!(
            capped.contains("[… truncated: the text is 250 characters"),
            "{capped}"
        );
        assert!(capped.chars().count() < 250 + 200);
        assert_eq!(cap("short", 42), "short");
    }

    #[test]
    fn a_prompt_brings_the_relevant_sections_first() {
        let md = "Intro text.\n\n## Install\n\nRun cargo add.\n\n## Features\n\nAsync runtime features.\n\n## License\n\nMIT";
        let (focused, moved) = focus(md, "Which features does it have?");
        assert!(moved);
        assert!(focused.starts_with("## Features"), "{focused}");
        assert!(focused.contains("## License") && focused.contains("Intro text."));
        let url = Url::parse("https://example.com/").unwrap();
        let page = render(&url, md, Kind::Text, Some("features"));
        assert!(
            page.starts_with("URL: https://example.com/\nPrompt: features\n"),
            "{page}"
        );
        assert!(page.contains("most relevant to the prompt come first"));
        assert!(!focus(md, "the and").1);
    }
}
