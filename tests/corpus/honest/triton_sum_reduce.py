# style: Triton reduction: a column block per program, rows summed in tiles with tl.sum
# device: any
# task: l1/sum_reduce
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dim1_kernel(x_ptr, out_ptr, rows, cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    b = tl.program_id(0)
    cb = tl.program_id(1)
    c = cb * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros([BLOCK_C], dtype=tl.float32)
    base = x_ptr + b * rows * cols
    for r0 in range(0, rows, BLOCK_R):
        r = r0 + tl.arange(0, BLOCK_R)
        mask = (r[:, None] < rows) & (c[None, :] < cols)
        tile = tl.load(base + r[:, None] * cols + c[None, :], mask=mask, other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + b * cols + c, acc, mask=c < cols)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert self.dim == 1 and x.dim() == 3
        x = x.contiguous()
        batch, rows, cols = x.shape
        out = torch.empty((batch, 1, cols), dtype=x.dtype, device=x.device)
        grid = (batch, triton.cdiv(cols, 1024))
        sum_dim1_kernel[grid](x, out, rows, cols, BLOCK_R=64, BLOCK_C=1024)
        return out
