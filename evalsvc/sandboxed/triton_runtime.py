"""A Triton solution in the runner: where its kernels come from, before the solution is imported.

On the CPU device the kernels run in Triton's interpreter (`TRITON_INTERPRET=1`, set in this process only,
for this solution only): correctness is judged as on a GPU, timing is interpreter time (the judge awards no
speed from it). On a GPU, Triton's cache directory (TRITON_CACHE_DIR, in the runner's own scratch) is seeded
with the kernels the compile stage built ahead for this artifact, under Triton's own cache keys, so a launch
finds its kernel there, and with the host modules and facts the judge's side prepared (triton_driver.py).
A launch the ahead-of-time trace did not predict would need ptxas, which this process may not run: it fails
as a runtime error.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from evalsvc.engine.messages import MAX_TUNINGS, Tuning

CACHE = "triton-cache"  # evalsvc.compiler.triton_aot.CACHE: the artifact's copy of Triton's cache
HOST_FACTS = "evalsvc-host.json"  # written by the judge's side (evalsvc.engine.triton_driver)
ARGUMENT_RULE = "triton_argument_not_tensor"
tuned: list[Tuning] = []  # kernels tuned since the last `take_tuned`
# Why a launch was refused (rule, message), kept so that a candidate catching the exception gains nothing:
# the runner answers this request and every later one as forbidden with it (runner.serve).
refused: list[tuple[str, str]] = []


class ArgumentRefused(Exception):
    """A launch's argument was refused (check_arguments); `refused` holds the rule the runner reports."""


def prepare(manifest: dict[str, Any], artifact: Path, device_type: str) -> None:
    """Before the solution is imported: the interpreter on the CPU, the seeded cache on a GPU."""
    if manifest.get("format") != "triton":
        return
    _record_tuning()
    if device_type == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # read by @triton.jit when the solution's module runs
        _interpret_language()
        _untraced_interpreter_views()
        _interpreter_benchmarker()
        return
    os.environ.pop("TRITON_INTERPRET", None)
    cache = Path(os.environ.get("TRITON_CACHE_DIR") or Path.home() / ".triton" / "cache")
    cache.mkdir(parents=True, exist_ok=True)
    seeded = artifact / CACHE
    if seeded.is_dir():
        shutil.copytree(seeded, cache, dirs_exist_ok=True)
        _host_facts(seeded / HOST_FACTS)


def _record_tuning() -> None:
    """Each @triton.autotune call that benchmarked its configs (its cache of choices grew) leaves the chosen
    config and the call's wall time in `tuned`, for the result (display only: this process's word)."""
    from triton.runtime import autotuner

    original = autotuner.Autotuner.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        before = len(self.cache)
        start = time.perf_counter()
        out = original(self, *args, **kwargs)
        if len(self.cache) > before and len(tuned) < MAX_TUNINGS:
            fn = getattr(self.fn, "fn", self.fn)
            tuned.append(
                Tuning(
                    kernel=str(getattr(fn, "__name__", "?"))[:200],
                    config=str(self.best_config)[:500],
                    configs=len(self.configs),
                    tuning_ms=(time.perf_counter() - start) * 1e3,
                )
            )
        return out

    autotuner.Autotuner.run = run


def take_tuned() -> list[Tuning]:
    """The tunings since the last call of this, oldest first."""
    taken = list(tuned)
    tuned.clear()
    return taken


def _host_facts(path: Path) -> None:
    """What Triton would run a program to learn (this process may not): libcuda's directory and the ptxas
    version that is part of every kernel's cache key, as the judge's side found them (triton_driver.py)."""
    import json

    try:
        facts = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if isinstance(facts.get("libcuda_dir"), str):
        os.environ["TRITON_LIBCUDA_PATH"] = facts["libcuda_dir"]
    version = facts.get("ptxas_version")
    if isinstance(version, str):
        from triton.backends.nvidia import compiler

        compiler.get_ptxas_version = lambda arch=80: version


