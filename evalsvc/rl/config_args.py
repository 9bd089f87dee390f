"""Adapter settings given as keyword arguments (verl's reward_kwargs, a factory's arguments): the known
ones build a `RewardConfig`; the rest (a trainer's own columns and hooks) are left alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalsvc.core.options import EvalOptions
from evalsvc.rl.judge import RewardConfig
from evalsvc.sdk import RetryPolicy

KNOWN = frozenset(
    {
        "url",
        "api_key",
        "options",
        "device_class",
        "timeout_s",
        "format_error_reward",
        "masked_score",
        "max_batch",
        "retry",
    }
)


def config_from(kw: Mapping[str, Any]) -> RewardConfig:
    """A `RewardConfig` from the environment, overridden by whichever known keys `kw` holds. `options` may
    be a mapping (as YAML configs give it), `retry` a mapping of `RetryPolicy` fields."""
    given = {k: v for k, v in kw.items() if k in KNOWN and v is not None}
    if isinstance(given.get("options"), Mapping):
        given["options"] = EvalOptions.model_validate(dict(given["options"]))
    if isinstance(given.get("retry"), Mapping):
        given["retry"] = RetryPolicy(**dict(given["retry"]))
    return RewardConfig.from_env(**given)
