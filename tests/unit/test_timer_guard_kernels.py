"""The timer guard sees a kernel registered over an operator the runner's own checks call, though no
Python object the runner holds was replaced (what the second GPU red-team round did from C++ with
TORCH_LIBRARY_IMPL). Run in a child process: the override would otherwise stay in this one's dispatcher."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = r"""
import json, torch
from evalsvc.sandboxed.runtime_checks import TimerGuard
guard = TimerGuard()
before = {"tampered": guard.tampered(), "changed": guard.registrations_changed()}
own = torch.library.Library("mine", "DEF")  # a candidate's own operator is its business
own.define("f(Tensor x) -> Tensor")
own.impl("f", lambda x: x.clone(), "CPU")
with_own = {"tampered": guard.tampered(), "changed": guard.registrations_changed()}
lib = torch.library.Library("aten", "IMPL")
lib.impl("take", lambda a, i: torch.zeros(i.shape, dtype=a.dtype), "CPU")
after = {"tampered": guard.tampered(), "changed": guard.registrations_changed()}
print(json.dumps({"before": before, "with_own": with_own, "after": after}))
"""


def test_an_operator_override_is_named_and_seen_at_load() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"] == {"tampered": [], "changed": False}
    assert seen["with_own"] == {"tampered": [], "changed": False}
    assert seen["after"] == {"tampered": ["the kernels of aten::take"], "changed": True}
