"""Read tasks and solutions from the filesystem the way users keep them."""

from __future__ import annotations

import json
from pathlib import Path

from evalsvc.core.solutions import Solution, SolutionFormat
from evalsvc.core.tasks import TaskMeta, TaskSpec

SOLUTION_SUFFIXES = {".py", ".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp"}


def read_task(path: Path, meta_path: Path | None = None) -> TaskSpec:
    """A task file; metadata from --meta, or a `meta.json` beside the task file."""
    meta_file = meta_path or path.with_name("meta.json")
    meta = TaskMeta.model_validate(json.loads(meta_file.read_text())) if meta_file.is_file() else TaskMeta()
    return TaskSpec(source=path.read_text(), meta=meta, name=path.parent.name or path.stem)


def read_solution(path: Path) -> Solution:
    """A .py file is a KernelBench solution; a directory is a CUDA Agent working tree."""
    if path.is_file():
        return Solution.single_file(path.read_text())
    files = {
        str(p.relative_to(path)): p.read_text()
        for p in sorted(path.rglob("*"))
        if p.is_file()
        and p.suffix in SOLUTION_SUFFIXES
        and p.name not in ("binding.cpp", "binding_registry.h")
        and "__pycache__" not in p.parts
    }
    return Solution(files=files, format=SolutionFormat.CUDA_AGENT)
