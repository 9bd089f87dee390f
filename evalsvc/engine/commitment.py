"""Commitments to outputs: what a round of timed calls must answer with, so the judge can check any call
of it afterwards.

The runner answers a round with a digest of every chunk of every output it produced, computed before it
replies (inside the judge's clock); the judge then picks calls and chunks at random and fetches their
bytes. A fetched chunk must match its digest and the reference, so work skipped or deferred past the reply
shows as a wrong chunk or a broken commitment, on whichever call the judge happens to pick.

That holds only where the digest binds: no other bytes the tolerance accepts may have the same digest.
CPU tensors are digested with BLAKE3. Device tensors still get the sum of their 8-byte words modulo 2**64,
which does not bind: the tenth red team computed only the fetched calls, after the round, and set exact
zeros to tiny values until the sums matched (docs/security.md; a device-side binding hash is to come).
"""

from __future__ import annotations

from typing import Any

import torch

CHUNKS = 16  # per output tensor: the judge fetches a few of them, never the whole output


def output_tensors(out: Any) -> list[torch.Tensor]:
    """The tensors of an output (a tensor, or nested lists/tuples of them), in order. Exact types only:
    walking a subclass would run its code (a list whose `__iter__` joins a side stream just in time)."""
    if type(out) is torch.Tensor:
        return [out]
    if type(out) is list or type(out) is tuple:
        return [t for o in out for t in output_tensors(o)]
    return []


def foreign_parts(out: Any) -> list[str]:
    """The types in an output that are not exactly a tensor, a list or a tuple (nested)."""
    if type(out) is torch.Tensor:
        return []
    if type(out) is list or type(out) is tuple:
        return [name for o in out for name in foreign_parts(o)]
    return [type(out).__name__]


def chunk_size(nbytes: int) -> int:
    """Bytes per chunk: a multiple of 8 (so a chunk is whole elements of any dtype), at most CHUNKS chunks."""
    per = -(-nbytes // CHUNKS)
    return max(8, -(-per // 8) * 8)


def flat_bytes(t: torch.Tensor) -> torch.Tensor:
    """The tensor's values as bytes, in row-major order (a copy only when it is not contiguous)."""
    b = t.detach().contiguous().reshape(-1).view(torch.uint8)
    return b.clone() if b.storage_offset() % 8 else b  # word views need aligned bytes


def _digest_rows(b: torch.Tensor, size: int) -> torch.Tensor:
    """Digests of consecutive `size`-byte chunks of `b` (int64 on b's device): the sum of the chunk's
    8-byte words modulo 2**64, plus its leftover bytes. Integer sums modulo 2**64 do not depend on the
    order of adding; one pass over the bytes (summing 4-byte words into int64 was 45x slower on the CPU)."""
    n = b.numel()
    full = n // size
    parts = []
    if full:
        parts.append(b[: full * size].view(torch.int64).view(full, size // 8).sum(dim=1))
    if n > full * size:
        parts.append(_digest_tail(b[full * size :]).reshape(1))
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64, device=b.device)


def _digest_tail(b: torch.Tensor) -> torch.Tensor:
    words = b.numel() // 8 * 8
    return b[:words].view(torch.int64).sum() + b[words:].to(torch.int64).sum()


def digests_on_device(t: torch.Tensor) -> torch.Tensor:
    """All chunk digests of one output tensor, left on its device (read back once per round)."""
    b = flat_bytes(t)
    size = chunk_size(b.numel())
    if b.device.type == "cpu":
        return torch.tensor([_binding(b[i : i + size]) for i in range(0, b.numel(), size)], dtype=torch.int64)
    return _digest_rows(b, size)


def _binding(b: torch.Tensor) -> int:
    """BLAKE3 of CPU bytes, its first 8 bytes as a signed 64-bit integer (as the device digests travel)."""
    from blake3 import blake3  # only where CPU outputs are digested

    return int.from_bytes(blake3(b.numpy().data).digest(8), "little", signed=True)


def chunk(t: torch.Tensor, index: int) -> torch.Tensor:
    """The bytes of chunk `index` of `t` (empty when out of range)."""
    b = flat_bytes(t)
    size = chunk_size(b.numel())
    return b[index * size : (index + 1) * size]


def chunk_digest(b: torch.Tensor, device_type: str) -> int:
    """The digest of one chunk's bytes (on the CPU, fetched), as `digests_on_device` computed it for that
    chunk on a device of `device_type`."""
    flat = b.reshape(-1).view(torch.uint8)
    return _binding(flat.contiguous()) if device_type == "cpu" else int(_digest_tail(flat))


def chunk_count(nbytes: int) -> int:
    return -(-nbytes // chunk_size(nbytes)) if nbytes else 0


def round_digests(outputs: list[Any]) -> tuple[list[list[list[int]]], list[list[int]]]:
    """For every call's output: the chunk digests of each of its tensors, and each tensor's size in bytes
    (read back from the device once for the whole round)."""
    per_tensor = [[digests_on_device(t) for t in output_tensors(out)] for out in outputs]
    lengths = [len(d) for call in per_tensor for d in call]
    flat = torch.cat([d for call in per_tensor for d in call]).tolist() if lengths else []
    digests: list[list[list[int]]] = []
    at = 0
    for call in per_tensor:
        digests.append([])
        for d in call:
            digests[-1].append(flat[at : at + len(d)])
            at += len(d)
    nbytes = [[t.numel() * t.element_size() for t in output_tensors(out)] for out in outputs]
    return digests, nbytes
