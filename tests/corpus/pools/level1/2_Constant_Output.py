import torch
import torch.nn as nn


class Model(nn.Module):
    """Degenerate: the output ignores the input, so a constant passes."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.full_like(x, 2.0) + 0.0 * x.sum()


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return []
