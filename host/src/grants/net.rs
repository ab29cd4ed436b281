//! Network grants: which hosts a plugin may send HTTP requests to.
//!
//! Written `scheme://host[:port]`, with `*.suffix` wildcards and the
//! scheme's default port. Enforced on every outgoing `wasi:http` request;
//! `wasi:sockets` is always denied.

/// One granted origin pattern, such as `https://api.github.com` or
/// `https://*.githubusercontent.com`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct NetGrant(String);

/// Whether a host pattern (`api.github.com`, `*.github.com`) matches `host`.
/// Names compare case-insensitively; `*.x` matches any name ending in `.x`
/// but not `x` itself.
pub fn host_matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.trim_end_matches('.').to_ascii_lowercase();
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
        None => pattern == host,
    }
}
