"""Running one job in a sandbox: choosing the backend, using the pool, building the result."""

import os
import time

from runner.sandbox.backends.base import Backend, SandboxUnavailable
from runner.sandbox.job import Job, grade_job, script_job
from runner.sandbox.limits import Limits
from runner.sandbox.result import RawRun, interpret

BACKENDS = ("docker", "bwrap", "process")
COLD_SLACK_S = 60.0  # starting a sandbox and importing torch, on top of the wall limit
POOLED_SLACK_S = 10.0
_instances: dict[str, Backend] = {}


def _forget_backends() -> None:
    # A forked process (a Celery pool process) must not share its parent's engine client:
    # two processes on one HTTP connection garble each other's requests, the engine then
    # looks unavailable and the process falls back to a backend without a warm pool.
    _instances.clear()


os.register_at_fork(after_in_child=_forget_backends)


def get_backend(name: str) -> Backend:
    if name not in _instances:
        if name == "docker":
            from runner.sandbox.backends.docker import DockerBackend

            _instances[name] = DockerBackend()
        elif name == "bwrap":
            from runner.sandbox.backends.bwrap import BwrapBackend

            _instances[name] = BwrapBackend()
        elif name == "process":
            from runner.sandbox.backends.process import ProcessBackend

            _instances[name] = ProcessBackend()
        else:
            raise ValueError(f"unknown sandbox backend {name!r} (one of {', '.join(BACKENDS)})")
    return _instances[name]


def backend_problems() -> dict[str, str | None]:
    """For each backend, None if it can run here, else why not."""
    return {name: get_backend(name).problem() for name in BACKENDS}


def unisolated_allowed() -> bool:
    return os.environ.get("OVERLAP_SANDBOX_ALLOW_PROCESS", "") in ("1", "true", "yes")


def choose_backend(requested: str = "auto", *, allow_unisolated: bool | None = None) -> Backend:
    """The backend for a run. `auto` takes docker, else bwrap, else (only when allowed)
    process; a backend named explicitly must be usable, or SandboxUnavailable says why."""
    if requested != "auto":
        backend = get_backend(requested)
        problem = backend.problem()
        if problem:
            raise SandboxUnavailable(f"sandbox '{requested}' cannot run here: {problem}")
        return backend
    if allow_unisolated is None:
        allow_unisolated = unisolated_allowed()
    reasons = []
    for name in ("docker", "bwrap"):
        problem = get_backend(name).problem()
        if problem is None:
            return get_backend(name)
        reasons.append(f"{name}: {problem}")
    if allow_unisolated:
        return get_backend("process")
    raise SandboxUnavailable(
        "no isolating sandbox is available ("
        + "; ".join(reasons)
        + "). Set OVERLAP_SANDBOX_ALLOW_PROCESS=1 to run code unisolated (local trial only)."
    )


def normalize_gpu(gpu) -> str | list[str] | None:
    """None (no GPU), "all", or a list of device ids."""
    if gpu in (None, False, "", "none"):
        return None
    if gpu is True or gpu == "all":
        return "all"
    if isinstance(gpu, str):
        gpu = gpu.split(",")
    return [str(g).strip() for g in gpu if str(g).strip()]


def execute(job: Job, backend: Backend, gpu=None) -> dict:
    """Run a job in a fresh (or pooled) sandbox of `backend`; always destroys it."""
    from runner.sandbox.pool import take_warm

    limits = job.limits
    started = time.monotonic()
    sandbox = take_warm(backend.name, limits, gpu)
    pooled = sandbox is not None
    if sandbox is None:
        sandbox = backend.start(limits, gpu)
    served_before = sandbox.served
    reuse = False
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
