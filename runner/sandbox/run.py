"""Running one job in a sandbox: using the pool, building the result.

Imports go one way: ``choice`` (which backend) <- ``pool`` (warm sandboxes) <- ``run``.
"""

import time

from runner.sandbox.backends.base import Backend, SandboxUnavailable
from runner.sandbox.choice import choose_backend, get_backend, normalize_gpu
from runner.sandbox.job import Job, grade_job, script_job
from runner.sandbox.limits import Limits
from runner.sandbox.pool import take_warm
from runner.sandbox.result import RawRun, interpret

COLD_SLACK_S = 60.0  # starting a sandbox and importing torch, on top of the wall limit
POOLED_SLACK_S = 10.0


def execute(job: Job, backend: Backend, gpu=None, on_sandbox=None) -> dict:
    """Run a job in a fresh (or pooled) sandbox of `backend`; always destroys it.
    `on_sandbox(sandbox)` is told which sandbox runs it (the daemon destroys it when the
    worker that asked hangs up)."""
    if getattr(backend, "runs_whole_jobs", False):
        return backend.execute(job, gpu)  # the sandbox daemon: it runs the job in its own
    limits = job.limits
    started = time.monotonic()
    sandbox = take_warm(backend.name, limits, gpu)
    pooled = sandbox is not None
    if sandbox is None:
        sandbox = backend.start(limits, gpu)
    served_before = sandbox.served
    reuse = False
    if on_sandbox is not None:
        on_sandbox(sandbox)
    try:
        sandbox.prepare(job)
        slack = POOLED_SLACK_S if pooled else COLD_SLACK_S
        raw = sandbox.run(job, time.monotonic() + limits.backstop_s + slack)
        reuse = sandbox.pool is not None and sandbox.serving
    except SandboxUnavailable:
        raise
    except Exception as exc:  # a broken engine connection, a vanished process
        raw = RawRun(error=f"{type(exc).__name__}: {exc}")
    finally:
        if reuse:
            sandbox.pool.give_back(sandbox)  # reset inside, ready for the next job
        else:
            sandbox.destroy()
            if sandbox.pool is not None:
                sandbox.pool.release()
    result, grading_s = interpret(raw, job.nonce, limits)
    result["sandbox"] = {
        "backend": backend.name,
        "isolated": backend.isolated,
        "pooled": pooled,
        "served_before": served_before,  # jobs this sandbox ran before this one
        "gpu": gpu,
        "limits": limits.as_dict(),
        "duration_s": round(time.monotonic() - started, 4),
        "grading_s": grading_s,
    }
    if not backend.isolated:
        from runner.sandbox.backends.process import WARNING

        result["sandbox"]["warning"] = WARNING
    return result


def grade(
    exercise_dir,
    code: str,
    *,
    seeds: int = 1,
    limits: Limits | dict | None = None,
    backend: str = "auto",
    gpu=None,
    allow_unisolated: bool | None = None,
) -> dict:
    """Grade candidate code against an exercise inside a sandbox.

    Runs `python -m runner grade <exercise> <code> --seeds N` in a sandbox of `backend`
    ("auto", "docker", "bwrap" or "process") and returns the validated result, with a
    `sandbox` section naming the backend that ran it. Raises SandboxUnavailable when the
    backend cannot run here; every other failure is a result (verdict sandbox_error).
    """
    limits = limits if isinstance(limits, Limits) else Limits.from_mapping(limits)
    chosen = choose_backend(backend, allow_unisolated=allow_unisolated)
    return execute(grade_job(exercise_dir, code, seeds, limits), chosen, normalize_gpu(gpu))


def run_script(
    code: str,
    *,
    limits: Limits | dict | None = None,
    backend: str = "auto",
    gpu=None,
    argv: list[str] | None = None,
    allow_unisolated: bool | None = None,
) -> dict:
    """Run a Python program that prints its own JSON result (the generic path)."""
    limits = limits if isinstance(limits, Limits) else Limits.from_mapping(limits)
    chosen = choose_backend(backend, allow_unisolated=allow_unisolated)
    return execute(script_job(code, limits, argv), chosen, normalize_gpu(gpu))


def reap_leftovers() -> int:
    """Remove what earlier runs of this owner left (containers, processes, cgroups,
    mounts), e.g. after a worker was killed mid-run. Call it once at worker start, before
    starting a pool. Returns how many leftovers were removed."""
    removed = 0
    if get_backend("docker").problem() is None or _docker_answers():
        removed += get_backend("docker").reap()
    removed += get_backend("bwrap").reap()  # bwrap and process share the run folders
    return removed


def _docker_answers() -> bool:
    try:
        get_backend("docker").client().ping()
    except Exception:
        return False
    return True
