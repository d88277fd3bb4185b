"""The runtime under every kit object: simulated costs on the virtual clock.

A :class:`Sim` is one run of one program. Kit objects hold the Sim they were built
for and call :meth:`Sim.busy` (an ``await``-able cost: other tasks run meanwhile)
or :meth:`Sim.block` (a blocking cost: the clock moves and nothing else runs).
Both record a span in the trace.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from contextlib import asynccontextmanager

from runner.clock import VirtualLoop, to_ticks
from runner.trace import Span, Trace

_current: Sim | None = None


def current() -> Sim | None:
    """The simulation running now, if any."""
    return _current


def _loop_is_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Sim:
    def __init__(self, loop: VirtualLoop) -> None:
        self.loop = loop
        self.trace = Trace()
        # what the program did that a reviewer should hear about
        self.blocking_calls: Counter[str] = Counter()  # blocking calls made inside async code
        self.thread_calls: Counter[str] = Counter()  # threads / executors (run inline)
        self.clock_reads = 0  # time.time()/monotonic()/perf_counter() calls from user code
        self._last_stall: Span | None = None

    # -- activation --------------------------------------------------------

    def __enter__(self) -> Sim:
        global _current
        self._previous = _current
        _current = self
        return self

    def __exit__(self, *exc) -> None:
        global _current
        _current = self._previous

    # -- time ----------------------------------------------------------------

    def now(self) -> float:
        return self.loop.time()

    def ticks(self) -> int:
        return self.loop.ticks()

    async def wait(self, seconds: float) -> None:
        """Let ``seconds`` of simulated time pass for the calling task only."""
        ticks = to_ticks(seconds)
        if ticks <= 0:
            await asyncio.sleep(0)
            return
        future = self.loop.create_future()
        handle = self.loop.wake_at(self.ticks() + ticks, future)
        try:
            await future
        finally:
            handle.cancel()

    async def yield_point(self) -> None:
        """Give every other ready task a chance to run (and the shuffle a chance to reorder)."""
        await asyncio.sleep(0)

    # -- costed operations ---------------------------------------------------

    def open_span(self, lane: str, op: str, batch: str | None = None, *, blocking=False) -> Span:
        return self.trace.open(lane, op, self.ticks(), batch, blocking)

    def close_span(self, span: Span, *, cancelled: bool = False) -> None:
        span.end = self.ticks()
        span.cancelled = cancelled

    @asynccontextmanager
    async def span(self, lane: str, op: str, batch: str | None = None):
        """Record everything inside the ``async with`` block as one span."""
        span = self.open_span(lane, op, batch)
        try:
            yield span
        except asyncio.CancelledError:
            self.close_span(span, cancelled=True)
            raise
        self.close_span(span)

    async def busy(self, lane: str, op: str, seconds: float, batch: str | None = None) -> None:
        """An asynchronous operation: costs ``seconds``; other tasks run meanwhile."""
        # (``wait`` inlined: this is the hot path of every simulation)
        loop = self.loop
        start = loop.ticks()
        span = self.trace.open(lane, op, start, batch, False)
        future = loop.create_future()
        handle = loop.wake_at(start + to_ticks(seconds), future)
        try:
            await future
        except asyncio.CancelledError:
            handle.cancel()
            self.close_span(span, cancelled=True)
            raise
        span.end = loop.ticks()

    def block(
        self, lane: str, op: str, seconds: float, batch: str | None = None, *, call: str
    ) -> None:
        """A blocking operation: the clock moves ``seconds`` and nothing else runs.

        ``call`` names the API the user called; inside async code it is reported,
        because it stalls every other task.
        """
        inside_async = _loop_is_running()
        if inside_async:
            self.blocking_calls[call] += 1
        span = self.open_span(lane, op, batch, blocking=True)
        self.loop.advance(seconds)
        self.close_span(span)

    def stall(self, seconds: float, *, call: str) -> None:
        """Blocking time that is not an operation of the kit (``time.sleep``, a spin).

        It shows in the trace on the ``blocked`` lane; back-to-back stalls of the
        same kind (a busy-wait reads the clock thousands of times) make one span.
        """
        if _loop_is_running():
            self.blocking_calls[call] += 1
        start = self.ticks()
        self.loop.advance(seconds)
        last = self._last_stall
        if last is not None and last.op == call and last.end == start:
            last.end = self.ticks()
        else:
            self._last_stall = self.trace.open("blocked", call, start, None, True)
            self._last_stall.end = self.ticks()


class Cluster:
    """The simulated hardware handed to a trainer: attributes hold the kit objects.

    Which attributes exist depends on the exercise (``workers``, ``model``,
    ``stages``...); ``config`` always holds the exercise's settings.
    """

    def __init__(self, **parts) -> None:
        self.__dict__.update(parts)

    def __repr__(self) -> str:
        return f"Cluster({', '.join(sorted(self.__dict__))})"
