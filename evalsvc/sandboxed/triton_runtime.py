"""A Triton solution in the runner: where its kernels come from, before the solution is imported.

On the CPU device the kernels run in Triton's interpreter (`TRITON_INTERPRET=1`, set in this process only,
for this solution only): correctness is judged as on a GPU, timing is interpreter time (the judge awards no
speed from it). On a GPU, Triton's cache directory (TRITON_CACHE_DIR, in the runner's own scratch) is seeded
with the kernels the compile stage built ahead for this artifact, under Triton's own cache keys, so a launch
finds its kernel there; `compiled_at_launch` counts the kernels found in the cache that the artifact did
not bring (compiled by this process at a launch the ahead-of-time trace did not predict).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

CACHE = "triton-cache"  # evalsvc.compiler.triton_aot.CACHE: the artifact's copy of Triton's cache
_seeded: set[str] = set()


def prepare(manifest: dict[str, Any], artifact: Path, device_type: str) -> None:
    """Before the solution is imported: the interpreter on the CPU, the seeded cache on a GPU."""
    if manifest.get("format") != "triton":
        return
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
        _seeded.update(p.name for p in seeded.iterdir())


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


def _untraced_interpreter_views() -> None:
    """Before and after a launch the interpreter moves each argument's storage to a CPU view and back
    (`Tensor.set_`, `UntypedStorage.copy_`): bookkeeping of Triton's, kept out of the runner's operator trace.
    The kernel's own work runs in NumPy on those views, between the two, where the trace stays on."""
    from torch.utils._python_dispatch import _disable_current_modes
    from triton.runtime import interpreter

    def untraced(original: Any) -> Any:
        def run(*args: Any) -> Any:
            with _disable_current_modes():
                return original(*args)

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


def compiled_at_launch() -> int:
    """Kernel directories in Triton's cache that the artifact did not bring (compiled in this process)."""
    cache = Path(os.environ.get("TRITON_CACHE_DIR") or Path.home() / ".triton" / "cache")
    if not cache.is_dir():
        return 0
    return sum(1 for p in cache.iterdir() if p.name not in _seeded and any(p.glob("*.cubin")))
