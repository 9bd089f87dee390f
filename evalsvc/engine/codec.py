"""Messages between judge and runner: a small header over their pipe, each tensor's raw bytes in a shared
memory arena (or, when it does not fit, as a frame on the pipe after the header).

The header (containers, numbers, strings, and a marker per tensor) goes through `torch.save` and is always
loaded with weights_only=True, so nothing the untrusted runner sends can execute code in the judge. Tensor
bytes never go through `torch.save` (its zip container cost seconds per trial for 80 MB tensors), and
mostly not through the pipe either (a pipe moves a few hundred MB/s; the arena is one memcpy each way).
A tensor is sized from the header's dtype and shape and checked against the arena's bounds or the frame
that arrives, and the whole message is bounded, so a lying header gets a BadMessage, never a huge
allocation, a read out of bounds or a hang.

The arena is a memfd that the judge creates and sizes and the runner inherits. It is sealed against
shrinking, so a runner cannot make the judge's mapping fault (SIGBUS) by truncating it; what a runner
writes there is only ever copied out once, after its reply, and then checked like any other output.
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import io
import math
import mmap
import os
import select
import struct
import time
import zipfile
from typing import Any

import torch

MARK = "__evalsvc_tensor__"
SAME = "same"  # with MARK: the tensor of that index again
MAX_MESSAGE_BYTES = 32 * 1024**3
MAX_ARENA_BYTES = 8 * 1024**3
MAX_HEADER_BYTES = 4 * 1024**2  # no tensor bytes: shapes, numbers, messages (a task's source is at most 1 MB)
MAX_TENSORS = 65536  # per message: a zero-size tensor costs the budget nothing, but memory and time
MAX_DIMS = 64
ALIGN = 64
FRAME_PIECE = 16 * 1024**2  # a pipe frame is read in pieces of this size
DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.complex128,
        torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
        torch.float8_e4m3fn, torch.float8_e5m2,
    )
}  # fmt: skip


class BadMessage(Exception):
    """A message from the runner that is not plain data (or too large)."""


def encode(obj: Any) -> bytes:
    """A whole message as one `torch.save` blob (small messages and tests)."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def decode(blob: bytes, map_location: str | torch.device | None = None) -> Any:
    try:
        return torch.load(io.BytesIO(blob), weights_only=True, map_location=map_location)
    except Exception as e:  # anything that is not plain tensors and containers
        raise BadMessage(
            f"runner sent a message that is not plain data: {type(e).__name__}: {e}"[:500]
        ) from None


class Arena:
    """Shared memory for tensor bytes between one judge and one runner: a memfd sealed against shrinking.
    The judge grows it to fit what it sends; either side places what fits and frames the rest."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._map: mmap.mmap | None = None

    @classmethod
    def create(cls) -> Arena | None:
        """A new arena, or None where memfds and seals are missing (messages then go over the pipe)."""
        try:
            fd = os.memfd_create("evalsvc-arena", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        except (AttributeError, OSError):
            return None
        # Sealed against shrinking, and against further seals: the other side cannot stop it growing
        # (a task did, to force every tensor onto the pipe and then stop reading it).
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
        return cls(fd)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled into a new runner (multiprocessing's process start): the fd goes along, duplicated."""
        from multiprocessing.reduction import DupFd

        return _arena_from, (DupFd(self.fd),)

    def mapping(self) -> mmap.mmap | None:
        """The arena mapped at its current size (remapped after it grew); None when empty or unusable."""
        try:
            size = os.fstat(self.fd).st_size
            if size and (self._map is None or len(self._map) != size):
                self._map = mmap.mmap(self.fd, size)
        except (OSError, ValueError):
            return None  # closed, or sealed by the other side against writable mappings: use the pipe
        return self._map if size else None

    def reserve(self, nbytes: int) -> None:
        """Grow to hold `nbytes` (the judge's side; never past MAX_ARENA_BYTES, never shrinks)."""
        with contextlib.suppress(OSError):  # the runner sealed it against growth: frames use the pipe
            if os.fstat(self.fd).st_size < nbytes <= MAX_ARENA_BYTES:
                os.ftruncate(self.fd, nbytes)

    def close(self) -> None:
        self._map = None  # unmapped once no tensor views it
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _arena_from(dup: Any) -> Arena:
    return Arena(dup.detach())


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _stripped(obj: Any) -> tuple[Any, list[torch.Tensor], list[dict[str, Any]]]:
    """`obj` with each tensor replaced by its marker; the tensors and their markers, in order. A tensor the
    message holds twice (tied weights, one buffer under ten names) is sent once and marked SAME after."""
    tensors: list[torch.Tensor] = []
    markers: list[dict[str, Any]] = []
    sent: dict[tuple[Any, ...], int] = {}

    def strip(o: Any) -> Any:
        if isinstance(o, torch.Tensor):
            key = _alias_key(o)
            if key in sent:
                return {MARK: sent[key], SAME: True}
            sent[key] = len(tensors)
            tensors.append(o)
            markers.append(
                {MARK: sent[key], "dtype": str(o.dtype).removeprefix("torch."), "shape": list(o.shape)}
            )
            return markers[-1]
        if isinstance(o, list):
            return [strip(x) for x in o]
        if isinstance(o, tuple):
            return tuple(strip(x) for x in o)
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items()}
        return o

    return strip(obj), tensors, markers


