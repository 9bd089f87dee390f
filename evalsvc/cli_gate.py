"""`evalsvc gate`: the command a CI job runs to gate kernels on a suite's expectations."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from evalsvc.core.options import EvalOptions
from evalsvc.gate import CaseOutcome, cases_for, exit_code, judge, junit, report, run
from evalsvc.suite import SuiteCase

SUITE_HELP = "a suite file (the format of evalsvc/examples/suite.json) or a folder of them"
URL_HELP = "judge through this service instead of on this machine (with --device-class)"


def gate_cmd(
    suite: Annotated[Path, typer.Argument(exists=True, help=SUITE_HELP)],
    device: Annotated[
        str, typer.Option(help="judge the solutions for this device here: cpu or cuda:N")
    ] = "cpu",
    url: Annotated[str | None, typer.Option(envvar="EVALSVC_GATE_URL", help=URL_HELP)] = None,
    api_key: Annotated[str | None, typer.Option(envvar="EVALSVC_API_KEY")] = None,
    device_class: Annotated[str, typer.Option(help="with --url: the device class, e.g. H200")] = "default",
    junit_file: Annotated[Path | None, typer.Option("--junit", help="write JUnit XML here")] = None,
    json_file: Annotated[Path | None, typer.Option("--json", help="write the JSON report here")] = None,
    trials: Annotated[int | None, typer.Option(help="correctness trials")] = None,
    budget: Annotated[float, typer.Option(help="timing budget per subject, seconds")] = 5.0,
    no_compile_baseline: Annotated[bool, typer.Option("--no-compile-baseline")] = False,
) -> None:
    """Run every solution of SUITE written for the device and check what the suite expects of it (`expect`,
    and optionally `min_reward`, `min_speedup_eager`, `min_speedup_compile`). Prints a table; exit 0 when
    every expectation held, 1 when one failed, 3 when a case could not be judged or the run could not
    happen, 2 for a usage error (an unreadable suite)."""
    from evalsvc.cli_exit import USAGE

    kind = "cpu" if device == "cpu" else "cuda"
    cases = cases_for(suite, kind)
    if not cases:
        typer.echo(f"error: no solution in {suite} is for {kind}", err=True)
        raise typer.Exit(USAGE)
    options = EvalOptions(trials=trials, timing_budget_s=budget, compile_baseline=not no_compile_baseline)
    where = url or f"this machine ({device})"
    typer.echo(f"gate: {len(cases)} solution(s) of {suite}, judged on {where}", err=True)
    stream = _remote(cases, url, api_key, device_class, options) if url else _local(cases, device, options)
    outcomes = []
    for o in stream:
        outcomes.append(o)
        typer.echo(f"  [{len(outcomes)}/{len(cases)}] {o.verdict:<6} {o.case.name}: {_why(o)}", err=True)
    _table(outcomes)
    if junit_file:
        junit_file.write_bytes(junit(outcomes))
    if json_file:
        json_file.write_text(json.dumps(report(outcomes), indent=2) + "\n")
    raise typer.Exit(exit_code(outcomes))


def _local(cases: list[tuple[str, SuiteCase]], device: str, options: EvalOptions) -> Iterator[CaseOutcome]:
    from evalsvc.cli_exit import require_device
    from evalsvc.settings import Settings
    from evalsvc.wiring import make_local_pipeline

    require_device(device)
    pipeline = make_local_pipeline(Settings(device=device))
    try:
        yield from run(cases, lambda case: pipeline.evaluate(case.task(), case.solution(), options))
    finally:  # task processes and spare runners stopped here, not left to the interpreter's exit
        pipeline.evaluator.judge.close()


def _remote(
    cases: list[tuple[str, SuiteCase]], url: str, api_key: str | None, device_class: str, options: EvalOptions
) -> Iterator[CaseOutcome]:
    """One batch on the service; outcomes in the order evaluations finish."""
    from evalsvc.cli_exit import CLI_RETRY
    from evalsvc.records.documents import EvaluationRequest
    from evalsvc.sdk import Client

    with Client(url, api_key, retry=CLI_RETRY) as client:
        requests = [
            EvaluationRequest(
                task=c.task(), solution=c.solution(), options=options, device_class=device_class
            )
            for _, c in cases
        ]
        batch = client.batch(client.submit_batch(requests))
        by_id = {item.id: case for item, case in zip(batch.items, cases, strict=True)}
        for view in client.iter_results(list(by_id), timeout=3600 * 6):
            suite, case = by_id[view.id]
            if view.result is None:
                yield CaseOutcome(case, suite, error=f"no result: the evaluation ended {view.state}")
            else:
                yield judge(suite, case, view.result, max(0.0, view.updated_at - view.created_at))


def _why(o: CaseOutcome) -> str:
    if o.error:
        return o.error
    if o.missed:
        return "; ".join(o.missed)
    r = o.result
    return f"{r.status.value}, reward {r.reward}" if r else ""


def _table(outcomes: list[CaseOutcome]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="evalsvc gate")
    for column in ("verdict", "solution", "expected", "got", "reward", "speedup eager", "seconds"):
        table.add_column(column)
    for o in outcomes:
        r = o.result
        eager = r.speedup.eager if r else None
        table.add_row(
            o.verdict,
            o.case.name,
            o.case.expect,
            r.status.value if r else "—",
            "—" if r is None or r.reward is None else f"{r.reward:g}",
            "—" if eager is None else f"{eager:.3g}x",
            f"{o.seconds:.1f}",
        )
    Console(file=sys.stdout, width=160).print(table)
    counts = {v: sum(o.verdict == v for o in outcomes) for v in ("passed", "failed", "error")}
    typer.echo(f"{counts['passed']} passed, {counts['failed']} failed, {counts['error']} not judged")
