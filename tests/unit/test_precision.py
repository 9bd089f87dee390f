"""The precision signature on real GEMM-class and reduction tasks: reduced-precision inputs are named,
honest fp32 reassociation and approximate functions are not."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from evalsvc.engine.precision import ROUNDINGS, ReferenceIn64, rounded_inputs


class GemmBiasRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(512, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


class Matmul(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


class SumReduce(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1)


class GeluTanh(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


def _blocked_matmul(a: torch.Tensor, b: torch.Tensor, block: int = 64) -> torch.Tensor:
    """fp32 with another summation order: partial products over K-blocks, summed in reverse."""
    parts = [a[:, k : k + block] @ b[k : k + block] for k in range(0, a.shape[1], block)]
    out = torch.zeros_like(parts[0])
    for p in reversed(parts):
        out = out + p
    return out


def _pairwise_sum(x: torch.Tensor) -> torch.Tensor:
    while x.shape[1] > 1:
        if x.shape[1] % 2:
            x = torch.cat([x, torch.zeros_like(x[:, :1])], dim=1)
        x = x[:, 0::2] + x[:, 1::2]
    return x[:, 0]


def _check(
    model: nn.Module, inputs: list[torch.Tensor], out: torch.Tensor, allowed: frozenset[str] = frozenset()
):
    with torch.no_grad():
        ref = model(*inputs)
    return rounded_inputs(ReferenceIn64(model), inputs, ref, out, allowed)


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.mark.parametrize("precision", ["bf16", "fp16", "tf32"])
def test_a_gemm_on_rounded_inputs_and_weights_is_named(precision: str) -> None:
    model = GemmBiasRelu().eval()
    x = torch.randn(128, 512)
    r = ROUNDINGS[precision]
    out = torch.relu(r(x).double() @ r(model.fc.weight).double().T + model.fc.bias.double()).float()
    found = _check(model, [x], out)
    assert found is not None and precision in found.precision.split(" or "), found
    assert found.rounded == "inputs and parameters" and precision in found.message()
    assert _check(model, [x], out, allowed=frozenset({precision})) is None  # the task allows it


def test_rounding_only_one_input_is_named() -> None:
    a, b = torch.randn(256, 384), torch.randn(384, 128)
    out = (ROUNDINGS["bf16"](a).double() @ b.double()).float()
    found = _check(Matmul(), [a, b], out)
    assert found is not None and (found.precision, found.rounded) == ("bf16", "input 0")


def test_honest_fp32_reassociation_passes() -> None:
    a, b = torch.randn(256, 1024), torch.randn(1024, 128)
    assert _check(Matmul(), [a, b], _blocked_matmul(a, b)) is None
    model = GemmBiasRelu().eval()
    x = torch.randn(64, 512)
    fused = torch.relu(torch.addmm(model.fc.bias, x, model.fc.weight.T)).detach()
    assert _check(model, [x], fused) is None
    x = torch.randn(64, 4096)
    assert _check(SumReduce(), [x], _pairwise_sum(x)) is None


def test_a_reduction_in_bf16_is_named_and_fp32_accumulation_is_not() -> None:
    x = torch.randn(64, 4096)
    found = _check(SumReduce(), [x], ROUNDINGS["bf16"](x).double().sum(dim=1).float())
    assert found is not None and found.precision == "bf16"


def test_rounding_half_of_the_k_blocks_is_named() -> None:
    """The red team's bf16_half_blocks: every other 128-wide block of K on bf16 operands."""
    model = GemmBiasRelu().eval()
    x, w = torch.randn(64, 512), model.fc.weight.detach()
    r = ROUNDINGS["bf16"]
    acc = model.fc.bias.detach().double().expand(64, 256).clone()
    for k in range(0, 512, 128):
        xs, ws = x[:, k : k + 128], w[:, k : k + 128]
        if (k // 128) % 2 == 0:
            xs, ws = r(xs), r(ws)
        acc += xs.double() @ ws.double().T
    found = _check(model, [x], torch.relu(acc).float())
    assert found is not None and found.precision == "bf16", found
    assert 0.3 < found.share < 0.7


def test_an_approximate_function_is_not_called_reduced_precision() -> None:
    x = torch.randn(64, 1024) * 3
    inner = 0.7978845608028654 * (x + 0.044715 * x**3)
    approx_tanh = torch.tanh(inner) * (
        1 + 2.0**-11 * torch.sign(torch.randn_like(x))
    )  # tanh.approx.f32's error
    out = 0.5 * x * (1 + approx_tanh)
    assert _check(GeluTanh(), [x], out) is None
