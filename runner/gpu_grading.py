"""Grading a GPU exercise: real PyTorch on a CUDA device, checked first, then timed.

1. The candidate's file is compiled (a syntax error is answered without a GPU).
2. No CUDA device: verdict ``needs_gpu`` (status ``skip``) and nothing runs.
3. The reference: the starter (the sequential baseline) runs once normally and once
   with early stopping turned off, which gives the weights and loss of every epoch.
4. The checked run: the candidate once, with races amplified (``runner.gpu_kit``), host
   synchronisations watched and output captured. ``exercise.check(run, reference)``; any
   failed check gives ``wrong`` and nothing is timed.
5. Timing (``runner.gpu_timing``), by the harness: the components of the work alone
   (for the bound), a traced warm-up of each side (the timelines), then trials A B A B;
   every run is checked again and its work counted, outside the timed region.
6. ``plausible`` (above the bound, less work, precision changed), ``timing_spread``;
   verdict ``wrong``, ``too_slow`` or ``accepted``.

The same code runs on a CPU when a test asks for ``device="cpu"`` (small sizes, no
streams to race, timing by perf_counter): the path is exercised, overlap is not measured.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import os
import random
import sys
import time
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from runner import gpu_timing
from runner.exercise import GpuExercise
from runner.gpu_kit import Amplifier, Recorder, sleep_cycles_per_second
from runner.harness import (
    DEFAULT_WATCHDOG,
    Failure,
    InternalError,
    Program,
    WatchdogTimeout,
    captured,
    exception_message,
    missing_entry_point,
    syntax_result,
    trimmed_traceback,
    watchdog,
)
from runner.result import TRACE_LIMIT, BoundedText, Check, NullText, empty_metrics, make_result

MAX_LINES_LISTED = 5
NOISY_SPREAD = 0.10  # interquartile range of the speedup above 10% of it: warn
SYNC_WARNING = "synchronizing"  # torch's sync debug mode: "called a synchronizing CUDA operation"


class _RunFailed(Exception):
    def __init__(self, run: GpuRun) -> None:
        super().__init__(run.failure.message if run.failure else "")
        self.run = run


class _TrialWrong(Exception):
    def __init__(self, checks: list[Check]) -> None:
        super().__init__("a timed trial failed its checks")
        self.checks = checks


@dataclass
class GpuRun:
    """One run of a program on the device, as checks see it."""

    phase: str  # reference | trajectory | checked | warmup | trial | component
    index: int | None
    job: Any
    recorder: Recorder
    returned: Any = None
    failure: Failure | None = None
    seconds: float | None = None
    syncs: list[tuple[int, int, str]] = field(default_factory=list)  # (line, steps so far, text)
    precision_changed: bool = False

    @property
    def config(self):
        return self.job.config

    def where(self) -> str:
        if self.phase in ("warmup", "trial"):
            return f"the {self.phase} run {self.index + 1}"
        return f"the {self.phase} run"


def cuda_available() -> bool:
    return torch.cuda.is_available()


def needs_gpu_result(exercise: GpuExercise, reason: str) -> dict:
    metrics = empty_metrics()
    metrics.update(clock="cuda_events", device=None, target_overlap=exercise.target_overlap)
    return make_result(
        exercise=exercise.slug,
        verdict="needs_gpu",
        message=(
            f"This exercise trains a real PyTorch model on a GPU and times it there, but "
            f"{reason}. Nothing was run and nothing counts against the code: it has to be "
            "graded by a worker with a GPU (the Celery queue `gpu`, see runner/README.md)."
        ),
        metrics=metrics,
    )


# -- precision and determinism -----------------------------------------------------


def _precision() -> tuple:
    return (
        torch.get_float32_matmul_precision(),
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
    )


def _set_precision(state: tuple) -> None:
    torch.set_float32_matmul_precision(state[0])
    torch.backends.cuda.matmul.allow_tf32 = state[1]
    torch.backends.cudnn.allow_tf32 = state[2]


IEEE = ("highest", False, False)  # full float32 matmuls: results comparable to the reference


# -- host synchronisations -----------------------------------------------------------


@contextmanager
def _watch_syncs(program: Program, run: GpuRun):
    """Record host synchronisations made from the candidate's file (CUDA only): those
    torch's sync debug mode reports (``.item()``, ``.cpu()``, ``.tolist()``, ``bool()`` of a
    tensor, ``Stream.synchronize()``...) and ``torch.cuda.synchronize()``. Waiting on a
    CUDA event is not counted: it is how a host waits for one side stream's result."""
    if run.recorder.device.type != "cuda":
        yield
        return

    def innermost_line() -> int | None:
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == program.path:
                return frame.f_lineno
            frame = frame.f_back
        return None

    def note(text: str) -> None:
        line = innermost_line()
        if line is not None:
            run.syncs.append((line, run.recorder.steps, text))

    original_synchronize = torch.cuda.synchronize
    previous_show = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if SYNC_WARNING in str(message):
            note("synchronizing operation")
        else:
            previous_show(message, category, filename, lineno, file, line)

    def synchronize(device=None):
        note("torch.cuda.synchronize()")
        return original_synchronize(device)

    with warnings.catch_warnings():
        warnings.filterwarnings("always", message=f".*{SYNC_WARNING}.*")
        warnings.showwarning = showwarning
        torch.cuda.set_sync_debug_mode("warn")
        torch.cuda.synchronize = synchronize
        try:
            yield
        finally:
            torch.cuda.synchronize = original_synchronize
            torch.cuda.set_sync_debug_mode("default")


