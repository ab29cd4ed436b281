//! Claude Code http hooks (`"type": "http"`): the event's JSON is posted
//! to the hook's URL and the response decides.
//!
//! The URL's origin is the hook's only network grant, shown when it is
//! installed or trusted; the request goes through the checks of
//! [`crate::grants::net`] (the address a name resolves to must be public,
//! unless the URL names that address), follows no redirect and runs within
//! the hook's timeout. A header value may name a secret as `$NAME` or
//! `${NAME}` when the hook lists `NAME` in `allowedEnvVars`; its value comes
//! from the user's environment variable or the `[secrets]` table of the
//! user config, and goes to that origin only. A name the hook does not list
//! becomes an empty string, as in Claude Code. Values are never logged.
//!
//! The response is read as Claude Code reads it: a 2xx with an empty body
//! has no opinion; a 2xx whose body is a JSON object is read as a command
//! hook's standard output (`decision`, `hookSpecificOutput`, `continue`,
//! `systemMessage`...). Another status, another body, a refused or failed
//! connection and running out of time are failures: on a blocking event
//! the action is denied (hooks fail closed).

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::command::{Action, CommandSpec, from_stdout};
use super::{Hook, HookEvent, HookFailure, HookOutput, Subscription};
use crate::grants::SecretValues;
use crate::grants::net::{NetGrant, NetPolicy, Origin, RequestHost};

/// The largest response body read.
const MAX_BODY: usize = 1 << 20;

/// The origin of `url` (`http://host:port`), or why it cannot be used.
pub fn origin_of(url: &str) -> Result<Origin, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| "it must start with http:// or https://".to_string())?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() {
        return Err("it names no host".to_string());
    }
    Origin::parse(scheme, authority)
}

/// Whether header value `value` names secret `name` (`$NAME`, `${NAME}`).
pub fn mentions(value: &str, name: &str) -> bool {
    references(value).iter().any(|r| r == name)
}

/// The variable names `value` refers to, in order.
fn references(value: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        let braced = rest.starts_with('{');
        let body = if braced { &rest[1..] } else { rest };
        let name: String = body
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() && (!braced || body[name.len()..].starts_with('}')) {
            names.push(name);
        }
    }
    names
}

/// `value` with each `$NAME` and `${NAME}` replaced by `lookup(NAME)` when
/// `NAME` is in `allowed`, by nothing otherwise.
fn fill(value: &str, allowed: &[String], lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let braced = after.starts_with('{');
        let body = if braced { &after[1..] } else { after };
        let name: String = body
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let closed = !braced || body[name.len()..].starts_with('}');
        if name.is_empty() || !closed {
            out.push('$');
            rest = after;
            continue;
        }
        if allowed.contains(&name) {
            out.push_str(&lookup(&name).unwrap_or_default());
        }
        rest = &body[name.len() + usize::from(braced)..];
    }
    out.push_str(rest);
    out
}

/// An http hook, ready to post.
pub struct HttpHook {
    name: String,
    subscriptions: Vec<Subscription>,
    url: String,
    origin: Result<Origin, String>,
    headers: Vec<(String, String)>,
    secrets: Vec<String>,
    timeout: Duration,
    values: SecretValues,
}

impl HttpHook {
    /// The http hook `spec` named `name`; `values` holds the user's
    /// `[secrets]`, looked up after the environment.
    pub fn new(name: String, spec: &CommandSpec, values: SecretValues) -> Self {
        let (url, headers, secrets) = match &spec.action {
            Action::Http {
                url,
                headers,
                secrets,
            } => (url.clone(), headers.clone(), secrets.clone()),
            _ => (String::new(), Vec::new(), Vec::new()),
        };
        Self {
            name,
            subscriptions: vec![Subscription {
                event: spec.event,
                matcher: spec.matcher.clone(),
            }],
            origin: origin_of(&url),
            url,
            headers,
            secrets,
            timeout: spec.timeout,
            values,
        }
    }

