"""The pure pool model: statuses from reasons, the split, deterministic samples, suite reports, operator
tags. No I/O."""

from __future__ import annotations

from evalsvc.core.pools import (
    Split,
    Suite,
    VetFinding,
    VetReason,
    VetRecord,
    VetStatus,
    operators,
    sample_ids,
    split_of,
    status_of,
    suite_report,
)

IDS = [f"t_{i:04x}" for i in range(400)]


def _record(task_id: str, reasons: list[VetReason], eager: float | None, compiled: float | None) -> VetRecord:
    findings = [VetFinding(reason=r, message=r.value) for r in reasons]
    return VetRecord(
        task_id=task_id,
        device_class="cpu",
        device_name="cpu",
        torch_version="x",
        status=status_of(findings),
        findings=findings,
        eager_ms=eager,
        compiled_ms=compiled,
        vetted_at=0.0,
    )


def test_status_is_the_worst_severity() -> None:
    assert status_of([]) is VetStatus.OK
    tiny = VetFinding(reason=VetReason.TINY_OUTPUT, message="")
    slow = VetFinding(reason=VetReason.TOO_SLOW, message="")
    assert status_of([tiny]) is VetStatus.WARN
    assert status_of([tiny, slow]) is VetStatus.REJECTED


def test_split_is_a_function_of_id_and_seed_only() -> None:
    sides = [split_of(t, 3, 0.2) for t in IDS]
    held = sides.count(Split.HELDOUT)
    assert 40 <= held <= 120  # about 20% of 400
    # the same task stays on its side whatever else the suite holds, and the seed reshuffles
    assert [split_of(t, 3, 0.2) for t in IDS[::-1]] == sides[::-1]
    assert [split_of(t, 4, 0.2) for t in IDS] != sides
    assert all(split_of(t, 3, 0.0) is Split.TRAIN for t in IDS)


def test_samples_are_deterministic_per_seed() -> None:
    a = sample_ids(IDS, 10, seed=7)
    assert a == sample_ids(list(reversed(IDS)), 10, seed=7)
    assert len(set(a)) == 10 and set(a) <= set(IDS)
    assert a != sample_ids(IDS, 10, seed=8)
    assert sorted(sample_ids(IDS[:3], 10, seed=7)) == IDS[:3]  # asking for more gives all


def test_report_counts_statuses_reasons_and_distributions() -> None:
    suite = Suite(name="s", task_ids=["a", "b", "c", "d", "e"])
    records = {
        "a": _record("a", [], 2.0, 1.0),
        "b": _record("b", [], 20.0, 40.0),
        "c": _record("c", [VetReason.TINY_OUTPUT], 5.0, None),
        "d": _record("d", [VetReason.TOO_FAST], 0.01, None),
    }
    r = suite_report(suite, "cpu", records)
    assert (r.size, r.not_vetted) == (5, 1)
    assert r.by_status == {"ok": 2, "warn": 1, "rejected": 1}
    assert r.by_reason == {"tiny_output": 1, "too_fast": 1}
    assert r.eager_ms.n == 4 and r.eager_ms.min == 0.01 and r.eager_ms.max == 20.0
    assert r.compile_speedup.n == 2 and r.compile_speedup.min == 0.5 and r.compile_speedup.max == 2.0
    assert r.eager_ms_histogram == {"[0, 0.1) ms": 1, "[1, 10) ms": 2, "[10, 100) ms": 1}


def test_operator_tags_are_read_from_the_model() -> None:
    src = (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.conv = nn.Conv2d(3, 8, 3)\n"
        "    def forward(self, x):\n        return F.gelu(self.conv(x)).view(-1).sum()\n"
        "def get_inputs():\n    return [torch.randn(1, 3, 8, 8)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    assert operators(src) == ["conv2d", "gelu", "sum"]
    assert operators("def broken(:") == []
