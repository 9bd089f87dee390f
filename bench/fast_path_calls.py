"""Per-call host cost of a fast-path library against the same extension built by plain load_inline.

The judge times the whole forward, host code included, so the bridge (evalsvc/compiler/shim/bridge.cpp)
must cost no more per call than pybind11's bindings do. One small CPU extension (`f(x, alpha)`: a
metadata check, an allocation and a loop over 16 floats) is built both ways in this process; the two are
called alternately in rounds of N calls, and the median of each round's ns per call is reported.

    python -m bench.fast_path_calls --data-dir /tmp/fp-data --out docs/results/<dir>
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch
from torch.utils.cpp_extension import load_inline

from evalsvc.compiler import fast_path
from evalsvc.compiler.bindings import split_inline
from evalsvc.compiler.entry import object_name
from evalsvc.compiler.inline import InlineCall

SOURCE = r"""
#include <torch/extension.h>
torch::Tensor f(torch::Tensor x, double alpha) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
  auto out = torch::empty_like(x);
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0 ? in[i] : static_cast<float>(alpha) * in[i];
  return out;
}
"""


def fast_library(root: Path, work: Path) -> ModuleType:
    call = InlineCall(name="calls_fast", cpp_sources=[SOURCE], functions={"f": "f"}, extra_cflags=["-O3"])
    split = split_inline(call)
    units = [*split.binding, *split.own]
    for rel, text in [*split.binding.items(), *split.own.items()]:
        (work / rel).write_text(text)
    objects = [object_name(rel, False) for rel in units]
    built = fast_path.build(
        "calls_fast", [work / r for r in units], objects, work / "build", root, ["-O3"], [], [], False, 600, 2
    )
    if not built.ok or built.library is None:
        raise SystemExit(f"fast path did not build: {built.reason}\n{built.log[-3000:]}")
    spec = importlib.util.spec_from_file_location("calls_fast", built.library)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def per_call_ns(fn: Callable[[torch.Tensor, float], torch.Tensor], x: torch.Tensor, n: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(n):
        fn(x, 0.1)
    return (time.perf_counter_ns() - start) / n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path, required=True, help="holds pch/ with the prepared fast path")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args()
    root = args.data_dir / "pch"
    if not fast_path.ready(root):
        fast_path.prepare(root)
    with tempfile.TemporaryDirectory() as tmp:
        fast = fast_library(root, Path(tmp))
        full = load_inline(
            name="calls_full", cpp_sources=[SOURCE], functions=["f"], extra_cflags=["-O3"],
            build_directory=tmp,
        )  # fmt: skip
    x = torch.randn(16)
    assert torch.equal(fast.f(x, 0.1), full.f(x, 0.1))
    rounds: dict[str, list[float]] = {"fast_path": [], "load_inline": []}
    for _ in range(args.rounds):
        rounds["fast_path"].append(per_call_ns(fast.f, x, args.calls))
        rounds["load_inline"].append(per_call_ns(full.f, x, args.calls))
    summary = {
        k: {"median_ns": statistics.median(v), "min_ns": min(v), "max_ns": max(v)} for k, v in rounds.items()
    }
    print(json.dumps(summary, indent=1))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fast_path_calls.json").write_text(
        json.dumps({"rounds": rounds, "summary": summary}, indent=1)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
