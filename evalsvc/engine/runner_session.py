"""The judge's side of one evaluation's runner: what it asks the runner, and the runner's replies turned
into verdicts (`Stop`) where they are failures. Whether the runner makes the inputs from seeds or is sent
them is settled here too (`RunnerSession.ask_made`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any, cast

from evalsvc.core.results import FailureKind, Status
from evalsvc.engine.codec import BadMessage
from evalsvc.engine.commitment import output_tensors
from evalsvc.engine.launcher import RunnerDied, RunnerHandle, RunnerLimits, RunnerTimeout
from evalsvc.engine.messages import InputsRequest, PrepareRequest, Request
from evalsvc.engine.reference import Reference
from evalsvc.engine.taskload import input_digest
from evalsvc.engine.timing import TimingPolicy


class InputsDiffer(Exception):
    """The runner could not make the judge's inputs from their seeds; they are sent instead."""


class Stop(Exception):
    """Ends an evaluation early with a verdict."""

    def __init__(
        self, status: Status, message: str, rule: str | None = None, failure: FailureKind | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.rule = rule
        self.failure = failure


class RunnerSession:
    """One evaluation's runner as the judge asks it. `seeded_inputs`: whether runners on this device make
    input sets from seeds (the judge's choice per device); the handle says whether this one still does."""

    def __init__(self, handle: RunnerHandle, limits: RunnerLimits, seeded_inputs: bool) -> None:
        self.handle = handle
        self.limits = limits
        self.seeded_inputs = seeded_inputs

    def ready(self) -> Stop | None:
        """Wait for the runner's own start (no candidate code has run yet): a failure here is ours, not
        the candidate's."""
        try:
            self.handle.wait_ready(self.limits.load_timeout_s)
        except (RunnerTimeout, RunnerDied, BadMessage) as e:
            return Stop(
                Status.INTERNAL_ERROR,
                f"the runner did not start: {e}",
                failure=FailureKind.RUNNER_START_FAILED,
            )
        return None

    def ask(self, msg: Request, timeout_s: float, reply_bytes: int = 0) -> dict[str, Any]:
        try:
            reply = self.handle.request(msg, timeout_s, reply_bytes)
        except RunnerTimeout as e:
            raise Stop(Status.TIMEOUT, f"the candidate did not finish '{msg['op']}': {e}") from None
        except RunnerDied as e:
            raise Stop(Status.RUNTIME_ERROR, str(e), failure=FailureKind.RUNNER_DIED) from None
        except BadMessage as e:
            raise Stop(Status.FORBIDDEN, str(e), rule="forged_message") from None
        if not reply["ok"] and reply.get("kind") == "inputs_differ":
            raise InputsDiffer()
        if not reply["ok"]:
            kind = reply.get("kind")
            status = Status.FORBIDDEN if kind == "forbidden" else Status.RUNTIME_ERROR
            error = str(reply.get("error", "unknown error"))[:4000]
            rule = str(reply.get("rule", "runtime_check"))
            if not re.fullmatch(r"[a-z_]{1,40}", rule):  # a label from the candidate's process: keep it tame
                rule = "runtime_check"
            raise Stop(status, error, rule=rule if status is Status.FORBIDDEN else None)
        return reply

    def call_asker(self) -> Callable[[Request], dict[str, Any]]:
        """`ask` with the per-call timeout, for the timed rounds (judged_timing.RoundRunner)."""
        return partial(self.ask, timeout_s=self.limits.call_timeout_s)

    @property
    def makes_inputs(self) -> bool:
        """Whether the runner makes the inputs from seeds now."""
        return self.handle.makes_inputs and self.seeded_inputs

    def ask_made(
        self,
        explicit: Request,
        seeded: Callable[[], Request],
        room: int,
        timeout_s: float = 0.0,
    ) -> dict[str, Any]:
        """Ask with input seeds and digests, so the runner makes the inputs on its own device (no copy
        through the host); once it cannot (a task whose inputs do not reproduce from the seed there), send
        them for the rest of the evaluation. A runner that makes other inputs than the judge's only fails
        its own checks: every output is compared with the reference on the judge's inputs."""
        timeout_s = timeout_s or self.limits.call_timeout_s
        if self.makes_inputs:
            try:  # the message carries no tensors: keep room for the reply's (as large as `room`)
                return self.ask(seeded(), timeout_s, reply_bytes=room)
            except InputsDiffer:
                self.handle.makes_inputs = False
        try:
            return self.ask(explicit, timeout_s)
        except InputsDiffer:
            raise Stop(Status.FORBIDDEN, "the runner refused the judge's inputs", "forged_message") from None

    def prepare(
        self,
        ref: Reference,
        probe: list[list[Any]],
        probe_seeds: list[int],
        ref_out: Any,
        policy: TimingPolicy,
    ) -> None:
        """Before the candidate is imported: whether the runner makes inputs from seeds (it is sent the task
        and must reproduce the judge's inputs for a few seeds) or receives them, and the shapes of the null
        candidate's outputs."""
        outputs = [[list(t.shape), str(t.dtype).removeprefix("torch.")] for t in output_tensors(ref_out)]
        base: PrepareRequest = {
            "op": "prepare",
            "tf32": ref.spec.meta.tf32,
            "outputs": outputs,
            "flush_bytes": policy.flush_bytes,
        }

        def seeded() -> PrepareRequest:
            digests = [input_digest(p) for p in probe]
            return {**base, "task": ref.spec.model_dump_json(), "seeds": probe_seeds, "digests": digests}

        self.ask_made(base, seeded, 0, self.limits.load_timeout_s)

    def load(self, ref: Reference) -> None:
        """The candidate's import, with the task's weights."""
        self.ask(ref.load_message(ref.spec.meta.tf32), self.limits.load_timeout_s)


def seeded_message(explicit: InputsRequest, seed: int) -> InputsRequest:
    """`explicit` with its input set replaced by the set's seed and the judge's digest of it."""
    msg = {k: v for k, v in explicit.items() if k != "inputs"}
    return cast(InputsRequest, {**msg, "seed": seed, "digest": input_digest(explicit["inputs"])})
