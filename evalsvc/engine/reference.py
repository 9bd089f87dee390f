"""The judge's handle on a task's code, which runs in a process of its own (reference_host.py).

`TaskProcesses` keeps one such process per task recently judged on this worker (starting one imports the
task and checks its inputs once); `Reference` is one evaluation's reference model in it, under the
evaluation's secret model seed. Every call holds the process's lock (one request at a time on its pipe)
and ends in data or `ReferenceFailed`; a process that failed is killed and never used again. A kept
process no evaluation is using is stopped (SIGSTOP to its process group, which it cannot leave: its
filter refuses setsid and setpgid), so nothing a task started runs beside another evaluation's timing.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import math
import os
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any, TypeVar

import torch
from pydantic import BaseModel

from evalsvc.core.pools import VetPolicy, VetRecord
from evalsvc.core.profiles import ReferenceProfile, TaskWork
from evalsvc.core.results import TimingStats
from evalsvc.core.tasks import InvalidTask, TaskSpec
from evalsvc.engine.baselines import BaselineCache, baseline_keys
from evalsvc.engine.codec import BadMessage
from evalsvc.engine.launcher import RunnerDied, RunnerHandle, RunnerLauncher, RunnerTimeout, processes_of
from evalsvc.engine.messages import LoadRequest
from evalsvc.engine.profiling import nbytes
from evalsvc.engine.timing import TimingPolicy

M = TypeVar("M", bound=BaseModel)
log = logging.getLogger("evalsvc.reference")

# Task processes kept per judge: the tasks judged last (a GPU worker's evaluations in flight are mostly of
# a few tasks; each process holds a CUDA context and its models).
KEPT_PROCESSES = 2
# A kept process no evaluation uses is closed, not kept, when it holds more than this on the host (its
# processes' resident memory, memory files, scratch files: a task held 960 MiB of memfds and 1 GiB of
# scratch files past the limits per process and per file, red team 12-05), or has been idle this long.
KEPT_FOOTPRINT_BYTES = 4 * 1024**3
KEPT_IDLE_S = 300.0
# torch.compile of a reference takes seconds to minutes (Inductor's C++ or Triton builds): its call gets
# this many times the load timeout; vetting (several compiles and timings) the same.
SLOW_CALL_FACTOR = 3


class ReferenceFailed(Exception):
    """The task's own code failed (raised, hung past the watchdog, died, or answered with what is not
    data): the task cannot be judged."""


class InputSet(list[Any]):
    """An input set made in the task's process, which still holds it under `seed` (no copy sent back)."""

    seed: int | None = None


class TaskProcess:
    """One task's process. Thread-safe: evaluations in flight side by side take turns on its pipe."""

    def __init__(self, handle: RunnerHandle, spec: TaskSpec, launcher: RunnerLauncher) -> None:
        self.handle = handle
        self.spec = spec
        self.limits = launcher.limits
        self.set_bytes = 0  # an input set's size, once one has been made: room for the next in the arena
        self.failed = False
        self.users = 0  # evaluations using it now
        self.stopped = False
        self.idle_since = time.monotonic()
        self._lock = threading.Lock()

    def hold(self) -> None:
        """One more evaluation uses it: it runs again if it was stopped."""
        with self._lock:
            self.users += 1
            if self.stopped:
                self._signal(signal.SIGCONT)
                self.stopped = False

    def let_go(self) -> None:
        """One evaluation less; with none left, stopped until the next, or given up (`failed`, closed by
        `TaskProcesses`) when it holds too much to keep."""
        with self._lock:
            self.users -= 1
            if self.users == 0 and not self.failed and not self.handle.closed:
                self._signal(signal.SIGSTOP)
                self.stopped = True
                self.idle_since = time.monotonic()
                held = footprint(self.handle)
                if held > KEPT_FOOTPRINT_BYTES:
                    log.warning("task process of %s holds %d MiB: not kept", self.spec.id, held >> 20)
                    self.failed = True

    def _signal(self, sig: int) -> None:
        pid = self.handle.proc.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)

    def request(self, msg: dict[str, Any], timeout_s: float = 0.0, reply_bytes: int = 0) -> dict[str, Any]:
        timeout_s = timeout_s or self.limits.call_timeout_s
        with self._lock:
            if self.failed:
                raise ReferenceFailed("the task's process failed earlier")
            try:
                reply = self.handle.request(msg, timeout_s, reply_bytes)
            except RunnerTimeout as e:
                raise self._fail(f"the task's code did not finish '{msg['op']}': {e}") from None
            except RunnerDied as e:
                raise self._fail(str(e).replace("candidate", "task")) from None
            except BadMessage as e:
                raise self._fail(f"the task's process sent what is not data: {e}") from None
            except Exception as e:  # the pipe is out of step after it: the process cannot be asked again
                log.exception("task process request %r failed", msg.get("op"))
                raise self._fail(f"the task's process broke the protocol: {type(e).__name__}") from None
        if not reply["ok"]:
            error = str(reply.get("error", "unknown error"))[:3000]
            if reply.get("kind") == "task_invalid":
                raise InvalidTask(error)
            if reply.get("kind") != "evicted":
                raise ReferenceFailed(f"the task's code failed in '{msg['op']}': {error}")
        return reply

    def _fail(self, message: str) -> ReferenceFailed:
        self.failed = True
        self.handle.kill()
        return ReferenceFailed(message)

    def close(self) -> None:
        with self._lock:
            if self.stopped:  # its exit message must be read: run again, then asked to exit
                self._signal(signal.SIGCONT)
                self.stopped = False
        self.handle.close()


