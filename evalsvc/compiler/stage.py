"""The compile stage: a solution in, an artifact (or the compiler's diagnostics) out, cached by content.

Runs on the trusted side. For a KernelBench file it asks a sandbox to capture the solution's load_inline
calls (the only step that runs the candidate's Python); it checks their flags, splits each call's sources
into the candidate's own translation units and bindings it generates itself (bindings.py), screens the
candidate's sources as written and preprocessed, writes the build job, and asks a fresh sandbox to build
it (no candidate code runs there). Then it screens the candidate's own objects by what they link to and
what their code does (symbol_screen.py) and files the artifact. Everything the verdict rests on is
written here: the sources, the flags, what the objects are; what a job writes is read as data, bounded,
and a missing or unreadable piece is a refusal, never an empty pass. A cache hit starts no sandbox and is
screened again (rules change).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from evalsvc.compiler.bindings import AGENT_ENV_FILES, BindingError, split_agent_tree, split_inline
from evalsvc.compiler.entry import (
    AGENT_ENV,
    REPORT_MAX_BYTES,
    BuildReport,
    CaptureReport,
    ExtensionReport,
    ExtensionSpec,
    JobSpec,
    summarize,
)
from evalsvc.compiler.fast_path import version as fast_path_version
from evalsvc.compiler.flags import check_flags
from evalsvc.compiler.inline import InlineCall
from evalsvc.compiler.preprocess import PreprocessError, preprocess
from evalsvc.compiler.static_capture import static_calls
from evalsvc.compiler.symbol_screen import screen_objects
from evalsvc.compiler.toolchain import Toolchain
from evalsvc.compiler.triton_aot import CACHE as TRITON_CACHE
from evalsvc.compiler.triton_aot import REPORT as TRITON_REPORT
from evalsvc.compiler.triton_aot import TritonJobReport
from evalsvc.core.hashing import content_hash
from evalsvc.core.results import CompileReport, Finding, Status, TritonCompile
from evalsvc.core.solutions import TRITON, Solution, SolutionFormat
from evalsvc.core.tasks import TaskSpec
from evalsvc.sandbox.base import CompileSandbox, Mount, SandboxLimits, SandboxRun
from evalsvc.screening.checks import check_native, check_python, inline_flags, inline_sources
from evalsvc.store.artifacts import ArtifactStore

MAX_SOURCES_BYTES = 8 * 1024 * 1024
MAX_OBJECT_BYTES = 64 * 1024 * 1024
CAPTURE_SECONDS = 180.0  # importing torch and the solution twice
TRITON_SECONDS = 240.0  # importing torch and triton, one traced forward, Triton's compiles
MAX_TRITON_CACHE_BYTES = 64 * 1024 * 1024
# Part of every artifact key: bump it when the way sources become a library changes (flags, PCH use),
# so cached builds and cached compile errors of the old recipe are not served.
BUILD_RECIPE = "5"  # 5: built against the torch stand-in first (fast_path.py), as written where that fails
AGENT_CFLAGS = ["-O3"]  # CUDA Agent's -std=c++17 is gone: torch's headers now require C++20 (torch sets it)
AGENT_CUDA_CFLAGS = ["-O3", "--use_fast_math"]
SCREENS = frozenset({"sources", "objects"})
M = TypeVar("M", bound=BaseModel)


class Manifest(BaseModel):
    """What the runner needs to load an artifact; written by the trusted side only."""

    key: str
    format: str
    entry: str
    toolchain: Toolchain
    cuda_arch: str
    extensions: dict[str, str]  # load_inline call key -> library path in the artifact
    objects: dict[str, str] = {}  # the candidate's own unit (display name) -> its object in the artifact
    report: CompileReport


@dataclass
class CompileOutcome:
    status: Status  # OK, COMPILE_ERROR, FORBIDDEN, TIMEOUT or INTERNAL_ERROR
    report: CompileReport
    artifact_key: str | None
    findings: list[Finding]
    message: str | None = None


@dataclass
class BuildPlan:
    """What the build job gets, all of it decided here."""

    extensions: list[ExtensionSpec] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # JOB/src path -> text
    own: dict[str, str] = field(default_factory=dict)  # display name -> the candidate's own unit
    own_flags: dict[str, list[str]] = field(default_factory=dict)  # display name -> its compiler flags
    names: dict[str, str] = field(default_factory=dict)  # JOB/src path of an own unit -> display name


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
        # The screens: "sources" (Python, C++ as written and preprocessed, flags) and "objects" (what the
        # built objects link to and do). Tests turn them off to prove the sandboxes, the object screen or
        # the judge hold alone.
        self.screens: frozenset[str] = SCREENS
        # Build against the torch stand-in first (fast_path.py); off: every extension as written.
        self.fast_path = True

    def artifact_key(self, solution: Solution, task: TaskSpec | None = None) -> str:
        if solution.kind == TRITON:  # which kernels are compiled ahead depends on the task's inputs
            task_id = task.id if task is not None else None
            return "a_" + content_hash(solution.id, self.toolchain.hash, TRITON, task_id, BUILD_RECIPE)
        return "a_" + content_hash(solution.id, self.toolchain.hash, self.cuda_arch, self._recipe)

    @property
    def _recipe(self) -> str:
        # A changed stand-in or bridge makes other libraries: ones built before are not served (red team 8).
        return f"{BUILD_RECIPE}-{fast_path_version()}" if self.fast_path else BUILD_RECIPE + "-full"

    def compile(
        self, solution: Solution, allow_vendor_libs: bool = False, task: TaskSpec | None = None
    ) -> CompileOutcome:
        """Screen, then build (or find the build in the store), then screen what was built.

        The Python checks need no build, so a refused solution costs no container. The native checks read
        the C++/CUDA the solution really hands to load_inline (captured in a sandbox), as written and
        preprocessed; the objects are screened by their symbols and code.
        """
        if "sources" in self.screens and (findings := screen_sources(solution, allow_vendor_libs)):
            return _refused(findings)
        key = self.artifact_key(solution, task)
        cached = self._cached(key, allow_vendor_libs)
        if cached is not None:
            return cached
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="evalsvc-job-") as tmp:
            root = Path(tmp)
            root.chmod(0o755)
            if solution.kind == TRITON:
                return self._compile_triton(solution, key, task, root, start)
            plan = self._plan(solution, root, allow_vendor_libs, start)
            if isinstance(plan, CompileOutcome):
                return plan
            return self._build(solution, key, plan, root, start, allow_vendor_libs)

    def _cached(self, key: str, allow_vendor_libs: bool) -> CompileOutcome | None:
        with tempfile.TemporaryDirectory(prefix="evalsvc-cached-") as tmp:
            artifact = Path(tmp)
            if not self.store.fetch(key, artifact):
                return None
            manifest = Manifest.model_validate_json((artifact / "manifest.json").read_text())
            report = manifest.report.model_copy(update={"cached": True, "duration_s": 0.0})
            if not report.ok:
                return CompileOutcome(Status.COMPILE_ERROR, report, None, [], _first_error(report))
            outcome = CompileOutcome(Status.OK, report, key, [])
            if manifest.format == TRITON:  # no native objects: the Python screen already ran
                return outcome
            return self._screen_built(outcome, artifact, manifest.objects, allow_vendor_libs)

    # -- Triton: the kernels one traced forward launches, compiled ahead (triton_aot.py) --------------
    def _compile_triton(
        self, solution: Solution, key: str, task: TaskSpec | None, root: Path, start: float
    ) -> CompileOutcome:
        spec = JobSpec(
            format=solution.format.value,
            entry=solution.entry,
            cuda_arch=self.cuda_arch,
            task_source=task.source if task is not None else None,
        )
        limits = _with_wall(self.limits, TRITON_SECONDS)
        run, out = self._run_job("triton", root / "triton", spec, solution.files, limits, with_pch=False)
        duration = time.monotonic() - start
        if run.timed_out:
            report = CompileReport(ok=False, duration_s=duration, log_excerpt=run.output[-4000:])
            limit = f"compiling the Triton kernels exceeded {limits.wall_seconds:.0f} s"
            return CompileOutcome(Status.TIMEOUT, report, None, [], limit)
        job = _read_model(out / TRITON_REPORT, TritonJobReport)
        if job is None:
            msg = "the Triton compile job " + ("ran out of memory" if run.oom_killed else "failed")
            report = CompileReport(ok=False, duration_s=duration, log_excerpt=run.output[-4000:])
            return CompileOutcome(Status.COMPILE_ERROR, report, None, [], f"{msg} (exit {run.exit_code})")
        triton = TritonCompile.model_validate(job.model_dump(include=set(TritonCompile.model_fields)))
        report = CompileReport(
            ok=job.ok,
            duration_s=duration,
            diagnostics=job.diagnostics[:50],
            log_excerpt=(job.message or "")[-4000:] if not job.ok else "",
            triton=triton,
        )
        artifact = root / "artifact"
        artifact.mkdir()
        if job.ok and not _copy_tree(out / TRITON_CACHE, artifact / TRITON_CACHE, MAX_TRITON_CACHE_BYTES):
            report.ok = False
            report.log_excerpt = "the Triton compile job left an unreadable or oversized cache"
        report.artifact_key = key if report.ok else None
        _write_files(artifact / "src", solution.files)
        manifest = Manifest(
            key=key,
            format=TRITON,
            entry=solution.entry,
            toolchain=self.toolchain,
            cuda_arch=self.cuda_arch,
            extensions={},
            report=report,
        )
        (artifact / "manifest.json").write_text(manifest.model_dump_json())
        self.store.put(key, artifact)
        if not report.ok:
            return CompileOutcome(Status.COMPILE_ERROR, report, None, [], _first_error(report))
        return CompileOutcome(Status.OK, report, key, [])

    # -- planning: what gets built, decided on the trusted side ---------------------------------------
    def _plan(
        self, solution: Solution, root: Path, allow_vendor_libs: bool, start: float
    ) -> BuildPlan | CompileOutcome:
        if solution.format is SolutionFormat.CUDA_AGENT:
            plan = _plan_agent(solution)
        else:
            # Read from the text where that is exact (static_capture.py), else imported in the sandbox.
            static = static_calls(solution.files[solution.entry]) if self.fast_path else None
            calls = static if static is not None else self._capture(solution, root, start)
            if isinstance(calls, CompileOutcome):
                return calls
            plan = self._plan_inline(calls, allow_vendor_libs)
        if isinstance(plan, CompileOutcome) or "sources" not in self.screens:
            return plan
        findings = _screen_own(plan, allow_vendor_libs)
        return _refused(findings) if findings else plan

    def _capture(self, solution: Solution, root: Path, start: float) -> list[InlineCall] | CompileOutcome:
        """The solution's load_inline calls, from a sandbox that imports it (twice) and builds nothing."""
        spec = JobSpec(format=solution.format.value, entry=solution.entry, cuda_arch=self.cuda_arch)
        limits = _with_wall(self.limits, CAPTURE_SECONDS)
        run, out = self._run_job("capture", root / "capture", spec, solution.files, limits, with_pch=False)
        duration = time.monotonic() - start
        if run.timed_out:
            report = CompileReport(ok=False, duration_s=duration, log_excerpt=run.output[-4000:])
            return CompileOutcome(
                Status.TIMEOUT,
                report,
                None,
                [],
                f"importing the solution exceeded {limits.wall_seconds:.0f} s",
            )
        captured = _read_model(out / "capture.json", CaptureReport)
        if captured is None:
            msg = (
                "the solution's import ran out of memory"
                if run.oom_killed
                else "importing the solution failed"
            )
            report = CompileReport(ok=False, duration_s=duration, log_excerpt=run.output[-4000:])
            return CompileOutcome(Status.COMPILE_ERROR, report, None, [], f"{msg} (exit {run.exit_code})")
        if not captured.ok:
            report = CompileReport(
                ok=False, duration_s=duration, log_excerpt=(captured.message or "")[-4000:]
            )
            if captured.not_static:
                finding = Finding(rule="non_static_sources", message=captured.message or "")
                return CompileOutcome(Status.FORBIDDEN, report, None, [finding], captured.message)
            return CompileOutcome(Status.COMPILE_ERROR, report, None, [], _last_line(captured.message))
        return captured.calls

    def _plan_inline(self, calls: list[InlineCall], allow_vendor_libs: bool) -> BuildPlan | CompileOutcome:
        plan = BuildPlan()
        flag_findings: list[Finding] = []
        for call in calls:
            if "sources" in self.screens:
                flag_findings += check_flags(
                    call.extra_cflags, call.extra_cuda_cflags, call.extra_ldflags, allow_vendor_libs
                )
            try:
                split = split_inline(call)
            except BindingError as e:
                return CompileOutcome(
                    Status.COMPILE_ERROR, CompileReport(ok=False, log_excerpt=str(e)), None, [], str(e)
                )
            own = [f"{call.key}/{rel}" for rel in split.own]
            binding = [f"{call.key}/{rel}" for rel in split.binding]
            for rel, text in [*split.own.items(), *split.binding.items()]:
                plan.files[f"{call.key}/{rel}"] = text
            for rel, text in split.own.items():
                name = f"{call.name}/{rel}"
                plan.names[f"{call.key}/{rel}"] = name
                plan.own[name] = text
                plan.own_flags[name] = call.extra_cuda_cflags if rel.endswith(".cu") else call.extra_cflags
            plan.extensions.append(
                ExtensionSpec(
                    key=call.key,
                    name=call.name,
                    own=own,
                    binding=binding,
                    cflags=call.extra_cflags,
                    cuda_cflags=call.extra_cuda_cflags,
                    ldflags=call.extra_ldflags,
                    with_cuda=call.uses_cuda,
                )
            )
        return _refused(flag_findings) if flag_findings else plan

    # -- building: one sandbox, no candidate code, then the objects screened --------------------------
    def _build(
        self,
        solution: Solution,
        key: str,
        plan: BuildPlan,
        root: Path,
        start: float,
        allow_vendor_libs: bool,
    ) -> CompileOutcome:
        """Extensions built before (same sources, flags and toolchain, whichever solution asked) come from
        the store; the rest from one build job."""
        outputs: dict[str, tuple[ExtensionReport, Path]] = {}
        for ext in plan.extensions:
            if (found := self._built_before(ext, plan, root / "built-before" / ext.key)) is not None:
                outputs[ext.key] = found
        missing = [ext for ext in plan.extensions if ext.key not in outputs]
        if missing:
            spec = JobSpec(
                format=solution.format.value,
                entry=solution.entry,
                cuda_arch=self.cuda_arch,
                timeout_s=max(5.0, self.limits.wall_seconds - 10),
                jobs=max(1, int(self.limits.cpus)),
                extensions=missing,
                fast_path=self.fast_path,
            )
            run, out = self._run_job("build", root / "build", spec, plan.files, self.limits, with_pch=True)
            if run.timed_out:
                report = CompileReport(
                    ok=False, duration_s=time.monotonic() - start, log_excerpt=run.output[-4000:]
                )
                limit = f"compilation exceeded {self.limits.wall_seconds:.0f} s"
                return CompileOutcome(Status.TIMEOUT, report, None, [], limit)
            build = _read_model(out / "report.json", BuildReport, REPORT_MAX_BYTES * 8)
            if (
                build is None
                or [e.key for e in build.extensions] != [e.key for e in missing][: len(build.extensions)]
            ):
                msg = (
                    "the compile job ran out of memory"
                    if run.oom_killed
                    else "the compile job ended without a report"
                )
                report = CompileReport(
                    ok=False, duration_s=time.monotonic() - start, log_excerpt=run.output[-4000:]
                )
                return CompileOutcome(Status.COMPILE_ERROR, report, None, [], f"{msg} (exit {run.exit_code})")
            for ext, rep in zip(missing, build.extensions, strict=False):
                outputs[ext.key] = (rep, out)
                if rep.ok and not rep.timed_out:
                    self._keep_built(ext, plan, rep, out, root / "keep" / ext.key)
        reports = [outputs[ext.key][0] for ext in plan.extensions if ext.key in outputs]
        ok = len(reports) == len(plan.extensions) and all(r.ok for r in reports)
        build = BuildReport(ok=ok, stage="build", extensions=reports)
        dirs = {k: d for k, (_, d) in outputs.items()}
        return self._file(solution, key, plan, build, dirs, root, time.monotonic() - start, allow_vendor_libs)

    def _extension_key(self, ext: ExtensionSpec, plan: BuildPlan) -> str:
        """What decides one extension's build: its spec, the text of every file it compiles (and, with
        include directories, every file it could include), the toolchain, the target and the recipe."""
        files = plan.files if ext.include_dirs else {r: plan.files[r] for r in [*ext.own, *ext.binding]}
        spec = ext.model_dump(mode="json")
        return "x_" + content_hash(spec, files, self.toolchain.hash, self.cuda_arch, self._recipe)

    def _built_before(
        self, ext: ExtensionSpec, plan: BuildPlan, where: Path
    ) -> tuple[ExtensionReport, Path] | None:
        if not self.store.fetch(self._extension_key(ext, plan), where):
            return None
        rep = _read_model(where / "report.json", ExtensionReport, REPORT_MAX_BYTES * 8)
        return (rep, where) if rep is not None and rep.ok and rep.key == ext.key else None

    def _keep_built(
        self, ext: ExtensionSpec, plan: BuildPlan, rep: ExtensionReport, out: Path, where: Path
    ) -> None:
        """One built extension (library, the candidate's objects, its report) into the store, laid out as
        the build job's OUT is, so that a later solution asking for the same build copies it alike."""
        src = out / "ext" / ext.key
        if not src.is_dir() or src.is_symlink():
            return
        shutil.copytree(src, where / "ext" / ext.key, symlinks=True)
        (where / "report.json").write_text(rep.model_dump_json())
        self.store.put(self._extension_key(ext, plan), where)

    def _file(
        self,
        solution: Solution,
        key: str,
        plan: BuildPlan,
        build: BuildReport,
        outs: dict[str, Path],
        root: Path,
        duration: float,
        allow_vendor_libs: bool,
    ) -> CompileOutcome:
        parts = summarize(build)
        report = CompileReport(
            ok=build.ok,
            duration_s=duration,
            log_excerpt=parts["log_excerpt"],
            diagnostics=parts["diagnostics"],
            resources=parts["resources"],
            light_headers=any(e.light_headers for e in build.extensions),
            **_fast_path_fields(build),
        )
        artifact = root / "artifact"
        artifact.mkdir()
        extensions: dict[str, str] = {}
        objects: dict[str, str] = {}
        for spec, ext in zip(plan.extensions, build.extensions, strict=False):
            copied = _copy_outputs(spec, ext, outs[spec.key], artifact, plan) if ext.ok else None
            if copied is None:
                continue
            extensions[ext.key] = copied[0]
            objects.update(copied[1])
        if build.ok and len(extensions) != len(plan.extensions):
            build.ok = report.ok = False  # a library or an object the job says it made is not there
            report.log_excerpt = (
                report.log_excerpt or "the compile job did not leave every library and object"
            )
        report.artifact_key = key if report.ok else None
        _write_files(artifact / "src", solution.files)
        (artifact / "sources.json").write_text(json.dumps(plan.own))
        manifest = Manifest(
            key=key,
            format=solution.format.value,
            entry=solution.entry,
            toolchain=self.toolchain,
            cuda_arch=self.cuda_arch,
            extensions=extensions,
            objects=objects,
            report=report,
        )
        (artifact / "manifest.json").write_text(manifest.model_dump_json())
        timed_out = any(e.timed_out for e in build.extensions)
        if not timed_out:  # deterministic outcomes only
            self.store.put(key, artifact)
        if timed_out:
            limit = f"compilation exceeded its time limit ({self.limits.wall_seconds:.0f} s)"
            return CompileOutcome(Status.TIMEOUT, report, None, [], limit)
        if not report.ok:
            return CompileOutcome(Status.COMPILE_ERROR, report, None, [], _first_error(report))
        outcome = CompileOutcome(Status.OK, report, key, [])
        return self._screen_built(outcome, artifact, objects, allow_vendor_libs)

    def _screen_built(
        self, outcome: CompileOutcome, artifact: Path, objects: dict[str, str], allow_vendor_libs: bool
    ) -> CompileOutcome:
        """The candidate's objects by their symbols and code, and its sources as kept in the artifact (both
        written by this side); an object that cannot be read is a refusal."""
        if "objects" not in self.screens:
            return outcome
        data: dict[str, bytes] = {}
        for name, rel in objects.items():
            path = artifact / rel
            ok = path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_OBJECT_BYTES
            data[name] = path.read_bytes() if ok else b""
        findings = []
        if "sources" in self.screens:
            sources = _read_sources(artifact / "sources.json")
            findings += [_evidence_missing()] if sources is None else check_native(sources, allow_vendor_libs)
        findings += screen_objects(data, allow_vendor_libs) if data else [_evidence_missing()]
        return _refused(findings, outcome.report) if findings else outcome

    def _run_job(
        self,
        command: str,
        where: Path,
        spec: JobSpec,
        files: dict[str, str],
        limits: SandboxLimits,
        with_pch: bool,
    ) -> tuple[SandboxRun, Path]:
        """One sandboxed job: JOB (spec and sources, read-only) and an empty OUT, its only writable place."""
        job, out = where / "job", where / "out"
        (job / "src").mkdir(parents=True)
        out.mkdir(parents=True)
        out.chmod(0o777)
        _write_files(job / "src", files)
        (job / "spec.json").write_text(spec.model_dump_json())
        for p in [where, *where.rglob("*")]:
            if p != out and out not in p.parents:
                p.chmod(0o755 if p.is_dir() else 0o644)
        mounts = [Mount(job, "/job", read_only=True), Mount(out, "/out", read_only=False)]
        env = dict(self.env)
        if with_pch and self.pch_dir is not None and self.pch_dir.is_dir():
            mounts.append(Mount(self.pch_dir, "/pch", read_only=True))
            env["EVALSVC_PCH_DIR"] = "/pch"
        argv = [self.python, "-m", "evalsvc.compiler.entry", command, "/job", "/out"]
        return self.sandbox.run(argv, mounts, limits, env), out


