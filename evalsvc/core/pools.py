"""Task pools: where a task came from, what vetting found, curated suites and their train/held-out split.

Pure data and rules (no torch, no I/O): the importers, the vetting job and the Redis store build on it.
"""

from __future__ import annotations

import ast
import statistics
import time
from enum import StrEnum

from pydantic import BaseModel, Field

from evalsvc.core.hashing import content_hash

SUITE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class PoolSource(StrEnum):
    """The format a task was imported from."""

    KERNELBENCH = "kernelbench"
    OPS6K = "ops6k"
    FOLDER = "folder"


class PoolEntry(BaseModel):
    """A task's pool metadata: the first origin it was imported from (content-addressed, so a task met
    again under another name keeps its first record)."""

    task_id: str
    name: str
    source: PoolSource
    origin: str = Field(description="file path, or parquet file and row, it was read from")
    tags: dict[str, str] = Field(default_factory=dict, description="level, operators, data_source, ...")


class VetStatus(StrEnum):
    OK = "ok"
    WARN = "warn"
    REJECTED = "rejected"


class VetReason(StrEnum):
    """Why a task is weak or unusable; each reason has one severity (`SEVERITY`)."""

    INVALID_TASK = "invalid_task"
    EAGER_ERROR = "eager_error"
    NON_FINITE = "non_finite_output"
    CONSTANT_OUTPUT = "constant_output"
    NONDETERMINISTIC = "nondeterministic"
    TOO_FAST = "too_fast"
    TOO_SLOW = "too_slow"
    OUT_OF_MEMORY = "out_of_memory"
    COMPILE_ERROR = "compile_error"
    TINY_OUTPUT = "tiny_output"
    COMPILE_MISMATCH = "compile_mismatch"
    VET_ERROR = "vet_error"  # our own failure while vetting: the task is held back until vetted again


SEVERITY: dict[VetReason, VetStatus] = {
    VetReason.INVALID_TASK: VetStatus.REJECTED,
    VetReason.EAGER_ERROR: VetStatus.REJECTED,
    VetReason.NON_FINITE: VetStatus.REJECTED,
    VetReason.CONSTANT_OUTPUT: VetStatus.REJECTED,
    VetReason.NONDETERMINISTIC: VetStatus.REJECTED,
    VetReason.TOO_FAST: VetStatus.REJECTED,
    VetReason.TOO_SLOW: VetStatus.REJECTED,
    VetReason.OUT_OF_MEMORY: VetStatus.REJECTED,
    VetReason.COMPILE_ERROR: VetStatus.REJECTED,
    VetReason.VET_ERROR: VetStatus.REJECTED,
    # weak but usable: evaluations compare by norm-relative error / compare against eager only
    VetReason.TINY_OUTPUT: VetStatus.WARN,
    VetReason.COMPILE_MISMATCH: VetStatus.WARN,
}


class VetFinding(BaseModel):
    reason: VetReason
    message: str


class VetPolicy(BaseModel):
    """What a sound task must satisfy on the device it is vetted on. The window starts at 0.1 ms, where
    KernelBench's L1/L2 tasks start, not at CUDA-Agent-Ops-6K's 1 ms: the judge's timing read a 43 µs
    kernel within 2% of `do_bench` on the H200 (docs/performance.md); pass 1 ms to apply Ops-6K's filter."""

    min_eager_ms: float = Field(0.1, ge=0)
    max_eager_ms: float = Field(100.0, gt=0)
    check_compile: bool = Field(True, description="also run (and time) the task under torch.compile")
    memory_fraction: float = Field(
        0.45, gt=0, le=1, description="share of the device's memory one task may peak at (judge + runner)"
    )
    timing_budget_s: float = Field(5.0, gt=0, le=120, description="as EvalOptions: part of the baseline key")
    target_rel_ci: float = Field(0.01, gt=0, le=0.5, description="as EvalOptions: part of the baseline key")


