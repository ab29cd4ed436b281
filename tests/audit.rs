//! The audit log end to end: file opens recorded by the sandbox as real
//! plugins run, and `capstan audit show` / `capstan audit verify` on logs
//! that are empty, intact, or damaged in each way the chain detects.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::PathBuf;

use capstan::grants::Grants;
use capstan::plugin::Catalog;
use capstan::policy::audit::{self, AuditEvent, AuditFilter, AuditLog};
use capstan::sandbox::{CallOptions, Sandbox};
use support::{fixture, shared_compile_cache};

// ------------------------------------------------------- file opens

struct Host {
    sandbox: Sandbox,
    catalog: Catalog,
    ws: tempfile::TempDir,
    logs: tempfile::TempDir,
}

impl Host {
    fn new() -> Self {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("a.txt"), "alpha\nbeta\n").unwrap();
        Self {
            sandbox: Sandbox::new(shared_compile_cache().join("compiled")).unwrap(),
            catalog: Catalog::builtin(),
            ws,
            logs: tempfile::tempdir().unwrap(),
        }
    }

    fn log_path(&self) -> PathBuf {
        self.logs.path().join("audit.jsonl")
    }

    /// Calls `plugin.tool` with the workspace granted (`writable` or not)
    /// and the audit log set; returns whether the call succeeded and the
    /// file opens it recorded as (path, mode, allowed).
    async fn call(
        &self,
        plugin: &str,
        tool: &str,
        input: &str,
        writable: bool,
    ) -> (bool, Vec<(String, String, bool)>) {
        let component = self.catalog.load(&self.sandbox, plugin).unwrap();
        let log = AuditLog::open(&self.log_path()).unwrap();
        let options = CallOptions {
            grants: Grants::workspace(self.ws.path(), writable).unwrap(),
            audit: Some(log),
            session_id: Some("session-1".into()),
            ..CallOptions::default()
        };
        let ok = self
            .sandbox
            .call_tool(&component, tool, input, &options)
            .await
            .is_ok();
        let opens = audit::read(&self.log_path(), &AuditFilter::default())
            .unwrap()
            .into_iter()
            .filter(|record| record.plugin == plugin)
            .filter_map(|record| match record.event {
                AuditEvent::FileOpened {
                    path,
                    mode,
                    allowed,
                } => Some((path, mode, allowed)),
                _ => None,
            })
            .collect();
        std::fs::remove_file(self.log_path()).unwrap();
        (ok, opens)
    }
}

#[tokio::test]
async fn a_file_read_is_recorded_with_its_mode() {
    let host = Host::new();
    let (ok, opens) = host.call("fs", "read", r#"{"path":"a.txt"}"#, false).await;
    assert!(ok);
    assert!(
        opens.contains(&("a.txt".into(), "read".into(), true)),
        "{opens:?}"
    );
    assert!(opens.iter().all(|(_, _, allowed)| *allowed), "{opens:?}");
}

#[tokio::test]
async fn a_write_under_a_read_only_grant_is_recorded_as_refused() {
    let host = Host::new();
    let (ok, opens) = host
        .call("fs", "write", r#"{"path":"new.txt","content":"x"}"#, false)
        .await;
    assert!(!ok);
    assert!(!host.ws.path().join("new.txt").exists());
    let refused: Vec<_> = opens.iter().filter(|(_, _, allowed)| !allowed).collect();
    assert!(
        refused
            .iter()
            .any(|(path, mode, _)| path.contains("new.txt") && mode.contains("write")),
        "{opens:?}"
    );

    // Control: with a writable grant the same write is recorded as allowed.
    let (ok, opens) = host
        .call("fs", "write", r#"{"path":"new.txt","content":"x"}"#, true)
        .await;
    assert!(ok);
    assert!(
        opens
            .iter()
            .any(|(path, mode, allowed)| path.contains("new.txt")
                && mode.contains("write")
                && *allowed),
        "{opens:?}"
    );
}

#[tokio::test]
async fn a_path_leading_outside_is_recorded_as_refused() {
    let mut host = Host::new();
    host.catalog
        .add_file(fixture("misbehave").to_str().unwrap())
        .unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "TOP SECRET").unwrap();
    let ws = host.ws.path().canonicalize().unwrap();
    let name = outside.path().file_name().unwrap().to_str().unwrap();
    let dotdot = format!("{}/../{name}/secret.txt", ws.display());
    let (ok, opens) = host
        .call(
            "misbehave",
            "raw-read",
            &format!(r#"{{"path":"{dotdot}"}}"#),
            false,
        )
        .await;
    assert!(!ok);
    assert!(
        opens.iter().any(
            |(path, mode, allowed)| path == &format!("../{name}/secret.txt")
                && mode == "read"
                && !allowed
        ),
        "{opens:?}"
    );
}
