"""Which sandbox backend runs a job: the backend instances (one per process), choosing
one, and the form of a GPU request. Both ``run`` and ``pool`` use it; it imports neither.
"""

import os

from runner.sandbox.backends.base import Backend, SandboxUnavailable

BACKENDS = ("daemon", "docker", "bwrap", "process")
# What `auto` tries, in order: the sandbox daemon (when its socket is there), the Docker
# engine itself, bubblewrap. The process backend isolates nothing.
ISOLATING = ("daemon", "docker", "bwrap")
_instances: dict[str, Backend] = {}


def _forget_backends() -> None:
    # A forked process (a Celery pool process) must not share its parent's engine client:
    # two processes on one HTTP connection garble each other's requests, the engine then
    # looks unavailable and the process falls back to a backend without a warm pool.
    _instances.clear()


os.register_at_fork(after_in_child=_forget_backends)


def get_backend(name: str) -> Backend:
    if name not in _instances:
        if name == "daemon":
            from runner.sandbox.backends.daemon import DaemonBackend

            _instances[name] = DaemonBackend()
        elif name == "docker":
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
    """The backend for a run. `auto` takes the sandbox daemon, else docker, else bwrap,
    else (only when allowed) process; a backend named explicitly must be usable, or
    SandboxUnavailable says why."""
    if requested != "auto":
        backend = get_backend(requested)
        problem = backend.problem()
        if problem:
            raise SandboxUnavailable(f"sandbox '{requested}' cannot run here: {problem}")
        return backend
    if allow_unisolated is None:
        allow_unisolated = unisolated_allowed()
    reasons = []
    for name in ISOLATING:
        if name == "daemon" and not _daemon_configured():
            continue  # no daemon on this machine: not a reason worth reporting
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


def _daemon_configured() -> bool:
    from runner.sandbox.backends.daemon import socket_path

    return bool(os.environ.get("OVERLAP_SANDBOX_SOCKET")) or os.path.exists(socket_path())


def normalize_gpu(gpu) -> str | list[str] | None:
    """None (no GPU), "all", or a list of device ids."""
    if gpu in (None, False, "", "none"):
        return None
    if gpu is True or gpu == "all":
        return "all"
    if isinstance(gpu, str):
        gpu = gpu.split(",")
    return [str(g).strip() for g in gpu if str(g).strip()]
