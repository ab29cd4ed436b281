//! Per-host permission for `web.fetch`: the question names the page's
//! origin ("web.fetch wants https://docs.rs"), an answer is remembered for
//! that host (`web.fetch(domain:docs.rs)`), and every request of a running
//! call — the page, then each redirect hop — goes out only when the policy
//! allows `web.fetch` for its host at that moment (checked by the call's
//! [`NetGate`], before the name is resolved or anything is sent).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{Decision, DecisionSource, Outcome, Policy, Rule, ToolFacts};
use crate::grants::net::{NetGate, Origin};

/// The tool whose permission is per host.
pub const FETCH_TOOL: &str = "web.fetch";

/// The host a `web.fetch` call asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostScope {
    /// The origin the request goes to: `https://docs.rs` (http is
    /// upgraded to https, as the tool does, unless the host is this
    /// machine).
    pub origin: Origin,
    /// The host as a `domain:` rule names it.
    pub host: String,
}

impl HostScope {
    /// The rule that stands for this host: `web.fetch(domain:docs.rs)`.
    pub fn rule(&self) -> Option<Rule> {
        format!("{FETCH_TOOL}(domain:{})", self.host).parse().ok()
    }

    /// The permission question: `web.fetch wants https://docs.rs`.
    pub fn question(&self) -> String {
        format!("{FETCH_TOOL} wants {}", self.origin)
    }
}

/// For a run that cannot ask (`-p`): a question about `scope` becomes a
/// refusal naming the rule that allows the host; other decisions are
/// unchanged.
pub fn without_prompt(decision: Decision, scope: &HostScope) -> Decision {
    if decision.outcome != Outcome::Ask {
        return decision;
    }
    let rule = scope
        .rule()
        .map_or_else(|| FETCH_TOOL.to_string(), |rule| rule.to_string());
    Decision {
        outcome: Outcome::Deny,
        source: DecisionSource::NonInteractive,
        reason: format!(
            "{} — but this run cannot ask, so nothing was fetched. To allow the host, pass `--allow '{rule}'` (Claude Code's `WebFetch(domain:{host})` works too; `domain:*.example.com` covers subdomains), or add the rule to `allow` under [permissions] in the config",
            decision.reason,
            host = scope.host
        ),
    }
}

/// The host a call of `tool` with `input` asks for, when `tool` is one
/// whose permission is per host and its `url` can be read.
pub fn host_scope(tool: &str, input: &Value) -> Option<HostScope> {
    if tool != FETCH_TOOL {
        return None;
    }
    origin_of(input.get("url")?.as_str()?)
}

/// The origin of `url`, upgraded to https unless its host is this machine.
fn origin_of(url: &str) -> Option<HostScope> {
    let (scheme, rest) = url.trim().split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let mut origin = Origin::parse(scheme, authority).ok()?;
    if origin.scheme == crate::grants::net::Scheme::Http && !is_this_machine(&origin) {
        if origin.port == 80 {
            origin.port = 443;
        }
        origin.scheme = crate::grants::net::Scheme::Https;
    }
    let host = super::rule::url_host(url)?;
    Some(HostScope { origin, host })
}

fn is_this_machine(origin: &Origin) -> bool {
    match &origin.host {
        crate::grants::net::RequestHost::Ip(ip) => ip.is_loopback(),
        crate::grants::net::RequestHost::Name(name) => {
            name == "localhost" || name.ends_with(".localhost")
        }
    }
}

/// Whether `policy` lets `web.fetch` reach `origin` without asking: a
/// matching allow rule, a session answer, or a mode that allows it. A
/// question cannot be put in the middle of a call, so one that would ask
/// is refused with how to allow it.
pub fn allows(policy: &Policy, workspace: &Path, origin: &Origin) -> Result<(), String> {
    let input = json!({ "url": format!("{origin}/") });
    let decision = policy.decide(&ToolFacts {
        tool: FETCH_TOOL,
        read_only: true,
        destructive: false,
        open_world: true,
        input: &input,
        workspace,
        capabilities: None,
    });
    match decision.outcome {
        Outcome::Allow => Ok(()),
        Outcome::Deny => Err(decision.reason),
        Outcome::Ask => Err(format!(
            "{FETCH_TOOL} has not been allowed to reach {origin}; fetching a URL there asks the user (or add the rule `{}`)",
            super::rule::url_host(&format!("{origin}/"))
                .map(|host| format!("{FETCH_TOOL}(domain:{host})"))
                .unwrap_or_else(|| FETCH_TOOL.to_string())
        )),
    }
}