class Reference:
    """One evaluation's reference: the task's Model built in the task's process from the evaluation's
    secret seed (its weights come back for the candidate's `load_state_dict`)."""

    def __init__(self, process: TaskProcess, seed: int) -> None:
        self.process = process
        self.spec = process.spec
        self.seed = seed
        reply = process.request({"op": "model", "model": seed}, process.limits.load_timeout_s)
        state, init = reply.get("state_dict"), reply.get("init_inputs")
        if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
        ):
            raise ReferenceFailed("the task's process sent a state_dict that is not names and tensors")
        if not isinstance(init, list | tuple):
            raise ReferenceFailed("the task's get_init_inputs did not give a list")
        self.state_dict: dict[str, torch.Tensor] = {k: v.cpu() for k, v in state.items()}
        self.init_inputs: list[Any] = list(init)

    def inputs(self, seed: int) -> InputSet:
        p = self.process
        reply = p.request({"op": "inputs", "seed": seed}, reply_bytes=2 * p.set_bytes)
        if not isinstance(reply.get("inputs"), list | tuple):
            raise ReferenceFailed("the task's process sent inputs that are not a list")
        made = InputSet(reply["inputs"])
        made.seed = seed
        p.set_bytes = max(p.set_bytes, nbytes(made))
        return made

    def forward(self, inputs: list[Any]) -> Any:
        """The reference's output on `inputs` (named by seed where the task's process still holds them)."""
        reply = self._on(inputs, {"op": "forward"}, nbytes(inputs))
        if "output" not in reply:
            raise ReferenceFailed("the task's process sent no output")
        return reply["output"]

    def arithmetic(
        self, inputs: list[Any], reference_out: Any, output: Any, allowed: frozenset[str]
    ) -> tuple[str | None, str | None]:
        """precision.rounded_inputs in the task's process: (a finding's message, why it was not checked)."""
        msg = {
            "op": "arithmetic",
            "reference_out": reference_out,
            "output": output,
            "allowed": sorted(allowed),
        }
        reply = self._on(inputs, msg, 0, self.process.limits.load_timeout_s)
        return _text(reply.get("found")), _text(reply.get("unchecked"))

    def work(self, inputs: list[Any]) -> TaskWork:
        return validated(TaskWork, self._on(inputs, {"op": "work"}, 0).get("work"))

    def time(
        self,
        kind: str,
        policy: TimingPolicy,
        seed: int,
        mode: str = "default",
    ) -> TimingStats | None:
        """A baseline timed in the task's process on fresh inputs from `seed` (None: torch.compile could
        not run, or no compiled model is held there: `compile` holds one)."""
        msg = {
            "op": "time",
            "model": self.seed,
            "kind": kind,
            "policy": dataclasses.asdict(policy),
            "seed": seed,
            "mode": mode,
        }
        # The device is held alone meanwhile: a call's watchdog plus the policy's budget, as a candidate's.
        reply = self.process.request(msg, self.process.limits.call_timeout_s + 4 * policy.budget_s)
        return checked_stats(reply.get("stats"))

    def compile(self, mode: str, probe_seeds: list[int]) -> bool:
        """torch.compile of this evaluation's model in the task's process, compiled by a first call on a
        probe set and held there for the timing (False: it does not compile, no compiled baseline)."""
        msg = {"op": "compile", "model": self.seed, "mode": mode, "probe_seeds": probe_seeds}
        reply = self.process.request(msg, self.process.limits.load_timeout_s * SLOW_CALL_FACTOR)
        return reply.get("compiled") is True

    def time_graph(self, inputs: list[Any]) -> TimingStats | None:
        return checked_stats(self._on(inputs, {"op": "time_graph"}, 0).get("stats"))

    def load_message(self, tf32: bool) -> LoadRequest:
        return load_message(self.init_inputs, self.state_dict, tf32)

    def release(self) -> None:
        with contextlib.suppress(ReferenceFailed):
            self.process.request({"op": "release", "model": self.seed})

    def _on(
        self, inputs: list[Any], msg: dict[str, Any], reply_bytes: int, timeout_s: float = 0.0
    ) -> dict[str, Any]:
        msg = {**msg, "model": self.seed}
        seed = getattr(inputs, "seed", None)
        if seed is not None:
            reply = self.process.request({**msg, "seed": seed}, timeout_s, reply_bytes)
            if reply["ok"]:
                return reply
        return self.process.request({**msg, "inputs": list(inputs)}, timeout_s, reply_bytes)


