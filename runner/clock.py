"""The virtual clock: an asyncio loop whose time jumps to the next timer.

Time compaction comes from ``looptime`` (the loop's ``time()`` is an integer tick
count, 1 tick = 1 µs, that jumps straight to the next scheduled timer). On top of
it, :class:`VirtualLoop` adds what grading needs:

- ``advance(dt)``: move the clock forward *without yielding*, which is what a
  blocking call does to an event loop: it costs its time and nothing else runs.
- ``wake_at(ticks)``: a timer on an exact tick, so simulated costs add up exactly.
- a seeded shuffle of the ready queue, so that callbacks that are ready at the
  same virtual instant run in a different (but replayable) order for each seed;
- a clear end for stuck programs: ``Deadlock`` (nothing ready, nothing scheduled),
  ``VirtualTimeLimit`` (the clock passes the limit) and ``Livelock`` (the loop
  spins without the clock ever moving). These are raised from the loop itself, not
  inside a task, so candidate code cannot swallow them.
"""

from __future__ import annotations

import asyncio
import collections
import random

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


class _ShuffledReady(collections.deque):
    """A ready queue that hands out a random ready callback instead of the oldest.

    ``BaseEventLoop._run_once`` pops ``len(_ready)`` callbacks with ``popleft()``;
    picking a random one each time gives a seeded permutation of everything that
    is ready at this virtual instant (callbacks that become ready meanwhile may be
    picked too, which is also an order a real scheduler could produce).
    """

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self._rng = rng

    def popleft(self):
        n = len(self)
        if n > 1:
            i = self._rng.randrange(n)
            if i:
                self[0], self[i] = self[i], self[0]
        return super().popleft()


_LooptimeSelectorLoop = looptime.make_event_loop_class(asyncio.SelectorEventLoop)


class VirtualLoop(_LooptimeSelectorLoop):
    """A looptime event loop with blocking advances, shuffling and stuck detection."""

    def __init__(
        self,
        *,
        seed: int | None = None,
        time_limit: float | None = None,
        max_idle_iterations: int = 50_000,
    ) -> None:
        # noop_cycles=0: move the clock after one empty cycle, not 42; nothing in a
        # simulation waits for real I/O, so the extra cycles would only cost CPU.
        super().__init__(start=0.0, resolution=_RESOLUTION, noop_cycles=0)
        self.seed = seed
        self.time_limit = time_limit
        self._max_idle_iterations = max_idle_iterations
        self._idle_iterations = 0
        self._last_ticks = 0
        self.stuck: StuckError | None = None  # set once the loop found it can never finish
        if seed is not None:
            # CPython-private: BaseEventLoop keeps its ready callbacks in ``_ready``
            # (a deque). Swapping in a deque that pops at random is the one change
            # the shuffle needs; everything else in the loop stays stock asyncio.
            self._ready = _ShuffledReady(random.Random(seed))
        # looptime already wraps the selector's select() (the loop asks it how long
        # to sleep); we wrap looptime's wrapper to spot a loop that can never finish.
        # ``_selector`` is BaseSelectorEventLoop's (looptime patches it the same way).
        self._looptime_select = self._selector.select
        self._selector.select = self._checked_select

    # -- time ----------------------------------------------------------------

    def ticks(self) -> int:
        return to_ticks(self.time())

    def advance(self, seconds: float) -> None:
        """Move the clock forward now, without yielding to other tasks (a blocking call)."""
        ticks = to_ticks(seconds)
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

    def _checked_select(self, timeout):
        if self.stuck is None:
            self.stuck = self._why_stuck(timeout)
        if self.stuck is not None:
            raise self.stuck
        return self._looptime_select(timeout)

    def _why_stuck(self, timeout) -> StuckError | None:
        now = self.ticks()
        if timeout is None:
            return Deadlock("every task is waiting and nothing is scheduled to wake any of them")
        if self.time_limit is not None and now / TICKS_PER_SECOND + timeout > self.time_limit:
            return VirtualTimeLimit(f"the simulated time passed the limit of {self.time_limit:g} s")
        if now == self._last_ticks:
            self._idle_iterations += 1
            if self._idle_iterations > self._max_idle_iterations:
                return Livelock(
                    "the event loop kept spinning without simulated time moving "
                    "(polling with `await asyncio.sleep(0)`?)"
                )
        else:
            self._last_ticks = now
            self._idle_iterations = 0
        return None

    # -- executors and closing -----------------------------------------------

    def run_in_executor(self, executor, func, *args):
        """Threads do not exist in the simulation: run ``func`` here, blocking the loop."""
        from runner import blocking  # local: blocking imports this module

        blocking.note_thread("run_in_executor")
        future = self.create_future()
        try:
            future.set_result(func(*args))
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            future.set_exception(exc)
        return future

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
