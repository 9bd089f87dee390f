"""A seccomp filter for the runner: the kernel refuses it every system call that makes a process, runs a
program, reaches another process, changes its namespaces or opens a socket, whatever code asks (Python, or
native code that found `syscall` by walking memory). Refused calls fail with an errno (EPERM), not a kill,
so the candidate sees a clean OSError and the judge reports a runtime_error.

A classic BPF program over `struct seccomp_data`, built here with ctypes (Debian's python3-seccomp is not
importable from the service's own Python, and libseccomp would add a native dependency for ~60 BPF
instructions). The filter checks the architecture first (x86_64, or aarch64) and kills the process for any
other ABI (i386 through int 0x80, x32, AArch32): their system call numbers mean other calls. Every call not
named in `RULES` is allowed; Linux 5.11 and later cache that per call number, so an allowed call (the CUDA
driver's ioctls, a timed kernel's) costs no BPF run.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from dataclasses import dataclass, field

from evalsvc.sandbox.isolation import PR_SET_NO_NEW_PRIVS, IsolationError

SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1  # every thread of the process, the CUDA driver's included
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000

# Classic BPF opcodes (linux/filter.h, linux/bpf_common.h).
BPF_LD_W_ABS = 0x00 | 0x00 | 0x20
BPF_JEQ_K = 0x05 | 0x10 | 0x00
BPF_JGE_K = 0x05 | 0x30 | 0x00
BPF_JSET_K = 0x05 | 0x40 | 0x00
BPF_RET_K = 0x06 | 0x00
BPF_MAXINSNS = 4096

# Offsets in struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian).
NR_OFFSET = 0
ARCH_OFFSET = 4
ARG0_LOW_OFFSET = 16  # the low 32 bits of the first argument: all that the kernel reads of a pid or flags

CLONE_THREAD = 0x00010000
# Namespace flags of clone(2): a thread never needs one, and refusing them costs one instruction.
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

THREAD = "thread"  # allowed when clone's flags make a thread of this process
SELF = "self"  # allowed when the first argument is this process's pid
SELF_OR_GROUP = "self_or_group"  # ... or 0, its own process group
NO_NAMESPACE = "no_namespace"  # clone with no namespace flag: a thread or a child process


@dataclass(frozen=True)
class Rule:
    """One refused system call: `refuse_with` is the errno the caller gets; `unless` names the case that
    passes."""

    syscall: str
    reason: str
    refuse_with: int = errno.EPERM
    unless: str | None = None


RULES: tuple[Rule, ...] = (
    Rule("fork", "a new process outlives the runner's process-group kill and slows the next timing"),
    Rule("vfork", "a new process, as fork"),
    Rule("clone", "a new process unless a thread (OpenMP, torch's pools, the CUDA driver)", unless=THREAD),
    Rule("clone3", "flags in memory the filter cannot read; ENOSYS makes glibc use clone", errno.ENOSYS),
    Rule("execve", "running another program"),
    Rule("execveat", "running another program"),
    Rule("ptrace", "tracing or steering another process (or being traced by one)"),
    Rule("process_vm_readv", "reading another process's memory"),
    Rule("process_vm_writev", "writing another process's memory"),
    Rule("process_madvise", "acting on another process's memory"),
    Rule("pidfd_getfd", "taking another process's descriptors"),
    Rule("kcmp", "probing another process's descriptors and memory"),
    Rule("kill", "signals to another process; 0 is its own group, itself alone", unless=SELF_OR_GROUP),
    Rule("tkill", "a thread id the filter cannot tell from another process's; glibc uses tgkill"),
    Rule("tgkill", "signals to another process's threads (raise, pthread_kill pass)", unless=SELF),
    Rule("rt_sigqueueinfo", "signals to another process", unless=SELF),
    Rule("rt_tgsigqueueinfo", "signals to another process's threads", unless=SELF),
    Rule("pidfd_send_signal", "a pidfd names a process the filter cannot see"),
    Rule("setsid", "a session of its own: out of the process group the launcher kills"),
    Rule("setpgid", "another process group: out of the one the launcher kills"),
    Rule("unshare", "new namespaces: a view or a network of its own making"),
    Rule("setns", "entering another namespace"),
    Rule("mount", "changing the file system view"),
    Rule("umount2", "uncovering what the view covers"),
    Rule("pivot_root", "changing the file system root"),
    Rule("chroot", "changing the file system root"),
    Rule("open_tree", "the new mount API: changing the view"),
    Rule("move_mount", "the new mount API: changing the view"),
    Rule("fsopen", "the new mount API: changing the view"),
    Rule("fsconfig", "the new mount API: changing the view"),
    Rule("fsmount", "the new mount API: changing the view"),
    Rule("fspick", "the new mount API: changing the view"),
    Rule("mount_setattr", "making the view's read-only mounts writable"),
    Rule("socket", "any new socket: the judge's pipe is inherited; torch and CUDA open none after start"),
    Rule("bpf", "kernel programs and maps"),
    Rule("perf_event_open", "hardware counters and kernel tracing: a side channel on other work"),
    Rule("userfaultfd", "stalling the kernel at will (a race-widening tool)"),
    Rule("io_uring_setup", "system calls the filter never sees (io_uring runs them in kernel threads)"),
    Rule("io_uring_enter", "io_uring: as io_uring_setup"),
    Rule("io_uring_register", "io_uring: as io_uring_setup"),
    Rule("keyctl", "the kernel keyrings, shared by the uid"),
    Rule("add_key", "the kernel keyrings, shared by the uid"),
    Rule("request_key", "the kernel keyrings, and it can run a helper program"),
    Rule("personality", "changes how the kernel treats the process (READ_IMPLIES_EXEC, no ASLR)"),
    Rule("kexec_load", "another kernel"),
    Rule("kexec_file_load", "another kernel"),
    Rule("init_module", "kernel modules"),
    Rule("finit_module", "kernel modules"),
    Rule("delete_module", "kernel modules"),
    Rule("reboot", "the machine"),
    Rule("acct", "process accounting"),
    Rule("swapon", "the machine's swap"),
    Rule("swapoff", "the machine's swap"),
)  # seccomp itself stays allowed: a filter added later only refuses more

# The reference side (a task's own code, in a process of its own uid): torch.compile runs a C++ compiler
# (CPU) or ptxas (Triton), so it may make processes and run programs, and signal them (no other live
# process has its uid). Everything else of the runner's list stays refused, new namespaces included.
_CHILDREN = {"fork", "vfork", "execve", "execveat", "kill", "tkill", "tgkill", "rt_sigqueueinfo"}
REFERENCE_RULES: tuple[Rule, ...] = tuple(
    Rule("clone", "a thread or a child process, in no new namespace", unless=NO_NAMESPACE)
    if r.syscall == "clone"
    else r
    for r in RULES
    if r.syscall not in _CHILDREN
)


@dataclass(frozen=True)
class Arch:
    """What the filter needs to know of an architecture: how the kernel names it, its call numbers."""

    audit: int  # AUDIT_ARCH_* in seccomp_data.arch
    seccomp: int  # seccomp(2)'s own number
    numbers: dict[str, int] = field(repr=False)
    x32_bit: int | None = None  # x86_64's x32 ABI: the same arch value, numbers with this bit set


# asm/unistd_64.h
X86_64 = Arch(
    audit=0xC000003E,
    seccomp=317,
    x32_bit=0x40000000,
    numbers={
        "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59, "execveat": 322, "ptrace": 101,
        "process_vm_readv": 310, "process_vm_writev": 311, "process_madvise": 440, "pidfd_getfd": 438,
        "kcmp": 312, "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
        "rt_tgsigqueueinfo": 297, "pidfd_send_signal": 424, "setsid": 112, "setpgid": 109, "unshare": 272,
        "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "socket": 41, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 250,
        "add_key": 248, "request_key": 249, "personality": 135, "kexec_load": 246, "kexec_file_load": 320,
        "init_module": 175, "finit_module": 313, "delete_module": 176, "reboot": 169, "acct": 163,
        "swapon": 167, "swapoff": 168,
    },
)  # fmt: skip

# asm-generic/unistd.h: no fork or vfork (glibc forks through clone)
AARCH64 = Arch(
    audit=0xC00000B7,
    seccomp=277,
    numbers={
        "clone": 220, "clone3": 435, "execve": 221, "execveat": 281, "ptrace": 117, "process_vm_readv": 270,
        "process_vm_writev": 271, "process_madvise": 440, "pidfd_getfd": 438, "kcmp": 272, "kill": 129,
        "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
        "pidfd_send_signal": 424, "setsid": 157, "setpgid": 154, "unshare": 97, "setns": 268, "mount": 40,
        "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428, "move_mount": 429, "fsopen": 430,
        "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "socket": 198, "bpf": 280,
        "perf_event_open": 241, "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "keyctl": 219, "add_key": 217, "request_key": 218, "personality": 92,
        "kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273,
        "delete_module": 106, "reboot": 142, "acct": 89, "swapon": 224, "swapoff": 225,
    },
)  # fmt: skip

ARCHES = {"x86_64": X86_64, "aarch64": AARCH64}

Insn = tuple[int, int, int, int]  # code, jump if true, jump if false, constant: one struct sock_filter


def _stmt(code: int, k: int) -> Insn:
    return (code, 0, 0, k)


def _jump(code: int, k: int, jt: int, jf: int) -> Insn:
    return (code, jt, jf, k)


def _refuse(err: int) -> Insn:
    return _stmt(BPF_RET_K, SECCOMP_RET_ERRNO | err)


def _thread_only(err: int) -> list[Insn]:
    """clone: a thread of this process (CLONE_THREAD, no new namespace) passes, anything else is refused."""
    return [
        _stmt(BPF_LD_W_ABS, ARG0_LOW_OFFSET),
        _jump(BPF_JSET_K, CLONE_THREAD, 0, 2),
        _jump(BPF_JSET_K, CLONE_NAMESPACES, 1, 0),
        _stmt(BPF_RET_K, SECCOMP_RET_ALLOW),
        _refuse(err),
    ]


def _no_namespace(err: int) -> list[Insn]:
    """clone: any flags but a new namespace's."""
    return [
        _stmt(BPF_LD_W_ABS, ARG0_LOW_OFFSET),
        _jump(BPF_JSET_K, CLONE_NAMESPACES, 0, 1),
        _refuse(err),
        _stmt(BPF_RET_K, SECCOMP_RET_ALLOW),
    ]


