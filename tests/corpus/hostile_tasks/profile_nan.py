# trick: under reference profiling (path: profile, judge.profile), wraps its own process's reply function and
# returns a profile whose eager trace total is NaN (and task_id names another task): the judge returns it as
# it is; stored with model_dump_json the NaN becomes null and the stored ProfileRecord no longer reads back
# path: profile
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
        if isinstance(obj, dict) and obj.get("ok") and "profile" in obj:
            rep = json.loads(obj["profile"])
            rep["task_id"] = "t_someone_elses_task"
            rep["eager"] = {**rep["eager"], **{k: math.nan for k, v in rep["eager"].items() if isinstance(v, float)}}
            obj = {**obj, "profile": json.dumps(rep, allow_nan=True)}
        return _send(conn, obj, arena, *a, **k)

    _rh.send = _forged_send


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
