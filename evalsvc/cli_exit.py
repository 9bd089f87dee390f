"""How a command ends: exit codes a CI job can gate on, and a line or two saying what failed and what to do
instead of a traceback (`evalsvc --debug ...` shows the traceback).

0: the command ran, whatever the verdict (`gate`: every expectation held); 1: `gate` only, an expectation
failed; 2: a usage error (bad arguments, an unreadable task, suite or setting); 3: it could not run (a
device that is not there, the service, Redis or the artifact store out of reach, a sandbox that cannot start,
an internal error).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import redis.exceptions
from pydantic import ValidationError

from evalsvc.core.results import EvaluationResult
from evalsvc.sandbox.base import SandboxUnavailable
from evalsvc.sdk import ApiError, RetryPolicy
from evalsvc.store.artifacts import ArtifactStoreUnavailable
from evalsvc.suite import SuiteError

OK, FAILED, USAGE, COULD_NOT_RUN = 0, 1, 2, 3

# A command someone waits on says the service is down in seconds, not after the SDK's five minutes.
CLI_RETRY = RetryPolicy(attempts=3, total_s=20.0, max_wait_s=5.0)


class CouldNotRun(RuntimeError):
    """The command cannot do its work here; the message says why and what to do."""


def require_device(device: str) -> None:
    """CouldNotRun unless `device` ('cpu', 'cuda' or 'cuda:N') is on this machine; ValueError for a name
    that is no device."""
    kind, _, index = device.partition(":")
    if kind == "cpu" and not index:
        return
    if kind != "cuda" or (index and not index.isdigit()):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', not {device!r}")
    import torch

    count = torch.cuda.device_count()
    if int(index or 0) >= count:
        raise CouldNotRun(f"device {device} is not on this machine ({count} CUDA device(s) visible)")


def explain(exc: BaseException) -> tuple[int, list[str]]:
    """The exit code and the lines to print for an exception that ended a command."""
    if isinstance(exc, CouldNotRun | SandboxUnavailable | ArtifactStoreUnavailable):
        return COULD_NOT_RUN, [f"error: {exc}"]
    if isinstance(exc, httpx.TransportError):
        url = exc.request.url if _has_request(exc) else "the service"
        return COULD_NOT_RUN, [
            f"error: could not reach {url}: {exc or type(exc).__name__}",
            "is the service running? (`evalsvc up`; point elsewhere with --url or EVALSVC_URL)",
        ]
    if isinstance(exc, ApiError):
        if exc.status in (401, 403):
            return COULD_NOT_RUN, [f"error: the service refused the API key: {exc}", "set it with --api-key"]
        code = USAGE if 400 <= exc.status < 500 else COULD_NOT_RUN
        return code, [f"error: the service answered {exc}"]
    if isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
        return COULD_NOT_RUN, [
            f"error: could not reach Redis: {exc}",
            "start it (`evalsvc up` starts one) or set EVALSVC_REDIS_URL",
        ]
    if isinstance(exc, SuiteError | ValidationError | ValueError):
        first = str(exc).strip().splitlines()
        return USAGE, [f"error: {' '.join(first[:3])}"]
    said = str(exc).strip().splitlines()
    return COULD_NOT_RUN, [
        f"internal error: {type(exc).__name__}: {said[0] if said else ''}",
        "run again with `evalsvc --debug ...` for the traceback",
    ]


def _has_request(exc: httpx.TransportError) -> bool:
    try:
        exc.request  # noqa: B018  (raises RuntimeError when the error has no request)
    except RuntimeError:
        return False
    return True


def result_json(result: EvaluationResult | None, evaluation_id: str | None, state: str) -> str:
    """The one --json shape of `eval`, `submit` and `wait`: the result document, with the evaluation's id
    (null for a local `eval`) and state; an unfinished evaluation has only those two."""
    doc: dict[str, Any] = {"evaluation_id": evaluation_id, "state": state}
    if result is not None:
        doc |= result.model_dump(mode="json")
    return json.dumps(doc, indent=2)
