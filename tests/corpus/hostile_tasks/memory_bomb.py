# trick: get_inputs allocates host memory without end
# expect: internal_error
# failure: task_invalid
# candidate: ok
# message: MemoryError
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    blocks = []
    while True:
        blocks.append(bytearray(256 * 1024 * 1024))


def get_init_inputs():
    return []