/// The gate of one `web.fetch` call with `input`: the origin of its URL,
/// which the call was authorized for, goes; any other (a redirect hop)
/// only when `policy` — the session's, as it is when the call starts —
/// allows it. Without a session (`capstan tool call`) only the URL's own
/// origin goes.
pub fn fetch_gate(policy: Option<Policy>, workspace: PathBuf, input: &Value) -> NetGate {
    let first = input
        .get("url")
        .and_then(Value::as_str)
        .and_then(origin_of)
        .map(|scope| scope.origin);
    NetGate::new(move |origin| {
        if first.as_ref() == Some(origin) {
            return Ok(());
        }
        match &policy {
            Some(policy) => allows(policy, &workspace, origin),
            None => Err(format!(
                "{origin} is not the origin of the URL given to {FETCH_TOOL}; call it again with a URL there"
            )),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Layer, Mode, RuleKind};

    fn origin(text: &str) -> Origin {
        let (scheme, authority) = text.split_once("://").unwrap();
        Origin::parse(scheme, authority).unwrap()
    }

    #[test]
    fn the_scope_is_the_upgraded_origin_and_its_host() {
        let scope = host_scope(FETCH_TOOL, &json!({"url": "http://Docs.rs/tokio?x#y"})).unwrap();
        assert_eq!(scope.question(), "web.fetch wants https://docs.rs");
        assert_eq!(
            scope.rule().unwrap().to_string(),
            "web.fetch(domain:docs.rs)"
        );
        let local = host_scope(FETCH_TOOL, &json!({"url": "http://127.0.0.1:8080/a"})).unwrap();
        assert_eq!(local.origin.to_string(), "http://127.0.0.1:8080");
        assert!(host_scope("fs.read", &json!({"url": "https://x.org"})).is_none());
        assert!(host_scope(FETCH_TOOL, &json!({"url": "not a url"})).is_none());
    }

    #[test]
    fn redirect_hops_go_only_where_the_policy_allows() {
        let rule: Rule = "web.fetch(domain:*.rust-lang.org)".parse().unwrap();
        let deny: Rule = "web.fetch(domain:evil.example)".parse().unwrap();
        let policy = Policy::new(
            Mode::Default,
            vec![
                (RuleKind::Allow, rule, Layer::User),
                (RuleKind::Deny, deny, Layer::Session),
            ],
        );
        let gate = fetch_gate(
            Some(policy),
            PathBuf::from("/ws"),
            &json!({"url": "https://docs.rs/x"}),
        );
        assert!(gate.decide(&origin("https://docs.rs")).is_ok());
        assert!(gate.decide(&origin("https://doc.rust-lang.org")).is_ok());
        let asks = gate.decide(&origin("https://other.org")).unwrap_err();
        assert!(asks.contains("web.fetch(domain:other.org)"), "{asks}");
        let denied = gate.decide(&origin("https://evil.example")).unwrap_err();
        assert!(denied.contains("denied"), "{denied}");
        let scope = host_scope(FETCH_TOOL, &json!({"url": "https://docs.rs/x"})).unwrap();
        let asked = Decision {
            outcome: Outcome::Ask,
            source: DecisionSource::Mode(Mode::Default),
            reason: "`web.fetch` reaches the network".to_string(),
        };
        let refused = without_prompt(asked, &scope);
        assert_eq!(refused.outcome, Outcome::Deny);
        assert!(
            refused
                .reason
                .contains("--allow 'web.fetch(domain:docs.rs)'"),
            "{}",
            refused.reason
        );
        assert!(
            !refused.reason.contains("accept-edits"),
            "{}",
            refused.reason
        );
        let alone = fetch_gate(
            None,
            PathBuf::from("/ws"),
            &json!({"url": "https://docs.rs"}),
        );
        assert!(alone.decide(&origin("https://docs.rs")).is_ok());
        assert!(alone.decide(&origin("https://doc.rust-lang.org")).is_err());
    }
}
