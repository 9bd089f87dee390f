"""The hostile corpus on a real device: each case's status, then an honest solution on the same device.

python -m bench.gpu_hostile --device cuda --out OUTDIR [--screens off]
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
from pathlib import Path

from bench.report import write_report
from evalsvc.cli_files import read_solution, read_task
from evalsvc.core.options import EvalOptions
from evalsvc.settings import Settings
from evalsvc.wiring import make_local_pipeline
from tests.corpus.reader import SCREENS

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus" / "hostile"


def header(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if not line.startswith("# "):
            break
        k, _, v = line[2:].partition(": ")
        out[k] = v
    return out


def listen(port: int, received: list[bytes]) -> None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen()

    def serve() -> None:
        while True:
            conn, _ = s.accept()
            received.append(conn.recv(1024) or b"<connected>")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("var/bench"))
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument(
        "--screens",
        choices=sorted(SCREENS),
        default="on",
        help="off: sandbox and runner alone",
    )
    args = ap.parse_args()
    kind = "cuda" if args.device.startswith("cuda") else "cpu"
    settings = Settings(
        device=args.device,
        data_dir=args.data_dir.resolve(),
        compile_backend="process",
        compile_timeout_s=60,
        runner_call_timeout_s=20,
        runner_memory_bytes=8 * 1024**3,
    )
    pipe = make_local_pipeline(settings, with_pch=False)
    pipe.compiler.screens = SCREENS[args.screens]
    received: list[bytes] = []
    listen(47613, received)
    task = read_task(CORPUS / "task.py")
    honest = read_solution(ROOT / "evalsvc" / "examples" / "l1" / "relu" / f"{kind}_ok.py")
    opts = EvalOptions(trials=2, timing_budget_s=0.3, compile_baseline=False, timing_pool=2)
    rows = []
    for path in sorted(CORPUS.glob("*.py")):
        h = header(path)
        if (
            path.name == "task.py"
            or h.get("device") not in ("any", kind)
            or (args.only and path.stem not in args.only)
        ):
            continue
        r = pipe.evaluate(task, read_solution(path), opts)
        after = pipe.evaluate(task, honest, opts)
        row = {
            "case": path.stem,
            "trick": h.get("trick"),
            "expected": h.get("expect"),
            "got": r.status.value,
            "reward": r.reward,
            "message": (r.message or "")[:200],
            "next_honest": after.status.value,
            "next_honest_reward": after.reward,
            "next_honest_message": (after.message or "")[:1000] if after.status.value != "ok" else "",
            "listener_received": len(received),
            "screens": args.screens,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    lines = ["| case | expected | got | next honest submission | listener got |", "|---|---|---|---|---|"]
    lines += [
        f"| {r['case']} | {r['expected']} | {r['got']} | "
        f"{r['next_honest']} (reward {r['next_honest_reward']:g}) "
        f"| {r['listener_received']} |"
        for r in rows
    ]
    write_report(args.out, "hostile", rows, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