def _plan_agent(solution: Solution) -> BuildPlan | CompileOutcome:
    """A CUDA Agent tree: its kernels and the non-registration part of its binding files are its own; the
    registrations are generated; the environment's binding.cpp and registry header are ours."""
    native = {rel: text for rel, text in solution.files.items() if not rel.endswith(".py")}
    try:
        split = split_agent_tree(native)
    except BindingError as e:
        return CompileOutcome(
            Status.COMPILE_ERROR, CompileReport(ok=False, log_excerpt=str(e)), None, [], str(e)
        )
    plan = BuildPlan()
    plan.files = {**native, **split.own, **split.binding}
    plan.files.update({f: (AGENT_ENV / f).read_text() for f in AGENT_ENV_FILES})
    plan.own = dict(split.own)
    plan.names = {rel: rel for rel in split.own}
    plan.own_flags = {rel: AGENT_CUDA_CFLAGS if rel.endswith(".cu") else AGENT_CFLAGS for rel in split.own}
    units = [f for f in AGENT_ENV_FILES if f.endswith(".cpp")]
    plan.extensions.append(
        ExtensionSpec(
            key="cuda_extension",
            name="cuda_extension",
            own=sorted(split.own),
            binding=[*sorted(split.binding), *units],
            include_dirs=[".", "kernels"],
            cflags=AGENT_CFLAGS,
            cuda_cflags=AGENT_CUDA_CFLAGS,
            with_cuda=True,
        )
    )
    return plan


