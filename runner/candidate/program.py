"""One run of the candidate's program, inside the candidate's process.

The grader sends ``hello`` (the code, the entry point, the proxy classes and the cluster);
this module runs ``Trainer(cluster).train()`` on the candidate loop and answers with one
``end`` message: the value ``train()`` returned (handles, not objects), or the error, the
tasks still running, and the program's output (bounded). The grader trusts none of it:
it checks the returned value against what it recorded, and a claimed error can only fail
the candidate.
"""

from __future__ import annotations

import _signal
import asyncio
import gc
import inspect
import io
import linecache
import sys
import traceback
import types
from _hashlib import hmac_digest as _hmac_digest
from json.encoder import c_make_encoder, encode_basestring_ascii

from runner.candidate import loop as loop_module
from runner.candidate import patches, proxies, witness
from runner.candidate import runtime as runtime_module
from runner.candidate.loop import CandidateLoop, Policy, Task
from runner.candidate.proxies import build_classes
from runner.candidate.runtime import Runtime, Stopped
from runner.harness import candidate_module

FILENAME = "/candidate/solution.py"
OUTPUT_LIMIT = 64 * 1024
TRACEBACK_LIMIT = 8_000
MAX_TASKS_LISTED = 8


class BoundedText(io.TextIOBase):
    def __init__(self, limit: int = OUTPUT_LIMIT) -> None:
        super().__init__()
        self.limit = limit
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        room = self.limit - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(room, len(text))
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def getvalue(self) -> str:
        text = "".join(self.parts)
        if self.dropped:
            text += f"\n… [{self.dropped} more characters of output cut]"
        return text


def run(runtime: Runtime, hello: dict, seal: bytes | None = None) -> bytes:
    """Run the program once; the ``end`` frame for the grader, sealed with ``seal`` (the
    run's key from the grader) so that no frame the program writes itself can pass for
    it."""
    source = hello["code"]
    DISPLAY["name"] = str(hello.get("display", "solution.py"))[:200]
    linecache.cache[FILENAME] = (len(source), None, source.splitlines(True), FILENAME)
    runtime.make_classes = build_classes
    runtime.classes = build_classes(runtime, hello["classes"])
    _install_kit_module(runtime.classes)
    patches.install(runtime, FILENAME)
    loop = CandidateLoop(runtime)
    asyncio.set_event_loop_policy(Policy(loop))
    asyncio.set_event_loop(loop)
    asyncio.Task = asyncio.tasks.Task = Task
    out, err = BoundedText(), BoundedText()
    sys.stdout, sys.stderr, sys.stdin = out, err, io.StringIO("")
    sys.unraisablehook = lambda unraisable: None
    end: dict = {"k": "end"}
    main = None
    # Bound here, before the program runs: what reports on it cannot be swapped under us.
    guard, finish, live_tasks = witness.Guard(), witness.Guard.finish, witness.live_tasks
    describe, error_of, quiet, encode = _describe, _error, _quiet, _sealed
    dropped_log = witness.DROPPED
    guard.install(FILENAME, _watched(loop))
    try:
        cluster = runtime.decode(hello["cluster"])
        code = compile(source, FILENAME, "exec", dont_inherit=True)
        namespace = candidate_module(FILENAME).__dict__
        exec(code, namespace)
        entry_class, entry_method = hello["entry"]
        trainer_class = namespace.get(entry_class)
        if not inspect.isclass(trainer_class) or not callable(
            getattr(trainer_class, entry_method, None)
        ):
            end["error"] = {
                "verdict": "missing_entry_point",
                "message": _missing_entry_point(namespace, entry_class, entry_method),
            }
        else:
            returned = getattr(trainer_class(cluster), entry_method)()
            if inspect.isawaitable(returned):
                main = loop.create_task(_await(returned))
                returned = loop.run_until_complete(main)
            end["value"] = runtime.encode_returned(returned)
    except Stopped as stopped:
        quiet()
        end["stopped"] = stopped.reason
    except BaseException as exc:  # the candidate's own error, whatever it is
        quiet()  # first: a signal handler of the program's must not break the report
        end["error"] = error_of(exc)
    # The end: from here on nothing of the program's runs by itself (its threads wait,
    # its signal handlers and the collector's callbacks are off). What still asks its
    # objects (a lost exception's text) comes before the tripwire's last look, and the
    # frame is sealed before anything of the program's can be freed.
    quiet()
    running, failed = live_tasks(exclude=main, frozen=guard.frozen)
    stopped = "stopped" in end
    described = describe(running if stopped else running + [t for t, e in dropped_log if e is None])
    lost_error = None
    if not stopped and "error" not in end:
        lost = [exc for _task, exc in dropped_log if exc is not None]
        if failed:
            failed[0]._log_traceback = False
            lost.insert(0, failed[0].exception())
        if lost:
            lost_error = error_of(lost[0], "A task failed and nobody awaited it: ")
    quiet()  # again: the program's own __str__ may just have run
    tampered = finish(guard, loop)
    if stopped:
        end["waiting"] = described
    else:
        end["leftover"] = described
        if tampered is not None:
            end.pop("value", None)
            end["error"] = {
                "verdict": "runtime_error", "line": None, "traceback": "",
                "message": f"The program reached into the grading runtime ({tampered}): a "
                "run may not inspect or change the machinery that grades it.",
            }
        elif lost_error is not None:
            end.pop("value", None)
            end["error"] = lost_error
    runtime._flush_stall()
    end["t"] = runtime.now
    end["ops"] = runtime.out
    end["stdout"] = out.getvalue()
    end["stderr"] = err.getvalue()
    return encode(end, seal)


