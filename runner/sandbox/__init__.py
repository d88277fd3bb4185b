"""Sandboxed execution of candidate code (see the Sandboxes section of runner/README.md).

    grade(exercise_dir, code, seeds=1, limits=None, backend="auto", gpu=None) -> dict
    run_script(code, ...) -> dict          the generic path: the code prints its result
    start_pool(backend="auto") / stop_pool()
    reap_leftovers()                       at worker start
    backend_problems()                     {backend: None | why it cannot run here}

Imports stay lazy: runner.sandbox.inside, which runs inside every sandbox, is part of
this package and must start without the host's dependencies (docker).
"""

_EXPORTS = {
    "grade": "runner.sandbox.run",
    "run_script": "runner.sandbox.run",
    "choose_backend": "runner.sandbox.choice",
    "backend_problems": "runner.sandbox.choice",
    "reap_leftovers": "runner.sandbox.run",
    "Limits": "runner.sandbox.limits",
    "SandboxUnavailable": "runner.sandbox.backends.base",
    "start_pool": "runner.sandbox.pool",
    "stop_pool": "runner.sandbox.pool",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(name)
