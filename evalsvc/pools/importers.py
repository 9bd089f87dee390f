"""Read task pools the way users keep them, one task at a time (streaming), and register them.

- a KernelBench checkout: `level1` ... `level4` folders of `N_Name.py` problems (or a repository root
  holding a `KernelBench/` folder);
- CUDA-Agent-Ops-6K's Parquet file: a `code` column (a KernelBench-format problem), `ops` and
  `data_source` kept as tags; read batch by batch with pyarrow;
- our own folder format: any folder holding `task.py` and an optional `meta.json` (as `evalsvc eval`
  reads a task).

Each task is content-addressed (`TaskSpec.id`); importing the same pool again changes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from evalsvc.core.pools import PoolEntry, PoolSource, operators
from evalsvc.core.tasks import InvalidTask, TaskMeta, TaskSpec
from evalsvc.records.catalog import PoolStore
from evalsvc.records.tasks import TaskStore

LEVEL_DIR = re.compile(r"^level(\d+)$")
PROBLEM_FILE = re.compile(r"^(\d+)_(.+)\.py$")
FOLDER_LEVEL = re.compile(r"^(?:l|level)(\d+)$")
OPS6K_BATCH = 256


@dataclass(frozen=True)
class Candidate:
    """One task as read from a pool, before registration."""

    name: str
    origin: str
    source: str
    tags: dict[str, str]
    meta: TaskMeta = field(default_factory=TaskMeta)
    error: str | None = None  # why it could not be read (the import refuses it, and goes on)


@dataclass(frozen=True)
class PoolReader:
    """A pool's tasks as a stream, with their count when it is known up front (for the progress bar)."""

    kind: PoolSource
    total: int | None
    items: Iterator[Candidate]


def _read(f: Path) -> tuple[str, str | None]:
    try:
        return f.read_text(), None
    except (OSError, UnicodeDecodeError) as e:
        return "", f"cannot read {f.name}: {e}"


def _tags(source: str, **extra: str) -> dict[str, str]:
    tags = {k: v for k, v in extra.items() if v}
    ops = operators(source)
    if ops and "ops" not in tags:
        tags["ops"] = ",".join(ops)
    return tags


def _kernelbench_root(path: Path) -> Path:
    if any(LEVEL_DIR.match(p.name) for p in path.iterdir() if p.is_dir()):
        return path
    nested = path / "KernelBench"
    if nested.is_dir():
        return nested
    raise ValueError(f"{path} holds no level1 ... level4 folders (nor a KernelBench/ folder with them)")


def _problem_files(root: Path) -> list[tuple[int, int, Path]]:
    files = []
    for level_dir in sorted(root.iterdir()):
        lm = LEVEL_DIR.match(level_dir.name)
        if not (lm and level_dir.is_dir()):
            continue
        for f in level_dir.iterdir():
            pm = PROBLEM_FILE.match(f.name)
            if pm and f.is_file():
                files.append((int(lm.group(1)), int(pm.group(1)), f))
    return sorted(files)


def read_kernelbench(path: Path) -> PoolReader:
    root = _kernelbench_root(path)
    files = _problem_files(root)

    def items() -> Iterator[Candidate]:
        for level, number, f in files:
            source, error = _read(f)
            yield Candidate(
                name=f"kernelbench/level{level}/{f.stem}",
                origin=str(f.relative_to(root.parent)),
                source=source,
                tags=_tags(source, level=str(level), problem=str(number)),
                error=error,
            )

    return PoolReader(PoolSource.KERNELBENCH, len(files), items())


def _ops_text(value: object) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, str):
        try:  # some exports keep the list as JSON text
            parsed = json.loads(value)
        except ValueError:
            return value
        return _ops_text(parsed) if isinstance(parsed, list) else value
    return "" if value is None else str(value)


