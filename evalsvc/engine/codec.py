"""Messages between judge and runner over their pipe: a small header, then each tensor's raw bytes.

The header (containers, numbers, strings, and a marker per tensor) goes through `torch.save` and is always
loaded with weights_only=True, so nothing the untrusted runner sends can execute code in the judge. The
tensor bytes follow as frames of their own: no zip container, no checksum, no extra copies, which made
`torch.save` of whole messages the largest cost of an evaluation (seconds per trial for 80 MB tensors).
A frame is sized from the header's dtype and shape, checked against the bytes that arrive, and the whole
message is bounded, so a lying header gets a BadMessage, never a huge allocation or a hang.
"""

from __future__ import annotations

import io
import math
from typing import Any

import torch

MARK = "__evalsvc_tensor__"
MAX_MESSAGE_BYTES = 32 * 1024**3
DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.complex128,
        torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
        torch.float8_e4m3fn, torch.float8_e5m2,
    )
}  # fmt: skip


class BadMessage(Exception):
    """A message from the runner that is not plain data (or too large)."""


def encode(obj: Any) -> bytes:
    """A whole message as one `torch.save` blob (small messages and tests)."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def decode(blob: bytes, map_location: str | torch.device | None = None) -> Any:
    try:
        return torch.load(io.BytesIO(blob), weights_only=True, map_location=map_location)
    except Exception as e:  # anything that is not plain tensors and containers
        raise BadMessage(
            f"runner sent a message that is not plain data: {type(e).__name__}: {e}"[:500]
        ) from None


def send(conn: Any, obj: Any) -> None:
    """Write `obj` to a multiprocessing connection: header, then one frame per tensor."""
    tensors: list[torch.Tensor] = []

    def strip(o: Any) -> Any:
        if isinstance(o, torch.Tensor):
            tensors.append(o)
            return {
                MARK: len(tensors) - 1,
                "dtype": str(o.dtype).removeprefix("torch."),
                "shape": list(o.shape),
            }
        if isinstance(o, list):
            return [strip(x) for x in o]
        if isinstance(o, tuple):
            return tuple(strip(x) for x in o)
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items()}
        return o

    conn.send_bytes(encode(strip(obj)))
    for t in tensors:
        host = t.detach().reshape(-1).contiguous().cpu()
        conn.send_bytes(memoryview(host.view(torch.uint8).numpy()) if host.numel() else b"")


def receive(conn: Any, map_location: str | torch.device | None = None, timeout_s: float | None = None) -> Any:
    """Read one message written by `send`; BadMessage for anything malformed, TimeoutError if a frame
    does not arrive within `timeout_s` (the header's arrival is the caller's to wait for)."""
    head = decode(conn.recv_bytes())
    budget = [MAX_MESSAGE_BYTES]
    device = torch.device(map_location) if map_location is not None else None

    def frame(marker: dict[str, Any]) -> torch.Tensor:
        dtype = DTYPES.get(marker.get("dtype"))  # type: ignore[arg-type]
        shape = marker.get("shape")
        if dtype is None or not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
            raise BadMessage(f"bad tensor header {str(marker)[:200]}")
        nbytes = math.prod(shape) * dtype.itemsize
        budget[0] -= nbytes
        if budget[0] < 0:
            raise BadMessage(f"message over {MAX_MESSAGE_BYTES} bytes")
        if timeout_s is not None and not conn.poll(timeout_s):
            raise TimeoutError("a tensor frame did not arrive")
        buf = bytearray(nbytes)
        try:
            got = conn.recv_bytes_into(buf) if nbytes else len(conn.recv_bytes(1))
        except Exception as e:  # BufferTooShort, or the frame of another size
            raise BadMessage(f"tensor frame does not match its header: {type(e).__name__}") from None
        if got != nbytes:
            raise BadMessage(f"tensor frame of {got} bytes, header says {nbytes}")
        t = torch.frombuffer(buf, dtype=torch.uint8) if nbytes else torch.empty(0, dtype=torch.uint8)
        t = t.view(dtype).reshape(shape)
        return t.to(device) if device is not None else t

    def rebuild(o: Any) -> Any:
        if isinstance(o, dict):
            if MARK in o:
                return frame(o)
            return {k: rebuild(v) for k, v in o.items()}
        if isinstance(o, list):
            return [rebuild(x) for x in o]
        if isinstance(o, tuple):
            return tuple(rebuild(x) for x in o)
        return o

    return rebuild(head)
