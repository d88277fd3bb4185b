"""Shared by the sandbox and security suites: which backends can run here, and checks
that nothing a run started is still alive afterwards."""

import json
import os
import time

import pytest

from runner.sandbox.run import get_backend

# The suites run on short limits so that attacks end quickly.
FAST = {"wall_s": 5, "memory_mib": 512, "processes": 64, "disk_mib": 16}


def backend_param(name: str):
    """A pytest param for one backend, with its marker; skipped (with the reason) when
    the backend cannot run on this machine."""
    marks = [getattr(pytest.mark, name)] if name in ("docker", "bwrap") else []
    return pytest.param(name, marks=marks, id=name)


def require(name: str) -> None:
    problem = get_backend(name).problem()
    if problem:
        pytest.skip(f"{name} sandbox unavailable: {problem}")


def program(body: str) -> str:
    """Candidate code that ends by printing its own result (the generic path)."""
    return "import json, os, sys, time\n" + body


def report(status="fail", verdict=None, **extra) -> str:
    """Code for a program's last line: print a result carrying `extra` as metrics.

    The result follows the contract (runner.contract), or the host would refuse it."""
    verdict = verdict or {"pass": "accepted", "fail": "wrong", "error": "internal_error"}[status]
    metrics = ", ".join(f"{k!r}: {v}" for k, v in extra.items())
    return (
        f"print(json.dumps({{'status': {status!r}, 'verdict': {verdict!r}, "
        f"'message': '', 'checks': [], 'metrics': {{{metrics}}}}}))\n"
    )


def host_processes_matching(marker: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(int(name))
    return found


def sandbox_containers() -> list:
    client = get_backend("docker").client()
    return client.api.containers(all=True, filters={"label": "org.overlap.sandbox"})


def wait_until(predicate, timeout_s: float = 45.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def assert_nothing_left(backend: str, marker: str | None = None) -> None:
    """No process, container, cgroup or run folder of a finished run survives it."""
    from runner.sandbox import cgroups
    from runner.sandbox.backends.base import runtime_root

    if marker:
        assert wait_until(lambda: not host_processes_matching(marker)), (
            f"processes still running: {host_processes_matching(marker)}"
        )
    if backend == "docker":
        assert wait_until(lambda: not sandbox_containers()), "a sandbox container survived"
    else:
        mine = str(os.getpid()) + "-"
        root = runtime_root()
        assert not [p for p in root.glob(mine + "*")] if root.exists() else True
        assert not [n for n in cgroups.leftover_names() if n.startswith(mine)]


def metrics(result: dict) -> dict:
    return result.get("metrics", {})


def dump(result: dict) -> str:
    return json.dumps(result, indent=1)[:3000]
