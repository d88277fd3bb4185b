"""The candidate process's link to the grader: virtual time, kit calls and proxies.

One :class:`Runtime` per run. The candidate's event loop (``runner.candidate.loop``) is
stock asyncio (FIFO ready queue) with a virtual clock. Kit calls are queued as messages;
when the loop goes idle it sends them in one frame and asks the grader to move the clock
to the next completion (``sync``). The grader answers with the new time, the calls that
completed at that instant, and a *horizon*: no completion can happen before it, so the
candidate's own timers (``asyncio.sleep``) up to the horizon fire here without a round
trip. Blocking calls (``worker.compute_gradient``, ``time.sleep``) are one round trip each.

Nothing here is trusted: the grader validates every message and keeps the truth.
"""

from __future__ import annotations

import asyncio
import itertools
import math

from runner.protocol import MAX_DEPTH, MAX_ITEMS, MAX_STRING, Channel

TICKS_PER_SECOND = 1_000_000
MAX_INT = 1 << 62  # the wire's bound on an integer (runner.protocol.check_value)


class Stopped(BaseException):
    """The grader ended the run (deadlock, time limit, a protocol error...)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class KitError(Exception):
    """Stand-in for an error type the kit raised that has no builtin twin here."""


_ERRORS = {
    cls.__name__: cls
    for cls in (
        TypeError,
        ValueError,
        KeyError,
        IndexError,
        RuntimeError,
        AttributeError,
        ZeroDivisionError,
        AssertionError,
    )
}


class Runtime:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.now = 0  # ticks, as last set by the grader (or advanced by local timers/stalls)
        self.horizon = 0  # no completion can happen before this tick
        self.out: list = []  # queued records: calls started, cancels, stalls, notes
        self.pending: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self.proxies: dict[int, object] = {}
        self.classes: dict[str, type] = {}
        # Builds proxy classes from the surfaces the grader describes (the program sets
        # proxies.build_classes: imports go one way, proxies -> runtime).
        self.make_classes = None
        self.thread = None  # the program's thread running now (loop.VirtualThread), if any
        self.loop_running = False
        self.spins = 0  # loop iterations with ready work but no progress (polling)
        self._stall_start: int | None = None
        self._stall_end = 0
        self._stall_why = ""
        self._stall_count = 0

    # -- time ------------------------------------------------------------------

    def seconds(self) -> float:
        return self.now / TICKS_PER_SECOND

    def stall(self, seconds: float, why: str) -> None:
        """Blocking time (``time.sleep``, reading the clock): the clock moves, nothing runs."""
        ticks = round(seconds * TICKS_PER_SECOND)
        if ticks <= 0:
            return
        # Stalls in a row make one record; time the loop spent waiting between two of them
        # (an ``await`` in between) is not blocked time, so it starts a new record.
        if self._stall_start is None or self._stall_why != why or self._stall_end != self.now:
            self._flush_stall()
            self._stall_start = self.now
            self._stall_why = why
            self._stall_count = 0
        self._stall_count += 1
        self.now += ticks
        self._stall_end = self.now

    def _flush_stall(self) -> None:
        if self._stall_start is not None and self._stall_end > self._stall_start:
            self.out.append(
                ["s", self._stall_start, self._stall_end, self._stall_why, self._stall_count]
            )
        self._stall_start = None

    def note(self, what: str) -> None:
        self.out.append(["n", what])

    # -- talking to the grader -------------------------------------------------

    def sync(self, until: int | None, *, poll: bool = False) -> None:
        """Send what is queued; let the clock move to the next completion (or ``until``)."""
        self._flush_stall()
        self.channel.send({"k": "sync", "t": self.now, "ops": self.out, "until": until,
                           "poll": poll})
        self.out = []
        self.spins = 0
        self._apply(self.channel.recv())

    def call(self, handle: int, name: str, args: tuple, kwargs: dict, mode: str):
        """A blocking or free kit call: one round trip, the answer in hand."""
        self._flush_stall()
        self.channel.send({"k": "call", "t": self.now, "ops": self.out, "h": handle,
                           "m": name, "a": self.encode(list(args)),
                           "kw": self._encode_kwargs(kwargs), "mode": mode,
                           "in_async": self.loop_running})
        self.out = []
        if mode == "block":
            self.spins = 0  # blocked: the clock moved (a read or a free call is no progress)
        reply = self.channel.recv()
        self._apply(reply)
        if "err" in reply:
            raise self._error(reply["err"])
        return self.decode(reply.get("r"))

    def start(
        self, handle: int, name: str, args: tuple, kwargs: dict, future: asyncio.Future
    ) -> int:
        call_id = next(self._ids)
        self.out.append(
            ["c", call_id, handle, name, self.encode(list(args)), self._encode_kwargs(kwargs)]
        )
        self.pending[call_id] = future
        self.spins = 0
        return call_id

    def cancel(self, call_id: int) -> None:
        if self.pending.pop(call_id, None) is not None:
            self.out.append(["x", call_id])

    def _apply(self, reply: dict) -> None:
        if "stop" in reply:
            raise Stopped(reply["stop"], reply.get("message", ""))
        now = reply["now"]
        if now > self.now:
            self.now = now
            self.spins = 0
        self.horizon = reply["horizon"] if reply.get("horizon") is not None else 1 << 62
        for call_id, ok, value in reply.get("done", ()):
            self.spins = 0
            future = self.pending.pop(call_id, None)
            if future is None or future.done():
                continue
            if ok:
                future.set_result(self.decode(value))
            else:
                future.set_exception(self._error(value))

    # -- values ----------------------------------------------------------------

    def encode(self, value, depth: int = 0):
        """A value of the program's as the wire carries it. What the wire cannot carry
        (a number that is not finite or too large, a string or list past the bounds,
        nesting too deep) raises here, in the program, where it called: a ValueError or
        OverflowError it can catch, as a real library's bad argument would."""
        kind = type(value)
        # The common cases first, exact types only: nothing of theirs to ask.
        if value is None or kind is bool:
            return value
        if kind is int and -MAX_INT <= value <= MAX_INT:
            return value
        if kind is float and math.isfinite(value):
            return value
        if kind is str and len(value) <= MAX_STRING:
            return value
        handle = getattr(kind, "_overlap_is_proxy", False) and object.__getattribute__(
            value, "_h"
        )
        if handle:
            return {"$h": handle}
        if depth > MAX_DEPTH:
            raise ValueError(f"a value nested more than {MAX_DEPTH} deep cannot be passed")
        # Subclasses are sent as the plain value they hold (their own methods not asked).
        if isinstance(value, int):
            value = int.__int__(value)
            if not -MAX_INT <= value <= MAX_INT:
                raise OverflowError("an integer this large cannot be passed to the simulation")
            return value
        if isinstance(value, float):
            value = float.__float__(value)
            if not math.isfinite(value):
                raise ValueError(f"the simulation takes finite numbers, not {value!r}")
            return value
        if isinstance(value, str):
            value = str.__str__(value)
            if len(value) > MAX_STRING:
                raise ValueError(f"a string over {MAX_STRING:,} characters cannot be passed")
            return value
        if isinstance(value, list | tuple):
            if len(value) > MAX_ITEMS:
                raise ValueError(f"a list over {MAX_ITEMS:,} items cannot be passed")
            items = [self.encode(v, depth + 1) for v in value]
            return items if isinstance(value, list) else {"$t": items}
        # Anything else cannot cross: the grader gets a description it will refuse.
        return {"$t": ["<unsendable>", type(value).__name__]}

    def encode_returned(self, value):
        """What train() returned, for the grader's checks: a value the wire cannot carry
        is described instead (the checks then fail it), never an error of the run."""
        try:
            return self.encode(value)
        except (ValueError, OverflowError) as exc:
            return {"$t": ["<unsendable>", str(exc)[:200]]}

    def _encode_kwargs(self, kwargs: dict) -> dict:
        return {str(k): self.encode(v) for k, v in kwargs.items()}

    def decode(self, value):
        kind = type(value)
        if kind is list:
            return [self.decode(v) for v in value]
        if kind is not dict:
            return value  # a scalar (the grader sends JSON: nothing else)
        if "$h" in value:
            handle = value["$h"]
            proxy = self.proxies.get(handle)
            if proxy is None:
                if value["$c"] not in self.classes and "$s" in value:
                    self.classes.update(self.make_classes(self, {value["$c"]: value["$s"]}))
                cls = self.classes[value["$c"]]
                proxy = cls._overlap_make(handle, self._decode_attrs(value.get("$a", {})))
                self.proxies[handle] = proxy
            return proxy
        if "$t" in value:
            return tuple(self.decode(v) for v in value["$t"])
        if "$o" in value:
            return Record(value["$o"], self._decode_attrs(value["$a"]))
        return {k: self.decode(v) for k, v in value.items()}

    def _decode_attrs(self, attrs: dict) -> dict:
        plain = (str, int, float, bool, type(None))
        return {
            name: v if type(v) in plain else self.decode(v) for name, v in attrs.items()
        }

    def _error(self, err: dict) -> BaseException:
        cls = _ERRORS.get(err.get("type"), KitError)
        return cls(err.get("message", ""))


class Record:
    """A plain read-only record sent by value (the exercise's config)."""

    def __init__(self, name: str, attrs: dict) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_attrs", attrs)

    def __getattr__(self, name: str):
        try:
            return self._attrs[name]
        except KeyError:
            raise AttributeError(f"{self._name} has no attribute {name!r}") from None

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError(f"{self._name} is read-only")

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self._attrs.items())
        return f"{self._name}({fields})"

    def __dir__(self):
        return sorted(self._attrs)