class VetRecord(BaseModel):
    """The outcome of vetting one task on one device class."""

    task_id: str
    device_class: str
    device_name: str
    torch_version: str
    status: VetStatus
    findings: list[VetFinding] = Field(default_factory=list)
    eager_ms: float | None = None
    compiled_ms: float | None = None
    compile_checked: bool = False
    relative_check: bool = Field(False, description="evaluations of this task compare norm-relative error")
    peak_memory_bytes: int | None = None
    vetted_at: float
    duration_s: float = 0.0
    run: str | None = Field(None, description="the `evalsvc tasks vet` run that asked for it")

    @property
    def compile_speedup(self) -> float | None:
        """eager / torch.compile: above 1 when torch.compile is faster."""
        if self.eager_ms and self.compiled_ms:
            return self.eager_ms / self.compiled_ms
        return None


def status_of(findings: list[VetFinding]) -> VetStatus:
    """The worst severity among the findings; ok without any."""
    severities = {SEVERITY[f.reason] for f in findings}
    for s in (VetStatus.REJECTED, VetStatus.WARN):
        if s in severities:
            return s
    return VetStatus.OK


class Split(StrEnum):
    TRAIN = "train"
    HELDOUT = "heldout"


def split_of(task_id: str, seed: int, heldout_fraction: float) -> Split:
    """A task's side of a split: a hash of (task id, seed), so it never depends on what else is in the
    suite, and a task stays on its side when the suite grows."""
    bucket = int(content_hash("split", task_id, seed, length=16), 16) / 16**16
    return Split.HELDOUT if bucket < heldout_fraction else Split.TRAIN


def sample_ids(task_ids: list[str], n: int, seed: int) -> list[str]:
    """`n` ids drawn deterministically for `seed` (the same draw on every call and every server)."""
    ranked = sorted(task_ids, key=lambda t: content_hash("sample", seed, t, length=16))
    return ranked[:n]


class Suite(BaseModel):
    """A named, versioned set of task ids; a new version is made only when the set changes."""

    name: str = Field(pattern=SUITE_NAME)
    version: int = Field(1, ge=1)
    description: str = Field("", max_length=2000)
    task_ids: list[str] = Field(default_factory=list)
    created_at: float = 0.0
    split_seed: int = Field(0, description="seed of the suite's fixed train/held-out split")
    heldout_fraction: float = Field(0.1, ge=0, le=1, description="share of tasks held out")


class CreateSuite(BaseModel):
    """POST /v1/suites: the whole set; the same set as the latest version changes nothing."""

    name: str = Field(pattern=SUITE_NAME)
    description: str = Field("", max_length=2000)
    task_ids: list[str] = Field(min_length=1, max_length=100_000)
    split_seed: int = Field(0, ge=0, le=2**63 - 1)
    heldout_fraction: float = Field(0.1, ge=0, le=1)


class SuiteSummary(BaseModel):
    name: str
    version: int
    description: str
    size: int
    created_at: float
    shared: bool = Field(
        False,
        description="the operator's suite: readable by every tenant, written by none (a tenant's POST of "
        "its name makes the tenant's own suite, which it then sees instead)",
    )


class Distribution(BaseModel):
    n: int
    min: float | None = None
    p10: float | None = None
    median: float | None = None
    p90: float | None = None
    max: float | None = None


def distribution(values: list[float]) -> Distribution:
    if not values:
        return Distribution(n=0)
    v = sorted(values)
    if len(v) == 1:
        return Distribution(n=1, min=v[0], p10=v[0], median=v[0], p90=v[0], max=v[0])
    deciles = statistics.quantiles(v, n=10, method="inclusive")
    return Distribution(
        n=len(v), min=v[0], p10=deciles[0], median=statistics.median(v), p90=deciles[-1], max=v[-1]
    )


class SuiteReport(BaseModel):
    """Per suite and device class: counts by status and reason, eager runtimes, torch.compile speedups."""

    suite: str
    version: int
    device_class: str
    size: int
    not_vetted: int
    by_status: dict[str, int]
    by_reason: dict[str, int]
    eager_ms: Distribution
    compile_speedup: Distribution
    eager_ms_histogram: dict[str, int] = Field(description="eager runtimes of vetted tasks by decade")


_DECADES = [(0.0, 0.1), (0.1, 1.0), (1.0, 10.0), (10.0, 100.0), (100.0, 1000.0), (1000.0, float("inf"))]


