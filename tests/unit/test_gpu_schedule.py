"""GpuSchedule with real threads: timing is alone, untimed work is shared, timing is not starved."""

from __future__ import annotations

import threading
import time

from evalsvc.engine.gpu_schedule import GpuSchedule


class Trace:
    """Who is inside which section, checked on every entry."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.shared: set[str] = set()
        self.alone: set[str] = set()
        self.violations: list[str] = []
        self.most_shared = 0

    def enter(self, who: str, kind: str) -> None:
        with self.lock:
            others = (self.shared | self.alone) - {who}
            if kind == "alone" and others:
                self.violations.append(f"{who} alone beside {sorted(others)}")
            if kind == "shared" and self.alone - {who}:
                self.violations.append(f"{who} shared beside {sorted(self.alone)} alone")
            (self.alone if kind == "alone" else self.shared).add(who)
            self.most_shared = max(self.most_shared, len(self.shared))

    def leave(self, who: str, kind: str) -> None:
        with self.lock:
            (self.alone if kind == "alone" else self.shared).discard(who)


def evaluation(gpu: GpuSchedule, trace: Trace, who: str, rounds: int) -> None:
    """Like the judge: a shared evaluation with timed sections inside it."""
    with gpu.shared():
        for _ in range(rounds):
            trace.enter(who, "shared")
            time.sleep(0.002)
            trace.leave(who, "shared")
            with gpu.alone():
                trace.enter(who, "alone")
                time.sleep(0.001)
                with gpu.shared(), gpu.alone():  # nested: no-ops, no self-deadlock
                    pass
                trace.leave(who, "alone")


def test_timing_is_alone_and_untimed_work_overlaps() -> None:
    gpu, trace = GpuSchedule(), Trace()
    threads = [threading.Thread(target=evaluation, args=(gpu, trace, f"e{i}", 20)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert trace.violations == []
    assert trace.most_shared > 1  # evaluations did share the device for untimed work


def queued_timing(gpu: GpuSchedule, order: list[str]) -> threading.Thread:
    """A thread that times (appends "timed"), returned once it waits for the device."""

    def timer() -> None:
        with gpu.alone():
            order.append("timed")

    writer = threading.Thread(target=timer)
    writer.start()
    while not gpu._writers_waiting:
        time.sleep(0.001)
    return writer


def test_a_waiting_timing_goes_before_new_untimed_work() -> None:
    gpu = GpuSchedule()
    order: list[str] = []
    holding, release = threading.Event(), threading.Event()

    def untimed_holder() -> None:
        with gpu.shared():
            holding.set()
            release.wait(10)
            order.append("holder done")

    def late_untimed() -> None:
        with gpu.shared():
            order.append("late untimed")

    holder = threading.Thread(target=untimed_holder)
    holder.start()
    holding.wait(10)
    writer = queued_timing(gpu, order)  # queued behind the holder's share
    late = threading.Thread(target=late_untimed)
    late.start()
    time.sleep(0.05)
    assert order == []  # the late share waits behind the queued timing
    release.set()
    for t in (holder, writer, late):
        t.join(10)
    assert order == ["holder done", "timed", "late untimed"]


def test_a_share_is_handed_back_while_waiting_to_time() -> None:
    """Two evaluations that both hold shares and both want to time: neither waits for the other's share."""
    gpu = GpuSchedule()
    both_in = threading.Barrier(2)
    timed: list[str] = []

    def run(who: str) -> None:
        with gpu.shared():
            both_in.wait(10)
            with gpu.alone():
                timed.append(who)

    threads = [threading.Thread(target=run, args=(w,)) for w in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(timed) == ["a", "b"]


def test_untimed_work_lets_a_waiting_timing_pass_between_steps() -> None:
    """An evaluation in the middle of its untimed steps: a timing that queues behind its share runs at the
    next step boundary, not when the whole share ends."""
    gpu = GpuSchedule()
    order: list[str] = []
    step_one, go_on = threading.Event(), threading.Event()

    def untimed_steps() -> None:
        with gpu.shared():
            gpu.let_timing_pass()  # nothing waits: returns at once, share kept
            order.append("step 1")
            step_one.set()
            go_on.wait(10)
            gpu.let_timing_pass()
            order.append("step 2")

    worker = threading.Thread(target=untimed_steps)
    worker.start()
    step_one.wait(10)
    writer = queued_timing(gpu, order)
    go_on.set()
    for t in (worker, writer):
        t.join(10)
    assert order == ["step 1", "timed", "step 2"]
