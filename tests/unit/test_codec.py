"""The judge-runner message format: tensors through the shared arena or pipe frames, and what a lying
runner can and cannot do with either."""

from __future__ import annotations

import multiprocessing as mp
import os
import struct
from typing import Any

import pytest
import torch

from evalsvc.engine.codec import MARK, Arena, BadMessage, encode, receive, send


def _echo(conn: Any, arena: Arena) -> None:
    """A runner's side in miniature: receive, answer with what came plus one larger tensor."""
    while (msg := receive(conn, arena=arena)) is not None:
        send(conn, {"back": msg, "bigger": torch.arange(msg["n"], dtype=torch.int64)}, arena)


@pytest.fixture()
def arena() -> Any:
    made = Arena.create()
    assert made is not None, "memfd_create is available on Linux"
    yield made
    made.close()


def test_a_message_round_trips_through_a_runner_process_with_its_arena(arena: Arena) -> None:
    ctx = mp.get_context("forkserver")
    parent, child = ctx.Pipe(duplex=True)
    proc = ctx.Process(target=_echo, args=(child, arena), daemon=True)
    proc.start()
    child.close()
    try:
        big = torch.randn(3_000_000)
        msg = {
            "op": "run",
            "inputs": [
                big,
                torch.tensor([True, False]),
                torch.empty(0, 5),
                (torch.ones(2, 3, dtype=torch.bfloat16),),
            ],
            "n": 8_000_000,  # a reply of 64 MB: more than the arena holds, so it goes over the pipe
            "scalar": 3.5,
        }
        send(parent, msg, arena, grow=True)
        assert parent.poll(120)
        reply = receive(parent, timeout_s=60, arena=arena)
        back = reply["back"]
        assert torch.equal(back["inputs"][0], big) and back["inputs"][0].shape == big.shape
        assert torch.equal(back["inputs"][1], torch.tensor([True, False]))
        assert back["inputs"][2].shape == (0, 5)
        assert back["inputs"][3][0].dtype == torch.bfloat16 and torch.equal(
            back["inputs"][3][0].float(), torch.ones(2, 3)
        )
        assert back["scalar"] == 3.5
        assert torch.equal(reply["bigger"], torch.arange(8_000_000))
        assert os.fstat(arena.fd).st_size < 64 * 1024**2  # grown for the message, not for that reply
        send(parent, None, arena)
    finally:
        proc.join(30)
        proc.kill()


def test_tensors_travel_in_the_arena_not_the_pipe(arena: Arena) -> None:
    a, b = mp.Pipe(duplex=True)
    send(a, {"x": torch.randn(1000)}, arena, grow=True)
    with pytest.raises(BadMessage, match="outside the shared arena"):
        receive(b)  # a reader without the arena cannot find the bytes: they never went down the pipe
    send(a, {"x": torch.arange(10.0)}, arena, grow=True)
    assert torch.equal(receive(b, arena=arena)["x"], torch.arange(10.0))


@pytest.mark.parametrize(
    "at",
    [1 << 40, -64, True, "0", 4096 * 1024 - 8],
    ids=["past-end", "negative", "bool", "string", "straddles-end"],
)
def test_a_lying_offset_is_a_bad_message(arena: Arena, at: Any) -> None:
    arena.reserve(4096 * 1024)
    a, b = mp.Pipe(duplex=True)
    a.send_bytes(encode({"out": {MARK: 0, "dtype": "float32", "shape": [4], "at": at}}))
    with pytest.raises(BadMessage, match="outside the shared arena"):
        receive(b, arena=arena)


def test_a_lying_frame_is_a_bad_message() -> None:
    a, b = mp.Pipe(duplex=True)
    a.send_bytes(encode({"out": {MARK: 0, "dtype": "float32", "shape": [1 << 20]}}))
    a.send_bytes(b"\0" * 16)
    with pytest.raises(BadMessage, match="frame of 16 bytes, header says 4194304"):
        receive(b)
    a.send_bytes(encode({"out": {MARK: 0, "dtype": "float32", "shape": [1 << 40, 1 << 40]}}))
    with pytest.raises(BadMessage, match="over"):
        receive(b)
    a.send_bytes(encode({"out": {MARK: 0, "dtype": "object", "shape": [1]}}))
    with pytest.raises(BadMessage, match="bad tensor header"):
        receive(b)


