"""How every bench script leaves its result: the rows as JSON, a Markdown table beside them, the table
on stdout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_report(out: Path, name: str, rows: Any, lines: list[str]) -> None:
    """`out/<name>.json` (the rows) and `out/<name>.md` (the lines), and the lines printed."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(rows, indent=1))
    text = "\n".join(lines)
    (out / f"{name}.md").write_text(text + "\n")
    print(text)
