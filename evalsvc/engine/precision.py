"""What arithmetic a candidate used, from its outputs: does it compute as if its inputs were rounded to a
lower precision (bf16, fp16 or TF32 on the GPU's matrix units) on a task that asks for fp32?

A tolerance cannot tell: on a GEMM of normal inputs, bf16 inputs give errors near 1e-3, inside the usual
atol=rtol=1e-2. Reduced-precision inputs leave a signature instead: the candidate's output then agrees with
the reference computed (in float64) on inputs rounded to that precision far better than with the exact
reference. Honest fp32 arithmetic (any summation order, fused multiply-add, blocked reductions) sits close
to the exact reference and no closer to a rounded one; an approximate function (tanh.approx, fast-math
exp) is off both alike. Checked on one trial, in the judge, with the reference's own module in float64.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from evalsvc.engine.commitment import output_tensors

# How much closer to a rounded reference than to the exact one an output must be to be called rounded,
# and how far off the exact reference (in units of float32's own error there) before that is asked.
CLOSER = 8.0
OFF_BY = 16.0
EPS32 = 2.0**-24


def _round_tf32(t: torch.Tensor) -> torch.Tensor:
    """float32 rounded to TF32's 10-bit mantissa (to nearest), as tensor cores read it."""
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


ROUNDINGS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "bf16": lambda t: t.to(torch.bfloat16).to(torch.float32),
    "fp16": lambda t: t.to(torch.float16).to(torch.float32),
    "tf32": _round_tf32,
}


@dataclass(frozen=True)
class PrecisionFinding:
    precision: str
    rounded: str  # which inputs were rounded: "inputs and parameters", "input 0", "parameters"
    error_exact: float  # relative L2 error against the exact reference
    error_rounded: float  # against the reference on rounded inputs

    def message(self) -> str:
        return (
            f"the output matches the reference computed on {self.rounded} rounded to {self.precision} "
            f"(relative error {self.error_rounded:.2g}) far better than the exact reference "
            f"({self.error_exact:.2g}): the kernel computes with {self.precision} inputs, and this task asks "
            "for fp32 arithmetic (task meta `arithmetic` says what a task allows)"
        )


def _floating(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype == torch.float32


def _rel_error(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    num = sum(
        float(torch.linalg.vector_norm(x.double() - y.double())) ** 2 for x, y in zip(a, b, strict=True)
    )
    den = sum(float(torch.linalg.vector_norm(y.double())) ** 2 for y in b)
    return (num**0.5) / max(den**0.5, 1e-300)


class ReferenceIn64:
    """The task's reference module in float64, and variants of it with float32 parameters rounded."""

    def __init__(self, reference: torch.nn.Module) -> None:
        self.exact = copy.deepcopy(reference).double()
        self._rounded: dict[str, torch.nn.Module] = {}
        self._reference = reference

    def with_rounded_parameters(self, precision: str) -> torch.nn.Module:
        if precision not in self._rounded:
            m = copy.deepcopy(self._reference)
            with torch.no_grad():
                for p in [*m.parameters(), *m.buffers()]:
                    if p.dtype == torch.float32:
                        p.copy_(ROUNDINGS[precision](p))
            self._rounded[precision] = m.double()
        return self._rounded[precision]

    def has_parameters(self) -> bool:
        return any(p.dtype == torch.float32 for p in [*self.exact.parameters(), *self.exact.buffers()])


def _run(model: torch.nn.Module, inputs: list[Any]) -> list[torch.Tensor]:
    with torch.no_grad():
        out = model(*[x.double() if _floating(x) else x for x in inputs])
    return [t for t in output_tensors(out) if t.is_floating_point()]


def rounded_inputs(
    ref64: ReferenceIn64,
    inputs: list[Any],
    reference_out: Any,
    candidate_out: Any,
    allowed: frozenset[str],
) -> PrecisionFinding | None:
    """The precision whose rounding of the inputs (all floating inputs and parameters, one input, or the
    parameters alone) explains the candidate's output, or None. `reference_out` is the float32 reference's
    output on `inputs`: its distance from the float64 one is float32's own error on this task."""
    cand = [t for t in output_tensors(candidate_out) if t.is_floating_point()]
    ref32 = [t for t in output_tensors(reference_out) if t.is_floating_point()]
    if not cand or len(cand) != len(ref32) or any(t.dtype != torch.float32 for t in ref32):
        return None
    exact = _run(ref64.exact, inputs)
    error_exact = _rel_error(cand, exact)
    own_error = max(_rel_error(ref32, exact), EPS32)
    if error_exact <= OFF_BY * own_error:
        return None  # as close to the exact result as float32 itself gets here
    fits = {p: _best_fit(ref64, inputs, cand, p) for p in ROUNDINGS}
    best = min(fits, key=lambda p: fits[p][1])
    rounded, error_rounded = fits[best]
    if error_rounded * CLOSER >= error_exact:
        return None
    # fp16 and TF32 keep the same 10-bit mantissa: name every precision that fits as well as the best one,
    # and pass when one of them is allowed.
    alike = [p for p in ROUNDINGS if fits[p][1] <= 2 * error_rounded]
    if any(p in allowed for p in alike):
        return None
    return PrecisionFinding(" or ".join(alike), rounded, error_exact, error_rounded)


def _best_fit(
    ref64: ReferenceIn64, inputs: list[Any], cand: list[torch.Tensor], precision: str
) -> tuple[str, float]:
    """Which rounding of the inputs to `precision` explains `cand` best, and its relative error."""
    rounding = ROUNDINGS[precision]
    floating = [i for i, x in enumerate(inputs) if _floating(x)]
    variants: list[tuple[str, torch.nn.Module, list[int]]] = [
        ("inputs and parameters", ref64.with_rounded_parameters(precision), floating)
    ]
    if len(floating) > 1 or ref64.has_parameters():
        variants += [(f"input {i}", ref64.exact, [i]) for i in floating]
    if ref64.has_parameters():
        variants.append(("parameters", ref64.with_rounded_parameters(precision), []))
    fits = []
    for rounded, model, which in variants:
        args = [rounding(x) if i in which else x for i, x in enumerate(inputs)]
        fits.append((rounded, _rel_error(cand, _run(model, args))))
    return min(fits, key=lambda f: f[1])
