# trick: the module body leaves a spinning thread and a spinning child process behind, to slow the timings
# of every evaluation after it on this worker
# expect: ok
# candidate: ok
# kept: stopped
import os
import threading

import torch
import torch.nn as nn


def _spin():
    while True:
        pass


threading.Thread(target=_spin, daemon=True).start()
if os.fork() == 0:
    _spin()


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
