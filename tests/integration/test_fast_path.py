"""The compile fast path (evalsvc/compiler/fast_path.py) with real compilers in the Docker sandbox:
load_inline extensions built against the torch stand-in, the same verdicts as the build as written,
fallbacks with their reason."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from evalsvc.core.options import EvalOptions
from evalsvc.core.results import Status
from evalsvc.core.solutions import Solution
from evalsvc.suite import cases
from tests.corpus.reader import small_task

pytestmark = pytest.mark.docker
FAST = EvalOptions(trials=3, timing_budget_s=0.3, compile_baseline=False, timing_pool=2)
# One solution per verdict kind the bundled CPU suite has (ok, incorrect, ...): CI's time, not coverage,
# decides the number; test_engine_cpu judges all of them with the fast path on.
INLINE_CPU = list({c.expect: c for c in cases("cpu") if c.solution_path.suffix == ".py"}.values())
INLINE_CUDA_OK = [c for c in cases("cuda") if c.expect == "ok" and c.solution_path.suffix == ".py"]


@contextmanager
def fast_path(pipeline, on: bool) -> Iterator[None]:
    before = pipeline.compiler.fast_path
    pipeline.compiler.fast_path = on
    try:
        yield
    finally:
        pipeline.compiler.fast_path = before


@pytest.mark.parametrize("case", INLINE_CUDA_OK, ids=lambda c: c.name)
def test_bundled_cuda_solution_builds_on_the_fast_path(pipeline, case) -> None:
    outcome = pipeline.compiler.compile(case.solution())
    assert outcome.status is Status.OK, outcome.message
    assert outcome.report.fast_path, outcome.report.fast_path_reason
    assert outcome.report.resources, "ptxas reported no kernel: nvcc did not build the device code"


def test_fast_path_off_builds_as_written(pipeline) -> None:
    sol = INLINE_CUDA_OK[0].solution()
    ((name, text),) = sol.files.items()
    sol = Solution(files={name: text + "\n# fast path off\n"})  # its own cache key
    with fast_path(pipeline, False):
        outcome = pipeline.compiler.compile(sol)
    assert outcome.status is Status.OK, outcome.message
    assert outcome.report.fast_path is False and outcome.report.fast_path_reason == "fast path off"


CPU_SHIM_API = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <vector>
#define CHECK_CPU(x) TORCH_CHECK(!x.is_cuda(), #x " must be a CPU tensor")

// A scaled leaky ReLU over a contiguous copy, written with the calls model-written host code makes.
std::vector<torch::Tensor> leaky(torch::Tensor x, double slope, int64_t repeat, bool flat) {
  CHECK_CPU(x);
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32, got ", x.scalar_type());
  TORCH_CHECK(repeat >= 1, "repeat must be positive, got ", repeat, " for sizes ", x.sizes());
  auto xc = x.contiguous();
  auto out = torch::empty({xc.size(0), xc.size(-1)}, xc.options());
  auto count = torch::zeros({1}, torch::TensorOptions().dtype(torch::kInt64));
  const float* in = xc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  int64_t* c = count.data_ptr<int64_t>();
  for (int64_t r = 0; r < repeat; ++r)
    for (int64_t i = 0; i < xc.numel(); ++i) {
      o[i] = in[i] > 0 ? in[i] : static_cast<float>(slope) * in[i];
      c[0] += in[i] > 0;
    }
  return {flat ? out.view({-1}) : out, count};
}
"""

