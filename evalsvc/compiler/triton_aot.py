"""The ahead-of-time compile of a Triton solution, run inside the compile sandbox (no GPU there).

`python -m evalsvc.compiler.entry triton JOB OUT` imports the solution, makes the task's inputs on the CPU and
runs one forward with Triton's launch replaced: each `kernel[grid](...)` is bound and specialised exactly as
Triton's JIT does at a launch (`create_function_from_signature`, `JITFunction._pack_args`, for the CUDA
backend of the target), compiled with `triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))`
into Triton's own cache directory under OUT, and not run. An `@triton.autotune` kernel has every config
compiled. The cache keys are Triton's own, so the GPU worker, its cache directory seeded from the artifact,
finds the kernels a launch asks for and compiles only what the trace did not reach. Outputs of the traced
forward are never computed (kernels do not run), so a launch whose arguments depend on a kernel's results
may be missed: those are compiled at first launch and counted. What this job writes is untrusted data.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from evalsvc.core.results import Diagnostic, TritonCompile, TritonKernel

ARCH = 90
WARP = 32
MAX_KERNELS = 64  # distinct specialisations compiled ahead; beyond, first launch compiles them
CACHE = "triton-cache"
REPORT = "triton.json"


class TritonJobReport(TritonCompile):
    """What the job says (validated again by the trusted side)."""

    ok: bool = False
    message: str | None = None
    diagnostics: list[Diagnostic] = []


def _where(jit: Any, src_root: Path) -> tuple[str | None, int | None]:
    """The solution file and line of a JIT function's `def`."""
    code = getattr(getattr(jit, "fn", None), "__code__", None)
    if code is None:
        return None, None
    try:
        rel = str(Path(code.co_filename).resolve().relative_to(src_root.resolve()))
    except ValueError:
        rel = Path(code.co_filename).name
    return rel, code.co_firstlineno


def _diagnostic(e: BaseException, jit: Any, src_root: Path) -> Diagnostic:
    """Triton's compile error trimmed to the solution's file and line (its node's line inside the kernel)."""
    from triton.compiler.errors import CompilationError

    file, first = _where(jit, src_root)
    line = first
    if isinstance(e, CompilationError) and getattr(e, "node", None) is not None and first is not None:
        src = getattr(jit, "src", "")
        lineno = getattr(e.node, "lineno", None)
        if lineno is not None:  # the kernel's source starts at `def`, maybe below its decorators
            lines = Path(jit.fn.__code__.co_filename).read_text().splitlines()
            head = src.splitlines()[0].strip() if src else ""
            def_line = next((i + 1 for i in range(first - 1, len(lines)) if lines[i].strip() == head), first)
            line = def_line + lineno - 1
    msg = getattr(e, "error_message", None) or str(e).strip().splitlines()[-1:] or [type(e).__name__]
    text = msg if isinstance(msg, str) else msg[0]
    return Diagnostic(severity="error", message=f"{type(e).__name__}: {text}"[:600], file=file, line=line)


