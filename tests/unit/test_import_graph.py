"""The package layout's rules, read from the source (grimp builds the graph from every import statement,
those inside functions and TYPE_CHECKING blocks included): no module reaches back to itself through its
imports, `evalsvc` never imports `workers` (workers depend on evalsvc, never the other way), and what
the isolated processes run (`evalsvc.sandboxed`) reaches none of the judge's own modules, the service or
its stores, directly or through others."""

from __future__ import annotations

import grimp
import networkx as nx
import pytest


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    imports = grimp.build_graph("evalsvc", "workers", cache_dir=None)
    g = nx.DiGraph()
    g.add_nodes_from(imports.modules)
    g.add_edges_from((m, d) for m in imports.modules for d in imports.find_modules_directly_imported_by(m))
    return g


def test_the_graph_covers_both_packages(graph: nx.DiGraph) -> None:
    assert {"evalsvc.engine.judge", "evalsvc.queues", "workers.tasks", "workers.context"} <= set(graph)


def test_no_import_cycle(graph: nx.DiGraph) -> None:
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert cycles == [], f"modules that import each other, directly or through others: {cycles}"


def test_evalsvc_never_imports_workers(graph: nx.DiGraph) -> None:
    back = sorted((m, d) for m, d in graph.edges if m.startswith("evalsvc.") and d.startswith("workers."))
    assert back == [], f"evalsvc modules importing workers: {back}"


# What only the trusted side holds: the judge's decisions, its handles on the isolated processes, the
# system of record and the stores (none of it is for code that serves a candidate or a task).
TRUSTED_ONLY = (
    "evalsvc.engine.judge",
    "evalsvc.engine.judged_timing",
    "evalsvc.engine.reference",
    "evalsvc.engine.launcher",
    "evalsvc.engine.evaluate",
    "evalsvc.service",
    "evalsvc.store",
    "evalsvc.api",
    "evalsvc.settings",
    "workers",
)


def test_the_sandboxed_side_reaches_no_trusted_module(graph: nx.DiGraph) -> None:
    sandboxed = [m for m in graph if m.startswith("evalsvc.sandboxed.")]
    assert "evalsvc.sandboxed.runner" in sandboxed and "evalsvc.sandboxed.reference_host" in sandboxed
    reached = set().union(*(nx.descendants(graph, m) for m in sandboxed))
    bad = sorted(m for m in reached if any(m == t or m.startswith(t + ".") for t in TRUSTED_ONLY))
    assert bad == [], f"modules the isolated processes import, directly or through others: {bad}"
