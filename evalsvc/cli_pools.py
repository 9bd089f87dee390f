"""`evalsvc tasks ...` and `evalsvc suites ...`: import task pools, vet them on the GPU workers, curate
suites and report on them. Operator commands: they talk to the service's Redis (EVALSVC_REDIS_URL) and
queue vetting jobs on the workers' own queues, as the compile worker queues evaluations."""

from __future__ import annotations

import json
import re
import secrets
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from evalsvc.core.pools import SUITE_NAME, PoolSource, Split, VetPolicy, VetRecord, VetStatus, suite_report
from evalsvc.settings import Settings

tasks_app = typer.Typer(help="Import task pools and vet them on the device workers.", no_args_is_help=True)
suites_app = typer.Typer(help="Named, versioned task suites: list, show, sample, split, report.")

console = Console(soft_wrap=True)  # long lines stay whole (logs, piped output)


def _records(settings: Settings):
    from evalsvc.records.stores import Records
    from evalsvc.redis_clients import plain_redis

    return Records(plain_redis(settings), retention_s=settings.retention_s)


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


@tasks_app.command("import")
def import_cmd(
    path: Annotated[Path, typer.Argument(exists=True, help="KernelBench checkout, Ops-6K .parquet, folder")],
    fmt: Annotated[
        PoolSource | None,
        typer.Option("--format", help="default: .parquet is ops6k, level folders kernelbench"),
    ] = None,
    suite: Annotated[str | None, typer.Option(help="add the imported tasks to this suite")] = None,
    description: Annotated[str, typer.Option(help="the suite's description, when it is created")] = "",
) -> None:
    """Register every task of a pool (content-addressed: importing again changes nothing, and says so)."""
    from evalsvc.pools.importers import READERS, detect_format, import_pool

    if suite is not None and not re.fullmatch(SUITE_NAME, suite):
        raise typer.BadParameter(f"{suite!r} is not a suite name ({SUITE_NAME})", param_hint="--suite")
    settings = Settings()
    records = _records(settings)
    pools = records.catalog
    try:
        kind = fmt or detect_format(path)
        reader = READERS[kind](path)
    except (ValueError, OSError) as e:
        console.print(f"[red]error:[/red] {path}: {e}")
        raise typer.Exit(2) from None
    with _progress() as progress:
        bar = progress.add_task(f"importing {kind.value} {path.name}", total=reader.total)
        try:
            summary = import_pool(reader, records.tasks, pools, on_item=lambda _: progress.advance(bar))
        except (ValueError, OSError) as e:  # a pool file corrupt part way (what was read stays imported)
            console.print(f"[red]error:[/red] reading {path} failed: {e}")
            raise typer.Exit(2) from None
    console.print(
        f"{len(summary.task_ids)} tasks: {summary.new} new, {summary.existing} already present, "
        f"{len(summary.refused)} refused"
    )
    for name, why in summary.refused[:20]:
        console.print(f"  refused {name}: {why}")
    changed = summary.changed
    if suite:
        current = pools.suite(suite)
        ids = (current.task_ids if current else []) + summary.task_ids
        saved, suite_changed = pools.save_suite(suite, ids, description)
        changed = changed or suite_changed
        state = "changed" if suite_changed else "unchanged"
        console.print(f"suite {saved.name} v{saved.version}: {len(saved.task_ids)} tasks ({state})")
    if not changed:
        console.print("nothing changed")


def _live_queues(workers, device_class: str | None) -> tuple[str, list[str]]:
    live = [w for w in workers.workers() if w.kind == "gpu" and time.time() - w.heartbeat_at < 30]
    classes = sorted({w.device_class for w in live})
    if device_class is None:
        if len(classes) != 1:
            raise typer.BadParameter(
                f"live device classes: {classes or 'none'}; name one with --device-class",
                param_hint="--device-class",
            )
        device_class = classes[0]
    queues = sorted({w.queue for w in live if w.device_class == device_class})
    if not queues:
        raise typer.BadParameter(
            f"no live device worker of class {device_class!r}", param_hint="--device-class"
        )
    return device_class, queues


def _all_task_ids(tasks) -> list[str]:
    from evalsvc.records.tasks import SHARED_TASKS

    return [t.decode() for t in tasks.r.zrange(SHARED_TASKS, 0, -1)]


