"""The compile stage: a solution in, an artifact (or the compiler's diagnostics) out, cached by content.

Runs on the trusted side: it prepares the job, asks a sandbox to run `evalsvc.build.entry` over it,
validates what came back and files the artifact in the store. A cache hit starts no sandbox.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ValidationError

from evalsvc.build.entry import REPORT_MAX_BYTES, BuildReport, JobSpec, summarize
from evalsvc.build.toolchain import Toolchain
from evalsvc.core.hashing import content_hash
from evalsvc.core.results import CompileReport, Finding, Status
from evalsvc.core.solutions import Solution
from evalsvc.core.static_checks import Finding as StaticFinding
from evalsvc.core.static_checks import check_native, check_python, inline_sources
from evalsvc.sandbox.base import CompileSandbox, Mount, SandboxLimits
from evalsvc.store.artifacts import ArtifactStore

MAX_SOURCES_BYTES = 8 * 1024 * 1024
# Part of every artifact key: bump it when the way sources become a library changes (flags, PCH use),
# so cached builds and cached compile errors of the old recipe are not served.
BUILD_RECIPE = "3"  # 3: light torch headers for .cu, wheel include dirs, CUDA Agent flags


class Manifest(BaseModel):
    """What the runner needs to load an artifact; written by the trusted side only."""

    key: str
    format: str
    entry: str
    toolchain: Toolchain
    cuda_arch: str
    extensions: dict[str, str]  # load_inline call key -> library path in the artifact
    report: CompileReport


@dataclass
class CompileOutcome:
    status: Status  # OK, COMPILE_ERROR, FORBIDDEN, TIMEOUT or INTERNAL_ERROR
    report: CompileReport
    artifact_key: str | None
    findings: list[Finding]
    message: str | None = None


class Compiler:
    def __init__(
        self,
        sandbox: CompileSandbox,
        store: ArtifactStore,
        toolchain: Toolchain,
        cuda_arch: str = "90a",
        limits: SandboxLimits | None = None,
        python: str = "python3",
        pch_dir: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.env = dict(env or {})
        self.pch_dir = pch_dir
        self.store = store
        self.toolchain = toolchain
        self.cuda_arch = cuda_arch
        self.limits = limits or SandboxLimits()
        self.python = python
        # The static screens; the hostile-sandbox tests turn them off to prove the sandboxes hold alone.
        self.screen = True

    def artifact_key(self, solution: Solution) -> str:
        return "a_" + content_hash(solution.id, self.toolchain.hash, self.cuda_arch, BUILD_RECIPE)

    def compile(self, solution: Solution, allow_vendor_libs: bool = False) -> CompileOutcome:
        """Screen, then build (or find the build in the store), then screen what was built.

        The Python checks need no build, so a refused solution costs no container. The native checks read
        the C++/CUDA the solution really handed to load_inline (captured at build time, kept in the
        artifact), so strings assembled at import time are checked too.
        """
        if self.screen and (findings := _screen_sources(solution, allow_vendor_libs)):
            return _refused(findings)
        key = self.artifact_key(solution)
        with tempfile.TemporaryDirectory(prefix="evalsvc-cached-") as tmp:
            if self.store.fetch(key, Path(tmp)):
                manifest = Manifest.model_validate_json((Path(tmp) / "manifest.json").read_text())
                report = manifest.report.model_copy(update={"cached": True, "duration_s": 0.0})
                if report.ok:
                    outcome = CompileOutcome(Status.OK, report, key, [])
                    captured = _read_captured_sources(Path(tmp) / "sources.json")
                    return self._screen_native(outcome, captured, allow_vendor_libs)
                return CompileOutcome(Status.COMPILE_ERROR, report, None, [], _first_error(report))
        return self._compile_fresh(solution, key, allow_vendor_libs)

    def _screen_native(
        self, outcome: CompileOutcome, sources: dict[str, str], allow_vendor_libs: bool
    ) -> CompileOutcome:
        findings = check_native(sources, allow_vendor_libs)
        return _refused(findings, outcome.report) if findings and self.screen else outcome

    def _compile_fresh(self, solution: Solution, key: str, allow_vendor_libs: bool) -> CompileOutcome:
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="evalsvc-job-") as tmp:
            Path(tmp).chmod(0o755)
            job, out = Path(tmp) / "job", Path(tmp) / "out"
            (job / "src").mkdir(parents=True)
            out.mkdir()
            out.chmod(0o777)
            for rel, text in solution.files.items():
                dest = job / "src" / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(text)
            spec = JobSpec(
                format=solution.format.value,
                entry=solution.entry,
                cuda_arch=self.cuda_arch,
                timeout_s=max(5.0, self.limits.wall_seconds - 10),
                jobs=max(1, int(self.limits.cpus)),
            )
            (job / "spec.json").write_text(spec.model_dump_json())
            for p in job.rglob("*"):
                p.chmod(0o755 if p.is_dir() else 0o644)
            job.chmod(0o755)
            mounts = [Mount(job, "/job", read_only=True), Mount(out, "/out", read_only=False)]
            env = dict(self.env)
            if self.pch_dir is not None and self.pch_dir.is_dir():
                mounts.append(Mount(self.pch_dir, "/pch", read_only=True))
                env["EVALSVC_PCH_DIR"] = "/pch"
            run = self.sandbox.run(
                [self.python, "-m", "evalsvc.build.entry", "/job", "/out"], mounts, self.limits, env
            )
            duration = time.monotonic() - start
            if run.timed_out:
                report = CompileReport(ok=False, duration_s=duration, log_excerpt=run.output[-4000:])
                return CompileOutcome(
                    Status.TIMEOUT, report, None, [], f"compilation exceeded {self.limits.wall_seconds:.0f} s"
                )
            build = _read_report(out / "report.json")
            if build is None:
                msg = "the compile job ended without a report"
                if run.oom_killed:
                    msg = "the compile job ran out of memory"
                report = CompileReport(ok=False, duration_s=duration, log_excerpt=run.output[-4000:])
                return CompileOutcome(Status.COMPILE_ERROR, report, None, [], f"{msg} (exit {run.exit_code})")
            return self._file(solution, key, build, out, job, duration, allow_vendor_libs)

    def _file(
        self,
        solution: Solution,
        key: str,
        build: BuildReport,
        out: Path,
        job: Path,
        duration: float,
        allow_vendor_libs: bool,
    ) -> CompileOutcome:
        parts = summarize(build)
        report = CompileReport(
            ok=build.ok,
            duration_s=duration,
            artifact_key=key if build.ok else None,
            log_excerpt=parts["log_excerpt"] or (build.message or "")[-4000:],
            diagnostics=parts["diagnostics"],
            resources=parts["resources"],
            light_headers=any(e.light_headers for e in build.extensions),
        )
        if build.not_static:
            finding = Finding(rule="non_static_sources", message=build.message or "")
            return CompileOutcome(Status.FORBIDDEN, report, None, [finding], build.message)
        extensions = {}
        for ext in build.extensions:
            lib = ext.library
            if ext.ok and lib and (out / lib).is_file() and not (out / lib).is_symlink():
                extensions[ext.key] = lib
        if build.ok and len(extensions) != len(build.extensions):
            build.ok = report.ok = False
        artifact = out.parent / "artifact"
        artifact.mkdir()
        for lib in extensions.values():
            (artifact / lib).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out / lib, artifact / lib)
        shutil.copytree(job / "src", artifact / "src")
        captured = _read_captured_sources(out / "sources.json")
        if captured:
            (artifact / "sources.json").write_text(json.dumps(captured))
        manifest = Manifest(
            key=key,
            format=solution.format.value,
            entry=solution.entry,
            toolchain=self.toolchain,
            cuda_arch=self.cuda_arch,
            extensions=extensions,
            report=report,
        )
        (artifact / "manifest.json").write_text(manifest.model_dump_json())
        timed_out = any(e.timed_out for e in build.extensions)
        if build.stage == "build" and not timed_out:  # deterministic outcomes only
            self.store.put(key, artifact)
        if timed_out:
            limit = f"compilation exceeded its time limit ({self.limits.wall_seconds:.0f} s)"
            return CompileOutcome(Status.TIMEOUT, report, None, [], limit)
        if not build.ok:
            return CompileOutcome(Status.COMPILE_ERROR, report, None, [], _first_error(report))
        outcome = CompileOutcome(Status.OK, report, key, [])
        return self._screen_native(outcome, captured, allow_vendor_libs)


def _refused(findings: list[StaticFinding], report: CompileReport | None = None) -> CompileOutcome:
    found = [Finding(rule=f.rule, message=f.why, file=f.file, line=f.line) for f in findings]
    rules = sorted({f.rule for f in findings})
    first = findings[0]
    message = f"refused by static checks ({', '.join(rules)}) in {first.file}, {first.why}"
    return CompileOutcome(Status.FORBIDDEN, report or CompileReport(ok=False), None, found, message)


def _screen_sources(solution: Solution, allow_vendor_libs: bool) -> list[StaticFinding]:
    """The checks that need no build: the Python, and the C++/CUDA readable without running anything
    (string constants handed to load_inline, a CUDA Agent tree's files)."""
    python = {k: v for k, v in solution.files.items() if k.endswith(".py")}
    visible = {n: t for text in python.values() for n, t in inline_sources(text).items()}
    own = {k: v for k, v in solution.files.items() if not k.endswith(".py")}
    return check_python(python) or check_native(visible | own, allow_vendor_libs)


def _read_captured_sources(path: Path) -> dict[str, str]:
    """The compile job's record of what it passed to the compiler (its own output: validate it)."""
    if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_SOURCES_BYTES:
        return {}
    try:
        data = json.loads(path.read_text(errors="replace"))
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k)[:200]: v for k, v in data.items() if isinstance(v, str)}


