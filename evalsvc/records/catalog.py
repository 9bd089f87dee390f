"""The task catalogue in Redis: where each task came from (pool entries), its vet record per device class,
and suites.

Suites are versioned: `evalsvc:suite:<name>` holds every version's document, `evalsvc:suites` the latest
version number of each name. Saving the same set again writes nothing.

Suite names are namespaces: those keys hold the shared suites (the operator's: the CLI's, auth off, and
every suite stored before tenancy), readable by every tenant; a tenant's own are under
`evalsvc:tenant-suites:<tenant>` and `evalsvc:tenant-suite:<name>:<tenant>` (a name has no colon). A
tenant's suite of a name hides the shared one of that name from that tenant only.
"""

from __future__ import annotations

import time
from typing import cast

import redis

from evalsvc.core.pools import (
    PoolEntry,
    Split,
    Suite,
    SuiteSummary,
    SuiteTask,
    SuiteTasks,
    VetRecord,
    VetStatus,
    sample_ids,
    select,
)
from evalsvc.records.keys import P


def _suite_index(owner: str | None) -> str:
    """The hash of a namespace's suite names -> latest version: a tenant's, or the shared one (None)."""
    return P + "suites" if owner is None else P + "tenant-suites:" + owner


def _suite_key(name: str, owner: str | None) -> str:
    """The hash of one suite's versions -> documents."""
    return P + "suite:" + name if owner is None else P + "tenant-suite:" + name + ":" + owner


def summary(s: Suite, shared: bool) -> SuiteSummary:
    return SuiteSummary(
        name=s.name,
        version=s.version,
        description=s.description,
        size=len(s.task_ids),
        created_at=s.created_at,
        shared=shared,
    )