def _decade(ms: float) -> str:
    for lo, hi in _DECADES:
        if lo <= ms < hi:
            return f"[{lo:g}, {hi:g}) ms"
    return "?"


def suite_report(suite: Suite, device_class: str, records: dict[str, VetRecord]) -> SuiteReport:
    """Summarise the vet records of a suite's tasks (`records` maps task id to its record)."""
    mine = [records[t] for t in suite.task_ids if t in records]
    by_status = {s.value: 0 for s in VetStatus}
    by_reason: dict[str, int] = {}
    for r in mine:
        by_status[r.status.value] += 1
        for reason in sorted({f.reason.value for f in r.findings}):
            by_reason[reason] = by_reason.get(reason, 0) + 1
    eager = [r.eager_ms for r in mine if r.eager_ms is not None]
    speedups = [s for r in mine if (s := r.compile_speedup) is not None]
    histogram: dict[str, int] = {}
    for lo, hi in _DECADES:
        count = sum(1 for e in eager if lo <= e < hi)
        if count:
            histogram[_decade(lo)] = count
    return SuiteReport(
        suite=suite.name,
        version=suite.version,
        device_class=device_class,
        size=len(suite.task_ids),
        not_vetted=len(suite.task_ids) - len(mine),
        by_status=by_status,
        by_reason=dict(sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0]))),
        eager_ms=distribution(eager),
        compile_speedup=distribution(speedups),
        eager_ms_histogram=histogram,
    )


_NOT_OPERATORS = {
    "size", "dim", "view", "reshape", "contiguous", "permute", "transpose", "unsqueeze", "squeeze",
    "flatten", "expand", "to", "float", "half", "bfloat16", "item", "super", "__init__",
}  # fmt: skip


def _called_name(func: ast.AST) -> str | None:
    """`F.gelu` -> gelu, `x.view(-1).sum` -> sum; None for plain names and `self.<submodule>(...)`."""
    if not isinstance(func, ast.Attribute):
        return None
    if isinstance(func.value, ast.Name) and func.value.id == "self":
        return None
    return func.attr


def operators(source: str) -> list[str]:
    """The operators a KernelBench task's `Model` uses, read from its source (not run): `nn.*` modules it
    builds, `torch.*`/`F.*` functions and tensor methods it calls. A tag for filtering, not a proof."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return []
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        return []
    found: set[str] = set()
    for call in (n for n in ast.walk(model) if isinstance(n, ast.Call)):
        name = _called_name(call.func)
        if name is not None and name not in _NOT_OPERATORS and not name.startswith("_"):
            found.add(name.lower())
    return sorted(found)


def vet_error(task_id: str, device_class: str, message: str) -> VetRecord:
    """The record of a vetting that failed on our side (the task is held back until vetted again)."""
    return VetRecord(
        task_id=task_id,
        device_class=device_class,
        device_name="",
        torch_version="",
        status=VetStatus.REJECTED,
        findings=[VetFinding(reason=VetReason.VET_ERROR, message=message[:2000])],
        vetted_at=time.time(),
    )


class SuiteTask(BaseModel):
    task_id: str
    name: str | None = None
    source: PoolSource | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    status: VetStatus | None = Field(None, description="vet status on the requested device class")
    reasons: list[VetReason] = Field(default_factory=list)


class SuiteTasks(BaseModel):
    """A suite's tasks, or a deterministic sample of them (same `seed`, same draw)."""

    suite: str
    version: int
    device_class: str | None = None
    split: Split | None = None
    seed: int | None = None
    matched: int = Field(description="tasks that passed the split and status filters, before sampling")
    items: list[SuiteTask]


def select(
    task_ids: list[str],
    records: dict[str, VetRecord],
    statuses: set[VetStatus] | None,
    split: Split | None,
    split_seed: int,
    heldout_fraction: float,
) -> list[str]:
    """The ids that are on `split` and whose vet status is one of `statuses` (None: no filter)."""
    out = []
    for t in task_ids:
        if split is not None and split_of(t, split_seed, heldout_fraction) is not split:
            continue
        if statuses is not None and (t not in records or records[t].status not in statuses):
            continue
        out.append(t)
    return out