def read_ops6k(path: Path) -> PoolReader:
    """CUDA-Agent-Ops-6K's Parquet file, streamed by record batches (6,000 problems never in memory at
    once); the row number is the task's origin."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    names = set(pf.schema_arrow.names)
    if "code" not in names:
        raise ValueError(f"{path} has no 'code' column (columns: {', '.join(sorted(names))})")
    columns = [c for c in ("code", "ops", "data_source") if c in names]

    def items() -> Iterator[Candidate]:
        row = 0
        for batch in pf.iter_batches(batch_size=OPS6K_BATCH, columns=columns):
            for rec in batch.to_pylist():
                source = rec.get("code") or ""
                yield Candidate(
                    name=f"ops6k/{row:05d}",
                    origin=f"{path.name}#row={row}",
                    source=source,
                    tags=_tags(
                        source, ops=_ops_text(rec.get("ops")), data_source=str(rec.get("data_source") or "")
                    ),
                )
                row += 1

    return PoolReader(PoolSource.OPS6K, pf.metadata.num_rows, items())


def read_folder(path: Path) -> PoolReader:
    """Every `task.py` under `path`, with the `meta.json` beside it; a first folder named `l2` or
    `level2` gives the level tag."""
    files = sorted(path.rglob("task.py"))

    def items() -> Iterator[Candidate]:
        for f in files:
            rel = f.parent.relative_to(path)
            level = next((m.group(1) for part in rel.parts if (m := FOLDER_LEVEL.match(part))), "")
            source, error = _read(f)
            meta = TaskMeta()
            meta_file = f.with_name("meta.json")
            if meta_file.is_file() and error is None:
                try:
                    meta = TaskMeta.model_validate_json(meta_file.read_text())
                except (OSError, UnicodeDecodeError, ValidationError) as e:
                    error = f"bad meta.json: {e}"[:500]
            yield Candidate(
                name=str(rel) if rel.parts else path.name,
                origin=str(f),
                source=source,
                tags=_tags(source, level=level),
                meta=meta,
                error=error,
            )

    return PoolReader(PoolSource.FOLDER, len(files), items())


READERS: dict[PoolSource, Callable[[Path], PoolReader]] = {
    PoolSource.KERNELBENCH: read_kernelbench,
    PoolSource.OPS6K: read_ops6k,
    PoolSource.FOLDER: read_folder,
}


def detect_format(path: Path) -> PoolSource:
    """Parquet files are Ops-6K; folders with level folders KernelBench; other folders our format."""
    if path.is_file():
        if path.suffix == ".parquet":
            return PoolSource.OPS6K
        raise ValueError(f"{path}: a file must be an Ops-6K .parquet file")
    try:
        _kernelbench_root(path)
        return PoolSource.KERNELBENCH
    except ValueError:
        return PoolSource.FOLDER


@dataclass
class ImportSummary:
    new: int = 0
    existing: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)  # (name, why)
    task_ids: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.new > 0


def import_pool(
    reader: PoolReader,
    tasks: TaskStore,
    pools: PoolStore,
    on_item: Callable[[Candidate], None] | None = None,
) -> ImportSummary:
    """Register every task of `reader` (content-addressed: a task already there is left as it is);
    a task that cannot be registered (`POST /v1/tasks` would answer 422) is refused with its reason."""
    summary = ImportSummary()
    for cand in reader.items:
        if on_item is not None:
            on_item(cand)
        if cand.error is not None:
            summary.refused.append((cand.name, cand.error))
            continue
        try:
            spec = TaskSpec(source=cand.source, meta=cand.meta, name=cand.name[:200])
            spec.check_syntax()
        except ValidationError as e:
            summary.refused.append((cand.name, e.errors()[0]["msg"]))
            continue
        except InvalidTask as e:
            summary.refused.append((cand.name, str(e)))
            continue
        task_id, created = tasks.put_task(spec)
        pools.put_entry(
            PoolEntry(task_id=task_id, name=cand.name, source=reader.kind, origin=cand.origin, tags=cand.tags)
        )
        summary.task_ids.append(task_id)
        if created:
            summary.new += 1
        else:
            summary.existing += 1
    return summary
