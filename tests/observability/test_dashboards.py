"""The dashboards: generated from code, and asking only for metrics the service exports."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from tests.observability.dashboards import (
    DASHBOARDS,
    exported_names,
    metric_names,
    panel_queries,
    variable_metrics,
)

GENERATOR = DASHBOARDS.parent / "build_dashboards.py"


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("build_dashboards", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_json_is_the_generators_output() -> None:
    rendered = _generator().render()
    committed = {p.name: p.read_text() for p in DASHBOARDS.glob("*.json")}
    assert (
        set(committed)
        == set(rendered)
        == {
            "fleet-overview.json",
            "per-gpu.json",
            "pipeline-stages.json",
            "rewards-and-refusals.json",
        }
    )
    stale = [name for name, text in rendered.items() if committed[name] != text]
    assert not stale, f"{stale} differ: run python deploy/grafana/build_dashboards.py"


def test_every_query_names_only_exported_metrics() -> None:
    exported = exported_names()
    queries = panel_queries()
    assert len(queries) >= 30
    unknown = {
        (q.dashboard, q.panel, name) for q in queries for name in metric_names(q.expr) if name not in exported
    }
    assert not unknown, unknown
    assert variable_metrics() <= exported
    assert all(metric_names(q.expr) for q in queries), "a query that reads no metric"


def test_every_panel_uses_the_provisioned_data_source() -> None:
    provisioned = (DASHBOARDS.parent / "provisioning" / "datasources" / "prometheus.yml").read_text()
    for path in DASHBOARDS.glob("*.json"):
        for panel in json.loads(path.read_text())["panels"]:
            if panel["type"] == "row":
                continue
            assert panel["datasource"]["uid"] in provisioned, (path.name, panel["title"])


def test_metric_name_extraction() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, route) (rate(evalsvc_x_bucket{a="b c"}[5m]))) '
        "/ on (job) group_left sum without (instance) (evalsvc_y) > bool 0"
    )
    assert metric_names(expr) == {"evalsvc_x_bucket", "evalsvc_y"}
    assert Path(GENERATOR).is_file()