def _first_argument_in(values: list[int], err: int) -> list[Insn]:
    """Allowed when the first argument (a pid, as the kernel reads it: 32 bits) is one of `values`."""
    count = len(values)
    checks = [_jump(BPF_JEQ_K, v & 0xFFFFFFFF, count - i, 0) for i, v in enumerate(values)]
    return [_stmt(BPF_LD_W_ABS, ARG0_LOW_OFFSET), *checks, _refuse(err), _stmt(BPF_RET_K, SECCOMP_RET_ALLOW)]


def _rule_body(rule: Rule, own_pid: int) -> list[Insn]:
    """What runs once the call number matched; every path ends in a return, so the accumulator still holds
    the number for the next rule when the body is jumped over."""
    if rule.unless is None:
        return [_refuse(rule.refuse_with)]
    if rule.unless == THREAD:
        return _thread_only(rule.refuse_with)
    if rule.unless == NO_NAMESPACE:
        return _no_namespace(rule.refuse_with)
    if rule.unless == SELF:
        return _first_argument_in([own_pid], rule.refuse_with)
    if rule.unless == SELF_OR_GROUP:
        return _first_argument_in([own_pid, 0], rule.refuse_with)
    raise ValueError(f"unknown exception {rule.unless!r} for {rule.syscall}")


