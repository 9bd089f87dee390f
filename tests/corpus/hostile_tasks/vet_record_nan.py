# trick: under vetting (path: vet, judge.vet), wraps its own process's reply function and returns a vet record
# with vetted_at=NaN, duration_s=NaN, eager_ms=inf, compiled_ms=-inf: the judge passes the record through
# (it overrides only task_id and device_class); stored with model_dump_json the NaN becomes null, and
# PoolStore.vets() then raises ValidationError for every suite listing that includes this task
# path: vet
# expect: internal_error
# failure: task_invalid
# candidate: ok
import json
import math

import torch
import torch.nn as nn

import evalsvc.sandboxed.reference_host as _rh

if not getattr(_rh, "_forged", False):
    _rh._forged = True
    _send = _rh.send

    def _forged_send(conn, obj, arena=None, *a, **k):
        if isinstance(obj, dict) and obj.get("ok") and "record" in obj:
            rec = json.loads(obj["record"])
            rec.update(vetted_at=math.nan, eager_ms=math.inf, compiled_ms=-math.inf, duration_s=math.nan)
            obj = {**obj, "record": json.dumps(rec, allow_nan=True)}
        return _send(conn, obj, arena, *a, **k)

    _rh.send = _forged_send


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