def _host_sync_check(run: GpuRun, program: Program) -> Check:
    if run.recorder.device.type != "cuda":
        return Check(
            "host_syncs", "skip", "Host synchronisations are only detected on a CUDA device."
        )
    total_steps = run.recorder.steps
    inside = [(line, text) for line, steps, text in run.syncs if steps < total_steps]
    if not inside:
        return Check.ok(
            "host_syncs", "The host never waited for the device while training still had work."
        )
    counts = Counter(line for line, _ in inside)
    listed = []
    for line, count in sorted(counts.items())[:MAX_LINES_LISTED]:
        source = _source_line(program, line)
        listed.append(f"line {line}" + (f" `{source}`" if source else "") + f" x{count}")
    return Check.warn(
        "host_syncs",
        f"The host waited for the device {len(inside)} times before training was over "
        f"({', '.join(listed)}): each wait drains the queue of work and leaves the GPU idle "
        "while Python catches up. Keep values on the device, copy them with "
        "`non_blocking=True` and look at them once a CUDA event says they are ready.",
    )


def _source_line(program: Program, line: int) -> str:
    import linecache

    return linecache.getline(program.path, line).strip()[:80]


# -- running a program once ----------------------------------------------------------


class _Harness:
    def __init__(self, exercise: GpuExercise, device: torch.device, config) -> None:
        self.exercise = exercise
        self.device = device
        self.config = config
        self.cuda = device.type == "cuda"
        self.clock = gpu_timing.Clock(device)
        self.run_timeout: float | None = None
        self.on_hard_timeout = None

    def new_run(self, phase, index=None, *, config=None, traced=False, amplifier=None) -> GpuRun:
        recorder = Recorder(self.device, traced=traced, amplifier=amplifier)
        job = self.exercise.build(self.device, config or self.config, recorder)
        return GpuRun(phase, index, job, recorder)

    def prepare(self, program: Program, run: GpuRun, *, out=None, err=None, watch=False):
        """Execute the module (fresh namespace) and return the thunk that trains, which
        fills in ``run`` and raises _RunFailed when the program fails."""
        namespace = {
            "__name__": "__candidate__",
            "__file__": program.path,
            "__builtins__": builtins,
        }
        streams = (out or NullText(), err or NullText())
        random.seed(0)
        torch.manual_seed(0)
        try:
            with captured(*streams), watchdog(self.run_timeout, self.on_hard_timeout):
                exec(program.code, namespace)
        except WatchdogTimeout:
            raise
        except BaseException as exc:
            text, line = trimmed_traceback(exc, program)
            run.failure = Failure("runtime_error", exception_message(exc, line), text, line)
            return self._failed(run)
        entry = namespace.get(self.exercise.entry_class)
        if not inspect.isclass(entry) or not callable(
            getattr(entry, self.exercise.entry_method, None)
        ):
            run.failure = missing_entry_point(self.exercise, namespace)
            return self._failed(run)

        def train():
            before = _precision()
            try:
                with (
                    captured(*streams),
                    watchdog(self.run_timeout, self.on_hard_timeout),
                    _watch_syncs(program, run) if watch else _nothing(),
                ):
                    run.recorder.begin()
                    trainer = entry(run.job)
                    returned = getattr(trainer, self.exercise.entry_method)()
                    if inspect.isawaitable(returned):
                        returned = asyncio.run(_await(returned))
                    run.returned = returned
            except WatchdogTimeout:
                raise
            except BaseException as exc:
                text, line = trimmed_traceback(exc, program)
                run.failure = Failure("runtime_error", exception_message(exc, line), text, line)
                raise _RunFailed(run) from None
            finally:
                if _precision() != before:
                    run.precision_changed = True
                    _set_precision(before)
            return run

        return train

    @staticmethod
    def _failed(run: GpuRun):
        def fail():
            raise _RunFailed(run)

        return fail

    def finish(self, run: GpuRun) -> None:
        """After a run: synchronise the whole device, close the timeline."""
        self.clock.synchronize()
        run.recorder.finish()

    def run_once(self, program: Program, run: GpuRun, **options) -> GpuRun:
        """Prepare, train and finish one run, timed (untimed runs use this too)."""
        try:
            seconds, _ = self.clock.time(self.prepare(program, run, **options))
            run.seconds = seconds
        except _RunFailed:
            pass
        self.finish(run)
        return run


