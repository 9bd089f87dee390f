"""The untrusted side: a process that loads one candidate artifact and runs it on request.

It starts as a child of the warm template (torch already imported, CUDA not initialised), isolates
itself (new session, no network, rlimits, unprivileged uid, scrubbed environment), and only then
touches the candidate. Everything it reports is re-checked by the judge.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import os
import resource
import sys
import tempfile
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch

from evalsvc.core.rules import TORCH_COMPUTE_IN_FORWARD, at_runtime
from evalsvc.core.tasks import TaskSpec
from evalsvc.engine.codec import DTYPES, Arena, receive, send
from evalsvc.engine.commitment import chunk, foreign_parts, output_tensors, round_digests
from evalsvc.engine.messages import (
    Done,
    ErrorReply,
    FetchReply,
    FetchRequest,
    InputsRequest,
    PrepareRequest,
    ProfileReply,
    Ready,
    Request,
    RunReply,
    RunRequest,
    TimeGraphReply,
)
from evalsvc.engine.profiling import trace_calls
from evalsvc.engine.taskload import LoadedTask, exec_task, input_digest
from evalsvc.engine.timing import (
    LATE_GAP_US,
    LATE_TAIL_SHARE,
    LATE_TAIL_US,
    Probe,
    RoundTimer,
    measure_graph,
    tails_left,
    written_late,
)
from evalsvc.sandbox.isolation import (
    die_with_parent,
    drop_privileges,
    private_filesystem_view,
    unshare_network,
)
from evalsvc.sandbox.memory_bound import first_to_kill, join_memory_group
from evalsvc.sandbox.seccomp import REFERENCE_RULES, install_runner_filter
from evalsvc.sandboxed import triton_runtime
from evalsvc.sandboxed.reference_host import ReferenceServer
from evalsvc.sandboxed.runtime_checks import (
    OperatorTrace,
    TimerGuard,
    foreign_dispatch_modes,
)

_ON_CURRENT_STREAM = "launch on the current stream (torch.cuda.current_stream) or synchronize"
# The runner's first message: isolated and warm, no candidate code run.
READY: Ready = {"ok": True, "op": "ready"}


@dataclass(frozen=True)
class RunnerSetup:
    scratch: str
    device: str
    isolate: bool
    memory_bytes: int
    uid: int  # isolation.runner_uid(device)
    nofile: int = 256
    nproc: int = 512
    cover: str | None = None
    fsize_bytes: int = 256 * 1024 * 1024
    reference: bool = False  # a task's code (reference_host.py), not a candidate's
    memory_group: str | None = None  # memory_bound.prepare_memory_group's cgroup for this uid


class CandidateError(Exception):
    """The candidate failed in a way the judge reports as its runtime error."""


class InputsDiffer(Exception):
    """The inputs this process made from the judge's seed are not the judge's (a task whose get_inputs
    does not reproduce from the seed here): the judge then sends them."""


class Forbidden(Exception):
    """The candidate did something the rules refuse; `rule` names the check."""

    def __init__(self, message: str, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


def _isolate(setup: RunnerSetup) -> str:
    """Cut the process off; returns the directory it works in (its only writable place)."""
    os.setsid()
    die_with_parent()
    log = os.open(os.path.join(setup.scratch, "candidate.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    limits = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NOFILE, setup.nofile),
        (resource.RLIMIT_FSIZE, setup.fsize_bytes),
    ]
    # CUDA reserves huge virtual ranges, so a CUDA runner is bounded by its writable data instead.
    limits.append((resource.RLIMIT_AS if setup.device == "cpu" else resource.RLIMIT_DATA, setup.memory_bytes))
    if setup.isolate:
        limits.append((resource.RLIMIT_NPROC, setup.nproc))
    for res, value in limits:
        resource.setrlimit(res, (value, value))
    if setup.isolate:
        first_to_kill()
        if setup.memory_group:
            join_memory_group(setup.memory_group)
        for root, dirs, files in os.walk(setup.scratch):
            for name in dirs + files:
                os.chown(os.path.join(root, name), setup.uid, setup.uid)
        os.chown(setup.scratch, setup.uid, setup.uid)
        unshare_network()
        workdir = private_filesystem_view(setup.scratch, setup.cover) if setup.cover else setup.scratch
        drop_privileges(setup.uid)
    else:
        workdir = setup.scratch
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update(runner_environment(workdir))
    tempfile.tempdir = workdir  # the template computed its own before TMPDIR changed (Inductor writes there)
    keep_freed_memory()
    return workdir


def runner_environment(workdir: str) -> dict[str, str]:
    """The whole environment a candidate (or a task) sees. The sandbox uid has no passwd entry, so the
    user name comes from here (getpass.getuser(), which torch._dynamo calls at import), and every cache
    torch or Triton would write under the user's home lands in the job's own scratch directory. Inductor
    compiles in this process, not in a pool of workers of its own."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "USER": "evalsvc-runner",
        "LOGNAME": "evalsvc-runner",
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(workdir, ".cache", "inductor"),
        "TRITON_CACHE_DIR": os.path.join(workdir, ".cache", "triton"),
        "XDG_CACHE_HOME": os.path.join(workdir, ".cache"),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
    }