class PoolStore:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client

    # pool entries ------------------------------------------------------------------------------------
    def put_entry(self, entry: PoolEntry) -> bool:
        """Record a task's first origin; False when it was already recorded (re-import is a no-op)."""
        return bool(self.r.set(P + "pool:" + entry.task_id, entry.model_dump_json(), nx=True))

    def entries(self, task_ids: list[str]) -> dict[str, PoolEntry]:
        raws = self.r.mget([P + "pool:" + t for t in task_ids]) if task_ids else []
        return {t: PoolEntry.model_validate_json(raw) for t, raw in zip(task_ids, raws, strict=True) if raw}

    # vet records -------------------------------------------------------------------------------------
    def _vet_key(self, device_class: str, task_id: str) -> str:
        return f"{P}vet:{device_class}:{task_id}"

    def put_vet(self, record: VetRecord) -> None:
        self.r.set(self._vet_key(record.device_class, record.task_id), record.model_dump_json())

    def vets(self, device_class: str, task_ids: list[str]) -> dict[str, VetRecord]:
        if not task_ids:
            return {}
        raws = self.r.mget([self._vet_key(device_class, t) for t in task_ids])
        return {t: VetRecord.model_validate_json(raw) for t, raw in zip(task_ids, raws, strict=True) if raw}

    # suites ------------------------------------------------------------------------------------------
    def save_suite(
        self,
        name: str,
        task_ids: list[str],
        description: str = "",
        split_seed: int | None = None,
        heldout_fraction: float | None = None,
        owner: str | None = None,
    ) -> tuple[Suite, bool]:
        """Make `task_ids` the content of `owner`'s suite `name` (None: the shared one): a new version
        when the set (or its split) differs from the latest one, or the suite is new; otherwise the latest
        version, unchanged. Returns (suite, changed). The split settings, when not given, are the latest
        version's (or the defaults). Another namespace's suite of that name is never read nor touched."""
        ids = sorted(set(task_ids))
        index = _suite_index(owner)
        result: list[tuple[Suite, bool]] = []

        def write(pipe: redis.client.Pipeline) -> None:
            result.clear()
            raw_version = pipe.hget(index, name)
            latest = self._load(pipe, name, int(raw_version), owner) if raw_version else None
            base = latest or Suite(name=name)
            seed = base.split_seed if split_seed is None else split_seed
            fraction = base.heldout_fraction if heldout_fraction is None else heldout_fraction
            same = (base.task_ids, base.split_seed, base.heldout_fraction) == (ids, seed, fraction)
            if latest is not None and same:
                result.append((latest, False))
                return
            suite = Suite(
                name=name,
                version=(latest.version + 1) if latest else 1,
                description=description or base.description,
                task_ids=ids,
                created_at=time.time(),
                split_seed=seed,
                heldout_fraction=fraction,
            )
            pipe.multi()
            pipe.hset(_suite_key(name, owner), str(suite.version), suite.model_dump_json())
            pipe.hset(index, name, suite.version)
            result.append((suite, True))

        self.r.transaction(write, index)
        return result[0]

    def _load(
        self,
        client: redis.Redis | redis.client.Pipeline,
        name: str,
        version: int,
        owner: str | None = None,
    ) -> Suite | None:
        raw = client.hget(_suite_key(name, owner), str(version))
        return Suite.model_validate_json(raw) if raw else None

    def suite(self, name: str, version: int | None = None, owner: str | None = None) -> Suite | None:
        """The given version, or the latest, of `owner`'s suite `name` (None: the shared one)."""
        if version is None:
            raw = self.r.hget(_suite_index(owner), name)
            if raw is None:
                return None
            version = int(raw)
        return self._load(self.r, name, version, owner)

    def visible_suite(self, name: str, version: int | None, owner: str | None) -> tuple[Suite, bool] | None:
        """The suite `name` as `owner` sees it, and whether it is the shared one: its own when it has one
        of that name (then only its own versions), else the shared one. None when neither exists; another
        tenant's suite is never found."""
        if owner is not None and self.r.hexists(_suite_index(owner), name):
            own = self.suite(name, version, owner)
            return (own, False) if own is not None else None
        shared = self.suite(name, version)
        return (shared, True) if shared is not None else None

    def suites(self, owner: str | None = None) -> list[SuiteSummary]:
        """Every suite `owner` sees, at its latest version, by name: its own, and the shared ones it does
        not hide with its own of the same name (None: the shared ones)."""
        scopes: dict[str, tuple[int, str | None]] = {}
        for scope in [None] if owner is None else [None, owner]:  # the caller's own last: they win
            latest = cast(dict[bytes, bytes], self.r.hgetall(_suite_index(scope)))
            scopes.update({k.decode(): (int(v), scope) for k, v in latest.items()})
        out = []
        for name in sorted(scopes):
            version, scope = scopes[name]
            s = self._load(self.r, name, version, scope)
            if s is not None:
                out.append(summary(s, shared=scope is None))
        return out

    # reading a suite ---------------------------------------------------------------------------------
    def suite_tasks(
        self,
        suite: Suite,
        *,
        sample: int | None = None,
        seed: int = 0,
        device_class: str | None = None,
        statuses: set[VetStatus] | None = None,
        split: Split | None = None,
    ) -> SuiteTasks:
        """The suite's tasks filtered by split and vet status, then `sample` of them drawn for `seed`."""
        records = self.vets(device_class, suite.task_ids) if device_class else {}
        ids = select(suite.task_ids, records, statuses, split, suite.split_seed, suite.heldout_fraction)
        matched = len(ids)
        if sample is not None:
            ids = sample_ids(ids, sample, seed)
        entries = self.entries(ids)
        items = []
        for t in ids:
            e, r = entries.get(t), records.get(t)
            items.append(
                SuiteTask(
                    task_id=t,
                    name=e.name if e else None,
                    source=e.source if e else None,
                    tags=e.tags if e else {},
                    status=r.status if r else None,
                    reasons=[f.reason for f in r.findings] if r else [],
                )
            )
        return SuiteTasks(
            suite=suite.name,
            version=suite.version,
            device_class=device_class,
            split=split,
            seed=seed if sample is not None else None,
            matched=matched,
            items=items,
        )
