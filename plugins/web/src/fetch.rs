//! `web.fetch`: one page, as Markdown.

use capstan_sdk::prelude::*;

use crate::http::{self, Request, SendError};
use crate::page;
use crate::url::Url;

/// How many redirects are followed.
const MAX_REDIRECTS: usize = 10;

const DESCRIPTION: &str = "Fetches a web page (or a text, Markdown or JSON file) by URL and returns it as Markdown: \
HTML is converted (headings, links, lists, code, tables), scripts, styles and navigation are dropped, and long pages \
are cut with a marker. http URLs are upgraded to https. With `prompt`, the sections most relevant to it come first. \
The first request to a host the user has not allowed asks them; a redirect to another host that is not allowed is \
reported with its target instead of followed: fetch that URL in a new call. Binary files (images, PDFs, archives) \
are refused.";

/// Input of `web.fetch`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Fetch {
    /// The absolute URL to fetch (http or https; http is upgraded to https).
    url: String,
    /// What you want to know from the page: its most relevant sections are
    /// put first, under the prompt.
    #[serde(default)]
    prompt: Option<String>,
}

/// The tool.
pub fn tool() -> Tool {
    Tool::new("fetch", DESCRIPTION, fetch)
        .read_only()
        .open_world()
}

fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

fn fetch(input: Fetch, _ctx: &Context) -> Result<String, ToolError> {
    let mut url = Url::parse(&input.url).map_err(ToolError::invalid_input)?;
    let upgraded = url.upgrade();
    let mut notes = Vec::new();
    if upgraded {
        notes.push(format!("http was upgraded to https: {url}"));
    }
    let first = url.clone();
    let mut redirects = 0;
    loop {
        let request = Request {
            method: "GET",
            url: &url,
            headers: &[
                (
                    "user-agent",
                    "capstan-web-fetch/0.1 (+https://github.com/capstan-dev/capstan)",
                ),
                (
                    "accept",
                    "text/markdown, text/html;q=0.9, text/plain;q=0.8, application/json;q=0.8, */*;q=0.5",
                ),
            ],
            body: None,
        };
        let response = match http::send(&request) {
            Ok(response) => response,
            Err(error) => return Err(send_error(error, &first, &url, redirects)),
        };
        if is_redirect(response.status) {
            let Some(location) = response.header("location") else {
                return Err(ToolError::failed(format!(
                    "{url} answered {} (a redirect) without saying where to",
                    response.status
                )));
            };
            let mut next = url.join(location).map_err(|why| {
                ToolError::failed(format!(
                    "{url} redirected to a URL that cannot be read: {why}"
                ))
            })?;
            next.upgrade();
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                return Err(ToolError::failed(format!(
                    "{first} redirected more than {MAX_REDIRECTS} times; the last target was {next}"
                )));
            }
            notes.push(format!(
                "redirected ({}) from {url} to {next}",
                response.status
            ));
            url = next;
            continue;
        }
        if response.status >= 400 {
            let detail = page::kind(response.header("content-type"), &response.body)
                .ok()
                .map(|kind| {
                    let text = page::decode(response.header("content-type"), &response.body, kind);
                    let shown = page::render(&url, &text, kind, None);
                    let body: String = shown.lines().skip(1).collect::<Vec<_>>().join("\n");
                    page::cap(body.trim(), 1000)
                })
                .filter(|t| !t.is_empty())
                .map(|t| format!("; the page says:\n{t}"))
                .unwrap_or_default();
            return Err(ToolError::failed(format!(
                "{url} answered HTTP {}{detail}",
                response.status
            )));
        }
        let content_type = response.header("content-type");
        let kind = page::kind(content_type, &response.body).map_err(|why| {
            ToolError::failed(format!(
                "{url} was not shown: {why} ({} bytes)",
                response.body.len()
            ))
        })?;
        let text = page::decode(content_type, &response.body, kind);
        let mut out = page::render(&url, &text, kind, input.prompt.as_deref());
        if response.cut {
            notes.push(format!(
                "the response was longer than {} MiB; only its start was read",
                http::MAX_BODY >> 20
            ));
        }
        if !notes.is_empty() {
            let lines: Vec<String> = notes.iter().map(|n| format!("Note: {n}")).collect();
            out = format!("{}\n{out}", lines.join("\n"));
        }
        return Ok(out);
    }
}

/// The error for a request that got no response. A refused first request
/// does not name its host, so the host's own reason (appended to the
/// error) is shown with it.
fn send_error(error: SendError, first: &Url, url: &Url, redirects: usize) -> ToolError {
    match error {
        SendError::Refused(code) if redirects > 0 => {
            let why = if code.contains("DestinationIpProhibited") {
                format!(
                    "its host {} resolves to an address web.fetch may not reach (private, loopback, link-local or metadata)",
                    url.host
                )
            } else {
                format!(
                    "the user has not allowed web.fetch to reach {}",
                    url.origin()
                )
            };
            ToolError::denied(format!(
                "{first} redirected to {url}, which this call may not reach: {why}. The redirect was not followed; to read that page, call web.fetch with url {url} (the user may be asked to allow its host)."
            ))
        }
        SendError::Refused(_) => ToolError::denied(
            "the request was refused by the sandbox, so nothing was sent".to_string(),
        ),
        SendError::Failed(why) => ToolError::failed(format!("fetching {url} failed: {why}")),
    }
}
