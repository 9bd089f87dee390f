# trick: no patching at all: Model registers one 256 MiB buffer under 10 names. state_dict() lists each name,
# the task's process sends every entry (a contiguous tensor goes over the pipe straight from its storage, no
# copy), so a process holding 256 MiB makes the judge receive 2.5 GiB of weights, then copy them again into
# the candidate's arena (its send grows the arena to the message's size, up to MAX_ARENA_BYTES 8 GiB). None of
# it is the task process's memory, so its cgroup (4 GiB here) never sees it. Nothing bounds a state_dict's
# total (MAX_INPUT_BYTES is for inputs, and counts aliased inputs the same way: `[x] * 32` of a 256 MiB x
# passes its 8 GiB check, per input set, for 256 MiB in the task's process).
# measured (pre-fix, RunnerLimits 4 GiB): the judge's (pytest's) VmHWM 0.60 -> 6.07 GB (+5.4 GiB), sampled
# each second from /proc/<pytest>/status; host "used" (free -m) 1.47 -> 8.0 GB; the task uid's cgroup held
# 287 MiB (memory.usage_in_bytes); no oom-kill. The honest candidate's runner then died on the load message
# (its RLIMIT_AS cannot map the 2.75 GiB arena: BadMessage, exit 1), so the current verdict blames the
# candidate: runtime_error "the candidate process ended (exit code 1)".
# fixed: a tensor a message holds twice is sent once and arrives as one object (codec: SAME markers), so the
# judge and the candidate hold one 256 MiB buffer, tied as the task had it; the relu candidate registers none
# of the ten names, so it is told its parameters do not match (as for any task with weights it lacks); what a
# reply may make the judge hold is bounded by the sender's memory limit besides (CPU device)
# expect: runtime_error
# candidate: ok
# message: parameters do not match
# judge_growth_max_mib: 4096
import torch
import torch.nn as nn

NAMES = 10  # the judge's growth ~ 2 * NAMES * 256 MiB; keep it modest (shared host)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        big = torch.zeros(64 * 1024**2)  # 256 MiB of float32
        for i in range(NAMES):
            self.register_buffer(f"w{i}", big)

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
