"""`run.json` for a device run: the commit whose code ran (from the COMMIT file that travels with the tree,
which has no .git there), the GPU, driver, CUDA, torch and Python, the SM clock, and when it started and
ended. Called once with `start` before the steps and once with `end` after them.

    python -m bench.run_record start --out OUTDIR
    python -m bench.run_record end --out OUTDIR
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SMI_FIELDS = ("name", "uuid", "driver_version", "clocks.sm", "clocks.max.sm", "temperature.gpu", "power.draw")


def _smi() -> dict[str, str]:
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return {"error": f"nvidia-smi: {e}"}
    first = out.strip().splitlines()[0] if out.strip() else ""
    return dict(zip(SMI_FIELDS, (v.strip() for v in first.split(",")), strict=False))


def _software() -> dict[str, Any]:
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu_from_torch": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("when", choices=("start", "end"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--commit-file", type=Path, default=Path("COMMIT"))  # cwd is the copied tree
    args = ap.parse_args()
    path = args.out / "run.json"
    now = datetime.now(UTC).isoformat(timespec="seconds")
    smi = _smi()
    if args.when == "start":
        commit = args.commit_file.read_text().strip() if args.commit_file.is_file() else None
        doc: dict[str, Any] = {"commit": commit, "started": now, "host": platform.node(), **_software()}
        doc["gpu"] = {k: smi.get(k) for k in ("name", "uuid", "driver_version", "clocks.max.sm")}
        doc["before"] = smi
    else:
        doc = json.loads(path.read_text()) if path.is_file() else {}
        doc["ended"] = now
        doc["after"] = smi
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
