# trick: each forward sleeps 3 s (inside every watchdog): the task's eager baseline is timed under quiet()
# (the device alone, timeout load_timeout*3 + 4*budget = 380 s in service), so every other evaluation on the
# worker waits for it (an honest evaluation beside it took 142.7 s instead of ~1 s)
# expect: internal_error
# failure: task_invalid
# candidate: ok
import time

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        time.sleep(3)
        return torch.relu(x)


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
