# trick: get_inputs asks for 400 GB
# expect: internal_error
# failure: task_invalid
# candidate: ok
# message: 400.0 GB
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.empty(100_000_000_000)]


def get_init_inputs():
    return []
