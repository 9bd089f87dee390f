"""The process Nsight Compute starts: load one candidate artifact, run it twice on one input set, exit.

Untrusted code runs here, so before the candidate is imported the process takes the runner's rlimits,
its own session, the sandbox uid and a scrubbed environment (ncu's injection variables kept). CUDA is
initialised first, while ncu's injected library can still load.
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

import torch


def _ncu_variables() -> dict[str, str]:
    keep = ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "LD_PRELOAD", "LD_LIBRARY_PATH")
    return {k: v for k, v in os.environ.items() if k in keep or k.startswith(("NV_", "NSIGHT"))}


def _confine(workdir: Path, isolate: bool, memory_bytes: int, uid: int) -> None:
    from evalsvc.sandbox.isolation import die_with_parent, drop_privileges
    from evalsvc.sandbox.memory_bound import first_to_kill
    from evalsvc.sandboxed.runner import runner_environment

    die_with_parent()
    # ncu's report is this process's stdout: the candidate writes to a log instead, so it cannot forge rows
    log = os.open(workdir / "candidate.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    for res, value in (
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NOFILE, 256),
        (resource.RLIMIT_DATA, memory_bytes),
        (resource.RLIMIT_FSIZE, 256 << 20),
    ):
        resource.setrlimit(res, (value, value))
    keep = _ncu_variables()
    if isolate:
        first_to_kill()
        for root, dirs, files in os.walk(workdir):
            for name in dirs + files:
                os.chown(os.path.join(root, name), uid, uid)
        os.chown(workdir, uid, uid)
        drop_privileges(uid)
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update({**runner_environment(str(workdir)), **keep})


def main(workdir: Path) -> None:
    job = torch.load(workdir / "job.pt", weights_only=True)
    device = torch.device(job["device"])
    if device.type == "cuda":
        device = torch.device("cuda", device.index or 0)  # set_device refuses a bare "cuda"
        torch.cuda.set_device(device)
        torch.empty(1, device=device)  # a context (ncu attaches) without a kernel launch
    _confine(workdir, bool(job["isolate"]), int(job["memory_bytes"]), int(job["uid"]))
    from evalsvc.sandboxed.runner import Candidate

    torch.backends.cuda.matmul.allow_tf32 = bool(job.get("tf32", False))
    inputs = [a.to(device) if isinstance(a, torch.Tensor) else a for a in job["inputs"]]
    candidate = Candidate(workdir / "artifact", device)
    candidate.load(job["init_inputs"], job["state_dict"])
    for _ in range(2):
        candidate.forward(*inputs)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


if __name__ == "__main__":
    main(Path(sys.argv[1]))  # a normal exit, so ncu's injected library finishes its report
