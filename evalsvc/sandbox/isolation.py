"""Linux process isolation primitives shared by the process sandbox and the GPU runner."""

from __future__ import annotations

import ctypes
import errno
import glob
import os
import platform
import re
import stat
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass, field

SANDBOX_UID = 65532
RUNNER_UID_BASE = 65100
RUNNER_UIDS = 16  # per device: 65100-65115 for the CPU device, 65116 + 16N ... for cuda:N
# The process compile sandbox (above the runner uids of up to 16 devices): a uid of its own for each build in
# flight on a host (65400-65463, held through a lock file), so that whatever the build starts can be found
# and killed by uid when it ends, and each one's killer uid (65464-65527), which no process has but the one
# that kills that build's processes.
COMPILE_UID_BASE = 65400
COMPILE_UIDS = 64
COMPILE_KILLER_UID_BASE = COMPILE_UID_BASE + COMPILE_UIDS
CLONE_NEWNET = 0x40000000
CLONE_NEWIPC = 0x08000000
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


def untrusted_file_tail(path: str | os.PathLike[str], limit: int, owner: int | None = None) -> bytes:
    """The last `limit` bytes of a file an untrusted process could have replaced (its log, in a directory
    it owns), read by a privileged one: never through a link (a runner that swapped its log for a link
    to /proc/self/environ made the judge read its own secrets), only a plain file with one name, owned by
    `owner` when given. b"" for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or (owner is not None and st.st_uid != owner):
            return b""
        os.lseek(fd, max(0, st.st_size - limit), os.SEEK_SET)
        return os.read(fd, limit)
    finally:
        os.close(fd)


def unshare_network() -> None:
    """A new network namespace with no interfaces but a down loopback: nothing is reachable; and a new
    IPC namespace: System V shared memory, semaphores and message queues of its own, gone with its last
    process (a runner's segment outlived it and let runners of other uids talk, red team 2026-12-05)."""
    if _libc.unshare(CLONE_NEWNET | CLONE_NEWIPC) != 0:
        err = ctypes.get_errno()
        raise IsolationError(f"unshare(CLONE_NEWNET | CLONE_NEWIPC) failed: {os.strerror(err)}")


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
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH = 2
AT_FDCWD = -100
SYS_MOUNT_SETATTR = 442  # the same on every architecture (numbers from 424 on are shared)
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}  # glibc has no wrapper for it
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 0x1, 0x2

# The operator's secrets (service credentials, tokens): hidden even where a directory above them is needed.
# Besides our own, where hosts keep service environments and package-index or registry credentials.
SECRET_DIRS = (
    "/etc/evalsvc", "/run/secrets", "/etc/default", "/etc/sysconfig", "/etc/systemd", "/etc/docker",
    "/etc/ssl/private", "/etc/apt/auth.conf.d",
)  # fmt: skip
SECRET_FILE_NAMES = ("/etc/environment", "/etc/pip.conf", "/etc/apt/auth.conf", "/etc/netrc")


def secret_files() -> list[str]:
    """Single files with credentials in places the view must show: /etc's, and pip's configuration in
    each Python prefix (an index URL with a token)."""
    prefixes = dict.fromkeys([sys.prefix, sys.base_prefix, sys.exec_prefix])
    return [
        *SECRET_FILE_NAMES,
        *(os.path.join(p, name) for p in prefixes for name in ("pip.conf", "pip.ini")),
    ]


# Present in the view, empty and read-only: programs expect them; the runner's TMPDIR is its scratch.
EMPTY_DIRS = ("/tmp", "/var/tmp")
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib*", "/etc", "/dev", "/sys")  # /lib* as a glob: lib64, lib32...


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


