"""What bounds the memory of an untrusted process tree as a whole, not one process at a time.

Rlimits bound each process; a task that forks 500 children, each of which writes over a few dozen MB of
the pages it shares with its parent, took this 24 GiB machine into a global OOM whose killer chose the
judge (CI, 2026-12-06: pytest killed, exit 137, in the hostile `fork_bomb` task). Two answers, both set
while the process is still root, before it drops to its uid:

- `first_to_kill`: oom_score_adj 1000, which an unprivileged process cannot lower again (the kernel keeps
  the value root wrote as its floor), so a global OOM takes untrusted processes before the judge, the
  worker, Redis or Docker;
- a memory cgroup per runner uid (`prepare_memory_group` in the judge, `join_memory_group` in the runner),
  limited to the runner's memory, which the process and everything it starts stay in, so their OOM stays
  theirs. Where no memory controller is writable (a container without cgroup delegation), the judge says
  so once in its log and the rlimits and the OOM priority remain.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
GROUP = "evalsvc"  # beside Docker's own top-level group, not under the judge's (whose cgroup may come and go)


def first_to_kill() -> None:
    """Make this process (and what it starts) the OOM killer's first choice, for good."""
    Path("/proc/self/oom_score_adj").write_text("1000")


def memory_group(uid: int) -> tuple[Path, str] | None:
    """The cgroup directory for runner `uid` and the name of its limit file: cgroup v1's memory hierarchy
    or the unified (v2) one, whichever holds the memory controller; None where neither does."""
    v1 = CGROUP_ROOT / "memory"
    if (v1 / "memory.limit_in_bytes").exists():
        return v1 / GROUP / f"runner-{uid}", "memory.limit_in_bytes"
    controllers = CGROUP_ROOT / "cgroup.controllers"
    if controllers.exists() and "memory" in controllers.read_text().split():
        return CGROUP_ROOT / GROUP / f"runner-{uid}", "memory.max"
    return None


def prepare_memory_group(uid: int, limit_bytes: int) -> str | None:
    """Runner `uid`'s memory cgroup, made (or reused) and limited to `limit_bytes`, for the runner to join;
    None (said once in the judge's log) where the host lets us make none."""
    found = memory_group(uid)
    if found is None:
        _say_once("no memory cgroup controller on this host")
        return None
    group, limit_file = found
    try:
        if limit_file == "memory.max":  # v2: a controller reaches a child only through its parent's list
            for parent in (group.parent.parent, group.parent):
                parent.mkdir(exist_ok=True)
                (parent / "cgroup.subtree_control").write_text("+memory")
        group.mkdir(parents=True, exist_ok=True)
        (group / limit_file).write_text(str(limit_bytes))
    except OSError as e:
        _say_once(f"memory cgroup {group} not usable ({e.strerror})")
        return None
    return str(group)


def join_memory_group(group: str) -> None:
    """Move this process into `group` (children follow it there); it cannot move itself out once it has
    dropped to its uid, as the cgroup files are root's."""
    (Path(group) / "cgroup.procs").write_text(str(os.getpid()))


def oom_kills(group: str | None) -> int:
    """How many processes the kernel's OOM killer has ended in `group` (cgroup v1 memory.oom_control, v2
    memory.events); 0 where it does not say."""
    for name in ("memory.oom_control", "memory.events"):
        try:
            lines = (Path(group or "/nonexistent") / name).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return 0


_said: set[str] = set()


def _say_once(why: str) -> None:
    if why not in _said:
        _said.add(why)
        log.warning("%s: an untrusted process tree is bounded per process and killed first on OOM", why)
