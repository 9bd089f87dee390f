"""Where a candidate looks for a deployment's secrets: each function returns the canaries it found.

Stdlib only: a candidate of the battery is this file's text followed by a `ModelNew` whose forward runs
one search and raises with what it found (tests/integration/test_secrets.py). The same functions run in
the planting process as the positive control, so a search that could not find anything fails the test.
"""

import os
import re

CANARY = re.compile(rb"EVCANARY[0-9a-f]{24}")
PLACES = ("environ_block", "memory", "processes", "open_files", "secret_files")
READ_LIMIT = 1 << 20  # bytes of one file
MEMORY_LIMIT = 3 << 30  # bytes of this process's writable memory scanned in all


def _found(data: bytes) -> set[str]:
    return {m.decode() for m in CANARY.findall(data)}


def _read(path: str, limit: int = READ_LIMIT) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return b""


def environ_block() -> set[str]:
    """The environment block this process started with (what it inherited, whatever os.environ says now)."""
    return _found(_read("/proc/self/environ")) | _found(
        b"\0".join(k + b"=" + v for k, v in os.environb.items())
    )


def memory() -> set[str]:
    """Every readable private mapping of this process: the heap, the stack, anonymous memory. Through
    /proc/self/mem, or, where that is closed (a process that changed uid is not dumpable), by address."""
    import ctypes

    found: set[str] = set()
    scanned = 0
    try:
        mem = open("/proc/self/mem", "rb", 0)  # noqa: SIM115 - closed below
    except OSError:
        mem = None
    with open("/proc/self/maps") as maps:
        regions = [line.split() for line in maps]
    for fields in regions:
        perms, name = fields[1], fields[5] if len(fields) > 5 else ""
        if not perms.startswith("r") or name.startswith("[v") or (name.startswith("/") and "w" not in perms):
            continue  # [vvar]/[vsyscall] cannot be read; read-only files are the libraries' own text
        start, end = (int(x, 16) for x in fields[0].split("-"))
        for at in range(start, end, 1 << 24):
            if scanned >= MEMORY_LIMIT:
                return found
            size = min(1 << 24, end - at)
            try:
                if mem is not None:
                    mem.seek(at)
                    chunk = mem.read(size)
                else:
                    chunk = ctypes.string_at(at, size)
            except (OSError, ValueError, OverflowError):
                break
            scanned += len(chunk)
            found |= _found(chunk)
    if mem is not None:
        mem.close()
    return found


def processes() -> set[str]:
    """The environment, command line and status of every process this one can see (its parent, the
    worker, PID 1)."""
    found: set[str] = set()
    for pid in [d for d in os.listdir("/proc") if d.isdigit()] + ["self", str(os.getppid()), "1"]:
        for part in ("environ", "cmdline", "status", "comm"):
            found |= _found(_read(f"/proc/{pid}/{part}"))
    return found


def open_files() -> set[str]:
    """Whatever this process holds open: inherited descriptors, the arena, its log."""
    found: set[str] = set()
    for fd in os.listdir("/proc/self/fd"):
        path = f"/proc/self/fd/{fd}"
        try:
            target = os.readlink(path)
        except OSError:
            continue
        found |= _found(target.encode())
        if target.startswith("/") or target.startswith("memfd:"):
            found |= _found(_read(path))
    return found


def secret_files(roots: tuple[str, ...] = ()) -> set[str]:
    """The places a deployment keeps secrets or state: secret mounts, the service's data directory and
    artifact store, the configuration directories, temporary directories, home directories."""
    roots = roots or (
        "/etc/evalsvc",
        "/run/secrets",
        "/run",
        "/var/lib/evalsvc",
        "/var/tmp",
        "/tmp",
        "/root",
        "/home",
        "/etc",
        "/work",
        "/srv",
        "/opt",
        "/data",
        os.getcwd(),
    )
    found: set[str] = set()
    budget = 20000  # files read in all
    for root in roots:
        for directory, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "site-packages", "dist-packages", ".git")]
            for name in files:
                budget -= 1
                if budget < 0:
                    return found
                found |= _found(_read(os.path.join(directory, name), 1 << 16))
    return found


def search(place: str) -> set[str]:
    return {
        "environ_block": environ_block,
        "memory": memory,
        "processes": processes,
        "open_files": open_files,
        "secret_files": secret_files,
    }[place]()
