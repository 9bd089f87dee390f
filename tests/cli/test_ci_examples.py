"""The CI examples under deploy/ci parse, publish JUnit, and call `evalsvc gate` only with options it has."""

from __future__ import annotations

import shlex
from pathlib import Path

import typer.main
import yaml

from evalsvc.cli import app

CI = Path(__file__).parents[2] / "deploy" / "ci"


def _gate_options() -> set[str]:
    gate = typer.main.get_command(app).commands["gate"]  # type: ignore[attr-defined]
    return {opt for param in gate.params for opt in param.opts if opt.startswith("--")}


def _commands(node: object) -> list[str]:
    """Every string in the document that runs `evalsvc gate`."""
    if isinstance(node, dict):
        return [c for v in node.values() for c in _commands(v)]
    if isinstance(node, list):
        return [c for v in node for c in _commands(v)]
    return [node] if isinstance(node, str) and "evalsvc gate" in node else []


def test_each_example_runs_gate_with_real_options_and_publishes_junit() -> None:
    known = _gate_options()
    examples = sorted(CI.glob("*.yml"))
    assert [p.name for p in examples] == ["github-actions.yml", "gitlab-ci.yml"]
    for path in examples:
        doc = yaml.safe_load(path.read_text())
        commands = _commands(doc)
        assert commands, path
        for command in commands:
            words = shlex.split(command.replace("${{", "").replace("}}", ""))
            used = {w.split("=")[0] for w in words if w.startswith("--")}
            assert used <= known, (path.name, used - known)
            assert "--junit" in used
        assert "gate-junit.xml" in path.read_text().split("evalsvc gate", 1)[1]