def _fast_path_fields(build: BuildReport) -> dict[str, Any]:
    """fast_path: true when every extension was built against the stand-in; else the first reason."""
    if not build.extensions:
        return {}
    reasons = [e.fast_path_reason or "built as written" for e in build.extensions if not e.fast_path]
    return {"fast_path": not reasons, "fast_path_reason": reasons[0][:400] if reasons else None}


def _copy_outputs(
    spec: ExtensionSpec, ext: Any, out: Path, artifact: Path, plan: BuildPlan
) -> tuple[str, dict[str, str]] | None:
    """The library and the candidate's objects of one extension, copied from the job's OUT into the
    artifact (regular files of bounded size only); None when any is missing."""
    want = [f"ext/{spec.key}/{spec.name}.so", *[f"ext/{spec.key}/obj/{i}.o" for i in range(len(spec.own))]]
    if ext.library != want[0] or ext.objects != want[1:]:
        return None
    for rel in want:
        src = out / rel
        if not src.is_file() or src.is_symlink() or src.stat().st_size > MAX_OBJECT_BYTES * 4:
            return None
        (artifact / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, artifact / rel)
    names = [plan.names[rel] for rel in spec.own]
    return want[0], dict(zip(names, want[1:], strict=True))


def _copy_tree(src: Path, dest: Path, max_bytes: int) -> bool:
    """A job's output directory into the artifact: regular files only, links and oversize refused."""
    dest.mkdir(parents=True, exist_ok=True)
    if not src.exists():
        return True  # nothing compiled ahead (no launch traced)
    if src.is_symlink() or not src.is_dir():
        return False
    total = 0
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_symlink() or not (path.is_dir() or path.is_file()):
            return False
        if path.is_dir():
            (dest / rel).mkdir(parents=True, exist_ok=True)
            continue
        total += path.stat().st_size
        if total > max_bytes:
            return False
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest / rel)
    return True


