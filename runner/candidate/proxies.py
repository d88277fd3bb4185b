"""Proxy classes: what the candidate's code holds instead of the kit's objects.

The grader describes each kit class it exposes (``runner.sim.host.surface``): attributes that
never change (``const``, sent with the handle), attributes read live (``live``, one round
trip), and methods: ``free`` and ``block`` (a round trip, answered at once) and ``async``
(a coroutine: the call is queued, the answer comes with the completion). Nothing else of
the kit exists here: no private attributes, no values, no clock, no trace.

A proxy cannot be built by hand (``Snapshot(...)`` raises ``TypeError``); it exists only
because the grader handed out its handle, and the grader checks every handle it gets back.
Proxies hash by handle, so sets of them iterate in the same order in every process.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runner.candidate.runtime import Runtime


def _refuse(self, *args, **kwargs):
    name = type(self).__name__
    raise TypeError(
        f"{name} objects come from the cluster: the grader builds them, a trainer cannot"
    )


def _async_method(runtime: Runtime, cls_name: str, name: str):
    async def method(self, *args, **kwargs):
        future = asyncio.get_running_loop().create_future()
        call_id = runtime.start(object.__getattribute__(self, "_h"), name, args, kwargs, future)
        try:
            return await future
        except asyncio.CancelledError:
            runtime.cancel(call_id)  # nothing is sent if it had completed already
            raise

    method.__name__ = name
    method.__qualname__ = f"{cls_name}.{name}"
    return method


def _sync_method(runtime: Runtime, cls_name: str, name: str, mode: str,
                 twin: str | None = None):
    """A blocking or free call: one round trip. A blocking call made in a thread
    (``asyncio.to_thread``, ``run_in_executor``) runs as its ``_async`` twin instead:
    that thread waits for it while the event loop and the other threads go on, as real
    threads would (and race, without a lock, as real threads would)."""

    def method(self, *args, **kwargs):
        handle = object.__getattribute__(self, "_h")
        thread = runtime.thread
        if twin is not None and thread is not None:
            future = thread.loop.create_future()
            runtime.start(handle, twin, args, kwargs, future)
            return thread.wait_for(future)
        return runtime.call(handle, name, args, kwargs, mode)

    method.__name__ = name
    method.__qualname__ = f"{cls_name}.{name}"
    return method


def _queue_method(runtime: Runtime, cls_name: str, name: str):
    """Take the next item of a sequence the grader sent in advance (``$q``): no round
    trip; the take is queued for the grader, which replays it on its own object."""

    def method(self):
        items = object.__getattribute__(self, "_c").get("$q", ())
        taken = object.__getattribute__(self, "__dict__").get("_overlap_taken", 0)
        object.__setattr__(self, "_overlap_taken", taken + 1)
        handle = object.__getattribute__(self, "_h")
        last = runtime.out[-1] if runtime.out else None
        if last is not None and last[0] == "q" and last[1] == handle:
            last[2] += 1  # takes in a row travel as one operation with a count
        else:
            runtime.out.append(["q", handle, 1])
        return items[taken] if taken < len(items) else None

    method.__name__ = name
    method.__qualname__ = f"{cls_name}.{name}"
    return method


def _live(runtime: Runtime, name: str):
    def get(self):
        return runtime.call(object.__getattribute__(self, "_h"), name, (), {}, "get")

    return property(get)


class _ProxyBase:
    _overlap_is_proxy = True
    _overlap_members: frozenset = frozenset()

    __init__ = _refuse

    def __getattr__(self, name: str):
        const = object.__getattribute__(self, "_c")
        if name in const:
            return const[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value) -> None:
        if name in type(self)._overlap_members or name in object.__getattribute__(self, "_c"):
            raise AttributeError(
                f"cannot set {type(self).__name__}.{name}: the kit's state belongs to the grader"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete attributes of {type(self).__name__}")

    def __hash__(self) -> int:
        return object.__getattribute__(self, "_h")

    def __repr__(self) -> str:
        # Asked of the grader only when shown (formatting the kit's objects costs).
        runtime = type(self)._overlap_runtime
        return runtime.call(object.__getattribute__(self, "_h"), "__repr__", (), {}, "get")

    def __dir__(self):
        const = object.__getattribute__(self, "_c")
        return sorted({*type(self)._overlap_members, *const} - {"$q"})

    def __reduce__(self):
        raise TypeError(f"{type(self).__name__} objects cannot be copied or pickled")

    @classmethod
    def _overlap_make(cls, handle: int, const: dict):
        proxy = object.__new__(cls)
        object.__setattr__(proxy, "_h", handle)
        object.__setattr__(proxy, "_c", const)
        return proxy


def build_classes(runtime: Runtime, surfaces: dict) -> dict[str, type]:
    """Proxy classes from the grader's descriptions, bases before subclasses."""
    classes: dict[str, type] = {}

    def build(name: str) -> type:
        if name in classes:
            return classes[name]
        surface = surfaces[name]
        bases = tuple(build(b) for b in surface.get("bases", ()) if b in surfaces) or (
            _ProxyBase,
        )
        namespace: dict = {"__module__": "runner.sim", "__qualname__": name}
        members = set()
        for method in surface.get("async", ()):
            namespace[method] = _async_method(runtime, name, method)
            members.add(method)
        for mode in ("block", "free"):
            for method in surface.get(mode, ()):
                twin = method + "_async"
                twin = twin if mode == "block" and twin in surface.get("async", ()) else None
                namespace[method] = _sync_method(runtime, name, method, mode, twin)
                members.add(method)
        if surface.get("queue"):
            namespace[surface["queue"]] = _queue_method(runtime, name, surface["queue"])
            members.add(surface["queue"])
        for attr in surface.get("live", ()):
            namespace[attr] = _live(runtime, attr)
            members.add(attr)
        if surface.get("len"):
            namespace["__len__"] = lambda self: runtime.call(self._h, "__len__", (), {}, "get")
        for base in bases:
            members |= getattr(base, "_overlap_members", frozenset())
        namespace["_overlap_members"] = frozenset(members)
        namespace["_overlap_runtime"] = runtime
        if surface.get("doc"):
            namespace["__doc__"] = surface["doc"]
        cls = type(name, bases, namespace)
        classes[name] = cls
        return cls

    for name in surfaces:
        build(name)
    return classes
