"""`evalsvc eval` as a person and as a script see it: stages on stderr while it works, the result on
stdout; with --json, only the JSON document (the shape `submit --json` and `wait --json` print too)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from evalsvc.suite import EXAMPLES
from tests.cli.test_gate import ROOT
from tests.conftest import TEST_DATA
from tests.corpus.reader import small_task_path

RELU = EXAMPLES / "l1" / "relu"


def _eval(*extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "EVALSVC_DATA_DIR": str(TEST_DATA),
        "EVALSVC_COMPILE_BACKEND": "docker",
        "EVALSVC_RUNNER_ISOLATION": "process" if os.geteuid() == 0 else "none",
    }
    argv = [sys.executable, "-m", "evalsvc.cli", "eval", "--task", str(small_task_path("l1/relu"))]
    argv += ["--solution", str(RELU / "cpu_wrong.py"), "--device", "cpu", "--trials", "2", "--budget", "0.2"]
    argv += ["--no-compile-baseline", *extra]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)


@pytest.mark.docker
def test_stages_on_stderr_and_only_json_with_json(docker_ready: None) -> None:
    shown = _eval()
    assert shown.returncode == 0, shown.stderr
    stages = [line.split("] ", 1)[1] for line in shown.stderr.splitlines() if line.startswith("[")]
    assert stages[0] == "compiling" and stages[1].startswith("compile: ok, "), stages
    assert "correctness: 2 trials on fresh random inputs" in stages
    assert "incorrect" in shown.stdout  # the rendered result

    quiet = _eval("--json")
    assert quiet.returncode == 0, quiet.stderr
    assert "compiling" not in quiet.stderr
    doc = json.loads(quiet.stdout)
    assert doc["evaluation_id"] is None and doc["state"] == "done" and doc["status"] == "incorrect"
