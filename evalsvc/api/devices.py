"""/v1/devices: the GPU workers alive now, i.e. where evaluations can run, and what each device is."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import PlainTextResponse

from evalsvc.api.deps import FormatQuery, StoreDep, current_principal
from evalsvc.api.health import live_workers
from evalsvc.api.problems import problem_responses
from evalsvc.api.views import DeviceView
from evalsvc.render import render_devices

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
def list_devices(store: StoreDep, fmt: FormatQuery = "json") -> list[DeviceView] | PlainTextResponse:
    """Live GPU workers with their device class's facts: compute capability, SM count, memory, the
    measured copy bandwidth and matmul rates, and the compile target (e.g. sm_90a)."""
    gpus = [w for w in live_workers(store) if w.kind == "gpu"]
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
