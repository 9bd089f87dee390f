"""The bad-input catalogue (docs/reliability.md): each hostile or broken input gets a 4xx problem document
naming it, or, for what only the judge can see, a typed terminal result. Items already covered by
tests/api are listed in the document, not repeated here."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsvc.core.options import EvalOptions
from evalsvc.core.results import CompileReport, FailureKind, Status
from evalsvc.core.solutions import Solution
from evalsvc.core.tasks import InvalidTask, TaskSpec
from tests.api.conftest import (  # noqa: F401 - fixtures
    AUTH_A,
    KEYS,
    SOLUTION,
    Gateway,
    GatewayFactory,
    assert_problem,
    gw,
    make_gateway,
    redis_server,
    redis_url,
    task_id,
)

HEADER = {**AUTH_A, "content-type": "application/json"}


def test_non_utf8_bytes_in_the_body(gw: Gateway, task_id: str) -> None:  # noqa: F811
    raw = b'{"task_id": "%s", "solution": {"files": {"solution.py": "x = \xff\xfe"}}}' % task_id.encode()
    assert_problem(gw.client.post("/v1/evaluations", content=raw, headers=HEADER), 400, "bad_request")
    assert gw.enqueuer.job_ids == []


def test_unencodable_source_text(gw: Gateway, task_id: str) -> None:  # noqa: F811
    """Valid JSON, but a lone surrogate cannot be UTF-8 source (nor hashed): refused by name."""
    source = b'"x = \\"\\ud800\\""'
    body = b'{"task_id": "%s", "solution": {"files": {"solution.py": %s}}}' % (task_id.encode(), source)
    r = gw.client.post("/v1/evaluations", content=body, headers=HEADER)
    assert "surrogates not allowed" in assert_problem(r, 422, "validation_error")["detail"]
    task = b'{"source": "\\udc80import torch"}'
    assert_problem(gw.client.post("/v1/tasks", content=task, headers=HEADER), 422, "validation_error")


def test_absolute_and_parent_paths_in_a_file_tree(gw: Gateway, task_id: str) -> None:  # noqa: F811
    for name in ("/etc/passwd.py", "kernels/../../x.cu", "kernels/./../binding.cpp"):
        sol = {"files": {name: "x = 1\n", "model_new.py": "x = 1\n"}}
        r = gw.client.post("/v1/evaluations", json={"task_id": task_id, "solution": sol}, headers=AUTH_A)
        assert name in assert_problem(r, 422, "validation_error")["detail"]
    assert gw.enqueuer.job_ids == []


def test_unknown_reward_schedule(gw: Gateway, task_id: str) -> None:  # noqa: F811
    body = {"task_id": task_id, "solution": SOLUTION, "options": {"schedule": {"kind": "lottery"}}}
    r = gw.client.post("/v1/evaluations", json=body, headers=AUTH_A)
    assert "lottery" in assert_problem(r, 422, "validation_error")["detail"]


def test_revoked_key_is_refused_like_an_unknown_one(make_gateway: GatewayFactory) -> None:  # noqa: F811
    """Keys do not expire on their own: an operator revokes one by removing it from EVALSVC_API_KEYS."""
    before = make_gateway()
    assert before.client.get("/v1/tasks", headers=AUTH_A).status_code == 200
    after = make_gateway(api_keys={k: t for k, t in KEYS.items() if k != "key-a"})
    r = after.client.get("/v1/tasks", headers=AUTH_A)
    assert_problem(r, 401, "unauthorized")
    assert r.headers["WWW-Authenticate"] == "Bearer"


TASK = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(
    ("get_inputs", "says"),
    [
        ("def get_inputs():\n    raise ValueError('no inputs today')\n", "ValueError: no inputs today"),
        # 50 GB: measured on the meta device, never allocated.
        ("def get_inputs():\n    return [torch.randn(125, 100_000_000)]\n", "50.0 GB of tensors"),
        ("def get_inputs():\n    return 7\n", "not a list"),
    ],
)
def test_task_whose_inputs_cannot_be_made(tmp_path: Path, get_inputs: str, says: str) -> None:
    """What only running the task shows ends the evaluation as a typed result, before any candidate."""
    from evalsvc.engine.taskload import load_task
    from evalsvc.settings import Settings
    from evalsvc.wiring import make_evaluator

    spec = TaskSpec(source=TASK + get_inputs)
    with pytest.raises(InvalidTask, match=says):
        load_task(spec)
    settings = Settings(device="cpu", data_dir=tmp_path, runner_isolation="none")
    evaluator = make_evaluator(settings, None)  # the task fails before any artifact is needed
    result = evaluator.evaluate(
        spec, Solution(files={"solution.py": "x = 1\n"}), "nokey", CompileReport(ok=True), EvalOptions()
    )
    assert result.status is Status.INTERNAL_ERROR and result.failure is FailureKind.TASK_INVALID
    assert says in (result.message or "") and result.reward == -1
