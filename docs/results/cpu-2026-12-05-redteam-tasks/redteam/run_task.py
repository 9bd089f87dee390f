"""Evaluate one task file (with the honest or wrong relu candidate), then the plain relu task honest+wrong.
usage: run_task.py TASK.py [ok|wrong]"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from redteam.common import *  # noqa

if __name__ == "__main__":
    token = plant()
    pipe = pipeline()
    try:
        src = Path(sys.argv[1]).read_text()
        which = HONEST if (len(sys.argv) < 3 or sys.argv[2] == "ok") else WRONG
        res = pipe.evaluate(task(src), cand(which), opts())
        s = show(Path(sys.argv[1]).stem, res, token)
        if "--full" in sys.argv:
            print(res.message)
        print("procs by uid after:", uid_procs())
        plain_check(pipe)
    finally:
        pipe.evaluator.judge.close()
        unplant()
