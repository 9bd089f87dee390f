"""The candidate's profile, display only, after its verdict is decided: a profiler trace in the runner
and Nsight Compute's metrics in a process of their own. Whatever fails here is a note in the profile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from evalsvc.core.profiles import CandidateProfile, KernelTrace
from evalsvc.engine.messages import ProfileRequest
from evalsvc.engine.ncu import NcuProbe
from evalsvc.engine.reference import Reference
from evalsvc.engine.runner_session import RunnerSession, Stop


def trace(session: RunnerSession, inputs: list[Any]) -> CandidateProfile:
    """A profiler trace in the runner, in separate runs after the timed ones. Whatever goes wrong here
    is a note: the verdict is already decided."""
    profile = CandidateProfile()
    try:
        msg: ProfileRequest = {"op": "profile", "inputs": inputs, "runs": 3}
        reply = session.ask(msg, session.limits.call_timeout_s * 3)
        profile.trace = KernelTrace.model_validate(reply["trace"])
    except (Stop, ValueError, KeyError, TypeError) as e:
        profile.notes.append(f"profiler trace failed: {str(e)[:300]}")
    return profile


def nsight(
    profile: CandidateProfile,
    device: torch.device,
    ncu: NcuProbe | None,
    artifact: Path,
    ref: Reference,
    inputs: list[Any],
    uid: int,
) -> None:
    """Nsight Compute's metrics for the first kernels, in a process of its own (optional)."""
    if device.type != "cuda":
        profile.notes.append("kernels, launch gaps and Nsight Compute metrics need a GPU device")
    elif ncu is None:
        profile.notes.append("Nsight Compute is not available on this worker (ncu absent or not enabled)")
    else:
        load = ref.load_message(ref.spec.meta.tf32)
        try:
            profile.ncu, note = ncu.profile(artifact, load, inputs, device, uid)
        except Exception as e:  # our own step failed: a note, never a failed evaluation
            profile.ncu, note = [], f"Nsight Compute step failed: {type(e).__name__}: {e}"[:300]
        if note:
            profile.notes.append(note)
