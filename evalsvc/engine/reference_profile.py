"""Profile a task's reference: eager PyTorch and torch.compile, ranked by device time, with its roofline.

Runs in the task's own process (reference_host.py), like everything that runs a task's code; the judge
receives the profile as data. Tells an agent which operators to fuse first and what torch.compile
already fused.
"""

from __future__ import annotations

from typing import Any

import torch

from evalsvc.core.profiles import KernelTrace, ReferenceProfile
from evalsvc.core.tasks import TaskSpec
from evalsvc.engine.device_info import device_name
from evalsvc.engine.hardware import task_roofline
from evalsvc.engine.profiling import task_work, trace_calls
from evalsvc.engine.taskload import load_task

SEED = 1234


def profile_reference(
    spec: TaskSpec, device: str, compile_baseline: bool = True, roofline: bool = True
) -> ReferenceProfile:
    """With `roofline` False the profile has none: the worker adds it from its own measured peaks
    (measuring them takes seconds and memory a task's process should not spend)."""
    dev = torch.device(device)
    meta = spec.meta
    torch.backends.cuda.matmul.allow_tf32 = meta.tf32
    torch.backends.cudnn.allow_tf32 = meta.tf32
    task = load_task(spec)
    model = task.make_model(SEED, dev)
    inputs = task.make_inputs(SEED, dev)

    def eager(*a: Any) -> Any:
        return model(*a)

    eager_trace = trace_calls(eager, inputs, dev)
    work = task_work(model, inputs)
    notes = []
    if dev.type != "cuda":
        notes.append("on the CPU device operators are ranked by CPU time; kernels and launch gaps need a GPU")
    compiled = None
    if compile_baseline:
        compiled = _compiled_trace(model, inputs, dev, meta.compile_mode, notes)
    return ReferenceProfile(
        task_id=spec.id,
        device=str(dev),
        device_name=device_name(dev),
        eager=eager_trace,
        compiled=compiled,
        compile_mode=meta.compile_mode if compile_baseline else None,
        work=work,
        roofline=task_roofline(dev, work, meta.precision.value, meta.tf32, eager_trace.total_us / 1e3 or None)
        if roofline
        else None,
        notes=notes,
    )


def _compiled_trace(
    model: torch.nn.Module, inputs: list[Any], dev: torch.device, mode: str, notes: list[str]
) -> KernelTrace | None:
    try:
        fn = torch.compile(model, mode=None if mode == "default" else mode)
        with torch.no_grad():
            fn(*inputs)
        return trace_calls(fn, inputs, dev)
    except Exception as e:  # a reference torch.compile cannot handle is a note, not a failed profile
        notes.append(f"torch.compile[{mode}] failed: {type(e).__name__}: {str(e)[:200]}")
        return None
