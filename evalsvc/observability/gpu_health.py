"""GPU health through NVML (nvidia-ml-py): a Prometheus collector and a "may this GPU time now?" check.

NVML is initialised once per process, on first use. Where there is none (no driver, a CPU-only host) that
is said once in the log and everything goes on: the collector exports nothing and `timing_readiness`
answers (True, "no NVML"). Each per-device query is best effort: a query the GPU or driver does not
support leaves out that one series, not the device.

NVML enumerates every GPU of the host whatever CUDA_VISIBLE_DEVICES says, so a worker that shares a host
with others names its GPU by UUID (EVALSVC_GPU_UUID); inside a container with one GPU there is only one.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger("evalsvc.gpu_health")

# NVML's clocks event (formerly "throttle") reason bits, from nvml.h; stable across driver versions.
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Reasons that make a timing unrepresentative: the clocks are held down by heat or power.
NOT_READY_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError
LABELS = ["gpu", "uuid", "model"]


@cache
def nvml() -> ModuleType | None:
    """pynvml, initialised; None (said once) where NVML cannot be used."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as e:  # ImportError, NVMLError_LibraryNotFound, DriverNotLoaded, ...
        log.info("NVML unavailable (%s: %s): GPU health metrics are off", type(e).__name__, e)
        return None
    return pynvml


