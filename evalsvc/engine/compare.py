"""Compare candidate and reference outputs in the judge: structure, shape, dtype, then values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class Comparison:
    passed: bool
    message: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None


def _flatten(obj: Any, path: str = "out") -> list[tuple[str, Any]]:
    if isinstance(obj, list | tuple):
        return [item for i, o in enumerate(obj) for item in _flatten(o, f"{path}[{i}]")]
    return [(path, obj)]


def compare(candidate: Any, reference: Any, atol: float, rtol: float, relative: bool = False) -> Comparison:
    cand, ref = _flatten(candidate), _flatten(reference)
    if len(cand) != len(ref):
        return Comparison(False, f"output has {len(cand)} parts, reference has {len(ref)}")
    worst_abs = worst_rel = 0.0
    for (path, c), (_, r) in zip(cand, ref, strict=True):
        if not isinstance(r, torch.Tensor):
            if c != r:
                return Comparison(False, f"{path}: {c!r} != reference {r!r}")
            continue
        if not isinstance(c, torch.Tensor):
            return Comparison(False, f"{path} is {type(c).__name__}, reference is a tensor")
        if c.shape != r.shape:
            return Comparison(False, f"{path} shape {tuple(c.shape)} != reference {tuple(r.shape)}")
        if c.dtype != r.dtype:
            return Comparison(False, f"{path} dtype {c.dtype} != reference {r.dtype}")
        if c.device.type != r.device.type:
            return Comparison(False, f"{path} on {c.device.type}, reference on {r.device.type}")
        res = _values(path, c, r, atol, rtol, relative)
        worst_abs = max(worst_abs, res.max_abs_err or 0.0)
        worst_rel = max(worst_rel, res.max_rel_err or 0.0)
        if not res.passed:
            return res
    return Comparison(True, None, worst_abs, worst_rel)


def _values(
    path: str, c: torch.Tensor, r: torch.Tensor, atol: float, rtol: float, relative: bool
) -> Comparison:
    if not r.is_floating_point() and not r.is_complex():
        ok = torch.equal(c, r)
        return Comparison(ok, None if ok else f"{path}: integer/bool values differ", 0.0, 0.0)
    nan_c, nan_r = torch.isnan(c), torch.isnan(r)
    if not torch.equal(nan_c, nan_r):
        where = (
            "NaN where the reference has none"
            if (nan_c & ~nan_r).any()
            else "a number where the reference has NaN"
        )
        return Comparison(False, f"{path}: {where}")
    inf_r = torch.isinf(r)
    if not torch.equal(torch.isinf(c), inf_r) or not torch.equal(c[inf_r], r[inf_r]):
        return Comparison(False, f"{path}: Inf values do not match the reference")
    # float32 holds the difference of two float32/16 values to within an ulp of the difference itself,
    # which is far inside any tolerance; float64 only where the outputs are float64 or complex.
    work = torch.float64 if r.dtype in (torch.float64, torch.complex64, torch.complex128) else torch.float32
    c_w, r_w = c.to(work), r.to(work)
    if bool((nan_r | inf_r).any()):
        finite = ~(nan_r | inf_r)
        c_w, r_w = c_w[finite], r_w[finite]
    diff = (c_w - r_w).abs()
    ref_abs = r_w.abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    max_rel = float((diff / ref_abs.clamp_min(1e-12)).max()) if diff.numel() else 0.0
    if relative:
        norm_err = float(torch.linalg.vector_norm(diff, dtype=torch.float64)) / max(
            float(torch.linalg.vector_norm(r_w, dtype=torch.float64)), 1e-30
        )
        ok = norm_err <= rtol
        msg = None if ok else f"{path}: relative error |out-ref|/|ref| = {norm_err:.3g} > {rtol:g}"
        return Comparison(ok, msg, max_abs, max_rel)
    bad = diff > atol + rtol * ref_abs
    if bool(bad.any()):
        n_bad = int(bad.sum())
        return Comparison(
            False,
            f"{path}: {n_bad} of {diff.numel()} values outside atol={atol:g} rtol={rtol:g} "
            f"(max abs err {max_abs:.3g})",
            max_abs,
            max_rel,
        )
    return Comparison(True, None, max_abs, max_rel)
