//! What a failed command seems to have lacked, read from how it failed, so
//! the model (or the user) can ask for exactly that capability.
//!
//! This is a hint, never a permission decision: the sandbox has already
//! decided. A read-only workspace is mounted read-only, so a write into it
//! fails with "Read-only file system" (`EROFS`), which nothing else in the
//! sandbox produces; a write anywhere else fails with "Permission denied"
//! and is not something a call can be granted. For the network the signal
//! comes from the sandbox itself: every command's proxy variables point at
//! the host's proxy, granted origins or none, so a tool that honours them
//! (curl, git, pip, cargo, npm, Python's urllib) asks the proxy, whose
//! refusal names the origin however quietly the tool fails (`curl -s`). A
//! tool that ignores them finds no network, and its failed name lookup is
//! read from its errors.

use std::fmt;

use super::ProxyRefusal;
use crate::grants::net::{NetGrant, NetPolicy, Origin};

/// A capability a command lacked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissingCapability {
    /// It tried to write the workspace in a read-only run.
    WriteWorkspace,
    /// It tried to write a protected path (`.git`, ...) in a writable run.
    WriteProtected,
    /// It tried to reach the network: the origin the proxy refused, if one.
    Network(Option<String>),
    /// It used git in a workspace that is a `git worktree`, whose
    /// repository (the folder its `.git` file names) lies outside it.
    OutsideRepository(String),
}

impl fmt::Display for MissingCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MissingCapability::WriteWorkspace => write!(f, "write the workspace (--allow-write)"),
            MissingCapability::WriteProtected => write!(
                f,
                "write a protected path such as .git (kept read-only for commands even with --allow-write; see docs/exec.md)"
            ),
            MissingCapability::Network(Some(origin)) => write!(
                f,
                "the network to reach {origin} (--allow-net {origin}, or \"net\": [\"{origin}\"])"
            ),
            MissingCapability::Network(None) => write!(
                f,
                "the network (--allow-net ORIGIN, or \"net\": [ORIGIN], e.g. https://example.com)"
            ),
            MissingCapability::OutsideRepository(gitdir) => write!(
                f,
                "the git repository of this git worktree, {gitdir}, which lies outside the workspace: commands can neither read nor write it, so git fails here (commit from a terminal of your own, or run capstan in the main repository)"
            ),
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

/// What a command that ended with `exit_code` lacked, judging by the
/// proxy's `refusals` (whatever the exit code: a refusal is the sandbox's
/// own record, and a tool may swallow the error) and, when it failed, by
/// its `output`; `write` and `net` say what it had.
#[cfg(test)]
fn missing(
    exit_code: i32,
    write: bool,
    net: &[NetGrant],
    output: &str,
    refusals: &[ProxyRefusal],
) -> Vec<MissingCapability> {
    missing_in(exit_code, write, net, output, refusals, None)
}

/// [`missing`], for a workspace that is a `git worktree` whose repository
/// folder `outside_gitdir` lies outside it: git failing there (its error
/// names that folder, or says there is no repository) is named too.
pub(super) fn missing_in(
    exit_code: i32,
    write: bool,
    net: &[NetGrant],
    output: &str,
    refusals: &[ProxyRefusal],
    outside_gitdir: Option<&str>,
) -> Vec<MissingCapability> {
    let mut needs = Vec::new();
    if let Some(gitdir) = outside_gitdir
        && exit_code != 0
        && (output.contains(gitdir) || output.contains("not a git repository"))
    {
        needs.push(MissingCapability::OutsideRepository(gitdir.to_string()));
    }
    if exit_code != 0 && output.contains("Read-only file system") {
        needs.push(if write {
            MissingCapability::WriteProtected
        } else {
            MissingCapability::WriteWorkspace
        });
    }
    // Only an origin the command was not granted is something to ask for:
    // a granted one refused for its address (loopback, private, metadata)
    // or a request that was no proxy request at all is not.
    let granted = NetPolicy::new(net.to_vec());
    let grantable = refusals.iter().filter(|refusal| {
        refusal
            .target
            .split_once("://")
            .and_then(|(scheme, authority)| Origin::parse(scheme, authority).ok())
            .is_some_and(|origin| granted.check(&origin).is_err())
    });
    for refusal in grantable {
        let need = MissingCapability::Network(Some(refusal.target.clone()));
        if !needs.contains(&need) {
            needs.push(need);
        }
    }
    if exit_code != 0
        && net.is_empty()
        && refusals.is_empty()
        && NO_NETWORK.iter().any(|m| output.contains(m))
    {
        needs.push(MissingCapability::Network(None));
    }
    needs
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_read_only_write_names_the_workspace() {
        let out = "touch: cannot touch 'x': Read-only file system\n";
        assert_eq!(
            missing(1, false, &[], out, &[]),
            [MissingCapability::WriteWorkspace]
        );
        assert_eq!(
            missing(1, true, &[], out, &[]),
            [MissingCapability::WriteProtected]
        );
        assert!(missing(0, false, &[], out, &[]).is_empty());
    }

    #[test]
    fn network_needs_name_the_refused_origin() {
        let refusals = [ProxyRefusal {
            target: "https://example.com".into(),
            reason: "not granted".into(),
        }];
        let needs = missing(1, false, &[], "", &refusals);
        assert_eq!(
            needs[0].to_string(),
            "the network to reach https://example.com (--allow-net https://example.com, or \"net\": [\"https://example.com\"])"
        );
        // A tool that swallowed the refusal and exited 0 still gets it.
        assert_eq!(missing(0, false, &[], "", &refusals), needs);
        // A request that named no origin is not something to grant, nor is
        // a granted origin refused for its address.
        let odd = [ProxyRefusal {
            target: "GET /index.html".into(),
            reason: "not a proxy request".into(),
        }];
        assert!(missing(1, false, &[], "", &odd).is_empty());
        let granted = [NetGrant::parse("https://example.com").unwrap()];
        assert!(missing(1, false, &granted, "", &refusals).is_empty());
        let needs = missing(6, false, &[], "curl: (6) Could not resolve host: x", &[]);
        assert_eq!(needs, [MissingCapability::Network(None)]);
    }

    #[test]
    fn git_failing_in_a_worktree_names_the_repository_outside() {
        let out = "fatal: not a git repository: /r/.git/worktrees/w\n";
        let needs = missing_in(128, true, &[], out, &[], Some("/r/.git/worktrees/w"));
        assert_eq!(
            needs,
            [MissingCapability::OutsideRepository(
                "/r/.git/worktrees/w".into()
            )]
        );
        assert!(needs[0].to_string().contains("git worktree"));
        assert!(missing_in(0, true, &[], out, &[], Some("/r")).is_empty());
        assert!(missing_in(1, true, &[], "error", &[], Some("/r")).is_empty());
    }
}
