"""OpenRLHF: `--remote_rm_url reward.py` where reward.py holds `from evalsvc.rl.openrlhf import
reward_func`, and `--label_key` names the dataset column with the task id (or the task's source).
OpenRLHF calls `reward_func(queries, prompts, labels)`, queries being prompt + response as decoded; the
response is what follows the prompt. The answer: `rewards` and `scores` (tensors when torch imports, lists
otherwise; the same values), `extra_logs` with per-sample `masked`, `format_error`, `correct` and
`milestone`. A masked item (our failure: internal_error, a client timeout, the service unreachable; or
cancelled) scores
`masked_score` (default 0.0) and is logged, never -1. Settings: EVALSVC_URL / EVALSVC_API_KEY, or
`make_reward_func(...)`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from evalsvc.core.results import Status
from evalsvc.rl.config_args import config_from
from evalsvc.rl.judge import Judge, Outcome, RewardConfig, Scored

# Where the assistant's turn starts in common chat templates, for a query that does not begin with its
# prompt as given (special tokens dropped in decoding)
_ASSISTANT_MARKERS = (
    "<|im_start|>assistant",
    "<|start_header_id|>assistant<|end_header_id|>",
    "<|assistant|>",
    "[/INST]",
)


def response_of(query: str, prompt: str) -> str:
    """The response in `query` (prompt + response)."""
    if prompt and query.startswith(prompt):
        return query[len(prompt) :]
    if prompt and prompt in query:
        return query.rsplit(prompt, 1)[1]
    cut = max((query.rfind(m) + len(m) for m in _ASSISTANT_MARKERS if m in query), default=0)
    return query[cut:]


def _tensor(values: list[float]) -> Any:
    try:
        import torch
    except ImportError:
        return values
    return torch.tensor(values, dtype=torch.float32)


def scored_answer(scored: list[Scored], config: RewardConfig, as_tensors: bool = True) -> dict[str, Any]:
    """OpenRLHF's answer: tensors where torch imports (and `as_tensors`), else lists."""
    vector: Callable[[list[float]], Any] = _tensor if as_tensors else list
    rewards = [config.masked_score if s.reward is None else float(s.reward) for s in scored]

    def flags(pred: Callable[[Scored], bool]) -> Any:
        return vector([1.0 if pred(s) else 0.0 for s in scored])

    milestones = [float(s.reached) for s in scored]
    return {
        "rewards": vector(rewards),
        "scores": vector(list(rewards)),
        "extra_logs": {
            "masked": flags(lambda s: s.masked),
            "format_error": flags(lambda s: s.status == Outcome.FORMAT_ERROR),
            "correct": flags(lambda s: s.status == Status.OK),
            "milestone": vector(milestones),
        },
    }


RewardFunc = Callable[[Sequence[str], Sequence[str], Sequence[Any]], dict[str, Any]]


def make_reward_func(**config: Any) -> RewardFunc:
    cfg = config_from(config)
    judge = Judge(cfg)

    def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any]) -> dict[str, Any]:
        responses = [response_of(q, p) for q, p in zip(queries, prompts, strict=True)]
        return scored_answer(judge.score([str(x) for x in labels], responses), cfg)

    return reward_func


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any]) -> dict[str, Any]:
    """OpenRLHF's custom reward function, with the environment's settings."""
    return make_reward_func()(queries, prompts, labels)