def runner_view_paths() -> list[str]:
    """Every host path the runner's file system view holds, read-only. Everything else on the host (home
    directories, /root, /work, /srv, /opt, /var, /run, /mnt, /media, the host's /tmp) is absent from the
    view; besides these the view has its own /proc, empty /tmp and /var/tmp, a private /dev/shm and the
    runner's scratch at `<cover>/work`. Be generous here: a path missing from this list fails on a GPU host
    (an import, a dlopen inside cuInit) in ways a CPU test cannot show.

    - SYSTEM_DIRS: the C library, the dynamic linker and its cache (/etc/ld.so.cache), the compilers that
      Triton and inductor call (gcc, /usr/include), CUDA under /usr/local, the device nodes (/dev/nvidia*),
      and the topology that CUDA and NVML read (/sys/bus/pci, /sys/devices/system/node). /etc without
      SECRET_DIRS and `secret_files()`, which `private_filesystem_view` covers.
    - The Python prefixes, the interpreter's directory and sysconfig's paths: the standard library, the
      C headers (Python.h) that Triton's and inductor's helpers are built against, a venv's base Python.
    - The sys.path entries that hold installed libraries (site-packages: torch, triton, setuptools, and
      the NVIDIA pip wheels' libraries, nvidia/*/lib). Not a project directory (the working directory of
      `python -m`, a script's directory): a red team read an operator's env file beside the code there.
    - Where every imported top-level package or module lives: an editable install (evalsvc itself in
      development) is found through a finder, not a sys.path entry, and the runner imports more of it
      after isolation.
    - The directory of every file mapped in the process (/proc/self/maps): libraries torch loaded at import,
      and their neighbours that it dlopens later (cuBLAS, NVRTC's builtins, libcudnn's sub-libraries).
    - CUDA_HOME and CUDA_PATH: nvcc and the CUDA headers and libraries, wherever the operator put them.
    - LD_LIBRARY_PATH: read once by the dynamic linker at start, so later dlopens still search it.
    - The directories /etc/ld.so.conf names: where a GPU host's driver library (libcuda, libnvidia-*) lives
      when it is not in a system directory (/usr/local/nvidia/lib64, /usr/lib64/nvidia), found by cuInit's
      dlopen and by Triton (`ldconfig -p`).
    """
    env = os.environ
    paths = [found for pattern in SYSTEM_DIRS for found in sorted(glob.glob(pattern))]
    paths += [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
    paths += [os.path.dirname(sys.executable), *sysconfig.get_paths().values(), *_library_path_entries()]
    paths += _module_locations() + _mapped_file_dirs()
    paths += [env.get("CUDA_HOME", ""), env.get("CUDA_PATH", "")]
    paths += env.get("LD_LIBRARY_PATH", "").split(":") + _ld_so_conf_dirs("/etc/ld.so.conf")
    return [p for p in dict.fromkeys(paths) if isinstance(p, str) and os.path.isabs(p)]


def _library_path_entries() -> list[str]:
    """The sys.path entries that hold installed libraries (site-packages, the prefixes' own, archives).
    Not a project directory (the working directory of `python -m`, a script's directory, a PYTHONPATH
    checkout): what lies beside the code there (an env file, the operator's notes) is not the runner's,
    and what the runner imports from there is already in `_module_locations`."""
    prefixes = [
        p for p in dict.fromkeys([sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix])
    ]
    return [
        p
        for p in sys.path
        if p.endswith(("site-packages", "dist-packages", ".zip", ".egg"))
        or any(_within(p, prefix) for prefix in prefixes)
    ]


def _module_locations() -> list[str]:
    """The directories of imported top-level packages and the files of imported top-level plain modules
    (a package's submodules live in its directories; walking each of torch's thousands would slow every
    runner's start)."""
    found: list[str] = []
    for name in [name for name in sys.modules if "." not in name]:  # names first: fewer pages touched
        module = sys.modules.get(name)
        try:  # the module's own dict: a lazy module's __getattr__ (torch.ops) would make things up
            namespace = vars(module)
        except TypeError:
            continue
        locations = namespace.get("__path__") or [namespace.get("__file__")]
        try:
            found += [p for p in locations if isinstance(p, str)]
        except TypeError:
            continue
    return found


def _mapped_file_dirs() -> list[str]:
    """The directories of the files mapped into this process (shared libraries, the locale archive)."""
    dirs = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.rstrip("\n").split(maxsplit=5)
            # memfds, deleted files and SysV segments read "/name (deleted)": nothing to see there.
            if len(fields) == 6 and fields[5].startswith("/") and not fields[5].endswith(" (deleted)"):
                dirs.append(os.path.dirname(fields[5]))
    return dirs


def _ld_so_conf_dirs(conf: str, depth: int = 0) -> list[str]:
    """The directories an ld.so.conf names, following its `include` lines (glob patterns, relative to
    the including file's directory) as ldconfig does."""
    try:
        with open(conf) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    dirs: list[str] = []
    for line in lines:
        words = re.split(r"[\s,:]+", line.split("#", 1)[0].strip())
        if words[0] == "include" and depth < 8:
            for pattern in words[1:]:
                for included in sorted(glob.glob(os.path.join(os.path.dirname(conf), pattern))):
                    dirs += _ld_so_conf_dirs(included, depth + 1)
        elif words[0] not in ("", "include", "hwcap"):
            dirs += [word.split("=", 1)[0] for word in words]  # "dir=TYPE" is an old libc5 form
    return dirs


def _within(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


def _walk_links(path: str, known: dict[str, str | None] | None = None) -> tuple[list[tuple[str, str]], str]:
    """The symbolic links met on the way to `path` (where each is, what it says) and the real path, so
    the view can hold the same links (/lib -> usr/lib, a venv's python -> /usr/bin/python3.12). `known`:
    what each path already looked at is (its link's text, or None), shared between calls."""
    known = {} if known is None else known
    links: list[tuple[str, str]] = []
    pending = [part for part in os.path.abspath(path).split("/") if part]
    current = "/"
    while pending:
        part = pending.pop(0)
        if part in (".", ".."):
            current = os.path.dirname(current) if part == ".." else current
            continue
        here = current.rstrip("/") + "/" + part
        if here not in known:
            known[here] = os.readlink(here) if os.path.islink(here) else None
        target = known[here]
        if target is None:
            current = here
            continue
        if len(links) >= 40:
            raise IsolationError(f"too many levels of symbolic links in {path}")
        links.append((here, target))
        pending = [p for p in target.split("/") if p] + pending
        current = "/" if target.startswith("/") else current
    return links, current


@dataclass
class _ViewPlan:
    """What the new root holds: host paths bound read-only (none inside another), the links on the way to
    them, and where the data directory is covered."""

    binds: list[str] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)
    cover: str = "/"

    def bound(self, path: str) -> bool:
        return any(_within(path, b) for b in self.binds)


def _plan_view(paths: list[str], cover: str) -> _ViewPlan:
    known: dict[str, str | None] = {}
    cover_links, cover_real = _walk_links(cover, known)
    links = dict(cover_links)
    reals = set()
    for path in paths:
        met, real = _walk_links(path, known)
        # "/" would be the whole host again; what is under the data directory is covered anyway.
        if real == "/" or _within(real, cover_real) or not os.path.exists(real):
            continue
        links.update(met)
        reals.add(real)
    plan = _ViewPlan(cover=cover_real)
    for real in sorted(reals, key=lambda p: p.split("/")):  # each directory right before what is in it
        if not plan.binds or not _within(real, plan.binds[-1]):
            plan.binds.append(real)
    plan.links = [(where, what) for where, what in sorted(links.items()) if not plan.bound(where)]
    return plan


def _make_dirs(root: str, path: str, plan: _ViewPlan) -> None:
    """`path` inside the new root, each new directory 0755 whatever the umask; never under a bind mount,
    which would create it on the host."""
    if any(_within(path, b) and path != b for b in plan.binds):
        if not os.path.isdir(root + path):
            raise IsolationError(f"{path} would be created on the host")
        return
    current = root
    for part in [p for p in path.split("/") if p]:
        current = os.path.join(current, part)
        if not os.path.isdir(current):
            os.mkdir(current)
            os.chmod(current, 0o755)


def _mountinfo() -> list[tuple[str, str, set[str], set[str]]]:
    """This namespace's mounts in order: mount point, file system type, mount options, super options."""
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            ours, _, theirs = line.rstrip("\n").partition(" - ")
            fields, (fstype, _, super_options) = ours.split(), theirs.split(maxsplit=2)
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            mounts.append((point, fstype, set(fields[5].split(",")), set(super_options.split(","))))
    return mounts


def _proc_covers() -> list[str]:
    """The mounts over parts of /proc: a container runtime masks /proc/kcore, /proc/sys, /proc/sched_debug
    and others, and the NVIDIA container runtime puts a tmpfs over /proc/driver/nvidia that shows only the
    container's GPUs (and tells libcuda not to create device nodes). The runner's own /proc gets the same,
    so it shows no more than the worker's. Not automounts (and nothing under one): those wait on a daemon
    that cannot see this namespace."""
    covers: list[str] = []
    skipped: list[str] = []
    for point, fstype, _, _ in _mountinfo():
        if not point.startswith("/proc/") or point in covers:
            continue
        if fstype == "autofs" or any(_within(point, s) for s in skipped):
            skipped.append(point)
        else:
            covers.append(point)
    return covers


def _mount_own_proc(target: str) -> None:
    """A procfs instance of the runner's own, hidepid=invisible: an unprivileged process sees in it only
    the processes it may ptrace, that is its own (every runner has a uid of its own). Linux 5.8 and later
    give each mount its own options; hidepid=2 is the same setting in the older syntax. The options are
    read back: a kernel that shares one procfs per PID namespace could ignore them."""
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    for option in ("hidepid=invisible", "hidepid=2"):
        if _libc.mount(b"proc", target.encode(), b"proc", flags, option.encode()) == 0:
            break
        err = ctypes.get_errno()
        if err != errno.EINVAL:
            raise IsolationError(f"mount proc on {target} failed: {os.strerror(err)}")
    else:
        raise IsolationError("this kernel refuses hidepid for a new procfs")
    options = next((opts for point, _, _, opts in reversed(_mountinfo()) if point == target), set())
    if not options & {"hidepid=invisible", "hidepid=2"}:
        raise IsolationError(f"the new procfs does not hide other processes (options {sorted(options)})")
    for point in _proc_covers():
        if os.path.lexists(target + point.removeprefix("/proc")):
            _mount(point, target + point.removeprefix("/proc"), None, MS_BIND)


def _read_only_below(root: str) -> None:
    """Every mount at and under `root` read-only and nosuid, except `<root>/proc`: the NVIDIA driver (570+)
    names its threads through /proc/self/task/<tid>/comm inside cuInit and fails with error 304 when it
    cannot. What a process may write there is checked per file by the kernel against its own (unprivileged)
    credentials, as for any process. Recursive mount_setattr (Linux 5.12), else a remount of each mount."""
    proc = root + "/proc"
    attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    size = ctypes.sizeof(attr)
    if _libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, root.encode(), AT_RECURSIVE, ctypes.byref(attr), size) == 0:
        rw = _MountAttr(0, MOUNT_ATTR_RDONLY, 0, 0)
        if _libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, proc.encode(), 0, ctypes.byref(rw), size) != 0:
            raise IsolationError(f"could not keep /proc writable: {os.strerror(ctypes.get_errno())}")
        return
    for point, _, options, _ in _mountinfo():
        if _within(point, root) and point != proc:
            kept = (MS_NODEV if "nodev" in options else 0) | (MS_NOEXEC if "noexec" in options else 0)
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | kept)


