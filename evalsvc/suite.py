"""Suite files: tasks, solutions and what each solution is expected to get (the bundled example suite is
evalsvc/examples/suite.json; `evalsvc gate` reads any file of that format, paths relative to it)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsvc.cli_files import read_solution, read_task
from evalsvc.core.results import Status
from evalsvc.core.solutions import Solution
from evalsvc.core.tasks import TaskSpec

EXAMPLES = Path(__file__).parent / "examples"
BOUNDS = ("min_reward", "min_speedup_eager", "min_speedup_compile")


class SuiteError(ValueError):
    """A suite file that cannot be read as one; the message names the file and the entry."""


@dataclass(frozen=True)
class SuiteCase:
    task_id: str
    task_path: Path
    solution_path: Path
    device: str  # "cpu" or "cuda": the device kind the solution is written for
    expect: str  # a Status value
    base: Path = EXAMPLES
    min_reward: float | None = None
    min_speedup_eager: float | None = None
    min_speedup_compile: float | None = None

    @property
    def name(self) -> str:
        """The solution's path as the suite file gives it (relative to the file, where it is)."""
        return (
            str(self.solution_path.relative_to(self.base))
            if self.solution_path.is_relative_to(self.base)
            else str(self.solution_path)
        )

    def task(self) -> TaskSpec:
        return read_task(self.task_path)

    def solution(self) -> Solution:
        return read_solution(self.solution_path)


def load(path: Path) -> list[SuiteCase]:
    """Every case of a suite file; SuiteError naming what is wrong (a missing file, an unknown status, a
    bound that is not a finite number) before anything runs."""
    try:
        data = json.loads(path.read_text())
        base = path.parent
        out = []
        for t in data["tasks"]:
            for s in t["solutions"]:
                out.append(_case(base, t, s))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SuiteError(f"{path}: {e}") from None
    return out


def _case(base: Path, t: dict[str, Any], s: dict[str, Any]) -> SuiteCase:
    where = f"task {t['id']!r}, solution {s['path']!r}"
    if s["device"] not in ("cpu", "cuda"):
        raise SuiteError(f"{where}: device must be 'cpu' or 'cuda', not {s['device']!r}")
    Status(s["expect"])  # ValueError names the unknown status
    bounds = {}
    for key in BOUNDS:
        value = s.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise SuiteError(f"{where}: {key} must be a number, not {value!r}")
        if value is not None and not math.isfinite(value):
            raise SuiteError(f"{where}: {key} must be finite")
        bounds[key] = None if value is None else float(value)
    task = base / t.get("task_by_device", {}).get(s["device"], t["task"])  # sized for the device
    solution = base / s["path"]
    for p in (task, solution):
        if not p.exists():
            raise SuiteError(f"{where}: {p} does not exist")
    return SuiteCase(t["id"], task, solution, s["device"], s["expect"], base, **bounds)


def cases(device: str | None = None) -> list[SuiteCase]:
    """The bundled example suite's cases, those for `device` ("cpu" or "cuda") when given."""
    return [c for c in load(EXAMPLES / "suite.json") if device is None or c.device == device]


def example_pair(task_id: str, device: str) -> tuple[TaskSpec, Solution]:
    """The task and its honest solution for `device` (the demo of `evalsvc up`)."""
    for c in cases(device):
        if c.task_id == task_id and c.expect == "ok":
            return c.task(), c.solution()
    raise KeyError(f"no honest {device} solution for {task_id}")
