"""Wedge: a hostile task blocks the judge in send(); an honest evaluation started beside it waits for its
timing forever. After WAIT seconds we kill the task process ourselves (clean-up) and see both finish."""
import os, signal, sys, threading, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from redteam.common import *  # noqa

WAIT = float(os.environ.get("WAIT", "150"))

if __name__ == "__main__":
    token = plant()
    pipe = pipeline(call_timeout_s=30.0, load_timeout_s=30.0)
    results = {}
    try:
        # warm: compile the honest candidate once so the later honest run is fast
        show("warm plain+honest", pipe.evaluate(task(PLAIN.read_text()), cand(HONEST), opts()))
        hostile = task((ROOT / "redteam/tasks/wedge_send.py").read_text())
        t0 = time.monotonic()
        ta = threading.Thread(target=lambda: results.__setitem__("hostile", pipe.evaluate(hostile, cand(HONEST), opts())))
        ta.start()
        time.sleep(15)
        tb = threading.Thread(target=lambda: results.__setitem__("honest", pipe.evaluate(task(PLAIN.read_text()), cand(HONEST), opts())))
        tb.start()
        ta.join(WAIT); tb.join(1)
        print(f"after {time.monotonic()-t0:.0f}s: hostile done={not ta.is_alive()} honest done={not tb.is_alive()}", flush=True)
        import faulthandler; faulthandler.dump_traceback(file=sys.stdout, all_threads=True)
        procs = pipe.evaluator.judge.tasks._processes
        for k, p in list(procs.items()):
            print("task process", k[:12], "pid", p.handle.proc.pid, "users", p.users, flush=True)
        # clean-up: kill the hostile task's process (we started it)
        for k, p in list(procs.items()):
            if k == hostile.id:
                os.killpg(p.handle.proc.pid, signal.SIGKILL)
        ta.join(60); tb.join(120)
        for k, v in results.items():
            show(k, v, token)
        print(f"total {time.monotonic()-t0:.0f}s")
    finally:
        pipe.evaluator.judge.close()
        unplant()
