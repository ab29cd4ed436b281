//! Attempts to get out of the sandbox. Each test tries an escape that must
//! fail, and where it helps, a control that shows the same call succeeds
//! when it stays inside its grants (so the test can tell).
//!
//! The `misbehave` fixture's raw tools use the file system directly, with
//! none of the path checks a well-behaved tool makes, so these tests
//! exercise the sandbox itself.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use support::{Env, fixture, stderr, stdout};

fn misbehave() -> String {
    format!("--plugin={}", fixture("misbehave").display())
}

#[test]
fn files_outside_the_workspace_do_not_exist() {
    let env = Env::new();
    let secret = env.write_outside("secret.txt", "TOP SECRET");
    for path in [
        secret.to_str().unwrap().to_string(),
        env.dotdot_outside("secret.txt"),
        "/etc/passwd".to_string(),
        "/proc/self/environ".to_string(),
    ] {
        let out = env
            .call(
                "misbehave.raw-read",
                &format!(r#"{{"path":"{path}"}}"#),
                &[&misbehave()],
            )
            .output()
            .unwrap();
        assert!(!out.status.success(), "{path} was readable");
        assert!(!stdout(&out).contains("TOP SECRET"));
        assert!(!stdout(&out).contains("root:"), "{path}: {}", stdout(&out));
    }
}

#[test]
fn the_root_folder_cannot_be_listed() {
    let env = Env::new();
    let out = env
        .call("misbehave.raw-list", r#"{"path":"/"}"#, &[&misbehave()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    // Control: the workspace itself can be listed.
    env.write("visible.txt", "x");
    let ws = env.ws_path();
    env.call(
        "misbehave.raw-list",
        &format!(r#"{{"path":"{}"}}"#, ws.display()),
        &[&misbehave()],
    )
    .assert()
    .success()
    .stdout(predicates::str::contains("visible.txt"));
}

#[test]
fn a_symlink_cannot_lead_out_for_reading_or_writing() {
    let env = Env::new();
    let secret = env.write_outside("secret.txt", "TOP SECRET");
    let ws = env.ws_path();
    std::os::unix::fs::symlink(&secret, ws.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(env.outside.path(), ws.join("linkdir")).unwrap();

    for path in ["link.txt", "linkdir/secret.txt"] {
        let full = ws.join(path);
        let out = env
            .call(
                "misbehave.raw-read",
                &format!(r#"{{"path":"{}"}}"#, full.display()),
                &[&misbehave()],
            )
            .output()
            .unwrap();
        assert!(!out.status.success(), "read through {path} succeeded");
        assert!(!stdout(&out).contains("TOP SECRET"));

        let out = env
            .call(
                "misbehave.raw-write",
                &format!(r#"{{"path":"{}","content":"pwned"}}"#, full.display()),
                &[&misbehave(), "--allow-write"],
            )
            .output()
            .unwrap();
        assert!(!out.status.success(), "write through {path} succeeded");
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "TOP SECRET");
    assert!(!env.outside.path().join("pwned").exists());

    // Control: a relative link that stays inside the workspace works.
    // (Absolute links are refused even when they point inside: the sandbox
    // resolves every link beneath the granted folder.)
    env.write("real.txt", "inside");
    std::os::unix::fs::symlink("real.txt", ws.join("inner-link.txt")).unwrap();
    env.call(
        "misbehave.raw-read",
        &format!(r#"{{"path":"{}"}}"#, ws.join("inner-link.txt").display()),
        &[&misbehave()],
    )
    .assert()
    .success()
    .stdout("inside\n");
}

#[test]
fn writing_needs_a_writable_grant() {
    let env = Env::new();
    let target = env.ws_path().join("new.txt");
    let input = format!(r#"{{"path":"{}","content":"hello"}}"#, target.display());
    let out = env
        .call("misbehave.raw-write", &input, &[&misbehave()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("denied"));
    assert!(!target.exists());

    // Control: the same write with --allow-write lands.
    env.call(
        "misbehave.raw-write",
        &input,
        &[&misbehave(), "--allow-write"],
    )
    .assert()
    .success();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hello");

    // And an existing file cannot be changed without the grant.
    let out = env
        .call(
            "misbehave.raw-write",
            &format!(r#"{{"path":"{}","content":"changed"}}"#, target.display()),
            &[&misbehave()],
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hello");
}

#[test]
fn the_host_environment_is_invisible() {
    let env = Env::new();
    env.call("misbehave.environment", "{}", &[&misbehave()])
        .env("CAPSTAN_TEST_SECRET", "hunter2")
        .env("ANTHROPIC_API_KEY", "sk-ant-secret")
        .assert()
        .success()
        .stdout("vars=\nargs=0\n");
}

#[test]
fn sockets_are_refused() {
    let env = Env::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let out = env
        .call(
            "misbehave.connect",
            &format!(r#"{{"path":"{addr}"}}"#),
            &[&misbehave(), "--allow-write"],
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        listener.accept().is_err(),
        "the plugin reached the listener"
    );
}
