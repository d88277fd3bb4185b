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
never a pass. What the tripwire itself calls (builtins included) is bound as its
functions' defaults when this module is imported, so that replacing a global, a builtin
or a method of :class:`Guard` changes nothing it does; replacing those defaults, or a
function's code, is refused. The standard library asking for its own needs (``logging`` finding its
caller, ``typing`` its module) is not the candidate's code and is let through.

None of this is trusted by the grader: it is what keeps the candidate's side honest
enough that a program cannot turn a failure it witnesses into a pass.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
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
_c_get_coro = asyncio.tasks._CTask.get_coro
_get_objects = gc.get_objects
_getframe = sys._getframe

_STDLIB = os.path.dirname(os.__file__) + os.sep
_RUNNER = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

# Audit events that hand the program the interpreter's insides.
_ALWAYS = {
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
    "sys.settrace", "sys.setprofile", "sys._current_exceptions",
    # a hook of the program's own would run its code inside the runtime's, at the end too
    "sys.addaudithook",
}
_FRAME_ATTRIBUTES = {"tb_frame", "cr_frame", "gi_frame", "ag_frame", "f_back"}
# Standard-library functions that hand frames back to whoever called them (``inspect``'s
# stack functions, ``traceback.walk_*``, ``Task.get_stack``, ``logging.currentframe``);
# a frame asked for by any other standard-library function stays with it.
_FRAME_GIVERS = {
    "currentframe", "stack", "trace", "getouterframes", "getinnerframes", "walk_stack",
    "walk_tb", "_task_get_stack", "<lambda>",
}
# Those that walk up from a frame (to its callers): above the program's frames are the
# runtime's, whose locals it must not see. (``walk_tb`` and ``trace`` walk a traceback
# down from where it was caught: the program's own frames and what it called.)
_STACK_WALKERS = {"currentframe", "stack", "getouterframes", "walk_stack"}

# Every task the candidate's loop made, and how many it made: a task left running is
# found by the collector's walk wherever it is referenced, and the registry keeps every
# task referenced until the end (a program that empties it shows: the counts disagree).
# The counts only go up (``itertools.count``: a program can advance one, never take it
# back), so a list emptied in place shows too.
REGISTRY: list = []
CREATED = itertools.count()
DROPPED: list = []  # what the loop reported of tasks collected failed or still pending
REPORTED = itertools.count()  # how many reports the loop made into DROPPED


def counted(counter, _reduce=itertools.count.__reduce__) -> int:
    """How far ``counter`` went, without advancing it."""
    return _reduce(counter)[1][0]


def register(task, _created=CREATED, _registry=REGISTRY, _next=next) -> None:
    _next(_created)
    _registry.append(task)


def _trusted(
    code: types.CodeType, _startswith=str.startswith, _prefixes=(_STDLIB, _RUNNER, "<frozen ")
) -> bool:
    return _startswith(code.co_filename, _prefixes)


def _label(obj, _getattr=getattr, _repr=repr) -> str:
    return _getattr(obj, "__qualname__", None) or _getattr(obj, "__name__", _repr(obj))


# Names the interpreter itself writes into a module's globals: `warnings` records there
# which warnings a module's code already gave (a warning raised through the runtime's code
# on the program's behalf, "coroutine was never awaited" in a thread's own loop, say).
_BOOKKEEPING = frozenset({"__warningregistry__"})


def _identities(
    obj, _vars=vars, _list=list, _id=id, _getattr=getattr, _isinstance=isinstance,
    _function=types.FunctionType, _enumerate=enumerate, _skip=_BOOKKEEPING,
) -> dict[str, int]:
    """What ``obj`` binds, by identity (a module's globals, a class's attributes), and
    for each function among them its code, defaults and closure."""
    found = {}
    for name, value in _list(_vars(obj).items()):
        if name in _skip:
            continue
        found[name] = _id(value)
        function = _getattr(value, "__func__", value)
        if _isinstance(function, _function):
            found[name + ".__code__"] = _id(function.__code__)
            found[name + ".__defaults__"] = _id(function.__defaults__)
            found[name + ".__kwdefaults__"] = _id(function.__kwdefaults__)
            for i, cell in _enumerate(function.__closure__ or ()):
                try:  # noqa: SIM105 - contextlib's name could be rebound under us
                    found[f"{name}.<closure {i}>"] = _id(cell.cell_contents)
                except ValueError:  # an empty cell
                    pass
    return found


