"""When several evaluations of one judge process may use its device, and when one must have it alone."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class GpuSchedule:
    """A readers-writer lock over one device, writers first.

    Evaluations in flight share the device for their untimed work (loads, correctness trials, reference
    calls), so that one evaluation's host work and pipe transfers overlap another's kernels. Timing takes
    the device alone: no kernel or host-side work of another evaluation of this process runs beside a
    timed kernel (runner starts may: they launch none, and the judge waits for them outside this lock).
    Waiting writers go first, so a stream of trials cannot starve timing; a thread inside `shared` hands
    its share back while it waits to be `alone` and takes it again afterwards, so two evaluations that
    both want to time do not deadlock on each other's share.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer: int | None = None  # thread id of the one that has the device alone
        self._writers_waiting = 0
        self._mine = threading.local()  # shares held by this thread

    def _shares(self) -> int:
        return getattr(self._mine, "shares", 0)

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Untimed work beside other evaluations' untimed work (re-entrant; nothing to take inside
        `alone`)."""
        if self._writer == threading.get_ident() or self._shares():
            yield
            return
        with self._cond:
            while self._writer is not None or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        self._mine.shares = self._shares() + 1
        try:
            yield
        finally:
            self._mine.shares -= 1
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    def let_timing_pass(self) -> None:
        """Between two steps of untimed work: if a timing waits, hand this thread's share back until every
        waiting timing is done. A timing then waits for one step of each evaluation in flight (a trial,
        a load), not for all the untimed work each has left before its own timing."""
        held = self._shares()
        if not held or self._writer == threading.get_ident():
            return
        with self._cond:
            if not self._writers_waiting:
                return
            self._readers -= held
            self._cond.notify_all()
            while self._writer is not None or self._writers_waiting:
                self._cond.wait()
            self._readers += held

    @contextmanager
    def alone(self) -> Iterator[None]:
        """The device with nothing else of this process on it (re-entrant)."""
        me = threading.get_ident()
        if self._writer == me:
            yield
            return
        held = self._shares()
        with self._cond:
            self._readers -= held
            self._writers_waiting += 1
            self._cond.notify_all()
            while self._writer is not None or self._readers:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writer = me
        try:
            yield
        finally:
            with self._cond:
                self._writer = None
                self._cond.notify_all()
                while self._writer is not None or (self._writers_waiting and held):
                    self._cond.wait()  # an evaluation waiting to time goes before this one's untimed rest
                self._readers += held
