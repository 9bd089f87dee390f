"""The canary battery's planting process: a stand-in for a worker deployed with secrets in its
environment (the test starts it with them). It builds the local pipeline (Docker compile sandbox, the
isolated CPU-device runner, the static screens off so that only isolation stands in the way), evaluates
one candidate per search place and one task per search place (its module body searches, in the task's
own process), prints one JSON line per evaluation, then the positive control: the same searches run here,
where the secrets are.

`python -m tests.corpus.secrets.battery DATA_DIR CONTROL_DIR`
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
TASK = HERE.parents[1] / "corpus" / "hostile" / "task.py"

CANDIDATE_TAIL = '''

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r\"\"\"
torch::Tensor relu_forward(torch::Tensor x) {
  auto y = torch::empty_like(x);
  const float* a = x.data_ptr<float>();
  float* b = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] > 0.f ? a[i] : 0.f;
  return y;
}
\"\"\"
ext = load_inline(name="hostile_relu", cpp_sources=SRC, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        found = sorted(search("PLACE"))
        raise RuntimeError(f"SEARCHED PLACE FOUND {found!r} END")
'''


def candidate(place: str) -> str:
    return (HERE / "search.py").read_text() + CANDIDATE_TAIL.replace("PLACE", place)


def hunting_task(place: str) -> str:
    """A task whose module body runs one search and raises with what it found (in the task's process)."""
    found = f'\nraise RuntimeError(f"SEARCHED {place} FOUND {{sorted(search({place!r}))!r}} END")\n'
    names = "\n\nclass Model:\n    pass\n\n\ndef get_inputs():\n    return []\n\n\ndef get_init_inputs():\n    return []\n"
    return (HERE / "search.py").read_text() + found + names  # the names the gateway asks for, never reached


def main(data_dir: str, control_dir: str) -> None:
    from evalsvc.cli_files import read_task
    from evalsvc.core.options import EvalOptions
    from evalsvc.core.solutions import Solution
    from evalsvc.core.tasks import TaskSpec
    from evalsvc.settings import Settings
    from evalsvc.wiring import make_local_pipeline
    from tests.corpus.secrets import search

    settings = Settings(
        device="cpu",
        data_dir=Path(data_dir),
        compile_backend="docker",
        compile_timeout_s=600,
        runner_isolation="process",
        runner_call_timeout_s=120,
        runner_memory_bytes=8 * 1024**3,
    )
    pipeline = make_local_pipeline(settings)
    pipeline.compiler.screens = frozenset()
    task = read_task(TASK)
    opts = EvalOptions(trials=1, timing_budget_s=0.1, compile_baseline=False, timing_pool=1)
    for place in search.PLACES:
        solution = Solution(files={"solution.py": candidate(place)}, format="kernelbench")
        result = pipeline.evaluate(task, solution, opts)
        print(json.dumps({"place": place, "result": json.loads(result.model_dump_json())}), flush=True)
    honest = Solution(files={"solution.py": (HERE.parents[2] / "evalsvc/examples/l1/relu/cpu_ok.py").read_text()})
    for place in search.PLACES:
        result = pipeline.evaluate(TaskSpec(source=hunting_task(place)), honest, opts)
        print(json.dumps({"task_place": place, "result": json.loads(result.model_dump_json())}), flush=True)
    held = [open(path) for path in Path(control_dir).iterdir()]  # noqa: SIM115 - open while searched
    control = {p: sorted(search.search(p)) for p in search.PLACES if p != "secret_files"}
    control["secret_files"] = sorted(search.secret_files((control_dir,)))
    for f in held:
        f.close()
    print(json.dumps({"control": control}), flush=True)
    pipeline.evaluator.judge.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
