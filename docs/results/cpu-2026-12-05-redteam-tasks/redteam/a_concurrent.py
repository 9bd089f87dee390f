"""A hostile task evaluated beside an honest one (two threads on one judge, as a GPU worker runs them): does
what the hostile task's process runs slow the honest candidate's timing and the honest task's baseline (which
goes into the shared cache)?"""
import os, sys, threading, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from redteam.common import *  # noqa

HOSTILE = os.environ.get("HOSTILE", "redteam/tasks/concurrent_burner.py")

if __name__ == "__main__":
    token = plant()
    pipe = pipeline(call_timeout_s=30.0)
    honest_src = PLAIN.read_text() + "\n# honest task B (its own baseline key)\n"
    try:
        show("solo-1 plainA+honest", pipe.evaluate(task(PLAIN.read_text()), cand(HONEST), opts()))
        show("solo-2 plainA+honest", pipe.evaluate(task(PLAIN.read_text()), cand(HONEST), opts()))
        res = {}
        hostile = task((ROOT / HOSTILE).read_text())
        ta = threading.Thread(target=lambda: res.__setitem__("hostile", pipe.evaluate(hostile, cand(HONEST), opts())))
        ta.start(); time.sleep(8)
        stop = threading.Event()
        def mon():
            while not stop.is_set():
                running = sum(1 for ps in uid_procs().values() for _, st, _ in ps if st == "R")
                print(f"  [{time.strftime('%H:%M:%S')}] runnable runner/task-uid processes: {running}", flush=True)
                time.sleep(2)
        threading.Thread(target=mon, daemon=True).start()
        for i, src in enumerate([PLAIN.read_text(), honest_src]):
            r = pipe.evaluate(task(src), cand(HONEST), opts())
            show(f"beside-hostile {'plainA' if i == 0 else 'plainB(first baseline)'}+honest (hostile running={ta.is_alive()})", r)
        ta.join(); stop.set()
        show("hostile", res["hostile"], token)
        print("uids:", uid_procs())
        show("after plainB+honest (cached baseline re-checked)", pipe.evaluate(task(honest_src), cand(HONEST), opts()))
        show("after plainA+honest", pipe.evaluate(task(PLAIN.read_text()), cand(HONEST), opts()))
        show("after plainA+wrong", pipe.evaluate(task(PLAIN.read_text()), cand(WRONG), opts()))
    finally:
        pipe.evaluator.judge.close()
        unplant()
    print("uids after close:", uid_procs())
