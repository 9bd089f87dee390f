"""The process compile sandbox in real processes: nothing a build starts outlives it, whether it ends on
its own or at its wall limit, and whatever process groups, sessions or double forks it makes (ninja starts
each command in a process group of its own; a timed-out build's `sh -> nvcc -> sh -> cicc` once ran on for
minutes as orphans of PID 1 in a deleted scratch directory)."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsvc.sandbox.base import Mount, SandboxLimits, SandboxRun
from evalsvc.sandbox.isolation import COMPILE_UID_BASE, COMPILE_UIDS, SANDBOX_UID
from evalsvc.sandbox.process_sandbox import ProcessSandbox

IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="a build uid of its own needs root")
# Generous: the descendants start in milliseconds; the limit only has to come after they did.
TIMEOUT_LIMITS = SandboxLimits(wall_seconds=15, memory_bytes=2 * 1024**3, output_bytes=64 * 1024)
LIMITS = SandboxLimits(wall_seconds=300, memory_bytes=2 * 1024**3, output_bytes=64 * 1024)
LOOP = "while :; do sleep 1; done"


@pytest.fixture(
    params=[pytest.param(True, marks=needs_root, id="own-uid"), pytest.param(False, id="no-root")]
)
def sandbox(request: pytest.FixtureRequest) -> ProcessSandbox:
    """As root, each build under a uid of its own; `isolate=False` is the fallback a worker without root
    gets (processes found by a token in their environment)."""
    sb = ProcessSandbox(isolate=request.param)
    assert sb.isolate is request.param
    return sb


@pytest.fixture
def marker() -> Iterator[str]:
    """A word in the command line of every process a test's build starts; what is left is killed after."""
    word = f"evalsvc-leftover-{secrets.token_hex(6)}"
    yield word
    for pid in marked(word):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A directory that any uid can traverse (pytest's own tmp_path is 0700 under root)."""
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)
        yield Path(d)


