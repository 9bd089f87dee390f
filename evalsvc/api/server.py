"""Running the gateway under uvicorn (`evalsvc serve` and `python -m evalsvc.api` call `serve`)."""

from __future__ import annotations

import uvicorn

from evalsvc.api.app import create_app
from evalsvc.settings import Settings

GRACEFUL_SHUTDOWN_S = 10  # long-polls are cut short rather than holding a deploy for `max_wait_s`


def serve(settings: Settings, log_level: str | None = None) -> None:
    """One process serves the app built from `settings`; several rebuild Settings from the environment.
    `log_level` None keeps uvicorn's default."""
    host, port = settings.http_host, settings.http_port
    if settings.http_workers == 1:
        uvicorn.run(
            create_app(settings),
            host=host,
            port=port,
            log_level=log_level,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        )
        return
    uvicorn.run(
        "evalsvc.api.app:create_app_from_env",
        factory=True,
        workers=settings.http_workers,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
