# trick: seals the shared arena against growth, answers the judge's first seeded forward with "evicted" and
# never reads its pipe again: the judge sends the 16 MB input set as pipe frames and blocks in send() (no
# watchdog on a send), holding the task process's lock and its share of the device, so every other
# evaluation's timing on the worker waits forever
# expect: internal_error
# failure: task_invalid
# candidate: ok
# fixed: the arena cannot be sealed by the task, and a send is under the watchdog too (was: never returned)
# message: did not finish
import fcntl
import sys
import time

import torch
import torch.nn as nn

F_ADD_SEALS, F_SEAL_GROW = 1033, 0x0004


def _server():
    f = sys._getframe()
    while f is not None:
        s = f.f_locals.get("self")
        if type(s).__name__ == "ReferenceServer":
            return s
        f = f.f_back
    return None


_srv = _server()
if _srv is not None:
    if _srv.arena is not None:
        try:  # refused since the fix (the arena is sealed against seals): the rest of the trick goes on
            fcntl.fcntl(_srv.arena.fd, F_ADD_SEALS, F_SEAL_GROW)
        except OSError:
            pass
    from evalsvc.engine.codec import send as _send

    _orig = _srv.handle

    def _handle(msg):
        if msg.get("op") == "forward" and "inputs" not in msg:
            _send(_srv.conn, {"ok": False, "kind": "evicted", "error": "gone"}, _srv.arena)
            while True:  # never read the judge's next message
                time.sleep(3600)
        return _orig(msg)

    _srv.handle = _handle


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(2048, 2048)]


def get_init_inputs():
    return []