@contextmanager
def _nothing():
    yield


async def _await(awaitable):
    return await awaitable


# -- grading -------------------------------------------------------------------------


def grade(
    exercise: GpuExercise,
    code_path: str | Path,
    *,
    trials: int | None = None,
    device: str | None = None,
    watchdog_seconds: float | None = DEFAULT_WATCHDOG,
    on_hard_timeout=None,
) -> dict:
    """Grade one code file against a GPU exercise. Returns the result dict (result.py)."""
    try:
        program = Program.from_file(code_path)
    except SyntaxError as exc:
        return syntax_result(exercise, exc, Path(code_path).name)
    except OSError as exc:
        raise InternalError(f"cannot read {code_path}: {exc}") from exc
    if device is None:
        if not cuda_available():
            reason = "this machine has no usable CUDA device (torch.cuda.is_available() is false)"
            return needs_gpu_result(exercise, reason)
        device = "cuda"
    device = torch.device(device)
    if device.type == "cuda":
        # cuBLAS is bitwise deterministic across streams only with a fixed workspace;
        # read when cuBLAS first starts, so set before anything runs.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    previous_precision = _precision()
    _set_precision(IEEE)
    try:
        return _grade(exercise, program, device, trials, watchdog_seconds, on_hard_timeout)
    finally:
        _set_precision(previous_precision)