def _interpret_language() -> None:
    """Triton's own kernel functions (`tl.zeros`, `tl.sum`, ...) are `@triton.jit` code too, decorated
    when triton.language was imported: where that was before the interpreter was asked for (the runner's
    template may import triton), they are JIT functions, which the interpreter cannot call. Rewrapped here."""
    import sys

    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    for name, module in list(sys.modules.items()):
        if module is None or not (name == "triton.language" or name.startswith("triton.language.")):
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, JITFunction):
                setattr(module, attr, InterpretedFunction(value.fn, noinline=value.noinline))


def check_arguments(values: Any) -> None:
    """Every argument of a launch that Triton would treat as a tensor (it has `data_ptr`) must be exactly a
    torch.Tensor or nn.Parameter: Triton calls `untyped_storage()`, `size()`, `new_empty()`... on it in the
    copy steps that run untraced, so an object of the solution's own would run its Python (torch compute
    included) there unseen. Any other object of a class not Python's, torch's or Triton's is refused as well:
    Triton's `hasattr`, `isinstance` and tuple rebuilding would run its `__getattr__`, `__class__` or
    `__new__` there. Looked up without running the argument's code (`type`, `inspect.getattr_static`).
    Tuples are walked as Triton walks them; a TensorDescriptor by its base."""
    import inspect

    import torch

    missing = object()
    todo = list(values)
    while todo:
        arg = todo.pop()
        kind = type(arg)
        if kind is torch.Tensor or kind is torch.nn.Parameter:
            continue
        if kind is tuple:
            todo.extend(arg)
            continue
        foreign = any(c.__module__.split(".")[0] not in ("builtins", "torch", "triton") for c in kind.__mro__)
        if foreign or inspect.getattr_static(arg, "data_ptr", missing) is not missing:
            why = (
                f"a Triton kernel was launched with a {kind.__module__}.{kind.__qualname__}: Triton copies "
                "an argument with `data_ptr` as a tensor, running its methods, so kernel arguments must be "
                "plain torch.Tensor or nn.Parameter, numbers, strings, None, dtypes or tuples of them"
            )
            refused.append((ARGUMENT_RULE, why))
            raise ArgumentRefused(why)
        if kind.__name__ == "TensorDescriptor":
            todo.append(inspect.getattr_static(arg, "base", None))


def _untraced_interpreter_views() -> None:
    """Before and after a launch the interpreter moves each argument's storage to a CPU view and back
    (`Tensor.set_`, `UntypedStorage.copy_`): bookkeeping of Triton's, kept out of the runner's operator trace.
    The kernel's own work runs in NumPy on those views, between the two, where the trace stays on. Only for
    plain tensors: the arguments are checked first, traced (check_arguments)."""
    from torch.utils._python_dispatch import _disable_current_modes
    from triton.runtime import interpreter

    def untraced(original: Any) -> Any:
        def run(self: Any, args_dev: Any, *rest: Any) -> Any:
            check_arguments([*args_dev, *(v for r in rest if isinstance(r, dict) for v in r.values())])
            with _disable_current_modes():
                return original(self, args_dev, *rest)

        return run

    grid = interpreter.GridExecutor
    grid._init_args_hst = untraced(grid._init_args_hst)
    grid._restore_args_dev = untraced(grid._restore_args_dev)


def _interpreter_benchmarker() -> None:
    """@triton.autotune benchmarks its configs with the device's benchmarker, which the interpreter lacks:
    here each config runs three times by the wall clock (bounded: tuning happens at the first, checked call,
    never in a timed round, and costs three launches per config)."""
    from triton.runtime import autotuner

    def bench(kernel_call: Any, quantiles: Any = None) -> list[float]:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            kernel_call()
            times.append((time.perf_counter() - start) * 1e3)
        times.sort()
        return [times[1], times[0], times[2]]  # the (0.5, 0.2, 0.8) quantiles the autotuner asks for

    autotuner.Autotuner.do_bench = property(lambda self: bench)