def _pivot_into(root: str) -> None:
    """Make `root` this namespace's / and drop the host's tree from it, so no path leads back."""
    number = SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise IsolationError(f"pivot_root's system call number on {platform.machine()} is not known here")
    os.chdir(root)
    if _libc.syscall(number, b".", b".") != 0:  # the old root ends up stacked on the new one, at "."
        raise IsolationError(f"pivot_root failed: {os.strerror(ctypes.get_errno())}")
    if _libc.umount2(b".", MNT_DETACH) != 0:
        raise IsolationError(f"could not detach the host's root: {os.strerror(ctypes.get_errno())}")
    os.chdir("/")


def private_filesystem_view(workdir: str, cover: str, secret_dirs: Sequence[str] = SECRET_DIRS) -> str:
    """A mount namespace whose root is a new read-only tmpfs holding only `runner_view_paths()` (bound
    read-only), a procfs of its own, empty /tmp and /var/tmp, a private /dev/shm, and `workdir`, the one
    writable place, seen at `<cover>/work`; `cover` (the data directory: artifacts, other jobs' scratch) is
    an empty tmpfs, and so is every one of `secret_dirs` that a needed path would otherwise show.

    An allowlist rather than covers over known places: what a host keeps where is not known here, and
    whatever nobody listed is simply absent. The new root is built on `cover`'s mount point (the runner sees
    nothing there as it is), then pivot_root; the workdir is reached through an O_PATH descriptor, since
    that mount hides its path.
    """
    cover = os.path.abspath(cover)  # before pivot_root moves the working directory
    if _libc.unshare(CLONE_NEWNS) != 0:
        raise IsolationError(f"unshare(CLONE_NEWNS) failed: {os.strerror(ctypes.get_errno())}")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    plan = _plan_view(runner_view_paths(), cover)
    handle = os.open(workdir, os.O_PATH | os.O_DIRECTORY)
    try:
        root = plan.cover
        _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
        _build_view(root, plan, secret_dirs)
        _read_only_below(root)
        target = os.path.join(plan.cover, "work")
        _mount(f"/proc/self/fd/{handle}", root + target, None, MS_BIND)
        # A bind mount inherits the read-only flag of the mount it came from: make this one writable.
        _mount(None, root + target, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV)
    finally:
        os.close(handle)
    if os.path.isdir(root + "/dev/shm"):
        _mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,mode=1777")
    _pivot_into(root)
    return os.path.join(cover, "work")


