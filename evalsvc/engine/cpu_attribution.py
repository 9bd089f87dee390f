"""Where the runner's user-space CPU time went, by mapped file, as the kernel saw it (judge side, CPU).

Why: a candidate's native code can find a library's routine by walking memory from any pointer (MKL's sgemm
sits inside libtorch_cpu.so) and call it with no imported symbol for the object screen to see; its outputs
are right and its speed is real, but it is the library's. Nothing inside the runner can be believed, so the
judge asks the kernel instead: `CpuSampler` opens one sampling event per runner thread with
perf_event_open(2) and maps every sampled instruction pointer to the file mapped there.

How it samples
- A software task-clock event (this VM has no hardware PMU), one sample per 1/frequency s of a thread's CPU
  time, `exclude_kernel` and `exclude_hv`: what is measured is user-space time only (page faults and system
  calls are the kernel's, not a library's). `sample_type = IDENTIFIER | IP | TID`: the identifier says
  which of our events a sample came through (below).
- `inherit`: threads, and processes, that a sampled thread creates after its events are opened get copies
  of them. Threads that exist at start each get events of their own: /proc is listed until a listing shows
  no thread without them (a thread created by one not yet attached would otherwise escape). A thread that
  got events of its own after it had already inherited copies would be counted twice: an inherited copy
  reports its parent's identifier, and such samples of a thread that has its own events are dropped. The
  scope is the target, its descendants, and, where the target leads a session (the runner calls setsid),
  every process of that session: a helper process forked at load time, before the sampler started, must
  not be a place to compute unseen. The judge's own process is never sampled.
- The kernel refuses a ring buffer on an inherited per-task event (cpu = -1), so each thread gets one event
  per online CPU, and each CPU one mmap'd ring that all events on it write to (PERF_EVENT_IOC_SET_OUTPUT):
  threads x CPUs file descriptors, CPUs rings. A drain thread reads `data_head`, copies [tail, head) (two
  slices where it wraps), parses whole records (the kernel publishes the head only after a record is
  complete) and then writes `data_tail`, which hands the space back. The kernel never overwrites unread
  data: when a ring is full it drops samples and later writes a LOST record, whose count is `lost`. The
  barriers perf's protocol asks for (acquire on the head, release on the tail) are plain 8-byte aligned
  loads and stores on x86-64, whose memory model keeps loads in order and never moves an older load after a
  later store; Python executes the statements in order. Other architectures are refused.
- Instruction pointers are resolved against /proc/<pid>/maps: read at start (the candidate's library is
  loaded then), re-read at a jittered interval while sampling and whenever an address is in no known
  mapping, and read at stop. Addresses that no reading ever covered are "[unmapped]". Each mapped file
  keeps its identity (device, inode) as maps shows it: paths seen by the runner (a private mount namespace)
  differ from the judge's, and a path says nothing a process that can write files cannot forge.
- Bounded: ring size per CPU, threads and events, samples counted, duration (past which the sampler
  stops counting and marks the result `truncated`), and the table of unresolved addresses. Any failure
  raises `SamplerError`, which the caller reports as "not attributed".

What counts as library compute (`library_share`)
Every file-backed mapping counts, except a closed list of runtimes that do not compute for a caller, and
the candidate's own libraries. An allowlist of what does not compute, rather than a list of what does:
"libtorch_cpu.so, libmkl*, libopenblas* and the like" cannot be enumerated (numpy's bundled OpenBLAS, any
Python extension module, a copy of libtorch_cpu.so written to the scratch directory under another name).
- Not compute: glibc (libc, libm, libmvec, libpthread, the dynamic loader...: memcpy, malloc, math on
  scalars), the C++ runtime (libstdc++, libgcc_s: operator new, exceptions), the OpenMP runtimes (libgomp,
  libiomp5, libomp: an honest parallel kernel waits at their barriers and spins there), the Python
  interpreter (python, libpython, the standard library's lib-dynload modules), [vdso]/[vsyscall] (the
  clock), [kernel]. Such a file is only recognised where the judge itself can stat the path maps shows and
  finds the same device and inode: a runner-written file named libc.so.6 or put in a lib-dynload folder of
  its own does not qualify.
- The candidate's own libraries, by identity (device, inode) only: a path can be renamed onto. Identities
  should be taken before the runner loads the candidate (`file_identity` on the runner's copy right after
  it is written): the runner owns its scratch directory and can rename another file onto its library's
  path before the judge looks.
- Code in no file ([anon], [heap], [stack], [unmapped]) is not counted by default (a candidate may
  generate code of its own), but `count_anonymous=True` counts it, and the integrator should at least treat
  a large anonymous share as suspicious on its own: oneDNN, linked into libtorch_cpu.so, runs the kernels
  it generates from anonymous memory (torch's CPU conv2d here: 63% of samples in [anon], 3% in
  libtorch_cpu.so), so a candidate that calls oneDNN by address shows as [anon]; and any library's loaded
  image can be copied into anonymous executable memory and called there. The runner's own work (CPython
  3.11 has no JIT; input making and digests run ATen's compiled code) executes no anonymous code.
- Honest kernels still spend some time in libraries that count: allocating outputs (torch::empty_like:
  libc10/libtorch_cpu, microseconds per call), pybind11/ATen glue (libtorch_python.so, torch/_C) on every
  call. Those are small next to a kernel worth timing. The runner's own per-round work is not: it makes the
  inputs (torch.randn), digests every output and (de)serialises with torch, all in libtorch_cpu.so, in the
  same thread as the candidate's calls. A verdict must therefore compare against the null candidate's
  rounds sampled the same way (library samples per call, candidate minus null), not read a raw share.

What it cannot see: a candidate that copies library code into its own library's mapping (made writable), or
maps a library over an address that the last maps reading showed as something else and restores it before
the next (PERF_RECORD_MMAP2 events with timestamps would close that; not done). `exec_changes` counts
executable mappings that appeared or disappeared between readings, which honest timed rounds do not cause.
Cost: threads x online CPUs descriptors (bounded by `max_events`); the time it costs: docs/performance.md.
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import errno
import mmap
import os
import platform
import random
import re
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

FileId = tuple[int, int, int]  # (major, minor, inode) of a mapped file, as /proc/<pid>/maps shows it

_SYS_PERF_EVENT_OPEN = {"x86_64": 298, "amd64": 298}
PERF_TYPE_SOFTWARE = 1
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_SAMPLE_IP = 1 << 0
PERF_SAMPLE_TID = 1 << 1
PERF_SAMPLE_IDENTIFIER = 1 << 16
PERF_FLAG_FD_CLOEXEC = 1 << 3
PERF_EVENT_IOC_ENABLE = 0x2400
PERF_EVENT_IOC_DISABLE = 0x2401
PERF_EVENT_IOC_SET_OUTPUT = 0x2405
PERF_EVENT_IOC_ID = 0x80082407
_DISABLED, _INHERIT, _EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 0, 1 << 1, 1 << 5, 1 << 6
PERF_RECORD_LOST = 2
PERF_RECORD_THROTTLE = 5
PERF_RECORD_SAMPLE = 9
PERF_RECORD_LOST_SAMPLES = 13
PERF_RECORD_MISC_CPUMODE_MASK = 7
PERF_RECORD_MISC_KERNEL = 1
_KERNEL_SPACE = 1 << 63  # x86-64 kernel addresses have the top bit set
# struct perf_event_mmap_page: data_head, data_tail, data_offset, data_size live at these offsets.
_HEAD, _TAIL, _DATA_OFFSET, _DATA_SIZE = 1024, 1032, 1040, 1048
_HEADER = struct.Struct("<IHH")
_SAMPLE = struct.Struct("<QQII")  # event id, ip, pid, tid: a sample of IDENTIFIER | IP | TID
_U64 = struct.Struct("<Q")
PAGE = mmap.PAGESIZE

ANON, UNMAPPED, KERNEL = "[anon]", "[unmapped]", "[kernel]"
NO_FILE = frozenset({ANON, UNMAPPED, "[heap]", "[stack]"})  # code that no file holds
_NOT_COMPUTE = re.compile(
    r"(?:ld-linux[\w.-]*|ld-[\d.]+\.so|libc|libm|libmvec|libpthread|libdl|librt|libutil|libresolv"
    r"|libgcc_s|libstdc\+\+|libgomp|libiomp5|libomp|libpython3[\d.]*|python3?[\d.]*)(?:[-.][\w.+-]*)?"
)


class SamplerError(Exception):
    """The sampler could not attribute this run (the caller reports "not attributed")."""


@dataclass
class Attribution:
    samples: int
    by_file: dict[str, int]  # mapped file path (or "[anon]", "[vdso]", "[kernel]"...) -> samples
    lost: int = 0  # samples the kernel dropped because a ring was full
    throttled: int = 0  # times the kernel throttled an event (too many samples per tick)
    threads: int = 0  # distinct threads that were sampled
    by_thread: dict[int, int] = field(default_factory=dict)  # thread id -> samples
    processes: int = 0  # distinct processes that were sampled
    truncated: bool = False  # a bound (samples, duration) stopped the counting early
    exec_changes: int = 0  # executable mappings that appeared or vanished between maps readings
    identities: dict[str, set[FileId]] = field(default_factory=dict)  # path -> identities seen there
    initial: set[FileId] = field(default_factory=set)  # files mapped executable when sampling started
    period_ms: float = 0.5  # a thread's CPU time per sample

    def share(self, predicate: Callable[[str], bool]) -> float:
        """Fraction of all samples in files for which `predicate(path)` holds (0.0 with no samples)."""
        if self.samples <= 0:
            return 0.0
        return sum(n for name, n in self.by_file.items() if predicate(name)) / self.samples


def file_identity(path: str) -> FileId | None:
    """The identity maps would show for `path` (None if it cannot be stat'ed)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)


def library_share(
    attr: Attribution,
    own_libraries: set[str],
    *,
    own_identities: Collection[FileId] = (),
    count_anonymous: bool = False,
) -> float:
    """Share of all samples spent in libraries that compute for a caller (see the module docstring).
    `own_libraries` are paths of the candidate's libraries as the judge sees them, matched by the identity
    they have now; `own_identities` (taken before the candidate ran) are the better proof."""
    own = set(own_identities) | {i for p in own_libraries if (i := file_identity(p)) is not None}
    stat_cache: dict[str, FileId | None] = {}

    def counts(name: str) -> bool:
        if name in NO_FILE:
            return count_anonymous
        if not name.startswith("/"):
            return False  # [vdso], [kernel] and the like
        ids = attr.identities.get(name, set())
        if ids and ids <= own:
            return False
        return not _runtime_file(name, ids, stat_cache)

    return attr.share(counts)


def _runtime_file(path: str, ids: set[FileId], stat_cache: dict[str, FileId | None]) -> bool:
    """A file of the C, C++, OpenMP or Python runtime, and the very file the judge sees at that path."""
    base = path.rsplit("/", 1)[-1]
    interpreter_module = "/lib-dynload/" in path and ".cpython-" in base
    if not (interpreter_module or _NOT_COMPUTE.fullmatch(base)):
        return False
    if path not in stat_cache:
        stat_cache[path] = file_identity(path)
    seen = stat_cache[path]
    return seen is not None and ids == {seen}


class _PerfEventAttr(ctypes.Structure):
    """struct perf_event_attr up to sample_max_stack (PERF_ATTR_SIZE_VER5, 112 bytes)."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved_2", ctypes.c_uint16),
    ]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong]


def _open_event(tid: int, cpu: int, period_ns: int) -> int:
    """A disabled task-clock sampling event on thread `tid` while it runs on `cpu`; -1 if the thread is
    gone."""
    number = _SYS_PERF_EVENT_OPEN.get(platform.machine().lower())
    if number is None:
        raise SamplerError(f"perf_event_open is not supported here ({platform.machine()})")
    attr = _PerfEventAttr()
    attr.type = PERF_TYPE_SOFTWARE
    attr.size = ctypes.sizeof(attr)
    attr.config = PERF_COUNT_SW_TASK_CLOCK
    attr.sample_period = period_ns  # task-clock periods are nanoseconds of the thread's CPU time
    # IDENTIFIER: an inherited copy reports its parent's id, which tells its samples from the thread's own.
    attr.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID
    attr.flags = _DISABLED | _INHERIT | _EXCLUDE_KERNEL | _EXCLUDE_HV
    fd = _libc.syscall(
        number,
        ctypes.byref(attr),
        ctypes.c_int(tid),
        ctypes.c_int(cpu),
        ctypes.c_int(-1),
        ctypes.c_ulong(PERF_FLAG_FD_CLOEXEC),
    )
    if fd < 0:
        err = ctypes.get_errno()
        if err == errno.ESRCH:
            return -1
        raise SamplerError(f"perf_event_open on thread {tid}, cpu {cpu} failed: {os.strerror(err)}")
    return int(fd)


def _ioctl(fd: int, request: int, arg: int = 0) -> None:
    if _libc.ioctl(fd, request, arg) != 0:
        raise SamplerError(f"perf ioctl {request:#x} failed: {os.strerror(ctypes.get_errno())}")


def _event_id(fd: int) -> int:
    value = ctypes.c_uint64()
    _ioctl(fd, PERF_EVENT_IOC_ID, ctypes.addressof(value))
    return value.value


def _online_cpus() -> list[int]:
    """Every online CPU: the candidate may move its threads to any CPU its cgroup allows."""
    try:
        with open("/sys/devices/system/cpu/online") as f:
            spec = f.read().strip()
    except OSError:
        return list(range(os.cpu_count() or 1))
    cpus: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


class _Ring:
    """One CPU's ring buffer (a header page, then 2^n data pages), mapped from the first event opened on
    that CPU; the later ones write into it (PERF_EVENT_IOC_SET_OUTPUT)."""

    def __init__(self, fd: int, data_pages: int) -> None:
        self.fd = fd
        try:
            self.mm = mmap.mmap(
                fd, (data_pages + 1) * PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
            )
        except OSError as e:
            raise SamplerError(f"cannot map a perf ring buffer: {e}") from None
        self._head = ctypes.c_uint64.from_buffer(self.mm, _HEAD)
        self._tail = ctypes.c_uint64.from_buffer(self.mm, _TAIL)
        self.offset = ctypes.c_uint64.from_buffer(self.mm, _DATA_OFFSET).value or PAGE
        self.size = ctypes.c_uint64.from_buffer(self.mm, _DATA_SIZE).value or data_pages * PAGE

    def take(self) -> bytes:
        """Every complete record written since the last call, in order; their space is handed back."""
        head = self._head.value  # acquire: an aligned 8-byte load, kept before the reads below on x86-64
        tail = self._tail.value
        n = head - tail
        if n == 0:
            return b""
        if n > self.size:
            raise SamplerError(f"perf ring overrun (head {head}, tail {tail}, size {self.size})")
        start = tail % self.size
        first = min(n, self.size - start)
        data = self.mm[self.offset + start : self.offset + start + first]
        if first < n:  # the records wrap around the end of the data area
            data += self.mm[self.offset : self.offset + n - first]
        self._tail.value = head  # release: the copies above are loads, which x86-64 keeps before this store
        return data

    def close(self) -> None:
        del self._head, self._tail  # the buffer exports must go before the mapping can be closed
        with contextlib.suppress(BufferError, ValueError):
            self.mm.close()


@dataclass
class _Maps:
    """One reading of /proc/<pid>/maps: sorted ranges and what each holds."""

    starts: list[int]
    ends: list[int]
    names: list[str]
    ids: dict[str, set[FileId]]
    executable: frozenset[tuple[int, int, str]]
    read_at: float

    def find(self, ip: int) -> str | None:
        k = bisect.bisect_right(self.starts, ip) - 1
        return self.names[k] if k >= 0 and ip < self.ends[k] else None


def _read_maps(pid: int) -> _Maps | None:
    """None when the process is gone (or its maps cannot be read)."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    if not lines:
        return None  # an exiting process (a zombie) shows no mappings: keep the last reading instead
    rows: list[tuple[int, int, str]] = []
    ids: dict[str, set[FileId]] = {}
    executable = set()
    for line in lines:
        parts = line.split(maxsplit=5)
        if len(parts) < 5:
            continue
        lo, _, hi = parts[0].partition("-")
        start, end = int(lo, 16), int(hi, 16)
        name = _mapping_name(parts[5] if len(parts) > 5 else "")
        if name.startswith("/"):
            major, _, minor = parts[3].partition(":")
            ids.setdefault(name, set()).add((int(major, 16), int(minor, 16), int(parts[4])))
        rows.append((start, end, name))
        if "x" in parts[1]:
            executable.add((start, end, name))
    rows.sort()
    return _Maps(
        [r[0] for r in rows],
        [r[1] for r in rows],
        [r[2] for r in rows],
        ids,
        frozenset(executable),
        time.monotonic(),
    )


def _mapping_name(path: str) -> str:
    """A file's path as is; anonymous memory under one name: "[anon:<name>]" names are the process's own."""
    if path.startswith("/") or path in ("[heap]", "[stack]", "[vdso]", "[vsyscall]", "[vvar]"):
        return path
    if path.startswith("[stack"):
        return "[stack]"
    return ANON if not path or path.startswith("[anon") else path


def _proc_tree(target: int) -> set[int]:
    """`target`, its descendants, and its session's processes where it leads the session; never us."""
    parent: dict[int, int] = {}
    session: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parent[int(entry)], session[int(entry)] = int(fields[1]), int(fields[3])
    if target not in parent:
        return set()
    scope = {target}
    if session.get(target) == target:
        scope |= {p for p, s in session.items() if s == target}
    grew = True
    while grew:  # descendants: every process whose parent is already in scope
        more = {p for p, pp in parent.items() if pp in scope} - scope
        scope |= more
        grew = bool(more)
    scope.discard(os.getpid())
    return scope


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task") if t.isdigit()]
    except OSError:
        return []


class CpuSampler:
    """Samples every thread of `pid` (and of its descendants and session) from `start` to `stop`."""

    RING_PAGES = 64  # per CPU: 256 KiB, several seconds of samples at 2 kHz (one thread runs at a time)
    DRAIN_S = 0.02
    MAPS_REFRESH_S = 0.25  # jittered by up to half, so the candidate cannot time its remapping around it
    MAPS_MISS_S = 0.02  # at most this often per process when an address is in no known mapping
    SCAN_ROUNDS = 20

    def __init__(
        self,
        pid: int,
        frequency_hz: int = 2000,
        *,
        max_threads: int = 512,
        max_events: int = 8192,
        max_samples: int = 5_000_000,
        max_duration_s: float = 600.0,
        max_pending: int = 200_000,
    ) -> None:
        if not 1 <= frequency_hz <= 20_000:
            raise SamplerError(f"frequency {frequency_hz} Hz is out of range (1..20000)")
        if pid <= 0 or pid == os.getpid():
            raise SamplerError(f"cannot sample pid {pid}")
        self.pid = pid
        self.period_ns = 1_000_000_000 // frequency_hz
        self.max_threads, self.max_events = max_threads, max_events
        self.max_samples, self.max_duration_s, self.max_pending = max_samples, max_duration_s, max_pending
        self._fds: list[int] = []  # every event, ring owners included
        self._rings: dict[int, _Ring] = {}  # cpu -> the ring every event on that cpu writes to
        self._attached: dict[int, int] = {}  # tid -> its process, for the threads given events of their own
        self._event_tid: dict[int, int] = {}  # event id -> the thread it was opened on
        self._maps: dict[int, _Maps] = {}
        self._counts: Counter[str] = Counter()
        self._pending: dict[int, Counter[int]] = {}  # pid -> ips in no known mapping yet -> samples
        self._pending_n = 0  # distinct (pid, ip) pairs in _pending
        self._counted = 0
        self._ids: dict[str, set[FileId]] = {}
        self._initial: set[FileId] = set()
        self._tids: Counter[int] = Counter()
        self._pids: set[int] = set()
        self._stale: set[int] = set()  # processes with addresses in no known mapping
        self._gone: set[int] = set()  # processes whose maps can no longer be read
        self._lost = self._throttled = self._exec_changes = 0
        self._truncated = False
        self._error: BaseException | None = None
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_at = 0.0
        self._next_refresh = 0.0
        self._state = "new"

    # -- public ---------------------------------------------------------------------------------------

    def start(self) -> None:
        if self._state != "new":
            raise SamplerError(f"start() on a sampler that is {self._state}")
        self._state = "running"
        try:
            self._attach()
            for pid in set(self._attached.values()):
                self._refresh(pid)
            self._initial = {
                i for m in self._maps.values() for (_, _, name) in m.executable for i in m.ids.get(name, ())
            }
            self._started_at = time.monotonic()
            self._next_refresh = self._started_at + self._jitter()
            self._thread = threading.Thread(
                target=self._drain_loop, name=f"cpu-sampler-{self.pid}", daemon=True
            )
            self._thread.start()
        except SamplerError:
            self.close()
            raise
        except Exception as e:  # never let the judge see anything but SamplerError
            self.close()
            raise SamplerError(f"sampler start failed: {type(e).__name__}: {e}") from e

    def stop(self) -> Attribution:
        if self._state != "running":
            raise SamplerError(f"stop() on a sampler that is {self._state}")
        try:
            return self._finish()
        except SamplerError:
            raise
        except Exception as e:
            raise SamplerError(f"sampler stop failed: {type(e).__name__}: {e}") from e
        finally:
            self.close()

    def close(self) -> None:
        """Release every event and mapping; safe to call any number of times, never raises."""
        self._halt.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
        self._disable()
        rings, self._rings = self._rings, {}
        for ring in rings.values():
            with contextlib.suppress(Exception):
                ring.close()
        fds, self._fds = self._fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._state = "closed"

    def __enter__(self) -> CpuSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # -- attaching ------------------------------------------------------------------------------------

    def _attach(self) -> None:
        """Events on every existing thread, listed again until a listing shows no thread without them: a
        thread created by a thread not yet attached would otherwise escape (later ones inherit)."""
        cpus = _online_cpus()
        for _ in range(self.SCAN_ROUNDS):
            scope = _proc_tree(self.pid)
            if self.pid not in scope and not self._attached:
                raise SamplerError(f"process {self.pid} is gone")
            new = [(p, t) for p in sorted(scope) for t in _threads(p) if t not in self._attached]
            if not new:
                break
            for pid, tid in new:
                if len(self._attached) >= self.max_threads:
                    raise SamplerError(f"more than {self.max_threads} threads to sample")
                if len(self._fds) + len(cpus) > self.max_events:
                    raise SamplerError(f"more than {self.max_events} events to open")
                if self._attach_thread(tid, cpus):
                    self._attached[tid] = pid
        if not self._attached:
            raise SamplerError(f"no thread of process {self.pid} could be sampled")

    def _attach_thread(self, tid: int, cpus: list[int]) -> bool:
        """One event per CPU on `tid`, each writing to that CPU's ring (inherit refuses per-task rings)."""
        opened = []
        for cpu in cpus:
            fd = _open_event(tid, cpu, self.period_ns)
            if fd < 0:
                break  # the thread exited since the listing
            self._fds.append(fd)
            opened.append(fd)
            if cpu not in self._rings:
                self._rings[cpu] = _Ring(fd, self.RING_PAGES)
            else:
                _ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, self._rings[cpu].fd)
            self._event_tid[_event_id(fd)] = tid
        if len(opened) < len(cpus):
            return False
        for fd in opened:
            _ioctl(fd, PERF_EVENT_IOC_ENABLE)
        return True

    # -- draining -------------------------------------------------------------------------------------

    def _drain_loop(self) -> None:
        try:
            while not self._halt.wait(self.DRAIN_S):
                self._drain()
                now = time.monotonic()
                if now >= self._next_refresh:
                    self._next_refresh = now + self._jitter()
                    for pid in set(self._maps) | self._stale:
                        self._refresh(pid)
                elif self._stale:
                    self._refresh_stale(now)
                if self._truncated or now - self._started_at > self.max_duration_s:
                    self._truncated = True
                    self._disable()
                    return
        except BaseException as e:  # reported by stop()
            self._error = e
            self._disable()

    def _disable(self) -> None:
        for fd in self._fds:
            with contextlib.suppress(SamplerError):
                _ioctl(fd, PERF_EVENT_IOC_DISABLE)

    def _drain(self) -> None:
        for ring in self._rings.values():
            data = ring.take()
            if data:
                self._parse(data)

    def _parse(self, data: bytes) -> None:
        off, end = 0, len(data)
        while off < end:
            if end - off < _HEADER.size:
                raise SamplerError("truncated perf record header")
            kind, misc, size = _HEADER.unpack_from(data, off)
            if size < _HEADER.size or off + size > end:
                raise SamplerError(f"malformed perf record (type {kind}, size {size})")
            if kind == PERF_RECORD_SAMPLE:
                event, ip, pid, tid = _SAMPLE.unpack_from(data, off + _HEADER.size)
                kernel = misc & PERF_RECORD_MISC_CPUMODE_MASK == PERF_RECORD_MISC_KERNEL
                self._sample(event, pid, tid, ip, kernel)
            elif kind in (PERF_RECORD_LOST, PERF_RECORD_LOST_SAMPLES):
                lost_at = off + _HEADER.size + (8 if kind == PERF_RECORD_LOST else 0)
                self._lost += _U64.unpack_from(data, lost_at)[0]
            elif kind == PERF_RECORD_THROTTLE:
                self._throttled += 1
            off += size

    def _sample(self, event: int, pid: int, tid: int, ip: int, kernel: bool) -> None:
        opened_on = self._event_tid.get(event)
        if opened_on != tid and tid in self._attached:
            return  # an inherited copy in a thread that also has events of its own: counted there
        if self._counted >= self.max_samples:
            self._truncated = True
            return
        self._counted += 1
        self._tids[tid] += 1
        self._pids.add(pid)
        if kernel or ip & _KERNEL_SPACE:
            self._counts[KERNEL] += 1
            return
        name = self._resolve(pid, ip)
        if name is not None:
            self._counts[name] += 1
            return
        waiting = self._pending.setdefault(pid, Counter())
        if ip not in waiting and self._pending_n >= self.max_pending:
            self._counts[UNMAPPED] += 1  # bounded: an address still unknown after this many is unmapped
            return
        self._pending_n += ip not in waiting
        waiting[ip] += 1
        if pid not in self._gone:
            self._stale.add(pid)

    def _resolve(self, pid: int, ip: int) -> str | None:
        maps = self._maps.get(pid)
        if maps is None:
            if pid not in self._gone:
                self._stale.add(pid)
            maps = self._maps.get(self.pid)  # a forked child shares its parent's layout until it changes
        return maps.find(ip) if maps is not None else None

    # -- maps -----------------------------------------------------------------------------------------

    def _jitter(self) -> float:
        return self.MAPS_REFRESH_S * (0.5 + random.random())

    def _refresh_stale(self, now: float) -> None:
        for pid in list(self._stale):
            maps = self._maps.get(pid)
            if maps is None or now - maps.read_at >= self.MAPS_MISS_S:
                self._refresh(pid)

    def _refresh(self, pid: int) -> None:
        """Read `pid`'s maps again and settle what was waiting on it."""
        maps = _read_maps(pid)
        self._stale.discard(pid)
        if maps is None:
            self._gone.add(pid)
            return
        old = self._maps.get(pid)
        if old is not None:
            self._exec_changes += len(old.executable ^ maps.executable)
        self._maps[pid] = maps
        for name, ids in maps.ids.items():
            self._ids.setdefault(name, set()).update(ids)
        self._settle(pid, maps, final=False)

    def _settle(self, pid: int, maps: _Maps | None, final: bool) -> None:
        """Count the waiting addresses of `pid` that `maps` covers (all of them when `final`)."""
        waiting = self._pending.get(pid)
        if not waiting:
            return
        for ip in list(waiting):
            name = maps.find(ip) if maps is not None else None
            if name is None and not final:
                continue
            self._counts[name or UNMAPPED] += waiting.pop(ip)
            self._pending_n -= 1

    # -- stopping -------------------------------------------------------------------------------------

    def _finish(self) -> Attribution:
        self._disable()
        self._halt.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
            if self._thread.is_alive():
                raise SamplerError("the sampler's drain thread did not stop")
            self._thread = None
        if self._error is not None:
            raise SamplerError(f"sampling failed: {type(self._error).__name__}: {self._error}")
        self._drain()  # what was written between the last drain and the disable
        for pid in sorted(self._pids | set(self._maps)):
            self._refresh(pid)
        for pid in list(self._pending):
            self._settle(pid, self._maps.get(pid) or self._maps.get(self.pid), final=True)
        counts = dict(self._counts)
        return Attribution(
            samples=sum(counts.values()),
            by_file=counts,
            lost=self._lost,
            throttled=self._throttled,
            threads=len(self._tids),
            by_thread=dict(self._tids),
            processes=len(self._pids),
            truncated=self._truncated,
            exec_changes=self._exec_changes,
            identities={name: set(ids) for name, ids in self._ids.items() if name in counts},
            initial=set(self._initial),
            period_ms=self.period_ns / 1e6,
        )
