"""Linux process isolation primitives shared by the process sandbox and the GPU runner."""

from __future__ import annotations

import ctypes
import os

SANDBOX_UID = 65532
RUNNER_UID_BASE = 65100
RUNNER_UIDS = 16  # per device: 65100-65115 for the CPU device, 65116 + 16N ... for cuda:N
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38

_libc = ctypes.CDLL(None, use_errno=True)


class IsolationError(RuntimeError):
    """Isolation that was asked for could not be set up; never continue with less."""


def runner_uid(device: str, slot: int = 0) -> int:
    """The uid a device's runners drop to: `RUNNER_UIDS` per device, so that no two runners alive at once
    (the evaluations in flight and the spares started ahead) share one and none can signal or trace
    another; none shared with the compile sandbox (65532). RLIMIT_NPROC counts every process and thread
    of a uid on the host, so runners of eight GPUs and the compile containers under one uid would share
    one budget of 512 (seen as "libgomp: Thread creation failed" when two stacks ran on one machine).
    The CPU device's runners take the first block."""
    if not 0 <= slot < RUNNER_UIDS:
        raise ValueError(f"runner uid slot must be in 0..{RUNNER_UIDS - 1}, not {slot}")
    if not device.startswith("cuda"):
        return RUNNER_UID_BASE + slot
    _, _, index = device.partition(":")
    return RUNNER_UID_BASE + RUNNER_UIDS * (1 + (int(index) if index else 0)) + slot


def unshare_network() -> None:
    """A new network namespace with no interfaces but a down loopback: nothing is reachable."""
    if _libc.unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise IsolationError(f"unshare(CLONE_NEWNET) failed: {os.strerror(err)}")


def die_with_parent(sig: int = 9) -> None:
    _libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)


def drop_privileges(uid: int = SANDBOX_UID) -> None:
    """No supplementary groups, an unprivileged uid/gid, and no way to regain privileges."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise IsolationError("prctl(PR_SET_NO_NEW_PRIVS) failed")
    if os.geteuid() != uid:
        raise IsolationError("could not drop privileges")


CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
SYS_MOUNT_SETATTR = 442
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 0x1, 0x2


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    args = [s.encode() if s is not None else None for s in (source, target, fstype)]
    if _libc.mount(args[0], args[1], args[2], flags, data.encode() if data else None) != 0:
        err = ctypes.get_errno()
        raise IsolationError(f"mount {source} on {target} failed: {os.strerror(err)}")


def _read_only_everywhere() -> None:
    """Every mount read-only and nosuid, except /proc (see below); recursive mount_setattr, else remount each
    mount in turn.

    /proc stays writable: the NVIDIA driver (570+) names its threads through /proc/self/task/<tid>/comm inside
    cuInit and fails with error 304 when it cannot. What a process may write there is checked per file by the
    kernel against its own (unprivileged) credentials, as for any process.
    """
    attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    res = _libc.syscall(SYS_MOUNT_SETATTR, -100, b"/", AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr))
    if res == 0:
        rw = _MountAttr(0, MOUNT_ATTR_RDONLY, 0, 0)
        if _libc.syscall(SYS_MOUNT_SETATTR, -100, b"/proc", 0, ctypes.byref(rw), ctypes.sizeof(rw)):
            raise IsolationError(f"could not keep /proc writable: {os.strerror(ctypes.get_errno())}")
        return
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    for point in points:
        if point != "/proc":
            _libc.mount(None, point.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, None)


def private_filesystem_view(workdir: str, cover: str) -> str:
    """A mount namespace where every mount is read-only, `cover` (the data directory: artifacts, other jobs'
    scratch) is an empty tmpfs, and `workdir` is the one writable place, seen at `<cover>/work`.

    The workdir is reached through an O_PATH descriptor, since covering its parent hides its path.
    """
    if _libc.unshare(CLONE_NEWNS) != 0:
        raise IsolationError(f"unshare(CLONE_NEWNS) failed: {os.strerror(ctypes.get_errno())}")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _read_only_everywhere()
    handle = os.open(workdir, os.O_PATH | os.O_DIRECTORY)
    try:
        _mount("tmpfs", cover, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
        target = os.path.join(cover, "work")
        os.mkdir(target, 0o755)
        _mount(f"/proc/self/fd/{handle}", target, None, MS_BIND)
        # A bind mount inherits the read-only flag of the mount it came from: make this one writable.
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV)
    finally:
        os.close(handle)
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,mode=1777")
    return target
