"""/v1/tasks: reference problems, content-addressed (registering the same task twice is a no-op).

A tenant sees its own tasks and the shared (operator's) ones; another tenant's task is as unknown as one
that never existed (404, the same problem document).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response

from evalsvc.api.deps import PrincipalDep, SettingsDep, TaskIdPath, TasksDep, current_principal
from evalsvc.api.links import follow
from evalsvc.api.lookup import not_found
from evalsvc.api.problems import problem_responses
from evalsvc.api.submit import register_task, require_task_author
from evalsvc.api.views import TaskPage
from evalsvc.core.tasks import TaskSpec
from evalsvc.records.documents import TaskView

router = APIRouter(prefix="/v1/tasks", tags=["tasks"], dependencies=[Depends(current_principal)])


@router.post(
    "",
    name="register_task",
    status_code=201,
    response_model=TaskView,
    responses={
        201: follow("get_task", "task_id"),
        200: {
            "model": TaskView,
            "description": "The same task (source and meta) was already registered by the caller, or is "
            "shared.",
            **follow("get_task", "task_id"),
        },
        **problem_responses(400, 401, 403, 413, 422, 429, 503),
    },
)
def post_task(
    spec: TaskSpec, principal: PrincipalDep, tasks: TasksDep, settings: SettingsDep, response: Response
) -> TaskView:
    """Register a task: 201 when new to the caller, 200 when the caller had it already (its own or shared;
    the id is its content hash). Whether another tenant registered it is not told."""
    require_task_author(principal, settings.task_authors)
    task_id, created = register_task(tasks, spec, principal.owner)
    response.status_code = 201 if created else 200
    response.headers["Location"] = f"/v1/tasks/{task_id}"
    view = tasks.task_view(task_id, principal.owner)
    if view is None:  # expired between the two reads: practically never, but never a 500
        raise not_found("task", task_id)
    return view


@router.get("", name="list_tasks", response_model=TaskPage, responses=problem_responses(401, 422, 429, 503))
def list_tasks(
    principal: PrincipalDep,
    tasks: TasksDep,
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> TaskPage:
    """The caller's tasks and the shared ones, in registration order, one page at a time."""
    items = tasks.list_tasks(offset, limit, principal.owner)
    next_offset = offset + limit if len(items) == limit else None
    return TaskPage(items=items, offset=offset, limit=limit, next_offset=next_offset)


@router.get(
    "/{task_id}",
    name="get_task",
    response_model=TaskView,
    responses=problem_responses(401, 404, 422, 429, 503),
)
def get_task(task_id: TaskIdPath, principal: PrincipalDep, tasks: TasksDep) -> TaskView:
    """The caller's task, or a shared one."""
    view = tasks.task_view(task_id, principal.owner)
    if view is None:
        raise not_found("task", task_id)
    return view
