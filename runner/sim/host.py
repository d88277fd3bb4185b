"""The trusted side of the boundary: the grader serves one run of the candidate's process.

The grader's process holds the truth: the simulated cluster (its values), the virtual
clock (``runner.sim.clock.VirtualLoop``), the trace, and later the checks and the verdict.
The candidate's code runs in another process (``runner.candidate``), forked per run from
a light fork server that never imports torch. It holds only *handles*; every message it
sends is validated here (``_Validator``): the frame and its size, every field's type,
every handle (it must be one this run gave out, of a class that has the named method),
every time it claims (never before the grader's clock, never past a completion it has
not been told about unless it blocked).

How the clock moves (the candidate's loop is stock asyncio, see runner.candidate.loop):

- ``sync {t, ops, until}``: the candidate went idle at ``t`` after issuing ``ops`` (kit
  calls started, cancelled, blocking stalls). The grader applies them at ``t``, then runs
  the cluster until a candidate-visible call completes or the clock reaches ``until``
  (the candidate's next timer), and answers the new time, what completed at that instant
  (in a seeded order on seeded runs) and the *horizon*: the next time anything scheduled
  here can happen. Until then the candidate's own timers fire without a round trip.
- ``call {t, ops, h, m, a}``: a blocking or free kit call, answered at once.
- ``end {t, ops, value | error, leftover}``: ``train()`` returned (or failed).

Costs: one round trip (~50 µs) per instant at which something the candidate waits for
completes, and one per blocking or free call; the candidate's own timers are free.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import inspect
import os
import random
import re
import secrets
import signal
import time
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

import torch

from runner import forkserver, privileges
from runner.protocol import (
    MAX_ITEMS,
    MAX_STRING,
    Channel,
    ProtocolError,
    check_value,
    unsealed,
)
from runner.sim.clock import StuckError, VirtualLoop, VirtualTimeLimit, to_seconds
from runner.sim.core import Cluster, Sim, Surface

RUNNER_PARENT = Path(__file__).resolve().parents[2]  # the folder holding runner/
# Real seconds the grader waits for a message while the candidate's processes use no CPU
# at all (blocked for real); while they work it waits on (their CPU limit bounds that).
WAIT_S = 2.0  # real seconds of silence with no CPU used: a blocked run (see _working)
EXIT_GRACE_S = 1.0  # real seconds a process whose channel closed has to end by itself
CPU_S = 5  # CPU seconds one run of the candidate's process may use
# What one run may cost the grader, whatever the program does (the references and every
# golden example stay under a tenth of each: at most 5,417 messages, 360 kit operations
# and 829 handles in a run, measured 2026-11-26). Past a bound the run stops with a
# runtime error that says which bound, never a hang or an internal error.
MAX_MESSAGES = 50_000  # messages in one run
MAX_OPERATIONS = 20_000  # kit operations started in one run (async, blocking and free)
MAX_IN_FLIGHT = 1_000  # kit operations running at once
MAX_IDLE_SYNCS = 20_000  # syncs in a row at which neither the clock nor anything else moved
MAX_HANDLES = 50_000  # kit objects handed out in one run
TENSOR_SURFACE = Surface(const=("shape",))
_PLAIN = frozenset({bool, int, str})  # sent as they are (exact types: the fast path)
ERROR_TYPES = {
    "TypeError", "ValueError", "KeyError", "IndexError", "RuntimeError", "AttributeError",
    "ZeroDivisionError", "AssertionError",
}
CANDIDATE_VERDICTS = {"runtime_error", "missing_entry_point", "memory_limit"}
NOTES = {"threading.Thread", "ThreadPoolExecutor", "ProcessPoolExecutor", "run_in_executor"}
STALLS = {"time.sleep": "time.sleep", "reading the clock": "reading the clock"}


# -- the candidate's processes ------------------------------------------------------


class ForkServer(forkserver.Client):
    """``python -S -m runner.candidate``: forks one fresh candidate process per run."""

    name = "candidate fork server"

    def __init__(self) -> None:
        env = {
            "PYTHONHASHSEED": "0",
            "PYTHONPATH": str(RUNNER_PARENT),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
        }
        super().__init__(["-S", "-m", "runner.candidate"], env, as_candidate=True)

    def reap(self, pid: int) -> dict:
        forkserver.kill_session(pid)  # the run's whole session: nothing survives it
        return self.ask({"op": "wait", "pid": pid})


_fork_server: ForkServer | None = None
# The grader's own limits, priority and scheduling policy when its first run started:
# where a run shares the grader's uid (runner.privileges), what it changed of them is
# its doing, and the grading ends with a verdict of the run's own (grader_tampered).
_grader_attributes: dict = {}
REACHED_GRADER = (
    "The program changed the grader's own {what} (its process shares the program's user): "
    "the run cannot be trusted."
)
STATS: collections.Counter = collections.Counter()  # runs and messages served (benchmarks)


def fork_server() -> ForkServer:
    """One fork server per grader process (restarted if it died)."""
    global _fork_server
    # Non-dumpable before any run starts, whoever started the server (it may have been
    # inherited, see prestart_fork_server): a run (same uid) cannot ptrace the grader.
    forkserver.prctl(forkserver.PR_SET_DUMPABLE, 0)
    if not _grader_attributes:
        _grader_attributes.update(privileges.attributes())
    if _fork_server is None or not _fork_server.alive():
        _fork_server = ForkServer()
    return _fork_server


def use_fork_server(server: forkserver.Client) -> None:
    """Serve this process's runs from ``server`` (a helper grader's twin server,
    runner.sim.parallel)."""
    global _fork_server
    _fork_server = server


def prestart_fork_server() -> int:
    """Start a fork server ahead of the grading that will use it; the descriptor to keep.

    A pooled sandbox's first process calls this while it waits for a job (runner.sandbox
    .inside): the job's grader, forked from it, inherits the server and skips starting
    an interpreter (~60 ms) on the click's path. A fresh server for every job: the one a
    job used dies with everything else the job left."""
    global _fork_server
    _grader_attributes.clear()  # the job's grader records its own (after its limits)
    if _fork_server is not None:
        with contextlib.suppress(OSError):
            _fork_server.control.close()
    _fork_server = ForkServer()
    return _fork_server.control.fileno()


# -- values across the boundary -----------------------------------------------------


@functools.cache
def surface_of(cls) -> Surface | None:
    """What the candidate may touch of a class (None: it cannot cross as a handle).

    Cached by class: asking torch whether a class is a tensor class costs a Python-level
    ``__subclasscheck__``, and encoding asks for every value."""
    if cls is Cluster:
        return Surface()
    if issubclass(cls, torch.Tensor):
        return TENSOR_SURFACE
    return getattr(cls, "KIT_SURFACE", None)


def _surface_json(cls) -> dict:
    surface = surface_of(cls)
    bases = [b.__name__ for b in cls.__mro__[1:] if "KIT_SURFACE" in b.__dict__]
    data = {
        "const": list(surface.const),
        "live": list(surface.live),
        "free": list(surface.free),
        "block": list(surface.block),
        "async": list(surface.async_),
        "len": surface.length,
        "queue": surface.queue[0] if surface.queue else None,
        "bases": bases[:1],
    }
    doc = inspect.getdoc(cls)
    if doc and cls is not Cluster:
        data["doc"] = doc[:2000]
    return data


class Handles:
    """The kit objects this run handed out, by handle; values never leave this process."""

    def __init__(self) -> None:
        self.objects: dict[int, Any] = {}
        self.by_id: dict[int, int] = {}
        self.announced: set[str] = set()  # classes the candidate has a proxy class for

    def encode(self, value, depth: int = 0):
        cls = type(value)
        if cls in _PLAIN or value is None:
            return value
        surface = surface_of(cls)
        if surface is not None:
            return self._handle(value, cls, surface, depth)
        if isinstance(value, bool | int | str):
            return value
        if isinstance(value, float):
            return value if value == value and abs(value) != float("inf") else repr(value)
        if depth > 12:
            raise TypeError("a value nested too deeply to send")
        if isinstance(value, list):
            return [self.encode(v, depth + 1) for v in value]
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
            return {"$t": [self.encode(v, depth + 1) for v in value]}
        if is_dataclass(value) and not isinstance(value, type):
            return {"$o": cls.__name__, "$a": self._record(value, depth)}
        raise TypeError(f"the kit returned a {cls.__name__}, which cannot cross to the trainer")

    def _record(self, value, depth: int) -> dict:
        names = _record_names(type(value))
        return {name: self.encode(getattr(value, name), depth + 1) for name in names}

    def _handle(self, value, cls: type, surface: Surface, depth: int) -> dict:
        key = id(value)
        handle = self.by_id.get(key)
        if handle is not None:
            return {"$h": handle}
        if len(self.objects) >= MAX_HANDLES:
            raise _Flood(f"made the kit hand out more than {MAX_HANDLES:,} objects in one run")
        handle = len(self.objects) + 1
        self.objects[handle] = value
        self.by_id[key] = handle
        if surface is TENSOR_SURFACE:
            const = {"shape": {"$t": list(value.shape)}}
        elif cls is Cluster:
            const = {k: self.encode(v, depth + 1) for k, v in vars(value).items()}
        else:
            const = {n: self.encode(getattr(value, n), depth + 1) for n in surface.const}
            if surface.queue:
                upcoming = getattr(value, surface.queue[1])()
                const["$q"] = [self.encode(item, depth + 1) for item in upcoming]
        encoded = {"$h": handle, "$c": cls.__name__, "$a": const}
        if cls.__name__ not in self.announced:  # a class the hello did not describe
            self.announced.add(cls.__name__)
            encoded["$s"] = _surface_json(cls)
        return encoded

    def surfaces(self, classes) -> dict:
        self.announced.update(cls.__name__ for cls in classes)
        return _surfaces_json(tuple(classes))

    def decode(self, value, depth: int = 0):
        """A value from the candidate's process: scalars, lists, tuples, our handles."""
        if value is None or isinstance(value, bool | int | float | str):
            return value
        if isinstance(value, list):
            return [self.decode(v, depth + 1) for v in value]
        if isinstance(value, dict) and "$h" in value:
            handle = value["$h"]
            if type(handle) is not int or handle not in self.objects:
                raise ProtocolError(f"a handle the grader never gave out ({handle!r})")
            return self.objects[handle]
        if isinstance(value, dict) and "$t" in value:
            return tuple(self.decode(v, depth + 1) for v in value["$t"])
        raise ProtocolError("a value of an unknown kind")


