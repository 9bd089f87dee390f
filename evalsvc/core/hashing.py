"""Content hashes: the identity of tasks, solutions, artifacts and results."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def content_hash(*parts: Any, length: int = 24) -> str:
    """A stable hash of JSON-serialisable parts (dict keys sorted)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:length]
