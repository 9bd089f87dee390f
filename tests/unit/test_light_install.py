"""A plain `pip install evalsvc` is the client (issue 24): the SDK, the RL adapters and the CLI's client
commands import and run their help with torch, Celery, Kombu, Docker, pyarrow, NVML, Redis and the rest of
the service's dependencies unimportable, and pyproject's plain dependencies name none of them (the
service's parts are the `server` and `worker` extras)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]
HEAVY = ("torch", "celery", "kombu", "docker", "pyarrow", "pynvml", "redis", "capstone", "ninja", "numpy")
CLIENT_MODULES = (
    "evalsvc.sdk",
    "evalsvc.rl.trl",
    "evalsvc.rl.verl",
    "evalsvc.rl.openrlhf",
    "evalsvc.rl.openrlhf_server",
)
PROBE = f"""
import importlib, importlib.abc, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {HEAVY!r}:
            raise ImportError("not in a plain install: " + name)
sys.meta_path.insert(0, Refuse())
for m in {CLIENT_MODULES!r}:
    importlib.import_module(m)
from typer.testing import CliRunner
from evalsvc.cli import app
for args in (["--help"], ["submit", "--help"], ["wait", "--help"], ["rl-reward-server", "--help"]):
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, (args, r.output, r.exception)
print("light")
"""


def test_plain_dependencies_name_none_of_the_service_parts() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[\[<>=!~ ]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    assert names.isdisjoint({"torch", "celery", "kombu", "docker", "pyarrow", "nvidia-ml-py", "redis"}), names
    extras = project["optional-dependencies"]
    assert {"server", "worker", "all"} <= set(extras)


def test_client_modules_and_commands_run_without_the_service_parts() -> None:
    run = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0 and run.stdout.strip().endswith("light"), run.stderr[-3000:]
