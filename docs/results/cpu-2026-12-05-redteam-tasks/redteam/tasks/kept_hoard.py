# trick: the module body holds memory and disk past its limits and keeps them while its process is kept
# (stopped) after the evaluation: 3 forked children each filling 1200 MB (RLIMIT_AS is per process), 4 memfds
# of 250 MB (not mapped: RLIMIT_AS does not count them) and 4 files of 250 MB in its scratch dir
import os

import torch
import torch.nn as nn

MB = 1024 * 1024
for _ in range(3):
    if os.fork() == 0:
        try:
            hoard = bytearray(1200 * MB)
            hoard[::4096] = b"\x01" * (1200 * MB // 4096)  # every page touched
            while True:
                os.pause()
        finally:
            os._exit(0)
_fds = []
for i in range(4):
    fd = os.memfd_create(f"hoard{i}")
    for _ in range(250):
        os.write(fd, b"\x02" * MB)
    _fds.append(fd)
for i in range(4):
    with open(f"hoard{i}.bin", "wb") as f:
        for _ in range(250):
            f.write(b"\x03" * MB)


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
