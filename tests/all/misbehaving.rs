//! Plugins that loop, hoard memory, panic, flood their output, or are not
//! components at all. Each must end as a clear, typed error, and the host
//! must carry on serving normal calls in the same process.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::time::Duration;

use capstan::grants::{Grants, OwnFolders};
use capstan::home::Home;
use capstan::plugin::Catalog;
use capstan::sandbox::{CacheOutcome, CallError, CallOptions, Limits, LoadError, Sandbox};
use support::{Env, fixture, shared_home, stderr};

struct Host {
    sandbox: Sandbox,
    catalog: Catalog,
    ws: tempfile::TempDir,
}

impl Host {
    fn new() -> Self {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("a.txt"), "alpha\nbeta\n").unwrap();
        let mut catalog = Catalog::builtin();
        catalog
            .add_file(fixture("misbehave").to_str().unwrap())
            .unwrap();
        Self {
            sandbox: Sandbox::new(&shared_home()).unwrap(),
            catalog,
            ws,
        }
    }

    fn options(&self, limits: Limits) -> CallOptions {
        CallOptions {
            grants: Grants::workspace(self.ws.path(), false, &OwnFolders::default()).unwrap(),
            limits,
            ..CallOptions::default()
        }
    }

    async fn misbehave(&self, tool: &str, input: &str, limits: Limits) -> CallError {
        let plugin = self.catalog.load(&self.sandbox, "misbehave").unwrap();
        match self
            .sandbox
            .call_tool(&plugin, tool, input, &self.options(limits))
            .await
        {
            Ok(out) => panic!("{tool} returned {out:?}"),
            Err(err) => err,
        }
    }

    /// A normal call: fs.read of a small file must still work.
    async fn assert_still_serving(&self) {
        let fs = self.catalog.load(&self.sandbox, "fs").unwrap();
        let out = self
            .sandbox
            .call_tool(
                &fs,
                "read",
                r#"{"path":"a.txt"}"#,
                &self.options(Limits::default()),
            )
            .await
            .unwrap();
        assert!(out.to_text().contains("beta"), "{}", out.to_text());
    }
}

#[tokio::test]
async fn an_endless_loop_is_stopped_at_the_deadline() {
    let host = Host::new();
    let limits = Limits {
        timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let started = std::time::Instant::now();
    let err = host.misbehave("spin", "{}", limits).await;
    assert!(matches!(err, CallError::Timeout { .. }), "{err:?}");
    assert!(err.is_crash());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the deadline did not stop the loop"
    );
    host.assert_still_serving().await;
}