def keep_freed_memory() -> None:
    """Fixed glibc heap thresholds: freed memory is reused, so poisoning before a call reaches the candidate's
    allocations, and a tensor's pages are not faulted in afresh on each call in one process and reused in
    another (the dynamic mmap threshold follows a process's allocation history; docs/performance.md)."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD (glibc's maximum)
    except (OSError, AttributeError):
        pass


class Candidate:
    """The loaded solution: its ModelNew instance and the libraries it was built with."""

    def __init__(self, artifact: Path, device: torch.device) -> None:
        self.artifact = artifact
        self.device = device
        self.manifest = _read_manifest(artifact)
        self.model: torch.nn.Module | None = None

    def load(self, init_inputs: list[Any], state_dict: dict[str, torch.Tensor]) -> None:
        from evalsvc.compiler.toolchain import runtime_toolchain_view

        tc = self.manifest["toolchain"]
        built = (tc["python"], tc["torch"], tc["torch_cuda"], tc["machine"])
        if tuple(built) != runtime_toolchain_view():
            raise CandidateError(f"artifact was built for {built}, this runner is {runtime_toolchain_view()}")
        self._install_loader_hooks()
        triton_runtime.prepare(self.manifest, self.artifact, self.device.type)  # Triton: interpreter or cache
        src = self.artifact / "src"
        sys.path.insert(0, str(src))
        if self.manifest["format"] == "cuda_agent":
            sys.modules["cuda_extension"] = self._load_library("cuda_extension", "cuda_extension")
        module = _import_file("solution_module", src / self.manifest["entry"])
        model_cls = getattr(module, "ModelNew", None)
        if not isinstance(model_cls, type) or not issubclass(model_cls, torch.nn.Module):
            raise CandidateError("the solution defines no ModelNew(nn.Module)")
        model = model_cls(*init_inputs)
        try:
            model.load_state_dict(state_dict, strict=True)
        except RuntimeError as e:
            raise CandidateError(f"ModelNew's parameters do not match Model's: {e}"[:2000]) from None
        self.model = model.to(self.device).eval()

    def _load_library(self, key: str, name: str) -> Any:
        rel = self.manifest["extensions"].get(key)
        if rel is None:
            raise Forbidden(
                "the solution asked for an extension that was not built at compile time "
                "(sources are not static)",
                "sources_not_static",
            )
        spec = importlib.util.spec_from_file_location(name, self.artifact / rel)
        if spec is None or spec.loader is None:
            raise CandidateError(f"cannot load extension {name}")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    def _install_loader_hooks(self) -> None:
        """load_inline returns the prebuilt library for the same call; this process never compiles."""
        import torch.utils.cpp_extension as cx

        from evalsvc.compiler.inline import normalize_call

        def load_inline(*args: Any, **kwargs: Any) -> Any:
            call = normalize_call(args, kwargs)
            return self._load_library(call.key, call.name)

        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise Forbidden("compiling at run time is not allowed", "runtime_compile")

        cx.load_inline = load_inline
        cx.load = refuse

    def forward(self, *inputs: Any) -> Any:
        assert self.model is not None
        with torch.no_grad():
            return self.model(*inputs)


def _task_or_none(spec_json: str | None) -> LoadedTask | None:
    """The task module, run here so the runner can make inputs itself; None when it cannot be (the judge
    then sends every input set)."""
    if not spec_json:
        return None
    try:
        return exec_task(TaskSpec.model_validate_json(spec_json))
    except Exception:
        return None


def _read_manifest(artifact: Path) -> dict[str, Any]:
    import json

    return json.loads((artifact / "manifest.json").read_text())


def _import_file(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CandidateError(f"cannot import {path.name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def check_output(output: Any, inputs: list[Any]) -> None:
    """Outputs must be plain dense tensors that do not share memory with the inputs."""
    if (foreign := foreign_parts(output)) and isinstance(output, torch.Tensor | list | tuple):
        raise Forbidden(
            f"forward returned a {', '.join(sorted(set(foreign)))}: outputs must be plain tensors, or plain "
            "lists or tuples of them",
            "output_not_plain_tensor",
        )
    outs = output_tensors(output)
    if not outs or foreign:
        raise CandidateError(f"forward returned {type(output).__name__}, not tensors")
    in_ptrs = {t.untyped_storage().data_ptr() for t in output_tensors(inputs) if t.numel()}
    for t in outs:
        if type(t) is not torch.Tensor or t.layout != torch.strided:
            raise Forbidden(
                f"output is a {type(t).__name__} with layout {t.layout}, not a plain dense tensor",
                "output_not_plain_tensor",
            )
        if t.numel() and t.untyped_storage().data_ptr() in in_ptrs:
            raise Forbidden("output shares memory with an input", "output_aliases_input")


def _modified(pristine: list[Any], inputs: list[Any], device: torch.device) -> bool:
    """Compared here rather than shipped back to the judge: a trial moves each input once, not twice.
    (The judge trusts this no less than inputs sent back by this same process.)"""
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # writes still in flight on any stream land first
    return any(
        isinstance(b, torch.Tensor) and not (isinstance(a, torch.Tensor) and torch.equal(b, a))
        for b, a in zip(pristine, inputs, strict=True)
    )


def _poison(device: torch.device, nbytes: int) -> None:
    """Fill memory the allocator will hand out next with NaN bytes, so unwritten outputs show."""
    if nbytes <= 0:
        return
    block = torch.empty(nbytes, dtype=torch.uint8, device=device)
    block.fill_(0xFF)
    del block


class Server:
    def __init__(self, conn: Any, device: torch.device, workdir: str, arena: Arena | None) -> None:
        self.workdir = Path(workdir)
        self.conn = conn
        self.arena = arena
        self.device = device
        self.candidate: Candidate | None = None
        self.task: LoadedTask | None = None  # makes the inputs from the judge's seeds, on this device
        self.timer_guard = TimerGuard()  # taken before any candidate code runs
        self._tampered = self.timer_guard.tampered  # bound now: replacing the class's method later is seen
        self.trace = OperatorTrace()  # around every call of the candidate, checked or timed alike
        self.timer: RoundTimer | None = None  # runs the rounds of timed calls
        self.null_outputs: list[torch.Tensor] = []  # what the null candidate returns
        self.kept: list[Any] = []  # the last round's outputs, until the judge has checked what it wants
        self.probes: list[Probe] = []  # every probe of the candidate's rounds so far

    def handle(self, msg: Request) -> Mapping[str, Any]:
        """The judge's request (messages.py), answered; a failure raises (`serve` answers it). A round's
        message and answer stay plain dicts (`_round`)."""
        op = msg["op"]
        if msg["op"] == "prepare":
            return self._prepare(msg)
        if msg["op"] == "round" and msg.get("subject") == "null":
            return self._round(self._null_forward, cast(dict[str, Any], msg))
        if msg["op"] == "fetch":
            return self._fetch(msg)
        if msg["op"] == "load":
            self.candidate = Candidate(self.workdir / "artifact", self.device)
            self.candidate.load(msg["init_inputs"], msg["state_dict"])
            if self.timer_guard.registrations_changed():
                raise Forbidden(
                    "loading the candidate registered kernels over existing operators (TORCH_LIBRARY_IMPL "
                    "or torch.library): the runner's own work calls them",
                    "timer_tampered",
                )
            return Done(ok=True)
        assert self.candidate is not None
        if msg["op"] == "run":
            return self._run(self.candidate, msg)
        if msg["op"] == "round":
            return self._round(self.candidate.forward, cast(dict[str, Any], msg))
        if msg["op"] == "profile":  # after the timed runs, never instead of them; the judge only displays it
            trace = trace_calls(self.candidate.forward, msg["inputs"], self.device, int(msg.get("runs", 3)))
            return ProfileReply(ok=True, trace=trace.model_dump())
        if msg["op"] == "time_graph":
            stats = measure_graph(self.candidate.forward, self._inputs(msg), self.device)
            return TimeGraphReply(ok=True, stats=stats.model_dump())
        raise ValueError(f"unknown op {op!r}")

    def _prepare(self, msg: PrepareRequest) -> Done:
        """Before the candidate is imported: the task's precision, the task itself where this process makes
        its inputs from the judge's seeds (proved on a few seeds here), and the null candidate the judge
        calibrates the runner's own cost with."""
        if self.device.type == "cuda":
            _load_check_kernels(self.device)
        torch.backends.cuda.matmul.allow_tf32 = bool(msg.get("tf32", False))
        torch.backends.cudnn.allow_tf32 = bool(msg.get("tf32", False))
        self.task = _task_or_none(msg.get("task"))
        if "seeds" in msg:
            self._pool(msg["seeds"], msg["digests"])
        self.timer = RoundTimer(self.device, int(msg["flush_bytes"]))
        self.timer_guard.task_loaded()
        # The shapes and dtypes of the reference's outputs, which the null candidate writes afresh every call.
        self.null_outputs = [
            torch.ones(shape, dtype=DTYPES[dtype], device=self.device) for shape, dtype in msg["outputs"]
        ]
        return Done(ok=True)

    def _null_forward(self, *inputs: Any) -> list[torch.Tensor]:
        """A candidate that only writes its outputs: what is left of a round is the runner's own work per
        call. Fresh ones, as any candidate's are: reusing one set costs less (docs/performance.md)."""
        return [torch.ones_like(t) for t in self.null_outputs]

    def _run(self, candidate: Candidate, msg: RunRequest) -> RunReply:
        """One checked call: poisoned memory before it, its inputs compared after it."""
        inputs = self._inputs(msg)
        pristine = [a.clone() if isinstance(a, torch.Tensor) else a for a in inputs]  # before poisoning
        _poison(self.device, msg.get("poison_bytes", 0))
        with self.trace:
            out = candidate.forward(*inputs)
        check_output(out, inputs)
        if self.device.type == "cuda" and written_late(out):
            raise Forbidden(
                "work on another stream was still writing the output when forward returned; "
                "launch on the current stream (torch.cuda.current_stream) or synchronize",
                "side_stream_work",
            )
        self._refuse_torch_compute()
        self._refuse_tampering()
        if _modified(pristine, inputs, self.device):
            raise Forbidden("the candidate modified its input tensors", "inputs_modified")
        reply = RunReply(ok=True, output=out)
        if tunings := triton_runtime.take_tuned():
            reply["autotune"] = tunings
        return reply

    def _round(self, forward: Any, msg: dict[str, Any]) -> dict[str, Any]:
        """A round of timed calls (timing.RoundTimer.run), each on inputs of its own: sent by the judge, or
        made here from the judge's fresh seeds right before the call. Answered with every call's time as
        measured here, a digest of every chunk of every output (commitment.py) and what the round's probes
        found left running; the outputs are kept for `fetch`. The candidate's probes are judged together,
        the null candidate's (the runner's own work) never."""
        assert self.timer is not None
        self.kept = []
        sets = msg["sets"] if "sets" in msg else (self._made(int(s)) for s in msg["seeds"])
        self._refuse_tampering()
        done = self.timer.run(forward, sets, lambda: self.trace)
        self._refuse_tampering()
        if done.late_writes:
            raise Forbidden(
                "a probed timed call's output was still being written by work on another stream after "
                "forward returned, so the current stream's events did not time it; " + _ON_CURRENT_STREAM,
                "side_stream_work",
            )
        if msg.get("subject") != "null":
            self.probes.extend(done.probes)
        if found := tails_left(self.probes):
            waits = ", ".join(f"{p.tail_us:.0f}/{p.gap_us:.0f}" for p in self.probes)
            raise Forbidden(
                f"{found} of {len(self.probes)} probed timed calls left work running after forward returned "
                f"(µs a device-wide sync waited beyond an idle one / µs a one-block kernel queued after the "
                f"call started late: {waits}; beyond {LATE_TAIL_US:.0f} / {LATE_GAP_US:.0f} µs or "
                f"{LATE_TAIL_SHARE:.0%} of the call is late work), so the events on the current stream did "
                "not time it; " + _ON_CURRENT_STREAM,
                "side_stream_work",
            )
        self._refuse_torch_compute()
        for out in done.outputs:
            check_output(out, [])
        self.kept = done.outputs
        digests, nbytes = round_digests(done.outputs)
        return {
            "ok": True,
            "samples_ms": done.samples_ms,
            "digests": digests,
            "nbytes": nbytes,
            "probes_us": [(p.tail_us, p.gap_us) for p in done.probes],
        }

    def _refuse_tampering(self) -> None:
        if tampered := self._tampered():
            names = ", ".join(tampered[:6]) + (f" and {len(tampered) - 6} more" if len(tampered) > 6 else "")
            raise Forbidden(f"the timing path was replaced: {names}", "timer_tampered")
        if modes := foreign_dispatch_modes():
            raise Forbidden(
                f"dispatch modes left on the stack outside the runner's trace: {', '.join(modes)}",
                "timer_tampered",
            )

    def _made(self, seed: int) -> list[Any]:
        if self.task is None:
            raise InputsDiffer("the task could not be loaded here")
        return self.task.make_inputs(seed, self.device)

    def _fetch(self, msg: FetchRequest) -> FetchReply:
        """Chunks of the last round's outputs that the judge picked after the round's answer."""
        chunks = []
        for call, tensor, index in msg["picks"]:
            outs = output_tensors(self.kept[int(call)]) if 0 <= int(call) < len(self.kept) else []
            t = outs[int(tensor)] if 0 <= int(tensor) < len(outs) else None
            chunks.append(chunk(t, int(index)).cpu() if t is not None else torch.empty(0, dtype=torch.uint8))
        return FetchReply(ok=True, chunks=chunks)

    def _refuse_torch_compute(self) -> None:
        if forbidden := self.trace.forbidden():
            raise Forbidden(
                f"forward ran torch operators {', '.join('aten.' + n for n in forbidden)} "
                "(seen at the dispatcher); the output must come from the solution's own kernels",
                at_runtime(TORCH_COMPUTE_IN_FORWARD),
            )

    def _inputs(self, msg: InputsRequest) -> list[Any]:
        """The message's inputs, or the ones its seed makes here (checked against the judge's digest)."""
        if "inputs" in msg:
            return msg["inputs"]
        return self._pool([msg["seed"]], [msg["digest"]])[0]

    def _pool(self, seeds: list[int], digests: list[Any]) -> list[list[Any]]:
        if self.task is None:
            raise InputsDiffer("the task could not be loaded here")
        try:
            made = [self.task.make_inputs(int(s), self.device) for s in seeds]
        except Exception as e:  # the task's own code failed here: the judge sends what it made instead
            raise InputsDiffer(f"making the inputs here failed: {type(e).__name__}: {e}"[:300]) from None
        if [input_digest(m) for m in made] != list(digests):
            raise InputsDiffer("the inputs made here from the seed differ from the judge's")
        return made

    def serve(self) -> None:
        while True:
            try:
                msg = receive(self.conn, map_location=self.device, arena=self.arena, in_place=True)
            except EOFError:
                return
            if msg["op"] == "exit":
                return
            reply: Mapping[str, Any]
            try:
                reply = self.handle(msg)
            except InputsDiffer as e:
                reply = ErrorReply(ok=False, kind="inputs_differ", error=str(e))
            except Forbidden as e:
                reply = ErrorReply(ok=False, kind="forbidden", error=str(e), rule=e.rule)
            except CandidateError as e:
                reply = ErrorReply(ok=False, kind="runtime_error", error=str(e))
            except BaseException as e:  # the candidate's own exceptions, SystemExit included
                tb = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-4))
                reply = ErrorReply(ok=False, kind="runtime_error", error=tb[-3000:])
            if triton_runtime.refused:  # a refused launch stands, whatever the candidate did with the error
                rule, why = triton_runtime.refused[0]
                reply = ErrorReply(ok=False, kind="forbidden", error=why, rule=rule)
            send(self.conn, reply, self.arena)