def _grade(exercise, program, device, trials, watchdog_seconds, on_hard_timeout) -> dict:
    cuda = device.type == "cuda"
    harness = _Harness(exercise, device, exercise.config if cuda else exercise.cpu_config)
    starter = Program.from_file(exercise.starter)

    # 3. the reference (the starter is ours: it must work)
    started = time.perf_counter()
    base_run = harness.run_once(starter, harness.new_run("reference"))
    reference_seconds = time.perf_counter() - started
    trajectory = harness.run_once(
        starter,
        harness.new_run("trajectory", config=exercise.no_early_stop(harness.config)),
    )
    for run in (base_run, trajectory):
        if run.failure is not None:
            raise InternalError(f"the starter of {exercise.slug} fails: {run.failure.message}")
    try:
        reference = exercise.reference(trajectory, base_run)
    except ValueError as exc:  # e.g. decisions too close to call on this device
        raise InternalError(f"{exercise.slug} cannot be graded on this device: {exc}") from exc
    _expect_pass(exercise, exercise.check(base_run, reference), "the starter")
    harness.run_timeout = max(
        watchdog_seconds or DEFAULT_WATCHDOG, exercise.time_limit_factor * reference_seconds
    )
    harness.on_hard_timeout = on_hard_timeout

    # 4. the checked run
    amplifier = _amplifier(harness, trajectory) if cuda else None
    out, err = BoundedText(), BoundedText()
    checked = harness.new_run("checked", amplifier=amplifier)
    try:
        harness.run_once(program, checked, out=out, err=err, watch=True)
    except WatchdogTimeout:
        return _timeout_result(exercise, harness, out, err)
    if checked.failure is not None:
        return _failure_result(exercise, checked, out, err, harness)
    checks = _run_checks(exercise, checked, reference)
    checks.append(_host_sync_check(checked, program))
    if any(c.failed for c in checks):
        return _verdict(exercise, checks, None, harness, out, err, runs=1)

    # 5. timing
    components = {
        name: gpu_timing.time_component(
            _component(harness, name), clock=harness.clock, trials=exercise.component_trials
        )
        for name in exercise.components(harness.new_run("component").job)
    }
    required = exercise.work(base_run)
    problems: list[str] = []
    traces: dict[str, dict | None] = {}
    runs = [1]

    def prepare_side(source: Program):
        def prepare(phase: str, index: int):
            run = harness.new_run(phase, index, traced=phase == gpu_timing.WARMUP)
            train = harness.prepare(source, run)
            if source is program:
                runs[0] += 1
                return train

            def train_starter():
                try:
                    return train()
                except _RunFailed as exc:
                    message = f"the starter failed in {run.where()} of the timing: {exc}"
                    raise InternalError(message) from exc

            return train_starter

        return prepare

    def after(label: str, phase: str, index: int, run: GpuRun) -> None:
        harness.finish(run)
        if phase == gpu_timing.WARMUP:
            traces[label] = run.recorder.trace_json(TRACE_LIMIT)
        found = _run_checks(exercise, run, reference)
        if label == gpu_timing.BASELINE:
            _expect_pass(exercise, found, f"the starter ({run.where()})")
            return
        failed = [c for c in found if c.failed]
        if failed:
            for check in failed:
                check.message += f" (This happened in {run.where()} of the timing.)"
            raise _TrialWrong(found)
        if run.precision_changed:
            problems.append(
                f"The program changed the float32 matmul precision (TF32) in {run.where()}: "
                "its results and its time are not comparable with the baseline's."
            )
        shortfall = gpu_timing.less_work(exercise.work(run), required)
        if shortfall:
            problems.append(f"In {run.where()}: {shortfall} Work was skipped.")

    try:
        comparison = gpu_timing.compare(
            prepare_side(starter),
            prepare_side(program),
            clock=harness.clock,
            trials=trials or exercise.trials,
            warmups=exercise.warmups,
            after=after,
        )
    except WatchdogTimeout:
        return _timeout_result(exercise, harness, out, err)
    except _RunFailed as exc:
        return _failure_result(exercise, exc.run, out, err, harness)
    except _TrialWrong as exc:
        checks = [*exc.checks, checks[-1]]
        return _verdict(exercise, checks, None, harness, out, err, runs=runs[0])
    if checked.precision_changed:
        problems.insert(0, "The program changed the float32 matmul precision (TF32).")

    # 6. what the numbers mean
    best = exercise.best_time(reference, {name: s.median for name, s in components.items()})
    timing = _Timing(exercise, comparison, components, best)
    implausible = gpu_timing.implausible_speedup(
        timing.speedup.median, timing.bound, exercise.bound_margin
    )
    if implausible:
        problems.insert(0, implausible)
    checks.append(
        Check.verdict(
            "plausible",
            not problems,
            "Every timed run did the baseline's work, and the speedup is below the bound.",
            " ".join(problems),
        )
    )
    checks.append(_spread_check(timing))
    if cuda and timing.bound < exercise.min_bound:  # a CPU run only exercises the path
        raise InternalError(
            f"this device cannot grade {exercise.slug}: the best possible speedup is only "
            f"{timing.bound:.2f}x (validation is a small share of the work here), within "
            "measurement noise. The exercise's sizes need calibrating for this device."
        )
    trace = {"baseline": traces.get("baseline"), "candidate": traces.get("candidate")}
    return _verdict(exercise, checks, timing, harness, out, err, runs=runs[0], trace=trace)


