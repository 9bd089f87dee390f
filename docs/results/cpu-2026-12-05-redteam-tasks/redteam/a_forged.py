"""Forged replies from a task's process: MODE in vet_nan, profile_nan, huge_header, bad_types, work_nan."""
import json, os, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from redteam.common import *  # noqa

MODE = sys.argv[1]
HUGE = int(float(sys.argv[2])) if len(sys.argv) > 2 else 4 * 1024**3

if __name__ == "__main__":
    token = plant()
    pipe = pipeline(call_timeout_s=30.0)
    src = (ROOT / "redteam/tasks/forged_replies.py").read_text().replace("MODE_HERE", MODE).replace("HUGE_HERE", str(HUGE))
    t = task(src)
    judge = pipe.evaluator.judge
    try:
        if MODE == "vet_nan":
            from evalsvc.core.pools import VetPolicy, VetRecord
            rec = judge.vet(t, VetPolicy(), "cpu")
            print("judge.vet returned:", rec)
            dumped = rec.model_dump_json()
            print("as stored (PoolStore.put_vet = model_dump_json):", dumped)
            try:
                VetRecord.model_validate_json(dumped)
                print("reads back fine")
            except Exception as e:
                print("PoolStore.vets() read-back FAILS:", type(e).__name__, str(e).splitlines()[0:3])
            # the real store on a scratch Redis db: a suite of an honest task and this one
            from evalsvc.service.pools import PoolStore

            class _Dict:  # the two Redis calls put_vet/vets make (no shared Redis touched)
                def __init__(self): self.d = {}
                def set(self, k, v, **kw): self.d[k] = v; return True
                def mget(self, ks): return [self.d.get(k) for k in ks]
                def flushdb(self): self.d.clear()
            r = _Dict()
            ps = PoolStore(r)
            honest_rec = rec.model_copy(update={"task_id": "t_honest_other_tenant", "vetted_at": time.time(), "eager_ms": 1.0, "compiled_ms": 1.0, "duration_s": 1.0})
            ps.put_vet(honest_rec); ps.put_vet(rec)
            try:
                print("vets([honest]) ->", list(ps.vets("cpu", ["t_honest_other_tenant"])))
                print("vets([honest, hostile]) ->", ps.vets("cpu", ["t_honest_other_tenant", rec.task_id]))
            except Exception as e:
                print("PoolStore.vets([honest, hostile]) RAISES:", type(e).__name__, str(e).splitlines()[0:2])
            finally:
                r.flushdb()
        elif MODE == "profile_nan":
            from evalsvc.core.profiles import ReferenceProfile
            prof = judge.profile(t)
            print("judge.profile returned task_id", prof.task_id, "eager:", prof.eager.model_dump() if hasattr(prof.eager, "model_dump") else prof.eager)
            from evalsvc.service.records import ProfileRecord
            print("ProfileRecord fields:", list(ProfileRecord.model_fields))
            dumped = prof.model_dump_json()
            try:
                ReferenceProfile.model_validate_json(dumped); print("reads back fine")
            except Exception as e:
                print("read-back FAILS:", type(e).__name__, str(e).splitlines()[0:3])
        else:
            hwm0 = my_hwm_mb()
            res = pipe.evaluate(t, cand(HONEST), opts())
            show(MODE, res, token)
            print(f"judge (this process) peak RSS: {hwm0:.0f} MiB before, {my_hwm_mb():.0f} MiB after")
            print("message:", (res.message or "")[:600])
        plain_check(pipe)
    finally:
        judge.close()
        unplant()