def _write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)


def _screen_own(plan: BuildPlan, allow_vendor_libs: bool) -> list[Finding]:
    """The candidate's own units, as written and as the preprocessor sees them (line splices joined,
    macros of the source and the flags expanded); a unit the preprocessor cannot take is read as written
    only (the symbol screen still reads what it compiles to)."""
    findings = check_native(plan.own, allow_vendor_libs)
    seen = {(f.rule, f.file, f.line) for f in findings}
    for name, text in plan.own.items():
        try:
            pre = preprocess(text, plan.own_flags.get(name, []), cuda=name.endswith(".cu"))
        except PreprocessError:
            continue
        for f in check_native({name: pre}, allow_vendor_libs):
            if (f.rule, f.file, f.line) not in seen:
                seen.add((f.rule, f.file, f.line))
                findings.append(f)
    return findings


def _with_wall(limits: SandboxLimits, seconds: float) -> SandboxLimits:
    from dataclasses import replace

    return replace(limits, wall_seconds=min(limits.wall_seconds, seconds))


def _evidence_missing() -> Finding:
    why = "the record of the candidate's sources or objects is missing or unreadable: refused, not passed"
    return Finding(rule="build-evidence", message=why, file="artifact", line=0)


def _refused(findings: list[Finding], report: CompileReport | None = None) -> CompileOutcome:
    found = list(findings)
    rules = sorted({f.rule for f in findings})
    first = findings[0]
    message = f"refused by static checks ({', '.join(rules)}) in {first.file}, {first.message}"
    return CompileOutcome(Status.FORBIDDEN, report or CompileReport(ok=False), None, found, message)


