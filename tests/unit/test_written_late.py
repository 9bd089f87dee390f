"""The probe's late-write check on outputs nothing writes any more: never a finding (a false one would
refuse an honest kernel). That it finds work still running on another stream is shown on a GPU by the
corpus (cuda_side_stream_timed, cuda_rt_last_call_pad)."""

from __future__ import annotations

import torch

from evalsvc.engine.timing import PROBED_ELEMENTS, written_late


def test_finished_outputs_of_every_kind_are_not_late() -> None:
    nan = torch.full((3, 5000), float("nan"))  # NaN must equal itself bit for bit
    strided = torch.randn(400, 300).t()  # not contiguous: read in place, never copied
    outputs = [
        torch.randn(10),
        nan,
        strided,
        torch.tensor([0.0, -0.0]),
        torch.zeros(0),
        torch.ones(7, dtype=torch.bool),
        torch.randn(5, dtype=torch.complex64),
        torch.arange(PROBED_ELEMENTS * 3, dtype=torch.int64),
    ]
    assert not written_late(outputs)
    assert not written_late(outputs[1])
    assert not written_late(None)


def test_a_large_output_is_read_at_random_places_not_copied() -> None:
    from evalsvc.engine.timing import _random_places

    t = torch.empty(10 * PROBED_ELEMENTS)
    places = [_random_places(t) for _ in range(2)]
    assert all(p.numel() == PROBED_ELEMENTS and int(p.max()) < t.numel() for p in places)
    assert not torch.equal(places[0], places[1])  # fresh draws from the OS's randomness
