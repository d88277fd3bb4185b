"""Blocking calls during a simulation: they cost simulated time and stall the loop.

While :func:`installed` is active, and only while a simulation runs:

- ``time.sleep(s)`` moves the virtual clock by ``s`` without yielding: it costs its
  full time and nothing else runs meanwhile (as on a real event loop);
- ``time.time()``, ``monotonic()``, ``perf_counter()`` (and their ``_ns`` twins)
  read the virtual clock; each read *from the user's code* also costs
  ``CLOCK_READ_COST`` of blocking time, so a busy-wait on the clock takes as long
  as it waits, blocks everything, and ends;
- threads and executors (``threading.Thread``, ``ThreadPoolExecutor``,
  ``loop.run_in_executor``, ``asyncio.to_thread``) run their function right away,
  blocking, and are counted so the result can report them. The simulation has one
  thread; hiding work in another would make it look free.

Outside a simulation every patched function behaves exactly like the original.
"""

from __future__ import annotations

import concurrent.futures
import sys
import threading
import time
import traceback
from contextlib import contextmanager

from runner.sim import core

CLOCK_READ_COST = 1e-3  # simulated seconds per clock read from user code
_WALL_CLOCK_BASE = 1_700_000_000.0  # what time.time() reads at virtual t=0

_user_files: set[str] = set()

_real_sleep = time.sleep
_real_clocks = {
    name: getattr(time, name)
    for name in ("time", "monotonic", "perf_counter", "time_ns", "monotonic_ns", "perf_counter_ns")
}
_real_thread_start = threading.Thread.start
_real_thread_join = threading.Thread.join
_real_thread_is_alive = threading.Thread.is_alive
_real_submits = {
    cls: cls.submit
    for cls in (concurrent.futures.ThreadPoolExecutor, concurrent.futures.ProcessPoolExecutor)
}


def note_thread(what: str) -> None:
    sim = core.current()
    if sim is not None:
        sim.thread_calls[what] += 1


# -- time ---------------------------------------------------------------------


def _sleep(seconds: float) -> None:
    sim = core.current()
    if sim is None:
        _real_sleep(seconds)
        return
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    sim.stall(seconds, call="time.sleep")


def _virtual_now(sim: core.Sim) -> float:
    # Called from a patched clock function, itself called by the reader: the
    # reader's frame is two levels up.
    if sys._getframe(2).f_code.co_filename in _user_files:
        sim.clock_reads += 1
        sim.stall(CLOCK_READ_COST, call="reading the clock")
    return sim.now()


def _make_clock(name: str, offset: float, ns: bool):
    real = _real_clocks[name]

    def clock():
        sim = core.current()
        if sim is None:
            return real()
        value = _virtual_now(sim) + offset
        return round(value * 1e9) if ns else value

    clock.__name__ = name
    clock.__doc__ = real.__doc__
    return clock


_clocks = {
    "time": _make_clock("time", _WALL_CLOCK_BASE, False),
    "time_ns": _make_clock("time_ns", _WALL_CLOCK_BASE, True),
    "monotonic": _make_clock("monotonic", 0.0, False),
    "monotonic_ns": _make_clock("monotonic_ns", 0.0, True),
    "perf_counter": _make_clock("perf_counter", 0.0, False),
    "perf_counter_ns": _make_clock("perf_counter_ns", 0.0, True),
}


# -- threads ------------------------------------------------------------------


def _thread_start(self: threading.Thread) -> None:
    if core.current() is None:
        _real_thread_start(self)
        return
    note_thread("threading.Thread")
    self._overlap_inline = True
    try:
        self.run()
    except Exception:
        traceback.print_exc()


def _thread_join(self: threading.Thread, timeout: float | None = None) -> None:
    if getattr(self, "_overlap_inline", False):
        return
    _real_thread_join(self, timeout)


def _thread_is_alive(self: threading.Thread) -> bool:
    if getattr(self, "_overlap_inline", False):
        return False
    return _real_thread_is_alive(self)


def _make_submit(cls):
    real = _real_submits[cls]

    def submit(self, fn, /, *args, **kwargs):
        if core.current() is None:
            return real(self, fn, *args, **kwargs)
        note_thread(cls.__name__)
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:
            future.set_exception(exc)
        return future

    return submit


# -- installing ---------------------------------------------------------------


@contextmanager
def installed(user_files: set[str]):
    """Patch time and threads for the duration; ``user_files`` pay for clock reads."""
    _user_files.clear()
    _user_files.update(user_files)
    time.sleep = _sleep
    for name, clock in _clocks.items():
        setattr(time, name, clock)
    threading.Thread.start = _thread_start
    threading.Thread.join = _thread_join
    threading.Thread.is_alive = _thread_is_alive
    for cls in _real_submits:
        cls.submit = _make_submit(cls)
    try:
        yield
    finally:
        time.sleep = _real_sleep
        for name, clock in _real_clocks.items():
            setattr(time, name, clock)
        threading.Thread.start = _real_thread_start
        threading.Thread.join = _real_thread_join
        threading.Thread.is_alive = _real_thread_is_alive
        for cls, submit in _real_submits.items():
            cls.submit = submit
        _user_files.clear()


def add_user_file(path: str) -> None:
    _user_files.add(path)
