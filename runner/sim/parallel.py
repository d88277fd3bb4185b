"""Grading on two CPUs: a helper grader takes every other run of a grading's plan.

The runs of a grading are independent: each builds a fresh cluster, forks a fresh
candidate process and draws from its own seed. Where the grader may use a second CPU
(the affinity it was given and its cgroup's CPU quota both allow one), it forks a helper
once the baselines are done. The helper pins itself to the other CPU, runs the plan's
odd-numbered runs, each with a candidate process from a twin of the candidate fork
server (``forkserver.Client.clone``), checks them, and sends back what the result needs
of each run: its failure (with its trace), or its checks. The grader runs the
even-numbered ones, the timed run first.

The result document is the one a serial grading gives: reports merge in plan order, the
first failure in plan order wins (each side stops at its own first failure, so every run
before the winning one was made), and that run's number fixes the ``runs`` reported.
A helper that dies without a report costs time, not the verdict: the grader makes its
runs itself.

Both processes are the trusted grader: the helper is a fork of it and never runs
candidate code (its runs' candidate processes are as isolated as the grader's).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from runner import forkserver
from runner.contract import Check
from runner.harness import Failure, InternalError
from runner.sim import host

MAX_PROCESSES = 2
MIN_RUNS = 4  # fewer runs than this are not worth a second process


@dataclass
class Report:
    """What the result needs of one run (made here or by the helper)."""

    index: int
    failure: Failure | None = None
    checks: list[Check] | None = None
    checks_error: str | None = None  # the exercise's checks crashed on this run
    trace: dict | None = None  # the failing run's (partial) trace
    makespan: float | None = None  # simulated seconds (every run's speedup is held to the target)

    def to_json(self) -> dict:
        return {
            "index": self.index,
            "failure": asdict(self.failure) if self.failure is not None else None,
            "checks": [asdict(c) for c in self.checks] if self.checks is not None else None,
            "checks_error": self.checks_error,
            "trace": self.trace,
            "makespan": self.makespan,
        }

    @classmethod
    def from_json(cls, data: dict) -> Report:
        failure = data.get("failure")
        checks = data.get("checks")
        return cls(
            index=int(data["index"]),
            failure=Failure(**failure) if failure is not None else None,
            checks=[Check(**c) for c in checks] if checks is not None else None,
            checks_error=data.get("checks_error"),
            trace=data.get("trace"),
            makespan=data.get("makespan"),
        )


# -- how many CPUs a grading may use ---------------------------------------------------


def grading_cpus() -> list[int]:
    """The CPUs a grading may spread over (one or two), the current one first.

    ``OVERLAP_GRADING_PROCESSES=1`` keeps gradings serial."""
    try:
        wanted = int(os.environ.get("OVERLAP_GRADING_PROCESSES", MAX_PROCESSES))
    except ValueError:
        wanted = MAX_PROCESSES
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except OSError:
        return []
    quota = cgroup_cpu_quota()
    count = min(wanted, MAX_PROCESSES, len(allowed))
    if quota is not None:
        count = min(count, math.floor(quota + 1e-9))
    if count < 2:
        return allowed[:1]
    current = forkserver.current_cpu()
    first = current if current in allowed else allowed[0]
    return [first, *[cpu for cpu in allowed if cpu != first][: count - 1]]


def cgroup_cpu_quota() -> float | None:
    """The tightest CPU quota (in cores) on this process's cgroup and its ancestors
    (cgroup v2 ``cpu.max``; a container sees its own as the root); None: no quota."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    path = next((line[3:] for line in lines if line.startswith("0::")), None)
    if path is None:
        return None
    root = Path("/sys/fs/cgroup")
    folder = root / path.lstrip("/")
    tightest = None
    while True:
        with contextlib.suppress(OSError, ValueError, IndexError):
            quota, period = (folder / "cpu.max").read_text().split()[:2]
            if quota != "max":
                cores = int(quota) / int(period)
                tightest = cores if tightest is None else min(tightest, cores)
        if folder == root or root not in folder.parents:
            return tightest
        folder = folder.parent


# -- running a plan ----------------------------------------------------------------------


def run_plan(
    count: int,
    run: Callable[[int], Any],
    report: Callable[[int, Any], Report],
    failed: Callable[[Any], bool],
) -> tuple[dict[int, Any], dict[int, Report]]:
    """Make runs ``0..count-1``, stopping at the first failure in plan order.

    ``run(i)`` makes run ``i`` here; ``report(i, run)`` is what the helper sends back of
    one; ``failed(run)`` says whether it failed. Returns the runs made here and the
    helper's reports, by index: every index up to the first failure (or all) is in one
    of the two."""
    cpus = grading_cpus() if count >= MIN_RUNS else []
    if len(cpus) < 2:
        return _serial(range(count), run, failed), {}
    server = host.fork_server()
    twin = server.clone()
    reader, writer = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the helper: never returns into the caller's stack
        code = 70
        try:
            reader.close()
            server.control.close()
            code = _helper(twin, writer, cpus[1], range(1, count, 2), run, report, failed)
        finally:
            os._exit(code)
    writer.close()
    twin.control.close()
    try:
        with forkserver.pinned(cpus[0]):
            local = _serial(range(0, count, 2), run, failed)
        remote = _receive(reader)
    finally:
        reader.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        with contextlib.suppress(Exception):
            server.ask({"op": "wait", "pid": twin.process.pid})
    if remote is None:  # the helper died without a report: make its runs here
        stop = first_failure(local, {}, failed)
        missing = [i for i in range(1, count, 2) if stop is None or i < stop]
        local.update(_serial(missing, run, failed))
        return local, {}
    return local, remote


def _serial(indices, run, failed) -> dict[int, Any]:
    made = {}
    for index in indices:
        made[index] = run(index)
        if failed(made[index]):
            break
    return made


def first_failure(local: dict, remote: dict[int, Report], failed) -> int | None:
    """The first run in plan order that failed, here or in the helper (None: none)."""
    indices = [i for i, r in local.items() if failed(r)]
    indices += [i for i, r in remote.items() if r.failure is not None]
    return min(indices, default=None)


def _helper(twin, writer: socket.socket, cpu: int, indices, run, report, failed) -> int:
    forkserver.prctl(forkserver.PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the grader
    host.use_fork_server(twin)
    host.STATS.clear()  # the helper's own runs only (the grader counted the rest)
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, {cpu})
    try:
        reports = []
        for index in indices:
            made = run(index)
            reports.append(report(index, made).to_json())
            if failed(made):
                break
        message = {"reports": reports, "stats": dict(host.STATS)}
    except InternalError as exc:
        message = {"internal": str(exc)}
    data = json.dumps(message).encode()
    writer.sendall(len(data).to_bytes(8, "big") + data)
    writer.close()
    return 0


def _receive(reader: socket.socket) -> dict[int, Report] | None:
    chunks = []
    while True:
        chunk = reader.recv(1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    data = b"".join(chunks)
    if len(data) < 8 or int.from_bytes(data[:8], "big") != len(data) - 8:
        return None
    message = json.loads(data[8:])
    if "internal" in message:
        raise InternalError(message["internal"])
    for key, value in message.get("stats", {}).items():
        host.STATS[key] += value
    return {r["index"]: Report.from_json(r) for r in message["reports"]}
