# trick: the candidate's module replaces its runner's reply function (evalsvc.sandboxed.runner.send, a module
# global the runner's serve loop looks up per reply) and answers the 'load' request with a forged header of
# 20 tensor markers that all point at the same 255 MiB of the shared arena (grown by the candidate with
# ftruncate, which the arena's seals allow and RLIMIT_FSIZE bounds at 256 MiB). The judge's codec bounds-checks
# each marker and clones each one: ~5.3 GiB of the judge's own memory for a runner that holds a few MB. The
# seccomp filter does not matter here (writing to the inherited pipe and ftruncate are allowed). A last
# marker outside the arena makes the message a BadMessage once the copies are made (a safety stop; 30 markers
# and no stop would need ~7.5 GiB, 128 markers would fit the 32 GiB MAX_MESSAGE_BYTES budget).
# measured (pre-fix, runner memory 4 GiB): the judge's (pytest's) VmHWM 0.59 -> 6.16 GB, sampled each second
# from /proc/<pytest>/status (+5.4 GiB); host "used" (free -m) 2.7 -> 6.8 GB; no runner cgroup over 100 MB;
# no oom-kill. Current verdict: forbidden ("tensor at ... is outside the shared arena"); only the memory check
# (judge_growth_max_mib, added to test_hostile.py) fails. Same trick as
# tests/corpus/hostile_tasks/arena_alias_judge_memory.py, from the candidate side.
# fixed when: the judge refuses a reply whose tensors overlap in the arena or exceed what the runner may hold
# expect: forbidden
# device: cpu
# judge_growth_max_mib: 4096
import os
import sys

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

REGION = 255 * 1024**2  # under RLIMIT_FSIZE (256 MiB), which bounds the runner's ftruncate of the arena
COPIES = 20  # the judge's growth ~ COPIES * REGION

_runner = sys.modules.get("evalsvc.sandboxed.runner")
if _runner is not None and not getattr(_runner, "_aliased", False):
    _runner._aliased = True
    _codec = sys.modules["evalsvc.engine.codec"]
    _send = _runner.send

    def _forged_send(conn, obj, arena=None, *a, **k):
        if arena is not None and isinstance(obj, dict) and obj.get("ok") and not getattr(_runner, "_sent", 0):
            _runner._sent = 1
            size = max(os.fstat(arena.fd).st_size, REGION)
            os.ftruncate(arena.fd, size)
            marks = [{_codec.MARK: i, "dtype": "uint8", "shape": [REGION], "at": 0} for i in range(COPIES)]
            marks.append({_codec.MARK: COPIES, "dtype": "uint8", "shape": [REGION], "at": size})  # safety stop
            conn.send_bytes(_codec.encode({"ok": True, "extra": marks}))
            return
        return _send(conn, obj, arena, *a, **k)

    _runner.send = _forged_send

SRC = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] < 0.0f ? 0.0f : in[i];
    return out;
}
"""
ext = load_inline(name="hostile_arena_alias", cpp_sources=[SRC], functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x.contiguous())
