"""Grading: run the baseline and the candidate on the virtual clock, check, decide.

One grading = the starter (baseline) once per scenario, then the candidate once per
scenario in the plain FIFO order, then again under N seeded shuffles of the ready
queue. Every run is checked; the timed scenario's plain run gives the speedup.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import linecache
import random
import signal
import sys
import traceback
from contextlib import contextmanager, redirect_stderr, redirect_stdout, suppress
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path
from types import CodeType
from typing import Any

import torch

from runner import blocking
from runner.clock import StuckError, VirtualLoop, to_seconds
from runner.exercise import Exercise, Scenario, load
from runner.result import (
    TRACE_LIMIT,
    TRACEBACK_LIMIT,
    BoundedText,
    Check,
    NullText,
    clip,
    make_result,
)
from runner.sim.core import Sim

torch.set_num_threads(1)  # tensors are tiny; extra threads only add noise on a 2-core box

DEFAULT_WATCHDOG = 10.0  # real seconds for all the candidate's runs together
MAX_TASKS_LISTED = 8


class InternalError(Exception):
    """The exercise itself is broken (its starter fails, its checks crash...)."""


class WatchdogTimeout(KeyboardInterrupt):
    # A KeyboardInterrupt subclass: asyncio re-raises those out of the loop instead
    # of storing them in a task, and ``except Exception`` in user code cannot catch it.
    pass


# -- programs -----------------------------------------------------------------


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


@dataclass
class Run:
    scenario: Scenario
    seed: int | None
    sim: Sim
    cluster: Any = None
    returned: Any = None
    makespan_ticks: int = 0
    leftover: list[str] = field(default_factory=list)  # tasks still running when train() returned
    failure: Failure | None = None

    @property
    def trace(self):
        return self.sim.trace

    @property
    def makespan(self) -> float:
        return to_seconds(self.makespan_ticks)


# -- running one program once -------------------------------------------------


class _SimPolicy(asyncio.DefaultEventLoopPolicy):
    """``asyncio.run()`` / ``new_event_loop()`` in user code get the simulation's loop."""

    def __init__(self, loop: VirtualLoop) -> None:
        super().__init__()
        self._sim_loop = loop

    def new_event_loop(self):
        return self._sim_loop


@contextmanager
def _loop_installed(loop: VirtualLoop):
    old_policy = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(_SimPolicy(loop))
    asyncio.set_event_loop(loop)
    try:
        yield
    finally:
        asyncio.set_event_loop(None)
        asyncio.set_event_loop_policy(old_policy)


def _user_frames(tb_or_stack, program: Program) -> list[traceback.FrameSummary]:
    return [f for f in tb_or_stack if f.filename == program.path]