class Tracer:
    """Replaces JITFunction.run and Autotuner.run for one traced forward: compile, never launch."""

    def __init__(self, src_root: Path) -> None:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import make_backend

        self.src_root = src_root
        self.target = GPUTarget("cuda", ARCH, WARP)
        self.backend = make_backend(self.target)
        self.report = TritonJobReport(target=f"cuda:{ARCH}", ok=True)
        self.seen: set[str] = set()

    def install(self) -> None:
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.jit import JITFunction

        tracer = self

        def run(jit: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
            tracer.launch(jit, args, kwargs)

        def tune(autotuner: Any, *args: Any, **kwargs: Any) -> None:
            kwargs.pop("grid", None)
            kwargs.pop("warmup", None)
            for config in autotuner.configs:  # each config the GPU worker's autotuner will benchmark
                tracer.report.autotune_configs += 1
                autotuner.fn.run(*args, grid=None, warmup=True, **{**kwargs, **config.all_kwargs()})

        JITFunction.run = run
        Autotuner.run = tune

    def launch(self, jit: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """As JITFunction.run binds and specialises a launch, for the target; then compile it ahead."""
        import triton
        from triton import knobs
        from triton.compiler import ASTSource
        from triton.runtime.jit import create_function_from_signature

        self.report.launches_traced += 1
        kwargs["debug"] = kwargs.get("debug", jit.debug) or knobs.runtime.debug
        kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
        binder = create_function_from_signature(jit.signature, jit.params, self.backend)
        bound, specialization, options = binder(*args, **kwargs)
        packed = jit._pack_args(self.backend, kwargs, bound, specialization, options)
        options, signature, constexprs, attrs = packed
        key = repr((jit.cache_key, signature, sorted(constexprs.items()), sorted(attrs.items()), options))
        if key in self.seen or len(self.seen) >= MAX_KERNELS:
            return
        self.seen.add(key)
        file, line = _where(jit, self.src_root)
        kernel = TritonKernel(
            name=jit.fn.__name__,
            file=file,
            line=line,
            signature=", ".join(f"{k}: {v}" for k, v in signature.items()),
            constexprs=", ".join(f"{jit.arg_names[p[0]]}={v!r}" for p, v in constexprs.items())[:400],
            num_warps=options.num_warps,
            num_stages=options.num_stages,
        )
        start = time.monotonic()
        try:
            src = ASTSource(jit, signature, constexprs, attrs)
            triton.compile(src, target=self.target, options=options.__dict__)
        except Exception as e:
            kernel.ok = self.report.ok = False
            self.report.diagnostics.append(_diagnostic(e, jit, self.src_root))
            self.report.message = "a Triton kernel failed to compile"
        kernel.seconds = time.monotonic() - start
        self.report.kernels.append(kernel)


def aot(entry: Path, src_root: Path, task_source: str | None, scratch: Path) -> TritonJobReport:
    """Trace one forward of the solution on the task's inputs (CPU tensors), compiling every launch."""
    import torch
    import triton

    tracer = Tracer(src_root)
    tracer.report.triton_version = triton.__version__
    tracer.install()
    sys.path.insert(0, str(src_root))
    try:
        module = runpy.run_path(str(entry), run_name="evalsvc_triton_aot")
    except BaseException as e:  # the solution's own import failed, or a kernel compiled at import did
        tracer.report.ok = False
        tb = traceback.format_exception(type(e), e, e.__traceback__, limit=-3)
        tracer.report.message = "importing the solution failed:\n" + "".join(tb)[-3000:]
        return tracer.report
    if not tracer.report.ok:
        return tracer.report
    if task_source is None:
        tracer.report.trace_note = "no task given: no forward traced, every kernel compiles at first launch"
        return tracer.report
    task_file = scratch / "task_aot.py"
    task_file.write_text(task_source)
    try:
        task = runpy.run_path(str(task_file), run_name="evalsvc_task")
        torch.manual_seed(0)
        init = list(task["get_init_inputs"]()) if "get_init_inputs" in task else []
        inputs = list(task["get_inputs"]())
        model = module["ModelNew"](*init).eval()
        with torch.no_grad():
            model(*inputs)
    except BaseException as e:  # kernels do not run here, so later work may fail on unwritten outputs
        tracer.report.trace_note = f"the traced forward stopped: {type(e).__name__}: {e}"[:600]
    if not tracer.report.launches_traced and tracer.report.trace_note is None:
        tracer.report.trace_note = "the traced forward launched no Triton kernel"
    return tracer.report


def run_job(entry: Path, src_root: Path, task_source: str | None, out: Path, scratch: Path) -> None:
    """The job's whole work: Triton's cache under OUT, the report beside it."""
    os.environ["TRITON_CACHE_DIR"] = str(out / CACHE)
    os.environ.pop("TRITON_INTERPRET", None)
    report = aot(entry, src_root, task_source, scratch)
    (out / REPORT).write_text(report.model_dump_json())
