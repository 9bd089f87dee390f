"""bench/reward_stability.py for real, as CI runs it: the honest CPU relu solution evaluated in three fresh
processes keeps its milestone, or says the flip was uncertain. Nothing here rests on timing spreads: a
loaded CI machine moves those, and a verdict that depends on speed is a flaky test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPEATS = 3
PER_REPEAT = (
    "statuses",
    "rewards",
    "milestones",
    "uncertain",
    "speedup_eager",
    "speedup_compile",
    "eager_ms",
    "compile_ms",
    "candidate_ms",
)

# A cold build of the extension, then three processes that each import torch and time all three medians.
pytestmark = [
    pytest.mark.timeout(1800),
    pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the CPU extension"),
]


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data dir any uid can traverse: as root the runner drops to a uid of its own (pytest's tmp_path is
    0700 under root)."""
    with tempfile.TemporaryDirectory(prefix="evalsvc-stability-") as d:
        os.chmod(d, 0o755)
        yield Path(d)


def test_honest_relu_keeps_its_milestone_across_processes(tmp_path: Path, data_dir: Path) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "bench.reward_stability", "--device", "cpu", "--repeats", str(REPEATS)]
    cmd += ["--only", "l1/relu", "--out", str(out), "--data-dir", str(data_dir)]
    t0 = time.monotonic()
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1500)
    print(f"bench took {time.monotonic() - t0:.0f} s\n{run.stdout}")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    doc = json.loads((out / "reward_stability.json").read_text())
    assert doc["device"] == "cpu" and doc["repeats"] == REPEATS
    assert [r["solution"] for r in doc["rows"]] == ["l1/relu/cpu_ok.py"]
    row = doc["rows"][0]
    for key in PER_REPEAT:
        assert len(row[key]) == REPEATS, (key, row[key])
    assert row["statuses"] == ["ok"] * REPEATS, row
    assert row["errors"] == [], row["errors"]
    assert not any(r["unmarked_flip"] for r in doc["rows"]), row
    assert (out / "reward_stability.md").is_file()


def test_a_flip_is_marked_only_when_at_most_one_side_claims_confidence() -> None:
    from bench.reward_stability import spread, unmarked_flip

    assert not unmarked_flip([1, 1, 1], [False, False, False])
    assert not unmarked_flip([1, 2, 1], [False, True, False])  # the odd one out said it was unsure
    assert not unmarked_flip([1, 2, 2], [True, False, False])
    assert unmarked_flip([1, 2, 1], [False, False, True])  # both sides have a confident repeat
    assert unmarked_flip([1, 2, 3], [False, True, False])
    assert not unmarked_flip([1, None, 2], [True, None, False])  # a missing repeat takes no part
    assert spread([1.0, None, 1.5, 2.0]) == pytest.approx(2 / 3)
    assert spread([1.0, None]) is None
