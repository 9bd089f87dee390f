"""Tasks: each task's document, stored once by content hash, and who may see it.

Who may see a task is kept apart from its document, per namespace: the shared one (`SHARED_TASKS`, the
operator's: CLI imports, auth off, and every task stored before tenancy) and one per tenant. Each
namespace keeps its own registration time and name, so a tenant registering content another registered
first learns nothing of that (not its name, not its time).
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any, cast

import redis

from evalsvc.core.tasks import TaskSpec
from evalsvc.records.documents import TaskView
from evalsvc.records.keys import P

SHARED_TASKS = P + "tasks"  # zset: task id -> registration time, of the tasks every tenant may read


def _task_scope(owner: str | None) -> tuple[str, str]:
    """A task namespace's index (zset: task id -> registration time) and names (hash: task id -> JSON
    name): a tenant's, or the shared one (None)."""
    if owner is None:
        return SHARED_TASKS, P + "task-names"
    return P + "tenant-tasks:" + owner, P + "tenant-task-names:" + owner


def queue_visibility(pipe: redis.client.Pipeline, task_ids: list[str], owner: str | None) -> None:
    """Queue on `pipe` the reads that say which of `task_ids` `owner` may use (`unknown` reads the
    replies): so that another store can ask it in a round trip of its own (`JobStore.admission_facts`)."""
    for t in task_ids:
        pipe.exists(P + "task:" + t)
        pipe.zscore(SHARED_TASKS, t)
        if owner is not None:
            pipe.zscore(_task_scope(owner)[0], t)


def unknown(task_ids: list[str], replies: list[Any], owner: str | None) -> list[str]:
    """The ids `owner` may not use, from the replies `queue_visibility` queued."""
    step = 2 if owner is None else 3
    out = []
    for i, t in enumerate(task_ids):
        stored, *scores = replies[step * i : step * i + step]
        if not stored or all(s is None for s in scores):
            out.append(t)
    return out


class TaskStore:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client

    def put_task(self, spec: TaskSpec, owner: str | None = None) -> tuple[str, bool]:
        """Store the task in `owner`'s namespace (None: the shared one). True when it is new to that
        owner: neither in its namespace nor shared already."""
        tid = spec.id
        now = time.time()
        doc = json.dumps({"spec": spec.model_dump(mode="json"), "created_at": now})
        index, names = _task_scope(owner)
        pipe = self.r.pipeline(transaction=True)
        pipe.set(P + "task:" + tid, doc, nx=True)
        pipe.zscore(SHARED_TASKS, tid)
        pipe.zadd(index, {tid: now}, nx=True)
        pipe.hsetnx(names, tid, json.dumps(spec.name))
        _, shared_before, added, _ = pipe.execute()
        return tid, bool(added) and (owner is None or shared_before is None)

    def get_task(self, task_id: str) -> TaskSpec | None:
        """The task's spec whoever registered it: for the workers, which run jobs already admitted."""
        raw = self.r.get(P + "task:" + task_id)
        return TaskSpec.model_validate(json.loads(raw)["spec"]) if raw else None

    def task_view(self, task_id: str, owner: str | None = None) -> TaskView | None:
        """The task as `owner` sees it, or None when it is not in its namespace nor shared (None: the
        shared namespace alone)."""
        return self._task_views([task_id], owner)[0]

    def _task_views(self, task_ids: list[str], owner: str | None) -> list[TaskView | None]:
        pipe = self.r.pipeline(transaction=False)
        own_index, own_names = _task_scope(owner)
        for t in task_ids:
            pipe.get(P + "task:" + t)
            pipe.smembers(P + "task-warnings:" + t)
            pipe.zscore(SHARED_TASKS, t)
            pipe.hget(P + "task-names", t)
            pipe.zscore(own_index, t)
            pipe.hget(own_names, t)
        replies = pipe.execute()
        out: list[TaskView | None] = []
        for i, t in enumerate(task_ids):
            raw, warnings, shared_at, shared_name, own_at, own_name = replies[6 * i : 6 * i + 6]
            if not raw or (shared_at is None and own_at is None):
                out.append(None)
                continue
            d = json.loads(raw)
            if own_at is not None:
                name = json.loads(own_name) if own_name is not None else None
            else:  # a shared task stored before tenancy has its name in its document only
                name = json.loads(shared_name) if shared_name is not None else d["spec"].get("name")
            out.append(
                TaskView(
                    id=t,
                    name=name,
                    meta=d["spec"]["meta"],
                    created_at=min(s for s in (shared_at, own_at) if s is not None),
                    warnings=sorted(w.decode() for w in warnings),
                    shared=shared_at is not None,
                )
            )
        return out

    def missing_tasks(self, task_ids: list[str]) -> list[str]:
        """The ids among `task_ids` that are not stored at all, whoever registered them (the operator's
        view, one round trip); `unknown_tasks` is a tenant's."""
        pipe = self.r.pipeline(transaction=False)
        for t in task_ids:
            pipe.exists(P + "task:" + t)
        return [t for t, found in zip(task_ids, pipe.execute(), strict=True) if not found]

    def unknown_tasks(self, task_ids: list[str], owner: str | None) -> list[str]:
        """The ids among `task_ids` that `owner` may not use: not stored, or neither its own nor shared.
        Another tenant's task is as unknown as one that never existed (one round trip)."""
        pipe = self.r.pipeline(transaction=False)
        queue_visibility(pipe, task_ids, owner)
        return unknown(task_ids, pipe.execute(), owner)

    def add_task_warnings(self, task_id: str, warnings: list[str]) -> None:
        """What the GPU side learned about the task (its outputs can be matched by zeros, ...)."""
        if warnings:
            self.r.sadd(P + "task-warnings:" + task_id, *warnings)

    def list_tasks(self, offset: int = 0, limit: int = 100, owner: str | None = None) -> list[TaskView]:
        """`owner`'s tasks and the shared ones, in registration order (None: the shared ones alone)."""
        stop = offset + limit - 1
        ids: list[bytes]
        if owner is None:
            ids = cast(list[bytes], self.r.zrange(SHARED_TASKS, offset, stop))
        else:
            scratch = P + "scratch:tasks:" + secrets.token_hex(8)
            pipe = self.r.pipeline(transaction=True)
            pipe.zunionstore(scratch, [SHARED_TASKS, _task_scope(owner)[0]], aggregate="MIN")
            pipe.zrange(scratch, offset, stop)
            pipe.delete(scratch)
            ids = pipe.execute()[1]
        views = self._task_views([i.decode() for i in ids], owner)
        return [v for v in views if v is not None]