@tasks_app.command("vet")
def vet_cmd(
    suite: Annotated[str | None, typer.Option(help="vet this suite's tasks (default: every task)")] = None,
    device_class: Annotated[
        str | None, typer.Option(help="workers to vet on (default: the one live class)")
    ] = None,
    min_ms: Annotated[float, typer.Option(help="eager runtime window, lower bound (ms); Ops-6K: 1")] = 0.1,
    max_ms: Annotated[float, typer.Option(help="eager runtime window, upper bound (ms)")] = 100.0,
    compile_check: Annotated[bool, typer.Option("--compile/--no-compile", help="check torch.compile")] = True,
    budget: Annotated[
        float, typer.Option(help="timing budget per baseline (s); part of its cache key")
    ] = 5.0,
    force: Annotated[bool, typer.Option(help="vet again tasks that already have a record")] = False,
    timeout: Annotated[float, typer.Option(help="give up waiting after this many seconds")] = 3600.0,
) -> None:
    """Queue one vetting job per task on the device workers, wait, and print the statuses and reasons."""
    from celery import Celery

    from evalsvc.queues import VET_TASK, make_celery

    settings = Settings()
    records = _records(settings)
    pools = records.catalog
    if suite is not None:
        s = pools.suite(suite)
        if s is None:
            console.print(f"[red]error:[/red] no suite {suite!r}")
            raise typer.Exit(2)
        ids = s.task_ids
    else:
        ids = _all_task_ids(records.tasks)
    device_class, queues = _live_queues(records.workers, device_class)
    policy = VetPolicy(
        min_eager_ms=min_ms, max_eager_ms=max_ms, check_compile=compile_check, timing_budget_s=budget
    )
    done = {} if force else pools.vets(device_class, ids)
    todo = [t for t in ids if t not in done]
    run = secrets.token_hex(8)  # the records of this run carry it
    celery: Celery = make_celery(settings)
    try:
        for i, t in enumerate(todo):
            args = [t, policy.model_dump(mode="json"), run]
            celery.send_task(VET_TASK, args=args, queue=queues[i % len(queues)])
    finally:
        celery.close()
    console.print(
        f"{len(ids)} tasks on {device_class}: {len(ids) - len(todo)} already vetted, "
        f"{len(todo)} queued on {len(queues)} worker(s)"
    )
    records = _wait(pools, device_class, todo, run, timeout)
    records.update(done)
    _print_summary(records, len(ids))
    if len(records) < len(ids):
        raise typer.Exit(1)


def _wait(pools, device_class: str, todo: list[str], run: str, timeout: float) -> dict[str, VetRecord]:
    fresh: dict[str, VetRecord] = {}
    deadline = time.monotonic() + timeout
    with _progress() as progress:
        bar = progress.add_task("vetting", total=len(todo))
        while len(fresh) < len(todo) and time.monotonic() < deadline:
            pending = [t for t in todo if t not in fresh]
            for t, r in pools.vets(device_class, pending).items():
                if r.run == run:
                    fresh[t] = r
            progress.update(bar, completed=len(fresh))
            if len(fresh) < len(todo):
                time.sleep(0.5)
    return fresh


def _print_summary(records: dict[str, VetRecord], total: int) -> None:
    by_status: dict[str, int] = {s.value: 0 for s in VetStatus}
    by_reason: dict[str, int] = {}
    for r in records.values():
        by_status[r.status.value] += 1
        for reason in {f.reason.value for f in r.findings}:
            by_reason[reason] = by_reason.get(reason, 0) + 1
    table = Table(title=f"vetted {len(records)} of {total}")
    table.add_column("status")
    table.add_column("tasks", justify="right")
    for s, n in by_status.items():
        table.add_row(s, str(n))
    console.print(table)
    if by_reason:
        reasons = Table(title="reasons")
        reasons.add_column("reason")
        reasons.add_column("tasks", justify="right")
        for reason, n in sorted(by_reason.items(), key=lambda kv: -kv[1]):
            reasons.add_row(reason, str(n))
        console.print(reasons)


def _suite_or_exit(pools, name: str, version: int | None = None):
    s = pools.suite(name, version)
    if s is None:
        console.print(f"[red]error:[/red] no suite {name!r}" + (f" version {version}" if version else ""))
        raise typer.Exit(2)
    return s


@suites_app.command("list")
def list_cmd() -> None:
    """Every suite at its latest version."""
    pools = _records(Settings()).catalog
    table = Table()
    for col in ("suite", "version", "tasks", "description"):
        table.add_column(col)
    for s in pools.suites():
        table.add_row(s.name, str(s.version), str(s.size), s.description)
    console.print(table)


