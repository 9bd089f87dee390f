"""OpenRLHF's remote reward protocol (`--remote_rm_url http://host:port/get_reward`): POST
{"query": [...], "prompts": [...], "labels": [...]} (query = prompt + response, labels = task ids or
sources) answers {"rewards": [...], "scores": [...], "extra_logs": {...}} as plain lists. Started by
`evalsvc rl-reward-server`; scoring as `evalsvc.rl.openrlhf.reward_func`."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field

from evalsvc.rl.judge import Judge, RewardConfig
from evalsvc.rl.openrlhf import response_of, scored_answer


class RewardRequest(BaseModel):
    query: list[str]
    prompts: list[str]
    labels: list[str] = Field(description="task id (or task source) per query")


def create_app(config: RewardConfig) -> FastAPI:
    app = FastAPI(title="evalsvc OpenRLHF reward server")
    judge = Judge(config)

    @app.post("/get_reward")
    async def get_reward(body: RewardRequest) -> dict[str, Any]:
        responses = [response_of(q, p) for q, p in zip(body.query, body.prompts, strict=True)]
        scored = await judge.ascore(list(body.labels), responses)
        return scored_answer(scored, config, as_tensors=False)

    return app
