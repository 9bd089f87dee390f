"""Checks made while the candidate runs, for what a static check cannot see past.

They run in the runner (the candidate's process), so a determined candidate could tamper with them; the
static and symbol screens refuse the means (interpreter internals, ctypes, monkeypatching, the Python
C-API), and the judge re-checks everything that reaches it: outputs against the reference, committed
outputs of timed calls, and timings against its own clock.
"""

from __future__ import annotations

from typing import Any

import torch
import torch._dynamo  # it replaces torch.manual_seed when first imported: before any snapshot
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


def _timer_parts() -> dict[str, Any]:
    """Everything the timing path reaches by name: every global of the timing and commitment modules, the
    code of their functions and methods, the attributes of their classes (a replaced `Round` or digest
    helper changes what a round reports as surely as a replaced `run`), and the torch entry points."""
    import os
    import random
    import time
    import types

    import evalsvc.engine.commitment as commitment
    import evalsvc.engine.timing as timing

    parts: dict[str, Any] = {}
    for module in (timing, commitment):
        short = module.__name__.rsplit(".", 1)[-1]
        for name, obj in vars(module).items():
            parts[f"{short}.{name}"] = obj
            if isinstance(obj, type) and obj.__module__ == module.__name__:
                for attr, member in vars(obj).items():
                    parts[f"{short}.{name}.{attr}"] = member
                    if hasattr(member, "__code__"):
                        parts[f"{short}.{name}.{attr}.__code__"] = member.__code__
            elif callable(obj) and hasattr(obj, "__code__"):
                parts[f"{short}.{name}.__code__"] = obj.__code__
    # Every function of torch's namespaces the task's input generation and the runner's own work may call
    # (the task's `get_inputs` runs in this process before each timed call: a wrapped `torch.randn` could
    # launch the candidate's kernel there, before the flush and `begin`).
    namespaces: tuple[tuple[Any, str], ...] = (
        (torch, "torch"),
        (torch.Tensor, "torch.Tensor"),
        (torch.cuda, "torch.cuda"),
    )
    for namespace, short in namespaces:
        for name, obj in vars(namespace).items():
            if callable(obj) and not isinstance(obj, type | types.ModuleType):
                parts[f"{short}.{name}"] = obj
    for name, obj in vars(TimerGuard).items():  # the guard itself (the runner calls it through its own
        parts[f"TimerGuard.{name}"] = obj  # reference, taken before the candidate loaded)
    parts.update(
        {
            "random._urandom": random._urandom,  # type: ignore[attr-defined]
            "os.urandom": os.urandom,
            "SystemRandom.random": random.SystemRandom.random,
            "timing._PROBES.random (own)": vars(timing._PROBES).get("random"),
            "timing._PROBES.getrandbits (own)": vars(timing._PROBES).get("getrandbits"),
            "SystemRandom.getrandbits": random.SystemRandom.getrandbits,
            "torch.take": torch.take,
            "torch.randint": torch.randint,
            "torch.arange": torch.arange,
            "torch.Generator": torch.Generator,
            "torch.Generator.manual_seed": torch.Generator.manual_seed,
            "torch._C._cuda_synchronize": getattr(torch._C, "_cuda_synchronize", None),
            "time.perf_counter": time.perf_counter,
            "torch.cuda.synchronize": torch.cuda.synchronize,
            "torch.cuda.Event": torch.cuda.Event,
            "torch.cuda.Event.record": torch.cuda.Event.record,
            "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
            "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
            "torch.Tensor.copy_": torch.Tensor.copy_,
            "torch.Tensor.fill_": torch.Tensor.fill_,
            "torch.Tensor.clone": torch.Tensor.clone,
            "torch.equal": torch.equal,
        }
    )
    return parts


def foreign_dispatch_modes() -> list[str]:
    """Dispatch modes on the stack outside the runner's own trace: one slipped under the trace sees and can
    change every operator the runner runs (its L2 flush, its snapshots), not only the candidate's."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return [type(m).__name__ for m in _get_current_dispatch_mode_stack()]


class _OpNames(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.names.add(func.name())
        return func(*args, **(kwargs or {}))


def _runner_ops() -> list[str]:
    """The operators the runner's own timing and checks call (found by running them once on a small
    tensor): a kernel registered over one of them from native code (`TORCH_LIBRARY_IMPL`) changes what
    they do without replacing any Python object."""
    import evalsvc.engine.commitment as commitment
    import evalsvc.engine.timing as timing

    t = torch.arange(2 * timing.PROBED_ELEMENTS, dtype=torch.float32)  # large enough to be sampled
    with _OpNames() as seen:
        timing.written_late(t)
        commitment.round_digests([t])
        commitment.chunk(t, 0)
        torch.equal(t, t.clone())
        torch.empty(4).fill_(0.0)
        torch.ones_like(t)
    return sorted(seen.names)


# The dispatch keys a call on CPU or CUDA tensors runs through; the others (Meta, Python, functorch, ...)
# are registered lazily by torch's own Python modules and do not run the runner's work.
_EXECUTING_KEYS = (
    "CPU:",
    "CUDA:",
    "AutogradCPU:",
    "AutogradCUDA:",
    "AutogradOther:",
    "Autograd[alias]:",
    "ADInplaceOrView:",
    "BackendSelect:",
    "AutocastCPU:",
    "AutocastCUDA:",
    "CompositeImplicitAutograd[alias]:",
    "CompositeExplicitAutograd[alias]:",
    "CompositeExplicitAutogradNonFunctional[alias]:",
)


def _executing_kernels(op: str) -> str:
    dump = torch._C._dispatch_dump(op)
    return "\n".join(line for line in dump.splitlines() if line.startswith(_EXECUTING_KEYS))


def _kernels(ops: list[str]) -> dict[str, str]:
    """Each operator's kernels on the keys a CPU or CUDA call runs through (about 50 ms for all 3,600
    operators on this CPU)."""
    return {op: _executing_kernels(op) for op in ops}


class TimerGuard:
    """Remembers the timing path as installed before the candidate was imported; `tampered()` names
    what has been replaced since: a monkeypatched timer, synchronize or statistics function, or a kernel
    registered over an operator the runner's own work calls. `registrations_changed()` looks at every
    operator that existed at `task_loaded()` (once, after the candidate is loaded: its static
    registrations run then; operators of its own are its business)."""

    def __init__(self) -> None:
        self.installed = _timer_parts()
        self.ops = _runner_ops()
        self.tables = _kernels(self.ops)
        self.registrations = _kernels(torch._C._dispatch_get_all_op_names())  # task_loaded() renews it

    def task_loaded(self) -> None:
        """What the task's own imports registered is not the candidate's doing."""
        self.registrations = _kernels(torch._C._dispatch_get_all_op_names())

    def tampered(self) -> list[str]:
        now = _timer_parts()
        replaced = [name for name, obj in self.installed.items() if now.get(name) is not obj]
        tables = _kernels(self.ops)
        replaced += [f"the kernels of {op}" for op in self.ops if tables[op] != self.tables[op]]
        return sorted(replaced)

    def registrations_changed(self) -> bool:
        return _kernels(list(self.registrations)) != self.registrations