def test_one_arena_range_read_twice_is_a_bad_message(arena: Arena) -> None:
    # Twenty markers at one offset made the judge copy one 255 MiB buffer twenty times (red team 2026-12-06).
    arena.reserve(4096 * 1024)
    mapping = arena.mapping()
    assert mapping is not None
    mapping[:8192] = b"\1" * 8192  # written, as a sender writes what it names
    a, b = mp.Pipe(duplex=True)
    one = {MARK: 0, "dtype": "float32", "shape": [1024]}
    a.send_bytes(encode({"out": [{**one, "at": 0}, {**one, MARK: 1, "at": 4096}]}))  # side by side: fine
    assert [t.shape for t in receive(b, arena=arena)["out"]] == [(1024,), (1024,)]
    a.send_bytes(encode({"out": [{**one, "at": 0}, {**one, MARK: 1, "at": 2048}]}))
    with pytest.raises(BadMessage, match="overlaps another"):
        receive(b, arena=arena)


def test_tensors_past_the_receivers_limit_are_a_bad_message(arena: Arena) -> None:
    a, b = mp.Pipe(duplex=True)
    send(a, {"out": [torch.zeros(1024), torch.zeros(1024)]}, arena, grow=True)
    with pytest.raises(BadMessage, match="over 6000 bytes"):
        receive(b, arena=arena, max_bytes=6000)
    send(a, {"out": [torch.zeros(1024), torch.zeros(1024)]}, arena)
    assert len(receive(b, arena=arena, max_bytes=8192)["out"]) == 2


def test_a_header_that_never_ends_or_is_too_large_does_not_hold_the_receiver() -> None:
    a, b = mp.Pipe(duplex=True)
    os.write(a.fileno(), struct.pack("!i", -1) + struct.pack("!Q", 8 << 30) + b"x")  # 8 GiB claimed, 1 sent
    with pytest.raises(BadMessage, match="message header of 8589934592 bytes"):
        receive(b, timeout_s=5)
    a, b = mp.Pipe(duplex=True)
    os.write(a.fileno(), struct.pack("!i", 1000) + b"x")
    with pytest.raises(TimeoutError):
        receive(b, timeout_s=0.5)


@pytest.mark.parametrize("through_arena", [True, False])
def test_a_tensor_held_twice_travels_once_and_arrives_as_one(arena: Arena, through_arena: bool) -> None:
    # Ten names of one 256 MiB buffer (a task's state_dict) made the judge take 2.5 GiB (red team 2026-12-06).
    a, b = mp.Pipe(duplex=True)
    big = torch.arange(1 << 10, dtype=torch.float32)  # small: the pipe holds it all, no reader yet
    state = {f"w{i}": big.detach() for i in range(10)} | {"half": big[: 1 << 9], "other": big.clone()}
    send(a, state, arena if through_arena else None, grow=through_arena)
    got = receive(b, arena=arena, max_bytes=3 * big.nbytes)  # the view and the clone are tensors of their own
    assert all(got[f"w{i}"] is got["w0"] for i in range(10)) and torch.equal(got["w0"], big)
    assert got["half"] is not got["w0"] and torch.equal(got["half"], big[: 1 << 9])
    assert got["other"] is not got["w0"] and torch.equal(got["other"], big)
    a.send_bytes(encode({"out": {MARK: 3, "same": True}}))
    with pytest.raises(BadMessage, match="not sent before it"):
        receive(b, arena=arena)
    a.send_bytes(encode({"out": {MARK: [1], "same": True}}))
    with pytest.raises(BadMessage, match="bad tensor header"):
        receive(b, arena=arena)


def test_the_other_side_cannot_shrink_the_arena(arena: Arena) -> None:
    """A runner truncating the memfd would make the judge's next read of its mapping fault (SIGBUS)."""
    arena.reserve(1 << 20)
    theirs = os.open(f"/proc/self/fd/{arena.fd}", os.O_RDWR)  # as a runner holds it: its own descriptor
    try:
        with pytest.raises(PermissionError):
            os.ftruncate(theirs, 0)
    finally:
        os.close(theirs)
    assert os.fstat(arena.fd).st_size == 1 << 20


def test_the_other_side_cannot_seal_the_arena(arena: Arena) -> None:
    """A task sealed the memfd against growth, so that every tensor went over the pipe, then stopped reading
    it (red team 12-05): the arena is sealed against further seals when it is made."""
    import fcntl

    theirs = os.open(f"/proc/self/fd/{arena.fd}", os.O_RDWR)
    try:
        for seal in (fcntl.F_SEAL_GROW, fcntl.F_SEAL_WRITE):
            with pytest.raises(PermissionError):
                fcntl.fcntl(theirs, fcntl.F_ADD_SEALS, seal)
    finally:
        os.close(theirs)
    a, b = mp.Pipe(duplex=True)
    send(a, {"x": torch.arange(1000.0)}, arena, grow=True)
    assert os.fstat(arena.fd).st_size > 0
    assert torch.equal(receive(b, arena=arena)["x"], torch.arange(1000.0))
