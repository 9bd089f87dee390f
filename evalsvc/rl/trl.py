"""TRL: `GRPOTrainer(reward_funcs=[kernel_reward], ...)` with a dataset column `task_id` (a registered task id
or the task's source per row). TRL calls it with `completions` (strings, or message lists for conversational
datasets) and every dataset column as keyword arguments; the whole call is one batch submission. A masked item
(our failure: internal_error, a client timeout, the service unreachable; or an evaluation cancelled) is None,
which TRL turns into NaN: where every reward function gave None, TRL (1.16) leaves the completion out of its
group's baseline and gives it zero advantage; beside other reward functions it adds nothing to the sum. A
completion without usable code scores `format_error_reward` (default -1). Settings come from EVALSVC_URL /
EVALSVC_API_KEY, or use `make_kernel_reward(url=..., options=..., ...)`. With TRL's `log_extra`/`log_metric`
hooks, each completion's status goes to the completions table and the masked share to the metrics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from evalsvc.rl.config_args import config_from
from evalsvc.rl.judge import Judge, Scored

Completion = str | Sequence[dict[str, Any]]


def completion_text(completion: Completion) -> str:
    """A completion's text: the string itself, or its assistant messages' text in order."""
    if isinstance(completion, str):
        return completion
    parts: list[str] = []
    for message in completion:
        if message.get("role", "assistant") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):  # content blocks
            parts.extend(b.get("text", "") for b in content if isinstance(b, dict))
    return "\n".join(parts)


def _tasks(task_id: str | Sequence[str], n: int) -> list[str]:
    return [task_id] * n if isinstance(task_id, str) else [str(t) for t in task_id]


def _log(scored: list[Scored], kw: dict[str, Any]) -> None:
    log_extra, log_metric = kw.get("log_extra"), kw.get("log_metric")
    if callable(log_extra):
        log_extra("evalsvc_status", [str(s.status) for s in scored])
    if callable(log_metric) and scored:
        log_metric("evalsvc/masked", sum(s.masked for s in scored) / len(scored))


def make_kernel_reward(**config: Any) -> Callable[..., list[float | None]]:
    """A TRL reward function with these settings (see `evalsvc.rl.config_args.KNOWN`)."""
    judge = Judge(config_from(config))

    def kernel_reward(
        completions: Sequence[Completion], task_id: str | Sequence[str], **kw: Any
    ) -> list[float | None]:
        scored = judge.score(_tasks(task_id, len(completions)), [completion_text(c) for c in completions])
        _log(scored, kw)
        return [s.reward for s in scored]

    return kernel_reward


def make_async_kernel_reward(**config: Any) -> Callable[..., Any]:
    """The same as a coroutine function: TRL runs async reward functions concurrently with each other."""
    judge = Judge(config_from(config))

    async def kernel_reward(
        completions: Sequence[Completion], task_id: str | Sequence[str], **kw: Any
    ) -> list[float | None]:
        texts = [completion_text(c) for c in completions]
        scored = await judge.ascore(_tasks(task_id, len(completions)), texts)
        _log(scored, kw)
        return [s.reward for s in scored]

    return kernel_reward


def kernel_reward(
    completions: Sequence[Completion], task_id: str | Sequence[str], **kw: Any
) -> list[float | None]:
    """The reward function with the environment's settings (EVALSVC_URL, EVALSVC_API_KEY)."""
    return make_kernel_reward()(completions, task_id, **kw)
