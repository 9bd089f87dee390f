"""/v1/tasks/{id}/profile: the reference's profile (eager and torch.compile) on one device class.

Made once per (task, device class) by a GPU worker, queued straight to its queue, kept like a result.
Only for a task the caller sees (its own or a shared one): another tenant's task is a 404, its profile
too, with the same problem document as a task or profile that does not exist.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import PlainTextResponse

from evalsvc.api.deps import (
    DeviceClassQuery,
    EnqueuerDep,
    FormatQuery,
    PrincipalDep,
    ProfilesDep,
    SettingsDep,
    TaskIdPath,
    TasksDep,
    WaitQuery,
    WorkersDep,
    current_principal,
)
from evalsvc.api.lookup import not_found
from evalsvc.api.polling import poll_until
from evalsvc.api.problems import ProblemError, problem_responses
from evalsvc.records.documents import ProfileRecord, State
from evalsvc.render import render_reference_profile

router = APIRouter(prefix="/v1/tasks", tags=["tasks"], dependencies=[Depends(current_principal)])

TEXT = {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "with `format=text`"}
LINK = {
    "links": {
        "get_task_profile": {
            "operationId": "get_task_profile",
            "parameters": {"task_id": "$response.body#/task_id"},
            "description": "read back the profile",
        }
    }
}


@router.post(
    "/{task_id}/profile",
    name="profile_task",
    status_code=202,
    response_model=ProfileRecord,
    responses={
        202: LINK,
        200: {"model": ProfileRecord, "description": "A profile exists (or is queued) already.", **LINK},
        **problem_responses(401, 404, 422, 429, 503),
    },
)
def profile_task(
    task_id: TaskIdPath,
    principal: PrincipalDep,
    tasks: TasksDep,
    profiles: ProfilesDep,
    workers: WorkersDep,
    enqueuer: EnqueuerDep,
    response: Response,
    device_class: DeviceClassQuery = "default",
) -> ProfileRecord:
    """Queue the reference's profile on a live GPU worker of `device_class`: 202 when queued now, 200 when
    it exists (or is on its way) already. On a CPU-device worker it ranks operators by CPU time."""
    if tasks.unknown_tasks([task_id], principal.owner):
        raise not_found("task", task_id)
    existing = profiles.get_profile(task_id, device_class)
    if existing is not None and existing.error is None:
        response.status_code = 200
        return existing
    queue = workers.gpu_queue(device_class)
    if queue is None:
        raise ProblemError(503, "no_worker", f"no live GPU worker serves device class {device_class!r}")
    now = time.time()
    record = ProfileRecord(
        task_id=task_id,
        device_class=device_class,
        state=State.QUEUED,
        queue=queue,
        created_at=now,
        updated_at=now,
    )
    record, existed = profiles.claim_profile(record)
    if existed:
        response.status_code = 200
        return record
    try:
        enqueuer.enqueue_profile(task_id, device_class, queue)
    except Exception:  # not queued: forget it, so the next POST tries again
        profiles.drop_profile(task_id, device_class)
        raise
    return record


@router.get(
    "/{task_id}/profile",
    name="get_task_profile",
    response_model=ProfileRecord,
    responses={200: TEXT, **problem_responses(401, 404, 422, 429, 503)},
)
async def get_task_profile(
    task_id: TaskIdPath,
    principal: PrincipalDep,
    tasks: TasksDep,
    profiles: ProfilesDep,
    settings: SettingsDep,
    request: Request,
    device_class: DeviceClassQuery = "default",
    wait: WaitQuery = 0,
    fmt: FormatQuery = "json",
) -> ProfileRecord | PlainTextResponse:
    """The profile once `done` (`?wait=N` long-polls); `format=text` for the compact report."""

    visible: list[bool] = []  # checked on the first read (in a worker thread, as every read here)

    def fetch() -> ProfileRecord:
        if not visible:
            if tasks.unknown_tasks([task_id], principal.owner):  # as unknown as a profile never made
                raise not_found("profile of task", task_id)
            visible.append(True)
        record = profiles.get_profile(task_id, device_class)
        if record is None:
            raise not_found("profile of task", task_id)
        return record

    record = await poll_until(fetch, _done, min(wait, settings.max_wait_s), request)
    if fmt == "text":
        return PlainTextResponse(_text(record))
    return record


def _done(record: ProfileRecord) -> bool:
    return record.state is State.DONE


def _text(record: ProfileRecord) -> str:
    if record.profile is not None:
        return render_reference_profile(record.profile) + "\n"
    if record.error:
        return f"profile of {record.task_id} failed: {record.error}\n"
    return f"profile of {record.task_id} on {record.device_class}: {record.state.value}\n"
