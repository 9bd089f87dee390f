"""/v1/devices: the GPU workers alive now, i.e. where evaluations can run, and what each device is; and the
check that refuses a submission for a device class nobody serves."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends
from fastapi.responses import PlainTextResponse

from evalsvc.api.deps import FormatQuery, WorkersDep, current_principal
from evalsvc.api.problems import ProblemError, ValidationItem, problem_responses
from evalsvc.api.routes.health import live_workers
from evalsvc.api.views import DeviceView
from evalsvc.records.documents import EvaluationRequest
from evalsvc.records.workers import HEARTBEAT_TTL_S, WorkerRegistry
from evalsvc.render import render_devices
from evalsvc.settings import Settings

ANY_CLASS = "default"  # served by every GPU worker

router = APIRouter(prefix="/v1/devices", tags=["devices"], dependencies=[Depends(current_principal)])


@router.get(
    "",
    name="list_devices",
    response_model=list[DeviceView],
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "with `format=text`"},
        **problem_responses(401, 422, 429, 503),
    },
)
def list_devices(workers: WorkersDep, fmt: FormatQuery = "json") -> list[DeviceView] | PlainTextResponse:
    """Live GPU workers with their device class's facts: compute capability, SM count, memory, the
    measured copy bandwidth and matmul rates, and the compile target (e.g. sm_90a)."""
    gpus = [w for w in live_workers(workers) if w.kind == "gpu"]
    views = [
        DeviceView(
            queue=w.queue,
            device=w.device,
            device_class=w.device_class,
            hostname=w.hostname,
            heartbeat_at=w.heartbeat_at,
            facts=w.facts,
        )
        for w in sorted(gpus, key=lambda w: w.queue)
    ]
    if fmt == "text":
        text = render_devices([(f"{v.device_class} ({v.queue})", v.facts) for v in views])
        return PlainTextResponse(text + "\n")
    return views


def refuse_unserved_classes(
    workers: WorkerRegistry, settings: Settings, requests: list[EvaluationRequest], batch: bool = False
) -> None:
    """422 `unknown_device_class` (with the live `device_classes`) when an evaluation asks for a device class
    that no GPU worker serves: such a job could only wait at routing and fail `route_wait_s` later.

    Accepted all the same: a class some GPU worker beat for within `route_wait_s` (a worker restarting, or
    its heartbeat lost with a Redis restart: routing waits for it, holding no compile slot), `default`
    (any class), and any class while no GPU worker at all is live (the fleet starting, or all of it
    restarting: a submission right after `evalsvc up` must not be refused, and its compile can go on
    meanwhile). One Redis read, of the classes' last heartbeats (`WorkerRegistry.heartbeat` keeps them)."""
    wanted = [(i, r.device_class) for i, r in enumerate(requests) if r.device_class != ANY_CLASS]
    if not wanted:
        return
    seen = workers.device_classes(max(settings.route_wait_s, HEARTBEAT_TTL_S))
    now = time.time()
    live = sorted(c for c, beat in seen.items() if now - beat < HEARTBEAT_TTL_S)
    unserved = [(i, c) for i, c in wanted if c not in seen]
    if not live or not unserved:
        return
    where = [f"evaluations[{i}].device_class" if batch else "device_class" for i, _ in unserved]
    errors = [
        ValidationItem(
            loc=["body", "evaluations", i, "device_class"] if batch else ["body", "device_class"],
            msg=f"no live worker serves device class {c!r}",
            type="unknown_device_class",
        ).model_dump()
        for i, c in unserved
    ]
    first = f"{where[0]}: no live worker serves device class {unserved[0][1]!r}"
    more = f" (and {len(unserved) - 1} more)" if len(unserved) > 1 else ""
    detail = f"{first}{more}; live classes: {', '.join(live)} (GET /v1/devices), or 'default' for any"
    raise ProblemError(422, "unknown_device_class", detail, errors=errors, device_classes=live)