def build_filter(arch: Arch, own_pid: int, rules: tuple[Rule, ...] = RULES) -> list[Insn]:
    """The program: another ABI is killed, each rule's call gets its body, everything else is allowed."""
    program = [
        _stmt(BPF_LD_W_ABS, ARCH_OFFSET),
        _jump(BPF_JEQ_K, arch.audit, 1, 0),
        _stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
        _stmt(BPF_LD_W_ABS, NR_OFFSET),
    ]
    if arch.x32_bit is not None:
        program += [_jump(BPF_JGE_K, arch.x32_bit, 0, 1), _stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS)]
    for rule in rules:
        number = arch.numbers.get(rule.syscall)
        if number is None:  # the call does not exist on this architecture
            continue
        body = _rule_body(rule, own_pid)
        program += [_jump(BPF_JEQ_K, number, 0, len(body)), *body]
    program.append(_stmt(BPF_RET_K, SECCOMP_RET_ALLOW))
    if len(program) > BPF_MAXINSNS or any(max(jt, jf) > 255 for _, jt, jf, _ in program):
        raise IsolationError("the seccomp program is too long for classic BPF")
    return program


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def install_runner_filter(rules: tuple[Rule, ...] = RULES) -> None:
    """Install the runner's filter (or `rules`) on every thread of this process (TSYNC: the CUDA driver's
    threads exist by now on a GPU), for good: it is inherited by every thread and process made later and
    cannot be removed. Under `RULES` signals are allowed only to this process, whose pid is written into
    the filter: nothing under them can make another process, so the pid stays true."""
    arch = ARCHES.get(platform.machine())
    if arch is None:
        raise IsolationError(f"no seccomp filter for {platform.machine()}")
    program = build_filter(arch, os.getpid(), rules)
    insns = (_SockFilter * len(program))(*(_SockFilter(*insn) for insn in program))
    fprog = _SockFprog(len(program), insns)
    libc = ctypes.CDLL(None, use_errno=True)
    # Needed for an unprivileged filter; drop_privileges set it already where the runner is isolated.
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise IsolationError(f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")
    flags = ctypes.c_ulong(SECCOMP_FILTER_FLAG_TSYNC)
    done = libc.syscall(arch.seccomp, ctypes.c_ulong(SECCOMP_SET_MODE_FILTER), flags, ctypes.byref(fprog))
    if done != 0:  # -1 with errno, or the id of a thread that could not take the filter
        why = os.strerror(ctypes.get_errno()) if done < 0 else f"thread {done} could not take it"
        raise IsolationError(f"seccomp filter not installed: {why}")
