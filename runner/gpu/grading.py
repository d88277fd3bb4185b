"""Grading a GPU exercise: real PyTorch on a CUDA device, checked first, then timed.

1. The candidate's file is compiled (a syntax error is answered without a GPU).
2. No CUDA device: verdict ``needs_gpu`` (status ``skip``) and nothing runs.
3. The reference: the starter (the sequential baseline) runs once normally and once
   with early stopping turned off, which gives the weights and loss of every epoch.
4. The checked run: the candidate once, with races amplified (``runner.gpu.kit``), host
   synchronisations watched and output captured. ``exercise.check(run, reference)``; any
   failed check gives ``wrong`` and nothing is timed.
5. Timing (``runner.gpu.timing``), by the harness: the components of the work alone
   (for the bound), a traced warm-up of each side (the timelines), then trials A B A B;
   every run is checked again and its work counted, outside the timed region.
6. ``plausible`` (above the bound, less work, precision changed), ``timing_spread``;
   verdict ``wrong``, ``too_slow`` or ``accepted``. The target hides
   ``target_overlap`` of what overlap can hide, counted from the exercise's serial time
   (its ``serial_time``: the same work with no overlap and no host waits) when it has
   one: a program that only stops the host waiting has hidden nothing.

The same code runs on a CPU when a test asks for ``device="cpu"`` (small sizes, no
streams to race): the path is exercised, overlap is not measured.

**Trust boundary.** This process never executes code from a candidate's file, nor touches
the device: every run (the starter's too) happens in a fresh child of the fork server
``runner.gpu.worker``, which sends back what it saw (``runner.gpu.host`` decodes it as
untrusted input). The verdict, the checks and the clock live here. The timed interval of
a trial is measured here, from the ``go`` sent to the child to its answer, which must
commit to the trained weights (see runner/gpu/worker.py); the child's own CUDA-event time
is kept only as a cross-check. What the child reports about *how* it trained (the
recorder: steps, validation records, host syncs, the timeline) is forgeable: only the
returned weights, losses and stop epoch, compared here with the starter's, and the time
measured here are tamper-proof.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from runner import forkserver
from runner.exercise import GpuExercise
from runner.gpu import host, timing
from runner.gpu.host import COMMIT_FRAME, SMALL_FRAME, RunBroke, RunProcess, RunRecord
from runner.harness import (
    DEFAULT_WATCHDOG,
    Failure,
    InternalError,
    Program,
    syntax_result,
)
from runner.result import Check, empty_metrics, make_result

MAX_LINES_LISTED = 5
NOISY_SPREAD = 0.10  # interquartile range of the speedup above 10% of it: warn
CLOCK = "perf_counter"  # the grader's clock around each request to a run process
SETUP_S = 300.0  # real seconds a run process may take to start (CUDA, data, warm-up)
TRUSTED_RUN_S = 600.0  # real seconds one run of the starter may take
CROSS_CHECK_SLACK = 0.005  # seconds a child's own time may exceed the grader's


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

    phase: str  # reference | trajectory | checked | warmup | trial
    index: int | None
    config: Any
    recorder: RunRecord  # as the run process reported it (forgeable)
    returned: Any = None  # host values; tensors copied to the host
    failure: Failure | None = None
    seconds: float | None = None  # measured by the grader: go -> committed answer
    device_seconds: float | None = None  # the run process's own clock (a cross-check)
    syncs: list[tuple[int, int, str]] = field(default_factory=list)  # (line, steps so far, text)
    precision_changed: bool = False
    trace: dict | None = None
    stdout: str = ""
    stderr: str = ""

    def where(self) -> str:
        if self.phase in ("warmup", "trial"):
            return f"the {self.phase} run {self.index + 1}"
        return f"the {self.phase} run"


def cuda_available() -> bool:
    return torch.cuda.is_available()


def needs_gpu_result(exercise: GpuExercise, reason: str) -> dict:
    metrics = empty_metrics()
    metrics.update(clock=CLOCK, device=None, target_overlap=exercise.target_overlap)
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


class _Harness:
    """Runs programs, each in a fresh run process, and reads back what they did."""

    def __init__(self, exercise: GpuExercise, device: torch.device, config) -> None:
        self.exercise = exercise
        self.device = device
        self.config = config
        self.cuda = device.type == "cuda"
        self.clock = timing.Clock("cpu")  # this process's clock: it never touches the device
        self.run_timeout: float | None = None
        self.tensor_bytes: int | None = None  # set from the reference
        self.sampled: list[tuple] | None = None  # shapes of a validation's weights, sent back
        self.max_validations = 1024
        self.device_name = "cpu"

    def new_run(self, phase, index=None, *, config=None) -> GpuRun:
        return GpuRun(phase, index, config or self.config, RunRecord(self.device))

    def prepare(self, program: Program, run: GpuRun, *, trusted: bool = False, **options):
        """Start a run process and let it get ready (untimed); return the thunk that
        trains (the timed part: go, then the committed answer). Failures land in
        ``run.failure``; the thunk returns ``run`` either way."""
        spec = {
            "kind": "run",
            "code": program.path,
            "display": program.display,
            "device": str(self.device),
            "phase": run.phase,
            "warm": True,
            "no_early_stop": bool(options.get("no_early_stop")),
            "traced": bool(options.get("traced")),
            "watch": bool(options.get("watch")),
            "output": bool(options.get("output")),
            "amplify": options.get("amplify"),
        }
        seconds = TRUSTED_RUN_S if trusted or self.run_timeout is None else self.run_timeout
        cpu_s = int((SETUP_S + seconds) * (os.cpu_count() or 1)) + 60
        try:
            process = RunProcess(self.exercise.directory, spec, cpu_s=cpu_s)
        except forkserver.ServerGone:
            if trusted:
                raise InternalError(f"the fork server of {self.exercise.slug} stopped") from None
            # An earlier run of this program stopped or killed the server.
            run.failure = Failure("runtime_error", forkserver.SERVER_GONE)
            return lambda: run
        run.process = process
        try:
            process.receive(SETUP_S, SMALL_FRAME, ("ready",))
        except RunBroke as broke:
            process.close()
            message = f"a run process of {self.exercise.slug} did not start: {broke}"
            raise InternalError(message) from None

        def train() -> GpuRun:
            if run.failure is not None:
                return run
            try:
                process.go()
                run.answer = process.receive(seconds, COMMIT_FRAME, ("trained", "failed"))
            except RunBroke as broke:
                self._broke(run, broke, seconds)
            return run

        return train

    def collect(self, run: GpuRun) -> GpuRun:
        """After the timed part: the run's full report, checked; its process reaped."""
        process = run.__dict__.pop("process", None)
        answer = run.__dict__.pop("answer", None)
        try:
            if run.failure is not None or process is None:
                return run
            if answer["op"] == "failed":
                verdict, message, trace, line = host.decode_failure(answer)
                run.stdout, run.stderr = host.output_of(answer)
                run.failure = Failure(verdict, message, trace, line)
                return run
            frame = 16 << 20
            if self.tensor_bytes is not None:
                sampled = sum(8 * math.prod(s) for s in self.sampled or [(1,)])
                frame += 2 * self.tensor_bytes + 2 * self.max_validations * sampled
            else:
                frame = 1 << 30  # the starter's runs (ours) set the sizes
            message = process.receive(TRUSTED_RUN_S, frame, ("report",))
            report = host.decode_report(
                message,
                answer.get("commit"),
                process.seed,
                tensor_bytes=self.tensor_bytes or (1 << 31),
                sampled=self.sampled,
            )
            if len(report.validations) > self.max_validations:
                raise RunBroke("protocol", "more validation records than any run makes")
            run.returned = report.returned
            run.device_seconds = report.seconds
            run.recorder.steps = report.steps
            run.recorder.validations = report.validations
            run.syncs = report.syncs
            run.precision_changed = report.precision_changed
            run.trace = report.trace
            run.stdout, run.stderr = report.stdout, report.stderr
            # Held against what the grader measured itself (a scripted clock, in tests,
            # measures nothing to compare with).
            measured = self.clock.kind == "perf_counter" and run.seconds is not None
            if measured and report.seconds > run.seconds + CROSS_CHECK_SLACK:
                raise RunBroke(
                    "protocol",
                    f"it claims {report.seconds:.4f} s of training, but answered after "
                    f"{run.seconds:.4f} s",
                )
        except RunBroke as broke:
            self._broke(run, broke, TRUSTED_RUN_S)
        finally:
            if process is not None:
                status = process.close()
                if run.failure is not None and run.failure.message.endswith("reported"):
                    run.failure.message += _status_note(status)
        return run

    def _broke(self, run: GpuRun, broke: RunBroke, seconds: float) -> None:
        if broke.why == "timeout":
            run.failure = Failure("timeout", f"Stopped after {seconds:.0f} s of real time.")
        elif broke.why == "died":
            run.failure = Failure("runtime_error", "The program's process ended before it reported")
        else:
            run.failure = Failure(
                "runtime_error", f"The program broke the grader's protocol: {broke}."
            )

    def run_once(self, program: Program, run: GpuRun, **options) -> GpuRun:
        """Prepare, train (timed by this process's clock) and collect one run."""
        seconds, _ = self.clock.time(self.prepare(program, run, **options))
        if run.failure is None:
            run.seconds = seconds
        return self.collect(run)

    def components(self) -> dict[str, timing.Spread]:
        """Each component of the work timed alone, in a run process that runs only the
        exercise's own code (so its device clock is trusted)."""
        trials = self.exercise.component_trials
        spec = {"kind": "components", "device": str(self.device)}
        process = RunProcess(self.exercise.directory, spec, cpu_s=100_000)
        try:
            process.receive(SETUP_S, SMALL_FRAME, ("ready",))
            process.go()
            message = process.receive(TRUSTED_RUN_S, SMALL_FRAME, ("components",))
            seconds, self.device_name = host.decode_components(message, trials)
        except RunBroke as broke:
            message = f"timing the components of {self.exercise.slug}: {broke}"
            raise InternalError(message) from None
        finally:
            process.close()
        return {name: timing.Spread.of(values) for name, values in seconds.items()}


