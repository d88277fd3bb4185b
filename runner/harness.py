"""What both grading tracks share: the candidate's file, errors, output.

Imports go one way: ``contract`` <- ``harness`` <- the tracks (``grading`` for simulated
exercises, ``gpu.grading`` for GPU ones) <- ``cli``. Neither track imports the other.
"""

from __future__ import annotations

import inspect
import linecache
import sys
import traceback
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from types import CodeType, ModuleType

from runner.contract import TRACEBACK_LIMIT, clip, make_result

DEFAULT_WATCHDOG = 10.0  # real seconds for all the candidate's runs together (GPU track)


class InternalError(Exception):
    """The exercise itself is broken (its starter fails, its checks crash...)."""


@dataclass
class Program:
    path: str  # the file name the code is compiled under (frames carry it)
    display: str  # the name shown to the user
    code: CodeType

    @classmethod
    def from_file(cls, path: str | Path, display: str | None = None) -> Program:
        """Compile a file; raises SyntaxError (also for undecodable files)."""
        path = str(Path(path).resolve())
        raw = Path(path).read_bytes()
        try:
            source = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            error = SyntaxError(f"the file is not valid UTF-8 ({exc.reason})")
            error.lineno = raw[: exc.start].count(b"\n") + 1
            raise error from None
        if "\0" in source:
            error = SyntaxError("the source contains a NUL character")
            error.lineno = source[: source.index("\0")].count("\n") + 1
            raise error
        code = compile(source, path, "exec", dont_inherit=True)
        linecache.checkcache(path)
        return cls(path, display or Path(path).name, code)


@dataclass
class Failure:
    verdict: str  # runtime_error | timeout | missing_entry_point
    message: str
    traceback: str | None = None
    line: int | None = None


def user_frames(tb_or_stack, program: Program) -> list[traceback.FrameSummary]:
    return [f for f in tb_or_stack if f.filename == program.path]


def trimmed_traceback(exc: BaseException, program: Program) -> tuple[str, int | None]:
    """The traceback with only the frames of the user's file, and the innermost line."""
    frames = user_frames(traceback.extract_tb(exc.__traceback__), program)
    lines = ["Traceback (most recent call last):"]
    for frame in frames:
        lines.append(f'  File "{program.display}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    lines.extend(line.rstrip("\n") for line in traceback.format_exception_only(type(exc), exc))
    return clip("\n".join(lines), TRACEBACK_LIMIT), (frames[-1].lineno if frames else None)


@contextmanager
def captured(out, err):
    """Send the user's prints (and tracebacks they print) to bounded buffers."""
    stdin = sys.stdin
    hook = sys.unraisablehook
    sys.stdin = StringIO("")
    sys.unraisablehook = lambda unraisable: None  # e.g. coroutines closed when a run is dropped
    try:
        with redirect_stdout(out), redirect_stderr(err):
            yield
    finally:
        sys.stdin = stdin
        sys.unraisablehook = hook


def exception_message(exc: BaseException, line: int | None) -> str:
    where = f" (line {line})" if line else ""
    if isinstance(exc, SystemExit):
        return f"the program called exit(){where}"
    text = str(exc)
    return f"{type(exc).__name__}{where}: {text}" if text else f"{type(exc).__name__}{where}"


def missing_entry_point(exercise, namespace: dict) -> Failure:
    expected = f"a class `{exercise.entry_class}` with a method `{exercise.entry_method}(self)`"
    found = namespace.get(exercise.entry_class)
    if found is None:
        classes = sorted(
            name
            for name, value in namespace.items()
            if inspect.isclass(value)
            and not name.startswith("_")
            and getattr(value, "__module__", "") == "__candidate__"
        )
        extra = f" (found {', '.join(f'`{c}`' for c in classes)})" if classes else ""
        message = f"Expected {expected}, but there is no `{exercise.entry_class}`{extra}."
    elif not inspect.isclass(found):
        message = f"Expected {expected}, but `{exercise.entry_class}` is not a class."
    else:
        message = (
            f"Expected {expected}, but `{exercise.entry_class}` has no "
            f"`{exercise.entry_method}` method."
        )
    return Failure("missing_entry_point", message)


def syntax_result(exercise, exc: SyntaxError, display: str) -> dict:
    line = exc.lineno
    where = f"line {line}" + (f", column {exc.offset}" if exc.offset else "") if line else ""
    message = f"Syntax error{' on ' + where if where else ''}: {exc.msg}"
    text = (exc.text or "").rstrip("\n")
    return make_result(
        exercise=exercise.slug,
        verdict="syntax_error",
        message=message,
        error={
            "type": "SyntaxError",
            "line": line,
            "column": exc.offset,
            "text": text,
            "traceback": message,
        },
    )




def candidate_module(filename: str) -> ModuleType:
    """The module a candidate's file runs in (both tracks): a real one, in ``sys.modules``
    under its ``__name__``, so whatever looks a class's module up there works as under
    ``python file.py`` (dataclasses with string annotations, typing, pickle)."""
    import builtins

    module = ModuleType("__candidate__")
    module.__file__ = filename
    module.__builtins__ = builtins
    sys.modules[module.__name__] = module
    return module