@functools.cache
def _record_names(cls: type) -> tuple[str, ...]:
    """A plain record's fields and public properties (the config's ``steps_per_epoch``),
    less its secret fields (``runner.sdk.secret``): those never reach the trainer."""
    names = [f.name for f in fields(cls) if not f.metadata.get("overlap_secret")]
    for name, member in inspect.getmembers(cls):
        if isinstance(member, property) and not name.startswith("_"):
            names.append(name)
    return tuple(names)


@functools.cache
def _surfaces_json(classes: tuple[type, ...]) -> dict:
    return {cls.__name__: _surface_json(cls) for cls in classes}


def kit_classes(root) -> list[type]:
    """Every kit class reachable from the cluster (and the kit's own), bases first."""
    from runner import sim as kit

    found: dict[str, type] = {}

    def add(cls: type) -> None:
        for base in reversed(cls.__mro__):
            declared = base is cls or "KIT_SURFACE" in base.__dict__
            if declared and surface_of(base) is not None:
                found.setdefault(base.__name__, base)

    def walk(value, depth: int = 0) -> None:
        if depth > 6:
            return
        if isinstance(value, list | tuple):
            for item in value[:64]:
                walk(item, depth + 1)
        elif surface_of(type(value)) is not None:
            add(type(value))
            if type(value) is Cluster:
                for part in vars(value).values():
                    walk(part, depth + 1)

    for name in kit.__all__:
        cls = getattr(kit, name)
        if isinstance(cls, type) and surface_of(cls) is not None:
            add(cls)
    add(torch.Tensor)
    walk(root)
    found["Tensor"] = torch.Tensor
    return list(found.values())


