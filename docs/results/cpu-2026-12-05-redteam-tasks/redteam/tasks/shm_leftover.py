# The module body writes files into /dev/shm (writable in the task's view); do they outlive the task?
import os
import torch
import torch.nn as nn

for i in range(3):
    with open(f"/dev/shm/redteam-leftover-{i}", "wb") as f:
        f.write(b"\xab" * (64 * 1024 * 1024))
    os.chmod(f"/dev/shm/redteam-leftover-{i}", 0o666)


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