def cpu_device_threads() -> None:
    """One thread for everything timed on the CPU device, candidate (torch's pool and OpenMP teams alike)
    and baselines: a parallel region waits for threads preempted on a shared host (docs/performance.md)."""
    torch.set_num_threads(1)


def _create_context(device: torch.device) -> None:
    """The CUDA context, before any message, so that a spare runner has it ready (set_device alone creates
    none on device 0). No kernel: a start may run beside another evaluation's timing (docs/performance.md)."""
    torch.empty(1, device=device)
    torch.cuda.synchronize(device)


def _load_check_kernels(device: torch.device) -> None:
    """Load the kernels the runner's own checks use, at the first load (inside the evaluation's share of
    the device, never beside a timing)."""
    a = torch.zeros(1024, device=device)
    torch.equal(a, a.clone().fill_(1.0))
    torch.cuda.synchronize(device)


def runner_main(conn: Any, setup: RunnerSetup, arena: Arena | None) -> None:
    """Entry point in the child process."""
    workdir = _isolate(setup)
    device = torch.device(setup.device)
    if device.type == "cuda":
        device = torch.device("cuda", device.index or 0)  # set_device refuses a bare "cuda"
        torch.cuda.set_device(device)
        _create_context(device)
    else:
        cpu_device_threads()
        os.environ["OMP_NUM_THREADS"] = "1"  # the candidate's own OpenMP teams too
    # What every load_inline solution imports, here rather than in the forkserver (launcher.PRELOAD says
    # why): a spare runner does it before its evaluation begins.
    importlib.import_module("torch.utils.cpp_extension")
    if setup.reference:  # its torch.compile runs a compiler: processes and programs, no socket
        install_runner_filter(REFERENCE_RULES)
        send(conn, READY)
        ReferenceServer(conn, device, arena).serve()
        os._exit(0)
    # Last step of the start, before any task or candidate code: no process, program, signal or socket.
    install_runner_filter()

    send(conn, READY)
    Server(conn, device, workdir, arena).serve()
    os._exit(0)
