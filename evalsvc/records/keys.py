"""The keys more than one store of the system of record writes, and the ids it hands out.

Every key of the service is under `P`. Each store keeps its own keys beside its own code; here are only
those that are shared: a job's hash (written by `jobs`, `cancellation`), the tenant's count of unfinished
jobs (`jobs`, `cancellation`, read by the gateway's admission), the sweeps' two indexes and the channel
a job's end is announced on.
"""

from __future__ import annotations

import secrets

P = "evalsvc:"
UNQUEUED = P + "unqueued"  # zset: job id -> creation time, until its message is in the queue
PROGRESS = P + "progress"  # zset: job id -> time of its last state change, until it is done

FINISHED = P + "finished:"  # pub/sub channel prefix: a job's id is published on FINISHED + id once it is done


def finished_channel(job_id: str) -> str:
    """Where the write that ends a job announces it (at most once, to whoever listens then: readers
    that must not miss one re-read the job after subscribing)."""
    return FINISHED + job_id


def job_key(job_id: str) -> str:
    """The Redis hash that holds a job: its document (`doc`), `state` and delivery counts."""
    return P + "job:" + job_id


def inflight_key(tenant: str) -> str:
    """The tenant's count of unfinished jobs (what its quota is checked against)."""
    return P + "inflight:" + tenant


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(10)}"


def text(v: bytes | str) -> str:
    """A reply of the client (which does not decode responses) as text."""
    return v.decode(errors="replace") if isinstance(v, bytes) else v