ext = load_inline(
    name="fast_path_cpu_api",
    cpp_sources=[cpp_source],
    functions=["leaky"],
    extra_cflags=["-O2"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out, count = ext.leaky(x, 0.0, 1, False)
        return out
'''


def test_cpu_extension_on_the_fast_path_runs_like_torch(pipeline) -> None:
    """Built against the stand-in, linked with the bridge, loaded and judged on the CPU device: metadata,
    factories, views, data pointers and the scalar arguments behave as torch's do."""
    sol = Solution(files={"solution.py": CPU_SHIM_API})
    outcome = pipeline.compiler.compile(sol)
    assert outcome.status is Status.OK and outcome.report.fast_path, (outcome.message, outcome.report)
    result = pipeline.evaluate(small_task("l1/relu"), sol, FAST)
    assert result.status is Status.OK and result.correct, result.message


@pytest.mark.parametrize("case", INLINE_CPU, ids=lambda c: c.name)
def test_cpu_verdict_is_the_same_with_the_fast_path_off(pipeline, case) -> None:
    """test_engine_cpu judges the bundled CPU solutions with the fast path on; here off, same verdicts."""
    sol = case.solution()
    with fast_path(pipeline, False):
        result = pipeline.evaluate(small_task(case.task_id), sol, FAST)
    assert result.status.value == case.expect, result.message
    if result.compile is not None and result.compile.fast_path is not None:
        assert result.compile.fast_path is False


# Run in the compile sandbox on the prepared files (the paths in flags.json are the sandbox's): one unit
# compiled with the fast path's flags as written and without the precompiled shim's directory, and the
# bridge linked against the stubs and against torch's own libraries.
EQUIVALENCE_PROBE = r"""
import json, re, shlex, subprocess, sys, tempfile
from pathlib import Path
from evalsvc.compiler import fast_path as fp
from torch.utils.cpp_extension import library_paths

root = Path("/pch")
flags = fp.load_flags(root)
work = Path(tempfile.mkdtemp())
unit = work / "unit.cpp"
unit.write_text(
    "#include <torch/extension.h>\n#include <torch/extension.h>\n"
    "torch::Tensor flat(torch::Tensor x) {\n"
    "  TORCH_CHECK(x.dim() >= 1, \"needs a dim\");\n  return x.view({-1});\n}\n"
)
report = {}
for with_cuda in (False, True):
    bridge = fp._files(root)[1][with_cuda]
    pch = fp._pch_dir(root)
    ninja = fp._ninja_file("probe", [unit], ["unit.o"], flags, ["-O3"], [], [], bridge, pch, with_cuda)
    v = dict(re.findall(r"(?m)^(\w+) = (.*)$", ninja))
    cflags, ldflags = shlex.split(v["cflags"]), shlex.split(v["ldflags"])
    i = cflags.index(str(pch))
    plain = cflags[: i - 1] + cflags[i + 1 :]
    a, b = work / f"a{with_cuda}.o", work / f"b{with_cuda}.o"
    cmd = ["c++", *cflags, "-H", "-c", str(unit), "-o", str(a)]
    shown = subprocess.run(cmd, check=True, capture_output=True, text=True)
    subprocess.run(["c++", *plain, "-c", str(unit), "-o", str(b)], check=True, capture_output=True)
    torch_dir = library_paths("cuda" if with_cuda else "cpu")[0]
    stubs = next(f[2:] for f in ldflags if f.startswith("-L") and f.endswith("/stubs"))
    real = [f"-L{torch_dir}" if f == f"-L{stubs}" else f for f in ldflags]
    needed = {}
    for kind, link in (("stubs", ldflags), ("torch", real)):
        lib = work / f"{kind}{with_cuda}.so"
        subprocess.run(["c++", str(a), str(bridge), *link, "-o", str(lib)], check=True, capture_output=True)
        dump = subprocess.run(["objdump", "-p", str(lib)], check=True, capture_output=True, text=True)
        dynamic = dump.stdout
        needed[kind] = re.findall(r"(?m)^\s*NEEDED\s+(\S+)", dynamic)
    report["cuda" if with_cuda else "cpu"] = {
        "pch": [l for l in shown.stderr.splitlines() if l.startswith("!")],
        "identical": a.read_bytes() == b.read_bytes(),
        "needed": needed,
    }
print(json.dumps(report))
"""


def test_precompiled_shim_and_stub_link_change_nothing_in_what_is_built(pipeline) -> None:
    """The two things that make the fast path's C++ side cheap are invisible in its output: gcc takes the
    precompiled shim (a second include of the header included) and makes the object byte for byte as
    without it; the library linked against the empty stubs depends on the same libraries, in the same
    order, as one linked against torch's."""
    from evalsvc.compiler import fast_path
    from evalsvc.sandbox.base import Mount, SandboxLimits

    compiler = pipeline.compiler
    assert compiler.pch_dir is not None and fast_path.ready(compiler.pch_dir)
    run = compiler.sandbox.run(
        [compiler.python, "-c", EQUIVALENCE_PROBE],
        [Mount(compiler.pch_dir, "/pch", read_only=True)],
        SandboxLimits(wall_seconds=600),
        compiler.env,
    )
    assert run.exit_code == 0, run.output[-3000:]
    report = json.loads(run.output.strip().splitlines()[-1])
    for kind, variant in (("cpu", "cpu-O2.gch"), ("cuda", "cuda-O2.gch")):
        seen = report[kind]
        assert [p.rsplit("/", 1)[-1] for p in seen["pch"]] == [variant], seen["pch"]
        assert seen["identical"], kind
        assert seen["needed"]["stubs"] == seen["needed"]["torch"], seen["needed"]
        assert "libtorch_cpu.so" in seen["needed"]["stubs"]
