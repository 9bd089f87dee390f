"""What arithmetic a candidate used, from its outputs: does it compute as if its inputs were rounded to a
lower precision (bf16, fp16 or TF32 on the GPU's matrix units) on a task that asks for fp32?

A tolerance cannot tell: on a GEMM of normal inputs, bf16 inputs give errors near 1e-3, inside the usual
atol=rtol=1e-2. Reduced-precision inputs leave a signature instead: the candidate's deviation from the exact
result (the reference in float64) points the way rounding its inputs moves the result, even where only
part of the work was rounded (a red-team kernel rounded every other block of K to bf16 and passed a test
of whole-tensor matches). Honest fp32 arithmetic (any summation order, fused multiply-add, blocked
reductions) stays as close to the exact result as float32 gets; an approximate function (tanh.approx,
fast-math exp) is off it in a direction unrelated to any rounding of the inputs. Checked on one trial, in
the judge, with the reference's own module in float64. Not caught: rounding that is not to nearest in a
way uncorrelated with it (stochastic rounding), which no tensor core offers for speed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from evalsvc.engine.commitment import output_tensors

# An output that sits well off the exact result (OFF_BY times float32's own error there) and whose
# deviation follows the effect of rounding the inputs to a precision (cosine at least MIN_CORRELATION,
# carrying at least MIN_SHARE of that effect) computes with inputs of that precision, in all or in part.
# Honest float32 errors and approximate functions are not correlated with a rounding's effect.
OFF_BY = 16.0
MIN_CORRELATION = 0.3
MIN_SHARE = 0.2
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
    share: float  # of the rounding's effect that the output carries
    correlation: float

    def message(self) -> str:
        return (
            f"the output is off the exact result (relative error {self.error_exact:.2g}) in the direction of "
            f"{self.rounded} rounded to {self.precision} (cosine {self.correlation:.2f}, about "
            f"{min(self.share, 1.0):.0%} of that rounding's effect): the kernel computes with "
            f"{self.precision} inputs, and this task asks for fp32 arithmetic (task meta `arithmetic`)"
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
    parameters alone) the candidate's output carries, or None. `reference_out` is the float32 reference's
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
    deviation = _flat(cand, exact)
    fits = {p: _best_fit(ref64, inputs, deviation, p) for p in ROUNDINGS}
    best = max(fits, key=lambda p: fits[p].correlation)
    fit = fits[best]
    if fit.share < MIN_SHARE or fit.correlation < MIN_CORRELATION:
        return None
    # fp16 and TF32 keep the same 10-bit mantissa: name every precision that fits as well as the best one,
    # and pass when one of them is allowed.
    alike = [p for p in ROUNDINGS if fits[p].correlation >= fit.correlation - 0.1]
    if any(p in allowed for p in alike):
        return None
    return PrecisionFinding(" or ".join(alike), fit.rounded, error_exact, fit.share, fit.correlation)


@dataclass(frozen=True)
class _Fit:
    rounded: str
    share: float  # how much of the rounding's effect the deviation carries (1: all of it)
    correlation: float  # cosine between the deviation and the rounding's effect


def _flat(a: list[torch.Tensor], b: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([(x.double() - y.double()).reshape(-1) for x, y in zip(a, b, strict=True)])


def _best_fit(ref64: ReferenceIn64, inputs: list[Any], deviation: torch.Tensor, precision: str) -> _Fit:
    """Which rounding of the inputs to `precision` the deviation from the exact result follows best: its
    projection on the rounding's own effect (rounded reference minus exact), as a share and a cosine."""
    rounding = ROUNDINGS[precision]
    floating = [i for i, x in enumerate(inputs) if _floating(x)]
    variants: list[tuple[str, torch.nn.Module, list[int]]] = [
        ("inputs and parameters", ref64.with_rounded_parameters(precision), floating)
    ]
    if len(floating) > 1 or ref64.has_parameters():
        variants += [(f"input {i}", ref64.exact, [i]) for i in floating]
    if ref64.has_parameters():
        variants.append(("parameters", ref64.with_rounded_parameters(precision), []))
    exact = _run(ref64.exact, inputs)
    fits = [_Fit("", 0.0, 0.0)]
    for rounded, model, which in variants:
        args = [rounding(x) if i in which else x for i, x in enumerate(inputs)]
        effect = _flat(_run(model, args), exact)
        norm = float(torch.linalg.vector_norm(effect))
        if norm == 0.0:
            continue  # inputs already exact at this precision: nothing to tell apart
        dot = float(torch.dot(deviation, effect))
        cosine = dot / (norm * max(float(torch.linalg.vector_norm(deviation)), 1e-300))
        fits.append(_Fit(rounded, dot / norm**2, cosine))
    return max(fits, key=lambda f: f.correlation)
