"""The grader's virtual clock: an asyncio loop whose time jumps to the next timer.

This loop runs in the trusted grader's process only: it drives the simulated cluster
(every kit operation is a task on it). The candidate's code runs on its own loop in its
own process (``runner.candidate.loop``), which asks this one for the time.

Time compaction comes from ``looptime`` (the loop's ``time()`` is an integer tick
count, 1 tick = 1 µs, that jumps straight to the next scheduled timer). On top of
it, :class:`VirtualLoop` adds what grading needs:

- ``advance(dt)``: move the clock forward *without yielding*, which is what a
  blocking call does to an event loop: it costs its time and nothing else runs.
- ``wake_at(ticks)``: a timer on an exact tick, so simulated costs add up exactly.
- ``pause_when``: a predicate checked whenever the loop has finished everything due at
  the current instant; when it holds, the loop stops there (before moving the clock),
  so the grader can hand that instant's completions to the candidate.
- a clear end for stuck programs: ``Deadlock`` (nothing ready, nothing scheduled),
  ``VirtualTimeLimit`` (the clock passes the limit) and ``Livelock`` (the loop
  spins without the clock ever moving).

The ready queue is stock asyncio (FIFO).
"""

from __future__ import annotations

import asyncio
import heapq
import threading
from asyncio import events
from contextlib import contextmanager

import looptime

TICKS_PER_SECOND = 1_000_000
_RESOLUTION = 1 / TICKS_PER_SECOND


def to_ticks(seconds: float) -> int:
    return round(seconds * TICKS_PER_SECOND)


def to_seconds(ticks: int) -> float:
    # int / int is correctly rounded, and equals looptime's own conversion.
    return ticks / TICKS_PER_SECOND


class StuckError(BaseException):
    """The simulated program can never finish.

    A BaseException: it is raised by the loop, not by user code, and a user's
    ``except Exception`` around ``asyncio.run()`` must not swallow it.
    """

    kind = "stuck"


class Deadlock(StuckError):
    kind = "deadlock"


class VirtualTimeLimit(StuckError):
    kind = "time_limit"


class Livelock(StuckError):
    kind = "livelock"


_LooptimeSelectorLoop = looptime.make_event_loop_class(asyncio.SelectorEventLoop)


