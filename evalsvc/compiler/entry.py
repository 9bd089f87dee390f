"""The compile jobs, run inside the sandbox, in two separate runs that share nothing:

- `python -m evalsvc.compiler.entry capture JOB OUT` imports a KernelBench solution (twice, with load_inline
  intercepted) and writes the load_inline calls it makes to `OUT/capture.json`. This is the only job that
  runs the candidate's Python; what it writes is the build's input, validated by the trusted side, never
  evidence about a build.
- `python -m evalsvc.compiler.entry triton JOB OUT` compiles a Triton solution's kernels ahead
  (evalsvc.compiler.triton_aot): it runs the candidate's Python, like capture, and no compiler but Triton's.
- `python -m evalsvc.compiler.entry build JOB OUT` builds the extensions the trusted side wrote to JOB (the
  candidate's own translation units, and binding units we generated), with ninja, and writes each library
  and each of the candidate's object files under `OUT/ext/<key>/`, and `OUT/report.json`. No candidate
  code runs in it, only the compilers, on flags from an allowlist.

JOB holds `spec.json` and `src/` (read-only); everything written to OUT is treated as untrusted.
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import sys
import traceback
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from evalsvc.compiler.inline import InlineCall, NotStatic, normalize_call

AGENT_ENV = Path(__file__).parent / "agent_env"
REPORT_MAX_BYTES = 512 * 1024


class ExtensionSpec(BaseModel):
    """One library the trusted side asks the build job to make: paths are relative to JOB/src."""

    key: str
    name: str
    own: list[str]  # the candidate's translation units: their objects are screened
    binding: list[str]  # translation units we generated (the Python module definition)
    include_dirs: list[str] = Field(default_factory=list)
    cflags: list[str] = Field(default_factory=list)
    cuda_cflags: list[str] = Field(default_factory=list)
    ldflags: list[str] = Field(default_factory=list)
    with_cuda: bool = False


class JobSpec(BaseModel):
    format: str
    entry: str
    cuda_arch: str = "90a"
    timeout_s: float = 300.0
    jobs: int | None = None
    extensions: list[ExtensionSpec] = Field(default_factory=list)
    task_source: str | None = None  # a Triton solution's job traces one forward on the task's inputs
    fast_path: bool = True  # try the shim build first (fast_path.py); off: every extension as written


class CaptureReport(BaseModel):
    """What the capture job says the solution asked load_inline for; validated by the trusted side."""

    ok: bool
    message: str | None = None
    not_static: bool = False
    calls: list[InlineCall] = Field(default_factory=list)


class ExtensionReport(BaseModel):
    key: str
    name: str
    with_cuda: bool
    ok: bool
    timed_out: bool = False
    duration_s: float = 0.0
    light_headers: bool = False
    fast_path: bool = False  # built against the shim (fast_path.py)
    fast_path_reason: str | None = None  # why not, when it was not
    library: str | None = None
    objects: list[str] = Field(default_factory=list)  # per own unit, in order: the object's path in OUT
    log: str = ""


class BuildReport(BaseModel):
    """What the build job says about itself; validated again by the trusted side."""

    ok: bool
    stage: str
    message: str | None = None
    not_static: bool = False
    extensions: list[ExtensionReport] = Field(default_factory=list)


class _Captured:
    """Stands in for a built extension while the solution module is imported for capture."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        raise RuntimeError(f"extension {self._name!r} is not built yet: do not call it at import time")


