"""Grading a simulated exercise: the baseline and the candidate on the virtual clock.

One grading = the starter (baseline) once per scenario, then the candidate once per
scenario (the timed run gives the speedup), then again under N seeded variations: the
order of completions that fall due at the same instant, and a small jitter of every
operation's cost (``JITTER``). Every run is checked.

Every run — the baseline's too — runs the program in its own fresh process
(``runner.candidate``, forked from a light fork server, no torch) that sees the cluster
only through handles; the cluster, the clock, the trace and everything below live in
this process (``runner.sim.host``). See runner/README.md, "Trusted grading".
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from runner.contract import TRACE_LIMIT, Check, make_result
from runner.exercise import Exercise, Scenario, load
from runner.harness import DEFAULT_WATCHDOG, Failure, InternalError, Program, syntax_result
from runner.sim import host, parallel
from runner.sim.clock import VirtualLoop, to_seconds
from runner.sim.core import Sim

torch.set_num_threads(1)  # tensors are tiny; extra threads only add noise on a 2-core box
# What is imported by now (torch: ~170,000 objects) lives as long as the process. Keep
# the cyclic collector from scanning it in every full collection (~50 ms each, about one
# a grading); in a pooled sandbox this runs at preload, before the jobs are forked.
gc.freeze()

JITTER = 0.02  # seeded runs stretch each cost by up to 2%
MAX_TASKS_LISTED = 8
MEMORY_BYTES = 768 * 2**20  # address space of one candidate process

__all__ = ["DEFAULT_WATCHDOG", "InternalError", "grade", "internal_error_result"]


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
    polls: int = 0
    stdout: str = ""
    stderr: str = ""

    @property
    def trace(self):
        return self.sim.trace

    @property
    def makespan(self) -> float:
        return to_seconds(self.makespan_ticks)


def run_program(
    exercise: Exercise,
    source: str,
    scenario: Scenario,
    seed: int | None,
    *,
    time_limit: float | None,
    display: str = "solution.py",
    cpu_s: int = host.CPU_S,
) -> Run:
    """Run a program's trainer once, in a fresh candidate process, on a fresh cluster."""
    loop = VirtualLoop(time_limit=time_limit, max_idle_iterations=None)
    loop.fast = True  # only kit operations run on the grader's loop
    sim = Sim(loop)
    if seed is not None:
        sim.set_jitter(seed, JITTER)
    run = Run(scenario, seed, sim)
    # The CPU generator only: torch.manual_seed also queues a seed for every CUDA device,
    # recording a stack trace each time while CUDA is not initialised (~0.7 ms a run).
    torch.default_generator.manual_seed(0)
    try:
        with sim:
            try:
                run.cluster = exercise.build(sim, scenario.config)
            except Exception as exc:
                message = f"building the {scenario.name} cluster failed: {exc!r}"
                raise InternalError(message) from exc
            outcome = host.run_candidate(
                sim,
                loop,
                run.cluster,
                source,
                (exercise.entry_class, exercise.entry_method),
                order_seed=seed,
                memory_bytes=MEMORY_BYTES,
                display=display,
                cpu_s=cpu_s,
            )
    finally:
        loop.dispose()
    run.returned = outcome.returned
    run.makespan_ticks = outcome.makespan_ticks
    run.leftover = outcome.leftover
    run.polls = outcome.polls
    run.stdout, run.stderr = outcome.stdout, outcome.stderr
    if outcome.failure is not None:
        verdict, message, error = outcome.failure
        if outcome.stuck is not None:
            message = _stuck_message(outcome, message)
        run.failure = Failure(
            verdict,
            message,
            (error or {}).get("traceback"),
            (error or {}).get("line"),
        )
    return run


def _takes(scenario: Scenario, seed: int | None) -> bool:
    """Whether a grading runs ``scenario`` under ``seed`` (its own count caps it)."""
    return seed is None or scenario.seeds is None or seed <= scenario.seeds


def _stuck_message(outcome: host.Outcome, message: str) -> str:
    at = f"at t={to_seconds(outcome.makespan_ticks):.3f} s (simulated)"
    if outcome.stuck == "deadlock":
        text = f"Deadlock {at}: {message}."
    elif outcome.stuck == "livelock":
        text = f"Livelock {at}: {message}."
    else:
        text = f"Time limit: {message} (the program would never finish in time)."
    if outcome.waiting:
        text += " Waiting: " + "; ".join(outcome.waiting[:MAX_TASKS_LISTED]) + "."
    return text


