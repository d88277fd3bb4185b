"""Fork servers: one warm process that forks a fresh process for every run.

Both tracks run candidate code this way. The grader (trusted) starts the server once
(``python -m runner.candidate`` for simulated exercises, ``python -m runner.gpu.worker``
for GPU ones) with one end of a control socket; for every run it sends a ``fork``
request carrying one end of a new socket pair, and the server forks a child that becomes
that run's process and answers its pid. ``wait`` (or the server's own name for it) reaps
a child and answers how it ended.

Standard library only: the candidate's fork server imports this module, and never torch.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import socket
import subprocess
import sys
from collections.abc import Callable

from runner import privileges

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, value: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        _libc.prctl(option, value, 0, 0, 0)


def current_cpu() -> int | None:
    """The CPU this process runs on now (None where the C library cannot say)."""
    try:
        cpu = _libc.sched_getcpu()
    except AttributeError:
        return None
    return cpu if cpu >= 0 else None


@contextlib.contextmanager
def pinned(cpu: int | None):
    """Keep this process on ``cpu`` for a while, then give it back the CPUs it had.

    The grader and a run's process take turns (one asks, the other answers). On one CPU a
    round trip of the two costs a few microseconds of CPU; on two, every wake-up crosses
    CPUs and costs about ten times as much (runner/README.md, "Cost")."""
    previous = None
    if cpu is not None:
        try:
            previous = os.sched_getaffinity(0)
            os.sched_setaffinity(0, {cpu})
        except OSError:
            previous = None
    try:
        yield
    finally:
        if previous is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, previous)


ASK_TIMEOUT_S = 10.0  # a fork or a reap takes milliseconds; a stopped server never answers
SERVER_GONE = (
    "The program stopped or killed the process that starts the grader's runs (it shares "
    "the program's user): the run cannot be trusted."
)


class ServerGone(RuntimeError):
    """The fork server did not answer (killed, stopped, or its socket closed): it has been
    killed, and the next request starts a fresh one. A run's process shares the server's
    uid, so in a grading this is the candidate's doing, never the platform's fault."""


class Client:
    """The grader's side: starts the server and asks it for processes."""

    name = "fork server"

    def __init__(self, argv: list[str], env: dict[str, str], *, as_candidate: bool = False) -> None:
        prctl(PR_SET_DUMPABLE, 0)  # a run (same uid) cannot ptrace the grader or read its fds
        ours, theirs = socket.socketpair()
        # as_candidate: the server (so every run) under the candidate's own uid where this
        # process can switch users (runner.privileges): nothing trusted shares its uid.
        user = privileges.switch_user() if as_candidate else {}
        self.process = subprocess.Popen(
            [sys.executable, *argv, str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env=env,
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=None if os.environ.get("OVERLAP_DEBUG_CANDIDATE") else subprocess.DEVNULL,
            **user,
        )
        theirs.close()
        self.control = ours
        self.owner = os.getpid()

    def ask(self, request: dict, fds=()) -> dict:
        """One request, one answer, within ASK_TIMEOUT_S; ServerGone otherwise."""
        try:
            self.control.settimeout(ASK_TIMEOUT_S)
            socket.send_fds(self.control, [json.dumps(request).encode()], list(fds))
            data = self.control.recv(4096)
        except OSError as exc:  # timeout, broken pipe, reset
            self.kill()
            raise ServerGone(f"the {self.name} did not answer ({type(exc).__name__})") from None
        if not data:
            self.kill()
            raise ServerGone(f"the {self.name} stopped")
        try:
            return json.loads(data)
        except ValueError:
            self.kill()
            raise ServerGone(f"the {self.name} sent garbage") from None

    def kill(self) -> None:
        """End the server for good (a stopped one too): the next request starts anew."""
        with contextlib.suppress(OSError):
            self.control.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.process.pid, signal.SIGKILL)
        if self.owner == os.getpid():
            with contextlib.suppress(Exception):
                self.process.wait(timeout=5)

    def fork(self, limits: dict) -> tuple[int, socket.socket]:
        """A fresh process for one run: its pid, and our end of its socket. The run gets
        this process's resource limits too (the server may have been started by another
        process with other limits: a pooled sandbox's first process, see runner.sim.host)."""
        ours, theirs = socket.socketpair()
        request = {"op": "fork", "limits": {**limits, "rlimits": own_rlimits()}}
        try:
            pid = self.ask(request, [theirs.fileno()])["pid"]
        finally:
            theirs.close()
        return pid, ours

    def clone(self) -> Client:
        """A twin of this server, forked from it (warm, ~1 ms): for a second grader process
        (runner.sim.parallel), which cannot share this one's control socket. The twin is this
        server's child: it ends when its control socket closes, and ``reap`` reaps it."""
        ours, theirs = socket.socketpair()
        try:
            pid = self.ask({"op": "clone"}, [theirs.fileno()])["pid"]
        finally:
            theirs.close()
        twin = object.__new__(type(self))
        twin.control = ours
        twin.process = _Twin(pid)
        twin.owner = None  # not our child: alive() asks /proc
        return twin

    def alive(self) -> bool:
        if self.control.fileno() < 0:
            return False  # closed by kill()
        if self.owner == os.getpid() and self.process.poll() is not None:
            return False
        # Also a server inherited across a fork (not our child: poll() cannot ask about
        # it), and one a run stopped (SIGSTOP): it would never answer.
        if not running(self.process.pid) or _state(self.process.pid) in ("T", "t"):
            self.kill()
            return False
        return True

    def close(self, timeout: float = 2.0) -> None:
        with contextlib.suppress(OSError):
            self.control.close()
        with contextlib.suppress(Exception):
            self.process.wait(timeout=timeout)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return "X"