def send(conn: Any, obj: Any, arena: Arena | None = None, grow: bool = False) -> None:
    """Write `obj` to a multiprocessing connection: header, tensor bytes into `arena` where they fit
    (after growing it, with `grow`, to the message plus room for a reply as large as its largest tensor),
    then one pipe frame per tensor that did not fit."""
    head, tensors, markers = _stripped(obj)
    sizes = [t.numel() * t.element_size() for t in tensors]
    if arena is not None and grow and sizes:
        arena.reserve(sum(_aligned(n) for n in sizes) + _aligned(max(sizes)))
    view = arena.mapping() if arena is not None and sizes else None
    at = 0
    for t, n, marker in zip(tensors, sizes, markers, strict=True):
        if view is not None and n > 0 and at + n <= len(view):
            dst = torch.frombuffer(view, dtype=torch.uint8, count=n, offset=at)
            dst.view(t.dtype).view(t.shape).copy_(t.detach())
            del dst
            marker["at"] = at
            at += _aligned(n)
    conn.send_bytes(encode(head))
    for t, marker in zip(tensors, markers, strict=True):
        if "at" not in marker:
            host = t.detach().reshape(-1).contiguous().cpu()
            if host.numel():
                arr = host.view(torch.uint8).numpy()
                conn.send_bytes(memoryview(arr))  # type: ignore[arg-type]  # numpy stubs: Buffer only on 3.12+
            else:
                conn.send_bytes(b"")


def _alias_key(t: torch.Tensor) -> tuple[Any, ...]:
    """What makes two tensors one: the same bytes seen the same way."""
    return (t.device, t.dtype, t.untyped_storage().data_ptr(), t.storage_offset(), t.shape, t.stride())


def receive(
    conn: Any,
    map_location: str | torch.device | None = None,
    timeout_s: float | None = None,
    arena: Arena | None = None,
    in_place: bool = False,
    max_bytes: int = MAX_MESSAGE_BYTES,
) -> Any:
    """Read one message written by `send`; BadMessage for anything malformed, for tensors of more than
    `max_bytes` in all (the judge passes the sender's own memory limit: a process could otherwise make
    the judge hold many copies of one buffer) or for tensors that overlap in the arena; TimeoutError
    when the whole message has not arrived within `timeout_s` of its first byte (the first byte's arrival is
    the caller's to wait for). With `in_place`
    (the runner reading the judge's messages) CPU tensors in the arena are views of it, not copies: the
    judge writes nothing there until the runner has answered, and the runner can only spoil its own
    inputs. The judge always copies what the runner wrote, which the runner could change afterwards."""
    try:
        return _receive(conn, map_location, timeout_s, arena, in_place, max_bytes)
    except MemoryError:  # a header claiming more than this process can hold
        raise BadMessage("a message too large to receive") from None


