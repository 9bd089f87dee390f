"""Judge-runner transport, side by side in one run: the same tensor to a runner process and back, as pipe
frames and through the shared arena (`evalsvc.engine.codec`).

    python -m bench.transport --device cuda --mb 80 --rounds 5

The runner side is a forkserver child like a real runner (no isolation): it receives the tensor on the
device, multiplies it by one and sends it back. The first round of each mode includes the child's start
(and, on a GPU, its CUDA context); the table reports the median of the rest.

On a GPU a third mode registers the arena's mapping with CUDA on both sides (`cudaHostRegister`, page-
locked, as `pin_memory` would be): copies then skip the driver's staging buffer, but every runner's new
arena pays the registration once per side (reported as `judge_pin_ms`; the runner's is in its first round).
Measured here before the service adopts it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import time
from typing import Any

import torch

from evalsvc.engine.codec import Arena, receive, send


class PinnedArena(Arena):
    """The arena with each new mapping registered with CUDA (page-locked) in the process that maps it."""

    def __init__(self, fd: int) -> None:
        super().__init__(fd)
        self._pinned: Any = None  # a tensor viewing the registered mapping (keeps it mapped)
        self.pin_s = 0.0

    def __reduce__(self) -> tuple[Any, ...]:
        from multiprocessing.reduction import DupFd

        return _pinned_from, (DupFd(self.fd),)

    def mapping(self) -> Any:
        m = super().mapping()
        if m is not None and (self._pinned is None or self._pinned.numel() != len(m)):
            cudart = torch.cuda.cudart()
            if self._pinned is not None:
                cudart.cudaHostUnregister(self._pinned.data_ptr())
            t = time.perf_counter()
            view = torch.frombuffer(m, dtype=torch.uint8)
            err = cudart.cudaHostRegister(view.data_ptr(), view.numel(), 0)
            self.pin_s += time.perf_counter() - t
            if err != cudart.cudaError.success:
                raise RuntimeError(f"cudaHostRegister failed: {err}")
            self._pinned = view
        return m


def _pinned_from(dup: Any) -> PinnedArena:
    return PinnedArena(dup.detach())


def _echo(conn: Any, arena: Arena | None, device: str) -> None:
    dev = torch.device(device)
    while (msg := receive(conn, map_location=dev, arena=arena)) is not None:
        send(conn, {"ok": True, "output": msg["x"] * 1}, arena)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--mb", type=int, default=80)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    ctx = mp.get_context("forkserver")
    dev = torch.device(args.device)
    x = torch.randn(args.mb * 1024**2 // 4, device=dev)
    rows = {}
    modes: list[tuple[str, Arena | None]] = [("pipe frames", None), ("shared arena", Arena.create())]
    if dev.type == "cuda":
        plain = Arena.create()
        assert plain is not None
        modes.append(("shared arena, page-locked", PinnedArena(os.dup(plain.fd))))
    for mode, arena in modes:
        parent, child = ctx.Pipe(duplex=True)
        proc = ctx.Process(target=_echo, args=(child, arena, args.device), daemon=True)
        proc.start()
        times = []
        for _ in range(args.rounds):
            _sync(dev)
            t = time.perf_counter()
            send(parent, {"x": x}, arena, grow=True)
            reply = receive(parent, map_location=dev, arena=arena)
            _sync(dev)
            times.append(time.perf_counter() - t)
            assert torch.equal(reply["output"], x)
        send(parent, None)
        proc.join(30)
        rest = times[1:] or times
        rows[mode] = {"first_s": round(times[0], 3), "median_ms": round(1e3 * statistics.median(rest), 1)}
        rows[mode]["gb_per_s"] = round(2 * x.numel() * 4 / statistics.median(rest) / 1e9, 2)
        if isinstance(arena, PinnedArena):
            rows[mode]["judge_pin_ms"] = round(1e3 * arena.pin_s, 1)
    print(f"| {args.mb} MB each way on {args.device} | first round s | median ms (rounds 2+) | GB/s |")
    print("|---|---|---|---|")
    for mode, r in rows.items():
        print(f"| {mode} | {r['first_s']} | {r['median_ms']} | {r['gb_per_s']} |")
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