class TaskProcesses:
    """The task processes of one judge, by task content; thread-safe. At most `kept` are kept beyond
    those in use."""

    def __init__(self, launcher: RunnerLauncher, kept: int = KEPT_PROCESSES) -> None:
        self.launcher = launcher
        self.kept = kept
        self._processes: OrderedDict[str, TaskProcess] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()
        self._starting: dict[str, threading.Lock] = {}
        # Before multiprocessing's own exit hook (atexit runs the last registered first), which would wait
        # for a stopped process forever: its SIGTERM stays pending while it is stopped.
        atexit.register(self.close)

    @contextlib.contextmanager
    def using(self, spec: TaskSpec) -> Iterator[TaskProcess]:
        """The task's process for one evaluation, started (the task imported and checked there) if none
        is alive; InvalidTask for a task that does not load, ReferenceFailed for one whose code hangs or
        kills its process."""
        process = self._acquire(spec)
        try:
            yield process
        finally:
            process.let_go()
            self._trim()

    def _acquire(self, spec: TaskSpec) -> TaskProcess:
        with self._lock:
            starting = self._starting.setdefault(spec.id, threading.Lock())
        with starting:  # two evaluations of a new task start one process
            with self._lock:
                found = self._processes.get(spec.id)
                if found is not None and not found.failed and found.handle.proc.is_alive():
                    self._processes.move_to_end(spec.id)
                    found.hold()
                    return found
            process = self.start(spec)
            process.hold()
            with self._lock:
                old = self._processes.pop(spec.id, None)
                self._processes[spec.id] = process
        if old is not None and old.users == 0:
            old.close()
        self._trim()
        return process

    def _trim(self) -> None:
        """Close the processes no evaluation is using that failed, held too much or idled too long, and the
        least recently used others, down to `kept`."""
        now = time.monotonic()
        with self._lock:
            idle = [k for k, p in self._processes.items() if p.users == 0]
            spent = [
                k
                for k in idle
                if self._processes[k].failed or now - self._processes[k].idle_since > KEPT_IDLE_S
            ]
            closing = [self._processes.pop(k) for k in spent]
            idle = [k for k in idle if k not in spent]
            closing += [self._processes.pop(k) for k in idle[: max(0, len(self._processes) - self.kept)]]
        for p in closing:
            p.close()

    def start(self, spec: TaskSpec) -> TaskProcess:
        """A process of its own for `spec`, the task imported and its inputs checked there."""
        process = TaskProcess(self.launcher.start_reference(), spec, self.launcher)
        try:
            process.handle.wait_ready(self.launcher.limits.load_timeout_s)
            msg = {"op": "task", "task": spec.model_dump_json()}
            process.request(msg, self.launcher.limits.load_timeout_s)
        except (RunnerDied, RunnerTimeout, BadMessage) as e:
            process.close()
            raise ReferenceFailed(f"the task's process did not start: {e}") from None
        except BaseException:
            process.close()
            raise
        return process

    def profile(self, spec: TaskSpec, compile_baseline: bool) -> ReferenceProfile:
        """The reference profile, made in a process of its own (profiling leaves torch.compile's state
        behind); a failure is ReferenceFailed or InvalidTask."""
        process = TaskProcess(self.launcher.start_reference(), spec, self.launcher)
        try:
            msg = {"op": "profile", "task": spec.model_dump_json(), "compile_baseline": compile_baseline}
            reply = process.request(msg, self.launcher.limits.load_timeout_s * SLOW_CALL_FACTOR)
        finally:
            process.close()
        profile = validated(ReferenceProfile, reply.get("profile"))
        return profile.model_copy(update={"task_id": spec.id})

    def vet(
        self, spec: TaskSpec, policy: VetPolicy, device_class: str, device_name: str, cache: BaselineCache
    ) -> VetRecord:
        """pools.vet in a process of its own; what it measured is stored under the keys this side computes
        for the task, never under keys the task's process names."""
        keys = baseline_keys(
            spec, device_name, torch.__version__, policy.timing_budget_s, policy.target_rel_ci
        )
        wanted = {keys.eager, keys.compiled}
        cached = {k: s.model_dump() for k in wanted if (s := cache.get(k)) is not None}
        process = TaskProcess(self.launcher.start_reference(), spec, self.launcher)
        try:
            msg = {
                "op": "vet",
                "task": spec.model_dump_json(),
                "policy": policy.model_dump_json(),
                "device_class": device_class,
                "cached": cached,
            }
            timeout = self.launcher.limits.load_timeout_s * SLOW_CALL_FACTOR + 8 * policy.timing_budget_s
            reply = process.request(msg, timeout)
        finally:
            process.close()
        record = validated(VetRecord, reply.get("record"))
        measured = reply.get("measured")
        for key, stats in measured.items() if isinstance(measured, dict) else []:
            if key in wanted and (checked := checked_stats(stats)) is not None:
                cache.put(key, checked)
        trusted = {"task_id": spec.id, "device_class": device_class, "device_name": device_name}
        return record.model_copy(update={**trusted, "torch_version": torch.__version__})

    def close(self) -> None:
        with self._lock:
            processes, self._processes = list(self._processes.values()), OrderedDict()
        for p in processes:
            p.close()


