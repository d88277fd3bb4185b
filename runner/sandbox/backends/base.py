"""What every backend provides, and the pieces the subprocess-based ones share."""

import contextlib
import json
import os
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from functools import cache
from pathlib import Path

from runner.sandbox.job import Job
from runner.sandbox.limits import Limits
from runner.sandbox.result import RawRun

RUNNER_PARENT = Path(__file__).resolve().parents[3]  # the folder holding runner/
SANDBOX_UID = 10001  # the image's `sandbox` user; bwrap maps the run to the same id
# Started once per sandbox; the path entry is where the runner package is seen inside.
BOOT = (
    "import sys; sys.path[:] = [{parent!r}] + [p for p in sys.path if p]; "
    "from runner.sandbox.inside import main; sys.exit(main(sys.argv[1:]))"
)
# Not -I: that implies -E, and the engine needs PYTHONHASHSEED=0 from the environment
# (the environment is entirely ours anyway). -s: no user site-packages.
PYTHON_FLAGS = ("-s",)
DIAG_BYTES = 8192
READY_LINE = b"ready\n"


class SandboxUnavailable(RuntimeError):
    """The requested backend cannot run here (and why)."""


def owner_id() -> str:
    """The host (or container) whose processes start these sandboxes: a reaper judges only
    sandboxes of its own owner, whose processes it can see (OVERLAP_SANDBOX_OWNER, default
    the hostname; must differ between machines or containers sharing one engine)."""
    configured = os.environ.get("OVERLAP_SANDBOX_OWNER")
    if configured:
        return configured
    # A worker in a container sees its own process ids: its pid namespace is part of who
    # it is, so a reaper never judges another namespace's pids (a container on the host
    # network has the host's name).
    try:
        namespace = os.readlink("/proc/self/ns/pid").partition("[")[2].rstrip("]")
    except OSError:
        namespace = ""
    return f"{socket.gethostname()}/{namespace}" if namespace else socket.gethostname()


