"""`python -m evalsvc.api`: serve the gateway with settings from the environment."""

from __future__ import annotations

from evalsvc.api.server import serve
from evalsvc.settings import Settings

if __name__ == "__main__":
    serve(Settings())