def marked(word: str) -> list[int]:
    """Live processes with `word` in their command line (a zombie's is empty)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            if word.encode() in cmdline:
                found.append(int(name))
    return found


def uid_processes(uid: int) -> list[int]:
    """Live (not zombie) processes whose real uid is `uid`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            status = Path(f"/proc/{name}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields["Uid"].split()[0]) == uid and fields["State"].split()[0] not in ("Z", "X"):
            found.append(int(name))
    return found


def detaching_script(word: str) -> str:
    """Three descendants that outlive their parent by every usual route: a session of its own (setsid), a
    double fork (orphaned at once, reparented to PID 1), and a process group of its own (as ninja starts
    each command); each a shell loop named `<word>-<how>`. The script goes on once all three run."""
    setpgid = 'import os, sys; os.setpgid(0, 0); os.execvp("sh", ["sh", "-c", *sys.argv[1:]])'
    return f"""
body='touch "$TMPDIR/$0.up"; {LOOP}'
setsid sh -c "$body" {word}-session &
sh -c '(setsid sh -c "$1" "$2" &)' double-fork "$body" {word}-orphan
{sys.executable} -c '{setpgid}' "$body" {word}-group &
until [ -e "$TMPDIR/{word}-session.up" ] && [ -e "$TMPDIR/{word}-orphan.up" ] \\
    && [ -e "$TMPDIR/{word}-group.up" ]; do sleep 0.05; done
echo descendants-up
"""


def run_sh(
    sb: ProcessSandbox, script: str, limits: SandboxLimits, mounts: list[Mount] | None = None
) -> SandboxRun:
    return sb.run(["sh", "-c", script], mounts or [], limits, {})


def assert_nothing_left(sb: ProcessSandbox, run: SandboxRun, word: str) -> None:
    """Checked as soon as run() returns: the sandbox waits until the build's processes are gone."""
    assert marked(word) == [], f"processes of the build outlived it: {run.extra}"
    if sb.isolate:
        uid = int(run.extra["uid"])
        assert COMPILE_UID_BASE <= uid < COMPILE_UID_BASE + COMPILE_UIDS
        assert uid_processes(uid) == []


def ninja_script(word: str) -> str:
    """What the incident was: ninja (the build's process, killed at the limit) running a command that it
    started in a process group of its own, here a shell loop named `<word>-ninja`; the script waits on it.
    Without a ninja binary, a plain wait."""
    ninja = shutil.which("ninja", path=os.path.dirname(sys.executable)) or shutil.which("ninja")
    if ninja is None or ".pyenv/shims" in ninja:  # a pyenv shim needs the caller's HOME
        return "exec sleep 300\n"
    return f"""
mkdir "$TMPDIR/ninja" && cat > "$TMPDIR/ninja/build.ninja" <<'END'
rule loop
  command = sh -c 'touch "$$TMPDIR/$$0.up"; {LOOP}' {word}-ninja
build out: loop
END
{ninja} -C "$TMPDIR/ninja" &
until [ -e "$TMPDIR/{word}-ninja.up" ]; do sleep 0.05; done
echo ninja-command-up
wait
"""


def test_a_build_that_times_out_leaves_no_process(sandbox: ProcessSandbox, marker: str) -> None:
    ninja = ninja_script(marker)
    r = run_sh(sandbox, detaching_script(marker) + ninja, TIMEOUT_LIMITS)
    assert "descendants-up" in r.output, f"the descendants did not start within the limit: {r.output}"
    assert "ninja" not in ninja or "ninja-command-up" in r.output, r.output
    assert r.timed_out and r.exit_code is None and not r.oom_killed
    assert int(r.extra["leftover_processes"]) >= 3  # the three loops (and their sleeps), besides the build
    assert_nothing_left(sandbox, r, marker)


def test_a_build_that_ends_leaves_no_process(sandbox: ProcessSandbox, marker: str) -> None:
    r = run_sh(sandbox, detaching_script(marker) + "exit 0\n", LIMITS)
    assert r.exit_code == 0 and not r.timed_out, r.output
    assert "descendants-up" in r.output
    assert int(r.extra["leftover_processes"]) >= 3
    assert_nothing_left(sandbox, r, marker)


@needs_root
def test_a_build_that_kills_all_it_can_cannot_stop_its_cleanup(marker: str) -> None:
    """A descendant that loops `kill -9 -1` kills every process of its uid, the build's own shell
    included, and would kill a cleanup process running as that uid before it got to kill; the killer's
    credentials put it out of the build's reach."""
    sb = ProcessSandbox()
    script = f"setsid sh -c 'while :; do kill -9 -1; done' {marker}-killer &\nexec sleep 300\n"
    r = run_sh(sb, script, LIMITS)
    assert not r.timed_out and r.exit_code == -9, r.output  # the loop killed the build's shell
    assert int(r.extra["leftover_processes"]) >= 1  # the loop itself
    assert_nothing_left(sb, r, marker)


@needs_root
def test_concurrent_builds_get_uids_of_their_own(marker: str) -> None:
    """Each build in flight has its uid (killing one's processes cannot touch the other's), in the
    compile range, none shared with the runners or the compile containers (65532)."""
    with tempfile.TemporaryDirectory() as meeting:
        os.chmod(meeting, 0o1777)
        # Each writes its uid, then waits (bounded by the wall limit) until both are in flight.
        script = (
            f'id -u > {meeting}/$$; until [ "$(ls {meeting} | wc -l)" -ge 2 ]; do sleep 0.05; done; id -u'
        )
        runs: list[SandboxRun] = []
        threads = [
            threading.Thread(
                target=lambda: runs.append(run_sh(ProcessSandbox(), f": {marker}; " + script, LIMITS))
            )
            for _ in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(LIMITS.wall_seconds + 60)
    assert len(runs) == 2 and all(r.exit_code == 0 for r in runs), [r.output for r in runs]
    uids = {int(r.output.split()[-1]) for r in runs}
    assert len(uids) == 2 and {int(r.extra["uid"]) for r in runs} == uids
    assert all(COMPILE_UID_BASE <= u < COMPILE_UID_BASE + COMPILE_UIDS for u in uids)


@needs_root
def test_a_writable_mount_is_handed_to_the_build_with_what_earlier_builds_left(open_tmp: Path) -> None:
    """The precompiled-header directory is written by whichever build uid makes it: what an earlier build
    left there (here as 65532, the uid every build had before), directories 0755 included, is the new
    build's to write."""
    pch = open_tmp / "pch"
    (pch / "flags").mkdir(parents=True)
    (pch / "flags" / ".build.lock").write_text("")
    for p in (pch, pch / "flags", pch / "flags" / ".build.lock"):
        os.chown(p, SANDBOX_UID, SANDBOX_UID)
    os.chmod(pch / "flags", 0o755)
    script = 'echo x >> "$PCH/flags/.build.lock" && touch "$PCH/flags/new" && echo written'
    r = ProcessSandbox().run(
        ["sh", "-c", script], [Mount(pch, "/pch", read_only=False)], LIMITS, {"PCH": "/pch"}
    )
    assert r.exit_code == 0 and "written" in r.output, r.output
    assert stat.S_ISREG(os.stat(pch / "flags" / "new").st_mode)
    assert os.stat(pch / "flags" / "new").st_uid == int(r.extra["uid"])


def test_a_build_that_starts_nothing_has_no_leftovers(sandbox: ProcessSandbox) -> None:
    r = run_sh(sandbox, "echo plain", LIMITS)
    assert r.exit_code == 0 and r.output.strip() == "plain"
    assert r.extra["leftover_processes"] == "0"
