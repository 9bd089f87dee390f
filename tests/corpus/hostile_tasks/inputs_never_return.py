# trick: get_inputs never returns
# expect: internal_error
# failure: task_invalid
# candidate: ok
# message: did not finish
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    while True:
        pass


def get_init_inputs():
    return []