# What the tripwire itself calls is bound as each function's defaults when this module
# is imported, before any program runs: replacing a module's global, a builtin or a
# method of Guard then changes nothing the tripwire does (a function's defaults can only
# be replaced whole, which the audit hook refuses to the program), and the end-of-run
# comparison reports the replacement.


def _caller(depth: int = 4, _getframe=_getframe):
    try:
        return _getframe(depth)
    except ValueError:
        return None


def _candidate_caller(_caller=_caller, _trusted=_trusted) -> bool:
    frame = _caller(4)
    return frame is not None and not _trusted(frame.f_code)


def _from_witness(_caller=_caller, _self=__file__) -> bool:
    """Whether the event comes from this module's own walk (``live_tasks``)."""
    frame = _caller(4)
    return frame is not None and frame.f_code.co_filename == _self


def _where(guard, _caller=_caller) -> str:
    frame = _caller(5)
    while frame is not None:
        if frame.f_code.co_filename == guard.filename:
            return f", line {frame.f_lineno}"
        frame = frame.f_back
    return ""


def _refuse(guard, what: str, _where=_where, _error=PermissionError) -> None:
    if guard.first is None:
        guard.first = what + _where(guard)
    raise _error(
        f"{what} is not available in a graded run: the program may not inspect or "
        "change the machinery that grades it"
    )


def _frames(
    guard, what: str, _caller=_caller, _trusted=_trusted, _refuse=_refuse,
    _givers=frozenset(_FRAME_GIVERS), _stdlib=_STDLIB, _startswith=str.startswith,
    _upward=frozenset(_STACK_WALKERS),
) -> None:
    frame = _caller(4)
    if frame is None:
        return
    if not _trusted(frame.f_code):
        _refuse(guard, what)
    elif frame.f_code.co_name in _givers and _startswith(frame.f_code.co_filename, _stdlib):
        outer = frame.f_back
        if frame.f_code.co_name in _upward:
            # A walk up the stack hands out the runtime's frames above the program's,
            # whichever standard-library code consumes it (``StackSummary.extract``,
            # ``heapq.nsmallest``): the first frame outside the standard library decides.
            while outer is not None and _startswith(outer.f_code.co_filename, _stdlib):
                outer = outer.f_back
        if outer is not None and not _trusted(outer.f_code):
            _refuse(guard, f"{what} (through {frame.f_code.co_name}())")


# Attributes of a function that change what it does when it is called.
_FUNCTION_PARTS = frozenset({"__code__", "__defaults__", "__kwdefaults__"})


def _check(
    guard, event: str, args: tuple, _always=frozenset(_ALWAYS), _refuse=_refuse,
    _frames=_frames, _candidate_caller=_candidate_caller, _len=len, _isinstance=isinstance,
    _str=str, _startswith=str.startswith, _attributes=frozenset(_FRAME_ATTRIBUTES),
    _parts=_FUNCTION_PARTS, _prefixes=(_STDLIB, _RUNNER, "<frozen "),
    _from_witness=_from_witness,
) -> None:
    if event in _always:
        if not _from_witness():  # the count at the end walks the collector's objects
            _refuse(guard, event)
    elif _startswith(event, "ctypes."):
        _refuse(guard, "ctypes")
    elif event == "sys._getframe":
        _frames(guard, event)
    elif event == "object.__getattr__" and _len(args) == 2 and args[1] in _attributes:
        _frames(guard, f"the {args[1]} attribute")
    elif event == "object.__setattr__" and _len(args) >= 2 and args[1] in _parts:
        if _candidate_caller():
            _refuse(guard, f"replacing a function's {args[1]}")
    elif (
        # Code compiled under a trusted file's name would pass for trusted code.
        event == "compile" and _len(args) == 2 and _isinstance(args[1], _str)
        and _startswith(args[1], _prefixes)
        and _candidate_caller()
    ):
        _refuse(guard, f"compiling code under the name {args[1][:80]!r}")


