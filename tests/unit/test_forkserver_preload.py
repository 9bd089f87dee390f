"""What the runners' forkserver imports must leave CUDA usable in the runners it forks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from evalsvc.engine.launcher import PRELOAD

CHILD_CHECK = """
import os, sys, torch
for name in sys.argv[1:]:
    __import__(name)
pid = os.fork()
if pid == 0:
    os._exit(3 if torch.cuda._is_in_bad_fork() else 0)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _forked_child_can_use_cuda(modules: list[str]) -> bool:
    done = subprocess.run([sys.executable, "-c", CHILD_CHECK, *modules], capture_output=True, timeout=300)
    assert done.returncode in (0, 3), done.stderr.decode()[-2000:]
    return done.returncode == 0


def test_the_preloaded_modules_leave_cuda_usable_after_fork() -> None:
    """A preload that asks for the CUDA device count poisons every runner (the H200 runners exited 1 in
    set_device when torch.utils.cpp_extension was preloaded)."""
    assert _forked_child_can_use_cuda(PRELOAD)


def test_the_check_sees_a_poisoning_import() -> None:
    """The check above can fail: on a CUDA build of torch (CI's) importing cpp_extension poisons forks."""
    import torch

    if torch.version.cuda is None:
        pytest.skip("a CPU build of torch has no CUDA to poison")
    assert not _forked_child_can_use_cuda(["torch.utils.cpp_extension"])
