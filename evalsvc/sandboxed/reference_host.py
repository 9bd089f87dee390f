"""The task's side: a process that runs one task's code (its module body, `Model`, `get_inputs`,
`get_init_inputs`) for the judge, and answers with data.

A task is code a tenant wrote, so it runs isolated like a candidate (a runner process of its own uid: no
network, scrubbed environment, limits, a private view of the file system, the watchdog), never in the
judge. What it answers (inputs, reference outputs, baseline times, vet findings) is the task's own word
about the task, which is what defines the task: a task that lies only misjudges its own evaluations. The
judge bounds every answer (codec.py) and validates every figure before it uses one.
"""

from __future__ import annotations

import random
import traceback
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from evalsvc.core.pools import VetPolicy
from evalsvc.core.results import TimingStats
from evalsvc.core.tasks import InvalidTask, TaskSpec
from evalsvc.engine.baseline_timing import call_reference, compile_reference, run_reference, set_precision
from evalsvc.engine.baselines import MemoryBaselineCache
from evalsvc.engine.codec import Arena, receive, send
from evalsvc.engine.precision import ReferenceIn64, rounded_inputs
from evalsvc.engine.profiling import nbytes, task_work
from evalsvc.engine.reference_profile import profile_reference
from evalsvc.engine.taskload import LoadedTask, load_task
from evalsvc.engine.timing import TimingPolicy, measure, measure_graph

# Input sets kept for the judge's next calls on them (reference outputs of a trial, spot checks of a round):
# the judge then names a set by its seed instead of sending it back.
KEPT_INPUT_BYTES = 2 * 1024**3
KEPT_INPUT_SETS = 64


class Evicted(Exception):
    """The judge named an input set this process no longer holds: it sends the set instead."""


