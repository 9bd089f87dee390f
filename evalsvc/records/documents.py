"""The service's request and state documents (pydantic, no torch): shared by gateway, queue and SDK."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field, model_validator

from evalsvc.core.options import EvalOptions
from evalsvc.core.outcomes import failure
from evalsvc.core.profiles import DeviceFacts, ReferenceProfile
from evalsvc.core.results import CompileReport, EvaluationResult, FailureKind, Status
from evalsvc.core.solutions import Solution
from evalsvc.core.tasks import TaskSpec


class State(StrEnum):
    QUEUED = "queued"
    COMPILING = "compiling"
    RUNNING = "running"
    DONE = "done"


class JobKind(StrEnum):
    EVALUATE = "evaluate"
    COMPILE = "compile"


class EvaluationRequest(BaseModel):
    """A solution for a task, given by id or inline."""

    task_id: str | None = Field(None, max_length=64)
    task: TaskSpec | None = None
    solution: Solution
    options: EvalOptions = Field(default_factory=EvalOptions)
    device_class: str = Field("default", max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")

    @model_validator(mode="after")
    def _one_task(self) -> EvaluationRequest:
        if (self.task_id is None) == (self.task is None):
            raise ValueError("give exactly one of task_id or task")
        return self


class CompileRequest(BaseModel):
    solution: Solution


class BatchRequest(BaseModel):
    evaluations: list[EvaluationRequest] = Field(min_length=1)


class Deliveries(BaseModel):
    """How many times each stage of a job was delivered to a worker while the job was unfinished: every
    delivery counts (one interrupted by a worker's death, the broker's redelivery, a duplicate racing one
    still running), and nothing resets these counts; a delivery that finds the job done is not counted."""

    compile: int = Field(0, ge=0, description="deliveries to a compile worker")
    evaluate: int = Field(0, ge=0, description="deliveries to a device (GPU or CPU-device) worker")


class Job(BaseModel):
    """The system of record for one evaluation or compile job, kept in Redis."""

    id: str
    kind: JobKind
    state: State
    task_id: str | None = None
    solution: Solution
    options: EvalOptions = Field(default_factory=EvalOptions)
    device_class: str = "default"
    tenant: str = "anonymous"
    created_at: float
    updated_at: float
    attempts: int = 0  # deliveries of the stage it is in (restarts when routed); what max_attempts bounds
    # Counted in the job's Redis hash, beside the document (`JobStore.bump_attempts`), never in it
    deliveries: Deliveries = Field(default_factory=Deliveries, exclude=True)
    artifact_key: str | None = None
    queue: str | None = None
    result: EvaluationResult | None = None
    compile_report: CompileReport | None = None


class BrokenJob(BaseModel):
    """What can still be read of a stored job record that no longer reads as a `Job` (corrupt JSON,
    fields missing, values the current models refuse): enough to answer for it, and to fail it."""

    id: str
    reason: str = Field(description="why the record could not be read (no field values quoted)")
    state: State = State.DONE
    kind: JobKind | None = None
    tenant: str | None = Field(None, description="None when the owner cannot be read: nobody is shown it")
    task_id: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    attempts: int = 0
    options: EvalOptions = Field(default_factory=EvalOptions)

    @property
    def result(self) -> EvaluationResult | None:
        """The failure it ended with (None while the store still holds it as unfinished)."""
        if self.state is not State.DONE:
            return None
        what = "compile job" if self.kind is JobKind.COMPILE else "evaluation"
        msg = (
            f"the stored record of this {what} could not be read ({self.reason}); "
            "it was failed without running: submit it again"
        )
        return failure(Status.INTERNAL_ERROR, msg[:2000], self.options, failure=FailureKind.RECORD_UNREADABLE)


class EvaluationView(BaseModel):
    """What clients see of an evaluation."""

    id: str
    state: State
    task_id: str | None
    created_at: float
    updated_at: float
    attempts: int = Field(
        description="deliveries of the stage the job is in (compile, then device: it restarts when the job "
        "is routed to a device worker); a job whose stage is delivered more than the service's max_attempts "
        "times ends internal_error / job_abandoned"
    )
    deliveries: Deliveries = Field(
        default_factory=Deliveries,
        description="every delivery of the job to a worker while it was unfinished, by stage, never reset",
    )
    deduplicated: bool = False
    status: Status | None = None
    reward: float | None = None
    result: EvaluationResult | None = None

    @classmethod
    def of(cls, job: Job | BrokenJob, deduplicated: bool = False) -> EvaluationView:
        r = job.result
        return cls(
            id=job.id,
            state=job.state,
            task_id=job.task_id,
            created_at=job.created_at,
            updated_at=job.updated_at,
            attempts=job.attempts,
            deliveries=job.deliveries if isinstance(job, Job) else Deliveries(),
            deduplicated=deduplicated,
            status=r.status if r else None,
            reward=r.reward if r else None,
            result=r,
        )


class BatchItem(BaseModel):
    id: str
    state: State
    status: Status | None = None
    failure: FailureKind | None = Field(None, description="what failed, when the status alone does not say")
    reward: float | None = None
    milestone: int | None = None
    speedup_eager: float | None = None
    speedup_compile: float | None = None


class BatchView(BaseModel):
    id: str
    total: int
    done: int
    items: list[BatchItem]


class BatchCancellation(BaseModel):
    """What `DELETE /v1/batches/{id}` did, counted by item (items that share a job count once each)."""

    id: str
    total: int
    cancelled: int = Field(description="items this request cancelled (they end `cancelled`, no reward)")
    already_cancelled: int = Field(description="items an earlier cancellation had ended")
    finished: int = Field(description="items that had ended otherwise before this request (kept as they are)")
    batch: BatchView = Field(description="the batch as it stands after the request")


class BatchEvent(BaseModel):
    """The data of a `result` event of `GET /v1/batches/{id}/events`: one item reached `done`. Compact, as
    the batch view's items are; the whole result document is at `href`."""

    index: int = Field(description="the item's position in the batch (submission order)")
    item: BatchItem
    href: str = Field(description="the evaluation's own resource (its whole result document)")


class BatchSummary(BaseModel):
    """The data of the `done` event: every item has ended."""

    id: str
    total: int
    done: int
    statuses: dict[str, int] = Field(description="items by result status")


class CompileView(BaseModel):
    id: str
    state: State
    status: Status | None = None
    report: CompileReport | None = None
    message: str | None = None


class TaskView(BaseModel):
    id: str
    name: str | None
    meta: dict
    created_at: float
    warnings: list[str] = Field(
        default_factory=list, description="found by the GPU side on evaluation: what makes this task weak"
    )
    shared: bool = Field(
        False,
        description="the operator's task, readable by every tenant (it may be the caller's own as well)",
    )


class WorkerInfo(BaseModel):
    queue: str
    kind: str  # "compile" or "gpu"
    device_class: str
    device: str
    hostname: str
    pid: int
    heartbeat_at: float
    name: str = Field("", description="the worker's configured name (EVALSVC_WORKER_NAME), else its hostname")
    facts: DeviceFacts | None = Field(None, description="GPU workers: the device as measured at start-up")
    problem: str | None = Field(None, description="why this worker cannot take jobs now (None: it can)")


class ProfileRecord(BaseModel):
    """A task's reference profile on one device class: queued to a GPU worker, kept like a result."""

    task_id: str
    device_class: str
    state: State
    queue: str | None = None
    created_at: float
    updated_at: float
    profile: ReferenceProfile | None = None
    error: str | None = Field(None, description="why the profile could not be made (state done)")
