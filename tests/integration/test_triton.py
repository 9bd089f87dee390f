"""Triton solutions end to end on the CPU (issue 26): `evalsvc eval --device cpu` judges kernels run by
Triton's interpreter, and the compile sandbox compiles every honest Triton solution's kernels ahead for
sm_90 (a cache hit the second time). Real Docker compiles, a real isolated runner, real torch and Triton.

The Triton exploit corpus (tests/corpus/exploits/triton_*.py) and honest corpus
(tests/corpus/honest/triton_*.py) run through tests/integration/test_exploits.py with the rest
(`-k triton` there).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalsvc.cli_files import read_solution
from evalsvc.core.results import Status
from evalsvc.core.solutions import TRITON
from evalsvc.settings import Settings
from tests.cli.test_gate import ROOT
from tests.conftest import TEST_DATA
from tests.corpus.reader import CORPUS, entries, task_for

pytestmark = pytest.mark.docker
RELU_TASK = CORPUS / "tasks" / "l1" / "relu" / "task.py"
HONEST_TRITON = [p for p in entries("honest", ("any", "cpu", "cuda")) if p.name.startswith("triton_")]


def _eval(solution: Path) -> dict:  # type: ignore[type-arg]
    env = {
        **os.environ,
        "EVALSVC_DATA_DIR": str(TEST_DATA),
        "EVALSVC_COMPILE_BACKEND": "docker",
        "EVALSVC_RUNNER_ISOLATION": "process" if os.geteuid() == 0 else "none",
    }
    argv = [sys.executable, "-m", "evalsvc.cli", "eval", "--task", str(RELU_TASK)]
    argv += ["--solution", str(solution)]
    argv += ["--device", "cpu", "--trials", "3", "--budget", "0.3", "--no-compile-baseline", "--json"]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_honest_triton_relu_is_ok_by_the_interpreter(docker_ready: None) -> None:
    result = _eval(CORPUS / "honest" / "triton_relu.py")
    assert result["status"] == "ok", result["message"]
    assert result["reward"] >= 1
    assert result["solution_format"] == TRITON
    assert result["milestone"] in (None, 0, 1)  # interpreter time earns no speed milestone
    assert result["timings"]["candidate"]["method"].endswith("+triton-interpreter")
    assert any("interpreter" in w for w in result["task_warnings"])
    assert [k["name"] for k in result["compile"]["triton"]["kernels"]] == ["relu_kernel"]


def test_autotuned_kernel_reports_its_chosen_config(docker_ready: None) -> None:
    result = _eval(CORPUS / "honest" / "triton_relu_autotune.py")
    assert result["status"] == "ok", result["message"]
    [tuning] = result["timings"]["autotune"]  # tuned once, at the first call: the key (n) never changes
    assert tuning["kernel"] == "relu_kernel"
    assert tuning["configs"] == 2
    assert "BLOCK: 2048" in tuning["config"] or "BLOCK: 8192" in tuning["config"]
    assert tuning["tuning_ms"] > 0


def test_wrong_triton_relu_is_incorrect(docker_ready: None) -> None:
    result = _eval(CORPUS / "exploits" / "triton_wrong_math.py")
    assert result["status"] == "incorrect", result["message"]
    assert result["solution_format"] == TRITON


def test_triton_kernel_for_show_is_forbidden(docker_ready: None) -> None:
    result = _eval(CORPUS / "exploits" / "triton_for_show.py")
    assert result["status"] == "forbidden", result["message"]
    assert "torch-compute-in-forward" in {f["rule"] for f in result["findings"]}


@pytest.fixture(scope="module")
def compiler(cpu_settings: Settings, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The CLI's compiler with an empty store of its own: the first compile of each solution is a real one."""
    from evalsvc.store.artifacts import LocalArtifactStore
    from evalsvc.wiring import make_local_pipeline

    compiler = make_local_pipeline(cpu_settings).compiler
    compiler.store = LocalArtifactStore(tmp_path_factory.mktemp("triton-artifacts"))
    return compiler


@pytest.mark.parametrize("path", HONEST_TRITON, ids=lambda p: p.stem)
def test_ahead_of_time_compile_for_sm90_then_cache_hit(compiler, path: Path) -> None:  # type: ignore[no-untyped-def]
    """On the GPU-sized task (what the GPU worker judges): every launch of the traced forward compiled for
    cuda:90 in the sandbox, its cubin in the artifact; the second compile of the same solution is a hit."""
    task, solution = task_for(path, "cuda"), read_solution(path)
    first = compiler.compile(solution, task.meta.allow_vendor_libs, task)
    assert first.status is Status.OK and not first.report.cached, (first.message, first.report)
    triton = first.report.triton
    assert triton is not None and triton.target == "cuda:90" and triton.launches_traced >= 1, triton
    assert triton.kernels and all(k.ok for k in triton.kernels), triton.kernels
    assert triton.trace_note is None, triton.trace_note
    second = compiler.compile(solution, task.meta.allow_vendor_libs, task)
    assert second.status is Status.OK and second.report.cached, second.report
    assert second.artifact_key == first.artifact_key
    cubins = _cubins(compiler, first.artifact_key)
    assert len(cubins) >= len(triton.kernels), cubins


def _cubins(compiler, key: str) -> list[str]:  # type: ignore[no-untyped-def]
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        assert compiler.store.fetch(key, Path(tmp) / "a")
        return sorted(p.name for p in (Path(tmp) / "a" / "triton-cache").rglob("*.cubin"))
