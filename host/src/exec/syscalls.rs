//! The seccomp filters of a command: system calls that could reach beyond
//! the command's namespaces and Landlock domain fail with `EPERM`.
//!
//! Refused: tracing and reading other processes' memory (`ptrace`,
//! `process_vm_*`), new namespaces and mounts, kernel modules, `kexec`,
//! BPF, perf events, keyrings, `userfaultfd`, `io_uring` (whose operations
//! would bypass this filter), handle-based opens, and sockets of every
//! family but IP (which stays inside the command's network namespace) and
//! netlink (but `NETLINK_USERSOCK`, with which processes message each
//! other): in particular Unix sockets, so no path- or abstract-named
//! socket outside (a Docker or D-Bus socket) can be reached; pairs
//! (`socketpair`) still work. Terminal input injection (`TIOCSTI`,
//! `TIOCLINUX`) is refused too. A second filter answers `clone3` with
//! `ENOSYS`, so the C library falls back to `clone`, whose namespace flags
//! the first filter can see.
//!
//! Every x32 system call (a number with bit 30, `0x40000000`, set: the
//! x32 ABI's calls on an x86-64 kernel built with it) kills the process:
//! the rules above name the x86-64 numbers only, so an x32 `ptrace` or
//! `mount` would pass them. A process of another architecture (32-bit
//! `int 0x80` calls) is killed too, by the architecture check of each
//! filter.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

/// The bit x32 system call numbers carry (`__X32_SYSCALL_BIT`).
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// The system calls refused outright.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_setns,
    libc::SYS_unshare,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_pidfd_getfd,
];

/// Socket families a command may not create.
const REFUSED_FAMILIES: &[libc::c_int] = &[
    libc::AF_UNIX,
    libc::AF_PACKET,
    libc::AF_VSOCK,
    libc::AF_ALG,
    libc::AF_BLUETOOTH,
    libc::AF_XDP,
    libc::AF_KEY,
    libc::AF_TIPC,
    libc::AF_RDS,
    libc::AF_CAN,
];

/// `clone` flags that make namespaces.
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// Terminal `ioctl`s that inject input into a terminal.
const REFUSED_IOCTLS: &[libc::c_ulong] = &[libc::TIOCSTI, libc::TIOCLINUX];

/// The filters of a command in namespaces, compiled once per process.
pub(super) fn filters() -> Result<Vec<BpfProgram>, String> {
    static FILTERS: OnceLock<Result<Vec<BpfProgram>, String>> = OnceLock::new();
    FILTERS
        .get_or_init(|| compile(false).map_err(|e| e.to_string()))
        .clone()
}

/// The filters of a command run without namespaces, where the network is
/// the host's: every socket is refused but netlink's routing family
/// (`NETLINK_ROUTE`, which reads the interfaces and changes nothing without
/// a capability), so no IP, Unix or other socket reaches anything.
/// Compiled once per process.
pub(super) fn filters_without_network() -> Result<Vec<BpfProgram>, String> {
    static FILTERS: OnceLock<Result<Vec<BpfProgram>, String>> = OnceLock::new();
    FILTERS
        .get_or_init(|| compile(true).map_err(|e| e.to_string()))
        .clone()
}

fn arch() -> Result<TargetArch, seccompiler::Error> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(seccompiler::Error::Backend)
}

fn compile(no_sockets: bool) -> Result<Vec<BpfProgram>, seccompiler::Error> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for call in REFUSED {
        rules.insert(*call, Vec::new());
    }
    let equals = |arg: u8, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
    };
    let mut socket = Vec::new();
    if no_sockets {
        let differs = |arg: u8, value: u64| {
            SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, value)
        };
        socket.push(SeccompRule::new(vec![differs(
            0,
            libc::AF_NETLINK as u64,
        )?])?);
        socket.push(SeccompRule::new(vec![
            equals(0, libc::AF_NETLINK as u64)?,
            differs(2, libc::NETLINK_ROUTE as u64)?,
        ])?);
    } else {
        for family in REFUSED_FAMILIES {
            socket.push(SeccompRule::new(vec![equals(0, *family as u64)?])?);
        }
        // The netlink family unprivileged processes message each other with.
        socket.push(SeccompRule::new(vec![
            equals(0, libc::AF_NETLINK as u64)?,
            equals(2, libc::NETLINK_USERSOCK as u64)?,
        ])?);
    }
    rules.insert(libc::SYS_socket, socket);
    let mut clone = Vec::new();
    for flag in NAMESPACE_FLAGS {
        let flag = *flag as u64;
        clone.push(SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )?])?);
    }
    rules.insert(libc::SYS_clone, clone);
    let mut ioctl = Vec::new();
    for request in REFUSED_IOCTLS {
        ioctl.push(SeccompRule::new(vec![equals(1, *request)?])?);
    }
    rules.insert(libc::SYS_ioctl, ioctl);
    let refuse = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch()?,
    )?;
    let mut clone3 = BTreeMap::new();
    clone3.insert(libc::SYS_clone3, Vec::new());
    let no_clone3 = SeccompFilter::new(
        clone3,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch()?,
    )?;
    let mut refuse: BpfProgram = refuse.try_into()?;
    refuse.splice(0..0, x32_killed());
    Ok(vec![refuse, no_clone3.try_into()?])
}

/// Instructions that kill the process on any system call numbered from
/// [`X32_SYSCALL_BIT`] up to (not including) `0x80000000` — every x32
/// call; the negative numbers (`-1`, which only fails) pass on. Placed
/// before a filter's own instructions: they only read the number, and
/// BPF jumps only forward, so the filter's jumps keep their targets.
fn x32_killed() -> [sock_filter; 4] {
    // BPF_LD | BPF_W | BPF_ABS, BPF_JMP | BPF_JGE | BPF_K, BPF_RET | BPF_K.
    const LOAD_WORD: u16 = 0x20;
    const JUMP_IF_AT_LEAST: u16 = 0x35;
    const RETURN: u16 = 0x06;
    // `seccomp_data.nr`, the first field.
    const NR_OFFSET: u32 = 0;
    let filter = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    [
        filter(LOAD_WORD, 0, 0, NR_OFFSET),
        // Negative (from 0x80000000): on to the filter, past the kill.
        filter(JUMP_IF_AT_LEAST, 2, 0, 0x8000_0000),
        // From the x32 bit: the kill; below it, on to the filter.
        filter(JUMP_IF_AT_LEAST, 0, 1, X32_SYSCALL_BIT),
        filter(RETURN, 0, 0, libc::SECCOMP_RET_KILL_PROCESS),
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_filters_compile() {
        for filters in [filters().unwrap(), filters_without_network().unwrap()] {
            assert_eq!(filters.len(), 2);
            assert!(filters.iter().all(|f| !f.is_empty()));
        }
        assert_ne!(filters().unwrap(), filters_without_network().unwrap());
    }

    #[test]
    fn each_first_filter_starts_by_killing_x32_calls() {
        for filters in [filters().unwrap(), filters_without_network().unwrap()] {
            assert_eq!(filters[0][..4], x32_killed());
        }
    }
}
