"""Prometheus scrape configuration for a stack on one machine (`evalsvc up`, the end-to-end tests).

Deployments have their own, static ones (deploy/prometheus/prometheus.yml, deploy/k8s/prometheus.yaml).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

GATEWAY_JOB = "evalsvc-gateway"
WORKERS_JOB = "evalsvc-workers"
# The alert rules of a source checkout (deploy/ is not part of an installed package: then there are none).
RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "rules"


def rule_files() -> list[str]:
    """Absolute paths of the checkout's alert rule files; empty where the package runs without deploy/."""
    return [str(p) for p in sorted(RULES_DIR.glob("*.yml"))]


def scrape_config(
    jobs: Mapping[str, Sequence[str]], interval_s: float = 15.0, rules: Sequence[str] = ()
) -> str:
    """A prometheus.yml scraping each job's `host:port` targets at /metrics, evaluating `rules` files."""
    interval = f"{interval_s:g}s"
    doc: dict[str, Any] = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": list(rules),
        "scrape_configs": [
            {"job_name": job, "metrics_path": "/metrics", "static_configs": [{"targets": list(targets)}]}
            for job, targets in jobs.items()
        ],
    }
    return yaml.safe_dump(doc, sort_keys=False)
