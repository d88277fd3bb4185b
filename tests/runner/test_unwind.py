"""A run that ends with kit operations still queued leaves nothing behind in the grader."""

import gc
import warnings

from runner.exercise import load
from runner.sim import grading


def test_operations_cancelled_before_they_start_leave_no_unawaited_coroutine():
    # Returns while a validation it started is still queued: the grader cancels it.
    exercise = load("async-gradient-accumulation")
    example = exercise.directory / "examples" / "leftover_validation.py"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = grading.grade(exercise.directory, example, seeds=0)
        gc.collect()
    assert result["verdict"] == "wrong"
    unawaited = [str(w.message) for w in caught if "never awaited" in str(w.message)]
    assert unawaited == []
