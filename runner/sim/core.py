"""The runtime under every kit object: simulated costs on the virtual clock.

A :class:`Sim` is one run of one program. Kit objects hold the Sim they were built
for and call :meth:`Sim.busy` (an ``await``-able cost: other tasks run meanwhile)
or :meth:`Sim.block` (a blocking cost: the clock moves and nothing else runs).
Both record a span in the trace.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from contextlib import asynccontextmanager
from dataclasses import dataclass

from runner.sim.clock import VirtualLoop, to_ticks
from runner.sim.trace import Span, Trace


@dataclass(frozen=True)
class Surface:
    """What the candidate's code may touch of a kit class (everything else stays private).

    const   attributes that never change; sent once, with the object's handle
    live    attributes read when asked (one round trip)
    free    methods that cost no simulated time
    block   methods that cost their time and block everything (``compute_gradient``)
    async_  coroutine methods that cost their time while other tasks run
    length  whether ``len(obj)`` works (a live read)
    queue   ``(take, upcoming)``: ``take`` is a free method that returns the next item of
            a sequence fixed in advance (None at the end) and ``upcoming()`` lists the
            items still to come. The candidate's side holds the sequence and takes items
            without a round trip; the grader replays every take, in order, at the time
            it was made (``BatchQueue.next_batch``)

    A subclass (a grader's own worker, say) inherits its base's surface unless it declares
    its own ``KIT_SURFACE``.
    """

    const: tuple[str, ...] = ()
    live: tuple[str, ...] = ()
    free: tuple[str, ...] = ()
    block: tuple[str, ...] = ()
    async_: tuple[str, ...] = ()
    length: bool = False
    queue: tuple[str, str] | None = None

_current: Sim | None = None


def current() -> Sim | None:
    """The simulation running now, if any."""
    return _current


class Sim:
    def __init__(self, loop: VirtualLoop) -> None:
        self.loop = loop
        self.trace = Trace()
        # what the program did that a reviewer should hear about
        self.blocking_calls: Counter[str] = Counter()  # blocking calls made inside async code
        self.thread_calls: Counter[str] = Counter()  # threads / executors (run inline)
        # Set by the grader while it serves a blocking call from the candidate's process:
        # whether the candidate's event loop was running (a blocking call in async code).
        self.caller_in_async = False
        # Seeded runs vary what really varies on a cluster: each cost is stretched by up
        # to ``jitter`` (a fraction), from the run's seed. The timed run has none.
        self.jitter = 0.0
        self._jitter_rng: random.Random | None = None
        # Where the values the kit handed out came from (id(value) -> origin), for the
        # checks that follow data: which pull a gradient's weights came from, which link
        # delivered a stage's input. Values stay alive in the grader's handle table.
        self.origins: dict[int, tuple] = {}

    def set_jitter(self, seed: int, fraction: float) -> None:
        self.jitter = fraction
        self._jitter_rng = random.Random(seed * 7919 + 17)

    def cost_ticks(self, seconds: float) -> int:
        """The ticks an operation of ``seconds`` takes in this run (jittered when seeded)."""
        ticks = to_ticks(seconds)
        if self._jitter_rng is not None and ticks > 0:
            ticks += round(ticks * self.jitter * self._jitter_rng.random())
        return ticks

    def mark(self, value, *origin) -> None:
        self.origins[id(value)] = origin

    def origin(self, value) -> tuple | None:
        return self.origins.get(id(value))

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
        ticks = self.cost_ticks(seconds)
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
        handle = loop.wake_at(start + self.cost_ticks(seconds), future)
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
        if self.caller_in_async:
            self.blocking_calls[call] += 1
        span = self.open_span(lane, op, batch, blocking=True)
        self.loop.advance_ticks(self.cost_ticks(seconds))
        self.close_span(span)


class Cluster:
    """The simulated hardware handed to a trainer: attributes hold the kit objects.

    The candidate's process sees every attribute (as proxies or plain values).

    Which attributes exist depends on the exercise (``workers``, ``model``,
    ``stages``...); ``config`` always holds the exercise's settings.
    """

    def __init__(self, **parts) -> None:
        self.__dict__.update(parts)

    def __repr__(self) -> str:
        return f"Cluster({', '.join(sorted(self.__dict__))})"
