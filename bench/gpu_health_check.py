"""On a GPU machine: print what the GPU health collector exports and what timing readiness says.

    python -m bench.gpu_health_check [--uuid GPU-...] [--max-temp 85] [--xid-seconds 5] [--json]

It exercises the NVML path that cannot run where there is no GPU: every per-device query, the
throttle/clocks-event reason call under its old and new names, ECC counters, XID event registration.
Exit code 0 when NVML worked and every visible GPU produced its core readings, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from prometheus_client import CollectorRegistry, generate_latest

from evalsvc.observability.gpu_health import (
    THROTTLE_REASONS,
    GpuHealthCollector,
    nvml,
    read_gpu,
    resolve_index,
    throttle_mask,
    timing_readiness,
)

CORE = ("memory_total_bytes", "temperature_c", "sm_clock_hz", "sm_clock_max_hz", "throttle_mask")


def main() -> int:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=fmt)
    parser.add_argument("--uuid", help="only this GPU (as a worker sharing a host would)")
    parser.add_argument("--max-temp", type=float, default=85.0)
    parser.add_argument("--xid-seconds", type=float, default=5.0, help="how long to listen for XID events")
    parser.add_argument("--json", action="store_true", help="one JSON document instead of text")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    nv = nvml()
    if nv is None:
        sys.stdout.write(f"NVML unavailable: nothing to check (readiness says {timing_readiness(0, 85)})\n")
        return 1
    collector = GpuHealthCollector(args.uuid, args.max_temp)
    indices = collector.indices()
    report: dict[str, object] = {"driver": nv.nvmlSystemGetDriverVersion(), "gpus": []}
    ok = bool(indices)
    for i in indices:
        r = read_gpu(nv, i)
        h = nv.nvmlDeviceGetHandleByIndex(i)
        mask = throttle_mask(nv, h)
        missing = [k for k in CORE if getattr(r, k) is None]
        ok = ok and not missing
        ready = timing_readiness(i, args.max_temp)
        report["gpus"].append(  # type: ignore[union-attr]
            {
                **vars(r),
                "throttle_reasons": [name for bit, name in THROTTLE_REASONS.items() if mask & bit],
                "timing_readiness": list(ready),
                "missing_core_readings": missing,
                "resolve_index_by_uuid": resolve_index(r.uuid, "cuda"),
            }
        )
    report["xid_watch"] = collector.start_xid_watch()
    time.sleep(args.xid_seconds if report["xid_watch"] else 0)
    registry = CollectorRegistry()
    registry.register(collector)
    exposition = generate_latest(registry).decode()
    report["exposition_lines"] = len([ln for ln in exposition.splitlines() if not ln.startswith("#")])
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(exposition)
        for gpu in report["gpus"]:  # type: ignore[union-attr]
            sys.stdout.write(
                f"GPU {gpu['index']} {gpu['model']} ({gpu['uuid']}): readiness {gpu['timing_readiness']}, "
                f"reasons {gpu['throttle_reasons']}, missing {gpu['missing_core_readings']}\n"
            )
        sys.stdout.write(f"driver {report['driver']}, XID watch {report['xid_watch']}\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
