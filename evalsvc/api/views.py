"""Response documents that exist only at the HTTP boundary (the shared ones are in records.documents)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from evalsvc.core.profiles import DeviceFacts
from evalsvc.core.results import Status
from evalsvc.records.documents import BatchItem, BatchView, BrokenJob, CompileView, Job, State, TaskView


class TaskPage(BaseModel):
    items: list[TaskView]
    offset: int
    limit: int
    next_offset: int | None = Field(description="offset of the next page; null on the last page")


class DeviceView(BaseModel):
    queue: str
    device: str
    device_class: str
    hostname: str
    heartbeat_at: float
    facts: DeviceFacts | None = Field(
        None,
        description="compute capability, SMs, memory, measured peaks, compile target; null until measured",
    )


class ReadyView(BaseModel):
    ready: bool
    redis: str = Field(description="'ok' or why Redis did not answer")
    workers: dict[str, int] = Field(description="live workers by kind ('compile', 'gpu')")
    missing: list[str] = Field(description="what keeps the service from being ready")


def batch_item(job: Job | BrokenJob) -> BatchItem:
    r = job.result
    if r is None:
        return BatchItem(id=job.id, state=job.state)
    return BatchItem(
        id=job.id,
        state=job.state,
        status=r.status,
        failure=r.failure,
        reward=r.reward,
        milestone=r.milestone,
        speedup_eager=r.speedup.eager,
        speedup_compile=r.speedup.compile,
    )


def batch_view(batch_id: str, jobs: list[Job] | list[Job | BrokenJob]) -> BatchView:
    items = [batch_item(j) for j in jobs]
    done = sum(1 for j in jobs if j.state is State.DONE)
    return BatchView(id=batch_id, total=len(jobs), done=done, items=items)


def compile_view(job: Job | BrokenJob) -> CompileView:
    if isinstance(job, BrokenJob):
        failed = job.result
        return CompileView(
            id=job.id,
            state=job.state,
            status=failed.status if failed else None,
            message=failed.message if failed else None,
        )
    report = job.compile_report
    status: Status | None = None
    if job.result is not None:
        status = job.result.status
    elif report is not None:
        status = Status.OK if report.ok else Status.COMPILE_ERROR
    message = job.result.message if job.result else None
    return CompileView(id=job.id, state=job.state, status=status, report=report, message=message)
