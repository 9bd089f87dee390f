import torch
import torch.nn as nn


class Model(nn.Module):
    """Degenerate: fresh noise on every call (hidden randomness), so no answer is reproducible."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x @ x.T) + torch.randn(x.shape[0], x.shape[0])


def get_inputs():
    return [torch.randn(256, 256)]


def get_init_inputs():
    return []
