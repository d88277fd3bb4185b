"""Which grading track an exercise takes: simulated (``grading``) or GPU (``gpu.grading``)."""

from __future__ import annotations

from pathlib import Path

from runner.exercise import load
from runner.harness import DEFAULT_WATCHDOG


def grade(
    exercise_ref: str | Path,
    code_path: str | Path,
    *,
    seeds: int | None = None,
    replay_seed: int | None = None,
    watchdog_seconds: float | None = None,
    trials: int | None = None,
    device: str | None = None,
) -> dict:
    """Grade one code file; the result follows ``runner.contract``."""
    exercise = load(exercise_ref)
    if exercise.track == "gpu":
        from runner.gpu import grading as gpu

        return gpu.grade(
            exercise,
            code_path,
            trials=trials,
            device=device,
            watchdog_seconds=watchdog_seconds or DEFAULT_WATCHDOG,
        )
    from runner.sim import grading

    return grading.grade(
        exercise.directory,
        code_path,
        seeds=seeds,
        replay_seed=replay_seed,
        watchdog_seconds=watchdog_seconds,
    )


def internal_error_result(exercise: str, message: str) -> dict:
    from runner.contract import make_result

    return make_result(exercise=exercise, verdict="internal_error", message=message)
