"""API fuzzing with schemathesis: requests generated from the committed openapi.yaml (valid and invalid)
against the gateway under a real uvicorn, real Redis and the real Celery enqueuer (no workers: jobs only
queue). No answer may be a 5xx (but /readyz's documented 503), and every answer must match the schema
(status, media type, headers, body). Bounded for CI by `max_examples` per operation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from evalsvc.api.app import create_app
from evalsvc.settings import Settings
from tests.api.conftest import AUTH_A, KEYS, redis_server, served  # noqa: F401 - fixture

OPENAPI = Path(__file__).resolve().parents[2] / "openapi.yaml"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def gateway_url(redis_server: str) -> Iterator[str]:  # noqa: F811
    settings = Settings(redis_url=redis_server, api_keys=KEYS, rate_limit_per_s=0, max_wait_s=0.5)
    with served(create_app(settings)) as url:
        yield url


schema = schemathesis.openapi.from_path(OPENAPI)


@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_5xx_and_answers_match_the_schema(case: schemathesis.Case, gateway_url: str) -> None:
    headers = {**AUTH_A, **(case.headers or {})}
    # /readyz answers 503 by design here (no workers run): only its shape is checked.
    checks = CHECKS[1:] if case.path == "/readyz" else CHECKS
    case.call_and_validate(base_url=gateway_url, headers=headers, checks=checks, timeout=30)
