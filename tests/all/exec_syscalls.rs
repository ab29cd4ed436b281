//! System calls a command makes outside the filter's view (issue 27, item
//! 5): an x32 call (its number with bit 30, `0x40000000`, set) would pass
//! a deny list written in x86-64 numbers on a kernel built with the x32
//! ABI, so every x32 call kills the command, with and without namespaces.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use support::{Env, stderr, stdout};

/// `getpid` through libc's `syscall`, plain and then with the x32 bit;
/// the shell reports how python ended (`128 + signal` when killed).
const SCRIPT: &str = r#"python3 - <<'PY'
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
print("plain getpid", libc.syscall(39) > 0, flush=True)
result = libc.syscall(0x40000000 | 39)
print("x32 getpid " + "returned", result, ctypes.get_errno(), flush=True)
PY
echo "python ended $?"
"#;

#[test]
fn an_x32_system_call_kills_the_command() {
    for namespaces in [true, false] {
        let env = Env::new();
        if !namespaces {
            std::fs::write(
                env.home.path().join("config.toml"),
                "[exec]\nnamespaces = \"off\"\n",
            )
            .unwrap();
        }
        let out = env
            .capstan_std()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .args(["exec", "--", "bash", "-c", SCRIPT])
            .output()
            .unwrap();
        let said = format!("{}{}", stdout(&out), stderr(&out));
        // The plain call works: the program ran up to the x32 call.
        assert!(
            said.contains("plain getpid True"),
            "namespaces {namespaces}: {said}"
        );
        assert!(
            !said.contains("getpid returned"),
            "namespaces {namespaces}: {said}"
        );
        assert!(
            said.contains(&format!("python ended {}", 128 + libc::SIGSYS)),
            "namespaces {namespaces}: not killed by SIGSYS: {said}"
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "namespaces {namespaces}: {said}"
        );
    }
}
