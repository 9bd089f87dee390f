"""Checks made while the candidate runs, for what a static check cannot see past.

They run in the runner (the candidate's process), so a determined candidate could tamper with them; the
static and symbol screens refuse the means (interpreter internals, ctypes, monkeypatching, the Python
C-API), and the judge re-checks everything that reaches it: outputs against the reference, committed
outputs of timed calls, and timings against its own clock.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# What forward may ask of ATen besides its own kernels: allocation, views, layout copies and casts (`to`,
# whose kernels are copies), metadata; also what the object screen lets a candidate's objects import.
ALLOWED_OPS = frozenset(
    {
        "_local_scalar_dense",
        "_to_copy",
        "_unsafe_view",
        "alias",
        "as_strided",
        "chunk",
        "clone",
        "contiguous",
        "copy_",
        "detach",
        "empty",
        "empty_like",
        "empty_strided",
        "expand",
        "expand_as",
        "fill_",
        "flatten",
        "full",
        "full_like",
        "item",
        "lift_fresh",
        "narrow",
        "new_empty",
        "new_empty_strided",
        "new_zeros",
        "ones",
        "ones_like",
        "permute",
        "reshape",
        "reshape_as",
        "select",
        "slice",
        "split",
        "split_with_sizes",
        "squeeze",
        "sym_numel",
        "sym_size",
        "sym_stride",
        "t",
        "to",
        "transpose",
        "type_as",
        "unbind",
        "unflatten",
        "unsqueeze",
        "view",
        "view_as",
        "zero_",
        "zeros",
        "zeros_like",
    }
)


class OperatorTrace(TorchDispatchMode):
    """Records every ATen operator dispatched while active, whoever called it: Python, an alias bound at
    import, a dynamic lookup, or C++ code calling `at::` functions."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, int] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__
        self.seen[name] = self.seen.get(name, 0) + 1
        return func(*args, **(kwargs or {}))

    def forbidden(self) -> list[str]:
        return sorted(n for n in self.seen if n not in ALLOWED_OPS)


def pending_side_stream_work(outputs: list[torch.Tensor]) -> bool:
    """True when an output changes after a device-wide sync, i.e. work on another stream was still
    writing it when forward returned (the judge's events on the current stream would not have seen it)."""
    snapshots = [t.detach().clone() for t in outputs]  # ordered after the current stream's work only
    torch.cuda.synchronize()
    for snap, out in zip(snapshots, outputs, strict=True):
        a = snap.reshape(-1).view(torch.uint8)
        b = out.detach().contiguous().reshape(-1).view(torch.uint8)
        if not torch.equal(a, b):
            return True
    return False


def _timer_parts() -> dict[str, Any]:
    import time

    import evalsvc.engine.commitment as commitment
    import evalsvc.engine.timing as timing

    return {
        "time.perf_counter": time.perf_counter,
        "timing.RoundTimer.run": timing.RoundTimer.run,
        "timing.RoundTimer._timed_call": timing.RoundTimer._timed_call,
        "RoundTimer.run.__code__": timing.RoundTimer.run.__code__,
        "RoundTimer._timed_call.__code__": timing.RoundTimer._timed_call.__code__,
        "timing._written_late": timing._written_late,
        "timing._written_late.__code__": timing._written_late.__code__,
        "timing._PROBES": timing._PROBES,
        "SystemRandom.random": type(timing._PROBES).random,
        "timing._PROBES.random (own)": vars(timing._PROBES).get("random"),
        "timing.PROBE_SHARE": timing.PROBE_SHARE,
        "torch.equal": torch.equal,
        "torch.Tensor.clone": torch.Tensor.clone,
        "commitment.round_digests": commitment.round_digests,
        "commitment.digests_on_device": commitment.digests_on_device,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.Tensor.copy_": torch.Tensor.copy_,
        "torch.Tensor.fill_": torch.Tensor.fill_,
    }


class TimerGuard:
    """Remembers the timing path as installed before the candidate was imported; `tampered()` names
    what has been replaced since (a monkeypatched timer, synchronize or statistics function)."""

    def __init__(self) -> None:
        self.installed = _timer_parts()

    def tampered(self) -> list[str]:
        now = _timer_parts()
        return sorted(name for name, obj in self.installed.items() if now.get(name) is not obj)
