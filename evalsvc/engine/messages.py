"""The messages between the judge and a candidate's runner, defined once for both sides.

On the wire each is a plain dict (codec.py carries dicts, tensors inside them as frames); these types name
their keys and what the keys hold, and change nothing of what is sent. Requests come from the judge
(trusted): the runner reads them as they are. Replies come from the candidate's process: an honest runner
sends these shapes, and the judge reads every reply as an untrusted dict (`.get`, every field checked),
never trusting these types.

Meant for both sides: nothing here may import a module of the judge's own, so that the runner
(evalsvc.sandboxed.runner) can import it. The judge builds its requests with these types and the runner's
`Server` answers with them; a round's request and answer stay plain dicts (`Server._round`).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

Subject = Literal["null", "candidate"]  # whose rounds: the runner's own cost, or the candidate's


class PrepareRequest(TypedDict):
    """Before the candidate is imported: the task's precision, the null candidate's outputs, the flush."""

    op: Literal["prepare"]
    tf32: bool
    outputs: list[list[Any]]  # [shape, dtype name without "torch."] of each of the reference's outputs
    flush_bytes: int
    task: NotRequired[str]  # the task's spec (JSON), where the runner is to make the inputs from seeds
    seeds: NotRequired[list[int]]  # ... proved on these seeds' sets
    digests: NotRequired[list[Any]]  # ... against the judge's digests of them


class LoadRequest(TypedDict):
    """The candidate's import, with the reference's constructor inputs and weights."""

    op: Literal["load"]
    init_inputs: list[Any]
    state_dict: dict[str, Any]
    tf32: bool


class RunRequest(TypedDict):
    """One checked call, on `inputs` or on the set the runner makes from `seed` (checked by `digest`)."""

    op: Literal["run"]
    poison_bytes: int
    inputs: NotRequired[list[Any]]
    seed: NotRequired[int]
    digest: NotRequired[Any]


class RoundRequest(TypedDict):
    """A round of timed calls, one input set each: sent (`sets`) or made by the runner from `seeds`."""

    op: Literal["round"]
    subject: Subject
    seeds: NotRequired[list[int]]
    sets: NotRequired[list[list[Any]]]


class FetchRequest(TypedDict):
    """Chunks of the last round's outputs, picked after its answer."""

    op: Literal["fetch"]
    picks: list[tuple[int, int, int]]  # (call, output tensor, chunk index)


class ProfileRequest(TypedDict):
    """A profiler trace of separate runs, after the timed ones (display only)."""

    op: Literal["profile"]
    inputs: list[Any]
    runs: int


class TimeGraphRequest(TypedDict):
    """CUDA-graph replays of a small candidate (display only), inputs as in `RunRequest`."""

    op: Literal["time_graph"]
    inputs: NotRequired[list[Any]]
    seed: NotRequired[int]
    digest: NotRequired[Any]


class ExitRequest(TypedDict):
    op: Literal["exit"]


Request = (
    PrepareRequest
    | LoadRequest
    | RunRequest
    | RoundRequest
    | FetchRequest
    | ProfileRequest
    | TimeGraphRequest
    | ExitRequest
)
InputsRequest = RunRequest | TimeGraphRequest  # the requests whose input set the runner may make itself


class Ready(TypedDict):
    """The runner's first message: isolated and warm, no candidate code run."""

    ok: Literal[True]
    op: Literal["ready"]


class Done(TypedDict):
    """The answer to `prepare` and `load`."""

    ok: Literal[True]


MAX_TUNINGS = 16  # autotune entries a reply carries and an evaluation keeps


class Tuning(TypedDict):
    """A @triton.autotune kernel tuned during the call (triton_runtime.tuned)."""

    kernel: str
    config: str
    configs: int
    tuning_ms: float


class RunReply(TypedDict):
    ok: Literal[True]
    output: Any
    autotune: NotRequired[list[Tuning]]  # Triton kernels tuned during this call


class RoundReply(TypedDict):
    ok: Literal[True]
    samples_ms: list[float]  # one per call, as timed in the runner
    digests: list[Any]  # per call, per output tensor, per chunk (commitment.py)
    nbytes: Any
    probes_us: list[tuple[float, float]]  # the probed calls' late tails and gaps (for the log only)


class FetchReply(TypedDict):
    ok: Literal[True]
    chunks: list[Any]


class ProfileReply(TypedDict):
    ok: Literal[True]
    trace: dict[str, Any]  # a KernelTrace


class TimeGraphReply(TypedDict):
    ok: Literal[True]
    stats: dict[str, Any]  # a TimingStats


ErrorKind = Literal["inputs_differ", "forbidden", "runtime_error"]


class ErrorReply(TypedDict):
    """A request that failed: `inputs_differ` (the runner cannot make the judge's inputs; they are sent
    instead), `forbidden` (a runtime check, named by `rule`), `runtime_error` (the candidate's own)."""

    ok: Literal[False]
    kind: ErrorKind
    error: str
    rule: NotRequired[str]


Reply = Ready | Done | RunReply | RoundReply | FetchReply | ProfileReply | TimeGraphReply | ErrorReply