def _read_report(path: Path) -> BuildReport | None:
    if not path.is_file() or path.is_symlink() or path.stat().st_size > REPORT_MAX_BYTES * 8:
        return None
    try:
        return BuildReport.model_validate(json.loads(path.read_text(errors="replace")))
    except (ValidationError, ValueError):
        return None


def _first_error(report: CompileReport) -> str:
    errs = [d for d in report.diagnostics if d.severity == "error"]
    if errs:
        d = errs[0]
        return f"{d.file}:{d.line}: {d.message}"
    return (
        (report.log_excerpt or "compilation failed").strip().splitlines()[-1][:400]
        if report.log_excerpt
        else "compilation failed"
    )


def probe_toolchain(
    sandbox: CompileSandbox, python: str = "python3", env: dict[str, str] | None = None
) -> Toolchain:
    """Ask the sandbox's own toolchain for its fingerprint (it is what builds the artifacts)."""
    run = sandbox.run(
        [python, "-m", "evalsvc.build.entry", "--fingerprint"], [], SandboxLimits(wall_seconds=120), env or {}
    )
    for line in reversed(run.output.strip().splitlines()):
        if line.startswith("{"):
            return Toolchain.model_validate_json(line)
    raise RuntimeError(f"toolchain probe failed (exit {run.exit_code}): {run.output[-2000:]}")