def capture_inline_calls(entry: Path) -> list[InlineCall]:
    """Import the solution twice with load_inline intercepted; the calls must be identical."""
    import torch.utils.cpp_extension as cx

    def run_once() -> list[InlineCall]:
        calls: list[InlineCall] = []

        def fake_load_inline(*args: Any, **kwargs: Any) -> _Captured:
            call = normalize_call(args, kwargs)
            calls.append(call)
            return _Captured(call.name)

        def fake_load(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("torch.utils.cpp_extension.load is not supported: use load_inline")

        saved = (cx.load_inline, cx.load)
        cx.load_inline, cx.load = fake_load_inline, fake_load
        try:
            runpy.run_path(str(entry), run_name="evalsvc_capture")
        finally:
            cx.load_inline, cx.load = saved
        return calls

    first, second = run_once(), run_once()
    if [c.key for c in first] != [c.key for c in second]:
        raise NotStatic("extension sources differ between two imports (random or time-dependent)")
    unique = {c.key: c for c in first}
    return list(unique.values())


def object_name(source: str, with_cuda: bool) -> str:
    """The object file torch's ninja writer makes for `source` (`x.cu` -> `x.cuda.o`, `x.cpp` -> `x.o`)."""
    stem = Path(source).stem
    return f"{stem}.cuda.o" if with_cuda and source.endswith(".cu") else f"{stem}.o"


def _build_one(ext: ExtensionSpec, spec: JobSpec, src: Path, scratch: Path, out: Path) -> ExtensionReport:
    from evalsvc.compiler.ninja_build import cuda_arch_flags  # imports torch only when it writes a build

    cuda_cflags = list(ext.cuda_cflags)
    if ext.with_cuda:
        cuda_cflags += [*cuda_arch_flags(spec.cuda_arch), "--ptxas-options=-v"]
    # The bindings' objects first: where both hold a copy of an inline pybind11 function, the linker keeps
    # the first one, so the candidate's (screened as dead code) never runs.
    units = [*ext.binding, *ext.own]
    sources = [src / rel for rel in units]
    fast_root = _fast_root()
    reason = "no fast-path toolchain in this worker" if fast_root is None else None
    if ext.include_dirs:
        reason = "a source tree with include directories (CUDA Agent layout)"
    elif not spec.fast_path:
        reason = "fast path off"
    elif fast_root is not None:
        from evalsvc.compiler import fast_path

        build_dir = scratch / "fast" / ext.key
        objects = [object_name(rel, ext.with_cuda) for rel in units]
        fast = fast_path.build(
            ext.name, sources, objects, build_dir, fast_root, ext.cflags, cuda_cflags, ext.ldflags,
            ext.with_cuda, spec.timeout_s, spec.jobs,
        )  # fmt: skip
        if fast.ok or fast.timed_out:
            rep = ExtensionReport(
                key=ext.key,
                name=ext.name,
                with_cuda=ext.with_cuda,
                ok=fast.ok,
                timed_out=fast.timed_out,
                duration_s=fast.duration_s,
                fast_path=fast.ok,
                fast_path_reason=fast.reason,
                log=fast.log[-200_000:],
            )
            return _keep_outputs(rep, ext, fast.library, build_dir, out)
        reason = fast.reason
        spec = spec.model_copy(update={"timeout_s": max(1.0, spec.timeout_s - fast.duration_s)})
    return _build_full(ext, spec, src, cuda_cflags, scratch, out, reason)


def _build_full(
    ext: ExtensionSpec,
    spec: JobSpec,
    src: Path,
    cuda_cflags: list[str],
    scratch: Path,
    out: Path,
    fast_path_reason: str | None,
) -> ExtensionReport:
    """The build as load_inline does it, against torch's headers (the light prelude first for `.cu`)."""
    from evalsvc.compiler.ninja_build import ExtensionBuild, build_extension

    sources = [src / rel for rel in [*ext.binding, *ext.own]]
    includes = [src / rel for rel in ext.include_dirs] + _pch_includes(ext.cflags)
    build_dir = scratch / "build" / ext.key
    flags = (ext.cflags, cuda_cflags, ext.ldflags)
    b = ExtensionBuild(ext.name, sources, build_dir, *flags, includes, ext.with_cuda)
    originals = _lighten([src / rel for rel in ext.own]) if ext.with_cuda else {}
    res = build_extension(b, spec.timeout_s, spec.jobs)
    light = bool(originals) and res.ok
    if originals and not res.ok and not res.timed_out:  # needs more of torch: build it as written
        for path, text in originals.items():
            path.write_text(text)
        first = res.duration_s
        res = build_extension(b, max(1.0, spec.timeout_s - first), spec.jobs)
        res.duration_s += first
    rep = ExtensionReport(
        key=ext.key,
        name=ext.name,
        with_cuda=ext.with_cuda,
        ok=res.ok,
        timed_out=res.timed_out,
        duration_s=res.duration_s,
        light_headers=light,
        fast_path=False,
        fast_path_reason=fast_path_reason,
        log=res.log[-200_000:],
    )
    return _keep_outputs(rep, ext, res.library, build_dir, out)


def _keep_outputs(
    rep: ExtensionReport, ext: ExtensionSpec, library: Path | None, build_dir: Path, out: Path
) -> ExtensionReport:
    """The library and each of the candidate's objects into OUT, named in the report."""
    if library is not None:
        dest = out / "ext" / ext.key
        (dest / "obj").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(library, dest / f"{ext.name}.so")
        rep.library = f"ext/{ext.key}/{ext.name}.so"
        for i, rel in enumerate(ext.own):
            shutil.copyfile(build_dir / object_name(rel, ext.with_cuda), dest / "obj" / f"{i}.o")
            rep.objects.append(f"ext/{ext.key}/obj/{i}.o")
    return rep


def _fast_root() -> Path | None:
    """The read-only directory with the fast path's flags and bridge objects, when the worker has them."""
    from evalsvc.compiler.fast_path import ready

    root = os.environ.get("EVALSVC_PCH_DIR")
    return Path(root) if root and ready(Path(root)) else None


def _lighten(sources: list[Path]) -> dict[Path, str]:
    """Rewrite the `.cu` sources to the light torch prelude (evalsvc.compiler.light_headers), writing the
    prelude beside them; their original texts, to restore when the light build fails."""
    from evalsvc.compiler.light_headers import PRELUDE_NAME, lighten, operators_named, prelude, torch_ops_dir

    cuda = {p: p.read_text() for p in sources if p.suffix == ".cu"}
    light = {p: t for p, text in cuda.items() if (t := lighten(text)) is not None}
    if not light:
        return {}
    header = prelude(operators_named(list(cuda.values()), torch_ops_dir()))
    for directory in {p.parent for p in light}:
        (directory / PRELUDE_NAME).write_text(header)
    for path, text in light.items():
        path.write_text(text)
    return {p: cuda[p] for p in light}


def _pch_includes(extra_cflags: list[str]) -> list[Path]:
    """The read-only precompiled-header directory for these flags, when the worker provides one."""
    from evalsvc.compiler.pch import pch_subdir

    root = os.environ.get("EVALSVC_PCH_DIR")
    if not root:
        return []
    d = Path(root) / pch_subdir(extra_cflags)
    ready = (d / "torch" / "extension.h.gch").is_file() and (d / "torch" / "extension.h").is_file()
    return [d] if ready else []


def capture(spec: JobSpec, src: Path) -> CaptureReport:
    try:
        calls = capture_inline_calls(src / spec.entry)
    except NotStatic as e:
        return CaptureReport(ok=False, message=str(e), not_static=True)
    except BaseException as e:  # the solution's own import-time code failed
        tb = traceback.format_exception(type(e), e, e.__traceback__, limit=-3)
        return CaptureReport(ok=False, message="importing the solution failed:\n" + "".join(tb))
    if not calls:
        return CaptureReport(ok=False, message="the solution calls no load_inline: nothing to build")
    return CaptureReport(ok=True, calls=calls)


def build(spec: JobSpec, src: Path, scratch: Path, out: Path) -> BuildReport:
    work = scratch / "src"  # writable: the light-header rewrite edits .cu files in place
    shutil.copytree(src, work)
    reports = []
    for ext in spec.extensions:
        reports.append(_build_one(ext, spec, work, scratch, out))
        if not reports[-1].ok:
            break
    return BuildReport(ok=all(r.ok for r in reports), stage="build", extensions=reports)


def main(argv: list[str]) -> int:
    command, job, out = argv[0], Path(argv[1]), Path(argv[2])
    spec = JobSpec.model_validate_json((job / "spec.json").read_text())
    scratch = Path(os.environ.get("EVALSVC_SCRATCH") or os.environ.get("TMPDIR") or "/tmp") / "evalsvc-build"
    scratch.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(scratch / "torch_extensions"))
    if command == "triton":  # a Triton solution: its kernels compiled ahead (triton_aot.py)
        from evalsvc.compiler.triton_aot import run_job

        run_job(job / "src" / spec.entry, job / "src", spec.task_source, out, scratch)
    elif command == "capture":
        (out / "capture.json").write_text(capture(spec, job / "src").model_dump_json())
    else:
        (out / "report.json").write_text(build(spec, job / "src", scratch, out).model_dump_json())
    return 0


def fingerprint() -> int:
    from evalsvc.compiler.toolchain import current_toolchain

    sys.stdout.write(json.dumps(current_toolchain().model_dump()) + "\n")
    return 0


def summarize(report: BuildReport) -> dict[str, Any]:
    """The parts of a build report the trusted side turns into a CompileReport."""
    # Imported here: the build job never parses its logs, and the models cost it a tenth of a second.
    from evalsvc.compiler.diagnostics import excerpt, parse_diagnostics, parse_ptxas

    logs = "\n".join(e.log for e in report.extensions)
    return {
        "diagnostics": parse_diagnostics(logs),
        "resources": parse_ptxas(logs),
        "log_excerpt": excerpt(logs) if not report.ok else "",
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["--fingerprint"]:
        sys.exit(fingerprint())
    sys.exit(main(sys.argv[1:]))
