import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the last dimension of a 2-D tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


ROWS = 128
COLS = 8192


def get_inputs():
    # Scaled so that each row has a few dominant entries: with plain randn every probability of
    # an 8192-wide row is below ~0.005, and atol=1e-2 could not tell a wrong softmax from a right one.
    return [torch.randn(ROWS, COLS) * 4.0]


def get_init_inputs():
    return []
