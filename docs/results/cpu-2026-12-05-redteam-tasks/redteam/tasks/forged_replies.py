# trick: the module body wraps its own process's reply function (reference_host.send) and answers the judge
# with forged data: MODE=vet_nan: a vet record with non-finite numbers; profile_nan: a reference profile with
# non-finite numbers; huge_header: a tensor header of HUGE bytes followed by a 1-byte frame (the judge sizes
# a buffer from the header before the frame arrives); bad_types: a state_dict that is a list
import math
import sys

import torch
import torch.nn as nn

MODE = "MODE_HERE"
HUGE = HUGE_HERE


import evalsvc.engine.reference_host as _rh

if not getattr(_rh, "_forged", False):
    _rh._forged = True
    from evalsvc.engine import codec
    import json

    _send = _rh.send

    def _forged_send(conn, obj, arena=None, *a, **k):
        if isinstance(obj, dict) and obj.get("ok"):
            if MODE == "vet_nan" and "record" in obj:
                rec = json.loads(obj["record"])
                rec.update(vetted_at=math.nan, eager_ms=math.inf, compiled_ms=-math.inf, duration_s=math.nan)
                obj = {**obj, "record": json.dumps(rec, allow_nan=True)}
            if MODE == "profile_nan" and "profile" in obj:
                rep = json.loads(obj["profile"])
                rep["task_id"] = "t_someone_elses_task"
                rep["eager"] = {**rep["eager"], **{k: math.nan for k, v in rep["eager"].items() if isinstance(v, float)}}
                if rep.get("roofline"):
                    rep["roofline"] = {**rep["roofline"], "peak_flops": math.nan, "floor_ms": math.inf}
                obj = {**obj, "profile": json.dumps(rep, allow_nan=True)}
            if MODE == "huge_header" and "inputs" in obj:
                marker = {codec.MARK: 0, "dtype": "uint8", "shape": [HUGE]}
                conn.send_bytes(codec.encode({"ok": True, "inputs": [marker]}))
                conn.send_bytes(b"x")
                return
            if MODE == "bad_types" and "state_dict" in obj:
                obj = {"ok": True, "state_dict": [1, 2, 3], "init_inputs": 5}
        return _send(conn, obj, arena, *a, **k)

    _rh.send = _forged_send


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
