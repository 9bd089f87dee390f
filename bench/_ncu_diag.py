"""Diagnostic only (not committed): why does ncu on a candidate exit 1 on the H200?"""
import os, shutil, subprocess, sys, tempfile, time
from pathlib import Path
import torch
from evalsvc.settings import Settings
from evalsvc.wiring import make_local_pipeline
from evalsvc.suite import cases
from evalsvc.engine.taskload import load_task
from evalsvc.engine.ncu import METRICS, find_ncu

s = Settings(device="cuda", data_dir=Path("/tmp/evalsvc-data"), compile_backend="process", profile_ncu=True)
pipe = make_local_pipeline(s, with_pch=False)
case = next(c for c in cases("cuda") if c.task_id == "l1/relu" and c.expect == "ok")
t0 = time.time(); out = pipe.compiler.compile(case.solution()); print("compiled", out.status, f"{time.time()-t0:.1f} s", flush=True)
lt = load_task(case.task())
dev = torch.device("cuda")
ref = lt.make_model(1, dev)
inputs = lt.make_inputs(1, dev)
load = pipe.evaluator.judge._load_message(lt, ref, False)
ncu = find_ncu(s.cuda_home)
print("ncu", ncu, "memory_bytes", s.runner_memory_bytes, flush=True)
base = Path(tempfile.mkdtemp(prefix="diag-", dir="/tmp"))
os.chmod(base, 0o755)
art = base / "artifact"
assert pipe.evaluator.store.fetch(out.artifact_key, art)
def job_dir(isolate):
    w = Path(tempfile.mkdtemp(prefix="w-", dir=base)); os.chmod(w, 0o755)
    shutil.copytree(art, w / "artifact")
    torch.save({**load, "inputs": [a.cpu() for a in inputs], "device": "cuda", "isolate": isolate, "memory_bytes": s.runner_memory_bytes}, w / "job.pt")
    return w
here = Path(__file__).resolve().parent / "_ncu_diag_target.py"
variants = [
    ("plain python, no ncu, isolate", False, True, ""),
    ("ncu, isolate, as shipped", True, True, ""),
    ("ncu, no isolate", True, False, ""),
    ("ncu, no isolate, no rlimits", True, False, "rlimits"),
    ("ncu, no isolate, no data limit", True, False, "data"),
    ("ncu, no isolate, no nofile limit", True, False, "nofile"),
    ("ncu, no isolate, env kept", True, False, "env"),
    ("ncu, no confine at all", True, False, "confine"),
    ("ncu, isolate, no rlimits", True, True, "rlimits"),
]
for name, use_ncu, isolate, skip in variants:
    w = job_dir(isolate)
    cmd = [sys.executable, str(here), str(w)]
    if use_ncu:
        cmd = [ncu, "--csv", "--page", "raw", "--print-units", "base", "--target-processes", "all", "--launch-count", "40", "--metrics", ",".join(METRICS), *cmd]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env={**os.environ, "DIAG_SKIP": skip}, cwd=w)
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, text = "timeout", str(e.stdout)[-1000:]
    log = (w / "candidate.log").read_text(errors="replace") if (w / "candidate.log").exists() else "(no candidate.log)"
    rows = text.count("relu")
    print(f"\n##### {name}: rc={rc} {time.time()-t0:.1f}s kernel-name mentions={rows}")
    print("--- output tail:\n" + text[-1200:])
    print("--- candidate.log tail:\n" + log[-1500:], flush=True)
