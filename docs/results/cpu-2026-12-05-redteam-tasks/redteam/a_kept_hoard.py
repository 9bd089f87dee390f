"""A task that hoards memory (children, memfds) and disk, then ends its evaluation: what is still held while
its process is kept? Runner memory limit lowered to 4 GiB so the overshoot is visible without risking the host."""
import subprocess, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from redteam.common import *  # noqa


def shmem_mb():
    for l in Path("/proc/meminfo").read_text().splitlines():
        if l.startswith("Shmem:"):
            return int(l.split()[1]) // 1024


if __name__ == "__main__":
    token = plant()
    pipe = pipeline(call_timeout_s=30.0, memory_bytes=4 * 1024**3)
    try:
        print("limit per process:", pipe.evaluator.judge.launcher.limits.memory_bytes // 1024**2, "MiB; Shmem before", shmem_mb(), "MiB")
        t = task((ROOT / "redteam/tasks/kept_hoard.py").read_text())
        show("kept_hoard", pipe.evaluate(t, cand(HONEST), opts()), token)
        p = pipe.evaluator.judge.tasks._processes[t.id]
        time.sleep(2)
        procs = uid_procs().get(p.handle.uid, [])
        print("task uid", p.handle.uid, "processes (pid,state,rss kB):", procs)
        print("total RSS of the kept task uid: %.0f MiB; Shmem now %s MiB" % (sum(r for *_, r in procs) / 1024, shmem_mb()))
        print(subprocess.run(["du", "-sh", str(p.handle.scratch)], capture_output=True, text=True).stdout.strip())
        plain_check(pipe, "next")
        print("still kept after two more evaluations:", t.id in pipe.evaluator.judge.tasks._processes,
              "RSS MiB", sum(r for *_, r in uid_procs().get(p.handle.uid, [])) // 1024, "Shmem", shmem_mb())
    finally:
        pipe.evaluator.judge.close()
        unplant()
    print("after close: Shmem", shmem_mb(), "MiB")
