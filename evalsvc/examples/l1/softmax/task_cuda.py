import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the last dimension of a 2-D tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


# The size CUDA solutions are judged at (task.py: the CPU cases' size), for about 0.3 ms of eager
# time on an H200, scaled from 59.3 µs eager at 1536x8192 (2026-12-04, run 15);
# `bench/gpu_vet.py --bundled` vets it there.
ROWS = 8192
COLS = 8192


def get_inputs():
    # Scaled so that each row has a few dominant entries: with plain randn every probability of
    # an 8192-wide row is below ~0.005, and atol=1e-2 could not tell a wrong softmax from a right one.
    return [torch.randn(ROWS, COLS) * 4.0]


def get_init_inputs():
    return []
