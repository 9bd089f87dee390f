# trick: wraps its own process's reply function and answers the first 'inputs' request with only the start
# of a message header frame: multiprocessing's length prefix claiming 8 GiB, then one byte, then nothing.
# The judge waits for the header's first bytes under the watchdog (conn.poll), but then reads the header
# frame with conn.recv_bytes(), which has no timeout and no size bound (codec.receive bounds tensor frames
# and MAX_MESSAGE_BYTES, not the header): the judge blocks in os.read for ever, holding the task process's
# lock, so the evaluation never ends and the worker judges nothing more. Streaming the header instead of
# stalling makes the judge buffer as many bytes as the task sends (no cap), for a task process of a few MB.
# measured (pre-fix, call timeout 15 s): the evaluation never returned; a faulthandler dump at 150 s showed
# the judge in multiprocessing Connection._recv -> os.read, from codec._receive <- RunnerHandle.request <-
# Reference.inputs <- Judge._task_quality; pytest-timeout failed the test at 605 s ("1 failed in 605.22s").
# No memory grew (the task sent 13 bytes).
# fixed: a header frame is read in pieces by the call's deadline (TimeoutError: the task's process is killed)
# and refused past MAX_HEADER_BYTES (64 MiB; the 8 GiB claim of the first version is refused at once, in
# tests/unit/test_codec.py); this case now claims 4 KiB, so that it meets the deadline
# expect: internal_error
# failure: task_invalid
# candidate: ok
# message: did not finish
import os
import struct

import torch
import torch.nn as nn

import evalsvc.sandboxed.reference_host as _rh

if not getattr(_rh, "_stalled", False):
    _rh._stalled = True
    _send = _rh.send

    def _stalling_send(conn, obj, arena=None, *a, **k):
        if isinstance(obj, dict) and obj.get("ok") and "inputs" in obj:
            os.write(conn.fileno(), struct.pack("!i", 4096) + b"\x80")
            return  # the server loop waits for the judge's next message, which never comes
        return _send(conn, obj, arena, *a, **k)

    _rh.send = _stalling_send


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
