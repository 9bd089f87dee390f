"""Red team: what a hostile runner / task process can send the judge through `codec.receive`.

Each test states what the defence SHOULD guarantee and calls `receive` exactly as the judge does
(`RunnerHandle.request`: `receive(conn, device, timeout_s, arena, max_bytes=reply_limit)`). The hostile side
is a thread writing raw bytes to the other end of a `multiprocessing.Pipe` (an untrusted process controls
its own end completely: it can replace `send` or write the bytes itself) and, where it matters, the memfd
arena. Memory is the receiving process's peak RSS growth (VmHWM after writing 5 to /proc/self/clear_refs).
Each attack got through when it was written (red team, this CPU, 2026-12-06; before and after in
docs/security.md) and is defended now; sizes are kept small (under ~1.1 GiB of growth each). Time bounds
leave seconds of room over the deadline for a loaded machine, well under what the attacks took.
"""

from __future__ import annotations

import contextlib
import gc
import io
import multiprocessing as mp
import os
import struct
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from evalsvc.engine.codec import MARK, Arena, BadMessage, encode, receive

MiB = 1024**2


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


class _Peak:
    growth = 0


@contextlib.contextmanager
def peak_growth() -> Iterator[_Peak]:
    """Peak RSS growth of this process over the block (bytes)."""
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = _status("VmRSS")
    peak = _Peak()
    try:
        yield peak
    finally:
        peak.growth = _status("VmHWM") - base


