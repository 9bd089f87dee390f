"""RFC 9457 problem details: the one error shape of the gateway, with a machine-readable `code`.

Every refusal, validation failure and outage is turned into a `Problem` here, so clients branch on
`code` and never on message text, and bad input can never surface as a 500.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import redis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from evalsvc.queues import QueueUnavailable
from evalsvc.records.jobs import NotReplicated

log = logging.getLogger("evalsvc.api")

PROBLEM_MEDIA_TYPE = "application/problem+json"
STORE_RETRY_AFTER_S = 5

_HTTP_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 413: "body_too_large"}


class ValidationItem(BaseModel):
    """One pydantic error, without the offending input (which may be megabytes of source)."""

    loc: list[str | int]
    msg: str
    type: str


class Problem(BaseModel):
    """An RFC 9457 problem document."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="URI of the problem type: urn:evalsvc:problem:<code>")
    title: str
    status: int
    detail: str | None = None
    instance: str | None = Field(None, description="the request path")
    code: str = Field(description="machine-readable reason, e.g. rate_limited, batch_too_large")
    errors: list[ValidationItem] | None = Field(None, description="validation errors (422 only)")
    device_classes: list[str] | None = Field(
        None, description="the device classes live workers serve now (`unknown_device_class` only)"
    )
    result_status: str | None = Field(None, description="how the evaluation ended (`already_finished` only)")


class ProblemError(Exception):
    """Raised by routes and dependencies; rendered as a problem response."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = dict(headers or {})
        self.extra = extra


def problem_response(
    status: int,
    code: str,
    detail: str | None,
    instance: str | None,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    body = {
        "type": f"urn:evalsvc:problem:{code}",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "instance": instance,
        "code": code,
        **extra,
    }
    body = {k: v for k, v in body.items() if v is not None}
    headers = dict(headers or {})
    if status == 503:  # the API promises every 503 a Retry-After; one without its own estimate gets this
        headers.setdefault("Retry-After", retry_after(DEFAULT_RETRY_AFTER_S)["Retry-After"])
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_MEDIA_TYPE)


DEFAULT_RETRY_AFTER_S = 5.0


def retry_after(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, int(seconds + 0.999)))}


def _answer(
    request: Request,
    status: int,
    code: str,
    detail: str | None,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    """The problem response for a request, counted by code (refusals are what operators watch)."""
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.problems.labels(code).inc()
    return problem_response(status, code, detail, request.url.path, headers, **extra)


async def _on_problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ProblemError)
    return _answer(request, exc.status, exc.code, exc.detail, exc.headers, **exc.extra)


async def _on_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    items = [
        ValidationItem(loc=list(e.get("loc", ())), msg=str(e.get("msg", "")), type=str(e.get("type", "")))
        for e in exc.errors()
    ]
    code = "invalid_json" if any(i.type == "json_invalid" for i in items) else "validation_error"
    detail = "; ".join(f"{'.'.join(map(str, i.loc))}: {i.msg}" for i in items[:3])
    if len(items) > 3:
        detail += f"; and {len(items) - 3} more"
    return _answer(request, 422, code, detail, errors=[i.model_dump() for i in items])


async def _on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    detail = exc.detail if isinstance(exc.detail, str) else None
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(_allowed_methods(request))
    return _answer(request, exc.status_code, code, detail, headers)


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route serves on this path (Starlette names only the first route's)."""
    return [
        method
        for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL
            for route in request.app.router.routes
        )
    ]


async def _on_redis(request: Request, exc: Exception) -> JSONResponse:
    log.warning("Redis unavailable on %s: %s", request.url.path, exc)
    detail = "the job store (Redis) is unreachable; retry later"
    if isinstance(exc, NotReplicated):
        detail = f"the job store (Redis) could not replicate the submission: {exc}"
    headers = retry_after(STORE_RETRY_AFTER_S)
    return _answer(request, 503, "store_unavailable", detail, headers)


async def _on_broker(request: Request, exc: Exception) -> JSONResponse:
    log.warning("queue broker unavailable on %s: %s", request.url.path, exc)
    detail = "the job queue is unreachable; retry later"
    headers = retry_after(STORE_RETRY_AFTER_S)
    return _answer(request, 503, "queue_unavailable", detail, headers)


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return _answer(request, 500, "internal", "unexpected server error; it was logged")


def install_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ProblemError, _on_problem)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http)
    app.add_exception_handler(redis.RedisError, _on_redis)
    app.add_exception_handler(QueueUnavailable, _on_broker)
    app.add_exception_handler(Exception, _on_unexpected)


# OpenAPI documentation of problem responses ------------------------------------------------------------

_DESCRIPTIONS = {
    400: "The body could not be decoded (bytes that are not UTF-8) (code `bad_request`), or a "
    "`Last-Event-ID` that is not one of this stream's cursors (`bad_last_event_id`).",
    401: "Missing or unknown API key (code `unauthorized`).",
    403: "This tenant may not register tasks or send them inline (`task_authoring_forbidden`): the "
    "operator limits that to `task_authors`; evaluate against shared tasks by id.",
    404: "No such resource for this tenant (code `not_found`).",
    409: "The evaluation had already ended before it could be cancelled (`already_finished`, with "
    "`result_status`: how it ended).",
    413: "Body over `max_body_bytes` (`body_too_large`) or batch over `max_batch` (`batch_too_large`).",
    422: "Malformed JSON (`invalid_json`), schema violation (`validation_error`, with `errors`), invalid "
    "task (`invalid_task`), unknown task (`unknown_task`), a device class no live worker serves "
    "(`unknown_device_class`, with `errors` and the live `device_classes`) or a reused Idempotency-Key "
    "(`idempotency_key_reused`).",
    429: "Per-key rate limit (`rate_limited`) or per-tenant in-flight quota (`tenant_quota`).",
    500: "Unexpected server error (code `internal`).",
    503: "Redis unreachable (`store_unavailable`), queue broker unreachable (`queue_unavailable`) or "
    "the compile queue is full (`queue_full`).",
}
_RETRY_AFTER_HEADER = {
    "Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}
}


def problem_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` entries for routes; `app.openapi` moves them to application/problem+json."""
    out: dict[int | str, dict[str, Any]] = {}
    for c in sorted({*codes, 500}):
        entry: dict[str, Any] = {"model": Problem, "description": _DESCRIPTIONS[c]}
        if c in (429, 503):
            entry["headers"] = _RETRY_AFTER_HEADER
        out[c] = entry
    return out


def as_problem_media(schema: dict[str, Any]) -> dict[str, Any]:
    """Rewrite every 4xx/5xx response of an OpenAPI document to application/problem+json."""
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            for status, response in operation.get("responses", {}).items():
                content = response.get("content", {})
                if status[0] in "45" and "application/json" in content:
                    content[PROBLEM_MEDIA_TYPE] = content.pop("application/json")
    return schema
