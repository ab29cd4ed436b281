//! `web.search`: the configured search API's results as Markdown.
//!
//! The host passes the provider and endpoint from the user's
//! `[web.search]` config as `CAPSTAN_WEB_SEARCH_PROVIDER` and
//! `CAPSTAN_WEB_SEARCH_ENDPOINT` (or why it cannot be used as
//! `CAPSTAN_WEB_SEARCH_ERROR`), grants exactly that endpoint's origin, and
//! adds the API key header to requests to it: the key never reaches this
//! component.

use capstan_sdk::prelude::*;
use serde_json::Value;

use crate::http::{self, Request, SendError};
use crate::url::{Url, encode_query_value};

/// How many results are asked for.
const COUNT: usize = 10;

const DESCRIPTION: &str = "Searches the web through the search API the user configured and returns the results \
(title, URL, snippet) as Markdown. `allowed_domains` keeps only results from those domains (and their subdomains); \
`blocked_domains` drops results from them. Read a result with web.fetch.";

/// Input of `web.search`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Search {
    /// What to search for.
    query: String,
    /// Only results from these domains (and their subdomains), like
    /// `docs.rs`.
    #[serde(default)]
    allowed_domains: Vec<String>,
    /// No results from these domains (or their subdomains).
    #[serde(default)]
    blocked_domains: Vec<String>,
}

/// The tool.
pub fn tool() -> Tool {
    Tool::new("search", DESCRIPTION, search)
        .read_only()
        .open_world()
}

/// The search APIs capstan speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Provider {
    Brave,
    Tavily,
    Searxng,
}

/// One result.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hit {
    title: String,
    url: String,
    snippet: String,
}

const NOT_CONFIGURED: &str = "web.search is not configured: add a [web.search] section to the user config \
(~/.config/capstan/config.toml) with provider = \"brave\", \"tavily\" or \"searxng\", the endpoint for searxng, \
and key_secret naming the secret that holds the API key (see docs/web.md)";

fn search(input: Search, _ctx: &Context) -> Result<String, ToolError> {
    let query = input.query.trim();
    if query.is_empty() {
        return Err(ToolError::invalid_input("the query is empty"));
    }
    // The host could not set search up (a bad [web.search], a missing key).
    if let Ok(error) = std::env::var("CAPSTAN_WEB_SEARCH_ERROR") {
        return Err(ToolError::failed(error));
    }
    let provider = match std::env::var("CAPSTAN_WEB_SEARCH_PROVIDER").as_deref() {
        Ok("brave") => Provider::Brave,
        Ok("tavily") => Provider::Tavily,
        Ok("searxng") => Provider::Searxng,
        _ => return Err(ToolError::failed(NOT_CONFIGURED)),
    };
    let endpoint = std::env::var("CAPSTAN_WEB_SEARCH_ENDPOINT")
        .map_err(|_| ToolError::failed(NOT_CONFIGURED))?;
    let endpoint = Url::parse(&endpoint).map_err(|why| {
        ToolError::failed(format!("the [web.search] endpoint is not usable: {why}"))
    })?;
    let allowed = domains(&input.allowed_domains);
    let blocked = domains(&input.blocked_domains);
    let (url, body) = request_for(provider, &endpoint, query, &allowed, &blocked)?;
    let headers: &[(&str, &str)] = match body {
        Some(_) => &[
            ("accept", "application/json"),
            ("content-type", "application/json"),
        ],
        None => &[("accept", "application/json")],
    };
    let request = Request {
        method: if body.is_some() { "POST" } else { "GET" },
        url: &url,
        headers,
        body: body.as_deref(),
    };
    let response = http::send(&request).map_err(|error| match error {
        SendError::Refused(_) => {
            ToolError::denied("the search request was refused by the sandbox".to_string())
        }
        SendError::Failed(why) => {
            ToolError::failed(format!("the search API at {} failed: {why}", url.origin()))
        }
    })?;
    if response.status >= 400 {
        let hint = match response.status {
            401 | 403 => " (is the API key right? Set it as the secret key_secret names)",
            429 => " (the API's rate limit; wait, or check the plan)",
            _ => "",
        };
        return Err(ToolError::failed(format!(
            "the search API at {} answered HTTP {}{hint}",
            url.origin(),
            response.status
        )));
    }
    let json: Value = serde_json::from_slice(&response.body).map_err(|e| {
        ToolError::failed(format!(
            "the search API at {} did not answer with JSON: {e}",
            url.origin()
        ))
    })?;
    let hits: Vec<Hit> = parse_hits(provider, &json)
        .into_iter()
        .filter(|hit| keep(hit, &allowed, &blocked))
        .take(COUNT)
        .collect();
    Ok(render(query, &hits))
}

/// Domains lowercased, without a scheme, `*.` or a trailing dot.
fn domains(list: &[String]) -> Vec<String> {
    list.iter()
        .map(|d| {
            let d = d.trim().to_ascii_lowercase();
            let d = d.split_once("://").map_or(d.as_str(), |(_, rest)| rest);
            let d = d.split('/').next().unwrap_or_default();
            d.trim_start_matches("*.").trim_end_matches('.').to_string()
        })
        .filter(|d| !d.is_empty())
        .collect()
}

