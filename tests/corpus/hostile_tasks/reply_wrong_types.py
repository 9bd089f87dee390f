# trick: wraps its own process's reply function and answers 'model' with a state_dict that is a list: the
# judge's Reference() calls .items() on it and the AttributeError escapes as an internal worker_error ("a bug
# of ours", with the judge's traceback) instead of the task's own failure
# expect: internal_error
# failure: task_invalid
# candidate: ok
import torch
import torch.nn as nn

import evalsvc.sandboxed.reference_host as _rh

if not getattr(_rh, "_forged", False):
    _rh._forged = True
    _send = _rh.send

    def _forged_send(conn, obj, arena=None, *a, **k):
        if isinstance(obj, dict) and obj.get("ok") and "state_dict" in obj:
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