def process_start(pid: int) -> str:
    """When process `pid` started (clock ticks since boot, /proc/<pid>/stat field 22), so a
    reused pid is never mistaken for the process that started a sandbox; "" if unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return ""
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else ""


def process_token() -> str:
    """This process, uniquely on this host: "<pid>:<start ticks>"."""
    pid = os.getpid()
    return f"{pid}:{process_start(pid)}"


def token_alive(token: str) -> bool:
    """Is the process a sandbox label names ("<pid>:<start>") still running here?"""
    pid_text, _, start = token.partition(":")
    if not pid_text.isdigit() or not pid_alive(int(pid_text)):
        return False
    now = process_start(int(pid_text))
    return not start or not now or now == start


def preload_modules() -> str:
    """What a pooled sandbox imports while it waits: torch and the grading engine (both
    tracks; importing the simulated one alone costs ~70 ms, the click's to pay otherwise)."""
    return os.environ.get(
        "OVERLAP_SANDBOX_PRELOAD", "torch,runner.cli,runner.sim.grading,runner.gpu.grading"
    )


def child_env(limits: Limits, tmp_dir: str, runner_parent: str) -> dict[str, str]:
    """The whole environment of the graded program: nothing inherited from the worker.

    PYTHONHASHSEED=0 is what the engine wants (a fixed set order); a sandbox's first
    process starts with it, so the engine never needs to re-exec (and re-import torch)."""
    threads = str(max(1, int(limits.cpus)))
    return {
        "PYTHONHASHSEED": "0",
        "PYTHONPATH": runner_parent,
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": tmp_dir,
        "TMPDIR": tmp_dir,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
    }


class Sandbox(ABC):
    """One started sandbox. It runs one job, then is destroyed — or, pooled docker
    sandboxes, goes back to its pool when its report says it was reset for another."""

    backend: str
    pooled = False
    pool = None  # the WarmPool it came from, told when the run has ended
    served = 0  # jobs it has run
    serving = False  # set by run(): it takes another job (only pooled docker sandboxes)

    @abstractmethod
    def run(self, job: Job, deadline: float) -> RawRun:
        """Send the job, collect the report; `deadline` is a time.monotonic() value."""

    @abstractmethod
    def destroy(self, *, wait: bool = False) -> None:
        """Kill whatever is left and free everything; safe to call twice. ``wait``: free it
        all before returning, even what could be freed later (at shutdown, when this
        process may be gone before later comes)."""

    def wait_ready(self, timeout_s: float) -> bool:
        """For the pool: True once the sandbox has started and preloaded its modules."""
        return True

    def alive(self) -> bool:
        """For the pool: False when the sandbox is known to have ended while idle."""
        return True

    @abstractmethod
    def prepare(self, job: Job) -> None:
        """Adjust a job to this sandbox (paths, environment, rlimits) before it is sent."""


class Backend(ABC):
    name: str
    isolated = True

    @abstractmethod
    def problem(self) -> str | None:
        """None when the backend can run here, else why not."""

    @abstractmethod
    def start(self, limits: Limits, gpu=None, *, preload: bool = False) -> Sandbox:
        """Start a sandbox for one run; with `preload`, it imports torch before its job."""

    def reap(self) -> int:
        """Remove leftovers of earlier sandboxes (after a crash); returns how many."""
        return 0


def runtime_root() -> Path:
    configured = os.environ.get("OVERLAP_SANDBOX_RUNTIME")
    if configured:
        return Path(configured)
    if os.geteuid() == 0 and os.path.isdir("/run"):
        return Path("/run/overlap-sandbox")
    return Path(tempfile.gettempdir()) / f"overlap-sandbox-{os.geteuid()}"


def new_run_dir() -> Path:
    """A private folder for one sandbox, named after this process so the reaper can tell
    whose it is."""
    root = runtime_root()
    root.mkdir(mode=0o711, parents=True, exist_ok=True)
    path = root / f"{os.getpid()}-{secrets.token_hex(6)}"
    path.mkdir(mode=0o711)
    return path


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@cache
def interpreter_layout(python: str) -> dict:
    """Where an interpreter's files live (prefixes), asked of the interpreter itself."""
    code = "import sys, json; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix]))"
    out = subprocess.run(
        [python, "-I", "-c", code], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    prefixes = json.loads(out)
    return {"executable": python, "prefixes": sorted({os.path.realpath(p) for p in prefixes})}


def sandbox_python() -> str:
    """The interpreter bwrap and process sandboxes run: one with the runner's requirements
    (torch). The platform may run on another Python than the runner (see the Makefile)."""
    for variable in ("OVERLAP_SANDBOX_PYTHON", "OVERLAP_RUNNER_PYTHON"):
        if os.environ.get(variable):
            return os.environ[variable]
    local = RUNNER_PARENT / ".venv-runner" / "bin" / "python"
    return str(local) if local.exists() else sys.executable


class SubprocessSandbox(Sandbox):
    """A sandbox whose first process is a child of this one (bwrap and process backends)."""

    def __init__(self, backend: str, argv, env, run_dir: Path, cgroup=None, cleanups=()):
        self.backend = backend
        self.run_dir = run_dir
        self.cgroup = cgroup
        self.cleanups = list(cleanups)
        self.proc: subprocess.Popen | None = None
        self.argv = argv
        self.env = env
        self._stderr_head = b""
        self._destroyed = False

    def spawn(self, pass_fds=()) -> None:
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            cwd=self.run_dir,
            start_new_session=True,
            close_fds=True,
            pass_fds=pass_fds,
        )

    def wait_ready(self, timeout_s: float) -> bool:
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        fd = self.proc.stderr.fileno()
        while READY_LINE not in self._stderr_head:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.proc.poll() is not None:
                return False
            ready = selectors.DefaultSelector()
            ready.register(fd, selectors.EVENT_READ)
            if ready.select(remaining):
                chunk = os.read(fd, 4096)
                if not chunk:
                    return False
                self._stderr_head += chunk
            ready.close()
        self._stderr_head = self._stderr_head.replace(READY_LINE, b"", 1)
        return True

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def run(self, job: Job, deadline: float) -> RawRun:
        assert self.proc is not None
        out, err, timed_out, truncated = pump(
            self.proc, job.payload(), deadline, job.envelope_cap()
        )
        if timed_out or truncated:
            self._kill()
        try:
            status = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill()
            status = self.proc.wait()
        raw = RawRun(
            stdout=out,
            stderr=(self._stderr_head + err)[-DIAG_BYTES:],
            exit_status=status,
            host_timeout=timed_out,
            truncated=truncated,
        )
        if self.cgroup is not None:
            raw.oom_killed = self.cgroup.oom_kills() > 0
            raw.pids_max_events = self.cgroup.pids_max_events()
        return raw

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill_all()

    def destroy(self, *, wait: bool = False) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        self._kill()
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                with contextlib.suppress(OSError):
                    stream.close()
        if self.cgroup is not None:
            self.cgroup.remove()
        for cleanup in self.cleanups:
            with contextlib.suppress(OSError):
                cleanup()
        shutil.rmtree(self.run_dir, ignore_errors=True)


def pump(proc: subprocess.Popen, payload: bytes, deadline: float, cap: int):
    """Write the job to the process's stdin; read its stdout (up to `cap`) and the tail of
    its stderr until both close or the deadline passes."""
    sel = selectors.DefaultSelector()
    stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr
    os.set_blocking(stdin.fileno(), False)
    sel.register(stdin.fileno(), selectors.EVENT_WRITE, "in")
    sel.register(stdout.fileno(), selectors.EVENT_READ, "out")
    sel.register(stderr.fileno(), selectors.EVENT_READ, "err")
    view = memoryview(payload)
    out = bytearray()
    err = bytearray()
    timed_out = truncated = False
    open_reads = 2
    try:
        while open_reads and not out.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in sel.select(min(remaining, 1.0)):
                if key.data == "in":
                    try:
                        view = view[os.write(key.fd, view[:65536]) :]
                    except (BrokenPipeError, OSError):
                        view = view[len(view) :]
                    if not view:
                        sel.unregister(key.fd)
                        stdin.close()
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                    open_reads -= 1
                elif key.data == "out":
                    out += chunk
                    if len(out) > cap:
                        truncated = True
                        return bytes(out[:cap]), bytes(err), timed_out, truncated
                    if out.endswith(b"\n"):
                        break  # the report is one line: complete, the sandbox is ending
                else:
                    err = (err + chunk)[-DIAG_BYTES:]
    finally:
        sel.close()
        if not stdin.closed:
            with contextlib.suppress(OSError):
                stdin.close()
    return bytes(out), bytes(err), timed_out, truncated
