//! What a failed command seems to have lacked, read from how it failed, so
//! the model (or the user) can ask for exactly that capability.
//!
//! This is a hint, never a permission decision: the sandbox has already
//! decided. A read-only workspace is mounted read-only, so a write into it
//! fails with "Read-only file system" (`EROFS`), which nothing else in the
//! sandbox produces; a write anywhere else fails with "Permission denied"
//! and is not something a call can be granted. Without network, a name
//! lookup fails; with some, the proxy's refusals name the origin.

use std::fmt;

use super::ProxyRefusal;

/// A capability a command lacked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissingCapability {
    /// It tried to write the workspace in a read-only run.
    WriteWorkspace,
    /// It tried to write a protected path (`.git`, ...) in a writable run.
    WriteProtected,
    /// It tried to reach the network: the origin the proxy refused, if one.
    Network(Option<String>),
}

impl fmt::Display for MissingCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MissingCapability::WriteWorkspace => write!(f, "write the workspace (--allow-write)"),
            MissingCapability::WriteProtected => write!(
                f,
                "write a protected path such as .git (kept read-only for commands even with --allow-write; see docs/exec.md)"
            ),
            MissingCapability::Network(Some(origin)) => {
                write!(f, "reach {origin} (--allow-net {origin})")
            }
            MissingCapability::Network(None) => {
                write!(
                    f,
                    "the network (--allow-net ORIGIN, e.g. https://example.com)"
                )
            }
        }
    }
}

/// Messages of a failed name lookup or connection without a network.
const NO_NETWORK: &[&str] = &[
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "getaddrinfo",
    "nodename nor servname",
    "No address associated with hostname",
];

/// What a command that ended with `exit_code` lacked, judging by its
/// `output` and the proxy's `refusals`; `write` and `net` say what it had.
pub(super) fn missing(
    exit_code: i32,
    write: bool,
    net: bool,
    output: &str,
    refusals: &[ProxyRefusal],
) -> Vec<MissingCapability> {
    let mut needs = Vec::new();
    if exit_code == 0 {
        return needs;
    }
    if output.contains("Read-only file system") {
        needs.push(if write {
            MissingCapability::WriteProtected
        } else {
            MissingCapability::WriteWorkspace
        });
    }
    for refusal in refusals {
        let need = MissingCapability::Network(Some(refusal.target.clone()));
        if !needs.contains(&need) {
            needs.push(need);
        }
    }
    if !net && refusals.is_empty() && NO_NETWORK.iter().any(|m| output.contains(m)) {
        needs.push(MissingCapability::Network(None));
    }
    needs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_only_write_names_the_workspace() {
        let out = "touch: cannot touch 'x': Read-only file system\n";
        assert_eq!(
            missing(1, false, false, out, &[]),
            [MissingCapability::WriteWorkspace]
        );
        assert_eq!(
            missing(1, true, false, out, &[]),
            [MissingCapability::WriteProtected]
        );
        assert!(missing(0, false, false, out, &[]).is_empty());
    }

    #[test]
    fn network_needs_name_the_refused_origin() {
        let refusals = [ProxyRefusal {
            target: "https://example.com".into(),
            reason: "not granted".into(),
        }];
        let needs = missing(1, false, true, "", &refusals);
        assert_eq!(
            needs[0].to_string(),
            "reach https://example.com (--allow-net https://example.com)"
        );
        let needs = missing(6, false, false, "curl: (6) Could not resolve host: x", &[]);
        assert_eq!(needs, [MissingCapability::Network(None)]);
    }
}
