"""Prometheus scrape configuration for a stack on one machine (`evalsvc up`, the end-to-end tests).

Deployments have their own, static ones (deploy/prometheus/prometheus.yml, deploy/k8s/prometheus.yaml).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import yaml

GATEWAY_JOB = "evalsvc-gateway"
WORKERS_JOB = "evalsvc-workers"


def scrape_config(jobs: Mapping[str, Sequence[str]], interval_s: float = 15.0) -> str:
    """A prometheus.yml scraping each job's `host:port` targets at /metrics."""
    interval = f"{interval_s:g}s"
    doc = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [
            {"job_name": job, "metrics_path": "/metrics", "static_configs": [{"targets": list(targets)}]}
            for job, targets in jobs.items()
        ],
    }
    return yaml.safe_dump(doc, sort_keys=False)