@suites_app.command("show")
def show_cmd(
    name: str,
    version: Annotated[int | None, typer.Option(help="default: the latest")] = None,
    device_class: Annotated[str | None, typer.Option(help="show vet statuses on this class")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """A suite's tasks with their origin, tags and (given a device class) vet status."""
    pools = _records(Settings()).catalog
    view = pools.suite_tasks(_suite_or_exit(pools, name, version), device_class=device_class)
    _print_tasks(view, as_json)


@suites_app.command("sample")
def sample_cmd(
    name: str,
    n: Annotated[int, typer.Option("-n", help="how many tasks")] = 10,
    seed: Annotated[int, typer.Option(help="same seed, same draw")] = 0,
    split: Annotated[Split | None, typer.Option(help="draw from the train or held-out side")] = None,
    device_class: Annotated[str | None, typer.Option(help="filter by vet status on this class")] = None,
    status: Annotated[list[VetStatus] | None, typer.Option(help="vet statuses to keep (repeatable)")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """A deterministic sample of a suite (as `GET /v1/suites/{name}/tasks?sample=N&seed=S`)."""
    pools = _records(Settings()).catalog
    s = _suite_or_exit(pools, name)
    view = pools.suite_tasks(
        s,
        sample=n,
        seed=seed,
        split=split,
        device_class=device_class,
        statuses=set(status) if status else None,
    )
    _print_tasks(view, as_json)


def _print_tasks(view, as_json: bool) -> None:
    if as_json:
        typer.echo(view.model_dump_json(indent=2))
        return
    table = Table(title=f"{view.suite} v{view.version}: {len(view.items)} of {view.matched}")
    for col in ("task", "name", "tags", "status", "reasons"):
        table.add_column(col)
    for t in view.items:
        tags = ", ".join(f"{k}={v}" for k, v in t.tags.items())
        status = t.status.value if t.status else "—"
        table.add_row(t.task_id, t.name or "—", tags, status, ", ".join(r.value for r in t.reasons))
    console.print(table)


@suites_app.command("create")
def create_cmd(
    name: str,
    task_ids: Annotated[list[str], typer.Argument(help="task ids")],
    description: str = "",
) -> None:
    """Make a suite (a new version when it exists with another set)."""
    records = _records(Settings())
    pools = records.catalog
    unknown = records.tasks.missing_tasks(task_ids)
    if unknown:
        console.print(f"[red]error:[/red] unknown task ids: {', '.join(unknown[:10])}")
        raise typer.Exit(2)
    s, changed = pools.save_suite(name, task_ids, description)
    console.print(
        f"suite {s.name} v{s.version}: {len(s.task_ids)} tasks ({'changed' if changed else 'unchanged'})"
    )


@suites_app.command("split")
def split_cmd(
    name: str,
    heldout: Annotated[float, typer.Option(help="share held out")] = 0.1,
    seed: Annotated[int, typer.Option(help="seed of the split (fixed per suite)")] = 0,
) -> None:
    """Fix the suite's train/held-out split and materialise it as suites NAME-train and NAME-heldout."""
    from evalsvc.core.pools import split_of

    pools = _records(Settings()).catalog
    s = _suite_or_exit(pools, name)
    s, _ = pools.save_suite(name, s.task_ids, split_seed=seed, heldout_fraction=heldout)
    for side in Split:
        ids = [t for t in s.task_ids if split_of(t, seed, heldout) is side]
        part, changed = pools.save_suite(
            f"{name}-{side.value}", ids, f"{side.value} side of {name} v{s.version}"
        )
        state = "changed" if changed else "unchanged"
        console.print(f"suite {part.name} v{part.version}: {len(part.task_ids)} tasks ({state})")


@suites_app.command("report")
def report_cmd(
    name: str,
    device_class: Annotated[str, typer.Option(help="the device class the suite was vetted on")],
    out: Annotated[Path | None, typer.Option(help="write report.md and report.json here")] = None,
) -> None:
    """Counts by status and reason, the distribution of eager runtimes and torch.compile speedups."""
    from evalsvc.pools.report import report_markdown

    pools = _records(Settings()).catalog
    s = _suite_or_exit(pools, name)
    records = pools.vets(device_class, s.task_ids)
    report = suite_report(s, device_class, records)
    entries = pools.entries(list(records))
    rows = [(entries[t].name if t in entries else t, r) for t, r in records.items()]
    md = report_markdown(report, sorted(rows, key=lambda x: x[0]))
    typer.echo(md)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}-{device_class}.md").write_text(md)
        doc = {
            "report": report.model_dump(mode="json"),
            "records": {t: r.model_dump(mode="json") for t, r in records.items()},
        }
        (out / f"{name}-{device_class}.json").write_text(json.dumps(doc, indent=1))
        console.print(f"wrote {out / name}-{device_class}.md and .json")
