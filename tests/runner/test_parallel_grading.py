"""A grading spread over two CPUs gives the document a serial grading gives, sooner.

The helper grader (runner.sim.parallel) makes every other run of the plan on the other CPU.
Whatever it finds — a failure on a seed only it ran, checks that fail on its runs — must
come out exactly as when one process makes every run; and a helper that dies costs time,
not the verdict."""

import os
from pathlib import Path

import pytest

from runner.contract import Check
from runner.harness import Failure
from runner.sim import grading, host, parallel

EXERCISES = Path(__file__).resolve().parents[2] / "exercises"
PS = EXERCISES / "async-parameter-server"
GA = EXERCISES / "async-gradient-accumulation"

two_cpus = pytest.mark.skipif(
    len(parallel.grading_cpus()) < 2, reason="needs two CPUs a grading may use"
)


def _grade(monkeypatch, processes: int, exercise: Path, code: Path) -> dict:
    monkeypatch.setenv("OVERLAP_GRADING_PROCESSES", str(processes))
    return grading.grade(exercise, code)


@two_cpus
@pytest.mark.parametrize(
    ("exercise", "example"),
    [
        (PS, "solution.py"),  # accepted: every run's checks, merged in plan order
        (PS, "examples/no_lock.py"),  # wrong on seeded runs
        (GA, "examples/race_no_lock.py"),  # a race only some seeds show
        (GA, "examples/untracked_task.py"),  # a task left running
        (PS, "examples/worker_exception.py"),  # a runtime error on the first run
    ],
)
def test_two_processes_give_the_serial_document(monkeypatch, exercise, example):
    code = exercise / example
    if not code.exists():
        pytest.skip(f"{example} is not in this gallery")
    serial = _grade(monkeypatch, 1, exercise, code)
    spread = _grade(monkeypatch, 2, exercise, code)
    assert spread == serial


def _plan(failing: set[int], count: int = 12):
    def run(index):
        return {"index": index, "pid": os.getpid(), "failed": index in failing}

    def report(index, made):
        return parallel.Report(
            index,
            checks=[Check.ok("made_by", str(made["pid"]))],
            failure=None if not made["failed"] else Failure("wrong", "failed"),
        )

    return count, run, report, lambda made: made["failed"]


@two_cpus
def test_the_helper_makes_the_odd_runs_in_another_process():
    local, remote = parallel.run_plan(*_plan(set()))
    assert sorted(local) == list(range(0, 12, 2))
    assert sorted(remote) == list(range(1, 12, 2))
    assert {made["pid"] for made in local.values()} == {os.getpid()}
    helpers = {report.checks[0].message for report in remote.values()}
    assert len(helpers) == 1 and helpers != {str(os.getpid())}


@two_cpus
@pytest.mark.parametrize("failing", [{5}, {4}, {4, 5}, {1, 10}])
def test_every_run_before_the_first_failure_is_made(failing):
    local, remote = parallel.run_plan(*_plan(failing))
    first = min(failing)
    made = set(local) | set(remote)
    assert set(range(first + 1)) <= made
    failed = [i for i, m in local.items() if m["failed"]]
    failed += [i for i, r in remote.items() if r.failure is not None]
    assert min(failed) == first


@two_cpus
def test_a_helper_that_dies_costs_time_not_runs():
    parent = os.getpid()

    def run(index):
        if os.getpid() != parent:
            os._exit(9)  # the helper dies on its first run
        return {"index": index, "failed": False}

    local, remote = parallel.run_plan(
        8, run, lambda i, m: parallel.Report(i), lambda made: made["failed"]
    )
    assert remote == {} and sorted(local) == list(range(8))


def test_one_process_when_asked(monkeypatch):
    monkeypatch.setenv("OVERLAP_GRADING_PROCESSES", "1")
    assert len(parallel.grading_cpus()) <= 1
    before = dict(host.STATS)
    local, remote = parallel.run_plan(*_plan(set(), count=6))
    assert remote == {} and sorted(local) == list(range(6))
    assert dict(host.STATS) == before