#[tokio::test]
async fn a_plugin_waiting_in_the_host_is_stopped_at_the_deadline() {
    let host = Host::new();
    let limits = Limits {
        timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let started = std::time::Instant::now();
    let err = host.misbehave("sleep", r#"{"bytes":3600}"#, limits).await;
    assert!(matches!(err, CallError::Timeout { .. }), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the deadline did not stop the sleeper"
    );
    host.assert_still_serving().await;
}

#[tokio::test]
async fn a_memory_bomb_is_stopped_at_the_cap() {
    let host = Host::new();
    let limits = Limits {
        memory: 32 << 20,
        ..Limits::default()
    };
    let err = host.misbehave("bomb", "{}", limits).await;
    match &err {
        CallError::MemoryLimit { limit, .. } => assert_eq!(*limit, 32 << 20),
        other => panic!("expected a memory limit, got {other:?}"),
    }
    assert!(err.to_string().contains("32 MiB"));
    host.assert_still_serving().await;
}

#[tokio::test]
async fn a_panic_becomes_an_error_with_its_message() {
    let host = Host::new();
    let err = host
        .misbehave("panic", r#"{"message":"kaboom 42"}"#, Limits::default())
        .await;
    match &err {
        CallError::Crashed { reason, stderr, .. } => {
            assert_eq!(reason, "it panicked");
            assert!(stderr.contains("kaboom 42"), "{stderr}");
        }
        other => panic!("expected a crash, got {other:?}"),
    }
    assert!(err.to_string().contains("kaboom 42"));
    host.assert_still_serving().await;
}

#[tokio::test]
async fn a_flood_of_output_is_capped() {
    let host = Host::new();
    let limits = Limits {
        output: 1000,
        ..Limits::default()
    };
    let err = host.misbehave("flood", r#"{"bytes":5000}"#, limits).await;
    assert!(
        matches!(
            err,
            CallError::OutputTooLarge {
                size: 5000,
                limit: 1000,
                ..
            }
        ),
        "{err:?}"
    );
    host.assert_still_serving().await;
}

#[tokio::test]
async fn many_calls_at_once_each_get_their_own_instance() {
    let host = Host::new();
    let fs = host.catalog.load(&host.sandbox, "fs").unwrap();
    let options = host.options(Limits::default());
    let calls = (0..24).map(|_| {
        host.sandbox
            .call_tool(&fs, "read", r#"{"path":"a.txt"}"#, &options)
    });
    for result in futures::future::join_all(calls).await {
        assert!(result.unwrap().to_text().contains("alpha"));
    }
}

#[test]
fn broken_component_files_are_refused_clearly() {
    let env = Env::new();
    let component = std::fs::read(fixture("misbehave")).unwrap();
    let cases: [(&str, Vec<u8>, &str); 4] = [
        (
            "text.wasm",
            b"this is not wasm at all".to_vec(),
            "is not a WebAssembly file",
        ),
        (
            "core.wasm",
            b"\0asm\x01\0\0\0".to_vec(),
            "is a core WebAssembly module",
        ),
        (
            "truncated.wasm",
            component[..component.len() / 2].to_vec(),
            "is not a valid WebAssembly component",
        ),
        ("empty.wasm", Vec::new(), "is not a WebAssembly file"),
    ];
    for (name, bytes, expected) in cases {
        let path = env.write(name, &bytes);
        let out = env
            .call(
                &format!("{}.anything", name.trim_end_matches(".wasm")),
                "{}",
                &[&format!("--plugin={}", path.display())],
            )
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
        assert!(stderr(&out).contains(expected), "{name}: {}", stderr(&out));
        assert!(
            !stderr(&out).contains("panicked"),
            "{name}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn a_component_that_is_not_a_tool_plugin_is_refused() {
    let env = Env::new();
    // A valid component with no exports at all.
    let path = env.write("hollow.wasm", b"\0asm\x0d\0\x01\0");
    let out = env
        .call("hollow.x", "{}", &[&format!("--plugin={}", path.display())])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("does not export the tool interface"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_damaged_compile_cache_entry_is_recompiled() {
    let cache = tempfile::tempdir().unwrap();
    let wasm = std::fs::read(fixture("misbehave")).unwrap();
    let sandbox = Sandbox::new(&Home::at(
        cache.path().to_path_buf(),
        cache.path().to_path_buf(),
    ))
    .unwrap();
    let first = sandbox.load("misbehave", &wasm, None, "fixture").unwrap();
    assert_eq!(first.cache_outcome(), CacheOutcome::Compiled);
    let again = sandbox.load("misbehave", &wasm, None, "fixture").unwrap();
    assert_eq!(again.cache_outcome(), CacheOutcome::Hit);
    // (It maps the entry, which is about to be changed in place, as only
    // another process of the user could: let it go first.)
    drop(again);

    let entry = sandbox.compile_cache().entry_path(first.sha256());
    let mut bytes = std::fs::read(&entry).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();
    let repaired = sandbox.load("misbehave", &wasm, None, "fixture").unwrap();
    assert_eq!(repaired.cache_outcome(), CacheOutcome::Compiled);
    let healed = sandbox.load("misbehave", &wasm, None, "fixture").unwrap();
    assert_eq!(healed.cache_outcome(), CacheOutcome::Hit);
    drop(healed);

    // Nor can one cut short (its seal binds its size).
    let bytes = std::fs::read(&entry).unwrap();
    std::fs::write(&entry, &bytes[..bytes.len() - 32]).unwrap();
    let unsigned = sandbox.load("misbehave", &wasm, None, "fixture").unwrap();
    assert_eq!(unsigned.cache_outcome(), CacheOutcome::Compiled);

    std::fs::write(&entry, b"short").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let component = sandbox.load("misbehave", &wasm, None, "fixture").unwrap();
    assert_eq!(component.cache_outcome(), CacheOutcome::Compiled);
    let specs = rt.block_on(sandbox.describe(&component)).unwrap();
    assert!(specs.iter().any(|s| s.name == "spin"));
}

#[test]
fn load_errors_name_their_kind() {
    let sandbox = Sandbox::new(&Home::at(
        tempfile::tempdir().unwrap().path().to_path_buf(),
        tempfile::tempdir().unwrap().path().to_path_buf(),
    ))
    .unwrap();
    assert!(matches!(
        sandbox.load("x", b"nope", None, "x.wasm"),
        Err(LoadError::NotWasm { .. })
    ));
    assert!(matches!(
        sandbox.load("x", b"\0asm\x01\0\0\0", None, "x.wasm"),
        Err(LoadError::CoreModule { .. })
    ));
}

#[test]
fn misbehaviour_through_the_cli_exits_with_code_6() {
    let env = Env::new();
    let plugin = format!("--plugin={}", fixture("misbehave").display());
    let cases: [(&str, &str, &[&str], &str); 4] = [
        ("misbehave.spin", "{}", &["--timeout=300ms"], "time limit"),
        (
            "misbehave.bomb",
            "{}",
            &["--memory=32MiB"],
            "32 MiB of memory",
        ),
        ("misbehave.panic", r#"{"message":"oh no"}"#, &[], "oh no"),
        (
            "misbehave.flood",
            r#"{"bytes":2000000}"#,
            &[],
            "more than the 1 MiB allowed",
        ),
    ];
    for (tool, input, extra, expected) in cases {
        let out = env.call(tool, input, extra).arg(&plugin).output().unwrap();
        assert_eq!(out.status.code(), Some(6), "{tool}: {}", stderr(&out));
        assert!(stderr(&out).contains(expected), "{tool}: {}", stderr(&out));
    }
}

#[test]
fn plugin_warnings_reach_the_user() {
    let env = Env::new();
    env.call("misbehave.chatty", r#"{"message":"careful now"}"#, &[])
        .arg(format!("--plugin={}", fixture("misbehave").display()))
        .assert()
        .success()
        .stdout("done\n")
        .stderr(predicates::str::contains(
            "[misbehave] warning: careful now",
        ));
}
