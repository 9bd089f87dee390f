"""Messages between judge and runner: torch.save framing, always loaded with weights_only=True,
so nothing the untrusted runner sends can execute code in the judge."""

from __future__ import annotations

import io
from typing import Any

import torch


class BadMessage(Exception):
    """A message from the runner that is not plain data (or too large)."""


def encode(obj: Any) -> bytes:
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