def broken_end(runtime: Runtime, exc: BaseException, seal: bytes | None) -> bytes:
    """The end frame when :func:`run` itself was broken into as the run ended (a signal
    handler, a finalizer or a thread of the program's raising inside the runtime)."""
    _quiet()
    name = type(exc).__name__
    end = {
        "k": "end", "t": runtime.now, "ops": runtime.out, "leftover": [],
        "error": {
            "verdict": "runtime_error", "line": None, "traceback": "",
            "message": f"The program's code raised {name} inside the runtime as the run "
            "ended (from a signal handler, a finalizer or a thread?): the run could not "
            "report its end.",
        },
    }
    return _sealed(end, seal)


def _quiet(
    _switch=sys.setswitchinterval, _gc_off=gc.disable, _getsignal=_signal.getsignal,
    _setsignal=_signal.signal, _numbers=tuple(range(1, _signal.NSIG)),
    _ignore=_signal.SIG_IGN, _callable=callable,
) -> None:
    """Nothing of the program's runs by itself from here on: its threads wait for the
    interpreter until the process ends, the collector (and its callbacks, finalizers of
    cycles) is off, and a signal handler of the program's is ignored."""
    _switch(1e6)
    _gc_off()
    for number in _numbers:
        try:
            if _callable(_getsignal(number)):
                _setsignal(number, _ignore)
        except (OSError, ValueError):  # not a signal that can be caught here
            pass


def _no_default(value):
    raise TypeError(f"{type(value).__name__} cannot be sent")


# The end's own JSON encoder: the C one, made now, so nothing the program replaces in
# ``json`` or the builtins changes what the end says (the frames' encoding otherwise).
_END_ENCODER = c_make_encoder(
    None, _no_default, encode_basestring_ascii, None, ":", ",", False, False, False
)


def _sealed(
    end: dict, seal: bytes | None, _encoder=_END_ENCODER, _join="".join,
    _digest=_hmac_digest,
) -> bytes:
    """The end frame's body: the message, and as its last member ``mac``, the HMAC-SHA256
    of the message without it under the run's key (the grader checks it on the bytes)."""
    body = _join(_encoder(end, 0)).encode()
    if seal is None:
        return body
    mac = _digest(seal, body, "sha256").hex().encode()
    return body[:-1] + b',"mac":"' + mac + b'"}'


async def _await(awaitable):
    return await awaitable


def _install_kit_module(classes: dict) -> None:
    """``from runner.sim import Snapshot`` gives the proxy class (which cannot be built)."""
    module = types.ModuleType("runner.sim", "The simulation kit, as the trainer sees it.")
    for name, cls in classes.items():
        setattr(module, name, cls)
    module.__all__ = sorted(classes)
    sys.modules["runner.sim"] = module


