"""Shared harness for the red-team task attacks: one local pipeline (Docker compile, isolated CPU runner and
task processes), planted canaries, and helpers to look at what a task left behind."""
from __future__ import annotations

import json
import os
import secrets
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path("/var/tmp/evalsvc-redteam")
PLAIN = ROOT / "tests" / "corpus" / "hostile" / "task.py"
HONEST = ROOT / "evalsvc" / "examples" / "l1" / "relu" / "cpu_ok.py"
WRONG = ROOT / "evalsvc" / "examples" / "l1" / "relu" / "cpu_wrong.py"
CANARY_FILE = Path("/etc/evalsvc/redteam-canary")
DATA_CANARY = DATA / "redteam-canary"


def plant() -> str:
    token = "CANARY" + secrets.token_hex(12)
    os.environ["EVALSVC_REDTEAM_SECRET"] = token
    CANARY_FILE.parent.mkdir(parents=True, exist_ok=True)
    CANARY_FILE.write_text(token)
    CANARY_FILE.chmod(0o600)
    DATA.mkdir(parents=True, exist_ok=True)
    DATA_CANARY.write_text(token)
    DATA_CANARY.chmod(0o600)
    return token


def unplant() -> None:
    CANARY_FILE.unlink(missing_ok=True)
    DATA_CANARY.unlink(missing_ok=True)


def pipeline(call_timeout_s: float = 30.0, memory_bytes: int | None = None, load_timeout_s: float | None = None):
    import evalsvc
    assert evalsvc.__file__.startswith(str(ROOT)), evalsvc.__file__
    from evalsvc.settings import Settings
    from evalsvc.wiring import make_local_pipeline
    from evalsvc.engine.launcher import RunnerLimits

    settings = Settings(device="cpu", data_dir=DATA, compile_backend="docker", runner_isolation="process",
                        runner_call_timeout_s=call_timeout_s)
    pipe = make_local_pipeline(settings)
    lim = pipe.evaluator.judge.launcher.limits
    pipe.evaluator.judge.launcher.limits = RunnerLimits(
        memory_bytes=memory_bytes or lim.memory_bytes,
        load_timeout_s=load_timeout_s or lim.load_timeout_s,
        call_timeout_s=call_timeout_s)
    return pipe


def opts(**kw):
    from evalsvc.core.options import EvalOptions
    base = dict(trials=2, timing_budget_s=0.3, compile_baseline=False, timing_pool=2)
    base.update(kw)
    return EvalOptions(**base)


def task(src: str, **meta):
    from evalsvc.core.tasks import TaskSpec
    return TaskSpec(source=src, meta=meta) if meta else TaskSpec(source=src)


def cand(path: Path = HONEST):
    from evalsvc.core.solutions import Solution
    return Solution(files={"solution.py": path.read_text()})


def summary(res) -> dict:
    t = res.timings
    return {
        "status": res.status.value,
        "failure": res.failure.value if res.failure else None,
        "reward": res.reward,
        "message": (res.message or "")[:400],
        "cand_ms": t.candidate.median_ms if t and t.candidate else None,
        "eager_ms": t.eager.median_ms if t and t.eager else None,
        "eager_cached": t.eager_cached if t else None,
        "speedup": res.speedup.eager if res.speedup else None,
        "dur_s": round(res.duration_s or 0, 1),
    }


def show(label: str, res, token: str | None = None) -> dict:
    s = summary(res)
    if token is not None:
        s["canary_in_result"] = token in res.model_dump_json()
    print(f"[{time.strftime('%H:%M:%S')}] {label}: {json.dumps(s)}", flush=True)
    return s


def plain_check(pipe, label: str = "after") -> tuple[dict, dict]:
    src = PLAIN.read_text()
    h = show(f"{label} plain+honest", pipe.evaluate(task(src), cand(HONEST), opts()))
    w = show(f"{label} plain+wrong", pipe.evaluate(task(src), cand(WRONG), opts()))
    return h, w


def uid_procs() -> dict[int, list[tuple[int, str, int]]]:
    """(pid, state, rss_kb) by uid for the runner uid range (anything not root / system)."""
    out: dict[int, list] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = Path(f"/proc/{d}/status").read_text()
        except OSError:
            continue
        f = dict(l.split(":\t", 1) for l in st.splitlines() if ":\t" in l)
        uid = int(f["Uid"].split()[0])
        if uid < 10000:
            continue
        rss = int(f.get("VmRSS", "0 kB").split()[0]) if "VmRSS" in f else 0
        out.setdefault(uid, []).append((int(d), f["State"].split()[0], rss))
    return out


def my_hwm_mb() -> float:
    for l in Path("/proc/self/status").read_text().splitlines():
        if l.startswith("VmHWM"):
            return int(l.split()[1]) / 1024
    return -1