def _receive(
    conn: Any,
    map_location: str | torch.device | None,
    timeout_s: float | None,
    arena: Arena | None,
    in_place: bool,
    max_bytes: int,
) -> Any:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    head = _decode_header(bytes(_read_frame(conn.fileno(), None, deadline, MAX_HEADER_BYTES)))
    _check_deadline(deadline)  # decoding does not look at the clock
    reader = _Rebuild(conn, deadline, arena, in_place, max_bytes, map_location)
    try:
        return reader.rebuild(head)
    except (TypeError, ValueError, KeyError, IndexError, OverflowError, RecursionError) as e:
        raise BadMessage(f"a malformed message: {type(e).__name__}: {str(e)[:200]}") from None


def _decode_header(blob: bytes) -> Any:
    """A header is a torch.save archive of plain data: one whose entries hold tensor bytes (`data/`,
    which its unpickler would inflate, deflated 1000 to 1) or unpack past the header limit is refused
    before it is read."""
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as z:
            entries = z.infolist()
    except (zipfile.BadZipFile, ValueError, OSError):
        raise BadMessage("a message header that is not a torch.save archive") from None
    if any("/data/" in e.filename for e in entries):
        raise BadMessage("a message header holding tensor bytes")
    if sum(e.file_size for e in entries) > MAX_HEADER_BYTES:
        raise BadMessage(f"a message header unpacking past {MAX_HEADER_BYTES} bytes")
    return decode(blob)


