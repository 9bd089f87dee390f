"""Load a KernelBench task and check that it is evaluable at all: in the task's own process
(reference_host.py), never in the judge, since a task is a tenant's code."""

from __future__ import annotations

import threading
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from evalsvc.core.tasks import InvalidTask, Precision, TaskSpec

DTYPES = {Precision.FP32: torch.float32, Precision.FP16: torch.float16, Precision.BF16: torch.bfloat16}
MAX_INPUT_BYTES = 8 * 1024**3
# torch's global RNG is seeded, then drawn from by the task's code: one thread at a time, or evaluations in
# flight side by side would get each other's numbers (and input digests that do not reproduce).
SEEDED = threading.RLock()


@dataclass
class LoadedTask:
    spec: TaskSpec
    model_cls: type[torch.nn.Module]
    get_inputs: Callable[[], Any]
    get_init_inputs: Callable[[], Any]

    def make_inputs(self, seed: int, device: torch.device) -> list[Any]:
        """The task's inputs for `seed`, on `device`, floating tensors cast to the task's precision.

        Made on the device itself (its default device for the call): no host-side random numbers and no
        copy, and an input set too large for the device fails as a device out-of-memory error."""
        with SEEDED, torch.device(device):
            torch.manual_seed(seed)
            raw = list(self.get_inputs())
        dtype = DTYPES[self.spec.meta.precision]
        out = []
        for a in raw:
            if isinstance(a, torch.Tensor):
                a = a.to(device)
                if a.is_floating_point():
                    a = a.to(dtype)
            out.append(a)
        return out

    def make_model(self, seed: int, device: torch.device) -> torch.nn.Module:
        with SEEDED, torch.device(device):
            torch.manual_seed(seed)
            model = self.model_cls(*self.get_init_inputs())
        dtype = DTYPES[self.spec.meta.precision]
        return model.to(device=device, dtype=dtype).eval()


def load_task(spec: TaskSpec) -> LoadedTask:
    """Execute the task module and validate its interface and inputs; raise InvalidTask saying what is
    wrong."""
    task = exec_task(spec)
    with SEEDED:
        _check_inputs(task)
    return task


def exec_task(spec: TaskSpec) -> LoadedTask:
    """Execute the task module and check its interface (not its inputs: `load_task` does, once)."""
    spec.check_syntax()
    module = types.ModuleType("evalsvc_task")
    try:
        exec(compile(spec.source, "task.py", "exec"), module.__dict__)
    except Exception as e:
        raise InvalidTask(f"task module failed to import: {type(e).__name__}: {e}"[:1000]) from None
    model_cls = module.__dict__.get("Model")
    if not isinstance(model_cls, type) or not issubclass(model_cls, torch.nn.Module):
        raise InvalidTask("task's Model is not an nn.Module subclass")
    for fn in ("get_inputs", "get_init_inputs"):
        if not callable(module.__dict__.get(fn)):
            raise InvalidTask(f"task's {fn} is not a function")
    return LoadedTask(spec, model_cls, module.get_inputs, module.get_init_inputs)


def input_digest(inputs: list[Any]) -> list[Any]:
    """An exact fingerprint of an input set: each tensor's shape, dtype and the wrap-around integer sum of
    its bytes (order-independent, so the same on any device and in any process), other values' repr. Two
    processes that made the set from the same seed agree; one whose task does not reproduce does not."""
    out: list[Any] = []
    for a in inputs:
        if isinstance(a, torch.Tensor):
            raw = a.detach().contiguous().reshape(-1).view(torch.uint8)
            words = raw.view(torch.int32) if raw.numel() % 4 == 0 else raw
            out.append((tuple(a.shape), str(a.dtype), int(words.sum(dtype=torch.int64))))
        else:
            out.append(repr(a))
    return out


def _signature(inputs: list[Any]) -> list[Any]:
    return [(tuple(a.shape), str(a.dtype)) if isinstance(a, torch.Tensor) else repr(a) for a in inputs]


def _planned_bytes(task: LoadedTask) -> int | None:
    """What get_inputs() would allocate, measured on the meta device (shapes, no memory), so a task
    asking for 50 GB is refused before the judge tries; None when the task cannot run there."""
    try:
        with torch.device("meta"):
            inputs = task.get_inputs()
        return sum(a.numel() * a.element_size() for a in inputs if isinstance(a, torch.Tensor))
    except Exception:
        return None


def _check_inputs(task: LoadedTask) -> None:
    planned = _planned_bytes(task)
    if planned is not None and planned > MAX_INPUT_BYTES:
        raise InvalidTask(
            f"get_inputs would make {planned / 1e9:.1f} GB of tensors (limit {MAX_INPUT_BYTES / 1e9:.0f} GB)"
        )
    try:
        init = task.get_init_inputs()
        sigs = []
        for seed in (1, 2):
            torch.manual_seed(seed)
            inputs = task.get_inputs()
            if not isinstance(inputs, list | tuple):
                raise InvalidTask(f"get_inputs returned {type(inputs).__name__}, not a list")
            if not any(isinstance(a, torch.Tensor) for a in inputs):
                raise InvalidTask("get_inputs returned no tensors")
            bad = [type(a).__name__ for a in inputs if not isinstance(a, torch.Tensor | int | float | bool)]
            if bad:
                raise InvalidTask(f"get_inputs returned non-tensor values: {', '.join(bad)}")
            size = sum(a.numel() * a.element_size() for a in inputs if isinstance(a, torch.Tensor))
            if size > MAX_INPUT_BYTES:
                raise InvalidTask(
                    f"get_inputs returned {size / 1e9:.1f} GB (limit {MAX_INPUT_BYTES / 1e9:.0f} GB)"
                )
            sigs.append(_signature(list(inputs)))
    except InvalidTask:
        raise
    except Exception as e:
        raise InvalidTask(f"get_inputs/get_init_inputs raised {type(e).__name__}: {e}"[:1000]) from None
    if not isinstance(init, list | tuple):
        raise InvalidTask("get_init_inputs must return a list")
    if sigs[0] != sigs[1]:
        raise InvalidTask("get_inputs shapes differ between calls (non-deterministic shapes)")


def _zeros(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return torch.zeros_like(obj)
    if isinstance(obj, list | tuple):
        return type(obj)(_zeros(o) for o in obj)
    return obj


def zeros_pass(output: Any, atol: float, rtol: float) -> bool:
    """Whether all-zero outputs pass the tolerance against `output` (outputs too small to judge)."""
    from evalsvc.engine.compare import compare

    return compare(_zeros(output), output, atol, rtol).passed


def constant_outputs(first: Any, second: Any) -> bool:
    """Whether the outputs for two different input sets are identical (they ignore the inputs)."""
    from evalsvc.engine.compare import compare

    return compare(second, first, 0.0, 0.0).passed


def quality_warnings(first: Any, second: Any, atol: float, rtol: float) -> list[str]:
    """What makes a task a poor judge: outputs so small that zeros pass the tolerance, or outputs that do
    not change with the inputs. `first` and `second` are the reference's outputs for two input sets."""
    warnings = []
    if zeros_pass(first, atol, rtol):
        warnings.append(
            f"all-zero outputs pass this task's tolerance (atol={atol:g}, rtol={rtol:g}): "
            "evaluations use a norm-relative check instead"
        )
    if constant_outputs(first, second):
        warnings.append(
            "the reference's outputs do not change with the inputs: a constant passes; "
            "evaluations use a norm-relative check"
        )
    return warnings
