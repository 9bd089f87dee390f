"""Precompiled headers built by several processes at once (a compile pool's children on a fresh data
directory): every one of them gets the headers, built once."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from evalsvc.compiler.pch import build_pch


def _build(out: str) -> str:
    return str(build_pch(Path(out), ["-O2"]))


def test_processes_asking_for_the_headers_at_once_all_get_them(tmp_path: Path) -> None:
    with mp.get_context("spawn").Pool(3) as pool:
        paths = pool.map(_build, [str(tmp_path)] * 3)
    assert len(set(paths)) == 1
    gch = Path(paths[0])
    assert gch.is_file() and gch.stat().st_size > 1_000_000
    assert gch.with_suffix("").read_text().startswith("#pragma once")
    assert not [p.name for p in gch.parent.iterdir() if "partial" in p.name]