def running(pid: int) -> bool:
    """Whether ``pid`` is alive: neither gone nor a zombie waiting for its parent's reap
    (/proc: works for processes that are not our children)."""
    return _state(pid) not in ("Z", "X")


class _Twin:
    """The process of a cloned server, as far as a Client needs one (its parent server,
    not us, reaps it)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def poll(self) -> int | None:
        return None

    def wait(self, timeout: float | None = None) -> int | None:
        return None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGKILL)


RLIMITS = ("AS", "CORE", "FSIZE", "NOFILE", "NPROC")


def own_rlimits() -> dict[str, list[int]]:
    return {name: list(resource.getrlimit(getattr(resource, "RLIMIT_" + name))) for name in RLIMITS}


def lower_rlimits(wanted) -> None:
    """Take the limits a fork request carries where they are lower than ours (never raise
    one: a run can only be held tighter than its grader)."""
    if not isinstance(wanted, dict):
        return
    for name in RLIMITS:
        pair = wanted.get(name)
        if not (isinstance(pair, list) and len(pair) == 2 and all(type(v) is int for v in pair)):
            continue
        res = getattr(resource, "RLIMIT_" + name)
        soft, hard = resource.getrlimit(res)
        hard = _lower(hard, pair[1])
        soft = _lower(soft, pair[0])
        if hard >= 0 and (soft < 0 or soft > hard):
            soft = hard
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(res, (soft, hard))


def _lower(current: int, wanted: int) -> int:
    """The lower of two limits, where a negative one (RLIM_INFINITY) is no limit."""
    if wanted < 0:
        return current
    return wanted if current < 0 else min(current, wanted)


def confine(
    sock: socket.socket,
    cpu_s: int,
    *,
    keep_stderr: bool = False,
    cpu: int | None = None,
    rlimits: dict | None = None,
) -> None:
    """A run's process, first thing after the fork: its own session (killed as one),
    death with the server, the OOM killer's first choice, a CPU-time limit (a program
    that stops yielding is killed by the kernel, whatever the host's load), /dev/null
    for the standard streams and no descriptor but ``sock``; on ``cpu`` (the grader's,
    see :func:`pinned`) when given."""
    os.setsid()
    if type(cpu) is int:
        with contextlib.suppress(OSError, ValueError):
            os.sched_setaffinity(0, {cpu})
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")
    lower_rlimits(rlimits)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1) if keep_stderr else (0, 1, 2):
        os.dup2(devnull, fd)
    close_descriptors(keep=sock.fileno())


def close_descriptors(keep: int | None = None) -> None:
    """Close every descriptor above the standard streams, but ``keep``."""
    if keep is None:
        os.closerange(3, 1 << 16)
        return
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)


def kill_session(pid: int) -> None:
    """Kill a run's process and its whole session (see :func:`confine`)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def children(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
                if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                    found.append(int(entry))
    return found