class Guard:
    """The tripwire around one run: installed just before the candidate's code runs."""

    def __init__(self) -> None:
        self.first: str | None = None  # what the program reached for first, and where
        self.armed = False
        self._inside = False  # the hook's own frame lookups raise audit events too
        self._snapshot: list[dict[str, int]] = []
        self.filename = ""

    def install(
        self, filename: str, watched: list, _label=_label, _identities=_identities,
        _list=list, _addaudithook=sys.addaudithook, _freeze_count=gc.get_freeze_count,
    ) -> None:
        """Arm the hook, and remember the runtime's modules and classes as they are."""
        self.frozen = _freeze_count()  # frozen objects are out of the collector's walk
        self._watched = _list(watched)
        # by position: a module and a class may share a name (socket, socket.socket)
        self._snapshot = [_identities(obj) for obj in self._watched]
        self.filename = filename
        self.armed = True
        _addaudithook(self._hook)

    def _hook(self, event: str, args: tuple, _check=_check) -> None:
        if not self.armed or self._inside:
            return
        self._inside = True
        try:
            _check(self, event, args)
        finally:
            self._inside = False

    def finish(
        self, loop, _label=_label, _identities=_identities, _vars=vars, _len=len,
        _set=set, _id=id, _sorted=sorted, _created=CREATED, _registry=REGISTRY, _zip=zip,
        _counted=counted, _reported=REPORTED, _dropped=DROPPED,
    ) -> str | None:
        """Disarm; what the program reached for, or which part of the runtime it changed."""
        self.armed = False
        if self.first is not None:
            return self.first
        made = _counted(_created)
        if made != _len(_registry) or _len({_id(task) for task in _registry}) != made:
            return "emptying the runtime's record of the tasks it made"
        if _counted(_reported) != _len(_dropped):
            return "emptying the runtime's record of the tasks the loop reported"
        if "call_exception_handler" in _vars(loop):
            return "replacing the event loop's exception reporting"
        for obj, before in _zip(self._watched, self._snapshot):
            label = _label(obj)
            now = _identities(obj)
            differ = {n for n in now if now[n] != before.get(n)}
            changed = _sorted(_set(now) ^ _set(before) | differ)
            if changed:
                return f"changing {label}.{changed[0]}"
        return None


def _done(task, _isinstance=isinstance, _ctask=_CTask, _c_done=_c_done, _py_done=_py_done) -> bool:
    return _c_done(task) if _isinstance(task, _ctask) else _py_done(task)


def _suspended(task, _get_coro=_c_get_coro, _getattr=getattr, _isinstance=isinstance,
               _ctask=_CTask) -> bool:
    """Whether the task's coroutine is still suspended (not finished): then the task runs,
    even if its future was marked done behind its back (``Future.set_result`` on it)."""
    coro = _get_coro(task) if _isinstance(task, _ctask) else task._coro
    return (_getattr(coro, "cr_frame", None) or _getattr(coro, "gi_frame", None)) is not None


def _serial(task, _getattr=getattr, _type=type, _int=int) -> int:
    serial = _getattr(task, "__dict__", {}).get("_overlap_serial")
    return serial if _type(serial) is _int else 1 << 62


def live_tasks(
    exclude=None, frozen=None, _freeze_count=gc.get_freeze_count, _unfreeze=gc.unfreeze,
    _registry=REGISTRY, _get_objects=_get_objects, _isinstance=isinstance,
    _tasks=_TASKS, _ctask=_CTask, _done=_done, _c_cancelled=_c_cancelled,
    _c_log_traceback=_c_log_traceback, _py_cancelled=_py_cancelled, _getattr=getattr,
    _set=set, _id=id, _sorted=sorted, _serial=_serial, _suspended=_suspended,
) -> tuple[list, list]:
    """(tasks still running, tasks that failed and whose error nobody retrieved), found
    by walking every object the collector tracks, in creation order. ``frozen``: the
    collector's frozen count when the program started; where it changed (the program
    froze objects, which takes them out of the walk, or freed some of the fork server's),
    everything is unfrozen first, and the walk covers the fork server's objects too."""
    if frozen is not None and _freeze_count() != frozen:
        _unfreeze()
    running, failed = [], []
    seen = _set()
    for obj in [*_registry, *_get_objects()]:
        if not _isinstance(obj, _tasks) or obj is exclude or _id(obj) in seen:
            continue
        seen.add(_id(obj))
        if not _done(obj) or _suspended(obj):
            running.append(obj)
        elif _isinstance(obj, _ctask):
            if not _c_cancelled(obj) and _c_log_traceback.__get__(obj):
                failed.append(obj)
        elif not _py_cancelled(obj) and _getattr(obj, "_Future__log_traceback", False):
            failed.append(obj)
    return _sorted(running, key=_serial), _sorted(failed, key=_serial)