def screen_sources(solution: Solution, allow_vendor_libs: bool) -> list[Finding]:
    """The checks that need no build: the Python, and the C++/CUDA readable without running anything
    (string constants handed to load_inline, a CUDA Agent tree's files)."""
    python = {k: v for k, v in solution.files.items() if k.endswith(".py")}
    visible = {n: t for text in python.values() for n, t in inline_sources(text).items()}
    own = {k: v for k, v in solution.files.items() if not k.endswith(".py")}
    flags = [inline_flags(text) for text in python.values()]
    flag_findings = [
        f
        for fl in flags
        for f in check_flags(
            fl["extra_cflags"], fl["extra_cuda_cflags"], fl["extra_ldflags"], allow_vendor_libs
        )
    ]
    return check_python(python) or flag_findings or check_native(visible | own, allow_vendor_libs)


def _read_sources(path: Path) -> dict[str, str] | None:
    """The candidate's own sources as this side kept them in the artifact."""
    if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_SOURCES_BYTES * 4:
        return None
    try:
        data = json.loads(path.read_text(errors="replace"))
    except ValueError:
        return None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        return None
    return data


def _read_model(path: Path, model: type[M], max_bytes: int = MAX_SOURCES_BYTES * 4) -> M | None:
    """A job's JSON output as `model`; None when it is missing, a link, too large or malformed."""
    if not path.is_file() or path.is_symlink() or path.stat().st_size > max_bytes:
        return None
    try:
        return model.model_validate(json.loads(path.read_text(errors="replace")))
    except (ValidationError, ValueError):
        return None


def _last_line(message: str | None) -> str:
    lines = (message or "compilation failed").strip().splitlines()
    return lines[-1][:400] if lines else "compilation failed"


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
        [python, "-m", "evalsvc.compiler.entry", "--fingerprint"],
        [],
        SandboxLimits(wall_seconds=120),
        env or {},
    )
    for line in reversed(run.output.strip().splitlines()):
        if line.startswith("{"):
            return Toolchain.model_validate_json(line)
    raise RuntimeError(f"toolchain probe failed (exit {run.exit_code}): {run.output[-2000:]}")
