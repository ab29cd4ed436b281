//! The status line over the interactive session's prompt: the model, the
//! permission mode, how much of the context window the conversation takes,
//! and what the session cost so far. It is made again before each prompt,
//! so it follows `/model`, `/mode` and every turn.

use crate::agent::Agent;

use super::markdown::width_of;
use super::render::Style;

/// The status line for `agent`, cut to `width` columns, dim.
pub fn status_line(agent: &Agent, style: Style, width: usize) -> String {
    style.dim(&cut(&status_text(agent), width))
}

/// The status line's text: `model · mode · context N% · cost`.
pub fn status_text(agent: &Agent) -> String {
    let config = agent.config();
    let mut parts = vec![
        config.model.clone(),
        format!("mode {}", agent.policy().mode()),
    ];
    let window = config.context_window;
    match agent.context_used() {
        Some(tokens) if window > 0 => {
            let percent = (tokens.saturating_mul(100) / window).min(100);
            parts.push(format!("context {percent}% of {}", tokens_label(window)));
        }
        _ if window > 0 && agent.messages().is_empty() => {
            parts.push(format!("context 0% of {}", tokens_label(window)));
        }
        _ => {}
    }
    let cost = agent.cost();
    parts.push(match cost.cost_usd() {
        Some(usd) => format!("${usd:.4}"),
        None => {
            let usage = &cost.usage;
            let tokens = usage.input_tokens
                + usage.output_tokens
                + usage.cache_read_tokens
                + usage.cache_write_tokens;
            format!("{} tokens", tokens_label(tokens))
        }
    });
    parts.join(" · ")
}

/// `950`, `12.3k`, `200k`, `1.0M`.
fn tokens_label(tokens: u64) -> String {
    if tokens < 1000 {
        tokens.to_string()
    } else if tokens < 100_000 {
        let tenths = tokens / 100;
        if tenths.is_multiple_of(10) {
            format!("{}k", tenths / 10)
        } else {
            format!("{}.{}k", tenths / 10, tenths % 10)
        }
    } else if tokens < 1_000_000 {
        format!("{}k", tokens / 1000)
    } else {
        format!("{}.{}M", tokens / 1_000_000, tokens / 100_000 % 10)
    }
}

/// `text` cut to `width` columns, with `…` where it was cut.
fn cut(text: &str, width: usize) -> String {
    if width_of(text) <= width {
        return text.to_string();
    }
    let mut out = String::new();
    for c in text.chars() {
        let mut next = out.clone();
        next.push(c);
        if width_of(&next) + 1 > width {
            break;
        }
        out = next;
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_counts_are_short() {
        assert_eq!(tokens_label(950), "950");
        assert_eq!(tokens_label(12_345), "12.3k");
        assert_eq!(tokens_label(200_000), "200k");
        assert_eq!(tokens_label(1_047_576), "1.0M");
    }

    #[test]
    fn a_long_line_is_cut_to_the_width() {
        assert_eq!(cut("model · mode default", 10), "model · m…");
        assert_eq!(cut("short", 10), "short");
    }
}