# -- baselines -----------------------------------------------------------------

_baselines: dict[tuple[Path, str], Run] = {}


def baseline_run(exercise: Exercise, scenario: Scenario) -> Run:
    """The starter's run of a scenario (deterministic, so computed once per process)."""
    key = (exercise.directory, scenario.name)
    if key not in _baselines:
        source = exercise.starter.read_text()
        run = run_program(exercise, source, scenario, None, time_limit=None)
        if run.failure is not None:
            raise InternalError(
                f"the starter of {exercise.slug} fails on {scenario.name}: {run.failure.message}"
            )
        _baselines[key] = run
    return _baselines[key]


_bounds: dict[int, float] = {}


def _bound(exercise: Exercise, base: Run) -> float:
    """The exercise's bound for its timed baseline (computed once, like the baseline)."""
    if id(base) not in _bounds:
        _bounds[id(base)] = exercise.bound(base)
    return _bounds[id(base)]


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
                f"The speedup {speedup:.2f}x is above the theoretical bound {bound:.2f}x, "
                "the best any correct schedule of this work reaches: operations that must "
                "wait for one another ran at once (a race another check may name), so this "
                "time says nothing about the design.",
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
    if run.polls:
        checks.append(
            Check.warn(
                "polling",
                f"The program polled {run.polls} times (`await asyncio.sleep(0)` in a loop "
                "while others worked): it works, but awaiting what you wait for (an Event, "
                "a Condition, the task itself) wakes you exactly when it is ready.",
            )
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
    watchdog_seconds: float | None = None,
    **_ignored,
) -> dict:
    """Grade one code file against one simulated exercise (the result: runner.contract).

    ``watchdog_seconds``: CPU seconds one run of the candidate's process may use (default
    ``host.CPU_S``): CPU time, not real time, so a busy host never changes a verdict.
    GPU exercises are graded by ``runner.gpu.grading``; ``runner.tracks.grade`` picks."""
    exercise = load(exercise_ref)
    if exercise.track != "simulated":
        raise InternalError(f"{exercise.slug} is a {exercise.track} exercise: use runner.tracks")
    try:
        program = Program.from_file(code_path)  # compiled only, to report syntax errors
    except SyntaxError as exc:
        return syntax_result(exercise, exc, Path(code_path).name)
    except OSError as exc:
        raise InternalError(f"cannot read {code_path}: {exc}") from exc
    source = Path(code_path).read_text(encoding="utf-8")
    del program

    baselines = {s.name: baseline_run(exercise, s) for s in exercise.scenarios}
    timed = exercise.timed
    base = baselines[timed.name]
    bound = _bound(exercise, base)
    seed_count = exercise.seeds if seeds is None else seeds
    first_seed = None
    if replay_seed is not None:
        first_seed, seed_count = replay_seed, 0
    ordered = [timed] + [s for s in exercise.scenarios if not s.timed]
    # A replayed seed runs where the grading that named it ran it; a scenario whose own
    # count stops below it gets its plain run, as it did then.
    plan = [(s, first_seed if _takes(s, first_seed) else None) for s in ordered] + [
        (s, seed)
        for seed in range(1, seed_count + 1)
        for s in ordered
        if _takes(s, seed)
    ]

    def make(index: int) -> Run:
        scenario, seed = plan[index]
        return run_program(
            exercise,
            source,
            scenario,
            seed,
            time_limit=_time_limit(exercise, baselines[scenario.name]),
            display=Path(code_path).name,
            cpu_s=max(1, math.ceil(watchdog_seconds)) if watchdog_seconds else host.CPU_S,
        )

    local, remote = parallel.run_plan(
        len(plan),
        make,
        lambda index, run: _report(exercise, baselines, index, run),
        _failed,
    )
    timed_run = local[0]
    out, err = timed_run.stdout, timed_run.stderr
    first = parallel.first_failure(local, remote, _failed)
    if first is not None:
        scenario, seed = plan[first]
        if first in local:
            failure, trace = local[first].failure, _trace_json(local[first])
        else:
            failure, trace = remote[first].failure, remote[first].trace
        return _failure_result(
            exercise, failure, scenario, seed, trace, base, out, err, bound, first + 1
        )
    reports = {i: _report(exercise, baselines, i, run) for i, run in local.items()}
    reports.update(remote)
    if sorted(reports) != list(range(len(plan))):
        raise InternalError("a run of the grading's plan is missing")
    crashed = [reports[i].checks_error for i in sorted(reports) if reports[i].checks_error]
    if crashed:
        raise InternalError(crashed[0])
    check_lists = [reports[i].checks for i in range(len(plan))]
    advice = _advice_checks(exercise, timed_run, base, bound)
    checks = _merge([*check_lists, advice])
    speedup = base.makespan / timed_run.makespan if timed_run.makespan else float("inf")
    metrics = _metrics(exercise, base, timed_run, bound, seed_count, len(plan))
    slowest = _slowest_seeded(plan, reports, timed, base)
    if slowest is not None:
        metrics["slowest_seeded_speedup"] = round(slowest[0], 4)
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
            f"Correct on {len(plan)} runs, but too slow: {speedup:.2f}x faster than the "
            f"baseline; the target is {exercise.target_speedup:.2f}x."
        )
        warned = [c for c in checks if c.status == "warn"]
        if warned:
            message += " " + warned[0].message
    elif slowest is not None and slowest[0] < exercise.target_speedup * (1 - JITTER) - 1e-9:
        verdict = "too_slow"
        message = (
            f"Correct on {len(plan)} runs, but the speedup does not hold: {speedup:.2f}x in "
            f"the timed run, {slowest[0]:.2f}x in the run with seed {slowest[1]} (whose "
            f"costs vary by up to {JITTER:.0%}); every run must reach the target, "
            f"{exercise.target_speedup:.2f}x."
        )
    else:
        verdict = "accepted"
        message = (
            f"All {len(checks)} checks passed on {len(plan)} runs; {speedup:.2f}x faster than "
            f"the baseline (target {exercise.target_speedup:.2f}x, bound {bound:.2f}x)."
        )
    return make_result(
        exercise=exercise.slug,
        verdict=verdict,
        message=message,
        checks=checks,
        metrics=metrics,
        trace={"baseline": _trace_json(base), "candidate": _trace_json(timed_run)},
        stdout=out,
        stderr=err,
    )


