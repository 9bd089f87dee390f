import torch

from evalsvc.core.stats import precise_enough, summarize
from evalsvc.engine.compare import compare


def test_summary_statistics() -> None:
    s = summarize([float(x) for x in range(1, 101)], "test")
    assert s.median_ms == 50.5 and s.n == 100 and s.ci95_low_ms < 50.5 < s.ci95_high_ms
    assert not precise_enough([1.0, 2.0, 3.0], 0.01, 10)
    assert precise_enough([1.0] * 20, 0.01, 10)


def test_compare_checks_structure_dtype_values_and_nans() -> None:
    r = torch.randn(4, 4)
    assert compare(r.clone(), r, 1e-2, 1e-2).passed
    assert "shape" in (compare(r[:2], r, 1e-2, 1e-2).message or "")
    assert "dtype" in (compare(r.double(), r, 1e-2, 1e-2).message or "")
    assert not compare((r, r), r, 1e-2, 1e-2).passed
    bad = r.clone()
    bad[0, 0] = float("nan")
    assert "NaN" in (compare(bad, r, 1e-2, 1e-2).message or "")
    off = r + 1.0
    res = compare(off, r, 1e-2, 1e-2)
    assert not res.passed and res.max_abs_err is not None and res.max_abs_err > 0.99


def test_relative_check_refuses_zeros_on_tiny_outputs() -> None:
    tiny = torch.randn(1000) * 1e-5
    assert compare(torch.zeros_like(tiny), tiny, 1e-2, 1e-2).passed  # the trap
    assert not compare(torch.zeros_like(tiny), tiny, 1e-2, 1e-2, relative=True).passed
