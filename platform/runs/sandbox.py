"""The worker's side of a run: write the pinned exercise version to disk, grade in a sandbox."""

import logging
import tempfile
from pathlib import Path, PurePosixPath

from django.conf import settings

log = logging.getLogger(__name__)


class SandboxFailure(Exception):
    """The platform could not grade the run (no sandbox, broken result): not the candidate's
    fault, so it becomes an internal error, never a verdict against them."""


def materialize(version, target: Path) -> Path:
    """Write the version's code files (grader, starter, solution, examples) under target."""
    for name, text in version.files.items():
        relative = PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts:
            raise SandboxFailure(f"unsafe file name in exercise version: {name!r}")
        path = target.joinpath(*relative.parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return target


# A real model on a real GPU needs more than the simulated exercises' defaults.
GPU_LIMITS = {"wall_s": 180, "stall_s": 60, "memory_mib": 8192, "disk_mib": 256,
              "processes": 128}


def grade_in_sandbox(*, version, code: str) -> dict:
    from runner import sandbox

    with tempfile.TemporaryDirectory(prefix="overlap-exercise-") as tmp:
        exercise_dir = materialize(version, Path(tmp) / version.exercise.slug)
        try:
            result = sandbox.grade(
                exercise_dir,
                code,
                backend=settings.OVERLAP_SANDBOX,
                seeds=settings.OVERLAP_GRADE_SEEDS,
                limits=GPU_LIMITS if version.track == "gpu" else None,
                gpu=settings.OVERLAP_GPU or None,
            )
        except sandbox.SandboxUnavailable as exc:
            raise SandboxFailure(str(exc)) from exc
    return checked_result(result)


def checked_result(result) -> dict:
    """The result as the contract defines it (typed, bounded), or SandboxFailure: nothing
    malformed is ever stored, so no page that shows a run can break on one."""
    from runner.contract import ContractError, validate_result

    try:
        return validate_result(result)
    except ContractError as exc:
        raise SandboxFailure(f"the grading result broke the contract: {exc}") from exc


def sandbox_reap() -> int:
    """At worker start: remove containers and processes a killed worker left behind."""
    from runner import sandbox

    return sandbox.reap_leftovers()


def sandbox_pool_start() -> None:
    """In each worker process: keep a few sandboxes started, torch imported, so a run does
    not pay the start-up (on by default for docker; a docker sandbox serves up to
    OVERLAP_SANDBOX_JOBS runs, reset between them)."""
    from runner import sandbox

    try:
        sandbox.start_pool(settings.OVERLAP_SANDBOX, gpu=settings.OVERLAP_GPU or None)
    except sandbox.SandboxUnavailable as exc:
        log.warning("no warm sandbox pool: %s", exc)


def sandbox_pool_stop() -> None:
    from runner import sandbox

    sandbox.stop_pool()
