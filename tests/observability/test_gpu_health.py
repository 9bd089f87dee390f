"""GPU health without NVML, for real (no driver here), and the readiness rule on readings.

The NVML success path needs a GPU: bench/gpu_health_check.py exercises it on one.
"""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from evalsvc.observability.gpu_health import (
    NOT_READY_MASK,
    THROTTLE_REASONS,
    GpuHealthCollector,
    judge_readiness,
    nvml,
    resolve_index,
    timing_readiness,
)


@pytest.fixture
def no_nvml() -> None:
    nvml.cache_clear()  # NVML is tried afresh by the test
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return
    pytest.skip("NVML works on this machine: the no-NVML path cannot be exercised here")


def test_without_nvml_everything_says_so_once_and_goes_on(
    no_nvml: None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="evalsvc.gpu_health"):
        for _ in range(3):
            assert timing_readiness(0, 85.0) == (True, "no NVML")
            assert resolve_index("GPU-0000", "cuda:0") is None
    said = [r for r in caplog.records if "NVML unavailable" in r.getMessage()]
    assert len(said) == 1


def test_without_nvml_the_collector_exports_nothing(no_nvml: None) -> None:
    collector = GpuHealthCollector(uuid=None)
    assert list(collector.collect()) == []
    assert collector.start_xid_watch() is False
    registry = CollectorRegistry()
    registry.register(collector)
    assert b"evalsvc_gpu" not in generate_latest(registry)
    names = {m.name for m in collector.describe()}
    assert {"evalsvc_gpu_temperature_celsius", "evalsvc_gpu_ecc_errors", "evalsvc_gpu_timing_ready"} <= names


def test_readiness_rule_on_readings() -> None:
    idle = next(bit for bit, name in THROTTLE_REASONS.items() if name == "gpu_idle")
    thermal = next(bit for bit, name in THROTTLE_REASONS.items() if name == "hw_thermal_slowdown")
    power = next(bit for bit, name in THROTTLE_REASONS.items() if name == "sw_power_cap")
    assert judge_readiness(0, 40, 85) == (True, "ready (40 C)")
    assert judge_readiness(idle, 40, 85)[0]  # idle clocks are not a throttle
    ok, why = judge_readiness(thermal | power, 40, 85)
    assert not ok and "hw_thermal_slowdown" in why and "sw_power_cap" in why
    ok, why = judge_readiness(0, 86, 85)
    assert not ok and "temperature 86" in why
    assert not NOT_READY_MASK & idle
