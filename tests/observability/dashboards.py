"""What the committed dashboards ask Prometheus, and what the service exports (from its real registries)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.core import Metric

from evalsvc.api.metrics import Metrics
from evalsvc.observability.exporter import worker_collectors
from evalsvc.observability.metrics import WorkerMetrics
from evalsvc.settings import Settings

DASHBOARDS = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "dashboards"
# Grafana's own variables, as a panel would send them for a six-hour view.
GRAFANA_VARS = {"$__rate_interval": "1m", "$__range": "6h", "$__interval": "15s", "$gpu": ".*"}

_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("_count", "_sum", "_created"),
    "info": ("_info",),
    "gauge": ("",),
    "unknown": ("",),
}
_KEYWORDS = {
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
}


@dataclass(frozen=True)
class PanelQuery:
    dashboard: str
    panel: str
    expr: str

    def promql(self) -> str:
        """The query with Grafana's variables replaced, as Grafana would send it."""
        out = self.expr
        for var, value in GRAFANA_VARS.items():
            out = out.replace(var, value)
        return out


def panel_queries() -> list[PanelQuery]:
    out = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        board = json.loads(path.read_text())
        for panel in board.get("panels", []):
            for target in panel.get("targets") or []:
                out.append(PanelQuery(path.stem, panel["title"], target["expr"]))
    return out


def variable_metrics() -> set[str]:
    """Metrics named by template variables' label_values(metric, label) queries."""
    names = set()
    for path in sorted(DASHBOARDS.glob("*.json")):
        for var in json.loads(path.read_text()).get("templating", {}).get("list", []):
            query = var.get("query")
            text = query if isinstance(query, str) else (query or {}).get("query", "")
            m = re.match(r"label_values\(\s*([a-zA-Z_:][\w:]*)", text)
            if m:
                names.add(m.group(1))
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers that are not functions, keywords or
    labels (label matchers, range selectors, grouping clauses and strings are removed first)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][\w:]*)\s*(\()?", e):
        if m.group(2) or m.group(1) in _KEYWORDS:
            continue
        names.add(m.group(1))
    return names


def _sample_names(families: Iterable[Metric]) -> set[str]:
    return {f.name + suffix for f in families for suffix in _SUFFIXES[f.type]}


def exported_names() -> set[str]:
    """Every sample name the gateway and the workers can export, from their real registries."""
    families: list[Metric] = []
    families += WorkerMetrics("gpu", "w").registry.collect()
    families += Metrics(None).registry.collect()
    for settings in (Settings(worker_kind="compile"), Settings(worker_kind="gpu", device="cuda:0")):
        for collector in worker_collectors(settings, "compile"):
            families += collector.describe()  # type: ignore[attr-defined]
    return _sample_names(families)
