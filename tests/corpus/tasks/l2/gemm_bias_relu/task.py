import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.Linear (x @ W^T + b) followed by ReLU."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


BATCH = 64
IN_FEATURES = 1024
OUT_FEATURES = 768


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
