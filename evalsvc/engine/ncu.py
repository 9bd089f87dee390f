"""Nsight Compute on a candidate: a fixed, small metric set for its first kernels, as an optional step.

ncu must start the profiled process itself, so this is not the runner: the judge writes the load message
and one input set into a fresh scratch directory and runs `ncu ... python -m evalsvc.sandboxed.ncu_target`
on it with a wall-clock limit. The target drops to the sandbox uid with the runner's rlimits but keeps
its network and mount namespaces (ncu's injected library talks to the ncu process), which is why the step
is off unless `EVALSVC_PROFILE_NCU` is set. Every number it yields is display-only.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from evalsvc.core.profiles import NcuKernel, ncu_limiter
from evalsvc.engine.messages import LoadRequest
from evalsvc.sandbox.isolation import untrusted_file_tail
from evalsvc.sandbox.template_env import template_environment

METRICS = {
    "gpu__time_duration.sum": "duration",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "launch__registers_per_thread": "registers",
    "launch__shared_mem_per_block_static": "smem_static",
    "launch__shared_mem_per_block_dynamic": "smem_dynamic",
    "smsp__sass_inst_executed_op_local_ld.sum": "local_ld",
    "smsp__sass_inst_executed_op_local_st.sum": "local_st",
}
MAX_KERNELS = 5


def find_ncu(cuda_home: str) -> str | None:
    found = shutil.which("ncu")
    if found:
        return found
    candidate = Path(cuda_home) / "bin" / "ncu"
    return str(candidate) if candidate.is_file() else None


@dataclass(frozen=True)
class NcuProbe:
    ncu: str
    scratch_root: Path
    isolate: bool
    memory_bytes: int
    timeout_s: float = 120.0
    launch_count: int = 40

    def profile(
        self, artifact: Path, load: LoadRequest, inputs: list[Any], device: torch.device, uid: int
    ) -> tuple[list[NcuKernel], str | None]:
        """The metric rows of the first launch of each kernel, or none and why. `uid`: the one the
        candidate's runner had (never the spare runner's)."""
        work = Path(tempfile.mkdtemp(prefix="evalsvc-ncu-", dir=self.scratch_root))
        try:
            self.stage(work, artifact, load, inputs, device, uid)
            cmd = [
                self.ncu, "--csv", "--page", "raw", "--print-units", "base", "--target-processes", "all",
                "--launch-count", str(self.launch_count), "--metrics", ",".join(METRICS),
                *target_command(work),
            ]  # fmt: skip
            proc = subprocess.Popen(  # the target inherits ncu's environment: the template's, no secret
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=work,
                env=template_environment(os.environ),
            )
            try:
                out, _ = proc.communicate(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                return [], f"Nsight Compute did not finish within {self.timeout_s:.0f} s"
            text = out.decode(errors="replace")
            kernels = parse_ncu_csv(text)
            if not kernels:
                why = "Nsight Compute reported no kernels: " + _ncu_error(text, proc.returncode)
                return [], why + _log_tail(work / "candidate.log")
            return kernels, None
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def stage(
        self,
        work: Path,
        artifact: Path,
        load: LoadRequest,
        inputs: list[Any],
        device: torch.device,
        uid: int,
    ) -> None:
        """Everything the target process reads: the artifact and one job file (load message, inputs)."""
        shutil.copytree(artifact, work / "artifact")
        job = {
            **load,
            "inputs": [a.cpu() if isinstance(a, torch.Tensor) else a for a in inputs],
            "device": str(device),
            "isolate": self.isolate,
            "uid": uid,
            "memory_bytes": self.memory_bytes,
        }
        torch.save(job, work / "job.pt")


def target_command(work: Path) -> list[str]:
    """The process ncu starts (and a test can start without ncu)."""
    return [sys.executable, "-m", "evalsvc.sandboxed.ncu_target", str(work)]


def _ncu_error(text: str, code: int | None) -> str:
    lines = [ln.strip() for ln in text.splitlines() if "==ERROR==" in ln or "==WARNING==" in ln]
    if any("ERR_NVGPUCTRPERM" in ln for ln in lines):
        return "no permission for GPU performance counters (NVreg_RestrictProfilingToAdminUsers)"
    return (" | ".join(lines[:3]) or f"exit code {code}: {text.strip()[-300:]}")[:500]


def _log_tail(log: Path) -> str:
    """The profiled process's last words (its traceback, or the candidate's own output): why it exited."""
    tail = untrusted_file_tail(log, 400).decode(errors="replace").strip()
    return f"; the profiled process wrote: {tail}" if tail else ""


def _num(s: str | None) -> float | None:
    if s is None:
        return None
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> list[NcuKernel]:
    """`ncu --csv --page raw` output: a header row, a units row, one row per profiled launch."""
    start = text.find('"ID"')
    if start < 0:
        return []
    rows = list(csv.reader(io.StringIO(text[start:])))
    if len(rows) < 3:
        return []
    header, units = rows[0], rows[1]
    col = {name: i for i, name in enumerate(header)}
    if "Kernel Name" not in col:
        return []
    seen: dict[str, NcuKernel] = {}
    for row in rows[2:]:
        if len(row) != len(header):
            continue
        name = row[col["Kernel Name"]]
        if name in seen:
            continue
        vals = {key: _num(row[col[m]]) if m in col else None for m, key in METRICS.items()}
        dur_unit = units[col["gpu__time_duration.sum"]] if "gpu__time_duration.sum" in col else "ns"
        dur = vals["duration"]
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
        smem = [v for v in (vals["smem_static"], vals["smem_dynamic"]) if v is not None]
        spills = [v for v in (vals["local_ld"], vals["local_st"]) if v is not None]
        seen[name] = NcuKernel(
            name=name[:160],
            duration_us=dur * scale.get(dur_unit, 1e-3) if dur is not None else None,
            dram_pct=vals["dram_pct"],
            sm_pct=vals["sm_pct"],
            memory_pct=vals["memory_pct"],
            occupancy_pct=vals["occupancy_pct"],
            registers=int(vals["registers"]) if vals["registers"] is not None else None,
            shared_bytes=int(sum(smem)) if smem else None,
            local_spill_requests=sum(spills) if spills else None,
            limiter=ncu_limiter(vals["sm_pct"], vals["memory_pct"]),
        )
    ranked = sorted(seen.values(), key=lambda k: -(k.duration_us or 0.0))
    return ranked[:MAX_KERNELS]