def kill_strays(keep: set[int] = frozenset()) -> int:
    """Kill and reap this subreaper's children but ``keep``: what runs left behind in
    other sessions (a double-forked ``setsid`` daemon is reparented here when its parent
    ends). Repeated until none is left: a stray's own children come here as it dies."""
    killed = 0
    for _ in range(50):
        strays = [pid for pid in children(os.getpid()) if pid not in keep]
        if not strays:
            break
        for stray in strays:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(stray, signal.SIGKILL)
        for stray in strays:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(stray, 0)
        killed += len(strays)
    return killed


def serve(
    control: socket.socket,
    child: Callable[[socket.socket, dict], None],
    waiters: dict[str, Callable[[int], dict]],
    *,
    subreaper: bool = False,
) -> None:
    """The server's loop: ``fork`` runs ``child(sock, limits)`` in a new process (which
    never comes back here); each name in ``waiters`` answers ``waiter(pid)``. Returns when
    the grader closes the control socket or sends anything else.

    ``subreaper``: this server (and each twin) adopts whatever its runs leave behind, and
    after each waiter kills every child that is neither a run still going nor a twin: no
    process a run started outlives it, whatever session or group it moved to."""
    runs: set[int] = set()
    twins: set[int] = set()
    if subreaper:
        prctl(PR_SET_CHILD_SUBREAPER, 1)
    try:
        _serve(control, child, waiters, runs, twins, subreaper)
    finally:
        if subreaper:
            kill_strays(keep=twins)


def _serve(control, child, waiters, runs: set[int], twins: set[int], subreaper: bool) -> None:
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, 65536, 1)
        except OSError:
            return
        if not data:
            return
        request = json.loads(data)
        op = request.get("op")
        if op == "fork" and fds:
            sock = socket.socket(fileno=fds[0])
            pid = os.fork()
            if pid == 0:
                try:
                    control.close()
                    child(sock, request.get("limits", {}))
                finally:
                    os._exit(70)  # never back into this loop, whatever happened
            sock.close()
            runs.add(pid)
            control.sendall(json.dumps({"pid": pid}).encode())
        elif op == "clone" and fds:  # a twin server on its own control socket
            twin = socket.socket(fileno=fds[0])
            pid = os.fork()
            if pid == 0:
                try:
                    control.close()
                    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
                    serve(twin, child, waiters, subreaper=subreaper)
                finally:
                    os._exit(0)
            twin.close()
            twins.add(pid)
            control.sendall(json.dumps({"pid": pid}).encode())
        elif op in waiters:
            for fd in fds:
                os.close(fd)
            pid = int(request["pid"])
            answer = waiters[op](pid)
            runs.discard(pid)
            if subreaper:
                kill_strays(keep=runs | twins)
            control.sendall(json.dumps(answer).encode())
        else:
            return


def wait_status(pid: int) -> dict:
    """Reap one child: its exit code or the signal that ended it."""
    try:
        _pid, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return {"exit": None, "signal": None}
    return {
        "exit": os.waitstatus_to_exitcode(status),
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
    }
