"""/v1/suites: named, versioned sets of tasks that trainers draw from (deterministic samples, a fixed
train/held-out split, filtered by vet status on a device class).

Names are per-tenant namespaces: a tenant reads and writes its own suites and reads the shared (operator's)
ones; another tenant's suite of a name is never read nor touched (its POST of that name makes its own).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Response

from evalsvc.api.deps import CatalogDep, PrincipalDep, TasksDep, current_principal
from evalsvc.api.lookup import not_found
from evalsvc.api.problems import ProblemError, problem_responses
from evalsvc.core.pools import SUITE_NAME, CreateSuite, Split, SuiteSummary, SuiteTasks, VetStatus
from evalsvc.records.catalog import summary

router = APIRouter(prefix="/v1/suites", tags=["suites"], dependencies=[Depends(current_principal)])


SuiteName = Annotated[str, Path(pattern=SUITE_NAME, description="suite name")]


@router.get(
    "", name="list_suites", response_model=list[SuiteSummary], responses=problem_responses(401, 429, 503)
)
def list_suites(principal: PrincipalDep, pools: CatalogDep) -> list[SuiteSummary]:
    """The caller's suites and the shared ones (but those its own of the same name hide), each at its
    latest version."""
    return pools.suites(principal.owner)


@router.post(
    "",
    name="create_suite",
    status_code=201,
    response_model=SuiteSummary,
    responses={
        200: {"model": SuiteSummary, "description": "The latest version already holds this set: unchanged."},
        **problem_responses(400, 401, 413, 422, 429, 503),
    },
)
def create_suite(
    body: CreateSuite, principal: PrincipalDep, tasks: TasksDep, pools: CatalogDep, response: Response
) -> SuiteSummary:
    """Make one of the caller's suites from tasks it sees (its own or shared): 201 with a new version when
    the set (or split) changed, 200 when the latest version is the same. A shared suite of the name is
    left as it is: the caller gets its own, which it sees from then on instead."""
    unknown = tasks.unknown_tasks(list(dict.fromkeys(body.task_ids)), principal.owner)
    if unknown:
        raise ProblemError(
            422,
            "unknown_task",
            f"{len(unknown)} unknown task ids, e.g. {', '.join(unknown[:5])}; POST /v1/tasks first",
        )
    suite, changed = pools.save_suite(
        body.name,
        body.task_ids,
        body.description,
        body.split_seed,
        body.heldout_fraction,
        owner=principal.owner,
    )
    response.status_code = 201 if changed else 200
    return summary(suite, shared=principal.owner is None)


@router.get(
    "/{name}/tasks",
    name="suite_tasks",
    response_model=SuiteTasks,
    responses=problem_responses(401, 404, 422, 429, 503),
)
def suite_tasks(
    name: SuiteName,
    principal: PrincipalDep,
    pools: CatalogDep,
    sample: Annotated[int | None, Query(ge=1, le=100_000, description="draw this many tasks")] = None,
    seed: Annotated[int, Query(ge=0, le=2**63 - 1, description="same seed, same draw")] = 0,
    version: Annotated[int | None, Query(ge=1, description="default: the latest")] = None,
    split: Annotated[Split | None, Query(description="only the train or the held-out side")] = None,
    device_class: Annotated[
        str | None,
        Query(max_length=64, pattern=r"^[A-Za-z0-9_.-]+$", description="vet statuses on this class"),
    ] = None,
    status: Annotated[
        list[VetStatus] | None, Query(description="keep tasks with these vet statuses (needs device_class)")
    ] = None,
) -> SuiteTasks:
    """A suite's tasks, or a deterministic sample of them: the caller's suite of that name, else the
    shared one."""
    found = pools.visible_suite(name, version, principal.owner)
    if found is None:
        raise not_found("suite", name if version is None else f"{name} v{version}")
    suite, _ = found
    if status and device_class is None:
        raise ProblemError(422, "device_class_required", "filtering by vet status needs a device_class")
    return pools.suite_tasks(
        suite,
        sample=sample,
        seed=seed,
        device_class=device_class,
        statuses=set(status) if status else None,
        split=split,
    )
