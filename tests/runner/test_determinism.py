"""The same code always gets the same verdict, speedup and checks."""

import json

from runner import grading
from tests.runner.helpers import EXERCISES, run_cli


def _essentials(result: dict):
    return (
        result["verdict"],
        result["metrics"]["speedup"],
        result["metrics"]["candidate_time"],
        [(c["name"], c["status"], c["seed"], c["message"]) for c in result["checks"]],
    )


def test_grading_twenty_times_gives_identical_results():
    path = EXERCISES / "async-gradient-accumulation" / "examples" / "race_no_lock.py"
    first = grading.grade("async-gradient-accumulation", path, seeds=3)
    for _ in range(19):
        again = grading.grade("async-gradient-accumulation", path, seeds=3)
        assert _essentials(again) == _essentials(first)
        assert again["trace"] == first["trace"]


def test_separate_processes_agree_byte_for_byte():
    path = str(EXERCISES / "pipeline-model-parallel" / "examples" / "stage_workers.py")
    outputs = [run_cli("grade", "pipeline-model-parallel", path).stdout for _ in range(2)]
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0])["verdict"] == "accepted"


def test_shuffles_really_change_the_schedule():
    # Different seeds must produce different interleavings, or they would find nothing.
    from runner.exercise import load

    exercise = load("async-parameter-server")
    program = grading.Program.from_file(exercise.directory / "examples" / "no_lock.py")
    orders = set()
    for seed in (None, 1, 2, 3):
        run = grading.run_program(exercise, program, exercise.timed, seed, time_limit=100)
        orders.add(tuple(push.batch for push in run.cluster.server.pushes))
    assert len(orders) > 1
