"""Where `evalsvc worker` ends up, by exec: the Celery worker, which announces itself with a heartbeat once
it is ready. The arguments are Celery's worker options; the worker's kind, queue, device and class come in
the environment `evalsvc worker` set (EVALSVC_WORKER_KIND, EVALSVC_WORKER_QUEUE, ...), read by Settings.

    python -m workers.main -Q compile -c 2 ...
"""

from __future__ import annotations

import logging
import sys

from celery.signals import worker_ready

from evalsvc.core.profiles import DeviceFacts
from evalsvc.queues import COMPILE_QUEUE
from workers.celery_app import app
from workers.tasks import _ctx

log = logging.getLogger("evalsvc.worker")


@worker_ready.connect
def _announce(**_: object) -> None:
    ctx = _ctx()
    s = ctx.settings
    if s.worker_kind == "gpu":
        facts = _device_facts(s.device, s.cuda_arch)
        ctx.start_heartbeat("gpu", s.worker_queue or "", s.device, s.device_class, facts)
    else:
        ctx.start_heartbeat("compile", COMPILE_QUEUE, "cpu", "cpu")


def _device_facts(device: str, cuda_arch: str) -> DeviceFacts | None:
    """Measured before the first job is taken (so nothing else runs on the device meanwhile)."""
    from evalsvc.engine.hardware import device_facts

    try:
        return device_facts(device, cuda_arch)
    except Exception:  # the worker still serves; /v1/devices says nothing was measured
        log.exception("measuring the device failed")
        return None


def main(argv: list[str]) -> None:
    app.worker_main(argv=["worker", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
