//! The MCP revisions capstan speaks and how one is agreed on.
//!
//! - **2025-06-18** and **2025-11-25** open a session with `initialize`: the
//!   client names the revision it wants; a server that speaks it answers
//!   with the same, otherwise with the latest it speaks, and the client
//!   decides whether to go on.
//! - **2026-07-28** is stateless: there is no handshake, every request
//!   names its revision (and the client's capabilities) in
//!   `params._meta`, and `server/discover` tells a client which revisions
//!   the server speaks. A request naming a revision the server does not
//!   speak is answered with [`code::UNSUPPORTED_PROTOCOL_VERSION`] and the
//!   list it does.

use serde_json::{Value, json};

use super::jsonrpc::RpcError;

/// The stateless revision.
pub const V2026_07_28: &str = "2026-07-28";
/// The latest revision with a handshake.
pub const V2025_11_25: &str = "2025-11-25";
/// The revision before it.
pub const V2025_06_18: &str = "2025-06-18";

/// Every revision spoken, newest first.
pub const SUPPORTED: [&str; 3] = [V2026_07_28, V2025_11_25, V2025_06_18];

/// The revisions a session opens with `initialize`, newest first.
pub const WITH_INITIALIZE: [&str; 2] = [V2025_11_25, V2025_06_18];

/// Where a stateless request names its revision, in `params._meta`.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// Where a stateless request names the client's capabilities.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// Where a stateless result names the server.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// MCP's own error codes (2026-07-28).
pub mod code {
    /// An HTTP routing header disagrees with the request's body.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// The request needs a client capability the client did not declare.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// The request names a revision the server does not speak.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// The revision to answer an `initialize` naming `requested` with.
pub fn negotiate_initialize(requested: Option<&str>) -> &'static str {
    WITH_INITIALIZE
        .into_iter()
        .find(|v| Some(*v) == requested)
        .unwrap_or(WITH_INITIALIZE[0])
}

/// The revision a request names in its `_meta`, if it names one.
pub fn requested_version(params: Option<&Value>) -> Option<&str> {
    params?.get("_meta")?.get(META_PROTOCOL_VERSION)?.as_str()
}

/// The stateless revision a request's `params` name, if it is one spoken
/// here and the request carries the client's capabilities as that revision
/// requires; the error to answer with otherwise.
pub fn stateless_version(params: Option<&Value>) -> Result<&'static str, RpcError> {
    let meta = params.and_then(|p| p.get("_meta"));
    let Some(requested) = meta.and_then(|m| m.get(META_PROTOCOL_VERSION)) else {
        return Err(RpcError::new(
            super::jsonrpc::code::INVALID_PARAMS,
            format!("params._meta must carry \"{META_PROTOCOL_VERSION}\""),
        ));
    };
    let Some(requested) = requested.as_str() else {
        return Err(RpcError::new(
            super::jsonrpc::code::INVALID_PARAMS,
            "the protocol version in params._meta must be a string",
        ));
    };
    if requested != V2026_07_28 {
        return Err(unsupported(requested));
    }
    if meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES)).is_none() {
        return Err(RpcError::new(
            super::jsonrpc::code::INVALID_PARAMS,
            format!(
                "params._meta must carry \"{META_CLIENT_CAPABILITIES}\" with protocol version {V2026_07_28}"
            ),
        ));
    }
    Ok(V2026_07_28)
}

/// The error for a request naming revision `requested`, which is not
/// spoken here.
pub fn unsupported(requested: &str) -> RpcError {
    RpcError::new(
        code::UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "unsupported protocol version `{requested}`; this server speaks {}",
            SUPPORTED.join(", ")
        ),
    )
    .with_data(json!({ "supported": SUPPORTED, "requested": requested }))
}

/// Whether `version` is a revision spoken here (the `MCP-Protocol-Version`
/// header must name one).
pub fn is_supported(version: &str) -> bool {
    SUPPORTED.contains(&version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_echoes_a_spoken_revision_and_offers_the_latest_otherwise() {
        assert_eq!(negotiate_initialize(Some(V2025_06_18)), V2025_06_18);
        assert_eq!(negotiate_initialize(Some(V2025_11_25)), V2025_11_25);
        for other in [
            Some("2024-11-05"),
            Some("2099-01-01"),
            Some(V2026_07_28),
            None,
        ] {
            assert_eq!(negotiate_initialize(other), V2025_11_25, "{other:?}");
        }
    }

    #[test]
    fn a_stateless_request_names_its_revision_in_meta() {
        let meta = |version: &str| json!({ "_meta": { META_PROTOCOL_VERSION: version, META_CLIENT_CAPABILITIES: {} } });
        let params = meta(V2026_07_28);
        assert_eq!(requested_version(Some(&params)), Some(V2026_07_28));
        assert_eq!(requested_version(Some(&json!({}))), None);
        assert_eq!(stateless_version(Some(&params)), Ok(V2026_07_28));
        let err = stateless_version(Some(&meta("2030-01-01"))).unwrap_err();
        assert_eq!(err.code, code::UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(err.data.unwrap()["supported"], json!(SUPPORTED));
        // A handshake revision is not a stateless one.
        assert!(stateless_version(Some(&meta(V2025_11_25))).is_err());
        // The client's capabilities must come with the revision.
        let bare = json!({ "_meta": { META_PROTOCOL_VERSION: V2026_07_28 } });
        assert_eq!(
            stateless_version(Some(&bare)).unwrap_err().code,
            crate::mcp::jsonrpc::code::INVALID_PARAMS
        );
    }
}
