"""/v1/devices: the GPU workers alive now, i.e. where evaluations can run."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from evalsvc.api.deps import StoreDep, current_principal
from evalsvc.api.health import live_workers
from evalsvc.api.problems import problem_responses
from evalsvc.api.views import DeviceView

router = APIRouter(prefix="/v1/devices", tags=["devices"], dependencies=[Depends(current_principal)])


@router.get(
    "", name="list_devices", response_model=list[DeviceView], responses=problem_responses(401, 429, 503)
)
def list_devices(store: StoreDep) -> list[DeviceView]:
    gpus = [w for w in live_workers(store) if w.kind == "gpu"]
    return [
        DeviceView(
            queue=w.queue,
            device=w.device,
            device_class=w.device_class,
            hostname=w.hostname,
            heartbeat_at=w.heartbeat_at,
        )
        for w in sorted(gpus, key=lambda w: w.queue)
    ]
