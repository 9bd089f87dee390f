# trick: the module body leaves 6 spinning child processes; each forward sleeps, so the task's evaluation
# is long and its (running) process spins beside every other evaluation's timing on the worker meanwhile
import os
import time

import torch
import torch.nn as nn

for _ in range(6):
    if os.fork() == 0:
        while True:
            pass


class Model(nn.Module):
    def forward(self, x):
        time.sleep(3)
        return torch.relu(x)


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