def _slowest_seeded(plan, reports, timed: Scenario, base: Run) -> tuple[float, int] | None:
    """(speedup, seed) of the slowest seeded run of the timed scenario, if any.

    The timed run has no jitter and FIFO order; if only it reached the target, a program
    that can tell it apart (one operation's exact cost is enough) could take a racy
    shortcut there and the safe, slow path in every run the checks see. So the target
    holds for every run of the timed scenario, give or take the jitter."""
    slowest = None
    for index, (scenario, seed) in enumerate(plan):
        makespan = reports[index].makespan
        if scenario is not timed or seed is None or not makespan:
            continue
        speedup = base.makespan / makespan
        if slowest is None or speedup < slowest[0]:
            slowest = (speedup, seed)
    return slowest


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


def _failed(run: Run) -> bool:
    return run.failure is not None


def _report(exercise: Exercise, baselines: dict, index: int, run: Run) -> parallel.Report:
    """What the result needs of one run: its failure and trace, or its checks."""
    if run.failure is not None:
        return parallel.Report(index, failure=run.failure, trace=_trace_json(run))
    try:
        checks = _run_checks(exercise, run, baselines[run.scenario.name])
    except InternalError as exc:
        return parallel.Report(index, checks_error=str(exc))
    return parallel.Report(index, checks=checks, makespan=run.makespan)


def _failure_result(
    exercise, failure: Failure, scenario: Scenario, seed, trace, base: Run, out, err, bound, runs
) -> dict:
    message = failure.message
    if seed is not None:
        message += (
            f" (This happened on shuffle seed {seed} of the '{scenario.name}' "
            f"scenario; replay it with --seed {seed}.)"
        )
    elif not scenario.timed:
        message += f" (In the '{scenario.name}' scenario.)"
    error = None
    if failure.verdict == "runtime_error":
        error = {"type": "exception", "line": failure.line, "traceback": failure.traceback}
    return make_result(
        exercise=exercise.slug,
        verdict=failure.verdict,
        message=message,
        metrics=_metrics(exercise, base, None, bound, 0, runs),
        trace={"baseline": _trace_json(base), "candidate": trace},
        stdout=out,
        stderr=err,
        error=error,
    )


def internal_error_result(exercise: str, message: str) -> dict:
    return make_result(exercise=exercise, verdict="internal_error", message=message)