# -- one run -------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the run's candidate process did, as the grader saw it."""

    returned: Any = None
    makespan_ticks: int = 0
    leftover: list[str] = field(default_factory=list)
    failure: tuple[str, str, dict | None] | None = None  # (verdict, message, error details)
    stuck: str | None = None  # deadlock | livelock | time_limit
    waiting: list[str] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    polls: int = 0
    messages: int = 0


class _Stop(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class _Flood(BaseException):  # not an Exception: no kit error handler may swallow it
    """The program asked more of the grader than any run may (``MAX_*``): its error."""

    PACE = (
        "Start work at the pace you await it (a bounded queue, a semaphore, or awaiting "
        "before starting more)."
    )
    WAIT = "Await what you wait for (an Event, a Condition, a Queue) instead of asking in a loop."

    def __init__(self, what: str, advice: str = PACE) -> None:
        super().__init__(what)
        self.message = f"The program {what}: a run may not. {advice}"


class HostRun:
    """Serve one run: the candidate's process talks, the cluster on ``loop`` answers."""

    def __init__(
        self,
        sim: Sim,
        loop: VirtualLoop,
        cluster,
        *,
        order_seed: int | None,
        wait_s: float = WAIT_S,
        display: str = "solution.py",
    ) -> None:
        self.display = display
        self.seal: bytes | None = None  # the run's key: its end frame must carry its seal
        self.sim = sim
        self.loop = loop
        self.cluster = cluster
        self.handles = Handles()
        self.calls: dict[int, Any] = {}  # call id -> the kit task serving it
        self.coros: dict[int, Any] = {}  # call id -> its kit coroutine, until it starts
        self.inflight: dict[int, tuple[Any, str]] = {}  # call id -> (object, method)
        self.deliveries: list[tuple[int, bool | None, Any]] = []  # (id, ok, value)
        self.last_call_id = 0
        self.operations = 0  # kit operations started (async, blocking, free)
        self.order_rng = random.Random(order_seed) if order_seed is not None else None
        self.wait_s = wait_s
        self.horizon_sent = 0
        self.until_reached = False
        self.outcome = Outcome()
        self.idle_syncs = 0
        loop.pause_when = lambda: bool(self.deliveries) or self.until_reached

    # -- the conversation ------------------------------------------------------------

    def hello(self, code: str, entry: tuple[str, str]) -> dict:
        classes = self.handles.surfaces(kit_classes(self.cluster))
        return {
            "k": "hello",
            "code": code,
            "display": self.display,
            "entry": list(entry),
            "classes": classes,
            "cluster": self.handles.encode(self.cluster),
        }

    def serve(self, channel: Channel, code: str, entry: tuple[str, str]) -> Outcome:
        channel.sock.settimeout(self.wait_s)
        channel.send(self.hello(code, entry))
        outcome = self.outcome
        while True:
            message = channel.recv()
            outcome.messages += 1
            kind = message.get("k")
            try:
                if outcome.messages > MAX_MESSAGES:
                    raise _Flood(
                        f"exchanged more than {MAX_MESSAGES:,} messages with the grader "
                        "(kit calls, polls and waits) in one run",
                        _Flood.WAIT,
                    )
                if kind == "end":
                    if self.seal is not None:
                        why = unsealed(channel.last_frame, self.seal)
                        if why:
                            raise ProtocolError(why)
                    self._end(message)
                    return outcome
                self._apply(message)
                if kind == "sync":
                    reply = self._sync(message)
                elif kind == "call":
                    reply = self._call(message)
                else:
                    raise ProtocolError(f"an unknown message kind {kind!r}")
            except _Stop as stop:
                outcome.stuck = stop.reason
                outcome.failure = ("timeout", stop.message, None)
                outcome.makespan_ticks = self.loop.ticks()
                if kind != "end":
                    with contextlib.suppress(Exception):
                        channel.send({"stop": stop.reason, "message": stop.message})
                        channel.sock.settimeout(2.0)
                        self._stopped(channel.recv())
                return outcome
            except _Flood as flood:
                outcome.failure = ("runtime_error", flood.message, None)
                outcome.makespan_ticks = self.loop.ticks()
                with contextlib.suppress(Exception):
                    channel.send({"stop": "flood", "message": flood.message})
                    channel.sock.settimeout(2.0)
                    self._stopped(channel.recv())
                return outcome
            channel.send(reply)

    # -- applying what the candidate did ---------------------------------------------

    def _apply(self, message: dict) -> None:
        t = message.get("t")
        if type(t) is not int or t < self.loop.ticks():
            raise ProtocolError("a time before the grader's clock")
        ops = message.get("ops")
        if not isinstance(ops, list):
            raise ProtocolError("a bad list of operations")
        if len(ops) > MAX_ITEMS:  # what the candidate's side queues when it starts that many
            raise _Flood(f"started more than {MAX_ITEMS:,} kit operations at one instant")
        # Blocking stalls first (each is a stretch in which nothing ran), then the rest of
        # the way to ``t``: by running the cluster up to the horizon the candidate was
        # given, and blocked beyond it (it can only have passed it by blocking).
        for op in ops:
            if isinstance(op, list) and len(op) == 5 and op[0] == "s":
                start, end = op[1], op[2]
                if type(start) is not int or type(end) is not int or not start <= end <= t:
                    raise ProtocolError("a stall outside the time it claims")
                if start < self.loop.ticks():
                    raise ProtocolError("a stall before the grader's clock")
                self._move_to(start)
                self._move_to(end, blocking=True)
        self._move_to(t)
        for op in ops:
            self._op(op, t)

    def _move_to(self, t: int, *, blocking: bool = False) -> None:
        """Bring the cluster to tick ``t``: by running it, or (blocked) without running."""
        now = self.loop.ticks()
        if t <= now:
            return
        limit = self.loop.time_limit
        if limit is not None and to_seconds(t) > limit:
            raise _Stop("time_limit", f"the simulated time passed the limit of {limit:g} s")
        if not blocking:
            self._run(until=min(t, self.horizon_sent))
        if self.loop.ticks() < t:
            self.loop.advance_ticks(t - self.loop.ticks())
        self._settle()

    def _op(self, op, t: int) -> None:
        if not isinstance(op, list) or not op or not isinstance(op[0], str):
            raise ProtocolError("a malformed operation")
        kind = op[0]
        if kind == "c" and len(op) == 6:
            _, call_id, handle, name, args, kwargs = op
            if type(call_id) is not int or call_id <= self.last_call_id:
                raise ProtocolError("a call id out of order")
            self.last_call_id = call_id
            self._count_operation()
            if len(self.calls) >= MAX_IN_FLIGHT:
                raise _Flood(f"had more than {MAX_IN_FLIGHT:,} kit operations running at once")
            obj, method = self._method(handle, name, "async")
            args, kwargs = self._arguments(args, kwargs)
            self.inflight[call_id] = (obj, name)
            try:
                coro = method(*args, **kwargs)
            except Exception as exc:  # wrong arguments: the candidate's error, at once
                self._deliver_error(call_id, exc)
                return
            self.coros[call_id] = coro
            self.calls[call_id] = self.loop.create_task(self._serve_op(call_id, coro))
        elif kind == "x" and len(op) == 2:
            task = self.calls.get(op[1]) if type(op[1]) is int else None
            if task is not None and not task.done():
                task.cancel()
        elif kind == "s" and len(op) == 5:
            count = op[4] if type(op[4]) is int and 0 < op[4] <= op[2] - op[1] + 1 else 1
            self._stall(op[1], op[2], STALLS.get(op[3], "blocked"), count)
        elif kind == "q" and len(op) == 3 and type(op[2]) is int and op[2] > 0:
            obj, take = self._method(op[1], None, "queue")
            upcoming = getattr(obj, surface_of(type(obj)).queue[1])()
            for _ in range(min(op[2], len(upcoming) + 1)):  # past the end: nothing more
                take()
        elif kind == "n" and len(op) == 2 and op[1] in NOTES:
            self.sim.thread_calls[op[1]] += 1
        else:
            raise ProtocolError("an unknown operation")

    async def _serve_op(self, call_id: int, coro) -> None:
        """Run one kit operation; its outcome joins the instant's deliveries the moment
        it ends (a done callback would cost the loop another iteration per operation)."""
        del self.coros[call_id]  # started: awaited below, whatever happens
        try:
            result = await coro
        except asyncio.CancelledError:
            self.deliveries.append((call_id, None, None))
            raise
        except BaseException as exc:  # the kit's error (a time limit, too): the candidate's
            self.deliveries.append((call_id, False, exc))
        else:
            self.deliveries.append((call_id, True, result))

    def _stall(self, start: int, end: int, why: str, count: int) -> None:
        if end <= start:
            return
        self.sim.blocking_calls[why] += count
        span = self.sim.trace.open("blocked", why, start, None, True)
        span.end = end

    def _deliver_error(self, call_id: int, exc: Exception) -> None:
        self.deliveries.append((call_id, False, exc))

    def _method(self, handle, name, mode: str):
        if type(handle) is not int or handle not in self.handles.objects:
            raise ProtocolError(f"a handle the grader never gave out ({handle!r})")
        obj = self.handles.objects[handle]
        surface = surface_of(type(obj))
        if mode == "queue":  # the candidate's side took the next item of a fixed sequence
            if not surface.queue:
                raise ProtocolError(f"{type(obj).__name__} is not a queue")
            return obj, getattr(obj, surface.queue[0])
        allowed = {
            "async": surface.async_,
            "block": surface.block,
            "free": surface.free,
            "get": (*surface.live, "__repr__", *(("__len__",) if surface.length else ())),
        }[mode]
        if not isinstance(name, str) or name not in allowed:
            raise ProtocolError(f"{type(obj).__name__} has no {mode} member {name!r}")
        if mode == "get":
            if name == "__len__":
                return obj, lambda: len(obj)
            if name == "__repr__":
                return obj, lambda: _repr(obj)
            return obj, lambda: getattr(obj, name)
        return obj, getattr(obj, name)

    def _arguments(self, args, kwargs):
        if not isinstance(args, list) or not isinstance(kwargs, dict) or len(kwargs) > 16:
            raise ProtocolError("bad call arguments")
        check_value(args)
        for key, value in kwargs.items():
            if not key.isidentifier() or len(key) > 64:
                raise ProtocolError("a bad keyword argument name")
            check_value(value)
        return self.handles.decode(args), {k: self.handles.decode(v) for k, v in kwargs.items()}

    # -- moving the clock -------------------------------------------------------------

    def _run(self, *, until: int | None) -> None:
        """Run the cluster until a visible completion, or the clock reaches ``until``."""
        timer = None
        self.until_reached = False
        if until is not None:
            if until <= self.loop.ticks():
                self.until_reached = True
            else:
                timer = self.loop.call_at(to_seconds(until), self._reached)
        try:
            if not self.until_reached or self.loop._ready:
                self.loop.step_until_paused()
        except VirtualTimeLimit as exc:
            raise _Stop("time_limit", str(exc)) from None
        except StuckError as exc:
            raise _Stop(exc.kind, str(exc)) from None
        finally:
            if timer is not None:
                timer.cancel()
            self.until_reached = False

    def _reached(self) -> None:
        self.until_reached = True

    def _settle(self) -> None:
        """Run everything due at the current instant (nothing moves the clock)."""
        self.until_reached = True
        try:
            self.loop.step_until_paused()
        except StuckError as exc:
            raise _Stop(exc.kind, str(exc)) from None
        finally:
            self.until_reached = False

    def _sync(self, message: dict) -> dict:
        until = message.get("until")
        poll = message.get("poll") is True
        if until is not None and (type(until) is not int or until < 0):
            raise ProtocolError("a bad 'until'")
        before = self.loop.ticks()
        if poll:
            self.outcome.polls += 1
        busy = any(not task.done() for task in self.calls.values())
        if not busy and not self.deliveries and until is None:
            if poll:
                raise _Stop(
                    "livelock",
                    "the program keeps polling (`await asyncio.sleep(0)` in a loop?) but "
                    "nothing it could be waiting for is in progress",
                )
            raise _Stop(
                "deadlock", "every task is waiting and nothing is scheduled to wake any of them"
            )
        if not self.deliveries:
            if until is not None:
                until = max(until, before)
                limit = self.loop.time_limit
                if limit is not None and to_seconds(until) > limit and not busy:
                    raise _Stop(
                        "time_limit", f"the simulated time passed the limit of {limit:g} s"
                    )
            self._run(until=until)
        moved = self.loop.ticks() != before or self.deliveries
        self.idle_syncs = 0 if moved else self.idle_syncs + 1
        if self.idle_syncs > MAX_IDLE_SYNCS:
            raise _Stop("livelock", "the event loop kept spinning without simulated time moving")
        return self._reply()

    def _count_operation(self) -> None:
        self.operations += 1
        if self.operations > MAX_OPERATIONS:
            raise _Flood(f"started more than {MAX_OPERATIONS:,} kit operations in one run")

    def _call(self, message: dict) -> dict:
        mode = message.get("mode")
        if mode not in ("block", "free", "get"):
            raise ProtocolError("a bad call mode")
        if mode != "get":
            self._count_operation()
        _obj, method = self._method(message.get("h"), message.get("m"), mode)
        args, kwargs = self._arguments(message.get("a", []), message.get("kw", {}))
        self.sim.caller_in_async = message.get("in_async") is True
        reply: dict
        try:
            result = method(*args, **kwargs)
            reply = {"r": self.handles.encode(result)}
        except VirtualTimeLimit as exc:
            raise _Stop("time_limit", str(exc)) from None
        except Exception as exc:
            reply = {"err": _error_json(exc)}
        finally:
            self.sim.caller_in_async = False
        # Run what is due now (what fell due during a blocking call, the operations this
        # message started), so that the horizon in the reply is true.
        if mode == "block" or self.loop._ready:
            self._settle()
        reply.update(self._reply())
        return reply

    def _reply(self) -> dict:
        done = self.deliveries
        self.deliveries = []
        if self.order_rng is not None and len(done) > 1:
            self.order_rng.shuffle(done)  # completions at one instant, in a seeded order
        answered = []
        for call_id, ok, value in done:
            self.inflight.pop(call_id, None)
            self.calls.pop(call_id, None)
            if ok is None:  # cancelled
                continue
            if not ok:
                answered.append([call_id, False, _error_json(value)])
            else:
                try:
                    answered.append([call_id, True, self.handles.encode(value)])
                except TypeError as err:
                    answered.append([call_id, False, _error_json(err)])
        horizon = self.loop.next_timer_ticks()
        limit = self.loop.time_limit
        if limit is not None:
            cap = round(limit * 1_000_000)
            horizon = cap if horizon is None else min(horizon, cap)
        self.horizon_sent = horizon if horizon is not None else 1 << 62
        return {"now": self.loop.ticks(), "done": answered, "horizon": horizon}

    # -- the end ----------------------------------------------------------------------

    def _end(self, message: dict) -> None:
        outcome = self.outcome
        outcome.stdout = _text(message.get("stdout"), 64 * 1024 + 200)
        outcome.stderr = _text(message.get("stderr"), 64 * 1024 + 200)
        error = message.get("error")
        applied = True
        try:
            self._apply(message)
        except ProtocolError:
            # A run that failed says how in its (sealed) end even when its own code broke
            # into an exchange with us (a signal handler raising while the runtime waited
            # for our answer leaves its clock behind ours): that failure, not the wire's.
            if not isinstance(error, dict):
                raise
            applied = False
        ops = message.get("ops")
        if applied and any(isinstance(op, list) and op[:1] == ["x"] for op in ops):
            # Operations cancelled right before the return: a real loop would have run
            # their cancellation by now (nothing moves the clock; they end cancelled).
            self._settle()
        outcome.makespan_ticks = self.loop.ticks()
        if error is not None:
            if not isinstance(error, dict) or error.get("verdict") not in CANDIDATE_VERDICTS:
                raise ProtocolError("a bad error report")
            line = error.get("line")
            outcome.failure = (
                error["verdict"],
                _text(error.get("message"), 2000) or "the program failed",
                {
                    "type": "exception",
                    "line": line if type(line) is int else None,
                    "traceback": _text(error.get("traceback"), 8000),
                },
            )
        elif "value" in message:
            check_value(message["value"])
            outcome.returned = self.handles.decode(message["value"])
        else:
            raise ProtocolError("an end without a value or an error")
        leftover = message.get("leftover", [])
        if not isinstance(leftover, list):
            raise ProtocolError("a bad list of tasks")
        outcome.leftover = [_text(item, 300) for item in leftover[:10]]
        running = self._running_ops()
        if running:
            outcome.leftover.append("kit operations still running: " + ", ".join(running))

    def _running_ops(self) -> list[str]:
        names = {}
        for call_id, task in self.calls.items():
            if not task.done():
                obj, method = self.inflight.get(call_id, (None, "?"))
                lane = getattr(obj, "lane", type(obj).__name__)
                label = f"{lane} {method.removesuffix('_async')}"
                names[label] = names.get(label, 0) + 1
        return [f"{n} x {label}" if n > 1 else label for label, n in sorted(names.items())][:8]

    def _stopped(self, message: dict) -> None:
        outcome = self.outcome
        if isinstance(message, dict):
            waiting = message.get("waiting", [])
            if isinstance(waiting, list):
                outcome.waiting = [_text(w, 300) for w in waiting[:10]]
            outcome.stdout = _text(message.get("stdout"), 64 * 1024 + 200)
            outcome.stderr = _text(message.get("stderr"), 64 * 1024 + 200)

    def unwind(self) -> None:
        """Cancel the kit operations still running (their spans end cancelled)."""
        pending = [task for task in self.calls.values() if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            with contextlib.suppress(Exception, StuckError):
                self._settle()
        # Operations cancelled before their task first ran: their coroutines never
        # started; closed here, not left to the collector's "never awaited" warning.
        for coro in self.coros.values():
            coro.close()
        self.coros.clear()


def _repr(obj) -> str:
    """What ``repr()`` of a proxy shows (asked only when the trainer prints one): a
    tensor's shape, never its values."""
    if isinstance(obj, torch.Tensor):
        return f"<tensor {tuple(obj.shape)}>"
    return _text(repr(obj), 2000)


def _text(value, limit: int) -> str:
    if not isinstance(value, str):
        return ""
    return value if len(value) <= limit else value[:limit] + "\n…"


def _error_json(exc: BaseException) -> dict:
    name = type(exc).__name__
    if name not in ERROR_TYPES:
        name = "RuntimeError"
    message = str(exc)
    if isinstance(exc, KeyError) and exc.args:
        message = str(exc.args[0])
    return {"type": name, "message": message[:MAX_STRING]}


def run_candidate(
    sim: Sim,
    loop: VirtualLoop,
    cluster,
    code: str,
    entry: tuple[str, str],
    *,
    order_seed: int | None,
    cpu_s: int = CPU_S,
    memory_bytes: int | None = None,
    display: str = "solution.py",
) -> Outcome:
    """Fork a fresh candidate process, serve its run, and reap it. Never raises for
    anything the candidate did: its failures come back in the outcome."""
    server = fork_server()
    host = HostRun(sim, loop, cluster, order_seed=order_seed, display=display)
    # A key for this run alone: the runtime seals the end frame with it, so a frame the
    # program writes to its socket itself cannot pass for the end (the program cannot
    # reach the key: it lives in the runtime's frames, which the audit hook keeps from it).
    host.seal = secrets.token_bytes(32)
    limits = {"cpu_s": cpu_s, "memory_bytes": memory_bytes, "seal": host.seal.hex()}
    # The grader and the run's process take turns on one CPU (see forkserver.pinned).
    cpu = forkserver.current_cpu()
    with forkserver.pinned(cpu):
        outcome = _serve_run(server, host, code, entry, {**limits, "cpu": cpu})
    why = grader_tampered()
    if why:
        outcome.failure = ("runtime_error", why, None)
    return outcome


def grader_tampered() -> str | None:
    """Why no verdict of this grader can be trusted any more, if a run changed its limits,
    priority or scheduling policy (possible only where the run shares its uid)."""
    if not _grader_attributes:
        return None
    changed = privileges.tampered(_grader_attributes)
    if not changed:
        return None
    privileges.restore(_grader_attributes, changed)  # for the gradings after this one
    names = [name.removeprefix("RLIMIT_").lower() for name in changed]
    what = "resource limits" if all(n not in ("nice", "scheduler") for n in names) else "settings"
    return REACHED_GRADER.format(what=f"{what} ({', '.join(names)})")


def _serve_run(server, host: HostRun, code, entry, limits: dict) -> Outcome:
    try:
        pid, sock = server.fork(limits)
    except forkserver.ServerGone:
        # An earlier run of this program stopped or killed the server (a fresh one
        # serves the next request).
        host.outcome.failure = ("runtime_error", forkserver.SERVER_GONE, None)
        return host.outcome
    try:
        return _serve_forked(server, host, code, entry, limits, pid, sock)
    except forkserver.ServerGone:
        forkserver.kill_session(pid)
        host.outcome.failure = ("runtime_error", forkserver.SERVER_GONE, None)
        return host.outcome


def _serve_forked(server, host: HostRun, code, entry, limits: dict, pid, sock) -> Outcome:
    loop = host.loop
    channel = Channel(sock)
    channel.still_working = _working(pid)
    started = time.monotonic()
    try:
        with loop.running():
            host.serve(channel, code, entry)
    except ProtocolError as exc:
        host.outcome.failure = (
            "runtime_error",
            f"The program broke the grader's protocol ({exc}): the run cannot be trusted.",
            None,
        )
    except (EOFError, ConnectionError, TimeoutError, OSError) as exc:
        # The channel closed: give the process a moment to end by itself (an OOM kill,
        # its CPU limit, os._exit) before the reap kills what is left, so that a kill of
        # ours is never read as the kernel's.
        ended = not isinstance(exc, TimeoutError) and _ends_by_itself(pid, EXIT_GRACE_S)
        status = server.reap(pid)
        pid = None
        host.outcome.failure = _died(
            exc, status, time.monotonic() - started, limits["cpu_s"], ended=ended
        )
    finally:
        sock.close()
        if pid is not None:
            server.reap(pid)
        with loop.running():
            host.unwind()
        loop.pause_when = None
    number_addresses(host.outcome)
    STATS["runs"] += 1
    STATS["messages"] += host.outcome.messages
    return host.outcome


_ADDRESS = re.compile(r"\b0x[0-9a-f]{12}\b")  # what repr() shows of an address (x86-64, arm64)


def number_addresses(outcome: Outcome) -> None:
    """Addresses in what the program printed or raised (``<Job object at 0x7f…>``, a
    coroutine's repr) change from process to process (address-space randomisation,
    which the sandbox's seccomp profile does not let a process turn off): they are shown
    as @1, @2… in order of first appearance, one object keeping one number, so the same
    code gets the same result document everywhere."""
    labels: dict[str, str] = {}

    def label(match: re.Match) -> str:
        return labels.setdefault(match.group(), f"@{len(labels) + 1}")

    def fix(text):
        return _ADDRESS.sub(label, text) if isinstance(text, str) and "0x" in text else text

    outcome.stdout, outcome.stderr = fix(outcome.stdout), fix(outcome.stderr)
    if outcome.failure is not None:
        verdict, message, error = outcome.failure
        if error is not None:
            error = {**error, "traceback": fix(error.get("traceback"))}
        outcome.failure = (verdict, fix(message), error)
    outcome.waiting = [fix(text) for text in outcome.waiting]
    outcome.leftover = [fix(text) for text in outcome.leftover]


def _working(pid: int):
    """Whether the run's processes (its session) used CPU since last asked: a slow
    machine is not a blocked program."""
    tick = os.sysconf("SC_CLK_TCK")
    # Just forked, the run's session is its one process: one /proc read, not a scan of
    # every process on the machine (that is only for a run that went quiet).
    last = [_process_cpu(pid, tick)]

    def still_working() -> bool:
        used = _session_cpu(pid, tick)
        progressed = used > last[0]
        last[0] = used
        return progressed

    return still_working


def _process_cpu(pid: int, tick: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / tick
    except (OSError, ValueError, IndexError):
        return 0.0


def _session_cpu(sid: int, tick: int) -> float:
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{name}/stat") as handle:
                fields = handle.read().rpartition(")")[2].split()
            if int(fields[3]) == sid:
                total += int(fields[11]) + int(fields[12])
    return total / tick


def _ends_by_itself(pid: int, within: float) -> bool:
    """Whether the process ``pid`` (the fork server's child, not ours) ends within
    ``within`` seconds: a zombie waiting for its reap, or gone."""
    deadline = time.monotonic() + within
    while forkserver.running(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.002)
    return True


def _died(exc: BaseException, status: dict, waited: float, cpu_s: int, *, ended: bool = True):
    if isinstance(exc, TimeoutError):  # silent on an open channel: the reap killed it
        return (
            "timeout",
            f"The program stopped answering and used no CPU for {WAIT_S:g} s (blocked on a "
            "real wait: a threading lock, input(), a socket?).",
            None,
        )
    if not ended:  # still running with its channel closed: the reap killed it
        return (
            "runtime_error",
            "The program closed its connection to the grader before train() returned.",
            None,
        )
    sig = status.get("signal")
    if sig == signal.SIGXCPU:
        return (
            "timeout",
            f"The program used {cpu_s} s of CPU without finishing: an endless loop that "
            "never awaits?",
            None,
        )
    if sig == signal.SIGKILL:
        return (
            "memory_limit",
            "The program was killed, most likely for using too much memory.",
            None,
        )
    if sig is not None:
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig
        return ("runtime_error", f"The program's process died from signal {name}.", None)
    return (
        "runtime_error",
        "The program ended its own process before train() returned (os._exit?).",
        None,
    )
