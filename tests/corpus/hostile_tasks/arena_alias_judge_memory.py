# trick: wraps its own process's reply function and answers the first 'inputs' request with a forged header
# whose 20 tensor markers all point at the same 255 MiB of the shared arena (grown by the task itself with
# ftruncate: the arena is sealed only against shrinking; RLIMIT_FSIZE, 256 MiB, is what bounds the growth).
# The judge's codec checks each marker against the arena's bounds and the message against MAX_MESSAGE_BYTES
# (32 GiB), then clones every marker: ~5.3 GiB of the judge's own memory for a task process of a few MB,
# none of it charged to the runner uid's memory cgroup (4 GiB here). A last marker outside the arena ends the
# message with BadMessage once the copies are made (a safety stop for this shared test host; 128 markers fit
# the 32 GiB budget, which is a global OOM on a 24 GiB host, where every untrusted process has
# oom_score_adj 1000 and holds little, so the killer goes on to the judge).
# measured (pre-fix, RunnerLimits 4 GiB, 2-core 24 GiB host): the judge's (pytest's) peak RSS grew by
# 5364 MiB (VmHWM after minus VmRSS before, clear_refs 5; the harness's judge_growth_max_mib check); VmHWM
# 0.60 -> 6.08 GB by /proc/<pytest>/status sampled each second; host "used" (free -m) 3.1 GB -> >= 6.7 GB
# (the 1 s sampling missed the peak); no runner cgroup went over 100 MB; no oom-kill in dmesg. With 30
# markers: VmHWM 5.8 GB and still climbing when the run was aborted (host used 16.3 GB with other jobs).
# Current verdict: internal_error/task_invalid ("tensor at ... is outside the shared arena"), only the
# memory check fails.
# fixed when: the judge refuses a reply whose tensors overlap in the arena or add up to more than the runner
# may hold, before copying them, so its growth stays under the runner's limit
# expect: internal_error
# failure: task_invalid
# candidate: ok
# judge_growth_max_mib: 4096
import os

import torch
import torch.nn as nn

import evalsvc.sandboxed.reference_host as _rh

REGION = 255 * 1024**2  # under the task process's RLIMIT_FSIZE (256 MiB), which bounds its ftruncate
COPIES = 20  # judge growth ~ COPIES * REGION (5 GiB, over the 4 GiB runner limit); keep it modest: shared host

if not getattr(_rh, "_aliased", False):
    _rh._aliased = True
    from evalsvc.engine import codec

    _send = _rh.send

    def _forged_send(conn, obj, arena=None, *a, **k):
        if arena is not None and isinstance(obj, dict) and obj.get("ok") and "inputs" in obj:
            size = max(os.fstat(arena.fd).st_size, REGION)
            os.ftruncate(arena.fd, size)  # sparse: the task process pays nothing for it
            marks = [{codec.MARK: i, "dtype": "uint8", "shape": [REGION], "at": 0} for i in range(COPIES)]
            # safety stop: a last tensor outside the arena, so the judge drops the copies after making them
            marks.append({codec.MARK: COPIES, "dtype": "uint8", "shape": [REGION], "at": size})
            conn.send_bytes(codec.encode({"ok": True, "inputs": marks}))
            return
        return _send(conn, obj, arena, *a, **k)

    _rh.send = _forged_send


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