def validated(model: type[M], raw: Any) -> M:
    """A document from the task's process (JSON text or a dict): valid, and every number in it finite (a
    NaN or infinity is stored as null and breaks every later read of the record, and every listing that
    holds it)."""
    try:
        doc = model.model_validate_json(raw) if isinstance(raw, str | bytes) else model.model_validate(raw)
    except ValueError as e:
        why = f"the task's process sent a {model.__name__} that does not validate: {e}"
        raise ReferenceFailed(why[:1000]) from None
    if not _finite(doc.model_dump()):
        raise ReferenceFailed(f"the task's process sent a {model.__name__} with a number that is not finite")
    return doc


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_finite(v) for v in value)
    return True


def load_message(init_inputs: list[Any], state_dict: dict[str, torch.Tensor], tf32: bool) -> LoadRequest:
    """What a candidate's runner is loaded with: the task's init inputs and the reference's weights."""
    state = {k: v.detach().cpu() for k, v in state_dict.items()}
    return {"op": "load", "init_inputs": init_inputs, "state_dict": state, "tf32": tf32}


def footprint(handle: RunnerHandle) -> int:
    """Bytes a task's process holds on the host: resident memory and memory files (memfds, but the shared
    arena) of every process of its uid (of the process alone where it has no uid of its own), and the
    files in its scratch directory."""
    pids = [pid for pid, _ in processes_of(handle.uid)] if handle.isolated else [handle.proc.pid or -1]
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError):
            with open(f"/proc/{pid}/status") as f:
                rss = next((line.split()[1] for line in f if line.startswith("VmRSS:")), "0")
            total += int(rss) * 1024
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("/memfd:") and not target.startswith("/memfd:evalsvc-arena"):
                        total += os.stat(f"/proc/{pid}/fd/{fd}").st_size
    for root, _, files in os.walk(handle.scratch):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def checked_stats(raw: Any) -> TimingStats | None:
    """Timing statistics from the task's process: valid, finite (`validated`) and with a positive median
    and count; None where it sent none."""
    if raw is None:
        return None
    stats = validated(TimingStats, raw)
    if stats.median_ms <= 0 or stats.n <= 0:
        raise ReferenceFailed(f"the task's process sent timing statistics that are not positive: {stats}")
    return stats


def _text(value: Any) -> str | None:
    return None if value is None else str(value)[:2000]