def trimmed_traceback(exc: BaseException, program: Program) -> tuple[str, int | None]:
    """The traceback with only the frames of the user's file, and the innermost line."""
    frames = _user_frames(traceback.extract_tb(exc.__traceback__), program)
    lines = ["Traceback (most recent call last):"]
    for frame in frames:
        lines.append(f'  File "{program.display}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    lines.extend(line.rstrip("\n") for line in traceback.format_exception_only(type(exc), exc))
    return clip("\n".join(lines), TRACEBACK_LIMIT), (frames[-1].lineno if frames else None)


def _where(task: asyncio.Task, program: Program) -> str:
    """The innermost line of the user's code a suspended task is waiting at."""
    coro = task.get_coro()
    name = getattr(coro, "__qualname__", repr(coro))
    innermost = None
    while coro is not None:  # follow the chain of awaits down to the future
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None and frame.f_code.co_filename == program.path:
            innermost = frame
            name = getattr(coro, "__qualname__", name)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    if innermost is None:
        return f"`{name}`"
    line = linecache.getline(program.path, innermost.f_lineno).strip()
    return f"`{name}` at line {innermost.f_lineno}: `{line}`"


def _describe_tasks(tasks: list[asyncio.Task], program: Program) -> list[str]:
    """Where each task waits, identical places grouped: ``3 x `f` at line 9: ...``."""
    counts: dict[str, int] = {}
    for task in tasks:
        where = _where(task, program)
        counts[where] = counts.get(where, 0) + 1
    return [f"{n} x {where}" if n > 1 else where for where, n in sorted(counts.items())]


def run_program(
    exercise: Exercise,
    program: Program,
    scenario: Scenario,
    seed: int | None,
    *,
    time_limit: float | None,
) -> Run:
    """Run ``program``'s trainer once on a fresh simulated cluster."""
    loop = VirtualLoop(seed=seed, time_limit=time_limit)
    tasks: list[asyncio.Task] = []

    def task_factory(loop, coro, context=None):
        task = asyncio.Task(coro, loop=loop, context=context)
        tasks.append(task)  # kept alive: a task nobody references still finishes
        return task

    loop.set_task_factory(task_factory)
    loop.set_exception_handler(lambda loop, context: None)  # reported from `tasks` instead
    sim = Sim(loop)
    run = Run(scenario, seed, sim)
    random.seed(0)
    torch.manual_seed(0)
    try:
        with sim, _loop_installed(loop):
            try:
                run.cluster = exercise.build(sim, scenario.config)
            except Exception as exc:
                message = f"building the {scenario.name} cluster failed: {exc!r}"
                raise InternalError(message) from exc
            _run_trainer(exercise, program, run, loop, tasks)
            _finish(program, run, loop, tasks)
    finally:
        loop.dispose()
    return run


def _run_trainer(exercise, program, run, loop, tasks) -> None:
    namespace = {"__name__": "__candidate__", "__file__": program.path, "__builtins__": builtins}
    main: asyncio.Task | None = None
    try:
        exec(program.code, namespace)
        trainer_class = namespace.get(exercise.entry_class)
        method = getattr(trainer_class, exercise.entry_method, None)
        if not inspect.isclass(trainer_class) or not callable(method):
            run.failure = _missing_entry_point(exercise, namespace)
            return
        trainer = trainer_class(run.cluster)
        returned = getattr(trainer, exercise.entry_method)()
        if inspect.isawaitable(returned):
            main = loop.create_task(_await(returned))
            returned = loop.run_until_complete(main)
        run.returned = returned
        run.makespan_ticks = loop.ticks()
    except WatchdogTimeout:
        raise
    except StuckError:
        pass  # the loop remembers it; reported below
    except BaseException as exc:
        text, line = trimmed_traceback(exc, program)
        run.failure = Failure("runtime_error", _exception_message(exc, line), text, line)
    finally:
        run.makespan_ticks = run.makespan_ticks or loop.ticks()
        if main is not None and main in tasks:
            tasks.remove(main)
    if loop.stuck is not None and run.failure is None:
        waiting = [t for t in tasks if not t.done()]
        run.failure = _stuck_failure(loop.stuck, waiting, program, loop)


async def _await(awaitable):
    return await awaitable


def _exception_message(exc: BaseException, line: int | None) -> str:
    where = f" (line {line})" if line else ""
    if isinstance(exc, SystemExit):
        return f"the program called exit(){where}"
    text = str(exc)
    return f"{type(exc).__name__}{where}: {text}" if text else f"{type(exc).__name__}{where}"


def _missing_entry_point(exercise: Exercise, namespace: dict) -> Failure:
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


def _stuck_failure(stuck: StuckError, waiting, program: Program, loop: VirtualLoop) -> Failure:
    at = f"at t={loop.time():.3f} s (simulated)"
    if stuck.kind == "deadlock":
        message = f"Deadlock {at}: {stuck}."
    elif stuck.kind == "livelock":
        message = f"Livelock {at}: {stuck}."
    else:
        message = f"Time limit: {stuck} (the program would never finish in time)."
    described = _describe_tasks(waiting, program)
    if described:
        listed = "; ".join(described[:MAX_TASKS_LISTED])
        more = len(described) - MAX_TASKS_LISTED
        message += f" Waiting: {listed}" + (f" (and {more} more)" if more > 0 else "") + "."
    return Failure("timeout", message)


def _finish(program: Program, run: Run, loop: VirtualLoop, tasks: list[asyncio.Task]) -> None:
    """Report tasks left running or failed unseen, then unwind them."""
    pending = [t for t in tasks if not t.done()]
    if run.failure is None:
        run.leftover = _describe_tasks(pending, program)
        for task in tasks:
            # CPython-private: a task whose exception nobody retrieved has
            # ``_log_traceback`` set (asyncio would log "exception was never retrieved").
            if task.done() and not task.cancelled() and getattr(task, "_log_traceback", False):
                exc = task.exception()
                text, line = trimmed_traceback(exc, program)
                run.failure = Failure(
                    "runtime_error",
                    f"A task failed and nobody awaited it: {_exception_message(exc, line)}",
                    text,
                    line,
                )
                break
    for task in tasks:
        if task.done() and not task.cancelled():
            task._log_traceback = False  # CPython-private, as above: already reported
    if pending and loop.stuck is None:
        for task in pending:
            task.cancel()
        with suppress(StuckError, Exception):
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    for task in tasks:
        if not task.done():
            # Still stuck: close the coroutine now, while output is captured, rather
            # than when the garbage collector finds it after the loop is gone.
            with suppress(BaseException):
                task.get_coro().close()


# -- the watchdog and output capture ------------------------------------------


@contextmanager
def watchdog(seconds: float | None, on_hard_timeout=None):
    """Interrupt the candidate after ``seconds`` of real time.

    The first alarm raises :class:`WatchdogTimeout` in whatever is running. If the
    program swallows it, a second alarm a second later calls ``on_hard_timeout``
    (the CLI writes a timeout result and exits the process).
    """
    if not seconds or not hasattr(signal, "setitimer"):
        yield
        return
    fired = []

    def alarm(signum, frame):
        if fired and on_hard_timeout is not None:
            on_hard_timeout()
        fired.append(True)
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        raise WatchdogTimeout()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


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


# -- baselines -----------------------------------------------------------------

_baselines: dict[tuple[Path, str], Run] = {}


def baseline_run(exercise: Exercise, scenario: Scenario) -> Run:
    """The starter's run of a scenario (deterministic, so computed once per process)."""
    key = (exercise.directory, scenario.name)
    if key not in _baselines:
        program = Program.from_file(exercise.starter)
        with blocking.installed({program.path}), captured(NullText(), NullText()):
            run = run_program(exercise, program, scenario, None, time_limit=None)
        if run.failure is not None:
            raise InternalError(
                f"the starter of {exercise.slug} fails on {scenario.name}: {run.failure.message}"
            )
        _baselines[key] = run
    return _baselines[key]


# -- grading -------------------------------------------------------------------


def _time_limit(exercise: Exercise, baseline: Run) -> float:
    return max(1.0, baseline.makespan * exercise.time_limit_factor)


def _run_checks(exercise: Exercise, run: Run, baseline: Run) -> list[Check]:
    try:
        checks = list(exercise.check(run, baseline))
    except Exception as exc:
        raise InternalError(f"the {exercise.slug} checks crashed: {exc!r}") from exc
    checks.append(
        Check.verdict(
            "clean_shutdown",
            not run.leftover,
            "Every task had finished when train() returned.",
            "Tasks were still running when train() returned: "
            + "; ".join(run.leftover[:MAX_TASKS_LISTED])
            + ". Await (or cancel and await) every task you start.",
        )
    )
    for check in checks:
        check.seed = run.seed
        check.scenario = run.scenario.name
    return checks


def _work(exercise: Exercise, run: Run) -> float:
    if exercise.work is not None:
        return exercise.work(run)
    return to_seconds(sum(run.trace.busy_ticks(op=op) for op in exercise.work_ops))


def _advice_checks(exercise: Exercise, run: Run, baseline: Run, bound: float) -> list[Check]:
    """Checks on the timed run only: plausibility, blocking calls, threads."""
    checks = []
    speedup = baseline.makespan / run.makespan if run.makespan else float("inf")
    work, base_work = _work(exercise, run), _work(exercise, baseline)
    if run.makespan == 0:
        checks.append(
            Check.fail(
                "plausible",
                "The program finished in no simulated time at all: it did none of the work.",
            )
        )
    elif speedup > bound * (1 + 1e-9):
        checks.append(
            Check.fail(
                "plausible",
                f"The speedup {speedup:.2f}x is above the theoretical bound {bound:.2f}x: "
                "the simulation was bypassed, so the result cannot be trusted.",
            )
        )
    elif work < base_work:
        checks.append(
            Check.fail(
                "plausible",
                f"The program did less simulated work ({work:g}) than the baseline "
                f"({base_work:g}): some work was skipped or faked.",
            )
        )
    else:
        checks.append(
            Check.ok("plausible", "The measured time and work are consistent with the simulation.")
        )
    calls = run.sim.blocking_calls
    if calls:
        listed = ", ".join(f"{name} x{count}" for name, count in sorted(calls.items()))
        checks.append(
            Check.warn(
                "blocking_calls",
                f"Blocking calls inside async code stalled every task: {listed}. "
                "Use the `_async` variants with `await` (and `await asyncio.sleep`).",
            )
        )
    else:
        checks.append(Check.ok("blocking_calls", "No blocking call inside async code."))
    threads = run.sim.thread_calls
    if threads:
        listed = ", ".join(f"{name} x{count}" for name, count in sorted(threads.items()))
        checks.append(
            Check.warn(
                "threads",
                f"Threads/executors ran inline, blocking the loop ({listed}): the simulation "
                "has one thread, so they make nothing faster.",
            )
        )
    else:
        checks.append(Check.ok("threads", "No threads or executors."))
    for check in checks:
        check.scenario = run.scenario.name
    return checks


def _merge(check_lists: list[list[Check]]) -> list[Check]:
    """One check per name: the first failure across runs wins, else the first result."""
    merged: dict[str, Check] = {}
    for checks in check_lists:
        for check in checks:
            kept = merged.get(check.name)
            if kept is None or (check.failed and not kept.failed):
                merged[check.name] = check
    for check in merged.values():
        if not check.failed:
            check.seed = None
    return list(merged.values())


def _trace_json(run: Run | None) -> dict | None:
    if run is None:
        return None
    data = run.trace.to_json(TRACE_LIMIT)
    data["makespan"] = run.makespan
    return data


def grade(
    exercise_ref: str | Path,
    code_path: str | Path,
    *,
    seeds: int | None = None,
    replay_seed: int | None = None,
    watchdog_seconds: float | None = DEFAULT_WATCHDOG,
    on_hard_timeout=None,
    trials: int | None = None,
    device: str | None = None,
) -> dict:
    """Grade one code file against one exercise. Returns the result dict (see result.py).

    GPU exercises go to ``runner.gpu_grading`` (``trials``, ``device`` are theirs; seeds
    do not apply there)."""
    exercise = load(exercise_ref)
    if exercise.track == "gpu":
        from runner import gpu_grading

        return gpu_grading.grade(
            exercise,
            code_path,
            trials=trials,
            device=device,
            watchdog_seconds=watchdog_seconds,
            on_hard_timeout=on_hard_timeout,
        )
    try:
        program = Program.from_file(code_path)
    except SyntaxError as exc:
        return _syntax_result(exercise, exc, Path(code_path).name)
    except OSError as exc:
        raise InternalError(f"cannot read {code_path}: {exc}") from exc

    baselines = {s.name: baseline_run(exercise, s) for s in exercise.scenarios}
    timed = exercise.timed
    base = baselines[timed.name]
    bound = exercise.bound(base)
    seed_count = exercise.seeds if seeds is None else seeds
    first_seed = None
    if replay_seed is not None:
        first_seed, seed_count = replay_seed, 0
    ordered = [timed] + [s for s in exercise.scenarios if not s.timed]
    plan = [(s, first_seed) for s in ordered] + [
        (s, seed)
        for seed in range(1, seed_count + 1)
        for s in ordered
        if s.seeds is None or seed <= s.seeds
    ]

    out, err = BoundedText(), BoundedText()
    runs: list[Run] = []
    failure_run: Run | None = None
    starter = Program.from_file(exercise.starter)
    try:
        with (
            blocking.installed({program.path, starter.path}),
            watchdog(watchdog_seconds, on_hard_timeout),
        ):
            for index, (scenario, seed) in enumerate(plan):
                streams = (out, err) if index == 0 else (NullText(), NullText())
                with captured(*streams):
                    run = run_program(
                        exercise,
                        program,
                        scenario,
                        seed,
                        time_limit=_time_limit(exercise, baselines[scenario.name]),
                    )
                runs.append(run)
                if run.failure is not None:
                    failure_run = run
                    break
    except WatchdogTimeout:
        return _timeout_result(exercise, watchdog_seconds, base, out, err, bound)

    timed_run = runs[0]
    if failure_run is not None:
        return _failure_result(exercise, failure_run, base, timed_run, out, err, bound, len(runs))

    check_lists = [_run_checks(exercise, run, baselines[run.scenario.name]) for run in runs]
    advice = _advice_checks(exercise, timed_run, base, bound)
    checks = _merge([*check_lists, advice])
    speedup = base.makespan / timed_run.makespan if timed_run.makespan else float("inf")
    metrics = _metrics(exercise, base, timed_run, bound, seed_count, len(runs))
    failed = [c for c in checks if c.failed]
    if failed:
        verdict = "wrong"
        names = ", ".join(
            c.name + (f" (seed {c.seed})" if c.seed is not None else "") for c in failed
        )
        message = f"{len(failed)} of {len(checks)} checks failed: {names}. {failed[0].message}"
    elif speedup < exercise.target_speedup - 1e-9:
        verdict = "too_slow"
        message = (
            f"Correct on {len(runs)} runs, but too slow: {speedup:.2f}x faster than the "
            f"baseline; the target is {exercise.target_speedup:.2f}x."
        )
        warned = [c for c in checks if c.status == "warn"]
        if warned:
            message += " " + warned[0].message
    else:
        verdict = "accepted"
        message = (
            f"All {len(checks)} checks passed on {len(runs)} runs; {speedup:.2f}x faster than "
            f"the baseline (target {exercise.target_speedup:.2f}x, bound {bound:.2f}x)."
        )
    return make_result(
        exercise=exercise.slug,
        verdict=verdict,
        message=message,
        checks=checks,
        metrics=metrics,
        trace={"baseline": _trace_json(base), "candidate": _trace_json(timed_run)},
        stdout=out.getvalue(),
        stderr=err.getvalue(),
    )


def _metrics(exercise, base: Run, run: Run | None, bound: float, seeds: int, runs: int) -> dict:
    candidate = run.makespan if run is not None and run.failure is None else None
    return {
        "baseline_time": base.makespan,
        "candidate_time": candidate,
        "speedup": round(base.makespan / candidate, 4) if candidate else None,
        "target_speedup": exercise.target_speedup,
        "bound_speedup": round(bound, 4),
        "bound_note": exercise.bound_note,
        "clock": "virtual",
        "unit": "s",
        "seeds": seeds,
        "runs": runs,
    }


def _syntax_result(exercise: Exercise, exc: SyntaxError, display: str) -> dict:
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


def _failure_result(exercise, run: Run, base: Run, timed: Run, out, err, bound, runs) -> dict:
    failure = run.failure
    message = failure.message
    if run.seed is not None:
        message += (
            f" (This happened on shuffle seed {run.seed} of the '{run.scenario.name}' "
            f"scenario; replay it with --seed {run.seed}.)"
        )
    elif not run.scenario.timed:
        message += f" (In the '{run.scenario.name}' scenario.)"
    error = None
    if failure.verdict == "runtime_error":
        error = {"type": "exception", "line": failure.line, "traceback": failure.traceback}
    return make_result(
        exercise=exercise.slug,
        verdict=failure.verdict,
        message=message,
        metrics=_metrics(exercise, base, None, bound, 0, runs),
        trace={"baseline": _trace_json(base), "candidate": _trace_json(run)},
        stdout=out.getvalue(),
        stderr=err.getvalue(),
        error=error,
    )


def _timeout_result(exercise, seconds, base: Run, out, err, bound) -> dict:
    return make_result(
        exercise=exercise.slug,
        verdict="timeout",
        message=(
            f"Stopped after {seconds:g} s of real time: the program never finished "
            "(an endless loop that never awaits?)."
        ),
        metrics=_metrics(exercise, base, None, bound, 0, 0),
        trace={"baseline": _trace_json(base), "candidate": None},
        stdout=out.getvalue(),
        stderr=err.getvalue(),
    )


def internal_error_result(exercise: str, message: str) -> dict:
    return make_result(exercise=exercise, verdict="internal_error", message=message)
