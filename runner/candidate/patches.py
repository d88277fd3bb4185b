"""What blocks and what is deterministic in the candidate's process.

- ``time.sleep(s)`` is a blocking stall of ``s`` simulated seconds (nothing else runs);
- ``time.time/monotonic/perf_counter/process_time/thread_time/clock_gettime`` (and
  ``_ns``) and ``datetime.now/utcnow/today``, ``date.today`` read the virtual clock, and
  each read from the candidate's file costs ``CLOCK_READ_COST`` of blocking time, so a
  busy-wait on the clock costs what it waits and ends;
- ``threading.Thread.start`` and ``executor.submit`` run their function inline, blocking,
  and are reported (``loop.run_in_executor`` and ``asyncio.to_thread`` get a thread of
  their own that waits as real threads do: ``loop.VirtualThread``); in such a thread
  ``time.sleep`` is a timer and a held ``threading.Lock``/``RLock`` is waited for;
- classes the candidate defines without their own ``__hash__`` hash by creation order
  instead of by address, so iterating a set of them gives the same order in every process;
- what would draw entropy from the OS (``os.urandom``, an unseeded ``random.Random()``,
  ``SystemRandom``, and so ``uuid4`` and ``secrets``) draws from one fixed sequence: a
  trainer that picks workers at random gets the same schedule in every run and process.

The stalls are reported to the grader, which decides what they cost; nothing here can make
the candidate's program faster, only slower.
"""

from __future__ import annotations

import builtins
import collections
import concurrent.futures
import contextlib
import functools
import itertools
import operator
import os
import random
import sys
import threading
import time
import traceback

from runner.candidate.runtime import Runtime

CLOCK_READ_COST = 1e-3  # simulated seconds per clock read from the candidate's file
WALL_CLOCK_BASE = 1_700_000_000.0  # what time.time() reads at virtual t=0


def install(runtime: Runtime, filename: str) -> None:
    def sleep(seconds) -> None:
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        thread = runtime.thread
        if thread is not None:  # a thread sleeps alone; the loop and other threads go on
            timer = thread.loop.create_future()
            thread.loop.call_later(float(seconds), _settle, timer)
            thread.wait_for(timer)
            return
        runtime.stall(float(seconds), "time.sleep")

    def make_clock(offset: float, ns: bool):
        def clock():
            if sys._getframe(1).f_code.co_filename == filename:
                runtime.stall(CLOCK_READ_COST, "reading the clock")
            value = runtime.seconds() + offset
            return round(value * 1e9) if ns else value

        return clock

    time.sleep = sleep
    time.time = make_clock(WALL_CLOCK_BASE, False)
    time.time_ns = make_clock(WALL_CLOCK_BASE, True)
    for name in ("monotonic", "perf_counter", "process_time", "thread_time"):
        setattr(time, name, make_clock(0.0, False))
        setattr(time, name + "_ns", make_clock(0.0, True))
    _install_virtual_clock_gettime(make_clock)
    _install_virtual_datetime()

    def thread_start(self) -> None:
        runtime.note("threading.Thread")
        self._overlap_inline = True
        try:
            self.run()
        except Exception:
            traceback.print_exc()

    real_join, real_alive = threading.Thread.join, threading.Thread.is_alive
    threading.Thread.start = thread_start
    threading.Thread.join = lambda self, timeout=None: (
        None if getattr(self, "_overlap_inline", False) else real_join(self, timeout)
    )
    threading.Thread.is_alive = lambda self: (
        False if getattr(self, "_overlap_inline", False) else real_alive(self)
    )

    def make_submit(cls):
        def submit(self, fn, /, *args, **kwargs):
            runtime.note(cls.__name__)
            future = concurrent.futures.Future()
            try:
                future.set_result(fn(*args, **kwargs))
            except Exception as exc:
                future.set_exception(exc)
            return future

        return submit

    for cls in (concurrent.futures.ThreadPoolExecutor, concurrent.futures.ProcessPoolExecutor):
        cls.submit = make_submit(cls)

    _install_stable_hashes(filename)
    _install_fixed_entropy()
    _install_cooperative_locks(runtime)


def _settle(future) -> None:
    if not future.done():
        future.set_result(None)