class ReferenceServer:
    def __init__(self, conn: Any, device: torch.device, arena: Arena | None) -> None:
        self.conn = conn
        self.device = device
        self.arena = arena
        self.task: LoadedTask | None = None
        self.models: dict[int, torch.nn.Module] = {}  # by the evaluation's model seed
        self.exact: dict[int, ReferenceIn64] = {}  # float64 copies for the arithmetic check
        self.kept: OrderedDict[int, list[Any]] = OrderedDict()  # input sets by seed, oldest first
        # torch.compile of the reference by mode, held for re-checks by later evaluations (a compile costs
        # seconds, a re-check 0.1 s); timing does not depend on which evaluation's weights it holds.
        self.compiled: dict[str, Callable[..., Any]] = {}

    def handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        op = msg["op"]
        if op == "task":
            self.task = load_task(TaskSpec.model_validate_json(msg["task"]))
            set_precision(self.task.spec.meta.tf32)
            return {"ok": True}
        if op == "profile":  # the reference profile: a trusted summary of untrusted code's run, as data
            spec = TaskSpec.model_validate_json(msg["task"])
            report = profile_reference(spec, str(self.device), bool(msg["compile_baseline"]), roofline=False)
            return {"ok": True, "profile": report.model_dump_json()}
        if op == "vet":
            return self._vet(msg)
        assert self.task is not None, "no task loaded"
        ops: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "model": lambda m: self._model(int(m["model"])),
            "release": self._release,
            "inputs": lambda m: {"ok": True, "inputs": self._made(int(m["seed"]))},
            "forward": lambda m: {
                "ok": True,
                "output": run_reference(self._m(m), self._inputs(m), self.device),
            },
            "arithmetic": self._arithmetic,
            "work": lambda m: {"ok": True, "work": task_work(self._m(m), self._inputs(m)).model_dump()},
            "time": self._time,
            "compile": lambda m: {"ok": True, "compiled": self._compile(m)},
            "time_graph": self._time_graph,
        }
        if op not in ops:
            raise ValueError(f"unknown op {op!r}")
        return ops[op](msg)

    def _time_graph(self, msg: dict[str, Any]) -> dict[str, Any]:
        with torch.no_grad():
            stats = measure_graph(self._m(msg), self._inputs(msg), self.device)
        return {"ok": True, "stats": stats.model_dump()}

    def _model(self, seed: int) -> dict[str, Any]:
        assert self.task is not None
        model = self.task.make_model(seed, self.device)
        self.models[seed] = model
        state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
        return {"ok": True, "state_dict": state, "init_inputs": list(self.task.get_init_inputs())}

    def _release(self, msg: dict[str, Any]) -> dict[str, Any]:
        seed = int(msg["model"])
        self.models.pop(seed, None)
        self.exact.pop(seed, None)
        return {"ok": True}

    def _m(self, msg: dict[str, Any]) -> torch.nn.Module:
        return self.models[int(msg["model"])]

    def _made(self, seed: int) -> list[Any]:
        assert self.task is not None
        inputs = self.task.make_inputs(seed, self.device)
        self.kept[seed] = inputs
        while len(self.kept) > KEPT_INPUT_SETS or (
            len(self.kept) > 1 and sum(nbytes(s) for s in self.kept.values()) > KEPT_INPUT_BYTES
        ):
            self.kept.popitem(last=False)
        return inputs

    def _inputs(self, msg: dict[str, Any]) -> list[Any]:
        if "inputs" in msg:
            return list(msg["inputs"])
        seed = int(msg["seed"])
        if seed not in self.kept:
            raise Evicted(f"input set {seed} is no longer held")
        self.kept.move_to_end(seed)
        return self.kept[seed]

    def _arithmetic(self, msg: dict[str, Any]) -> dict[str, Any]:
        """precision.rounded_inputs on the judge's trial: the message of a finding, or None; `unchecked`
        says why it could not be checked (a reference that does not run in float64)."""
        seed = int(msg["model"])
        try:
            if seed not in self.exact:
                self.exact[seed] = ReferenceIn64(self._m(msg))
            found = rounded_inputs(
                self.exact[seed],
                self._inputs(msg),
                msg["reference_out"],
                msg["output"],
                frozenset(msg["allowed"]),
            )
        except (RuntimeError, TypeError, ValueError) as e:
            return {"ok": True, "found": None, "unchecked": str(e)[:300]}
        return {"ok": True, "found": found.message() if found is not None else None, "unchecked": None}

    def _time(self, msg: dict[str, Any]) -> dict[str, Any]:
        """A baseline measured by the rounds every timing uses, each call on fresh inputs from the judge's
        seed: `kind` eager, or compiled (the model `compile` holds; none held, no figure)."""
        assert self.task is not None
        model = self._m(msg)
        policy = TimingPolicy(**msg["policy"])
        rng = random.Random(int(msg["seed"]))
        task, device = self.task, self.device

        def fresh(k: int) -> list[Any]:
            return task.make_inputs(rng.getrandbits(62), device)

        call: Callable[..., Any] | None
        if msg["kind"] == "eager":
            call = partial(_eager_call, model)
        else:
            call = self.compiled.get(str(msg["mode"]))
            if call is None:  # compiled by its own op, outside the judge's quiet: nothing held, no figure
                return {"ok": True, "stats": None, "held": False}
        try:
            stats = measure(call, fresh, device, policy).stats
        except Exception as e:
            if msg["kind"] == "eager":
                raise
            return {"ok": True, "stats": None, "held": True, "error": f"{type(e).__name__}: {e}"[:300]}
        return {"ok": True, "stats": stats.model_dump(), "held": msg["kind"] != "eager"}

    def _compile(self, msg: dict[str, Any]) -> bool:
        """torch.compile of the evaluation's model in `mode`, compiled by a first call and held for timing
        (kept from an earlier evaluation where held)."""
        mode = str(msg["mode"])
        if mode not in self.compiled:
            probe = [self._made(int(s)) for s in msg["probe_seeds"][:1]]
            call = compile_reference(self._m(msg), probe, mode)
            if call is None:
                return False
            self.compiled[mode] = call
        return True

    def _vet(self, msg: dict[str, Any]) -> dict[str, Any]:
        """pools.vet.Vetter on this device, its baseline cache the judge's cached figures for the task's
        keys; what it measured goes back for the judge to store under the keys it chose."""
        from evalsvc.pools.vet import Vetter

        cache = MemoryBaselineCache()
        for key, stats in msg["cached"].items():
            cache.put(key, TimingStats.model_validate(stats))
        before = dict(cache.items())
        vetter = Vetter(str(self.device), str(msg["device_class"]), cache)
        record = vetter.vet(
            TaskSpec.model_validate_json(msg["task"]), VetPolicy.model_validate_json(msg["policy"])
        )
        measured = {k: v.model_dump() for k, v in cache.items() if k not in before}
        return {"ok": True, "record": record.model_dump_json(), "measured": measured}

    def serve(self) -> None:
        while True:
            try:
                msg = receive(self.conn, map_location=self.device, arena=self.arena, in_place=True)
            except EOFError:
                return
            if msg["op"] == "exit":
                return
            try:
                reply = self.handle(msg)
            except InvalidTask as e:
                reply = {"ok": False, "kind": "task_invalid", "error": str(e)}
            except Evicted as e:
                reply = {"ok": False, "kind": "evicted", "error": str(e)}
            except BaseException as e:  # the task's own exceptions, SystemExit included
                tb = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-4))
                reply = {"ok": False, "kind": "task_error", "error": tb[-3000:]}
            send(self.conn, reply, self.arena)


def _eager_call(model: torch.nn.Module, *inputs: Any) -> Any:
    return call_reference(model, list(inputs))
