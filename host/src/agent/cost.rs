//! Token and cost accounting.
//!
//! Costs are computed from the providers' public list prices, known here by
//! model family; they are estimates (discounts, batch pricing and
//! long-context surcharges are not known to capstan). Models whose price is
//! not known (local models, the scripted model) have no cost.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::model::Usage;

/// List prices of a model, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    /// Input tokens at the normal rate.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Input tokens read from the prompt cache.
    pub cache_read: f64,
    /// Input tokens written to the prompt cache.
    pub cache_write: f64,
}

impl Prices {
    const fn new(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Self {
        Self {
            input,
            output,
            cache_read,
            cache_write,
        }
    }
}

/// OpenAI models by exact id (a dated snapshot, `-YYYY-MM-DD`, matches too).
/// OpenAI does not charge extra for cache writes, so they cost as input.
const OPENAI: [(&str, Prices); 6] = [
    ("gpt-4o-2024-05-13", Prices::new(5.0, 15.0, 5.0, 5.0)),
    ("gpt-4o", Prices::new(2.5, 10.0, 1.25, 2.5)),
    ("gpt-4o-mini", Prices::new(0.15, 0.6, 0.075, 0.15)),
    ("gpt-4.1", Prices::new(2.0, 8.0, 0.5, 2.0)),
    ("gpt-4.1-mini", Prices::new(0.4, 1.6, 0.1, 0.4)),
    ("gpt-4.1-nano", Prices::new(0.1, 0.4, 0.025, 0.1)),
];

/// The list prices of `model`, if capstan knows them.
///
/// Matching ignores case and a provider prefix such as `anthropic/`
/// (OpenRouter). Anthropic models are recognised by family and version in
/// either naming (`claude-sonnet-4-5-20250929`, `claude-3-7-sonnet-latest`,
/// `anthropic/claude-opus-4.1`): Opus 4 and 4.1 (and 3), Opus 4.5 and later
/// 4.x, Sonnet 4.x and 3.x, Haiku 4.5, 3.5 and 3. OpenAI models are matched
/// by exact id or dated snapshot: gpt-4o, gpt-4o-mini, gpt-4.1,
/// gpt-4.1-mini, gpt-4.1-nano. Anything else is `None`.
pub fn prices_for(model: &str) -> Option<Prices> {
    let lower = model.trim().to_ascii_lowercase();
    let id = lower.rsplit('/').next().unwrap_or(&lower);
    let id = id.split([':', '@']).next().unwrap_or(id);
    if let Some(start) = id.find("claude-") {
        return claude_prices(&id[start..]);
    }
    OPENAI
        .iter()
        .find(|(name, _)| {
            id.strip_prefix(name)
                .is_some_and(|rest| rest.is_empty() || is_date_suffix(rest))
        })
        .map(|(_, prices)| *prices)
}

/// Whether `rest` is a snapshot date such as `-2024-08-06`.
fn is_date_suffix(rest: &str) -> bool {
    rest.starts_with("-20")
        && rest.len() == "-2024-08-06".len()
        && rest[1..].chars().all(|c| c.is_ascii_digit() || c == '-')
}

/// The prices of a Claude model id, starting at `claude-`.
fn claude_prices(id: &str) -> Option<Prices> {
    let parts: Vec<&str> = id.split(['-', '.']).collect();
    let family_at = parts
        .iter()
        .position(|part| matches!(*part, "opus" | "sonnet" | "haiku"))?;
    // Version numbers are short; dates (20250514) and tags (v1, latest) are not.
    let is_version = |part: &&&str| part.len() <= 2 && part.chars().all(|c| c.is_ascii_digit());
    let after: Vec<&&str> = parts[family_at + 1..]
        .iter()
        .take_while(is_version)
        .collect();
    let version: Vec<u32> = if after.is_empty() {
        // The older naming puts the version first: claude-3-5-sonnet.
        parts[1..family_at]
            .iter()
            .filter(is_version)
            .filter_map(|part| part.parse().ok())
            .collect()
    } else {
        after.iter().filter_map(|part| part.parse().ok()).collect()
    };
    let major = *version.first()?;
    let minor = version.get(1).copied().unwrap_or(0);
    match (parts[family_at], major, minor) {
        ("opus", 4, 5..) => Some(Prices::new(5.0, 25.0, 0.5, 6.25)),
        ("opus", 3 | 4, _) => Some(Prices::new(15.0, 75.0, 1.5, 18.75)),
        ("sonnet", 3 | 4, _) => Some(Prices::new(3.0, 15.0, 0.3, 3.75)),
        ("haiku", 4, 5) => Some(Prices::new(1.0, 5.0, 0.1, 1.25)),
        ("haiku", 3, 5) => Some(Prices::new(0.8, 4.0, 0.08, 1.0)),
        ("haiku", 3, 0) => Some(Prices::new(0.25, 1.25, 0.03, 0.3)),
        _ => None,
    }
}

/// What `usage` costs with `model`, in US dollars, if its prices are known.
pub fn cost_usd(model: &str, usage: &Usage) -> Option<f64> {
    let prices = prices_for(model)?;
    let per_million = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
    Some(
        per_million(usage.input_tokens, prices.input)
            + per_million(usage.output_tokens, prices.output)
            + per_million(usage.cache_read_tokens, prices.cache_read)
            + per_million(usage.cache_write_tokens, prices.cache_write),
    )
}

/// The tokens, requests and time of one session.
#[derive(Debug, Clone)]
pub struct SessionCost {
    /// The model the session talks to.
    pub model: String,
    /// The tokens used so far.
    pub usage: Usage,
    /// How many requests were answered in this run (a resumed session's
    /// earlier requests are not counted).
    pub requests: u32,
    /// When the session started (in this run).
    pub started: Instant,
    /// What the tokens used with earlier models of this session cost
    /// (`None` once one of them had no known price), and how many of
    /// [`Self::usage`] they were.
    earlier: (Option<f64>, Usage),
}

impl SessionCost {
    /// A session with `model` that starts now.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            usage: Usage::default(),
            requests: 0,
            started: Instant::now(),
            earlier: (Some(0.0), Usage::default()),
        }
    }

    /// Goes on with `model` (`/model`): the tokens so far stay priced at
    /// the model that used them.
    pub fn switch_model(&mut self, model: impl Into<String>) {
        let model = model.into();
        if model == self.model {
            return;
        }
        let (earlier_usd, counted) = self.earlier;
        let since = since(&self.usage, &counted);
        let usd = earlier_usd
            .zip(cost_usd(&self.model, &since))
            .map(|(a, b)| a + b);
        self.earlier = (usd, self.usage);
        self.model = model;
    }

    /// Counts one answered request.
    pub fn add(&mut self, usage: Usage) {
        self.usage.add(usage);
        self.requests = self.requests.saturating_add(1);
    }

    /// Counts the tokens of a resumed session's earlier requests.
    pub fn add_previous(&mut self, usage: Usage) {
        self.usage.add(usage);
    }

    /// What the session cost so far, if the model's prices are known.
    pub fn cost_usd(&self) -> Option<f64> {
        let (earlier_usd, counted) = self.earlier;
        let now = cost_usd(&self.model, &since(&self.usage, &counted))?;
        earlier_usd.map(|earlier| earlier + now)
    }

    /// A report for `/cost`, one item a line.
    pub fn report(&self) -> String {
        self.report_after(self.started.elapsed())
    }

    /// The report, as if `elapsed` had passed since the start.
    fn report_after(&self, elapsed: Duration) -> String {
        let usage = &self.usage;
        let cost = match self.cost_usd() {
            Some(cost) => format!("${cost:.4} (at list prices)"),
            None => format!("unknown for model {}", self.model),
        };
        let mut report = String::new();
        let mut line = |label: &str, value: String| {
            let _ = writeln!(report, "{label:<13}{value}");
        };
        line("Model:", self.model.clone());
        line(
            "Input:",
            format!("{} tokens", thousands(usage.input_tokens)),
        );
        line(
            "Output:",
            format!("{} tokens", thousands(usage.output_tokens)),
        );
        line(
            "Cache read:",
            format!("{} tokens", thousands(usage.cache_read_tokens)),
        );
        line(
            "Cache write:",
            format!("{} tokens", thousands(usage.cache_write_tokens)),
        );
        line("Requests:", thousands(u64::from(self.requests)));
        line("Cost:", cost);
        line("Wall time:", wall_time(elapsed));
        report.truncate(report.trim_end().len());
        report
    }
}

