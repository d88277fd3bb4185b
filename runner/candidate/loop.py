"""The candidate's event loop: stock asyncio, FIFO, on the grader's virtual clock.

Only two things differ from ``asyncio.SelectorEventLoop``: ``time()`` reads the virtual
clock, and the selector's ``select(timeout)`` — where a real loop would wait — asks the
grader to move the clock (``Runtime.sync``) instead of waiting. The ready queue, the
order callbacks run in, locks, queues, task groups and timeouts are asyncio's own, so
every schedule the grader explores is one a real loop can produce.

A loop that keeps running ready callbacks without any progress (``await asyncio.sleep(0)``
polling while other tasks wait on the kit) lets the clock move on after ``POLL_SPINS``
iterations, as a real loop's clock would; the grader counts those polls for a warning.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import random
import selectors
import threading
import time

from runner.candidate import witness
from runner.candidate.runtime import TICKS_PER_SECOND, Runtime

POLL_SPINS = 64  # loop iterations at one instant, with no progress, before the clock moves


class _Selector(selectors.SelectSelector):
    def __init__(self, runtime: Runtime, seed: int | None = None) -> None:
        super().__init__()
        self.runtime = runtime
        self.loop: CandidateLoop | None = None
        self.rng = random.Random(seed) if seed is not None else None

    def select(self, timeout=None):
        events = self._step(timeout)
        if self.rng is not None:
            self._release_due_timers()
        return events

    def _release_due_timers(self) -> None:
        """Seeded runs: timers due at the same instant become ready in a seeded order.

        (asyncio gives no order to timers due at the same time; any order is one a real
        loop could produce.) Done here, before ``_run_once`` moves due timers itself."""
        loop = self.loop
        end = loop.time() + loop._clock_resolution
        due = []
        # CPython-private: the timer heap ``_scheduled`` and the ready deque ``_ready``.
        while loop._scheduled and loop._scheduled[0]._when < end:
            handle = heapq.heappop(loop._scheduled)
            handle._scheduled = False
            if handle._cancelled:
                loop._timer_cancelled_count -= 1
            else:
                due.append(handle)
        if len(due) > 1:
            self.rng.shuffle(due)
        loop._ready.extend(due)

    def _step(self, timeout):
        rt = self.runtime
        if timeout is not None and timeout <= 0:  # ready callbacks are waiting to run
            if rt.pending and rt.now >= rt.horizon:
                rt.sync(rt.now)  # a blocking stall passed completions: deliver them now
            else:
                rt.spins += 1
                if rt.spins > POLL_SPINS:
                    rt.sync(self._next_timer(), poll=True)
            return []
        until = None if timeout is None else rt.now + max(1, round(timeout * TICKS_PER_SECOND))
        if not rt.out and until is not None and until <= rt.horizon and rt.now < rt.horizon:
            rt.now = until  # our own timer fires before anything the grader runs can finish
            rt.spins = 0
            return []
        rt.sync(until)
        return []

    def _next_timer(self) -> int | None:
        # CPython-private: BaseEventLoop keeps its timers in the heap ``_scheduled``.
        # A timer at infinity (``asyncio.sleep(math.inf)``) or NaN never fires: no timer.
        whens = [h.when() for h in self.loop._scheduled if not h.cancelled()]
        whens = [when for when in whens if math.isfinite(when)]
        if not whens:
            return None
        return max(self.runtime.now, round(min(whens) * TICKS_PER_SECOND))


class _Future(asyncio.Future):
    """Hashes by creation order, not by address: sets of futures iterate alike everywhere."""

    _serials = iter(range(1, 1 << 62))

    def __init__(self, *args, **kwargs) -> None:
        self._overlap_serial = next(_Future._serials)
        super().__init__(*args, **kwargs)

    def __hash__(self) -> int:
        return self._overlap_serial


class Task(asyncio.Task):
    """asyncio's Task, hashed by creation order (``asyncio.Task`` is this class here).

    Every task is registered with the witness (however it was made: ``create_task``,
    ``ensure_future`` or ``asyncio.Task(coro)``), which counts them at return."""

    _serials = iter(range(1, 1 << 62))

    def __init__(self, *args, **kwargs) -> None:
        self._overlap_serial = next(Task._serials)  # first: registering the task hashes it
        super().__init__(*args, **kwargs)
        witness.register(self)

    def __hash__(self) -> int:
        return self._overlap_serial


_start_thread = threading.Thread.start  # the real one (patches make Thread.start inline)


class VirtualThread:
    """A real thread that runs only while the loop waits for it: ``switch_in`` (in the
    loop's thread) lets it run until it waits (``wait_for``) or ends; a future it waits
    for switches it back in when it completes. One thread of the program runs at a time,
    so what happens between waits is as deterministic as the loop itself."""

    def __init__(self, loop: CandidateLoop, func, args, future: asyncio.Future) -> None:
        self.loop, self.func, self.args, self.future = loop, func, args, future
        self.runtime = loop.runtime
        self._go, self._back = threading.Semaphore(0), threading.Semaphore(0)
        self._outcome: tuple | None = None
        self._thread = threading.Thread(target=self._main, name="overlap-thread", daemon=True)
        self._started = False

    def switch_in(self, _done=None) -> None:
        outer = self.runtime.thread
        self.runtime.thread = self
        if not self._started:
            self._started = True
            _start_thread(self._thread)
        self._go.release()
        self._back.acquire()  # until it waits again, or ends
        self.runtime.thread = outer
        if self._outcome is not None and not self.future.done():
            ok, value = self._outcome
            if ok:
                self.future.set_result(value)
            else:
                self.future.set_exception(value)

    def wait_for(self, future: asyncio.Future):
        """In the thread: give the loop back until ``future`` completes; its result."""
        future.add_done_callback(self.switch_in)
        self._back.release()
        self._go.acquire()
        return future.result()

    def _main(self) -> None:
        self._go.acquire()
        try:
            self._outcome = (True, self.func(*self.args))
        except BaseException as exc:  # the program's error, for whoever awaits the thread
            self._outcome = (False, exc)
        finally:
            self._back.release()


class CandidateLoop(asyncio.SelectorEventLoop):
    def __init__(self, runtime: Runtime, seed: int | None = None) -> None:
        selector = _Selector(runtime, seed)
        super().__init__(selector)
        selector.loop = self
        self.runtime = runtime
        self._clock_resolution = 0.5 / TICKS_PER_SECOND
        self.set_task_factory(lambda loop, coro, **kw: Task(coro, loop=loop, **kw))

    def time(self) -> float:
        return self.runtime.now / TICKS_PER_SECOND

    def create_future(self):
        return _Future(loop=self)

    def run_forever(self) -> None:
        outer = self.runtime.loop_running
        self.runtime.loop_running = True
        try:
            super().run_forever()
        finally:
            self.runtime.loop_running = outer

    def call_exception_handler(
        self, context, _isinstance=isinstance, _tasks=witness._TASKS, _dropped=witness.DROPPED,
        _reported=witness.REPORTED, _next=next,
    ) -> None:
        # A task collected while still pending, or failed with nobody retrieving its
        # error, reports itself here as it goes: the witness keeps what it said (what
        # this uses is bound before the program runs, like the witness's own code).
        task = context.get("task") or context.get("future")
        if _isinstance(task, _tasks):
            _dropped.append((task, context.get("exception")))
            _next(_reported)
        super().call_exception_handler(context)

    def run_in_executor(self, executor, func, *args):
        """``func`` runs in a thread of its own (``asyncio.to_thread`` too), one thread at
        a time: it runs until it waits (a blocking kit call, ``time.sleep``, a contended
        lock), and while it waits the loop and the other threads go on. So threads
        interleave where real ones would, deterministically, and race where real ones
        would race (reported in the ``threads`` warning)."""
        self.runtime.note("run_in_executor")
        future = self.create_future()
        VirtualThread(self, func, args, future).switch_in()
        return future

    def close(self) -> None:
        # ``asyncio.run()`` in the candidate's code closes the loop it was handed; the
        # runtime still needs it, so closing waits for ``dispose()``.
        return

    def dispose(self) -> None:
        if not self.is_closed():
            super().close()


class Policy(asyncio.DefaultEventLoopPolicy):
    """``asyncio.run()`` / ``new_event_loop()`` in the candidate's code get the run's loop."""

    def __init__(self, loop: CandidateLoop) -> None:
        super().__init__()
        self._the_loop = loop

    def new_event_loop(self):
        return self._the_loop


class Deadlock(BaseException):
    """Standalone loop: nothing is ready, nothing is scheduled, and no real event came."""


class LocalClock(Runtime):
    """The runtime of a loop with no grader behind it: time jumps to the next timer.

    Used by :func:`standalone_loop`, which runs any asyncio program on the candidates'
    loop (the CPython asyncio test suites: ``python -m runner.asyncio_suites``)."""

    REAL_WAIT_S = 5.0  # real time to wait for a thread or I/O before calling it a deadlock

    def __init__(self) -> None:
        super().__init__(channel=None)
        self.horizon = 1 << 62
        self.selector: _Selector | None = None

    def sync(self, until: int | None, *, poll: bool = False) -> None:
        self.spins = 0
        self.out = []
        if until is not None:
            self.now = max(self.now, until)
            return
        # Nothing scheduled: only a thread or real I/O can wake the loop.
        deadline = time.monotonic() + self.REAL_WAIT_S
        while time.monotonic() < deadline:
            if selectors.SelectSelector.select(self.selector, 0.01):
                return
            if self.selector.loop._ready:
                return
        raise Deadlock("every task is waiting and nothing is scheduled to wake any of them")

    def call(self, *args, **kwargs):
        raise RuntimeError("no grader behind a standalone loop")


class _StandaloneSelector(_Selector):
    def _step(self, timeout):
        real = selectors.SelectSelector.select(self, 0)  # real I/O first (threads, pipes)
        if real:
            return real
        return super()._step(timeout)


def standalone_loop(seed: int | None = None) -> CandidateLoop:
    """The candidates' event loop with no grader: virtual time, FIFO, and (with a seed)
    a seeded order for timers due at the same instant."""
    runtime = LocalClock()
    loop = CandidateLoop.__new__(CandidateLoop)
    selector = _StandaloneSelector(runtime, seed)
    runtime.selector = selector
    asyncio.SelectorEventLoop.__init__(loop, selector)
    selector.loop = loop
    loop.runtime = runtime
    loop._clock_resolution = 0.5 / TICKS_PER_SECOND
    loop.close = loop.dispose  # standalone loops really close
    return loop
