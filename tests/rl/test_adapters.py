"""Each adapter called as its framework calls it, against the live stack on the CPU device: a fenced honest
completion scores >= 1, a wrong one -1, one without code `format_error` (-1), and our failures (the device
worker stopped, the service unreachable) are masked, never -1.

TRL is installed (dev extra) and its own reward-calling code, `GRPOTrainer._calculate_rewards`, runs here
on a stand-in for the trainer object (no model is needed on that path). verl and OpenRLHF do not install
here without a GPU stack (vllm, ray, deepspeed, flash-attn), so their adapters are called with exactly the
arguments those frameworks pass: verl's reward managers call `compute_score(data_source=, solution_str=,
ground_truth=, extra_info=, **reward_kwargs)` (its batch manager the plural names), OpenRLHF calls
`reward_func(queries, prompts, labels)` with lists of strings."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from evalsvc.core.options import EvalOptions
from evalsvc.core.tasks import TaskSpec
from evalsvc.rl import openrlhf, trl, verl
from evalsvc.rl.judge import RewardConfig
from evalsvc.sdk import Client
from tests.live_stack import LiveStack, free_port

pytestmark = pytest.mark.docker

EXAMPLES = Path(__file__).parents[2] / "evalsvc" / "examples" / "l1" / "relu"
OK = (EXAMPLES / "cpu_ok.py").read_text()
WRONG = (EXAMPLES / "cpu_wrong.py").read_text()
# The relu example at 1/80 of its size: these tests check the adapters, not CPU arithmetic.
TASK = (EXAMPLES / "task.py").read_text().replace("ROWS = 5120", "ROWS = 64")
FAST: dict[str, Any] = dict(trials=2, timing_budget_s=0.2, compile_baseline=False, timing_pool=2)
_distinct = itertools.count(1)

HONEST = f"I fuse the ReLU into one OpenMP loop.\n\n```python\n{OK}```\n\nThis avoids extra passes."
WRONG_C = f"<think>\nIndex carefully.\n</think>\nHere it is:\n```python\n{WRONG}```\n"
NO_CODE = "I am sorry, I cannot write this kernel."


def fresh_options() -> dict[str, Any]:
    """Options no earlier evaluation used: the service cannot answer from a finished duplicate."""
    return {**FAST, "timing_budget_s": 0.2 + next(_distinct) * 1e-4}


@pytest.fixture(scope="module")
def task_id(stack: LiveStack) -> str:
    assert "ROWS = 64" in TASK
    with Client(stack.url) as client:
        return client.register_task(TaskSpec(source=TASK))


def grpo_rewards(reward_func: Any, rows: list[dict[str, Any]], completions: list[Any]) -> tuple[Any, Any]:
    """TRL's own reward computation (`GRPOTrainer._calculate_rewards`) on a stand-in trainer."""
    from accelerate import Accelerator
    from transformers import TrainerState
    from trl import GRPOTrainer

    trainer = SimpleNamespace(
        accelerator=Accelerator(cpu=True),
        args=SimpleNamespace(report_to=[]),
        state=TrainerState(),
        reward_funcs=[reward_func],
        reward_processing_classes=[None],
        reward_func_names=[reward_func.__name__],
        environments=None,
    )
    trainer._pending_extra_logs = defaultdict(list)
    trainer._pending_metrics = defaultdict(list)
    trainer._log_completion_extra = GRPOTrainer._log_completion_extra.__get__(trainer)
    trainer._log_metric = GRPOTrainer._log_metric.__get__(trainer)
    prompts = [r["prompt"] for r in rows]
    ids = [[0] for _ in completions]
    rewards = GRPOTrainer._calculate_rewards(trainer, rows, prompts, completions, ids)
    return rewards[:, 0], trainer


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def test_trl_grpo_rewards(stack: LiveStack, task_id: str) -> None:
    reward = trl.make_kernel_reward(url=stack.url, options=fresh_options())
    prompt = [{"role": "user", "content": "Write ModelNew for the task."}]
    completions = [chat(HONEST), chat(WRONG_C), chat(NO_CODE)]
    rows = [{"prompt": prompt, "task_id": task_id} for _ in completions]
    rewards, trainer = grpo_rewards(reward, rows, completions)
    assert rewards[0].item() >= 1 and rewards[1].item() == -1 and rewards[2].item() == -1, rewards
    assert trainer._pending_extra_logs["evalsvc_status"] == ["ok", "incorrect", "format_error"]
    assert trainer._pending_metrics["evalsvc/masked"] == [0.0]


def test_verl_compute_score(stack: LiveStack) -> None:
    kwargs = {"url": stack.url, "options": fresh_options()}  # verl's custom_reward_function.reward_kwargs
    extra = {"split": "train", "index": 0}
    ok = verl.compute_score(
        data_source="kernelbench", solution_str=HONEST, ground_truth=TASK, extra_info=extra, **kwargs
    )
    wrong = asyncio.run(
        verl.compute_score_async(
            data_source="kernelbench", solution_str=WRONG_C, ground_truth=TASK, extra_info=extra, **kwargs
        )
    )
    none = verl.compute_score(
        data_source="kernelbench", solution_str=NO_CODE, ground_truth=TASK, extra_info=extra, **kwargs
    )
    assert ok["score"] >= 1 and ok["status"] == "ok" and ok["milestone"] >= 1 and ok["evaluation_id"]
    assert ok["speedup_eager"] > 0 and not ok["masked"]
    assert wrong["score"] == -1 and wrong["status"] == "incorrect" and not wrong["masked"]
    assert none == {
        "score": -1.0,
        "status": "format_error",
        "milestone": -1,
        "speedup_eager": 0.0,
        "speedup_compile": 0.0,
        "evaluation_id": "",
        "masked": False,
    }
    # verl's reward_extra_info needs the same keys and types in every result
    assert all(
        {k: type(v) for k, v in r.items()} == {k: type(v) for k, v in none.items()} for r in (ok, wrong)
    )


