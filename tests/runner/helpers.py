"""Helpers for the runner's tests: graded results are cached per session."""

import functools
import os
import subprocess
import sys
import warnings
from pathlib import Path

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

from runner.sim import grading  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXERCISES = REPO / "exercises"
SLUGS = [
    "async-gradient-accumulation",
    "pipeline-model-parallel",
    "async-parameter-server",
    "straggler-backup-workers",
    "nonblocking-checkpointing",
    "input-pipeline-prefetch",
    "ring-allreduce-overlap",
]
TINY = Path(__file__).resolve().parent / "fixtures" / "tiny"


@functools.cache
def graded(exercise: str, path: str, seeds: int | None = None) -> dict:
    """Grade in-process (the same function the CLI calls); cached for the session."""
    return grading.grade(exercise, path, seeds=seeds)


def run_cli(*args: str, timeout: float = 120, env: dict | None = None):
    """``python -m runner ...`` in a fresh interpreter, as the sandbox calls it."""
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def solution_source(slug: str) -> str:
    return (EXERCISES / slug / "solution.py").read_text()


def failing(result: dict) -> list[str]:
    return sorted(c["name"] for c in result["checks"] if c["status"] == "fail")


def check(result: dict, name: str) -> dict:
    return next(c for c in result["checks"] if c["name"] == name)
