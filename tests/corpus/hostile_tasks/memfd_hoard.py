# trick: the module body fills 18 memfds of 256 MiB (4.5 GiB) and keeps them open: memfd pages are not
# mapped, so RLIMIT_AS (the runner's memory bound) does not count them, and the task's kept (stopped) process
# held them after its evaluation until two other tasks pushed it out
# fixed: a task process holding more than KEPT_FOOTPRINT_BYTES is closed when its evaluation ends, not kept;
# since 2026-12-06 the runner uid's memory cgroup counts memfd pages too, so the process is killed at its limit
# (4 GiB here) while it fills them: the task is refused, nothing is kept
# expect: internal_error
# failure: task_invalid
# candidate: ok
# message: SIGKILL, killed at its memory limit (4 GiB)
import os

import torch
import torch.nn as nn

MB = 1024 * 1024
_fds = []
for i in range(18):  # 4.5 GiB: over the 4 GiB a kept task process may hold
    fd = os.memfd_create(f"hoard{i}")
    for _ in range(256):
        os.write(fd, b"\x02" * MB)
    _fds.append(fd)


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
