"""Candidate solutions: a KernelBench single file or a CUDA Agent file tree, validated as data."""

from __future__ import annotations

import ast
import re
from enum import StrEnum
from pathlib import PurePosixPath

from pydantic import BaseModel, Field, field_validator, model_validator

from evalsvc.core.hashing import content_hash

MAX_FILES = 64
MAX_TOTAL_BYTES = 2 * 1024 * 1024
_SAFE_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_ALLOWED_SUFFIXES = {".py", ".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp"}


class InvalidSolution(ValueError):
    """The solution cannot be accepted; the message says why."""


class SolutionFormat(StrEnum):
    KERNELBENCH = "kernelbench"
    CUDA_AGENT = "cuda_agent"


TRITON = "triton"  # a KernelBench file that launches @triton.jit kernels (detected, not declared)


KERNEL_DECORATORS = {"jit", "autotune", "heuristics"}


def _imports(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(names bound to the triton module or a submodule, names bound to triton.jit/autotune/heuristics)."""
    modules: set[str] = set()
    decorators: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "triton":
                    modules.add(a.asname or "triton")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "") == "triton":
            decorators.update(a.asname or a.name for a in node.names if a.name in KERNEL_DECORATORS)
    return modules, decorators


def _is_kernel(fn: ast.FunctionDef | ast.AsyncFunctionDef, modules: set[str], decorators: set[str]) -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Name) and target.id in decorators:
            return True
        if (
            isinstance(target, ast.Attribute)
            and target.attr in KERNEL_DECORATORS
            and isinstance(target.value, ast.Name)
            and target.value.id in modules
        ):
            return True
    return False


def imports_triton(files: dict[str, str]) -> bool:
    """Whether a Python file imports triton and defines a `@triton.jit` kernel (under autotune or heuristics
    too) that its code names somewhere besides the definition (a launch, `kernel[grid](...)`): what makes a
    KernelBench solution a Triton one. A file that only imports triton, or defines kernels it never names,
    stays a plain KernelBench solution: it gains nothing that Triton's rules relax (the interpreter, the CPU
    library check), and the screen refuses Triton's runtime in it all the same. Kernels and the names read
    are gathered over all the files: a kernel of one file may be launched from another."""
    kernels: set[str] = set()
    named: set[str] = set()
    for name, text in files.items():
        if not name.endswith(".py"):
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # the screen refuses it as syntax-error or too-complex
        modules, decorators = _imports(tree)
        for n in ast.walk(tree):
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and _is_kernel(n, modules, decorators):
                kernels.add(n.name)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                named.add(n.id)
            elif isinstance(n, ast.alias):  # `from kernels import relu_kernel`
                named.add(n.asname or n.name)
    return bool(kernels & named)


def check_relative_path(path: str) -> str:
    """Accept only plain relative paths made of safe names: no '..', no absolute paths, no odd bytes."""
    if not path or "\\" in path or "\x00" in path:
        raise InvalidSolution(f"bad file name {path!r}")
    p = PurePosixPath(path)
    if p.is_absolute():
        raise InvalidSolution(f"absolute path not allowed: {path!r}")
    if len(p.parts) > 3:
        raise InvalidSolution(f"path too deep: {path!r}")
    for part in p.parts:
        if part in (".", "..") or not _SAFE_PART.match(part):
            raise InvalidSolution(f"unsafe path component {part!r} in {path!r}")
    if p.suffix not in _ALLOWED_SUFFIXES:
        raise InvalidSolution(f"file type not allowed: {path!r} (allowed: {sorted(_ALLOWED_SUFFIXES)})")
    return str(p)


class Solution(BaseModel):
    """Source files of a candidate, keyed by relative path."""

    files: dict[str, str] = Field(min_length=1)
    format: SolutionFormat = SolutionFormat.KERNELBENCH

    @field_validator("files")
    @classmethod
    def _validate_files(cls, files: dict[str, str]) -> dict[str, str]:
        if len(files) > MAX_FILES:
            raise InvalidSolution(f"too many files ({len(files)} > {MAX_FILES})")
        total = sum(len(v.encode()) for v in files.values())
        if total > MAX_TOTAL_BYTES:
            raise InvalidSolution(f"solution too large ({total} bytes > {MAX_TOTAL_BYTES})")
        out: dict[str, str] = {}
        for name, text in files.items():
            path = check_relative_path(name)
            if path in out:  # `./solution.py` beside `solution.py`: one would silently replace the other
                raise InvalidSolution(f"two files name {path!r} (one of them as {name!r})")
            out[path] = text
        if not any(v.strip() for v in out.values()):
            raise InvalidSolution("solution is empty")
        return out

    @classmethod
    def single_file(cls, source: str) -> Solution:
        return cls(files={"solution.py": source}, format=SolutionFormat.KERNELBENCH)

    @property
    def entry(self) -> str:
        """The Python module that defines ModelNew."""
        if self.format is SolutionFormat.CUDA_AGENT:
            return "model_new.py"
        pys = [k for k in self.files if k.endswith(".py")]
        return "solution.py" if "solution.py" in self.files else (pys[0] if pys else "solution.py")

    @model_validator(mode="after")
    def _layout(self) -> Solution:
        self.check_layout()
        return self

    def check_layout(self) -> None:
        if self.entry not in self.files:
            raise InvalidSolution(f"{self.format.value} solution needs {self.entry}")
        if self.format is SolutionFormat.CUDA_AGENT:
            if not any(k.startswith("kernels/") and k.endswith(".cu") for k in self.files):
                raise InvalidSolution("cuda_agent solution needs kernels/*.cu")
            reserved = {"binding.cpp", "binding_registry.h"} & set(self.files)
            if reserved:
                raise InvalidSolution(f"files provided by the environment must not be submitted: {reserved}")

    @property
    def kind(self) -> str:
        """What the result's `solution_format` says: `triton` for a KernelBench file launching Triton
        kernels, else the submitted format."""
        if self.format is SolutionFormat.KERNELBENCH and imports_triton(self.files):
            return TRITON
        return self.format.value

    @property
    def id(self) -> str:
        return "s_" + content_hash(self.format.value, self.files)
