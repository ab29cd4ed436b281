//! What this kernel offers the OS sandbox, as `capstan doctor` reports it:
//! the Landlock ABI, seccomp filters, and user and network namespaces,
//! probed the way a command's sandbox would use them.

use super::spawn;

/// The kernel's sandboxing features.
#[derive(Debug, Clone)]
pub struct KernelSupport {
    /// The Landlock ABI version, 0 without Landlock.
    pub landlock_abi: i32,
    /// Whether seccomp filters can be installed.
    pub seccomp_filter: bool,
    /// Whether capstan can make the user and network namespaces a command
    /// runs in, or why not.
    pub namespaces: Result<(), String>,
}

/// Probes the kernel (the namespaces once per process, by a short-lived
/// child, as the first sandboxed command would).
pub fn kernel_support() -> KernelSupport {
    KernelSupport {
        landlock_abi: spawn::landlock_abi(),
        seccomp_filter: seccomp_filter(),
        namespaces: spawn::user_namespaces()
            .map_err(|code| std::io::Error::from_raw_os_error(code).to_string()),
    }
}

/// Whether the kernel has seccomp filter mode: it lists the filter actions
/// it offers (`/proc/sys/kernel/seccomp/actions_avail`).
fn seccomp_filter() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/seccomp/actions_avail")
        .is_ok_and(|actions| actions.split_whitespace().any(|a| a == "errno"))
}
