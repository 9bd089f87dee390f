import torch
import torch.nn as nn


class Model(nn.Module):
    """Broken: forward multiplies matrices whose shapes do not match."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ x


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return []