def test_verl_batch_manager_shape(stack: LiveStack, task_id: str) -> None:
    n = 3
    scores = verl.compute_score_batch(
        data_sources=np.array(["kernelbench"] * n, dtype=object),
        solution_strs=[HONEST, WRONG_C, NO_CODE],
        ground_truths=[task_id] * n,
        extra_infos=np.array([{"index": i} for i in range(n)], dtype=object),
        url=stack.url,
        options=fresh_options(),
        max_batch=1,  # the two evaluations in two batch submissions, answered in order all the same
    )
    assert [s["status"] for s in scores] == ["ok", "incorrect", "format_error"]
    assert scores[0]["score"] >= 1 and scores[1]["score"] == -1 and scores[2]["score"] == -1


def test_openrlhf_reward_func(stack: LiveStack, task_id: str) -> None:
    reward_func = openrlhf.make_reward_func(url=stack.url, options=fresh_options())
    prompt = "<|im_start|>user\nWrite ModelNew for the ReLU task.<|im_end|>\n<|im_start|>assistant\n"
    responses = [HONEST, WRONG_C, NO_CODE]
    out = reward_func([prompt + r for r in responses], [prompt] * 3, [task_id] * 3)
    rewards = out["rewards"]
    assert isinstance(rewards, torch.Tensor) and rewards.shape == (3,)
    assert rewards[0].item() >= 1 and rewards[1].item() == -1 and rewards[2].item() == -1
    assert torch.equal(out["scores"], rewards)
    logs = out["extra_logs"]
    assert logs["format_error"].tolist() == [0.0, 0.0, 1.0] and logs["masked"].tolist() == [0.0] * 3
    assert logs["correct"].tolist() == [1.0, 0.0, 0.0]


def test_a_stopped_device_worker_is_masked_not_punished(
    stopped_device_worker: LiveStack, task_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Nothing can evaluate while the only device worker is stopped: each call ends at its timeout, whatever
    # the machine's speed, with its items masked
    url = stopped_device_worker.url
    caplog.set_level(logging.WARNING, logger="evalsvc.rl")
    reward = trl.make_kernel_reward(url=url, options=fresh_options(), timeout_s=8)
    rows = [{"prompt": "p", "task_id": task_id}, {"prompt": "p", "task_id": task_id}]
    rewards, _ = grpo_rewards(reward, rows, [HONEST, NO_CODE])
    assert torch.isnan(rewards[0]) and rewards[1].item() == -1  # None became NaN: the sample is dropped
    score = verl.compute_score(
        data_source="kernelbench",
        solution_str=HONEST,
        ground_truth=task_id,
        url=url,
        options=fresh_options(),
        timeout_s=8,
    )
    assert score["masked"] and score["score"] == 0.0 and score["status"] == "client_timeout"
    out = openrlhf.make_reward_func(url=url, options=fresh_options(), timeout_s=8)(
        ["p" + HONEST], ["p"], [task_id]
    )
    assert out["rewards"].tolist() == [0.0] and out["extra_logs"]["masked"].tolist() == [1.0]
    assert "masked" in caplog.text


def test_an_unreachable_service_is_masked_not_punished(caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    quick = {"url": url, "retry": {"attempts": 2, "total_s": 5.0, "max_wait_s": 0.2}}
    caplog.set_level(logging.WARNING, logger="evalsvc.rl")
    assert trl.make_kernel_reward(**quick)([HONEST, NO_CODE], task_id="t_x") == [None, -1.0]
    score = verl.compute_score(data_source="kernelbench", solution_str=HONEST, ground_truth="t_x", **quick)
    assert score["masked"] and score["score"] == 0.0 and score["status"] == "unreachable"
    out = openrlhf.make_reward_func(**quick, masked_score=0.5)(["q" + HONEST], ["q"], ["t_x"])
    assert out["rewards"].tolist() == [0.5] and out["extra_logs"]["masked"].tolist() == [1.0]
    assert "unreachable" in caplog.text


def test_address_and_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSVC_URL", "http://evalsvc.example:9000")
    monkeypatch.setenv("EVALSVC_API_KEY", "k-123")
    config = RewardConfig.from_env()
    assert (config.url, config.api_key) == ("http://evalsvc.example:9000", "k-123")
    assert RewardConfig.from_env(url="http://other:1").url == "http://other:1"


def test_openrlhf_remote_reward_server(stack: LiveStack, task_id: str) -> None:
    from fastapi.testclient import TestClient

    from evalsvc.rl.judge import RewardConfig
    from evalsvc.rl.openrlhf_server import create_app

    config = RewardConfig(url=stack.url, options=EvalOptions(**fresh_options()))
    prompt = "<|im_start|>user\nWrite ModelNew.<|im_end|>\n<|im_start|>assistant\n"
    body = {"query": [prompt + HONEST, prompt + NO_CODE], "prompts": [prompt] * 2, "labels": [task_id] * 2}
    with TestClient(create_app(config)) as client:  # OpenRLHF posts exactly this body (remote_rm_fn)
        resp = client.post("/get_reward", json=body)
    assert resp.status_code == 200, resp.text
    out = resp.json()
    assert out["rewards"][0] >= 1 and out["rewards"][1] == -1 and out["scores"] == out["rewards"]
    assert out["extra_logs"]["format_error"] == [0.0, 1.0]
