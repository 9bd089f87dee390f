"""A suite's vetting report as markdown (the JSON form is `SuiteReport` itself)."""

from __future__ import annotations

from evalsvc.core.pools import Distribution, SuiteReport, VetRecord


def _fmt(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def _dist_row(label: str, d: Distribution, spec: str) -> str:
    cells = [_fmt(v, spec) for v in (d.min, d.p10, d.median, d.p90, d.max)]
    return f"| {label} | {d.n} | " + " | ".join(cells) + " |"


def report_markdown(report: SuiteReport, records: list[tuple[str, VetRecord]] | None = None) -> str:
    """Counts by status and reason, the runtime and speedup distributions, and (given `records`, as
    (name, record) pairs) one line per task."""
    lines = [
        f"## Suite `{report.suite}` v{report.version} on `{report.device_class}`",
        "",
        f"{report.size} tasks, {report.not_vetted} not vetted.",
        "",
        "| status | tasks |",
        "|---|---|",
        *[f"| {s} | {n} |" for s, n in report.by_status.items()],
        "",
        "| reason | tasks |",
        "|---|---|",
        *([f"| {r} | {n} |" for r, n in report.by_reason.items()] or ["| (none) | 0 |"]),
        "",
        "| distribution | n | min | p10 | median | p90 | max |",
        "|---|---|---|---|---|---|---|",
        _dist_row("eager runtime (ms)", report.eager_ms, ".3f"),
        _dist_row("torch.compile speedup (eager / compiled)", report.compile_speedup, ".2f"),
        "",
        "| eager runtime | tasks |",
        "|---|---|",
        *[f"| {bucket} | {n} |" for bucket, n in report.eager_ms_histogram.items()],
    ]
    if records:
        lines += [
            "",
            "| task | status | eager ms | compiled ms | speedup | reasons |",
            "|---|---|---|---|---|---|",
        ]
        for name, r in records:
            reasons = "; ".join(f"{f.reason.value}: {f.message[:120]}" for f in r.findings) or ""
            lines.append(
                f"| {name} | {r.status.value} | {_fmt(r.eager_ms, '.3f')} | {_fmt(r.compiled_ms, '.3f')} | "
                f"{_fmt(r.compile_speedup, '.2f')} | {reasons.replace('|', '/')} |"
            )
    return "\n".join(lines) + "\n"