/// The request for `query` to `provider` at `endpoint`: the URL and, for a
/// POST, its JSON body.
fn request_for(
    provider: Provider,
    endpoint: &Url,
    query: &str,
    allowed: &[String],
    blocked: &[String],
) -> Result<(Url, Option<Vec<u8>>), ToolError> {
    let join = |suffix: String| {
        endpoint
            .join(&suffix)
            .map_err(|why| ToolError::failed(format!("the [web.search] endpoint: {why}")))
    };
    let path = endpoint.path_and_query.split('?').next().unwrap_or("/");
    match provider {
        Provider::Brave => {
            // Brave has no domain parameters: its `site:` operator narrows
            // to one allowed domain; the rest is filtered here.
            let q = match allowed {
                [one] => format!("{query} site:{one}"),
                _ => query.to_string(),
            };
            let url = join(format!("{path}?q={}&count={COUNT}", encode_query_value(&q)))?;
            Ok((url, None))
        }
        Provider::Searxng => {
            let path = if path.ends_with("/search") {
                path.to_string()
            } else {
                format!("{}/search", path.trim_end_matches('/'))
            };
            let url = join(format!(
                "{path}?q={}&format=json",
                encode_query_value(query)
            ))?;
            Ok((url, None))
        }
        Provider::Tavily => {
            let mut body = serde_json::json!({ "query": query, "max_results": COUNT });
            if !allowed.is_empty() {
                body["include_domains"] = serde_json::json!(allowed);
            }
            if !blocked.is_empty() {
                body["exclude_domains"] = serde_json::json!(blocked);
            }
            let bytes = serde_json::to_vec(&body)
                .map_err(|e| ToolError::failed(format!("building the request: {e}")))?;
            Ok((endpoint.clone(), Some(bytes)))
        }
    }
}

/// The results in a provider's answer.
fn parse_hits(provider: Provider, json: &Value) -> Vec<Hit> {
    let (list, snippet_field) = match provider {
        Provider::Brave => (json.pointer("/web/results"), "description"),
        Provider::Tavily | Provider::Searxng => (json.get("results"), "content"),
    };
    let text = |v: &Value, key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .map(|s| strip_tags(s).trim().to_string())
            .unwrap_or_default()
    };
    list.and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|item| Hit {
                    title: text(item, "title"),
                    url: item
                        .get("url")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    snippet: text(item, snippet_field),
                })
                .filter(|hit| !hit.url.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Brave marks matches with `<strong>`; snippets are shown as text.
fn strip_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
}

/// Whether a result passes the domain filters.
fn keep(hit: &Hit, allowed: &[String], blocked: &[String]) -> bool {
    let Ok(url) = Url::parse(&hit.url) else {
        return false;
    };
    let host = url.host.trim_end_matches('.');
    let within = |domain: &String| host == domain || host.ends_with(&format!(".{domain}"));
    (allowed.is_empty() || allowed.iter().any(within)) && !blocked.iter().any(within)
}

fn render(query: &str, hits: &[Hit]) -> String {
    if hits.is_empty() {
        return format!("No results for \"{query}\".");
    }
    let mut out = format!("Search results for \"{query}\":\n");
    for (i, hit) in hits.iter().enumerate() {
        let title = if hit.title.is_empty() {
            hit.url.as_str()
        } else {
            hit.title.as_str()
        };
        out.push_str(&format!(
            "\n{}. [{}]({})\n",
            i + 1,
            title.replace(['[', ']'], ""),
            hit.url.replace(' ', "%20").replace(')', "%29")
        ));
        if !hit.snippet.is_empty() {
            out.push_str(&format!("   {}\n", hit.snippet.replace('\n', " ")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_provider_gets_its_request_and_its_answer_read() {
        let brave = Url::parse("https://api.search.brave.com/res/v1/web/search").unwrap();
        let (url, body) = request_for(
            Provider::Brave,
            &brave,
            "wasm tools",
            &["docs.rs".into()],
            &[],
        )
        .unwrap();
        assert_eq!(
            url.to_string(),
            "https://api.search.brave.com/res/v1/web/search?q=wasm+tools+site%3Adocs.rs&count=10"
        );
        assert!(body.is_none());
        let searx = Url::parse("http://127.0.0.1:8888").unwrap();
        let (url, _) = request_for(Provider::Searxng, &searx, "a&b", &[], &[]).unwrap();
        assert_eq!(
            url.to_string(),
            "http://127.0.0.1:8888/search?q=a%26b&format=json"
        );
        let tavily = Url::parse("https://api.tavily.com/search").unwrap();
        let (_, body) =
            request_for(Provider::Tavily, &tavily, "q", &[], &["spam.com".into()]).unwrap();
        let body: Value = serde_json::from_slice(&body.unwrap()).unwrap();
        assert_eq!(body["exclude_domains"][0], "spam.com");

        let answer = serde_json::json!({"web": {"results": [
            {"title": "Rust <strong>WASM</strong>", "url": "https://docs.rs/x", "description": "A &amp; B"},
            {"title": "Spam", "url": "https://ads.spam.com/y", "description": "buy"},
        ]}});
        let hits = parse_hits(Provider::Brave, &answer);
        assert_eq!(hits[0].title, "Rust WASM");
        assert_eq!(hits[0].snippet, "A & B");
        let kept: Vec<&Hit> = hits
            .iter()
            .filter(|h| keep(h, &[], &domains(&["spam.com".into()])))
            .collect();
        assert_eq!(kept.len(), 1);
        let text = render("rust", &hits[..1]);
        assert_eq!(
            text,
            "Search results for \"rust\":\n\n1. [Rust WASM](https://docs.rs/x)\n   A & B\n"
        );
    }

    #[test]
    fn domain_filters_match_subdomains_only_at_a_dot() {
        let hit = |url: &str| Hit {
            title: String::new(),
            url: url.into(),
            snippet: String::new(),
        };
        let allowed = domains(&["https://Rust-Lang.org/".into()]);
        assert!(keep(&hit("https://doc.rust-lang.org/std"), &allowed, &[]));
        assert!(keep(&hit("https://rust-lang.org"), &allowed, &[]));
        assert!(!keep(&hit("https://evilrust-lang.org"), &allowed, &[]));
    }
}