class VirtualLoop(_LooptimeSelectorLoop):
    """A looptime event loop with blocking advances, pauses and stuck detection."""

    def __init__(
        self,
        *,
        time_limit: float | None = None,
        max_idle_iterations: int | None = 50_000,
    ) -> None:
        # noop_cycles=0: move the clock after one empty cycle, not 42; nothing in a
        # simulation waits for real I/O, so the extra cycles would only cost CPU.
        super().__init__(start=0.0, resolution=_RESOLUTION, noop_cycles=0)
        self.time_limit = time_limit
        self.pause_when = None  # callable -> bool, checked at the end of every instant
        self.fast = False  # no real I/O or executors will ever run on this loop
        self._max_idle_iterations = max_idle_iterations
        self._idle_iterations = 0
        self._last_ticks = 0
        self.stuck: StuckError | None = None  # set once the loop found it can never finish
        # looptime already wraps the selector's select() (the loop asks it how long
        # to sleep); we wrap looptime's wrapper to spot a loop that can never finish.
        # ``_selector`` is BaseSelectorEventLoop's (looptime patches it the same way).
        self._looptime_select = self._selector.select
        self._selector.select = self._checked_select

    # -- time ----------------------------------------------------------------

    def ticks(self) -> int:
        # looptime keeps the time as an integer count of resolution steps (1 µs here):
        # read it as it is (name-mangled private of looptime 0.9, pinned).
        return self._LoopTimeEventLoop__now

    def advance(self, seconds: float) -> None:
        """Move the clock forward now, without yielding to other tasks (a blocking call)."""
        self.advance_ticks(to_ticks(seconds))

    def advance_ticks(self, ticks: int) -> None:
        if ticks <= 0:
            return
        if self.time_limit is not None and to_seconds(self.ticks() + ticks) > self.time_limit:
            # A blocking call past the limit: nothing else could ever run again in time.
            self.stuck = self.stuck or VirtualTimeLimit(
                f"the simulated time passed the limit of {self.time_limit:g} s"
            )
            raise self.stuck
        # looptime's public re-setup call sets the time; every other setting is
        # passed again with the value it was created with.
        self.setup_looptime(
            start=to_seconds(self.ticks() + ticks),
            resolution=_RESOLUTION,
            noop_cycles=0,
        )

    def wake_at(self, ticks: int, future: asyncio.Future) -> asyncio.TimerHandle:
        """Resolve ``future`` when the clock reaches exactly ``ticks``."""
        return self.call_at(to_seconds(ticks), _resolve, future)

    # -- stuck detection -----------------------------------------------------

    @contextmanager
    def running(self):
        """Mark the loop running for a whole stretch of :meth:`step_until_paused` calls.

        ``run_forever`` sets this up (and tears it down) on every call, which costs more
        than the grader's steps between two messages of the candidate's process."""
        previous = events._get_running_loop()
        events._set_running_loop(self)
        self._thread_id = threading.get_ident()  # BaseEventLoop's own bookkeeping
        try:
            yield self
        finally:
            self._thread_id = None
            events._set_running_loop(previous)

    def step_until_paused(self) -> None:
        """Run until ``pause_when`` holds at the end of an instant (inside ``running()``)."""
        # CPython-private: ``_run_once`` is one iteration of ``run_forever``; ``stop()``
        # sets ``_stopping``, which ``run_forever`` would check after each iteration.
        self._stopping = False
        while not self._stopping:
            self._run_once()
        self._stopping = False

    def next_timer_ticks(self) -> int | None:
        """When the next scheduled timer fires (None: nothing is scheduled)."""
        # CPython-private: BaseEventLoop keeps its timers in the heap ``_scheduled`` and
        # drops cancelled ones from its head in ``_run_once``; do the same, then read the head.
        heap = self._scheduled
        while heap and heap[0]._cancelled:
            handle = heapq.heappop(heap)
            handle._scheduled = False
            self._timer_cancelled_count -= 1
        return to_ticks(heap[0]._when) if heap else None

    def _checked_select(self, timeout):
        if timeout != 0 and self.pause_when is not None and self.pause_when():
            self.stop()  # everything due now has run: hand over before the clock moves
            return []
        if self.stuck is None:
            self.stuck = self._why_stuck(timeout)
        if self.stuck is not None:
            raise self.stuck
        if self.fast and timeout is not None:
            # The grader's loop has no I/O and no executors: skip the real poll looptime
            # makes on every iteration and jump the clock to the next timer ourselves.
            if timeout > 0:
                self._LoopTimeEventLoop__now += to_ticks(timeout)
            return []
        return self._looptime_select(timeout)

    def _why_stuck(self, timeout) -> StuckError | None:
        now = self.ticks()
        if timeout is None:
            return Deadlock("every task is waiting and nothing is scheduled to wake any of them")
        if self.time_limit is not None and now / TICKS_PER_SECOND + timeout > self.time_limit:
            return VirtualTimeLimit(f"the simulated time passed the limit of {self.time_limit:g} s")
        if now == self._last_ticks:
            self._idle_iterations += 1
            limit = self._max_idle_iterations
            if limit is not None and self._idle_iterations > limit:
                return Livelock(
                    "the event loop kept spinning without simulated time moving "
                    "(polling with `await asyncio.sleep(0)`?)"
                )
        else:
            self._last_ticks = now
            self._idle_iterations = 0
        return None

    # -- executors and closing -----------------------------------------------

    def close(self) -> None:
        # ``asyncio.run()`` inside candidate code closes the loop it was handed;
        # the grader still needs it, so closing waits for ``dispose()``.
        return

    def dispose(self) -> None:
        if not self.is_closed():
            super().close()


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)