def _missing_entry_point(namespace: dict, entry_class: str, entry_method: str) -> str:
    expected = f"a class `{entry_class}` with a method `{entry_method}(self)`"
    found = namespace.get(entry_class)
    if found is None:
        classes = sorted(
            name
            for name, value in namespace.items()
            if inspect.isclass(value)
            and not name.startswith("_")
            and getattr(value, "__module__", "") == "__candidate__"
        )
        extra = f" (found {', '.join(f'`{c}`' for c in classes)})" if classes else ""
        return f"Expected {expected}, but there is no `{entry_class}`{extra}."
    if not inspect.isclass(found):
        return f"Expected {expected}, but `{entry_class}` is not a class."
    return f"Expected {expected}, but `{entry_class}` has no `{entry_method}` method."


DISPLAY = {"name": "solution.py"}  # the file name the candidate knows (from the hello)


def _trimmed(exc: BaseException) -> tuple[str, int | None]:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == FILENAME]
    lines = ["Traceback (most recent call last):"]
    for frame in frames:
        lines.append(f'  File "{DISPLAY["name"]}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    lines.extend(line.rstrip("\n") for line in traceback.format_exception_only(type(exc), exc))
    text = "\n".join(lines)
    if len(text) > TRACEBACK_LIMIT:
        text = text[:TRACEBACK_LIMIT] + "\n…"
    return text, (frames[-1].lineno if frames else None)


def _message(exc: BaseException, line: int | None) -> str:
    where = f" (line {line})" if line else ""
    if isinstance(exc, SystemExit):
        return f"the program called exit(){where}"
    try:
        text = str(exc)
    except BaseException:  # its own __str__ failed: say so, not why
        text = "<the exception's str() failed>"
    if not isinstance(text, str):
        text = ""
    return f"{type(exc).__name__}{where}: {text}" if text else f"{type(exc).__name__}{where}"


def _error(exc: BaseException, prefix: str = "") -> dict:
    text, line = _trimmed(exc)
    verdict = "memory_limit" if isinstance(exc, MemoryError) else "runtime_error"
    return {"verdict": verdict, "message": prefix + _message(exc, line), "traceback": text,
            "line": line}


def _watched(loop) -> list:
    """What the program must leave as it found it: the runtime's modules and classes.
    Not the builtins, ``json``, the wire or the tripwire's own class: what counts and
    describes the run's end binds what it uses before the program runs, the end is
    encoded by a C encoder made at import and sealed, and what sends the sealed bytes can
    spoil the frame, never forge one. (Each object watched costs every run: comparing
    touches its every value, a copy-on-write page fault where the fork server's pages
    are shared: ~0.1-0.4 ms an object.)"""
    modules = [loop_module, patches, proxies, witness, runtime_module, sys.modules[__name__]]
    classes = [CandidateLoop, Task, type(loop._selector), loop_module._Future, Runtime]
    return modules + classes


# What describes the tasks left running is bound before the program runs (as the
# witness's code is): a builtin replaced by the program changes nothing it reports.
def _where(
    task: asyncio.Task, _getattr=getattr, _repr=repr, _getline=linecache.getline,
    _filename=FILENAME, _str=str,
) -> str:
    coro = task.get_coro()
    name = _getattr(coro, "__qualname__", None)
    name = name if type(name) is _str else _repr(coro)
    innermost = None
    while coro is not None:
        frame = _getattr(coro, "cr_frame", None) or _getattr(coro, "gi_frame", None)
        if frame is not None and frame.f_code.co_filename == _filename:
            innermost = frame
            qualname = _getattr(coro, "__qualname__", name)
            name = qualname if type(qualname) is _str else name
        coro = _getattr(coro, "cr_await", None) or _getattr(coro, "gi_yieldfrom", None)
    if innermost is None:
        return f"`{name}`"
    line = _getline(_filename, innermost.f_lineno).strip()
    return f"`{name}` at line {innermost.f_lineno}: `{line}`"


def _describe(
    tasks, _where=_where, _sorted=sorted, _len=len, _most=MAX_TASKS_LISTED
) -> list[str]:
    counts: dict[str, int] = {}
    for task in tasks:
        where = _where(task)
        counts[where] = counts.get(where, 0) + 1
    described = [f"{n} x {where}" if n > 1 else where for where, n in _sorted(counts.items())]
    return described[:_most] + (
        [f"and {_len(described) - _most} more"] if _len(described) > _most else []
    )