    /// The value of secret `name`: the environment variable, else the
    /// user config's `[secrets]`.
    fn secret(&self, name: &str) -> Option<String> {
        if crate::grants::env::reserved_reason(name, &[]).is_some() {
            return None;
        }
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty())
            .or_else(|| self.values.value(name).map(str::to_string))
    }

    /// Resolves the origin's host and returns an address the grant of
    /// exactly that origin allows.
    async fn address(&self, origin: &Origin) -> Result<SocketAddr, String> {
        let policy = NetPolicy::new(vec![NetGrant::exactly(origin)]);
        policy.check(origin)?;
        let candidates: Vec<SocketAddr> = match &origin.host {
            RequestHost::Ip(ip) => vec![SocketAddr::new(*ip, origin.port)],
            RequestHost::Name(name) => tokio::net::lookup_host((name.as_str(), origin.port))
                .await
                .map_err(|e| format!("cannot resolve {name}: {e}"))?
                .collect(),
        };
        let mut refusal = format!("{} resolves to no address", origin.host);
        for addr in candidates {
            match policy.check_address(origin, addr.ip()) {
                Ok(()) => return Ok(addr),
                Err(why) => refusal = why,
            }
        }
        Err(refusal)
    }

    async fn post(&self, event: HookEvent, payload: &Value) -> Result<HookOutput, HookFailure> {
        let origin = self
            .origin
            .as_ref()
            .map_err(|why| HookFailure::Failed(format!("its url cannot be used: {why}")))?;
        let addr = self
            .address(origin)
            .await
            .map_err(|why| HookFailure::Failed(format!("the request was refused: {why}")))?;
        let mut client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(self.timeout)
            .no_proxy();
        if let RequestHost::Name(name) = &origin.host {
            client = client.resolve(name, addr);
        }
        let client = client
            .build()
            .map_err(|e| HookFailure::Failed(format!("cannot make an HTTP client: {e}")))?;
        let mut request = client
            .post(&self.url)
            .header("content-type", "application/json")
            .body(payload.to_string());
        for (name, value) in &self.headers {
            request = request.header(
                name.as_str(),
                fill(value, &self.secrets, &|n| self.secret(n)),
            );
        }
        let response = request.send().await.map_err(|e| {
            if e.is_timeout() {
                HookFailure::TimedOut(u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX))
            } else {
                // Without the URL's query, which may carry a token.
                HookFailure::Failed(format!(
                    "the request to {origin} failed: {}",
                    e.without_url()
                ))
            }
        })?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| {
            HookFailure::Failed(format!(
                "the response from {origin} could not be read: {}",
                e.without_url()
            ))
        })?;
        if body.len() > MAX_BODY {
            return Err(HookFailure::Failed(format!(
                "the response from {origin} is larger than 1 MiB"
            )));
        }
        let text = String::from_utf8_lossy(&body);
        let shown: String = text.trim().chars().take(200).collect();
        if !status.is_success() {
            return Err(HookFailure::Failed(format!(
                "{origin} answered {status}{}",
                if shown.is_empty() {
                    String::new()
                } else {
                    format!(": {}", crate::escape::line(&shown))
                }
            )));
        }
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Ok(HookOutput {
                decision: super::Decision::Proceed,
                system_message: None,
            });
        }
        if !matches!(serde_json::from_str::<Value>(trimmed), Ok(Value::Object(_))) {
            return Err(HookFailure::Failed(format!(
                "{origin} answered with a body that is not a JSON object: {}",
                crate::escape::line(&shown)
            )));
        }
        Ok(from_stdout(event, trimmed))
    }
}

impl Hook for HttpHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn subscriptions(&self) -> &[Subscription] {
        &self.subscriptions
    }

    fn handle<'a>(
        &'a self,
        event: HookEvent,
        payload: &'a Value,
    ) -> BoxFuture<'a, Result<HookOutput, HookFailure>> {
        Box::pin(self.post(event, payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_come_from_the_url() {
        assert_eq!(
            origin_of("http://127.0.0.1:8080/hook?x=1")
                .unwrap()
                .to_string(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            origin_of("https://Hooks.Example.com/a")
                .unwrap()
                .to_string(),
            "https://hooks.example.com"
        );
        assert!(origin_of("ftp://example.com").is_err());
        assert!(origin_of("example.com/hook").is_err());
        assert!(origin_of("https://user:pw@example.com/").is_err());
    }

    #[test]
    fn headers_fill_only_allowed_secrets() {
        let allowed = vec!["TOKEN".to_string()];
        let lookup = |n: &str| (n == "TOKEN" || n == "OTHER").then(|| format!("v-{n}"));
        assert_eq!(fill("Bearer $TOKEN", &allowed, &lookup), "Bearer v-TOKEN");
        assert_eq!(fill("${TOKEN}x", &allowed, &lookup), "v-TOKENx");
        assert_eq!(fill("a $OTHER b", &allowed, &lookup), "a  b");
        assert_eq!(fill("cost $5 and $", &allowed, &lookup), "cost  and $");
        assert_eq!(fill("${TOKEN", &allowed, &lookup), "${TOKEN");
        assert!(mentions("Bearer ${TOKEN}", "TOKEN"));
        assert!(!mentions("Bearer TOKEN", "TOKEN"));
    }
}