def _check_deadline(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise TimeoutError("the message did not arrive in time")


class _Rebuild:
    """The message from its header: each marker replaced by its tensor (arena or pipe frame), each
    container once however often the header refers to it (a header's shared references multiplied
    300 MB out of 31 KB), within the tensor count, the byte budget and the deadline."""

    def __init__(
        self,
        conn: Any,
        deadline: float | None,
        arena: Arena | None,
        in_place: bool,
        max_bytes: int,
        map_location: str | torch.device | None,
    ) -> None:
        self.conn, self.deadline, self.arena, self.in_place = conn, deadline, arena, in_place
        self.budget, self.max_bytes = max_bytes, max_bytes
        self.device = torch.device(map_location) if map_location is not None else None
        self.mapped = arena.mapping() if arena is not None else None
        self.taken: list[tuple[int, int]] = []  # arena ranges read, sorted: `send` writes none twice
        self.built: dict[int, torch.Tensor] = {}
        self.seen: dict[int, Any] = {}  # id of a header container -> what it became
        self.tensors = 0

    def rebuild(self, o: Any) -> Any:
        if not isinstance(o, dict | list | tuple):
            return o
        if id(o) in self.seen:
            return self.seen[id(o)]
        if isinstance(o, dict) and MARK in o:
            out: Any = self.frame(o)
        elif isinstance(o, dict):
            out = {k: self.rebuild(v) for k, v in o.items()}
        elif isinstance(o, list):
            out = [self.rebuild(x) for x in o]
        else:
            out = tuple(self.rebuild(x) for x in o)
        self.seen[id(o)] = out
        return out

    def frame(self, marker: dict[str, Any]) -> torch.Tensor:
        index = marker[MARK]
        if type(index) is not int:
            raise BadMessage(f"bad tensor header {str(marker)[:200]}")
        if marker.get(SAME) is True:  # the same tensor again: one object, as the sender had it
            if index not in self.built:
                raise BadMessage(f"a repeat of tensor {index}, not sent before it")
            return self.built[index]
        self.tensors += 1
        if self.tensors > MAX_TENSORS:
            raise BadMessage(f"a message of more than {MAX_TENSORS} tensors")
        _check_deadline(self.deadline)
        dtype, shape, nbytes = _sized(marker)
        self.budget -= nbytes
        if self.budget < 0:
            raise BadMessage(f"message of tensors over {self.max_bytes} bytes")
        if "at" in marker:
            raw = self._from_arena(marker["at"], nbytes)
        else:
            raw = _from_pipe(self.conn, nbytes, self.deadline, self.device)
        self.built[index] = raw.view(dtype).reshape(shape)
        return self.built[index]

    def _from_arena(self, at: Any, nbytes: int) -> torch.Tensor:
        if type(at) is int and nbytes > 0:
            place = bisect.bisect_left(self.taken, (at, at + nbytes))
            near = self.taken[max(0, place - 1) : place + 1]
            if any(at < end and start < at + nbytes for start, end in near):
                raise BadMessage(f"tensor at {at} overlaps another in the shared arena")
            inside = self.mapped is not None and at >= 0 and at + nbytes <= len(self.mapped)
            if (
                inside
                and self.arena is not None
                and not self.in_place
                and _has_hole(self.arena.fd, at, nbytes)
            ):
                # reading pages nobody wrote would make them, charged to the judge, for as long as it lives
                raise BadMessage(f"tensor at {at} ({nbytes} bytes) was never written to the shared arena")
        raw = _from_arena(self.mapped, at, nbytes, self.device, self.in_place)
        bisect.insort(self.taken, (at, at + nbytes))
        return raw


def _has_hole(fd: int, at: int, nbytes: int) -> bool:
    try:
        return os.lseek(fd, at, os.SEEK_HOLE) < at + nbytes
    except OSError:  # past the end: _from_arena refuses it
        return False


def _sized(marker: dict[str, Any]) -> tuple[torch.dtype, list[int], int]:
    name, shape = marker.get("dtype"), marker.get("shape")
    dtype = DTYPES.get(name) if isinstance(name, str) else None
    if (
        dtype is None
        or not isinstance(shape, list)
        or len(shape) > MAX_DIMS
        or not all(type(s) is int and 0 <= s < 1 << 48 for s in shape)
    ):
        raise BadMessage(f"bad tensor header {str(marker)[:200]}")
    return dtype, shape, math.prod(shape) * dtype.itemsize


def _from_arena(
    mapped: mmap.mmap | None, at: Any, nbytes: int, device: torch.device | None, in_place: bool = False
) -> torch.Tensor:
    """A copy of `nbytes` at offset `at` (a view with `in_place`), bounds-checked against the mapping."""
    if mapped is None or type(at) is not int or at < 0 or nbytes <= 0 or at + nbytes > len(mapped):
        raise BadMessage(f"tensor at {str(at)[:40]} ({nbytes} bytes) is outside the shared arena")
    src = torch.frombuffer(mapped, dtype=torch.uint8, count=nbytes, offset=at)
    if device is not None and device.type != "cpu":
        return src.to(device)
    return src if in_place else src.clone()


def _from_pipe(conn: Any, nbytes: int, deadline: float | None, device: torch.device | None) -> torch.Tensor:
    buf = _read_frame(conn.fileno(), nbytes, deadline)
    t = torch.frombuffer(buf, dtype=torch.uint8) if nbytes else torch.empty(0, dtype=torch.uint8)
    return t.to(device) if device is not None else t


def _read_frame(
    fd: int, nbytes: int | None, deadline: float | None, limit: int = MAX_MESSAGE_BYTES
) -> bytearray:
    """One multiprocessing frame (a 4-byte big-endian length, or -1 and an 8-byte one, then the bytes) read
    from the pipe in pieces, so memory follows the bytes that arrive, never what a header claims (a task
    claimed 30 GiB and sent one byte), by `deadline` (a task that sent a length and one byte held the judge
    in a read with no end). Its length must be `nbytes` (a tensor's, from its header) or, for a message's
    header, at most `limit`."""
    (size,) = struct.unpack("!i", _read_exactly(fd, 4, deadline))
    if size == -1:
        (size,) = struct.unpack("!Q", _read_exactly(fd, 8, deadline))
    if nbytes is None:
        if not 0 <= size <= limit:
            raise BadMessage(f"a message header of {size} bytes (at most {limit})")
        return _read_exactly(fd, size, deadline)
    if size < nbytes:  # read past, so that the pipe stays in step for whoever reads it next
        _read_exactly(fd, size, deadline)
    if size != nbytes:
        raise BadMessage(f"tensor frame of {size} bytes, header says {nbytes}")
    return _read_exactly(fd, size, deadline)


def _read_exactly(fd: int, n: int, deadline: float | None) -> bytearray:
    buf = bytearray()
    while len(buf) < n:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            raise TimeoutError("the message did not arrive in time")
        piece = os.read(fd, min(n - len(buf), FRAME_PIECE))
        if not piece:
            raise EOFError("the pipe closed inside a message")
        buf += piece
    return buf
