"""evalsvc_build_info{version, commit}: which build serves an endpoint (value 1), for the gateway and workers.

A scrape-time collector rather than a registry metric: prometheus-client's multiprocess mode keeps no Info
metrics, and the answer is the same in every process of a group.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import cache
from importlib.metadata import PackageNotFoundError, version

from prometheus_client.core import InfoMetricFamily, Metric
from prometheus_client.registry import Collector

UNKNOWN = "unknown"


@cache
def package_version() -> str:
    """The installed evalsvc distribution's version; "unknown" where it runs from a source tree only (the
    compile image puts it on PYTHONPATH)."""
    try:
        return version("evalsvc")
    except PackageNotFoundError:
        return UNKNOWN


def build_labels(git_commit: str | None) -> dict[str, str]:
    return {"version": package_version(), "commit": git_commit or UNKNOWN}


class BuildInfoCollector(Collector):
    def __init__(self, git_commit: str | None) -> None:
        self.labels = build_labels(git_commit)

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        family.add_metric([], self.labels)
        yield family

    @staticmethod
    def _family() -> InfoMetricFamily:
        return InfoMetricFamily("evalsvc_build", "the evalsvc build behind this endpoint (value 1)")