def with_pickle(data_pkl: bytes) -> bytes:
    """A torch.save zip whose data.pkl is `data_pkl` (a hand-written pickle)."""
    src = zipfile.ZipFile(io.BytesIO(encode(None)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for info in src.infolist():
            z.writestr(info, data_pkl if info.filename.endswith("data.pkl") else src.read(info.filename))
    return out.getvalue()


def frame(payload: bytes) -> bytes:
    """One multiprocessing frame as `Connection.send_bytes` writes it."""
    return struct.pack("!i", len(payload)) + payload


def deliver(conn: Any, data: bytes) -> threading.Thread:
    """The hostile side: raw bytes onto its end of the pipe, from a thread (the pipe holds 64 KiB)."""

    def write() -> None:
        view = memoryview(data)
        with contextlib.suppress(OSError):
            while view:
                view = view[os.write(conn.fileno(), view[: 1 << 20]) :]

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


def judge_receive(
    blob_and_frames: bytes, timeout_s: float, arena: Arena | None, max_bytes: int
) -> tuple[str, float]:
    """receive() as RunnerHandle.request calls it; (outcome, elapsed seconds)."""
    judge, hostile = mp.Pipe()
    deliver(hostile, blob_and_frames)
    start = time.monotonic()
    try:
        got = receive(judge, None, timeout_s, arena, max_bytes=max_bytes)
        outcome = "returned"
        del got
    except (BadMessage, TimeoutError) as e:
        outcome = type(e).__name__
    finally:
        elapsed = time.monotonic() - start
        judge.close()
        hostile.close()
    return outcome, elapsed


@pytest.fixture()
def arena() -> Any:
    made = Arena.create()
    assert made is not None
    yield made
    made.close()


# --- 1. a tiny header whose shared references `rebuild` turns into copies (billion laughs) ---------------


def test_shared_references_in_a_header_do_not_multiply_in_the_judge() -> None:
    inner = list(range(6000))
    blob = encode({"ok": True, "output": [inner] * 6000})  # torch.save memoizes `inner`: one copy sent
    assert len(blob) < 64 * 1024
    with peak_growth() as peak:
        outcome, elapsed = judge_receive(frame(blob), timeout_s=1.0, arena=None, max_bytes=MiB)
    assert peak.growth < 64 * MiB, f"{outcome}: judge grew {peak.growth >> 20} MiB for a {len(blob)} B header"
    assert elapsed < 4.0, f"{outcome} after {elapsed:.1f} s (timeout 1 s)"


# --- 2. decoding a header is not bounded by the deadline ------------------------------------------------


def test_decoding_a_header_stops_at_the_deadline() -> None:
    n = (8 * MiB) // 2
    blob = with_pickle(b"\x80\x02]" + b"Na" * n + b".")
    outcome, elapsed = judge_receive(frame(blob), timeout_s=0.5, arena=None, max_bytes=0)
    assert outcome == "BadMessage" and elapsed < 3.5, f"{outcome} after {elapsed:.1f} s (timeout 0.5 s)"


def test_a_header_of_many_small_containers_is_bounded() -> None:
    n = (8 * MiB) // 2
    blob = with_pickle(b"\x80\x02]" + b"}a" * n + b".")
    with peak_growth() as peak:
        outcome, elapsed = judge_receive(frame(blob), timeout_s=1.0, arena=None, max_bytes=0)
    assert peak.growth < 128 * MiB, (
        f"{outcome}: judge grew {peak.growth >> 20} MiB for a {len(blob)} B header"
    )
    assert elapsed < 4.0, f"{outcome} after {elapsed:.1f} s (timeout 1 s)"


# --- 3. the arena overlap check is quadratic and has no deadline ----------------------------------------


def test_many_small_arena_tensors_stop_at_the_deadline(arena: Arena) -> None:
    n = 60000  # the most a message may hold; last offset first, so that each lands before all others
    os.ftruncate(arena.fd, n * 64)  # what the judge reserved, or grown by the runner: it is not sealed
    mapping = arena.mapping()
    assert mapping is not None
    mapping[:] = b"\1" * len(mapping)  # written: the ranges are refused for overlapping, not for holes
    markers = [{MARK: i, "dtype": "uint8", "shape": [1], "at": (n - 1 - i) * 64} for i in range(n)]
    blob = encode({"ok": True, "output": markers})
    assert len(blob) < 4 * MiB  # under the header limit: the overlap check itself is what is timed
    outcome, elapsed = judge_receive(frame(blob), 1.0, arena, MiB)
    # Quadratic, it took 4.6 s for 20,000 (about 40 s for these); the deadline ends it in any case.
    assert elapsed < 4.0, f"{outcome} after {elapsed:.1f} s (timeout 1 s)"


# --- 4. zero-byte tensors are free against max_bytes ----------------------------------------------------


def test_zero_size_tensors_do_not_escape_the_byte_limit() -> None:
    n = 300_000
    marker = {MARK: 0, "dtype": "uint8", "shape": [0]}
    blob = encode({"ok": True, "output": [marker] * n})  # one dict, n references
    with peak_growth() as peak:
        outcome, _ = judge_receive(frame(blob) + frame(b"") * n, timeout_s=60.0, arena=None, max_bytes=MiB)
    assert outcome != "returned" or peak.growth < 64 * MiB, (
        f"judge grew {peak.growth >> 20} MiB under a 1 MiB limit"
    )


# --- 5. tensors inside the header itself (and a deflated header) ----------------------------------------


def _header_with_tensor(nbytes: int, deflate: bool) -> bytes:
    src = encode({"ok": True, "output": torch.zeros(nbytes, dtype=torch.uint8)})
    if not deflate:
        return src
    zin = zipfile.ZipFile(io.BytesIO(src))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for info in zin.infolist():
            z.writestr(info.filename, zin.read(info.filename), zipfile.ZIP_DEFLATED, 9)
    return out.getvalue()


@pytest.mark.parametrize("deflate", [True, False], ids=["deflated", "stored"])
def test_a_header_cannot_carry_tensor_bytes_past_the_limit(deflate: bool) -> None:
    nbytes = 512 * MiB if deflate else 32 * MiB
    blob = _header_with_tensor(nbytes, deflate)
    with peak_growth() as peak:
        outcome, _ = judge_receive(frame(blob), timeout_s=10.0, arena=None, max_bytes=MiB)
    assert outcome == "BadMessage", f"{outcome}: a {len(blob)} B header, judge grew {peak.growth >> 20} MiB"


# --- 6. malformed headers that end in something other than BadMessage -----------------------------------


MALFORMED = {
    # rebuild() recurses once per level: RecursionError (the judge reports INTERNAL_ERROR, a masked reward)
    "deep_nesting": (with_pickle(b"\x80\x02" + b"]" * 100_000 + b"a" * 99_999 + b"."), b""),
    # DTYPES.get(list) -> TypeError: unhashable type
    "unhashable_dtype": (encode({"ok": True, "output": {MARK: 0, "dtype": ["float32"], "shape": [1]}}), b""),
    # math.prod == 0 passes, reshape() overflows: TypeError
    "zero_size_huge_dim": (
        encode({"ok": True, "output": {MARK: 0, "dtype": "float32", "shape": [0, 2**64]}}),
        frame(b""),
    ),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_header_is_a_bad_message(name: str) -> None:
    blob, frames = MALFORMED[name]
    judge, hostile = mp.Pipe()
    deliver(hostile, frame(blob) + frames)
    try:
        with pytest.raises(BadMessage):
            receive(judge, None, 5.0, None, max_bytes=MiB)
    finally:
        judge.close()
        hostile.close()


# --- 7. holes in an arena the runner grew: the judge's reads allocate shmem that stays ------------------


def test_arena_holes_read_by_the_judge_do_not_accumulate(arena: Arena) -> None:
    size = 256 * MiB
    os.ftruncate(arena.fd, 4 * size)  # the runner's side: grow, write nothing
    base = _status("VmRSS")
    for i in range(4):
        blob = encode({"ok": True, "output": {MARK: 0, "dtype": "uint8", "shape": [size], "at": i * size}})
        outcome, _ = judge_receive(frame(blob), timeout_s=10.0, arena=arena, max_bytes=size + MiB)
        assert outcome == "BadMessage"  # a range nobody wrote is refused before it is read
        gc.collect()
    held = _status("VmRSS") - base
    allocated = os.fstat(arena.fd).st_blocks * 512
    assert max(held, allocated) < 2 * size, (
        f"judge holds {held >> 20} MiB, arena {allocated >> 20} MiB allocated"
    )


# --- 8. the request's timeout is per phase, not per request ---------------------------------------------


def _slow_peer(conn: Any, pause_s: float) -> None:
    """A runner that reads the judge's request slowly, answers just before the poll expires, and trickles
    the answer until just before receive's own deadline."""
    os.setpgrp()  # RunnerHandle.kill() signals its process group: its own
    fd = conn.fileno()
    end = time.monotonic() + pause_s
    while time.monotonic() < end:  # read the request's pipe frames slowly, all within the send watchdog
        with contextlib.suppress(BlockingIOError):
            os.read(fd, 4096)
        time.sleep(0.01)
    while True:
        import select

        r, _, _ = select.select([fd], [], [], 0.05)
        if not r:
            break
        os.read(fd, 1 << 20)
    time.sleep(pause_s)  # just inside poll(timeout_s)
    reply = frame(encode({"ok": True, "output": 1}))
    os.write(fd, reply[:3])
    time.sleep(pause_s)  # just inside receive's deadline
    os.write(fd, reply[3:])
    time.sleep(30)


def test_a_request_ends_within_its_timeout() -> None:
    from evalsvc.engine.launcher import RunnerHandle

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=True)
    proc = ctx.Process(target=_slow_peer, args=(child, 1.9), daemon=True)
    proc.start()
    child.close()
    handle = RunnerHandle(
        proc, parent, Path(tempfile.mkdtemp()), "cpu", None, os.getuid(), reply_limit=64 * MiB
    )
    handle.ready = True
    start = time.monotonic()
    try:
        with contextlib.suppress(Exception):
            handle.request({"op": "run", "x": torch.zeros(8 * MiB, dtype=torch.uint8)}, timeout_s=2.0)
        elapsed = time.monotonic() - start
    finally:
        handle.kill()
        parent.close()
    # Each phase had the whole timeout: ~5.7 s held on a 2 s request; one deadline ends it near 2 s.
    assert elapsed < 4.0, f"the judge was held {elapsed:.1f} s on a 2 s request"


# --- 9. a GPU judge takes pipe frames up to 32 GiB into host memory ------------------------------------


class _NoProcess:
    pid = None
    exitcode = None

    def start(self) -> None:
        pass

    def join(self, timeout: float | None = None) -> None:
        pass

    def is_alive(self) -> bool:
        return False


def test_a_gpu_judge_holds_no_more_host_memory_than_the_runner_may(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from evalsvc.engine import launcher as launcher_mod

    limit = 256 * MiB
    launcher = launcher_mod.RunnerLauncher(
        "cuda:0", isolate=False, limits=launcher_mod.RunnerLimits(memory_bytes=limit), scratch_root=tmp_path
    )
    monkeypatch.setattr(launcher._ctx, "Process", lambda *a, **kw: _NoProcess())
    handle = launcher._spawn()
    reply_limit = handle.reply_limit
    handle.close()

    n = 1 << 30
    piece = bytes(64 * MiB)  # all the runner holds
    judge, hostile = mp.Pipe()

    def feed() -> None:
        with contextlib.suppress(OSError):
            hostile.send_bytes(encode({"ok": True, "output": {MARK: 0, "dtype": "uint8", "shape": [n]}}))
            os.write(hostile.fileno(), struct.pack("!i", -1) + struct.pack("!Q", n))
            for _ in range(n // len(piece)):
                view = memoryview(piece)
                while view:
                    view = view[os.write(hostile.fileno(), view) :]

    threading.Thread(target=feed, daemon=True).start()
    try:
        with peak_growth() as peak:
            try:
                got = receive(judge, "meta", 30.0, None, max_bytes=reply_limit)
                outcome = "returned"
                del got
            except BadMessage:
                outcome = "BadMessage"
    finally:
        judge.close()
        hostile.close()
    assert outcome == "BadMessage" or peak.growth < limit, (
        f"{outcome} (reply_limit {reply_limit >> 20} MiB): judge host grew {peak.growth >> 20} MiB"
    )


# --- 10. a task process's non-BadMessage reply: not failed, and its pipe out of step for the next ------


def _task_peer(conn: Any) -> None:
    """A task's process: answers the first request with a header that ends in TypeError in the judge and,
    right behind it, a whole second reply staged for whichever evaluation asks next; then never answers."""
    os.setpgrp()
    conn.recv_bytes()  # the first request's header (it carries no tensors)
    bad = encode({"ok": True, "output": {MARK: 0, "dtype": "float32", "shape": [0, 2**64]}})
    staged = encode({"ok": True, "output": "staged before the request was sent"})
    os.write(conn.fileno(), frame(bad) + frame(b"") + frame(staged))
    time.sleep(60)


def test_a_task_process_that_sends_a_malformed_reply_is_failed_not_reused() -> None:
    from types import SimpleNamespace

    from evalsvc.engine.launcher import RunnerHandle, RunnerLimits
    from evalsvc.engine.reference import TaskProcess

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=True)
    proc = ctx.Process(target=_task_peer, args=(child,), daemon=True)
    proc.start()
    child.close()
    handle = RunnerHandle(proc, parent, Path(tempfile.mkdtemp()), "cpu", None, os.getuid(), reply_limit=MiB)
    handle.ready = True
    task = TaskProcess(handle, SimpleNamespace(id="t"), SimpleNamespace(limits=RunnerLimits()))  # type: ignore[arg-type]
    try:
        try:
            task.request({"op": "inputs", "seed": 1}, timeout_s=5.0)
            first = "returned"
        except Exception as e:
            first = type(e).__name__
        failed = task.failed
        try:  # the next evaluation's turn on this task process
            second: Any = task.request({"op": "inputs", "seed": 2}, timeout_s=2.0)
        except Exception as e:
            second = type(e).__name__
    finally:
        handle.kill()
        parent.close()
    assert first == "ReferenceFailed" and failed, f"first request: {first}, task process failed: {failed}"
    assert second == "ReferenceFailed", f"the next request got {second!r}"