def _build_view(root: str, plan: _ViewPlan, secret_dirs: Sequence[str]) -> None:
    """Fill the new root (still writable) as `plan` says."""
    for path in plan.binds:
        if os.path.isdir(path):
            _make_dirs(root, path, plan)
        else:  # a module or archive named by itself: bound onto an empty file
            _make_dirs(root, os.path.dirname(path), plan)
            open(root + path, "x").close()
        _mount(path, root + path, None, MS_BIND | MS_REC)
    for where, what in plan.links:
        _make_dirs(root, os.path.dirname(where), plan)
        os.symlink(what, root + where)
    for path in [*EMPTY_DIRS, *secret_dirs]:
        real = _walk_links(path)[1]
        if plan.bound(real) and os.path.isdir(real):  # the host's own would show through: cover it
            _mount("tmpfs", root + real, "tmpfs", MS_NOSUID | MS_NODEV, "size=4k,mode=0755")
        elif path in EMPTY_DIRS:
            _make_dirs(root, real, plan)
    for path in secret_files():
        real = _walk_links(path)[1]
        if plan.bound(real) and os.path.isfile(real):  # an empty file in its place
            _mount("/dev/null", root + real, None, MS_BIND)
    _make_dirs(root, "/proc", plan)
    _mount_own_proc(root + "/proc")
    _make_dirs(root, plan.cover, plan)
    _mount("tmpfs", root + plan.cover, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
    os.mkdir(root + plan.cover + "/work", 0o755)
