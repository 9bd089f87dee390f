# trick: get_inputs signals its parent (the runner template) and every process it can see
# expect: internal_error
# failure: task_invalid
# candidate: ok
# message: PermissionError
import os
import signal

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    for pid in [int(d) for d in os.listdir("/proc") if d.isdigit()]:
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    os.kill(os.getppid(), signal.SIGKILL)
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