/// The tokens of `total` not already in `counted`.
fn since(total: &Usage, counted: &Usage) -> Usage {
    Usage {
        input_tokens: total.input_tokens.saturating_sub(counted.input_tokens),
        output_tokens: total.output_tokens.saturating_sub(counted.output_tokens),
        cache_read_tokens: total
            .cache_read_tokens
            .saturating_sub(counted.cache_read_tokens),
        cache_write_tokens: total
            .cache_write_tokens
            .saturating_sub(counted.cache_write_tokens),
    }
}

/// `n` with commas between thousands: `12,345`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A duration as `45s`, `2m 05s` or `1h 02m 03s`.
fn wall_time(elapsed: Duration) -> String {
    let seconds = elapsed.as_secs();
    let (hours, minutes, seconds) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    if hours > 0 {
        format!("{hours}h {minutes:02}m {seconds:02}s")
    } else if minutes > 0 {
        format!("{minutes}m {seconds:02}s")
    } else {
        format!("{seconds}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: cache_read,
            cache_write_tokens: cache_write,
        }
    }

    fn input_output(model: &str) -> Option<(f64, f64)> {
        prices_for(model).map(|prices| (prices.input, prices.output))
    }

    #[test]
    fn anthropic_models_match_by_family_and_version() {
        for model in [
            "claude-opus-4-20250514",
            "claude-opus-4-1-20250805",
            "claude-opus-4-0",
            "anthropic/claude-opus-4.1",
            "claude-3-opus-20240229",
        ] {
            assert_eq!(input_output(model), Some((15.0, 75.0)), "{model}");
        }
        let opus = prices_for("claude-opus-4-1").unwrap();
        assert_eq!((opus.cache_read, opus.cache_write), (1.5, 18.75));
        assert_eq!(input_output("claude-opus-4-5-20251101"), Some((5.0, 25.0)));
        for model in [
            "claude-sonnet-4-20250514",
            "claude-sonnet-4-5",
            "Claude-Sonnet-4-5-20250929",
            "claude-3-7-sonnet-latest",
            "claude-3-5-sonnet-20241022",
            "anthropic/claude-3.7-sonnet:thinking",
            "anthropic/claude-sonnet-4.5",
            "anthropic.claude-3-5-sonnet-20240620-v1:0",
        ] {
            assert_eq!(input_output(model), Some((3.0, 15.0)), "{model}");
        }
        let sonnet = prices_for("claude-sonnet-4-5").unwrap();
        assert_eq!((sonnet.cache_read, sonnet.cache_write), (0.3, 3.75));
        assert_eq!(
            prices_for("claude-haiku-4-5-20251001"),
            Some(Prices::new(1.0, 5.0, 0.1, 1.25))
        );
        assert_eq!(
            prices_for("claude-3-5-haiku-latest"),
            Some(Prices::new(0.8, 4.0, 0.08, 1.0))
        );
        assert_eq!(input_output("claude-3-haiku-20240307"), Some((0.25, 1.25)));
    }

    #[test]
    fn openai_models_match_by_id_or_snapshot() {
        assert_eq!(
            prices_for("gpt-4o"),
            Some(Prices::new(2.5, 10.0, 1.25, 2.5))
        );
        assert_eq!(input_output("openai/GPT-4o-2024-08-06"), Some((2.5, 10.0)));
        assert_eq!(input_output("gpt-4o-2024-05-13"), Some((5.0, 15.0)));
        assert_eq!(
            prices_for("gpt-4o-mini-2024-07-18"),
            Some(Prices::new(0.15, 0.6, 0.075, 0.15))
        );
        assert_eq!(prices_for("gpt-4.1"), Some(Prices::new(2.0, 8.0, 0.5, 2.0)));
        assert_eq!(
            prices_for("openai/gpt-4.1-mini"),
            Some(Prices::new(0.4, 1.6, 0.1, 0.4))
        );
        assert_eq!(input_output("gpt-4.1-nano"), Some((0.1, 0.4)));
    }

    #[test]
    fn unknown_models_have_no_prices() {
        for model in [
            "scripted",
            "llama3.2:3b",
            "qwen2.5-coder",
            "gpt-4o-audio-preview",
            "gpt-5",
            "claude-opus-5",
            "claude-haiku-4-0",
            "claude-2.1",
            "",
        ] {
            assert_eq!(prices_for(model), None, "{model}");
            assert_eq!(cost_usd(model, &usage(1000, 1000, 0, 0)), None, "{model}");
        }
    }

    #[test]
    fn cost_adds_up_each_kind_of_token() {
        let cost = cost_usd(
            "claude-sonnet-4-5",
            &usage(1_000_000, 100_000, 2_000_000, 10_000),
        )
        .unwrap();
        // 3.00 + 1.50 + 0.60 + 0.0375
        assert!((cost - 5.1375).abs() < 1e-9, "{cost}");
        let cost = cost_usd("gpt-4o-mini", &usage(2_000, 500, 0, 0)).unwrap();
        assert!((cost - 0.0006).abs() < 1e-12, "{cost}");
        assert_eq!(cost_usd("gpt-4o", &Usage::default()), Some(0.0));
    }

    #[test]
    fn sessions_count_tokens_and_requests() {
        let mut session = SessionCost::new("claude-sonnet-4-5");
        session.add_previous(usage(100, 10, 0, 0));
        session.add(usage(1_000, 200, 5_000, 300));
        session.add(usage(2_000, 100, 0, 0));
        assert_eq!(session.usage, usage(3_100, 310, 5_000, 300));
        assert_eq!(session.requests, 2);
        let expected = (3_100.0 * 3.0 + 310.0 * 15.0 + 5_000.0 * 0.3 + 300.0 * 3.75) / 1e6;
        assert!((session.cost_usd().unwrap() - expected).abs() < 1e-12);
    }

    #[test]
    fn the_report_lists_tokens_requests_cost_and_time() {
        let mut session = SessionCost::new("claude-sonnet-4-5");
        session.add(usage(1_234_567, 4_321, 12_000, 999));
        let report = session.report_after(Duration::from_secs(125));
        for expected in [
            "Model:       claude-sonnet-4-5",
            "Input:       1,234,567 tokens",
            "Output:      4,321 tokens",
            "Cache read:  12,000 tokens",
            "Cache write: 999 tokens",
            "Requests:    1",
            "Cost:        $3.7759",
            "Wall time:   2m 05s",
        ] {
            assert!(
                report.contains(expected),
                "missing {expected:?} in:\n{report}"
            );
        }
        assert!(!report.ends_with('\n'));
        assert!(!session.report().is_empty());

        let scripted = SessionCost::new("scripted");
        let report = scripted.report_after(Duration::from_secs(3_723));
        assert!(
            report.contains("Cost:        unknown for model scripted"),
            "{report}"
        );
        assert!(report.contains("Wall time:   1h 02m 03s"), "{report}");
        assert!(report.contains("Input:       0 tokens"), "{report}");
    }

    #[test]
    fn tokens_keep_the_price_of_the_model_that_used_them() {
        let mut session = SessionCost::new("claude-sonnet-4-5");
        session.add(usage(1_000_000, 0, 0, 0));
        let sonnet = session.cost_usd().unwrap();
        session.switch_model("claude-opus-4-1");
        session.add(usage(1_000_000, 0, 0, 0));
        let opus = cost_usd("claude-opus-4-1", &usage(1_000_000, 0, 0, 0)).unwrap();
        assert!((session.cost_usd().unwrap() - (sonnet + opus)).abs() < 1e-9);
        assert_eq!(session.model, "claude-opus-4-1");
        // Tokens of a model without a price make the total unknown.
        session.switch_model("scripted");
        assert_eq!(session.cost_usd(), None);
    }

    #[test]
    fn small_formats() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(123_456_789), "123,456,789");
        assert_eq!(wall_time(Duration::from_millis(45_900)), "45s");
        assert_eq!(wall_time(Duration::from_secs(60)), "1m 00s");
    }
}
