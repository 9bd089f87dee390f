"""Reference profiles: one per (task, device class), queued to a GPU worker and kept like a result."""

from __future__ import annotations

import time

import redis

from evalsvc.records.documents import ProfileRecord
from evalsvc.records.keys import P


def _profile_key(task_id: str, device_class: str) -> str:
    return P + "profile:" + task_id + ":" + device_class


class ProfileStore:
    def __init__(self, client: redis.Redis, retention_s: int = 7 * 86400) -> None:
        self.r = client
        self.retention_s = retention_s

    def claim_profile(self, record: ProfileRecord) -> tuple[ProfileRecord, bool]:
        """Store a new queued profile unless one exists for (task, device class); True when it existed.
        One that failed is replaced, so asking again retries it."""
        key = _profile_key(record.task_id, record.device_class)
        if self.r.set(key, record.model_dump_json(), nx=True, ex=self.retention_s):
            return record, False
        existing = self.get_profile(record.task_id, record.device_class)
        if existing is not None and existing.error is None:
            return existing, True
        self.r.set(key, record.model_dump_json(), ex=self.retention_s)
        return record, False

    def put_profile(self, record: ProfileRecord) -> None:
        record.updated_at = time.time()
        key = _profile_key(record.task_id, record.device_class)
        self.r.set(key, record.model_dump_json(), ex=self.retention_s)

    def get_profile(self, task_id: str, device_class: str) -> ProfileRecord | None:
        raw = self.r.get(_profile_key(task_id, device_class))
        return ProfileRecord.model_validate_json(raw) if raw else None

    def drop_profile(self, task_id: str, device_class: str) -> None:
        self.r.delete(_profile_key(task_id, device_class))
