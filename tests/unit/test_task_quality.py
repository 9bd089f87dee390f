"""Task-quality warnings: tasks whose outputs zeros or constants can match get a norm-relative check."""

from __future__ import annotations

import torch

from evalsvc.engine.compare import compare
from evalsvc.engine.taskload import quality_warnings


def test_tiny_outputs_warn_and_zeros_fail_the_relative_check() -> None:
    torch.manual_seed(0)
    a, b = torch.randn(1024) * 1e-8, torch.randn(1024) * 1e-8
    warnings = quality_warnings(a, b, atol=1e-2, rtol=1e-2)
    assert len(warnings) == 1 and "zero" in warnings[0]
    assert compare(torch.zeros_like(a), a, 1e-2, 1e-2).passed  # what the warning is about
    assert not compare(torch.zeros_like(a), a, 1e-2, 1e-2, relative=True).passed
    assert compare(a * (1 + 1e-4), a, 1e-2, 1e-2, relative=True).passed  # an honest answer still passes


def test_constant_outputs_warn() -> None:
    out = (torch.ones(16), torch.full((4,), 3.0))
    warnings = quality_warnings(out, out, atol=1e-2, rtol=1e-2)
    assert any("do not change" in w for w in warnings)


def test_ordinary_task_has_no_warning() -> None:
    torch.manual_seed(0)
    assert quality_warnings(torch.randn(64, 64), torch.randn(64, 64), atol=1e-2, rtol=1e-2) == []
