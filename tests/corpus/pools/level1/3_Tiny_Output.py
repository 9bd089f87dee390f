import torch
import torch.nn as nn


class Model(nn.Module):
    """Degenerate: outputs around 1e-6, so all zeros pass atol=1e-2 (warn, judged relatively)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * 1e-6


def get_inputs():
    return [torch.randn(512, 2048)]


def get_init_inputs():
    return []