def _install_cooperative_locks(runtime: Runtime) -> None:
    """``threading.Lock()`` and ``RLock()`` made from now on are the program's threads'
    own: a thread that finds one held waits for it the way it waits for a kit call
    (giving the loop back), instead of blocking the one real thread that could release
    it. The event loop itself cannot wait for a thread's lock: it gets an error that
    says so (a real program would freeze there)."""

    class Lock:
        _reentrant = False

        def __init__(self) -> None:
            self._owner = None  # the VirtualThread holding it, or "loop"
            self._count = 0
            self._waiters: collections.deque = collections.deque()

        def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
            me = runtime.thread or "loop"
            if self._count == 0:
                self._owner, self._count = me, 1
                return True
            if self._reentrant and self._owner is me:
                self._count += 1
                return True
            if not blocking:
                return False
            if me == "loop":
                raise RuntimeError(
                    "the event loop waits for a threading lock that one of its threads "
                    "holds while that thread waits for the event loop: use asyncio.Lock "
                    "in coroutines, threading locks inside threads"
                )
            turn = me.loop.create_future()
            self._waiters.append((me, turn))
            me.wait_for(turn)  # release() handed the lock over
            return True

        def release(self) -> None:
            if self._count == 0:
                raise RuntimeError("release unlocked lock")
            self._count -= 1
            if self._count:
                return
            while self._waiters:
                owner, turn = self._waiters.popleft()
                if not turn.done():
                    self._owner, self._count = owner, 1
                    turn.set_result(None)
                    return
            self._owner = None

        def locked(self) -> bool:
            return self._count > 0

        def __enter__(self) -> bool:
            return self.acquire()

        def __exit__(self, *exc) -> None:
            self.release()

        def _at_fork_reinit(self) -> None:
            self._owner, self._count = None, 0
            self._waiters.clear()

        def _is_owned(self) -> bool:  # threading.Condition asks
            return self._count > 0 and self._owner is (runtime.thread or "loop")

    class RLock(Lock):
        _reentrant = True

    threading.Lock = Lock
    threading.RLock = RLock


def _install_virtual_clock_gettime(make_clock) -> None:
    """``time.clock_gettime(any clock)`` reads the virtual clock too (the wall-clock ones
    with time.time()'s base), so no clock in the time module reads the real one."""
    wall, wall_ns = make_clock(WALL_CLOCK_BASE, False), make_clock(WALL_CLOCK_BASE, True)
    run, run_ns = make_clock(0.0, False), make_clock(0.0, True)
    walls = {getattr(time, n) for n in ("CLOCK_REALTIME", "CLOCK_TAI") if hasattr(time, n)}
    time.clock_gettime = lambda clock, /: wall() if clock in walls else run()
    time.clock_gettime_ns = lambda clock, /: wall_ns() if clock in walls else run_ns()


def _install_virtual_datetime() -> None:
    """``datetime.now()``, ``utcnow()``, ``today()`` and ``date.today()`` come from the
    virtual wall clock (time.time()): the C types read the real clock themselves, so the
    module's classes are replaced by subclasses that ask time.time()."""
    import datetime as module

    real_datetime, real_date = module.datetime, module.date

    class datetime(real_datetime):
        @classmethod
        def now(cls, tz=None):
            return cls.fromtimestamp(time.time(), tz)

        @classmethod
        def utcnow(cls):
            return cls.fromtimestamp(time.time(), module.UTC).replace(tzinfo=None)

        @classmethod
        def today(cls):
            return cls.fromtimestamp(time.time())

    class date(real_date):
        @classmethod
        def today(cls):
            return cls.fromtimestamp(time.time())

    for cls in (datetime, date):
        cls.__module__, cls.__qualname__ = "datetime", cls.__name__
    module.datetime, module.date = datetime, date


ENTROPY_SEED = 0x0E71A9  # the one sequence every run draws "OS entropy" from


def _install_fixed_entropy() -> None:
    """The OS's entropy, as the candidate's program can reach it, from a fixed sequence.

    (``random.Random()`` with no seed asks the OS in C, not through ``os.urandom``; it
    goes through ``Random.seed``, which is patched. Reading /dev/urandom as a file is
    not covered.)"""
    source = random.Random(ENTROPY_SEED)

    def urandom(size, /) -> bytes:
        size = operator.index(size)
        if size < 0:
            raise ValueError("negative argument not allowed")
        return source.randbytes(size)

    real_seed = random.Random.seed

    def seed(self, a=None, version=2) -> None:
        if a is None:
            a = int.from_bytes(urandom(32), "big")
        real_seed(self, a, version)

    os.urandom = urandom
    random._urandom = urandom  # SystemRandom's source (and so secrets')
    random.Random.seed = seed
    random.seed = functools.partial(seed, random._inst)  # the module's bound original


def _install_stable_hashes(filename: str) -> None:
    """Classes from the candidate's file hash by creation order, not by address."""
    serials = itertools.count(1)
    real_build_class = builtins.__build_class__

    def stable_hash(self) -> int:
        try:
            state = object.__getattribute__(self, "__dict__")
        except AttributeError:
            return object.__hash__(self)
        serial = state.get("_overlap_hash")
        if serial is None:
            serial = state["_overlap_hash"] = next(serials)
        return serial

    def build_class(func, name, *bases, **kwargs):
        cls = real_build_class(func, name, *bases, **kwargs)
        code = getattr(func, "__code__", None)
        mine = code is not None and code.co_filename == filename
        if mine and isinstance(cls, type) and cls.__hash__ is object.__hash__:
            with contextlib.suppress(TypeError, AttributeError):
                cls.__hash__ = stable_hash
        return cls

    builtins.__build_class__ = build_class