def _status_note(status: dict) -> str:
    if status.get("signal"):
        return f" (killed by signal {status['signal']})."
    if status.get("exit") is not None:
        return f" (exit status {status['exit']})."
    return "."


def _sampled_shapes(run: GpuRun) -> list[tuple] | None:
    if not run.recorder.validations:
        return None
    return [tuple(w.shape) for w in run.recorder.validations[0].weights]


def _tensor_bytes(value) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * 8
    if isinstance(value, list | tuple):
        return sum(_tensor_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_tensor_bytes(v) for v in value.values())
    return 0


# -- grading -------------------------------------------------------------------------


def grade(
    exercise: GpuExercise,
    code_path: str | Path,
    *,
    trials: int | None = None,
    device: str | None = None,
    watchdog_seconds: float | None = DEFAULT_WATCHDOG,
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
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", 0)  # the run processes set it; this one never does
    return _grade(exercise, program, device, trials, watchdog_seconds)


def _grade(exercise, program, device, trials, watchdog_seconds) -> dict:
    cuda = device.type == "cuda"
    harness = _Harness(exercise, device, exercise.config if cuda else exercise.cpu_config)
    starter = Program.from_file(exercise.starter)

    # 3. the reference (the starter is ours: it must work), each run in its own process
    base_run = harness.run_once(starter, harness.new_run("reference"), trusted=True)
    trajectory = harness.run_once(
        starter,
        harness.new_run("trajectory", config=exercise.no_early_stop(harness.config)),
        trusted=True,
        no_early_stop=True,
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
        watchdog_seconds or DEFAULT_WATCHDOG, exercise.time_limit_factor * base_run.seconds
    )
    harness.tensor_bytes = 2 * _tensor_bytes(base_run.returned) + (1 << 20)
    harness.sampled = _sampled_shapes(trajectory)
    harness.max_validations = 4 * len(trajectory.recorder.validations) + 8

    # 4. the checked run
    per_epoch = getattr(reference, "batches_per_epoch", 1)
    amplify = _amplifier(trajectory, per_epoch) if cuda else None
    checked = harness.new_run("checked")
    harness.run_once(program, checked, watch=True, output=True, amplify=amplify)
    out, err = checked.stdout, checked.stderr
    if checked.failure is not None:
        return _failure_result(exercise, checked, out, err, harness)
    checks = _run_checks(exercise, checked, reference)
    checks.append(_host_sync_check(checked, program))
    if any(c.failed for c in checks):
        return _verdict(exercise, checks, None, harness, out, err, runs=1)

    # 5. timing
    components = harness.components()
    required = exercise.work(base_run)
    problems: list[str] = []
    traces: dict[str, dict | None] = {}
    device_times: list[float] = []
    runs = [1]

    def prepare_side(source: Program):
        trusted = source is starter

        def prepare(phase: str, index: int):
            run = harness.new_run(phase, index)
            if not trusted:
                runs[0] += 1
            return harness.prepare(source, run, trusted=trusted, traced=phase == timing.WARMUP)

        return prepare

    def after(label: str, phase: str, index: int, run: GpuRun) -> None:
        harness.collect(run)
        if label == timing.BASELINE and run.failure is not None:
            raise InternalError(
                f"the starter failed in {run.where()} of the timing: {run.failure.message}"
            )
        if run.failure is not None:
            raise _RunFailed(run)
        if phase == timing.WARMUP:
            traces[label] = run.trace
        found = _run_checks(exercise, run, reference)
        if label == timing.BASELINE:
            _expect_pass(exercise, found, f"the starter ({run.where()})")
            return
        if phase == timing.TRIAL and run.device_seconds is not None:
            device_times.append(run.device_seconds)
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
        shortfall = timing.less_work(exercise.work(run), required)
        if shortfall:
            problems.append(f"In {run.where()}: {shortfall} Work was skipped.")

    try:
        comparison = timing.compare(
            prepare_side(starter),
            prepare_side(program),
            clock=harness.clock,
            trials=trials or exercise.trials,
            warmups=exercise.warmups,
            after=after,
        )
    except _RunFailed as exc:
        return _failure_result(exercise, exc.run, out, err, harness)
    except _TrialWrong as exc:
        checks = [*exc.checks, checks[-1]]
        return _verdict(exercise, checks, None, harness, out, err, runs=runs[0])
    if checked.precision_changed:
        problems.insert(0, "The program changed the float32 matmul precision (TF32).")

    # 6. what the numbers mean
    # The fastest of each component's trials: no correct program can beat the bound by
    # the luck of one slow component measurement.
    fastest = {name: s.low for name, s in components.items()}
    best = exercise.best_time(reference, fastest)
    serial = exercise.serial_time(reference, fastest) if exercise.serial_time else None
    timed = _Timing(exercise, comparison, components, best, device_times, serial)
    implausible = timing.implausible_speedup(
        timed.speedup.median, timed.bound, exercise.bound_margin
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
    checks.append(_spread_check(timed))
    if cuda and timed.bound < exercise.min_bound * timed.zero:  # a CPU run: the path only
        raise InternalError(
            f"this device cannot grade {exercise.slug}: the best possible speedup is only "
            f"{timed.bound:.2f}x, and {timed.zero:.2f}x of it comes without any overlap "
            "(the same work with no host waits): what overlap can hide here is within "
            "measurement noise. The exercise's sizes need calibrating for this device "
            "(python -m runner.gpu.calibrate probe)."
        )
    trace = {"baseline": traces.get("baseline"), "candidate": traces.get("candidate")}
    return _verdict(exercise, checks, timed, harness, out, err, runs=runs[0], trace=trace)


def _amplifier(trajectory: GpuRun, batches_per_epoch: int) -> dict:
    """What the checked run's process needs to scale its race-widening sleeps to this
    GPU's speed (from the starter's trajectory run): a quarter of an optimizer step's
    share of an epoch before each step, two epochs' worth at the start of each
    validation on a side stream, two batches' worth before each copy of a host batch or
    each forward pass (runner/gpu/kit.py)."""
    epochs = max(1, len(trajectory.recorder.validations))
    per_epoch = (trajectory.seconds or 0.0) / epochs
    per_step = per_epoch / max(1, trajectory.recorder.steps // epochs)
    per_batch = per_epoch / max(1, batches_per_epoch)
    return {"per_step": per_step, "per_epoch": per_epoch, "per_batch": per_batch}


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
    comparison: timing.Comparison
    components: dict[str, timing.Spread]
    best: float
    device_times: list[float] = field(default_factory=list)
    serial: float | None = None  # the same work with no overlap and no host waits

    @property
    def speedup(self) -> timing.Spread:
        return self.comparison.speedup

    @property
    def bound(self) -> float:
        return timing.bound_speedup(self.comparison.baseline_spread.median, self.best)

    @property
    def zero(self) -> float:
        """The speedup that hides nothing: 1.0 (the baseline), or the serial time's when it
        is shorter (the baseline also waits on the host), never above the bound."""
        if not self.serial:
            return 1.0
        zero = self.comparison.baseline_spread.median / self.serial
        return min(max(1.0, zero), self.bound)

    @property
    def target(self) -> float:
        return timing.target_for(self.bound, self.exercise.target_overlap, self.zero)

    @property
    def overlap(self) -> float | None:
        return timing.overlap_fraction(self.speedup.median, self.bound, self.zero)


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
        device=harness.device_name if harness.cuda else "cpu",
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
        # each component's fastest trial (what best_time uses) and its spread
        components={name: round(s.low, 6) for name, s in timing.components.items()},
        component_spread={name: s.to_json() for name, s in timing.components.items()},
        best_time=round(timing.best, 6),
        # the same work with no overlap and no host waits: where overlap starts counting
        serial_time=None if timing.serial is None else round(timing.serial, 6),
        zero_speedup=round(timing.zero, 4),
        # the candidate's own clock around train(), as its process reported it: a
        # cross-check only (never above the grader's time, or the run is refused)
        device_times=[round(t, 6) for t in timing.device_times[:1000]],
    )
    return metrics


def copies_hidden(trace: dict | None) -> float | None:
    """The share of a timeline's copy time that ran while another stream computed (a
    ``train`` or ``validate`` span on another lane): how much of the copying overlap
    really hid. None when the timeline has no copies. Read from the run's own marks
    (CUDA events), so it illustrates; the verdict rests on the grader's clock."""
    spans = (trace or {}).get("spans") or []
    copies = [s for s in spans if s.get("op") == "copy"]
    if not copies:
        return None
    work = [s for s in spans if s.get("op") in ("train", "validate")]
    total = hidden = 0.0
    for copy in copies:
        start, end = float(copy["start"]), float(copy["end"])
        total += max(0.0, end - start)
        beside = sorted(
            (max(start, float(w["start"])), min(end, float(w["end"])))
            for w in work
            if w.get("lane") != copy.get("lane") and float(w["start"]) < end
            and start < float(w["end"])
        )
        reached = start
        for low, high in beside:  # the union of the overlapping pieces
            low = max(low, reached)
            if high > low:
                hidden += high - low
                reached = high
    return round(hidden / total, 4) if total > 0 else None


def _with_copies_hidden(metrics: dict, trace: dict | None) -> dict:
    if trace and (trace.get("baseline") or trace.get("candidate")):
        metrics["copies_hidden"] = {
            side: copies_hidden(trace.get(side)) for side in ("baseline", "candidate")
        }
    return metrics


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
        if timing.zero > 1.0:
            message += (
                f" The same work with no overlap, only the host's waits removed, gives "
                f"about {timing.zero:.2f}x: the device's own work has to overlap."
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
        metrics=_with_copies_hidden(_metrics(exercise, harness, timing, runs), trace),
        trace=trace,
        stdout=out,
        stderr=err,
    )


def _failure_result(exercise, run: GpuRun, out, err, harness) -> dict:
    failure = run.failure
    if failure.verdict == "timeout":
        return _timeout_result(exercise, harness, out, err)
    message = failure.message
    if run.phase != "checked":
        message += f" (This happened in {run.where()} of the timing.)"
    error = None
    if failure.verdict == "runtime_error":
        error = {
            "type": "exception",
            "line": failure.line,
            "traceback": failure.traceback or failure.message,
        }
    return make_result(
        exercise=exercise.slug,
        verdict=failure.verdict,
        message=message,
        metrics=_metrics(exercise, harness, None, 1),
        stdout=out,
        stderr=err,
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
        stdout=out,
        stderr=err,
    )