def _component(harness: _Harness, name: str):
    def prepare(index: int):
        run = harness.new_run("component", index)
        return harness.exercise.components(run.job)[name]

    return prepare


def _amplifier(harness: _Harness, trajectory: GpuRun) -> Amplifier:
    """Sleeps that widen race windows, scaled to this GPU's speed (from the starter's
    second, warm run): a quarter of an optimizer step's share of an epoch before each
    step, two epochs' worth at the start of each validation."""
    rate = sleep_cycles_per_second(harness.device)
    epochs = max(1, len(trajectory.recorder.validations))
    per_epoch = (trajectory.seconds or 0.0) / epochs
    per_step = per_epoch / max(1, trajectory.recorder.steps // epochs)
    return Amplifier(
        step_cycles=int(rate * per_step / 4), validate_cycles=int(rate * 2 * per_epoch)
    )


def _run_checks(exercise: GpuExercise, run: GpuRun, reference) -> list[Check]:
    try:
        return list(exercise.check(run, reference))
    except Exception as exc:
        raise InternalError(f"the {exercise.slug} checks crashed: {exc!r}") from exc


def _expect_pass(exercise: GpuExercise, checks: list[Check], what: str) -> None:
    failed = [c for c in checks if c.failed]
    if failed:
        raise InternalError(
            f"{what} of {exercise.slug} fails its own check {failed[0].name} on this device: "
            f"{failed[0].message}"
        )


@dataclass
class _Timing:
    exercise: GpuExercise
    comparison: gpu_timing.Comparison
    components: dict[str, gpu_timing.Spread]
    best: float

    @property
    def speedup(self) -> gpu_timing.Spread:
        return self.comparison.speedup

    @property
    def bound(self) -> float:
        return gpu_timing.bound_speedup(self.comparison.baseline_spread.median, self.best)

    @property
    def target(self) -> float:
        return gpu_timing.target_for(self.bound, self.exercise.target_overlap)

    @property
    def overlap(self) -> float | None:
        return gpu_timing.overlap_fraction(self.speedup.median, self.bound)


def _spread_check(timing: _Timing) -> Check:
    spread = timing.speedup
    text = (
        f"speedup {spread.median:.2f}x, interquartile range {spread.q1:.2f}-{spread.q3:.2f}x, "
        f"min {spread.low:.2f}x, max {spread.high:.2f}x over {spread.n} paired trials"
    )
    if spread.relative_iqr > NOISY_SPREAD:
        return Check.warn(
            "timing_spread",
            f"The trials varied a lot ({text}): the device was busy or its clocks changed; "
            "the speedup is less certain than usual.",
        )
    return Check.ok("timing_spread", f"Steady timings: {text}.")


def _metrics(exercise: GpuExercise, harness: _Harness, timing: _Timing | None, runs: int) -> dict:
    metrics = empty_metrics()
    metrics.update(
        clock=harness.clock.kind,
        runs=runs,
        device=_device_name(harness.device),
        target_overlap=exercise.target_overlap,
        bound_note=exercise.bound_note,
    )
    if timing is None:
        return metrics
    comparison = timing.comparison
    overlap = timing.overlap
    metrics.update(
        baseline_time=round(comparison.baseline_spread.median, 6),
        candidate_time=round(comparison.candidate_spread.median, 6),
        speedup=round(timing.speedup.median, 4),
        target_speedup=round(timing.target, 4),
        bound_speedup=round(timing.bound, 4),
        overlap=None if overlap is None else round(overlap, 4),
        trials=len(comparison.candidate),
        warmups=exercise.warmups,
        order=" ".join("A" if o.endswith("baseline") else "B" for o in comparison.order),
        speedup_spread=timing.speedup.to_json(4),
        baseline_spread=comparison.baseline_spread.to_json(),
        candidate_spread=comparison.candidate_spread.to_json(),
        baseline_times=[round(t, 6) for t in comparison.baseline],
        candidate_times=[round(t, 6) for t in comparison.candidate],
        components={name: round(s.median, 6) for name, s in timing.components.items()},
        best_time=round(timing.best, 6),
    )
    return metrics


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu"


def _verdict(exercise, checks, timing, harness, out, err, *, runs: int, trace=None) -> dict:
    failed = [c for c in checks if c.failed]
    if failed:
        verdict = "wrong"
        names = ", ".join(c.name for c in failed)
        message = f"{len(failed)} of {len(checks)} checks failed: {names}. {failed[0].message}"
    elif timing.speedup.median < timing.target - 1e-9:
        verdict = "too_slow"
        message = (
            f"Correct, but too slow: {timing.speedup.median:.2f}x faster than the baseline "
            f"(median of {timing.speedup.n} trials, interquartile range "
            f"{timing.speedup.q1:.2f}-{timing.speedup.q3:.2f}x); the target on this device is "
            f"{timing.target:.2f}x, hiding {exercise.target_overlap:.0%} of the time overlap "
            f"can hide (best possible {timing.bound:.2f}x)."
        )
        warned = [c for c in checks if c.status == "warn"]
        if warned:
            message += " " + warned[0].message
    else:
        verdict = "accepted"
        overlap = timing.overlap
        hidden = f", hiding {overlap:.0%} of what overlap can hide" if overlap is not None else ""
        message = (
            f"All {len(checks)} checks passed; {timing.speedup.median:.2f}x faster than the "
            f"baseline (median of {timing.speedup.n} trials, interquartile range "
            f"{timing.speedup.q1:.2f}-{timing.speedup.q3:.2f}x{hidden}; target "
            f"{timing.target:.2f}x, best possible {timing.bound:.2f}x)."
        )
    return make_result(
        exercise=exercise.slug,
        verdict=verdict,
        message=message,
        checks=checks,
        metrics=_metrics(exercise, harness, timing, runs),
        trace=trace,
        stdout=out.getvalue(),
        stderr=err.getvalue(),
    )


def _failure_result(exercise, run: GpuRun, out, err, harness) -> dict:
    failure = run.failure
    message = failure.message
    if run.phase != "checked":
        message += f" (This happened in {run.where()} of the timing.)"
    error = None
    if failure.verdict == "runtime_error":
        error = {"type": "exception", "line": failure.line, "traceback": failure.traceback}
    return make_result(
        exercise=exercise.slug,
        verdict=failure.verdict,
        message=message,
        metrics=_metrics(exercise, harness, None, 1),
        stdout=out.getvalue(),
        stderr=err.getvalue(),
        error=error,
    )


def _timeout_result(exercise, harness: _Harness, out, err) -> dict:
    return make_result(
        exercise=exercise.slug,
        verdict="timeout",
        message=(
            f"Stopped after {harness.run_timeout:.0f} s of real time in one run (the limit is "
            f"{exercise.time_limit_factor:g}x the baseline's time): the program never finished."
        ),
        metrics=_metrics(exercise, harness, None, 1),
        stdout=out.getvalue(),
        stderr=err.getvalue(),
    )