@dataclass
class GpuReading:
    """One device's state now; None where NVML could not say."""

    index: int
    uuid: str
    model: str
    utilization_ratio: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    temperature_c: float | None = None
    sm_clock_hz: float | None = None
    sm_clock_max_hz: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    throttle_mask: int | None = None
    ecc_corrected: int | None = None
    ecc_uncorrected: int | None = None

    @property
    def labels(self) -> list[str]:
        return [str(self.index), self.uuid, self.model]


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _try(nv: ModuleType, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except nv.NVMLError:
        return None


def throttle_mask(nv: ModuleType, handle: Any) -> int:
    """Current clocks event reasons; the call was renamed from ...ThrottleReasons in newer NVML."""
    new = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if new is not None:
        try:
            return int(new(handle))
        except (nv.NVMLError_FunctionNotFound, nv.NVMLError_NotSupported):
            pass  # an older driver: fall back to the old name
    return int(nv.nvmlDeviceGetCurrentClocksThrottleReasons(handle))


def read_gpu(nv: ModuleType, index: int) -> GpuReading:
    h = nv.nvmlDeviceGetHandleByIndex(index)
    r = GpuReading(index=index, uuid=_text(nv.nvmlDeviceGetUUID(h)), model=_text(nv.nvmlDeviceGetName(h)))
    util = _try(nv, nv.nvmlDeviceGetUtilizationRates, h)
    r.utilization_ratio = None if util is None else util.gpu / 100.0
    mem = _try(nv, nv.nvmlDeviceGetMemoryInfo, h)
    if mem is not None:
        r.memory_used_bytes, r.memory_total_bytes = int(mem.used), int(mem.total)
    r.temperature_c = _try(nv, nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
    sm = _try(nv, nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
    r.sm_clock_hz = None if sm is None else sm * 1e6
    sm_max = _try(nv, nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM)
    r.sm_clock_max_hz = None if sm_max is None else sm_max * 1e6
    power = _try(nv, nv.nvmlDeviceGetPowerUsage, h)  # milliwatts
    r.power_w = None if power is None else power / 1000.0
    limit = _try(nv, nv.nvmlDeviceGetEnforcedPowerLimit, h)
    r.power_limit_w = None if limit is None else limit / 1000.0
    r.throttle_mask = _try(nv, throttle_mask, nv, h)
    volatile = nv.NVML_VOLATILE_ECC
    r.ecc_corrected = _try(
        nv, nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, volatile
    )
    r.ecc_uncorrected = _try(
        nv, nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, volatile
    )
    return r


def resolve_index(uuid: str | None, device: str) -> int | None:
    """The NVML index of a worker's GPU: by UUID when given, else the index in 'cuda:N'; None on CPU."""
    nv = nvml()
    if nv is None or not (uuid or device.startswith("cuda")):
        return None
    if uuid:
        try:
            return int(nv.nvmlDeviceGetIndex(nv.nvmlDeviceGetHandleByUUID(uuid)))
        except nv.NVMLError as e:
            log.warning("GPU %s not found through NVML: %s", uuid, e)
            return None
    _, _, idx = device.partition(":")
    return int(idx) if idx else 0


def timing_readiness(index: int, max_temp_c: float) -> tuple[bool, str]:
    """Whether GPU `index` may produce timings now: no thermal or power throttling, temperature below
    `max_temp_c`. Without NVML (or when it cannot tell) the answer is yes, with the reason why."""
    nv = nvml()
    if nv is None:
        return True, "no NVML"
    try:
        h = nv.nvmlDeviceGetHandleByIndex(index)
        temp = float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
        mask = throttle_mask(nv, h)
    except nv.NVMLError as e:
        return True, f"unknown (NVML: {e})"
    return judge_readiness(mask, temp, max_temp_c)


def judge_readiness(mask: int, temp_c: float, max_temp_c: float) -> tuple[bool, str]:
    """The rule itself, on readings: no heat or power reason holding the clocks, and not too hot."""
    held = [name for bit, name in THROTTLE_REASONS.items() if mask & bit & NOT_READY_MASK]
    if held:
        return False, "clocks held down: " + ", ".join(held)
    if temp_c >= max_temp_c:
        return False, f"temperature {temp_c:.0f} C at or above the {max_temp_c:.0f} C limit"
    return True, f"ready ({temp_c:.0f} C)"


class XidWatcher:
    """Counts XID critical-error events (best effort: NVML may refuse events in a container)."""

    def __init__(self, nv: ModuleType, indices: list[int]) -> None:
        self.nv = nv
        self.indices = indices
        self.counts: Counter[tuple[int, int]] = Counter()
        self.lock = threading.Lock()

    def start(self) -> bool:
        nv = self.nv
        try:
            event_set = nv.nvmlEventSetCreate()
        except nv.NVMLError as e:
            log.info("XID events unavailable: %s", e)
            return False
        registered = 0
        for i in self.indices:
            try:
                nv.nvmlDeviceRegisterEvents(nv.nvmlDeviceGetHandleByIndex(i), XID_CRITICAL, event_set)
                registered += 1
            except nv.NVMLError as e:
                log.info("XID events unavailable on GPU %d: %s", i, e)
        if not registered:
            return False
        threading.Thread(target=self._run, args=(event_set,), name="evalsvc-xid", daemon=True).start()
        return True

    def _run(self, event_set: Any) -> None:
        nv = self.nv
        wait = getattr(nv, "nvmlEventSetWait_v2", None) or nv.nvmlEventSetWait  # _v2 in newer bindings
        while True:
            try:
                data = wait(event_set, 5000)
            except nv.NVMLError_Timeout:
                continue
            except nv.NVMLError as e:
                log.warning("XID event wait failed, no more XID counts: %s", e)
                return
            if not data.eventType & XID_CRITICAL:
                continue
            index = _try(nv, nv.nvmlDeviceGetIndex, data.device)
            xid = int(data.eventData)
            log.error("GPU XID %d on GPU %s", xid, index)
            with self.lock:
                self.counts[(-1 if index is None else int(index), xid)] += 1

    def snapshot(self) -> dict[tuple[int, int], int]:
        with self.lock:
            return dict(self.counts)


class GpuHealthCollector(Collector):
    """Per-GPU gauges read at scrape time; only the GPU named by `uuid` when one is given."""

    def __init__(self, uuid: str | None = None, max_temp_c: float = 85.0) -> None:
        self.uuid = uuid
        self.max_temp_c = max_temp_c
        self.xid: XidWatcher | None = None

    def indices(self) -> list[int]:
        nv = nvml()
        if nv is None:
            return []
        if self.uuid:
            idx = resolve_index(self.uuid, "cuda")
            return [] if idx is None else [idx]
        return list(range(nv.nvmlDeviceGetCount()))

    def start_xid_watch(self) -> bool:
        nv = nvml()
        if nv is None or self.xid is not None:
            return False
        self.xid = XidWatcher(nv, self.indices())
        return self.xid.start()

    def describe(self) -> Iterable[Metric]:
        return list(_families().values())

    def collect(self) -> Iterator[Metric]:
        nv = nvml()
        if nv is None:
            return
        fams = _families()
        labels: dict[int, list[str]] = {}
        for i in self.indices():
            try:
                r = read_gpu(nv, i)
            except nv.NVMLError as e:
                log.warning("reading GPU %d through NVML failed: %s", i, e)
                continue
            labels[i] = r.labels
            self._add(fams, r)
        if self.xid is not None:
            for (i, xid), n in self.xid.snapshot().items():
                fams["xid"].add_metric([*labels.get(i, [str(i), "", ""]), str(xid)], n)
        yield from fams.values()

    def _add(self, fams: dict[str, Any], r: GpuReading) -> None:
        lbl = r.labels
        for key, value in (
            ("util", r.utilization_ratio),
            ("mem_used", r.memory_used_bytes),
            ("mem_total", r.memory_total_bytes),
            ("temp", r.temperature_c),
            ("sm", r.sm_clock_hz),
            ("sm_max", r.sm_clock_max_hz),
            ("power", r.power_w),
            ("power_limit", r.power_limit_w),
            ("throttle", r.throttle_mask),
        ):
            if value is not None:
                fams[key].add_metric(lbl, float(value))
        if r.throttle_mask is not None:
            for bit, name in THROTTLE_REASONS.items():
                fams["throttle_active"].add_metric([*lbl, name], 1.0 if r.throttle_mask & bit else 0.0)
        for kind, count in (("corrected", r.ecc_corrected), ("uncorrected", r.ecc_uncorrected)):
            if count is not None:
                fams["ecc"].add_metric([*lbl, kind], float(count))
        if r.throttle_mask is not None and r.temperature_c is not None:
            ready, _ = judge_readiness(r.throttle_mask, r.temperature_c, self.max_temp_c)
            fams["ready"].add_metric(lbl, 1.0 if ready else 0.0)


def _families() -> dict[str, Any]:
    g, c = GaugeMetricFamily, CounterMetricFamily
    return {
        "util": g("evalsvc_gpu_utilization_ratio", "GPU busy fraction (NVML)", labels=LABELS),
        "mem_used": g("evalsvc_gpu_memory_used_bytes", "device memory used", labels=LABELS),
        "mem_total": g("evalsvc_gpu_memory_total_bytes", "device memory total", labels=LABELS),
        "temp": g("evalsvc_gpu_temperature_celsius", "GPU core temperature", labels=LABELS),
        "sm": g("evalsvc_gpu_sm_clock_hertz", "SM clock now", labels=LABELS),
        "sm_max": g("evalsvc_gpu_sm_clock_max_hertz", "maximum SM clock", labels=LABELS),
        "power": g("evalsvc_gpu_power_watts", "board power draw", labels=LABELS),
        "power_limit": g("evalsvc_gpu_power_limit_watts", "enforced power limit", labels=LABELS),
        "throttle": g(
            "evalsvc_gpu_throttle_reasons", "NVML clocks event reasons, as a bitmask", labels=LABELS
        ),
        "throttle_active": g(
            "evalsvc_gpu_throttle_active", "1 while a clocks event reason holds", labels=[*LABELS, "reason"]
        ),
        "ecc": c("evalsvc_gpu_ecc_errors", "volatile ECC errors since driver load", labels=[*LABELS, "type"]),
        "xid": c(
            "evalsvc_gpu_xid_errors", "XID critical errors seen by this process", labels=[*LABELS, "xid"]
        ),
        "ready": g(
            "evalsvc_gpu_timing_ready", "1 when not throttled and under the temperature limit", labels=LABELS
        ),
    }
