"""Grafana dashboards as code (grafana-foundation-sdk): writes deploy/grafana/dashboards/*.json.

    python deploy/grafana/build_dashboards.py          # regenerate the committed JSON
    python deploy/grafana/build_dashboards.py --check  # exit 1 when the committed JSON is stale

Every query names only metrics the service exports (tests/observability/test_dashboards.py checks it
against the real registries, and runs each query against a real Prometheus scraping a live stack).
Grafana's own variables used here: $__rate_interval, $__range, and the per-GPU dashboard's $gpu.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import common, prometheus, stat, timeseries
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import LegendDisplayMode, LegendPlacement
from grafana_foundation_sdk.models.dashboard import DataSourceRef, VariableRefresh

OUT = Path(__file__).parent / "dashboards"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="evalsvc-prometheus")
RATE = "$__rate_interval"
TAGS = ["evalsvc"]

Query = tuple[str, str]  # (PromQL, legend)


def _targets(queries: list[Query]) -> list[prometheus.Dataquery]:
    return [
        prometheus.Dataquery()
        .expr(expr)
        .legend_format(legend)
        .ref_id(chr(ord("A") + i))
        .datasource(DATASOURCE)
        for i, (expr, legend) in enumerate(queries)
    ]


def _legend() -> common.VizLegendOptions:
    return (
        common.VizLegendOptions()
        .display_mode(LegendDisplayMode.LIST)
        .placement(LegendPlacement.BOTTOM)
        .show_legend(True)
    )


def series(title: str, unit: str, queries: list[Query], desc: str = "", width: int = 12) -> timeseries.Panel:
    return (
        timeseries.Panel()
        .title(title)
        .description(desc)
        .unit(unit)
        .datasource(DATASOURCE)
        .targets(_targets(queries))
        .legend(_legend())
        .span(width)
        .height(8)
    )


def single(title: str, unit: str, query: Query, desc: str = "", width: int = 6) -> stat.Panel:
    return (
        stat.Panel()
        .title(title)
        .description(desc)
        .unit(unit)
        .datasource(DATASOURCE)
        .targets(_targets([query]))
        .reduce_options(common.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .span(width)
        .height(4)
    )


def _board(uid: str, title: str, desc: str) -> dash.Dashboard:
    return (
        dash.Dashboard(title)
        .uid(uid)
        .description(desc)
        .tags(TAGS)
        .time("now-6h", "now")
        .refresh("30s")
        .timezone("utc")
        .readonly()
    )


def quantile(q: float, metric: str, by: str, match: str = "") -> str:
    return f"histogram_quantile({q}, sum by (le, {by}) (rate({metric}_bucket{match}[{RATE}])))"


def fleet_overview() -> dash.Dashboard:
    return (
        _board("evalsvc-fleet", "evalsvc / fleet overview", "Workers, queues, throughput and the gateway.")
        .with_row(dash.Row("Fleet"))
        .with_panel(single("Live workers", "none", ("count(evalsvc_worker_info)", "workers")))
        .with_panel(single("Compile queue", "none", ('max(evalsvc_queue_depth{queue="compile"})', "compile")))
        .with_panel(single("Jobs in flight", "none", ("sum(evalsvc_inflight_jobs)", "in flight")))
        .with_panel(
            single(
                "Results / min",
                "none",
                (f"sum(rate(evalsvc_results_total[{RATE}])) * 60", "results"),
            )
        )
        .with_panel(
            series(
                "Queue depth",
                "none",
                [("max by (queue) (evalsvc_queue_depth)", "{{queue}}")],
                "Jobs waiting per Celery queue, read from Redis at scrape time (max over the compile workers "
                "that report it).",
            )
        )
        .with_panel(
            series(
                "In flight per worker",
                "none",
                [("sum by (worker_kind, worker) (evalsvc_inflight_jobs)", "{{worker}}")],
            )
        )
        .with_panel(
            series(
                "Results by status",
                "ops",
                [(f"sum by (status) (rate(evalsvc_results_total[{RATE}]))", "{{status}}")],
            )
        )
        .with_panel(
            series(
                "Sandbox and worker failures",
                "ops",
                [(f"sum by (kind) (rate(evalsvc_sandbox_failures_total[{RATE}]))", "{{kind}}")],
                "Compile sandbox timeouts and internal errors, runner watchdog kills, judge errors, "
                "redelivered and abandoned jobs.",
            )
        )
        .with_row(dash.Row("Gateway"))
        .with_panel(
            series(
                "Requests by route",
                "reqps",
                [
                    (
                        "sum by (route, status_class) "
                        f"(rate(evalsvc_http_request_duration_seconds_count[{RATE}]))",
                        "{{route}} {{status_class}}",
                    )
                ],
            )
        )
        .with_panel(
            series(
                "Request latency p95",
                "s",
                [(quantile(0.95, "evalsvc_http_request_duration_seconds", "route"), "{{route}}")],
                "Long-polls (?wait=) included.",
            )
        )
        .with_panel(
            series(
                "Submissions: new and served from an existing job",
                "ops",
                [
                    (
                        f"sum by (kind, outcome) (rate(evalsvc_submissions_total[{RATE}]))",
                        "{{kind}} {{outcome}}",
                    )
                ],
                "outcome=existing: deduplicated or idempotent replays (the result cache).",
            )
        )
        .with_panel(
            series(
                "Problem responses",
                "ops",
                [(f"sum by (code) (rate(evalsvc_http_problems_total[{RATE}]))", "{{code}}")],
            )
        )
    )


def per_gpu() -> dash.Dashboard:
    sel = '{uuid=~"$gpu"}'
    legend = "{{gpu}} {{model}}"
    variable = (
        dash.QueryVariable("gpu")
        .label("GPU")
        .datasource(DATASOURCE)
        .query("label_values(evalsvc_gpu_memory_total_bytes, uuid)")
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .multi(True)
        .include_all(True)
        .all_value(".*")
    )
    return (
        _board("evalsvc-gpu", "evalsvc / per GPU", "NVML health of each GPU a worker serves.")
        .with_variable(variable)
        .with_panel(series("Utilization", "percentunit", [(f"evalsvc_gpu_utilization_ratio{sel}", legend)]))
        .with_panel(
            series(
                "Memory",
                "bytes",
                [
                    (f"evalsvc_gpu_memory_used_bytes{sel}", legend + " used"),
                    (f"evalsvc_gpu_memory_total_bytes{sel}", legend + " total"),
                ],
            )
        )
        .with_panel(series("Temperature", "celsius", [(f"evalsvc_gpu_temperature_celsius{sel}", legend)]))
        .with_panel(
            series(
                "SM clock against its maximum",
                "hertz",
                [
                    (f"evalsvc_gpu_sm_clock_hertz{sel}", legend),
                    (f"evalsvc_gpu_sm_clock_max_hertz{sel}", legend + " max"),
                ],
            )
        )
        .with_panel(
            series(
                "Power",
                "watt",
                [
                    (f"evalsvc_gpu_power_watts{sel}", legend),
                    (f"evalsvc_gpu_power_limit_watts{sel}", legend + " limit"),
                ],
            )
        )
        .with_panel(
            series(
                "Clock event (throttle) reasons holding",
                "none",
                [('evalsvc_gpu_throttle_active{uuid=~"$gpu", reason!="gpu_idle"} > 0', "{{gpu}} {{reason}}")],
                "Reasons other than idle; thermal and power ones make timings unrepresentative.",
            )
        )
        .with_panel(
            series(
                "Ready to time",
                "none",
                [(f"evalsvc_gpu_timing_ready{sel}", legend)],
                "1 when no heat or power reason holds the clocks and the temperature is under the limit.",
            )
        )
        .with_panel(
            series(
                "Evaluations started on a throttled or hot GPU",
                "none",
                [("sum by (instance) (increase(evalsvc_gpu_not_ready_starts_total[1h]))", "{{instance}}")],
            )
        )
        .with_panel(
            series(
                "ECC errors (volatile)",
                "none",
                [(f"evalsvc_gpu_ecc_errors_total{sel}", "{{gpu}} {{type}}")],
            )
        )
        .with_panel(
            series(
                "XID critical errors",
                "none",
                [
                    (
                        f"sum by (gpu, xid) (increase(evalsvc_gpu_xid_errors_total{sel}[1h]))",
                        "{{gpu}} xid {{xid}}",
                    )
                ],
                "Counted by the worker serving the GPU since it started (best effort: NVML events).",
            )
        )
    )


def pipeline_stages() -> dash.Dashboard:
    stage_by = "stage, worker_kind"
    metric = "evalsvc_stage_duration_seconds"
    return (
        _board("evalsvc-pipeline", "evalsvc / pipeline stages", "Where an evaluation's time goes.")
        .with_panel(
            series(
                "Stage duration p50",
                "s",
                [(quantile(0.5, metric, stage_by), "{{stage}} ({{worker_kind}})")],
                "queue_wait: created (compile) or routed (gpu) to picked up; compile: the build (cache hits "
                "excluded); evaluate: the judge call; end_to_end: created to finished.",
            )
        )
        .with_panel(
            series(
                "Stage duration p95", "s", [(quantile(0.95, metric, stage_by), "{{stage}} ({{worker_kind}})")]
            )
        )
        .with_panel(
            series(
                "Mean stage duration",
                "s",
                [
                    (
                        f"sum by (stage) (rate({metric}_sum[{RATE}])) "
                        f"/ sum by (stage) (rate({metric}_count[{RATE}]))",
                        "{{stage}}",
                    )
                ],
            )
        )
        .with_panel(
            series(
                "Compile cache",
                "ops",
                [(f"sum by (outcome) (rate(evalsvc_compile_cache_total[{RATE}]))", "{{outcome}}")],
            )
        )
        .with_panel(
            single(
                "Compile cache hit ratio",
                "percentunit",
                (
                    'sum(increase(evalsvc_compile_cache_total{outcome="hit"}[$__range])) '
                    "/ sum(increase(evalsvc_compile_cache_total[$__range]))",
                    "hit ratio",
                ),
                width=8,
            )
        )
        .with_panel(
            single(
                "Served from an existing job",
                "percentunit",
                (
                    'sum(increase(evalsvc_submissions_total{outcome="existing"}[$__range])) '
                    "/ sum(increase(evalsvc_submissions_total[$__range]))",
                    "dedup ratio",
                ),
                width=8,
            )
        )
        .with_panel(
            single(
                "Job starts / min",
                "none",
                (f"sum(rate(evalsvc_jobs_started_total[{RATE}])) * 60", "starts"),
                width=8,
            )
        )
        .with_panel(
            series(
                "Job starts by worker kind",
                "ops",
                [(f"sum by (worker_kind) (rate(evalsvc_jobs_started_total[{RATE}]))", "{{worker_kind}}")],
            )
        )
        .with_panel(series("Queue depth", "none", [("max by (queue) (evalsvc_queue_depth)", "{{queue}}")]))
    )


def rewards_and_refusals() -> dash.Dashboard:
    return (
        _board(
            "evalsvc-rewards", "evalsvc / rewards and refusals", "Verdicts, rewards and anti-cheat findings."
        )
        .with_panel(
            series(
                "Results by status and milestone",
                "none",
                [
                    (
                        "sum by (job_kind, status, milestone) (increase(evalsvc_results_total[$__range]))",
                        "{{job_kind}} {{status}} m={{milestone}}",
                    )
                ],
            )
        )
        .with_panel(
            series(
                "Reward distribution",
                "none",
                [("sum by (le) (increase(evalsvc_reward_bucket[$__range]))", "<= {{le}}")],
                "Cumulative counts of evaluations with a reward at or under each bound.",
            )
        )
        .with_panel(
            single(
                "Mean reward",
                "none",
                (
                    '(sum(increase(evalsvc_reward_points_total{sign="positive"}[$__range])) '
                    '- sum(increase(evalsvc_reward_points_total{sign="negative"}[$__range]))) '
                    "/ sum(increase(evalsvc_reward_count[$__range]))",
                    "mean",
                ),
            )
        )
        .with_panel(
            single(
                "Refused share of evaluations",
                "percentunit",
                (
                    'sum(increase(evalsvc_results_total{job_kind="evaluate", status="forbidden"}[$__range])) '
                    '/ sum(increase(evalsvc_results_total{job_kind="evaluate"}[$__range]))',
                    "refused",
                ),
            )
        )
        .with_panel(
            series(
                "Anti-cheat findings by rule",
                "none",
                [
                    (
                        "sum by (rule, action) (increase(evalsvc_refusals_total[$__range]))",
                        "{{rule}} ({{action}})",
                    )
                ],
                "action=refused: status forbidden; action=review: correct, but its speed is not believed "
                "(not rewarded).",
            )
        )
        .with_panel(
            series(
                "Findings rate",
                "ops",
                [(f"sum by (action) (rate(evalsvc_refusals_total[{RATE}]))", "{{action}}")],
            )
        )
    )


BOARDS = {
    "fleet-overview": fleet_overview,
    "per-gpu": per_gpu,
    "pipeline-stages": pipeline_stages,
    "rewards-and-refusals": rewards_and_refusals,
}


def render() -> dict[str, str]:
    """File name -> JSON text, deterministic (sorted keys, trailing newline)."""
    return {
        f"{name}.json": json.dumps(make().build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"
        for name, make in BOARDS.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="compare with the committed JSON, write nothing")
    args = parser.parse_args()
    stale = []
    for name, text in render().items():
        path = OUT / name
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            OUT.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print("stale: " + ", ".join(stale) + " (run deploy/grafana/build_dashboards.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
