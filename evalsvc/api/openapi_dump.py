"""`python -m evalsvc.api.openapi_dump > openapi.yaml`: the served schema, as committed at the repo root."""

from __future__ import annotations

import sys

import yaml

from evalsvc.api.app import create_app
from evalsvc.settings import Settings


def render() -> str:
    """The schema does not depend on settings, so defaults are as good as any."""
    schema = create_app(Settings()).openapi()
    return yaml.safe_dump(schema, sort_keys=False)


if __name__ == "__main__":
    sys.stdout.write(render())
