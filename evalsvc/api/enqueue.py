"""How the gateway hands a job id to the workers: a one-method interface, Celery in production."""

from __future__ import annotations

import base64
import json
import threading
import uuid

import redis
from celery import Celery

from evalsvc.queues import COMPILE_QUEUE, COMPILE_TASK, PROFILE_TASK, QueueUnavailable, make_celery
from evalsvc.redis_clients import redis_client
from evalsvc.settings import Settings


class CeleryEnqueuer:
    """Sends by task name, so the gateway never imports the task bodies (nor torch).

    The message is Celery's own (protocol 2, made by `as_task_v2`) in Kombu's Redis envelope, pushed
    straight onto the queue's list: what `send_task` pushes, one LPUSH, without Kombu's producer,
    connection and retry layers around it, which cost a fifth of a single submission's CPU in the
    gateway (py-spy, docs/performance.md). A batch is one LPUSH. Real Celery workers consume these
    messages in every end-to-end test.
    """

    def __init__(self, celery: Celery, client: redis.Redis) -> None:
        self.celery = celery
        self.client = client

    @classmethod
    def from_settings(cls, settings: Settings) -> CeleryEnqueuer:
        return cls(make_celery(settings), redis_client(settings))

    def enqueue(self, job_id: str) -> None:
        self.enqueue_many([job_id])

    def enqueue_profile(self, task_id: str, device_class: str, queue: str) -> None:
        self._push(queue, [self.message(PROFILE_TASK, [task_id, device_class], queue)])

    def enqueue_many(self, job_ids: list[str]) -> None:
        self._push(COMPILE_QUEUE, [self.message(COMPILE_TASK, [j], COMPILE_QUEUE) for j in job_ids])

    def _push(self, queue: str, messages: list[bytes]) -> None:
        """One LPUSH for all: Kombu's consumer pops from the right, so the first pushed is delivered
        first, as with one push per message."""
        if not messages:
            return
        try:
            self.client.lpush(queue, *messages)
        except redis.RedisError as e:
            raise QueueUnavailable(f"the broker refused the message: {e}") from e

    def message(self, task: str, args: list[str], queue: str) -> bytes:
        """The bytes `send_task(task, args=args, queue=queue)` would push (a fresh task id each)."""
        task_id = str(uuid.uuid4())
        headers, properties, body, _ = self.celery.amqp.as_task_v2(task_id, task, args=args)
        envelope = {
            "body": base64.b64encode(json.dumps(body).encode()).decode(),
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": headers,
            "properties": {
                **properties,
                "delivery_mode": 2,  # persistent
                "delivery_info": {"exchange": "", "routing_key": queue},
                "priority": 0,
                "body_encoding": "base64",
                "delivery_tag": str(uuid.uuid4()),
            },
        }
        return json.dumps(envelope).encode()

    def close(self) -> None:
        self.client.close()
        self.celery.close()


class RecordingEnqueuer:
    """An in-memory adapter for tests of the gateway alone: remembers job ids in order."""

    def __init__(self) -> None:
        self.job_ids: list[str] = []
        self.profiles: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()

    def enqueue(self, job_id: str) -> None:
        with self._lock:
            self.job_ids.append(job_id)

    def enqueue_profile(self, task_id: str, device_class: str, queue: str) -> None:
        with self._lock:
            self.profiles.append((task_id, device_class, queue))

    def enqueue_many(self, job_ids: list[str]) -> None:
        with self._lock:
            self.job_ids.extend(job_ids)

    def close(self) -> None:
        return None
