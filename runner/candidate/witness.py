"""What only the candidate's process can see, counted so that the program cannot hide it.

Two things about a run can only be witnessed inside the candidate's process: the asyncio
tasks still running when ``train()`` returned, and the task failures nobody retrieved.
Both are counted here at the end, from the interpreter's own state, not from a list the
program could reach and empty: every live task is found by walking the objects the
collector tracks, and is asked whether it is done through asyncio's C methods, which no
subclass or patch can change. A task that failed and was dropped reports itself through
the loop's exception handler as it is collected (``CandidateLoop``).

The program could still try to reach into the machinery that counts: the collector's
object walks, frames (its own traceback's, a coroutine's, ``sys._getframe``), code
swapping, tracing, ``ctypes``, or changing the runtime's classes and modules. An audit
hook (``sys.addaudithook``: it cannot be removed) refuses each of these when the
candidate's code asks for it and remembers the first; :class:`Guard` also checks at the
end that the runtime's modules and classes are as they were when the program started.
Either makes the run a runtime error of its own ("reached into the grading runtime"),
never a pass. The standard library asking for its own needs (``logging`` finding its
caller, ``typing`` its module) is not the candidate's code and is let through.

None of this is trusted by the grader: it is what keeps the candidate's side honest
enough that a program cannot turn a failure it witnesses into a pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import sys
import types

_CTask = asyncio.tasks._CTask  # CPython-private: the C task, and its pure-Python twin
_PyTask = asyncio.tasks._PyTask
_TASKS = (_CTask, _PyTask)
_c_done = asyncio.futures._CFuture.done
_c_cancelled = asyncio.futures._CFuture.cancelled
_c_log_traceback = asyncio.futures._CFuture.__dict__["_log_traceback"]
_py_done = asyncio.futures._PyFuture.done
_py_cancelled = asyncio.futures._PyFuture.cancelled
_get_objects = gc.get_objects
_getframe = sys._getframe

_STDLIB = os.path.dirname(os.__file__) + os.sep
_RUNNER = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

# Audit events that hand the program the interpreter's insides.
_ALWAYS = {
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
    "sys.settrace", "sys.setprofile", "sys._current_exceptions",
}
_FRAME_ATTRIBUTES = {"tb_frame", "cr_frame", "gi_frame", "ag_frame", "f_back"}
# Standard-library functions that hand frames back to whoever called them (``inspect``'s
# stack functions, ``traceback.walk_*``, ``Task.get_stack``, ``logging.currentframe``);
# a frame asked for by any other standard-library function stays with it.
_FRAME_GIVERS = {
    "currentframe", "stack", "trace", "getouterframes", "getinnerframes", "walk_stack",
    "walk_tb", "_task_get_stack", "<lambda>",
}

# Every task the candidate's loop made, and how many it made: a task left running is
# found by the collector's walk wherever it is referenced, and the registry keeps every
# task referenced until the end (a program that empties it shows: the counts disagree).
REGISTRY: list = []
CREATED = [0]
DROPPED: list = []  # what the loop reported of tasks collected failed or still pending


def register(task) -> None:
    CREATED[0] += 1
    REGISTRY.append(task)


def _trusted(code: types.CodeType) -> bool:
    name = code.co_filename
    return name.startswith((_STDLIB, _RUNNER, "<frozen "))


class Guard:
    """The tripwire around one run: installed just before the candidate's code runs."""

    def __init__(self) -> None:
        self.first: str | None = None  # what the program reached for first, and where
        self.armed = False
        self._inside = False  # the hook's own frame lookups raise audit events too
        self._snapshot: dict[str, dict[str, int]] = {}

    # -- the audit hook ----------------------------------------------------------------

    def install(self, filename: str, watched: list) -> None:
        """Arm the hook, and remember the runtime's modules and classes as they are."""
        self._snapshot = {_label(obj): _identities(obj) for obj in watched}
        self._watched = list(watched)
        self.filename = filename
        self.armed = True
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple) -> None:
        if not self.armed or self._inside:
            return
        self._inside = True
        try:
            self._check(event, args)
        finally:
            self._inside = False

    def _check(self, event: str, args: tuple) -> None:
        if event in _ALWAYS:
            self._refuse(event)
        elif event.startswith("ctypes."):
            self._refuse("ctypes")
        elif event == "sys._getframe":
            self._frames(event)
        elif event == "object.__getattr__" and len(args) == 2 and args[1] in _FRAME_ATTRIBUTES:
            self._frames(f"the {args[1]} attribute")
        elif event == "object.__setattr__" and len(args) >= 2 and args[1] == "__code__":
            if self._candidate_caller():
                self._refuse("replacing a function's code")
        elif (
            # Code compiled under a trusted file's name would pass for trusted code.
            event == "compile" and len(args) == 2 and isinstance(args[1], str)
            and args[1].startswith((_STDLIB, _RUNNER, "<frozen "))
            and self._candidate_caller()
        ):
            self._refuse(f"compiling code under the name {args[1][:80]!r}")

    def _caller(self, depth: int = 4):
        try:
            return _getframe(depth)
        except ValueError:
            return None

    def _candidate_caller(self) -> bool:
        frame = self._caller()
        return frame is not None and not _trusted(frame.f_code)

    def _frames(self, what: str) -> None:
        frame = self._caller()
        if frame is None:
            return
        if not _trusted(frame.f_code):
            self._refuse(what)
        elif frame.f_code.co_name in _FRAME_GIVERS and frame.f_code.co_filename.startswith(
            _STDLIB
        ):
            outer = frame.f_back
            if outer is not None and not _trusted(outer.f_code):
                self._refuse(f"{what} (through {frame.f_code.co_name}())")

    def _refuse(self, what: str) -> None:
        if self.first is None:
            self.first = what + self._where()
        raise PermissionError(
            f"{what} is not available in a graded run: the program may not inspect or "
            "change the machinery that grades it"
        )

    def _where(self) -> str:
        frame = self._caller(5)
        while frame is not None:
            if frame.f_code.co_filename == self.filename:
                return f", line {frame.f_lineno}"
            frame = frame.f_back
        return ""

    # -- at the end ----------------------------------------------------------------------

    def finish(self, loop) -> str | None:
        """Disarm; what the program reached for, or which part of the runtime it changed."""
        self.armed = False
        if self.first is not None:
            return self.first
        if CREATED[0] != len(REGISTRY) or len({id(task) for task in REGISTRY}) != CREATED[0]:
            return "emptying the runtime's record of the tasks it made"
        if "call_exception_handler" in vars(loop):
            return "replacing the event loop's exception reporting"
        for obj in self._watched:
            label = _label(obj)
            now = _identities(obj)
            before = self._snapshot[label]
            changed = sorted(set(now) ^ set(before) | {n for n in now if now[n] != before.get(n)})
            if changed:
                return f"changing {label}.{changed[0]}"
        return None


