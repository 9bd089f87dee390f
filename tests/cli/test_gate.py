"""`evalsvc gate` as a CI job runs it: a real subprocess, the real local pipeline (Docker compile sandbox,
isolated CPU runner), its exit code, its JUnit XML and its JSON report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from evalsvc.suite import EXAMPLES
from tests.conftest import TEST_DATA
from tests.corpus.reader import small_task_path

ROOT = Path(__file__).parents[2]
RELU = EXAMPLES / "l1" / "relu"


def _suite(tmp_path: Path, expectations: dict[str, dict[str, object]]) -> Path:
    """A suite file in its own folder with the relu task and the named solutions, paths relative to it."""
    folder = tmp_path / "suite"
    (folder / "relu").mkdir(parents=True)
    shutil.copy(small_task_path("l1/relu"), folder / "relu" / "task.py")  # CI checks the gate, not arithmetic
    solutions = []
    for name, expect in expectations.items():
        shutil.copy(RELU / name, folder / "relu" / name)
        solutions.append({"path": f"relu/{name}", "device": "cpu", **expect})
    suite = folder / "kernels.json"
    task = {"id": "l1/relu", "task": "relu/task.py", "solutions": solutions}
    suite.write_text(json.dumps({"tasks": [task]}))
    return suite


def _gate(suite: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "EVALSVC_DATA_DIR": str(TEST_DATA),
        "EVALSVC_COMPILE_BACKEND": "docker",
        "EVALSVC_RUNNER_ISOLATION": "process" if os.geteuid() == 0 else "none",
    }
    argv = [sys.executable, "-m", "evalsvc.cli", "gate", str(suite), "--device", "cpu", "--trials", "2"]
    argv += ["--budget", "0.2", "--no-compile-baseline", "--junit", str(tmp_path / "junit.xml")]
    argv += ["--json", str(tmp_path / "report.json"), *extra]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)


def _cases(junit: Path) -> dict[str, ET.Element]:
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    return {case.get("name", ""): case for case in root.iter("testcase")}


@pytest.mark.docker
def test_every_expectation_holds_exit_0_and_junit_all_passing(docker_ready: None, tmp_path: Path) -> None:
    suite = _suite(
        tmp_path,
        {"cpu_ok.py": {"expect": "ok", "min_reward": 1}, "cpu_wrong.py": {"expect": "incorrect"}},
    )
    run = _gate(suite, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "0", "0")
    cases = _cases(tmp_path / "junit.xml")
    assert set(cases) == {"relu/cpu_ok.py", "relu/cpu_wrong.py"}
    assert all(c.get("classname") == "l1/relu" and c.find("failure") is None for c in cases.values())
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["exit_code"] == 0 and report["counts"] == {"passed": 2, "failed": 0, "error": 0}
    got = {c["solution"]: c["result"]["status"] for c in report["cases"]}
    assert got == {"relu/cpu_ok.py": "ok", "relu/cpu_wrong.py": "incorrect"}
    assert "2 passed, 0 failed, 0 not judged" in run.stdout


@pytest.mark.docker
def test_one_expectation_missed_exit_1_and_one_junit_failure(docker_ready: None, tmp_path: Path) -> None:
    suite = _suite(tmp_path, {"cpu_ok.py": {"expect": "ok"}, "cpu_wrong.py": {"expect": "ok"}})
    run = _gate(suite.parent, tmp_path)  # the folder of suite files
    assert run.returncode == 1, run.stdout + run.stderr
    cases = _cases(tmp_path / "junit.xml")
    assert cases["relu/cpu_ok.py"].find("failure") is None
    failure = cases["relu/cpu_wrong.py"].find("failure")
    assert failure is not None and failure.get("message") == "expected ok, got incorrect"
    assert "status incorrect" in (failure.text or "")
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "1", "0")


@pytest.mark.parametrize(
    "entry, said",
    [
        ({"path": "relu/missing.py", "device": "cpu", "expect": "ok"}, "does not exist"),
        ({"path": "relu/cpu_ok.py", "device": "cpu", "expect": "fine"}, "'fine' is not a valid Status"),
        ({"path": "relu/cpu_ok.py", "device": "cpu", "expect": "ok", "min_reward": "1"}, "must be a number"),
        ({"path": "relu/cpu_ok.py", "device": "tpu", "expect": "ok"}, "device must be 'cpu' or 'cuda'"),
    ],
)
def test_an_unreadable_suite_is_a_usage_error_before_anything_runs(
    tmp_path: Path, entry: dict[str, object], said: str
) -> None:
    suite = _suite(tmp_path, {"cpu_ok.py": {"expect": "ok"}})
    data = json.loads(suite.read_text())
    data["tasks"][0]["solutions"] = [entry]
    suite.write_text(json.dumps(data))
    run = _gate(suite, tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    assert said in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "junit.xml").exists()
