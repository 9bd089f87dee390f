"""Judge-runner transport, side by side in one run: the same tensor to a runner process and back, as pipe
frames and through the shared arena (`evalsvc.engine.codec`).

    python -m bench.transport --device cuda --mb 80 --rounds 5

The runner side is a forkserver child like a real runner (no isolation): it receives the tensor on the
device, multiplies it by one and sends it back. The first round of each mode includes the child's start
(and, on a GPU, its CUDA context); the table reports the median of the rest.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import time
from typing import Any

import torch

from evalsvc.engine.codec import Arena, receive, send


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
    for mode, arena in (("pipe frames", None), ("shared arena", Arena.create())):
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
    print(f"| {args.mb} MB each way on {args.device} | first round s | median ms (rounds 2+) | GB/s |")
    print("|---|---|---|---|")
    for mode, r in rows.items():
        print(f"| {mode} | {r['first_s']} | {r['median_ms']} | {r['gb_per_s']} |")
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