def _label(obj) -> str:
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", repr(obj))


# Names the interpreter itself writes into a module's globals: `warnings` records there
# which warnings a module's code already gave (a warning raised through the runtime's code
# on the program's behalf, "coroutine was never awaited" in a thread's own loop, say).
_BOOKKEEPING = frozenset({"__warningregistry__"})


def _identities(obj) -> dict[str, int]:
    """What ``obj`` binds, by identity (a module's globals, a class's attributes), and
    for each function among them its code, defaults and closure."""
    found = {}
    for name, value in list(vars(obj).items()):
        if name in _BOOKKEEPING:
            continue
        found[name] = id(value)
        function = getattr(value, "__func__", value)
        if isinstance(function, types.FunctionType):
            found[name + ".__code__"] = id(function.__code__)
            found[name + ".__defaults__"] = id(function.__defaults__)
            for i, cell in enumerate(function.__closure__ or ()):
                with contextlib.suppress(ValueError):  # an empty cell
                    found[f"{name}.<closure {i}>"] = id(cell.cell_contents)
    return found


def _done(task) -> bool:
    return _c_done(task) if isinstance(task, _CTask) else _py_done(task)


def live_tasks(exclude=None) -> tuple[list, list]:
    """(tasks still running, tasks that failed and whose error nobody retrieved), found
    by walking every object the collector tracks, in creation order."""
    running, failed = [], []
    seen = set()
    for obj in [*REGISTRY, *_get_objects()]:
        if not isinstance(obj, _TASKS) or obj is exclude or id(obj) in seen:
            continue
        seen.add(id(obj))
        if not _done(obj):
            running.append(obj)
        elif isinstance(obj, _CTask):
            if not _c_cancelled(obj) and _c_log_traceback.__get__(obj):
                failed.append(obj)
        elif not _py_cancelled(obj) and getattr(obj, "_Future__log_traceback", False):
            failed.append(obj)
    key = _serial
    return sorted(running, key=key), sorted(failed, key=key)


def _serial(task) -> int:
    serial = getattr(task, "__dict__", {}).get("_overlap_serial")
    return serial if type(serial) is int else 1 << 62
