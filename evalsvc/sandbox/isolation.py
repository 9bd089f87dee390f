"""Linux process isolation primitives shared by the process sandbox and the GPU runner."""

from __future__ import annotations

import ctypes
import os

SANDBOX_UID = 65532
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38

_libc = ctypes.CDLL(None, use_errno=True)


class IsolationError(RuntimeError):
    """Isolation that was asked for could not be set up; never continue with less."""


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
