# trick: get_inputs connects to a listener on the host's loopback
# expect: internal_error
# failure: task_invalid
# candidate: ok
# message: get_inputs
import socket

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    with socket.create_connection(("127.0.0.1", 47614), timeout=2) as s:
        s.sendall(b"task was here")
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
