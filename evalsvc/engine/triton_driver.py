"""Triton's host-side modules for a GPU worker's runners, built by a trusted process.

A runner may not start a program (its seccomp filter refuses exec), yet Triton starts several at a launch:
the host compiler for its driver module (`cuda_utils`) and, in versions before the generic launcher (3.6,
which torch 2.11 ships), for one launcher module per kernel signature; `ldconfig -p` to find libcuda; and
`ptxas --version`, which is part of every kernel's cache key. So the judge side does these here, in a
process of its own, from Triton's own sources and the signatures the compile stage traced (each type checked
against Triton's type names first), and hands a copy to every runner of a Triton artifact inside the
artifact's cache, with the two facts in `HOST_FACTS` (triton_runtime.py applies them before the solution is
imported). A launch whose signature was not traced fails in the runner with a runtime error naming the
compiler.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from evalsvc.sandboxed.triton_runtime import HOST_FACTS

log = logging.getLogger(__name__)

BUILD_SECONDS = 180.0
_SCALAR = r"(?:[iu](?:1|8|16|32|64)|fp8e4nv|fp8e5|fp8e4b15|fp8e4b8|fp8e5b16|fp16|bf16|fp32|fp64)"
_TYPE = re.compile(rf"\*k?{_SCALAR}|{_SCALAR}|constexpr")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Runs in a fresh interpreter: builds cuda_utils (constructing the driver does), one launcher per signature
# given on stdin, and prints the host facts.
_BUILD = r"""
import json, sys, types
import triton
from triton.backends.nvidia import compiler, driver as nv
active = triton.runtime.driver.active
active.utils
arch = active.get_current_target().arch
meta = types.SimpleNamespace(tensordesc_meta=None, num_ctas=1, global_scratch_size=0, global_scratch_align=1,
    profile_scratch_size=0, profile_scratch_align=1, launch_cooperative_grid=False, launch_pdl=False)
failed = []
for names, types_ in json.load(sys.stdin):
    fn = types.SimpleNamespace(arg_names=names)
    src = types.SimpleNamespace(constants={}, signature=dict(zip(names, types_)), fn=fn)
    try:
        active.launcher_cls(src, meta)
    except Exception as e:
        failed.append(f"{types_}: {e!r}"[:300])
facts = {"libcuda_dir": nv.libcuda_dirs()[0], "ptxas_version": compiler.get_ptxas_version(arch)}
print(json.dumps({**facts, "failed": failed}))
"""
Signature = tuple[tuple[str, ...], tuple[str, ...]]  # argument names, their Triton types
Built = tuple[Path, dict[str, object]]  # the cache directory, the host facts
_lock = threading.Lock()
_built: dict[frozenset[Signature], Built | None] = {}


def signatures(kernels: Iterable[str]) -> list[Signature]:
    """(argument names, types) of each traced signature ("x_ptr: *fp32, n: i32, BLOCK: constexpr", as the
    compile stage reports them) whose every name and type is one Triton makes; others are left out."""
    found: list[Signature] = []
    for text in kernels:
        pairs = [part.split(": ", 1) for part in text.split(", ")] if text else []
        if not pairs or any(len(p) != 2 for p in pairs):
            continue
        names, types = tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
        if all(_NAME.fullmatch(n) for n in names) and all(_TYPE.fullmatch(t) for t in types):
            found.append((names, types))
    return found


def driver_cache(traced: Sequence[Signature] = ()) -> Built | None:
    """A cache directory holding Triton's driver module and the launchers of `traced`, with the host facts
    (built once per set of signatures in this process, in a directory no runner can write; None where it
    could not be built, reason logged)."""
    key = frozenset(traced)
    with _lock:
        if key not in _built:
            _built[key] = _build(Path(tempfile.mkdtemp(prefix="evalsvc-triton-driver-")), sorted(key))
        return _built[key]


def _build(dest: Path, traced: list[Signature]) -> Built | None:
    env = {**os.environ, "TRITON_CACHE_DIR": str(dest)}
    env.pop("TRITON_INTERPRET", None)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _BUILD],
            input=json.dumps([[list(n), list(t)] for n, t in traced]),
            env=env,
            capture_output=True,
            text=True,
            timeout=BUILD_SECONDS,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        log.warning("Triton's driver module could not be built: %s", e)
        return None
    if done.returncode != 0 or not any(dest.rglob("*.so")):
        log.warning("Triton's driver module could not be built: %s", done.stderr[-2000:])
        return None
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    for failure in facts.pop("failed"):
        log.warning("a Triton launcher could not be built: %s", failure)
    return dest, facts


def add_driver(artifact_cache: Path, driver: Path, facts: dict[str, object]) -> None:
    """The driver's modules and the host facts in a Triton artifact's cache (the runner's copy). Native
    modules the artifact brought (the compile stage ran the solution) are removed first: only ours load."""
    for path in list(artifact_cache.rglob("*")):
        if path.is_symlink() or (path.is_file() and (path.suffix == ".so" or path.name == HOST_FACTS)):
            path.unlink()
    for entry in driver.iterdir():
        if entry.is_dir():
            shutil.copytree(entry, artifact_cache / entry.name, symlinks=False, dirs_exist_ok=True)
    (artifact_cache / HOST_FACTS).write_text(json.dumps(facts))
