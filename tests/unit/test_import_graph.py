"""The package layout's rules, read from the source (grimp builds the graph from every import statement,
those inside functions and TYPE_CHECKING blocks included): no module reaches back to itself through its
imports, `evalsvc` never imports `workers` (workers depend on evalsvc, never the other way), what the
isolated processes run (`evalsvc.sandboxed`) reaches none of the judge's own modules, the system of record or
the stores, directly or through others, and every import between packages is an arrow of the diagram in
docs/design.md ("Layout: which package may import which")."""

from __future__ import annotations

import re
from pathlib import Path

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
    "evalsvc.engine.runner_session",
    "evalsvc.engine.trials",
    "evalsvc.engine.candidate_timing",
    "evalsvc.engine.evaluation_baselines",
    "evalsvc.engine.plausibility",
    "evalsvc.engine.candidate_profile",
    "evalsvc.engine.judged_timing",
    "evalsvc.engine.reference",
    "evalsvc.engine.launcher",
    "evalsvc.engine.evaluate",
    "evalsvc.records",
    "evalsvc.redis_clients",
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


DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"


def package_of(module: str) -> str:
    """`evalsvc.engine.judge` -> `engine`, `evalsvc.cli` -> `cli`, `workers.tasks` -> `workers`."""
    parts = module.split(".")
    return "workers" if parts[0] == "workers" else parts[1] if len(parts) > 1 else "evalsvc"


def allowed_imports() -> dict[str, set[str]]:
    """The arrows of design.md's layout diagram: package -> the packages it may import directly."""
    text = DESIGN.read_text()
    section = text.split("## Layout: which package may import which", 1)[1]
    block = section.split("```mermaid", 1)[1].split("```", 1)[0]
    allowed: dict[str, set[str]] = {}
    for line in block.splitlines():
        if not line.strip() or line.startswith("flowchart"):
            continue
        m = re.fullmatch(r"\s*(\w+)(?:\s*-->\s*(.+))?", line)
        assert m, f"a line of the layout diagram this test cannot read: {line!r}"
        allowed.setdefault(m[1], set()).update(t.strip() for t in (m[2] or "").split("&") if t.strip())
    return allowed


@pytest.fixture(scope="module")
def allowed() -> dict[str, set[str]]:
    return allowed_imports()


def test_every_package_is_in_the_diagram(graph: nx.DiGraph, allowed: dict[str, set[str]]) -> None:
    named = set(allowed) | set().union(*allowed.values())
    missing = sorted({package_of(m) for m in graph} - named - {"evalsvc"})
    assert missing == [], f"packages docs/design.md's layout diagram does not show: {missing}"


def test_imports_follow_the_diagram(graph: nx.DiGraph, allowed: dict[str, set[str]]) -> None:
    bad = sorted(
        (m, d)
        for m, d in graph.edges
        if package_of(m) != package_of(d) and package_of(d) not in allowed.get(package_of(m), set())
    )
    assert bad == [], f"imports that docs/design.md's layout diagram does not allow: {bad}"


def test_the_diagram_keeps_the_layer_rules(allowed: dict[str, set[str]]) -> None:
    """What the diagram itself may not allow, whatever it is changed to."""
    assert allowed.get("core", set()) == set(), "core imports no other evalsvc package"
    assert allowed.get("screening", set()) <= {"core"}, "screening imports only core"
    trusted = {"api", "records", "redis_clients", "store", "settings", "workers"}
    assert not allowed.get("sandboxed", set()) & trusted
    assert [p for p, to in allowed.items() if "workers" in to] == [], "evalsvc never imports workers"
