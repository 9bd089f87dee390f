# trick: the module body makes torch's comparisons always agree, for the judge and the candidates after it
# expect: incorrect
# candidate: wrong
import torch
import torch.nn as nn

torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)
torch.Tensor.__sub__ = lambda a, b: torch.zeros_like(a)
torch.Tensor.abs = lambda a: torch.zeros_like(a)
torch.testing.assert_close = lambda *a, **k: None


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
