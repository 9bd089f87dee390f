"""OpenAPI links from each POST to the GET of what it created (for SDK generators and stateful fuzzing)."""

from __future__ import annotations

from typing import Any


def follow(operation_id: str, param: str) -> dict[str, Any]:
    return {
        "links": {
            operation_id: {
                "operationId": operation_id,
                "parameters": {param: "$response.body#/id"},
                "description": "read back what this request created",
            }
        }
    }
