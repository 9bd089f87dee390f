import torch
import torch.nn as nn


class Model(nn.Module):
    """Sum over one dimension, keeping it (size 1)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


# The size CUDA solutions are judged at (task.py: the CPU cases' size), for about 0.3 ms of eager
# time on an H200, scaled from 80.3 µs eager at 16x4096x1024 (2026-12-04, run 15);
# `bench/gpu_vet.py --bundled` vets it there.
BATCH = 16
DIM1 = 16384
DIM2 = 1024  # 256M floats: 1 GB read per call
REDUCE_DIM = 1


def get_inputs():
    return [torch.randn(BATCH, DIM1, DIM2)]


def get_init_inputs():
    return [REDUCE_DIM]
