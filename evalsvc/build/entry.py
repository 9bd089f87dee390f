"""The compile job, run inside the sandbox: capture a solution's extension sources, build them with ninja.

Invoked as `python -m evalsvc.build.entry JOB OUT`: JOB holds `spec.json` and `src/` (read-only),
OUT receives `report.json` and `ext/<key>/<name>.so`. Everything it writes is treated as untrusted.
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

from evalsvc.build.diagnostics import excerpt, parse_diagnostics, parse_ptxas
from evalsvc.build.inline import InlineCall, NotStatic, generated_sources, normalize_call

AGENT_ENV = Path(__file__).parent / "agent_env"
REPORT_MAX_BYTES = 512 * 1024


class JobSpec(BaseModel):
    format: str
    entry: str
    cuda_arch: str = "90a"
    timeout_s: float = 300.0
    jobs: int | None = None


class ExtensionReport(BaseModel):
    key: str
    name: str
    with_cuda: bool
    ok: bool
    timed_out: bool = False
    duration_s: float = 0.0
    light_headers: bool = False
    library: str | None = None
    log: str = ""


class BuildReport(BaseModel):
    """What the compile job says about itself; validated again by the trusted side."""

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


def _build(
    name: str,
    key: str,
    sources: list[Path],
    cflags: list[str],
    cuda_cflags: list[str],
    ldflags: list[str],
    includes: list[Path],
    with_cuda: bool,
    spec: JobSpec,
    scratch: Path,
    out: Path,
) -> ExtensionReport:
    from evalsvc.build.ninja_build import ExtensionBuild, build_extension, cuda_arch_flags

    if with_cuda:
        cuda_cflags = [*cuda_cflags, *cuda_arch_flags(spec.cuda_arch), "--ptxas-options=-v"]
    b = ExtensionBuild(
        name, sources, scratch / "build" / key, cflags, cuda_cflags, ldflags, includes, with_cuda
    )
    originals = _lighten(sources) if with_cuda else {}
    res = build_extension(b, spec.timeout_s, spec.jobs)
    light = bool(originals) and res.ok
    if originals and not res.ok and not res.timed_out:  # needs more of torch: build it as written
        for path, text in originals.items():
            path.write_text(text)
        first = res.duration_s
        res = build_extension(b, max(1.0, spec.timeout_s - first), spec.jobs)
        res.duration_s += first
    rep = ExtensionReport(
        key=key,
        name=name,
        with_cuda=with_cuda,
        ok=res.ok,
        timed_out=res.timed_out,
        duration_s=res.duration_s,
        light_headers=light,
        log=res.log[-200_000:],
    )
    if res.library is not None:
        dest = out / "ext" / key
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(res.library, dest / f"{name}.so")
        rep.library = f"ext/{key}/{name}.so"
    return rep


def _lighten(sources: list[Path]) -> dict[Path, str]:
    """Rewrite the `.cu` sources to the light torch prelude (evalsvc.build.light_headers), writing the
    prelude beside them; their original texts, to restore when the light build fails."""
    from evalsvc.build.light_headers import PRELUDE_NAME, lighten, operators_named, prelude, torch_ops_dir

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
    from evalsvc.build.pch import pch_subdir

    root = os.environ.get("EVALSVC_PCH_DIR")
    if not root:
        return []
    d = Path(root) / pch_subdir(extra_cflags)
    ready = (d / "torch" / "extension.h.gch").is_file() and (d / "torch" / "extension.h").is_file()
    return [d] if ready else []


def build_kernelbench(spec: JobSpec, src: Path, scratch: Path, out: Path) -> BuildReport:
    try:
        calls = capture_inline_calls(src / spec.entry)
    except NotStatic as e:
        return BuildReport(ok=False, stage="capture", message=str(e), not_static=True)
    except BaseException as e:  # the solution's own import-time code failed
        tb = traceback.format_exception(type(e), e, e.__traceback__, limit=-3)
        return BuildReport(
            ok=False, stage="capture", message="importing the solution failed:\n" + "".join(tb)
        )
    if not calls:
        return BuildReport(
            ok=False, stage="capture", message="the solution calls no load_inline: nothing to build"
        )
    _write_sources(out, calls)
    reports = []
    for call in calls:
        gen_dir = scratch / "gen" / call.key
        gen_dir.mkdir(parents=True, exist_ok=True)
        sources = []
        for fname, text in generated_sources(call).items():
            (gen_dir / fname).write_text(text)
            sources.append(gen_dir / fname)
        reports.append(
            _build(
                call.name,
                call.key,
                sources,
                call.extra_cflags,
                call.extra_cuda_cflags,
                call.extra_ldflags,
                _pch_includes(call.extra_cflags),
                call.uses_cuda,
                spec,
                scratch,
                out,
            )
        )
        if not reports[-1].ok:
            break
    ok = all(r.ok for r in reports)
    return BuildReport(ok=ok, stage="build", extensions=reports)


def _write_sources(out: Path, calls: list[InlineCall]) -> None:
    """The captured C++/CUDA text, as the solution passed it to load_inline, for the native checks."""
    sources: dict[str, str] = {}
    for call in calls:
        if call.cpp_sources:
            sources[f"{call.name}.cpp"] = "\n".join(call.cpp_sources)
        if call.cuda_sources:
            sources[f"{call.name}.cu"] = "\n".join(call.cuda_sources)
    (out / "sources.json").write_text(json.dumps(sources))


def build_cuda_agent(spec: JobSpec, src: Path, scratch: Path, out: Path) -> BuildReport:
    work = scratch / "agent"
    shutil.copytree(src, work)
    for f in AGENT_ENV.iterdir():
        shutil.copy2(f, work / f.name)
    sources = sorted(
        p
        for p in [
            *work.glob("*.cpp"),
            *work.glob("*.cu"),
            *(work / "kernels").glob("*.cpp"),
            *(work / "kernels").glob("*.cu"),
        ]
    )
    cflags = ["-O3"]  # CUDA Agent's -std=c++17 is gone: torch's headers now require C++20 (torch sets it)
    rep = _build(
        "cuda_extension",
        "cuda_extension",
        sources,
        cflags,
        ["-O3", "--use_fast_math"],
        [],
        [work, work / "kernels", *_pch_includes(cflags)],
        True,
        spec,
        scratch,
        out,
    )
    return BuildReport(ok=rep.ok, stage="build", extensions=[rep])


def main(argv: list[str]) -> int:
    job, out = Path(argv[0]), Path(argv[1])
    spec = JobSpec.model_validate_json((job / "spec.json").read_text())
    scratch = Path(os.environ.get("EVALSVC_SCRATCH") or os.environ.get("TMPDIR") or "/tmp") / "evalsvc-build"
    scratch.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(scratch / "torch_extensions"))
    builder = build_cuda_agent if spec.format == "cuda_agent" else build_kernelbench
    report = builder(spec, job / "src", scratch, out)
    text = report.model_dump_json()
    (out / "report.json").write_text(text)
    return 0


def fingerprint() -> int:
    from evalsvc.build.toolchain import current_toolchain

    sys.stdout.write(json.dumps(current_toolchain().model_dump()) + "\n")
    return 0


def summarize(report: BuildReport) -> dict[str, Any]:
    """The parts of a build report the trusted side turns into a CompileReport."""
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
