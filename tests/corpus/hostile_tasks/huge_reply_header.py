# trick: wraps its own process's reply function and answers the first 'inputs' request with a tensor header
# of 30 GiB and a 1-byte frame: the judge allocates (and zero-fills) a buffer of the header's size before the
# frame arrives (a 4 GiB header raised the judge's peak RSS by 4.1 GiB); 30 GiB raises MemoryError in the
# judge, reported as worker_error
# fixed: a pipe frame is read in pieces, so the judge's memory follows the bytes that arrive (was: 4.1 GiB
# committed for a 4 GiB header, MemoryError reported as worker_error for 30 GiB)
# expect: internal_error
# failure: task_invalid
# candidate: ok
import torch
import torch.nn as nn

import evalsvc.sandboxed.reference_host as _rh

HUGE = 30 * 1024**3

if not getattr(_rh, "_forged", False):
    _rh._forged = True
    from evalsvc.engine import codec

    _send = _rh.send

    def _forged_send(conn, obj, arena=None, *a, **k):
        if isinstance(obj, dict) and obj.get("ok") and "inputs" in obj:
            conn.send_bytes(codec.encode({"ok": True, "inputs": [{codec.MARK: 0, "dtype": "uint8", "shape": [HUGE]}]}))
            conn.send_bytes(b"x")
            return
        return _send(conn, obj, arena, *a, **k)

    _rh.send = _forged_send


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
