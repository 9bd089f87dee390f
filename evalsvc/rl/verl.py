"""verl: `custom_reward_function.path=<this file's module path>` with `name=compute_score` (or
`compute_score_async` for verl's asynchronous reward loop, or `compute_score_batch` with verl's
`BatchRewardManager`). `ground_truth` is the registered task id, or the task's source; settings come from
EVALSVC_URL / EVALSVC_API_KEY and from `custom_reward_function.reward_kwargs` (url, api_key, options,
device_class, timeout_s, format_error_reward, masked_score).

Every result has the same keys and types, as verl's `reward_extra_info` needs: `score` (float), `status` (str:
the service's status, `format_error`, or for a masked item `internal_error`, `cancelled`, `client_timeout`,
`unreachable`, `refused`), `milestone` (int; -1 when none was reached, 0 when masked), `speedup_eager` and
`speedup_compile` (float, 0.0 where not measured), `evaluation_id` (str, "" when nothing was submitted) and
`masked` (bool: our failure, not the policy's; `score` is then `masked_score`, default 0.0)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalsvc.rl.config_args import config_from
from evalsvc.rl.judge import Judge, RewardConfig, Scored


def as_verl(s: Scored, config: RewardConfig) -> dict[str, Any]:
    return {
        "score": float(config.masked_score if s.reward is None else s.reward),
        "status": str(s.status),
        "milestone": int(s.reached),
        "speedup_eager": float(s.speedup_eager or 0.0),
        "speedup_compile": float(s.speedup_compile or 0.0),
        "evaluation_id": s.evaluation_id or "",
        "masked": bool(s.masked),
    }


def compute_score(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **kw: Any
) -> dict[str, Any]:
    config = config_from(kw)
    [scored] = Judge(config).score([str(ground_truth)], [solution_str])
    return as_verl(scored, config)


async def compute_score_async(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **kw: Any
) -> dict[str, Any]:
    config = config_from(kw)
    [scored] = await Judge(config).ascore([str(ground_truth)], [solution_str])
    return as_verl(scored, config)


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    **kw: Any,
) -> list[dict[str, Any]]:
    """verl's BatchRewardManager shape: the whole batch in one submission."""
    config = config_from(kw)
    scored = Judge(config).score([str(g) for g in ground_truths], list(solution_strs))
    return [as_verl(s, config) for s in scored]
