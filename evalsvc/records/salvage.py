"""Reading what is left of a job record that no longer reads as a `Job` (a torn write, fields missing,
values the current models refuse): enough to answer for it and to fail it, never a 500."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from evalsvc.core.options import EvalOptions
from evalsvc.records.documents import BrokenJob, Job, JobKind, State


class UnreadableJob(Exception):
    """A stored job record that does not read as a `Job`; `broken` is what could still be read of it."""

    def __init__(self, broken: BrokenJob) -> None:
        super().__init__(f"job {broken.id}: {broken.reason}")
        self.broken = broken


# The scalar fields of a record whose JSON no longer parses (a torn write), each its first `"name": value`
# pair: a job's document lists them before any nested field of the same name could, and JSON escapes every
# quote inside a string value, so the text of a solution cannot fake one.
_SCALARS = ("id", "kind", "task_id", "tenant", "created_at", "updated_at", "attempts")
_PAIR = rb'"%s"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?[0-9][0-9.eE+-]{0,30}|null)'
_SCALAR_RES = {name: re.compile(_PAIR % name.encode()) for name in _SCALARS}


def _scan(raw: bytes) -> dict[str, Any]:
    """Best effort: the scalar fields still readable in a document that does not parse as JSON."""
    out = {}
    for name, pattern in _SCALAR_RES.items():
        found = pattern.search(raw)
        if found:
            try:
                out[name] = json.loads(found.group(1))
            except ValueError:
                continue
    return out


def why(e: Exception) -> str:
    """A short reason, naming fields but never quoting their values (a source may be megabytes)."""
    if isinstance(e, ValidationError):
        errs = e.errors(include_url=False, include_input=False)
        parts = [f"{'.'.join(map(str, err['loc'])) or 'document'}: {err['msg']}" for err in errs[:3]]
        more = f"; and {len(errs) - 3} more" if len(errs) > 3 else ""
        return "; ".join(parts)[:500] + more
    return f"{type(e).__name__}: {e}"[:500]


def salvage(job_id: str, raw: bytes | None, fields: dict[str, str], reason: str) -> BrokenJob:
    """What can be read of a broken record: the hash's own fields, then whatever of the document parses."""
    doc: dict[str, Any] = {}
    tenant: str | None = None
    if raw is not None:
        try:
            parsed = json.loads(raw)
        except ValueError:
            doc = _scan(raw)
            tenant = doc.get("tenant") if isinstance(doc.get("tenant"), str) else None  # torn before it: lost
        else:
            if isinstance(parsed, dict):
                doc = parsed
                t = doc.get("tenant", Job.model_fields["tenant"].default)  # absent: the model's default
                tenant = t if isinstance(t, str) else None
    kind = doc.get("kind")
    if kind not in {k.value for k in JobKind}:
        kind = {"e": JobKind.EVALUATE, "c": JobKind.COMPILE}.get(job_id.split("_", 1)[0])
    try:
        options = EvalOptions.model_validate(doc.get("options") or {})
    except ValidationError:
        options = EvalOptions()
    stored = fields.get("state")
    state = State(stored) if stored in {s.value for s in State} else State.DONE  # none or garbage: ended

    def number(name: str) -> float:
        v = doc.get(name)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0.0

    task_id = doc.get("task_id")
    return BrokenJob(
        id=job_id,
        reason=fields.get("unreadable") or reason,
        state=state,
        kind=kind,
        tenant=tenant,
        task_id=task_id if isinstance(task_id, str) else None,
        created_at=number("created_at"),
        updated_at=number("updated_at"),
        attempts=int(number("attempts")),
        options=options,
    )
