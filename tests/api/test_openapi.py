"""openapi.yaml at the repo root is exactly the served schema, and documents problem responses."""

from __future__ import annotations

from pathlib import Path

import yaml

from evalsvc.api.app import create_app
from evalsvc.api.openapi_dump import render
from evalsvc.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_committed_schema_matches_the_app() -> None:
    committed = (ROOT / "openapi.yaml").read_text()
    assert committed == render(), "openapi.yaml is stale: python -m evalsvc.api.openapi_dump > openapi.yaml"


def test_schema_does_not_depend_on_settings() -> None:
    tuned = Settings(api_keys={"k": "t"}, max_batch=7, max_body_bytes=10, max_wait_s=1)
    assert create_app(tuned).openapi() == yaml.safe_load(render())


def test_every_error_response_is_a_problem() -> None:
    schema = create_app(Settings()).openapi()
    operations = [op for path in schema["paths"].values() for op in path.values()]
    v1 = [op for op in operations if op["operationId"] not in ("livez", "readyz", "metrics")]
    for op in v1:
        codes = set(op["responses"])
        assert {"401", "429", "500", "503"} <= codes, op["operationId"]
        for code, response in op["responses"].items():
            if code[0] in "45":
                assert list(response["content"]) == ["application/problem+json"], (op["operationId"], code)
        if "requestBody" in op:
            assert {"413", "422"} <= codes
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    assert {"HTTPBearer", "APIKeyHeader"} <= set(schema["components"]["securitySchemes"])
