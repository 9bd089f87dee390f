"""Reads the exploit and honest corpora: each entry's header, and the task it is evaluated on."""

from __future__ import annotations

from pathlib import Path

from evalsvc.cli_files import read_task
from evalsvc.core.tasks import TaskSpec

CORPUS = Path(__file__).parent
# The compile stage's screens as an entry's `screens:` header names them (default on).
SCREENS = {"on": frozenset({"sources", "objects"}), "off": frozenset(), "objects": frozenset({"objects"})}
ROOT = CORPUS.parents[1]
EXAMPLES = ROOT / "evalsvc" / "examples"


def header(path: Path) -> dict[str, str]:
    """The leading `# key: value` lines of a solution file (of model_new.py for a CUDA Agent tree)."""
    entry = path / "model_new.py" if path.is_dir() else path
    out = {}
    for line in entry.read_text().splitlines():
        if not line.startswith("# "):
            break
        key, _, value = line[2:].partition(": ")
        out[key.strip()] = value.strip()
    return out


def written_for_fast_path(path: Path) -> bool:
    """`build: full`: the attack finds a library from an address in libtorch that the fast path's stand-in
    keeps in the candidate's own library; judged on the build it was written against."""
    return header(path).get("build") != "full"


def entries(kind: str, devices: tuple[str, ...]) -> list[Path]:
    """`exploits` or `honest` entries whose `device` header is one of `devices`."""
    root = CORPUS / kind
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.suffix == ".py" or (p / "model_new.py").is_file()]
    return sorted(p for p in found if header(p).get("device", "any") in devices)


def small_task_path(task_id: str) -> Path:
    """The CPU-sized copy of a bundled example task's file (tests/corpus/tasks), else the example's."""
    small = CORPUS / "tasks" / task_id / "task.py"
    return small if small.is_file() else EXAMPLES / task_id / "task.py"


def small_task(task_id: str) -> TaskSpec:
    return read_task(small_task_path(task_id))


def task_for(path: Path, device: str) -> TaskSpec:
    """The entry's task at the size judged on `device`: on the CPU the CPU-sized copy under tests/corpus/tasks
    when there is one, on a GPU the example's `task_cuda.py` when there is one (the size its CUDA
    solutions are judged at)."""
    h = header(path)
    name = h["task"]
    gpu = device.startswith("cuda")
    candidates = [EXAMPLES / name / "task_cuda.py"] if gpu else [CORPUS / "tasks" / name / "task.py"]
    candidates += [ROOT / name / "task.py", EXAMPLES / name / "task.py"]
    task = read_task(next(p for p in candidates if p.is_file()))
    if h.get("allow_vendor_libs") == "true":
        task = task.model_copy(update={"meta": task.meta.model_copy(update={"allow_vendor_libs": True})})
    return task
