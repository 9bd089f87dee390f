"""The bundled example suite (evalsvc/examples): tasks, honest and broken solutions, expected verdicts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from evalsvc.cli_files import read_solution, read_task
from evalsvc.core.solutions import Solution
from evalsvc.core.tasks import TaskSpec

EXAMPLES = Path(__file__).parent / "examples"


@dataclass(frozen=True)
class SuiteCase:
    task_id: str
    task_path: Path
    solution_path: Path
    device: str
    expect: str

    @property
    def name(self) -> str:
        return str(self.solution_path.relative_to(EXAMPLES))

    def task(self) -> TaskSpec:
        return read_task(self.task_path)

    def solution(self) -> Solution:
        return read_solution(self.solution_path)


def cases(device: str | None = None) -> list[SuiteCase]:
    data = json.loads((EXAMPLES / "suite.json").read_text())
    out = []
    for t in data["tasks"]:
        for s in t["solutions"]:
            if device is None or s["device"] == device:
                task = EXAMPLES / t.get("task_by_device", {}).get(s["device"], t["task"])  # sized for it
                out.append(SuiteCase(t["id"], task, EXAMPLES / s["path"], s["device"], s["expect"]))
    return out


def example_pair(task_id: str, device: str) -> tuple[TaskSpec, Solution]:
    """The task and its honest solution for `device` (the demo of `evalsvc up`)."""
    for c in cases(device):
        if c.task_id == task_id and c.expect == "ok":
            return c.task(), c.solution()
    raise KeyError(f"no honest {device} solution for {task_id}")
